/* Shared by bench/fanotify_write_cost.c and bench/fanotify_churn_cost.c: ROUNDS times, the
 * operation loop with no fanotify group, then under each setup's group (made, measured,
 * closed), then with no group again; prints the median extra CPU ns per operation over
 * the mean of the two group-less runs, with min..max. Events are never read: an unread
 * queue merges them, as a slow reader would. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* loop(): CPU ns per operation of one timed run; group(s): a fresh group for setup s. */
static void fanotify_rounds(int rounds, int setups, const char *const *names, const char *what,
                            double (*loop)(void), int (*group)(int)) {
    double *extra = calloc((size_t)rounds * setups, sizeof *extra), *base = calloc(rounds, sizeof *base);
    double *with = calloc(setups, sizeof *with);
    if (!extra || !base || !with) { perror("calloc"); exit(1); }
    for (int r = 0; r < rounds; r++) {
        double before = loop();
        for (int s = 0; s < setups; s++) {
            int g = group(s);
            with[s] = loop();
            close(g);
        }
        base[r] = (before + loop()) / 2;
        for (int s = 0; s < setups; s++) extra[s * rounds + r] = with[s] - base[r];
    }
    qsort(base, rounds, sizeof *base, cmp_double);
    double b = base[rounds / 2];
    printf("%d rounds of %s; no group: %.0f ns per operation (median)\n", rounds, what, b);
    for (int s = 0; s < setups; s++) {
        double *e = extra + s * rounds;
        qsort(e, rounds, sizeof *e, cmp_double);
        double m = e[rounds / 2];
        printf("%+7.0f ns (%+5.1f%%; %+.0f..%+.0f)  %s\n", m, m / b * 100, e[0], e[rounds - 1], names[s]);
    }
    free(extra);
    free(base);
    free(with);
}
