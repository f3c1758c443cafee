/* The write path a file-system monitor taxes, timed by the writer itself (page cache only,
 * no fsync). Prints "<wall ns per operation> <CPU ns per operation>"; the CPU figure
 * includes the kernel's fsnotify hooks, which run in the writer's context.
 *
 *   write_loop FILE COUNT BS SPAN     COUNT pwrite(2)s of BS bytes cycling over SPAN bytes
 *   write_loop --churn DIR COUNT BS   COUNT times: create DIR/journal, write BS bytes,
 *                                     close, unlink (a rollback journal's life, as SQLite
 *                                     does it per transaction) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int churn(const char *dir, long count, long bs) {
    char path[4096];
    snprintf(path, sizeof path, "%s/journal", dir);
    char *buf = malloc(bs);
    memset(buf, 'j', bs);
    double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < count; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { perror(path); return 1; }
        if (write(fd, buf, bs) != bs) { perror("write"); return 1; }
        close(fd);
        if (unlink(path) < 0) { perror("unlink"); return 1; }
    }
    double w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    printf("%.1f %.1f\n", (w1 - w0) / count, (c1 - c0) / count);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--churn") == 0) {
        long count = atol(argv[3]), bs = atol(argv[4]);
        if (count <= 0 || bs <= 0) {
            fprintf(stderr, "%s: COUNT and BS must be > 0\n", argv[0]);
            return 2;
        }
        return churn(argv[2], count, bs);
    }
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE COUNT BS SPAN | --churn DIR COUNT BS\n", argv[0]);
        return 2;
    }
    long count = atol(argv[2]), bs = atol(argv[3]), span = atol(argv[4]);
    if (count <= 0 || bs <= 0 || span < bs) {
        fprintf(stderr, "%s: COUNT and BS must be > 0 and SPAN >= BS\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_WRONLY | O_CREAT, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    char *buf = malloc(bs);
    memset(buf, 'w', bs);
    long slots = span / bs;
    double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < count; i++) {
        if (pwrite(fd, buf, bs, (i % slots) * bs) != bs) { perror("pwrite"); return 1; }
    }
    double w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    printf("%.1f %.1f\n", (w1 - w0) / count, (c1 - c0) / count);
    close(fd);
    return 0;
}
