/* src/aseq/aseq_impl.h - rollforward atomic sequences: what the portable
 * part and the architecture's landing share. */
#ifndef TK_ASEQ_IMPL_H
#define TK_ASEQ_IMPL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

/* The private part of struct tk_aseq_thread. */
struct aseq_priv {
    bool rolling;       /* a signal is held until the running sequence ends */
    int sig;            /* the held signal */
    uintptr_t resume;   /* the end of the sequence being rolled forward */
    siginfo_t info;     /* the held signal's */
    sigset_t orig_mask; /* the thread's mask when it came */
    sigset_t handler_mask;
    int vsig; /* a signal held by tk_aseq_sigprocmask */
    siginfo_t vinfo;
    uint64_t n_signals, n_at_once, n_rollforwards, n_refused, n_held;
    uint64_t n_rolled[3];
};

extern const long tk__aseq_false;
struct aseq_priv *tk__aseq_priv(void);
void tk__aseq_unblock(void);

/* The landing: where a rolled-forward sequence's end jumps.  It saves every
 * register (below the red zone) and the extended state, calls
 * tk__aseq_land, restores them and jumps to the address it returned, with
 * r11 holding it.  (src/arch/x86_64/aseq.c) */
void tk__aseq_landing(void);
uintptr_t tk__aseq_land(uint64_t *saved, void *xsave);
/* A ucontext for the deferred handler from the landing's saved registers. */
void tk__aseq_fill_context(ucontext_t *uc, const uint64_t *saved, void *xsave, uintptr_t pc);

#endif
