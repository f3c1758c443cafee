/* What a fanotify group costs each write(2) on a file system it marks, by what it asks for.
 * In one process, ROUNDS times: COUNT buffered 4 KiB pwrite(2)s to FILE timed by CPU clock
 * with no group, then under each group below (created, measured, closed), then no group
 * again. Events are never read: an unread queue merges them, as a slow reader would.
 * Prints the median extra CPU ns per write over the mean of the two group-less runs.
 *
 *   cc -O2 -o /tmp/fanotify_write_cost bench/fanotify_write_cost.c
 *   /tmp/fanotify_write_cost MOUNTPOINT MOUNTPOINT/file 500000 10      (root) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <time.h>
#include <unistd.h>

#include "fanotify_rounds.h"

#define SETUPS 5
static const char *const names[SETUPS] = {
    "FAN_MODIFY on the file system, FAN_REPORT_DFID_NAME",
    "the same, this file's FAN_MODIFY ignored (inode ignore mark)",
    "FAN_MODIFY on the file system, FAN_REPORT_FID",
    "the same, this file's FAN_MODIFY ignored (inode ignore mark)",
    "no FAN_MODIFY on the file system (FAN_OPEN, create, delete), DFID_NAME",
};

static int fd;
static long n;
static const char *mnt, *file;

static double write_loop(void) {
    static char b[4096];
    memset(b, 1, sizeof b);
    double c0 = cpu_ns();
    for (long i = 0; i < n; i++)
        if (pwrite(fd, b, sizeof b, (i % 16384) * 4096) != sizeof b) { perror("pwrite"); exit(1); }
    return (cpu_ns() - c0) / n;
}

static int group(int setup) {
    unsigned report = (setup == 2 || setup == 3) ? FAN_REPORT_FID : FAN_REPORT_DFID_NAME;
    int g = fanotify_init(FAN_CLASS_NOTIF | FAN_NONBLOCK | report, O_RDONLY);
    if (g < 0) { perror("fanotify_init"); exit(1); }
    unsigned long long mask = setup == 4 ? FAN_OPEN | FAN_CREATE | FAN_DELETE
                                         : FAN_MODIFY | FAN_CREATE | FAN_DELETE;
    if (fanotify_mark(g, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, mask, AT_FDCWD, mnt) < 0) {
        perror("fanotify_mark"); exit(1);
    }
    if ((setup == 1 || setup == 3) &&
        fanotify_mark(g, FAN_MARK_ADD | FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY,
                      FAN_MODIFY, AT_FDCWD, file) < 0) {
        perror("fanotify_mark ignore"); exit(1);
    }
    return g;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MOUNTPOINT FILE COUNT ROUNDS\n", argv[0]);
        return 2;
    }
    n = atol(argv[3]);
    int rounds = atoi(argv[4]);
    if (n <= 0 || rounds <= 0 || rounds > 1000) {
        fprintf(stderr, "%s: COUNT must be > 0 and ROUNDS 1..1000\n", argv[0]);
        return 2;
    }
    mnt = argv[1];
    file = argv[2];
    fd = open(file, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) { perror(file); return 1; }
    char what[64];
    snprintf(what, sizeof what, "%ld buffered 4 KiB pwrite(2)s", n);
    fanotify_rounds(rounds, SETUPS, names, what, write_loop, group);
    return 0;
}
