/* tests/tksim/guest.h - what the tksim test programs (the RISC-V guests
 * in this directory, compared with qemu-riscv64) share: output written
 * straight to file descriptor 1 (no stdio buffer to lose when a program
 * ends by a signal), and errno values by name. */
#ifndef TKSIM_TEST_GUEST_H
#define TKSIM_TEST_GUEST_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void out(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || write(1, buf, (size_t)n) != n) _exit(99);
}

/* errno value e by name ("errno N" for one not listed) */
static const char *errname(int e) __attribute__((unused));
static const char *errname(int e)
{
    static const struct {
        int e;
        const char *name;
    } names[] = {
        {EPERM, "EPERM"},         {ENOENT, "ENOENT"}, {EINTR, "EINTR"},   {EBADF, "EBADF"},
        {EAGAIN, "EAGAIN"},       {ENOMEM, "ENOMEM"}, {EACCES, "EACCES"}, {EFAULT, "EFAULT"},
        {EBUSY, "EBUSY"},         {EEXIST, "EEXIST"}, {EXDEV, "EXDEV"},   {ENODEV, "ENODEV"},
        {ENOTDIR, "ENOTDIR"},     {EISDIR, "EISDIR"}, {EINVAL, "EINVAL"}, {ENOTTY, "ENOTTY"},
        {ESPIPE, "ESPIPE"},       {EROFS, "EROFS"},   {ERANGE, "ERANGE"}, {ENOSYS, "ENOSYS"},
        {ENOTEMPTY, "ENOTEMPTY"}, {ELOOP, "ELOOP"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].e == e) return names[i].name;
    static char buf[32];
    snprintf(buf, sizeof buf, "errno %d", e);
    return buf;
}

#endif
