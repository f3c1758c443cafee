/* The write path a file-system monitor taxes: COUNT buffered pwrite(2)s of BS bytes,
 * cycling over the first SPAN bytes of FILE (page cache only, no fsync), timed by the
 * writer itself. Prints "<wall ns per write> <CPU ns per write>"; the CPU figure includes
 * the kernel's fsnotify hooks, which run in the writer's context. */
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

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE COUNT BS SPAN\n", argv[0]);
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
