/* src/core/error.c - result codes and per-thread error messages. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

/* initial-exec TLS: no lazy allocation, so the handler path may write it. */
#define TK_ERRLEN 256
static __thread char last_error[TK_ERRLEN] __attribute__((tls_model("initial-exec")));

/* [signal-safe] */
int tk__fail(int err, const char *msg)
{
    size_t n = 0;
    while (msg[n] && n < TK_ERRLEN - 1) {
        last_error[n] = msg[n];
        n++;
    }
    last_error[n] = 0;
    return err;
}

int tk__failf(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return err;
}

void tk__clear_error(void)
{
    last_error[0] = 0;
}

const char *tk_last_error(void)
{
    return last_error;
}

/* [signal-safe] */
const char *tk_strerror(int err)
{
    switch (err < 0 ? -err : err) {
    case 0:
        return "success";
    case EINVAL:
        return "invalid argument (address outside the region, unaligned, or bad value)";
    case ENOMEM:
        return "out of memory, or the kernel's vm.max_map_count limit on mappings reached";
    case EEXIST:
        return "the range overlaps a region trapkit already watches";
    case EOPNOTSUPP:
        return "the mechanism cannot do this, or this kernel lacks the feature";
    case ENOSYS:
        return "this kernel does not offer the system call";
    case EPERM:
        return "not permitted for this user (see `trapkit probe`)";
    case EACCES:
        return "access denied";
    case EFAULT:
        return "the memory is not accessible";
    case EBUSY:
        return "the resource is in use";
    case ENOENT:
        return "no such object";
    case EBADF:
        return "bad file descriptor";
    case EIO:
        return "input/output error";
    case ERANGE:
        return "a buffer or count is too small";
    case EAGAIN:
        return "temporarily unavailable; try again";
    case EUCLEAN:
        return "the file is damaged or truncated (nothing was changed)";
    case EPROTONOSUPPORT:
        return "the file was written by another version of its format";
    case EFBIG:
        return "too large for the space reserved for it";
    case ENOSPC:
        return "no space left (a reserved range or a fixed table is full)";
    case ENAMETOOLONG:
        return "a path is too long";
    case EMFILE:
        return "too many open files in this process (RLIMIT_NOFILE)";
    case ENFILE:
        return "too many open files in the system";
    case ECHILD:
        return "not available in a fork child (the handler thread is the parent's)";
    case EOVERFLOW:
        return "a count or nesting depth passed its limit";
    case ECANCELED:
        return "the operation was cancelled (its object was destroyed or the peer left)";
    case EBADMSG:
        return "a message or record is malformed";
    case ENOTCONN:
        return "not connected";
    case ENODATA:
        return "no data (nothing was recorded or written yet)";
    case EROFS:
        return "read-only (opened for reading only)";
    case EALREADY:
        return "already done or already in progress";
    case EINTR:
        return "interrupted by a signal";
    case ETIMEDOUT:
        return "timed out";
    default:
        return "unknown error";
    }
}

/* [signal-safe]: raw writes and abort() */
void tk__assert_fail(const char *cond, const char *file, int line)
{
    char num[24];
    int n = 0;
    char tmp[16];
    unsigned v = line > 0 ? (unsigned)line : 0;
    do tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < (int)sizeof tmp);
    for (int i = 0; i < n; i++) num[i] = tmp[n - 1 - i];
    num[n] = 0;
    const char *parts[] = {
        "trapkit: internal error: ", cond, " is false at ", file, ":", num, "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t len = strlen(parts[i]);
        while (len > 0) {
            ssize_t w = write(2, parts[i], len);
            if (w <= 0) break;
            parts[i] += w;
            len -= (size_t)w;
        }
    }
    abort();
}
