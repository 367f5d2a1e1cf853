/* src/core/internal.h - what trapkit's modules share and users do not see. */
#ifndef TK_CORE_INTERNAL_H
#define TK_CORE_INTERNAL_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <trapkit/error.h>
#include <trapkit/probe.h>
#include <trapkit/region.h>

#define TK_LIKELY(x) __builtin_expect(!!(x), 1)
#define TK_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Internal invariants, checked in debug builds (the ASan and TSan builds of
 * make test) and compiled out otherwise.  A failure writes the condition and
 * where to stderr and aborts.  [signal-safe] */
#ifdef NDEBUG
#define TK_ASSERT(cond) ((void)0)
#else
#define TK_ASSERT(cond) (TK_LIKELY(cond) ? (void)0 : tk__assert_fail(#cond, __FILE__, __LINE__))
#endif
_Noreturn void tk__assert_fail(const char *cond, const char *file, int line);

/* In a ThreadSanitizer build: TSan neither records nor checks the calling
 * thread's memory accesses between TK_TSAN_IGNORE_BEGIN() and _END() (its
 * synchronization still counts).  For reads ordered after other threads'
 * writes by page protection, which is no operation of TSan's model: a page
 * read while it is write-protected follows every write made before the
 * protection (mprotect or userfaultfd write-protect, with its TLB
 * shootdown), and a write after it faults and waits.  Each use says why it
 * is one.  Nothing in other builds.  [signal-safe] */
#if defined(__SANITIZE_THREAD__)
#define TK_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TK_TSAN_BUILD 1
#endif
#endif
#ifdef TK_TSAN_BUILD
void AnnotateIgnoreReadsBegin(const char *file, int line); /* TSan's runtime */
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define TK_TSAN_IGNORE_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define TK_TSAN_IGNORE_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define TK_TSAN_IGNORE_BEGIN() ((void)0)
#define TK_TSAN_IGNORE_END() ((void)0)
#endif

/* In an AddressSanitizer build: marks the signal frame the kernel wrote
 * below the interrupted code's stack (siginfo, ucontext, the saved
 * register state) addressable.  That memory may carry stale poison from
 * instrumented frames that were left without ASan's knowledge - handlers
 * that returned through tk__fast_return or siglongjmp while ASan could not
 * tell the stack's bounds (a handler nested in another) - and the
 * handler's reads of the frame would be reported as stack-buffer-underflow.
 * Nothing in other builds.  [signal-safe] */
#if defined(__SANITIZE_ADDRESS__)
#define TK_ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TK_ASAN_BUILD 1
#endif
#endif
#ifdef TK_ASAN_BUILD
void tk__asan_signal_frame(const siginfo_t *si, const void *uc);
#else
#define tk__asan_signal_frame(si, uc) ((void)0)
#endif

/* ---- errors (error.c) ---------------------------------------------------
 * tk__fail records msg as the calling thread's last error and returns err.
 * [signal-safe]: it only copies bytes into thread-local storage.
 * tk__failf formats like snprintf; not signal-safe. */
int tk__fail(int err, const char *msg);
int tk__failf(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tk__clear_error(void);

/* ---- probe (probe.c) ----------------------------------------------------
 * The cached probe result; computed on first call.  Not signal-safe on the
 * first call, a plain pointer read afterwards. */
const tk_probe_info *tk__probe(void);
/* TRAPKIT_PROBE_MASK, the features the probe hides, or NULL. */
const char *tk__probe_mask(void);
/* Whether TRAPKIT_PROBE_MASK names this feature (a name of its list). */
bool tk__probe_hides(const char *feature);

/* ---- mechanism choice (vm/choose.c) ------------------------------------- */
/* Whether mechanism m can serve a region with these TK_REGION_* flags on this
 * machine; if not and why is not NULL, *why says which feature is missing. */
bool tk__mech_available(const tk_probe_info *p, enum tk_mech m, unsigned region_flags,
                        const char **why);
/* The mechanism trapkit picks for a region with these flags when nothing is
 * forced (TRAPKIT_BACKEND is not consulted here). */
enum tk_mech tk__mech_default(const tk_probe_info *p, unsigned region_flags);

/* ---- the fast-kernel mechanism (core/fastk.c) --------------------------
 * Whether the kernel has the fast exception path (kernel/fastexc) and
 * trapkit can use it; if not, *why says why.  The first call probes and
 * names trapkit's entry point to the kernel.  Not signal-safe. */
bool tk__fastk_usable(const char **why);
/* Registers [start, start+len) with the kernel (any protection fault in it
 * comes to trapkit without a signal), or takes it away; 0 or -errno. */
int tk__fastk_add(uintptr_t start, size_t len);
int tk__fastk_del(uintptr_t start, size_t len);
/* A fault the fast path delivered that nobody took, passed on as the
 * SIGSEGV handler passes one on (core/dispatch.c): to the handler installed
 * before trapkit's, called with this context; true if there is none (the
 * default action), and the instruction must fault again as a signal.
 * [signal-safe] */
bool tk__pass_on_segv(siginfo_t *si, void *uc);

/* Routes a fault (a signal's or the fast path's) to its region, trapkit's
 * modules' hooks and the program's unclaimed-fault handler
 * (core/dispatch.c): 0 nobody took it (the caller passes it on), 1 resume,
 * 2 resume and the caller must not return without rt_sigreturn.
 * [signal-safe] */
int tk__route_fault(int sig, siginfo_t *si, void *uc);

/* ---- protection (vm/protect.c) ------------------------------------------
 * tk_unprot of [addr, addr+len) with one system call for the whole span
 * where its pages are write-protected by userfaultfd or open already, where
 * tk_unprot would make one per run of protected pages (each a TLB flush of
 * every other CPU running the program).  For a caller that knows no page of
 * the span is being protected meanwhile.  [signal-safe] */
struct tk_region;
int tk__unprot_span(struct tk_region *r, void *addr, size_t len);

/* ---- missing pages (vm/region.c) ----------------------------------------
 * A posix region whose range an application registered with a userfaultfd
 * of its own in MISSING mode with UFFD_FEATURE_SIGBUS (src/apps/zpage): the
 * SIGBUS (BUS_ADRERR) a touch of a missing page raises in the faulting
 * thread goes to h, with the tk_fault of a region fault (f->access from the
 * context, f->flags 0); TK_RESUME retries the access, TK_DECLINE passes the
 * signal on as if trapkit were not there.  Set before the first such fault;
 * NULL removes it.  Returns 0 or -EINVAL (not a live posix region). */
int tk__region_on_missing(struct tk_region *r, tk_fault_handler h, void *arg);

/* ---- faults outside every region (core/dispatch.c) ----------------------
 * Adds a handler of one of trapkit's modules (src/apps/guard) for SIGSEGV
 * and SIGBUS faults no region claims: asked, in the order added, after the
 * regions and the stack-overflow handler, before the program's
 * unclaimed-fault handler (tk_on_unclaimed_fault stays the program's); f as for the
 * unclaimed-fault handler, arg NULL.  It may leave by siglongjmp.  At most
 * 4; adding one twice is a no-op.  Returns 0, -ENOSPC, or an error
 * installing trapkit's handlers. */
int tk__add_fault_hook(tk_fault_handler h);

#endif
