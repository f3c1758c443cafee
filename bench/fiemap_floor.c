/* The floor for bench/scan.sh: the least work that maps every regular file under a
 * directory — walk it (openat + getdents through fdopendir/readdir), then per file open,
 * one FIEMAP call per 256 extents until the last, close — no stat, no output, with T
 * threads taking directories from one shared stack (fragkit scan -j T walks and maps the
 * same way). Prints the files and extents it saw, so runs can be checked against fragkit.
 * Usage: fiemap_floor DIR [THREADS] */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define N 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static int *stack; /* directory fds waiting to be read */
static size_t depth, cap, busy;
static unsigned long files, extents;

static void push(int fd) {
    pthread_mutex_lock(&lock);
    if (depth == cap) {
        cap = cap ? cap * 2 : 1024;
        stack = realloc(stack, cap * sizeof *stack);
        if (!stack) { perror("realloc"); exit(2); }
    }
    stack[depth++] = fd;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
    (void)arg;
    static __thread char buf[sizeof(struct fiemap) + N * sizeof(struct fiemap_extent)];
    struct fiemap *fm = (struct fiemap *)buf;
    unsigned long my_files = 0, my_extents = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (depth == 0 && busy > 0) pthread_cond_wait(&more, &lock);
        if (depth == 0) { /* nothing queued and nobody reading: done */
            pthread_cond_broadcast(&more);
            pthread_mutex_unlock(&lock);
            break;
        }
        int dfd = stack[--depth];
        busy++;
        pthread_mutex_unlock(&lock);
        DIR *d = fdopendir(dfd);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_type == DT_DIR) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) push(sub);
                continue;
            }
            if (e->d_type != DT_REG) continue;
            int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) continue;
            unsigned long long start = 0;
            for (;;) {
                memset(fm, 0, sizeof *fm);
                fm->fm_start = start;
                fm->fm_length = ~0ULL - start;
                fm->fm_extent_count = N;
                if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0 || fm->fm_mapped_extents == 0) break;
                struct fiemap_extent *last = &fm->fm_extents[fm->fm_mapped_extents - 1];
                my_extents += fm->fm_mapped_extents;
                if (last->fe_flags & FIEMAP_EXTENT_LAST || fm->fm_mapped_extents < N) break;
                start = last->fe_logical + last->fe_length;
            }
            close(fd);
            my_files++;
        }
        if (d) closedir(d); else close(dfd);
        pthread_mutex_lock(&lock);
        busy--;
        pthread_cond_broadcast(&more);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    files += my_files;
    extents += my_extents;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s DIR [THREADS]\n", argv[0]);
        return 2;
    }
    int threads = argc == 3 ? atoi(argv[2]) : 1;
    if (threads < 1) { fprintf(stderr, "%s: THREADS: expected a number >= 1\n", argv[2]); return 2; }
    int root = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) { perror(argv[1]); return 2; }
    push(root);
    pthread_t t[threads];
    for (int i = 1; i < threads; i++) pthread_create(&t[i], NULL, worker, NULL);
    worker(NULL);
    for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
    printf("%lu files %lu extents\n", files, extents);
    return 0;
}
