/* trapkit/error.h - error reporting.
 *
 * Every trapkit function that can fail returns 0 (or a non-negative count) on
 * success and a negative errno value on failure (-EINVAL, -ENOMEM, ...); errno
 * itself is never the result.  tk_strerror() turns such a value into a
 * sentence; tk_last_error() gives the detailed message of the most recent
 * failure in the calling thread (which argument, which kernel feature, which
 * limit), so a program can print exactly why a call failed.
 */
#ifndef TRAPKIT_ERROR_H
#define TRAPKIT_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* A sentence for a trapkit result code (negative errno).  Never NULL; the
 * string is static.  Async-signal-safe. */
const char *tk_strerror(int err);

/* The detailed message of the last failed trapkit call in this thread, or ""
 * if none failed yet.  The string stays valid until the next trapkit call in
 * this thread. */
const char *tk_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
