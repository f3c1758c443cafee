/* What a fanotify group costs a journal's life (create + 4 KiB write + close + unlink, as
 * SQLite's rollback journal per transaction) on a file system it marks, by what it asks
 * for. In one process, ROUNDS times: COUNT cycles in DIR timed by CPU clock with no group,
 * then under each group below (created, measured, closed), then no group again. Events are
 * never read: an unread queue merges them (the three events of one cycle name the same
 * directory and name, so they merge into one), as fragkit's queue read every 100 ms does.
 * Prints the median extra CPU ns per cycle over the mean of the two group-less runs.
 *
 *   cc -O2 -o /tmp/fanotify_churn_cost bench/fanotify_churn_cost.c
 *   /tmp/fanotify_churn_cost MOUNTPOINT DIR 100000 10      (root; DIR on MOUNTPOINT)
 *   /tmp/fanotify_churn_cost MOUNTPOINT DIR 100000 1 S     only setup S (-1: none), for
 *                                                          perf record
 *   /tmp/fanotify_churn_cost --hold MOUNTPOINT             hold setup 0's group (never read)
 *                                                          until killed: the kernel's own
 *                                                          charge for fragkit's mark, the
 *                                                          floor in bench/watch-write-cost.sh
 *
 * Setup 0 is fragkit's file-system mark (MASK and FAN_REPORT_DFID_NAME in
 * src/watch/fanotify.rs); keep the two in step. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <time.h>
#include <unistd.h>

#include "fanotify_rounds.h"

#ifndef FAN_MARK_IGNORE
#define FAN_MARK_IGNORE 0x00000400
#endif

#define SETUPS 8
static const char *const names[SETUPS] = {
    "fs: OPEN|CREATE|DELETE|RENAME|ONDIR, DFID_NAME (fragkit's mark)",
    "fs: OPEN|DELETE|RENAME|ONDIR, DFID_NAME (no FAN_CREATE)",
    "fs: the same + FAN_CREATE, file creates ignored on the fs (FAN_MARK_IGNORE, no FAN_ONDIR)",
    "fs: CREATE|DELETE|RENAME|ONDIR, DFID_NAME (no FAN_OPEN)",
    "fs: OPEN, DFID_NAME (FAN_OPEN alone)",
    "fs: DELETE|RENAME|ONDIR, DFID_NAME",
    "setup 0 + DIR ignores OPEN|CREATE|DELETE|RENAME on itself and children (FAN_MARK_IGNORE)",
    "fs: OPEN|CREATE|DELETE|ONDIR, FAN_REPORT_FID (no names: no merging)",
};

static long n;
static const char *mnt, *dir;

static double churn(void) {
    static char b[4096];
    char path[4096];
    memset(b, 'j', sizeof b);
    snprintf(path, sizeof path, "%s/journal", dir);
    double c0 = cpu_ns();
    for (long i = 0; i < n; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { perror(path); exit(1); }
        if (write(fd, b, sizeof b) != sizeof b) { perror("write"); exit(1); }
        close(fd);
        if (unlink(path) < 0) { perror("unlink"); exit(1); }
    }
    return (cpu_ns() - c0) / n;
}

static void mark(int g, unsigned flags, unsigned long long mask, const char *path) {
    if (fanotify_mark(g, flags, mask, AT_FDCWD, path) < 0) {
        perror(path);
        exit(1);
    }
}

static int group(int setup) {
    unsigned report = setup == 7 ? FAN_REPORT_FID : FAN_REPORT_DFID_NAME;
    int g = fanotify_init(FAN_CLASS_NOTIF | FAN_NONBLOCK | report, O_RDONLY);
    if (g < 0) { perror("fanotify_init"); exit(1); }
    unsigned long long d = FAN_DELETE | FAN_RENAME | FAN_ONDIR;
    unsigned long long masks[SETUPS] = {
        FAN_OPEN | FAN_CREATE | d, FAN_OPEN | d,        FAN_OPEN | FAN_CREATE | d,
        FAN_CREATE | d,            FAN_OPEN,            d,
        FAN_OPEN | FAN_CREATE | d, (FAN_OPEN | FAN_CREATE | d) & ~FAN_RENAME,
    };
    mark(g, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, masks[setup], mnt);
    if (setup == 2)
        mark(g, FAN_MARK_ADD | FAN_MARK_FILESYSTEM | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY,
             FAN_CREATE, mnt);
    if (setup == 6)
        mark(g, FAN_MARK_ADD | FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY,
             FAN_OPEN | FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_EVENT_ON_CHILD, dir);
    return g;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--hold") == 0) {
        mnt = dir = argv[2];
        int g = group(0);
        pause();
        close(g);
        return 0;
    }
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s MOUNTPOINT DIR COUNT ROUNDS [SETUP] | --hold MOUNTPOINT\n", argv[0]);
        return 2;
    }
    mnt = argv[1];
    dir = argv[2];
    n = atol(argv[3]);
    int rounds = atoi(argv[4]);
    if (n <= 0 || rounds <= 0 || rounds > 1000) {
        fprintf(stderr, "%s: COUNT must be > 0 and ROUNDS 1..1000\n", argv[0]);
        return 2;
    }
    if (argc == 6) { /* one setup alone, for a profiler */
        int s = atoi(argv[5]);
        if (s < -1 || s >= SETUPS) { fprintf(stderr, "%s: SETUP must be -1..%d\n", argv[0], SETUPS - 1); return 2; }
        int g = s < 0 ? -1 : group(s);
        printf("%.0f ns per cycle\n", churn());
        if (g >= 0) close(g);
        return 0;
    }
    char what[96];
    snprintf(what, sizeof what, "%ld cycles (create, write 4 KiB, close, unlink)", n);
    fanotify_rounds(rounds, SETUPS, names, what, churn, group);
    return 0;
}
