/* Counts the bytes a process writes into files under one directory, from inside it, for
 * `scripts/bench` measure 7. strace counts them too, but it stops the process at every call it
 * traces and makes a flow 2-3 times slower, and a flow writes its status by time: a slower run
 * writes it more often. This counter costs one readlink per write and stops nothing.
 *
 * Built by the bench with `cc -shared -fPIC -O2 -o write-counter.so write-counter.c -ldl` and
 * loaded with LD_PRELOAD. OCFLOW_COUNT_UNDER names the directory (with a trailing slash);
 * OCFLOW_COUNT_TO the file that gets "<bytes> <calls>" when the process exits. Writes through
 * write, pwrite, writev, pwritev, copy_file_range and sendfile are counted: what Rust's std and
 * CPython call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_llong counted_bytes;
static atomic_llong counted_calls;

/* Whether fd is a file under OCFLOW_COUNT_UNDER. */
static int under(int fd) {
    const char *prefix = getenv("OCFLOW_COUNT_UNDER");
    if (!prefix || fd < 0) {
        return 0;
    }
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = syscall(SYS_readlink, link, path, sizeof path - 1);
    if (n <= 0) {
        return 0;
    }
    path[n] = 0;
    return strncmp(path, prefix, strlen(prefix)) == 0;
}

static ssize_t count(int fd, ssize_t written) {
    if (written > 0 && under(fd)) {
        atomic_fetch_add(&counted_bytes, written);
        atomic_fetch_add(&counted_calls, 1);
    }
    return written;
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t len) {
    return count(fd, REAL(write)(fd, buf, len));
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t at) {
    return count(fd, REAL(pwrite)(fd, buf, len, at));
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t at) {
    return count(fd, REAL(pwrite64)(fd, buf, len, at));
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    return count(fd, REAL(writev)(fd, iov, n));
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t at) {
    return count(fd, REAL(pwritev)(fd, iov, n, at));
}

ssize_t copy_file_range(int in, off_t *in_at, int out, off_t *out_at, size_t len,
                        unsigned int flags) {
    return count(out, REAL(copy_file_range)(in, in_at, out, out_at, len, flags));
}

ssize_t sendfile(int out, int in, off_t *at, size_t len) {
    return count(out, REAL(sendfile)(out, in, at, len));
}

__attribute__((destructor)) static void report(void) {
    const char *to = getenv("OCFLOW_COUNT_TO");
    if (!to) {
        return;
    }
    char line[64];
    int len = snprintf(line, sizeof line, "%lld %lld\n", (long long)counted_bytes,
                       (long long)counted_calls);
    int fd = syscall(SYS_openat, AT_FDCWD, to, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        syscall(SYS_write, fd, line, len);
        syscall(SYS_close, fd);
    }
}
