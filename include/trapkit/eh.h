/* trapkit/eh.h - trapkit's C++ throw runtime (libtrapkit_eh.so).
 *
 * libtrapkit_eh.so replaces the throw side of the Itanium C++ ABI for a
 * program that links it ahead of libstdc++ (-ltrapkit_eh) or runs with it
 * preloaded (LD_PRELOAD=libtrapkit_eh.so), without recompiling.  It
 * defines __cxa_throw, _Unwind_RaiseException, _Unwind_Resume,
 * _Unwind_Resume_or_Rethrow and std::terminate (see below); libstdc++
 * keeps everything else (allocation, __cxa_begin_catch/__cxa_end_catch,
 * std::exception_ptr, type_info, the terminate handler).
 *
 * How a throw differs from libgcc's:
 *   - one phase: frames are unwound as they are searched.  Cleanups (the
 *     destructors of each frame) run on the way up, the handler's frame
 *     gets control directly.  When no handler exists the destructors of
 *     the frames passed have run before std::terminate is called; when the
 *     search reaches a noexcept function the frames below it have been
 *     unwound.  Both are the implementation's choice in [except.handle] and
 *     [except.terminate].  (libgcc runs a search phase first and calls
 *     std::terminate with the stack intact.)  Either way the exception is
 *     the one being handled when the terminate handler runs
 *     (std::current_exception()): a noexcept function whose catch clauses
 *     do not match is compiled (by GCC before 14) to a landing pad,
 *     entered as a cleanup, that calls std::terminate itself, and the
 *     std::terminate defined here catches the exception first when its
 *     caller is the frame of that cleanup, then calls libstdc++'s.
 *   - no extra frame: __cxa_throw takes the thrower's registers on entry
 *     and starts at the thrower's frame.
 *   - each call site's frame state (how to find the caller's registers)
 *     and its exception-table entry (landing pad, action list) are
 *     computed once and kept in a table keyed by PC, so a repeated throw
 *     interprets no call frame instructions and no LSDA header.  The table
 *     is read without locks (a sequence count per entry) and emptied by
 *     every dlclose (the library wraps dlclose); glibc's _dl_find_object
 *     finds an object's tables on a miss.
 *
 * Handed to libgcc unchanged: exceptions of other languages (a foreign
 * exception class), forced unwinding (pthread_cancel, pthread_exit), and
 * the rest of a throw from the first frame whose personality routine is
 * not the C++ one (C code built with -fexceptions, other languages): from
 * that frame on, libgcc's two phases run as usual.
 *
 * Not handled: an object unloaded by the C library itself (not through
 * dlclose: NSS and iconv modules) whose frames were on a throwing stack,
 * followed by another object loaded at the same address whose call sites
 * sit at the same PCs; a program linked with -static-libgcc that throws
 * from its own copy of the unwinder into frames of ours.
 */
#ifndef TRAPKIT_EH_H
#define TRAPKIT_EH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tk_eh_stats {
    uint64_t throws;       /* exceptions raised through this runtime (throw, rethrow, resume) */
    uint64_t frames;       /* frames stepped */
    uint64_t cache_hits;   /* frames found in the PC table */
    uint64_t cache_misses; /* frames whose state and call site were computed */
    uint64_t cleanups;     /* landing pads entered for destructors */
    uint64_t handlers;     /* landing pads entered for catch clauses */
    uint64_t handed_off;   /* throws given to libgcc (foreign, forced, other personality) */
    uint64_t generation;   /* dlclose calls seen (each empties the table) */
};

/* This thread's counts plus those of threads that have ended (in a forked
 * child: since the fork).  The symbol is there only when libtrapkit_eh.so
 * is loaded: look it up with dlsym(RTLD_DEFAULT, "tk_eh_get_stats") to ask
 * whether it is. */
void tk_eh_get_stats(struct tk_eh_stats *out);
/* With TRAPKIT_EH_STATS=FILE in the environment the counts are appended to
 * FILE, one line, when the program ends: every throw once, in threads that
 * ended (also in their thread_local destructors), in threads still
 * running, and in the thread that exits.  A forked child that exits writes
 * its own line with its own throws. */

/* Points in a throw, for measuring its parts: TK_EH_TRACE_THROW when
 * __cxa_throw is entered (the exception allocated), TK_EH_TRACE_INSTALL
 * when the handler's frame is about to get control.  fn == NULL (the
 * default) turns tracing off; the hook costs one predictable branch. */
enum { TK_EH_TRACE_THROW = 1, TK_EH_TRACE_INSTALL = 2 };
void tk_eh_set_trace(void (*fn)(int point));

#ifdef __cplusplus
}
#endif

#endif
