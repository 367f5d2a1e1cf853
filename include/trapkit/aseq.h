/* trapkit/aseq.h - rollforward atomic sequences: critical sections that are
 * atomic with respect to the thread's own signal handlers, at the cost of a
 * few instructions (Mosberger, Druschel and Peterson).
 *
 * A sequence runs without any protection.  When a signal whose handler was
 * installed with tk_aseq_signal() lands inside one, trapkit lets the
 * sequence run on to its end ("rolls it forward") and runs the handler
 * there, with its own siginfo and signal mask; anywhere else the handler
 * runs at once, as usual.  The sequences protect data a thread shares with
 * its own signal handlers (timers, profilers, asynchronous I/O, safepoints);
 * they are not a lock between threads.
 *
 * Three schemes (the paper's section 3), each a macro around a block of C:
 *
 *   TK_ASEQ_DYN_JUMP(prio, { ... })   registers the sequence in thread-local
 *       memory (two stores) and ends with a jump through it (a computed
 *       jump).  Any code may be inside: calls, loops.
 *   TK_ASEQ_DYN_FAULT(prio, { ... })  the same registration; the end is a
 *       load through a thread-local pointer, which trapkit points at an
 *       inaccessible page to regain control (a controlled fault).  No calls
 *       or backward branches inside.
 *   TK_ASEQ_HYB_JUMP(prio, { ... })   the registration is the address of the
 *       end in a well-known register (r11) and the end is a jump through it:
 *       no memory access at all.  No calls, backward branches or uses of r11
 *       inside, at most TK_ASEQ_MAX_INSNS instructions.
 *
 * prio is the sequence's priority level (0..TK_ASEQ_PRIO_MAX): a signal
 * whose priority (tk_aseq_signal) is above it runs at once even inside
 * the sequence, so it must not touch what the sequence protects.
 * TK_ASEQ_ALL protects against every signal.
 *
 * Safety: every sequence's code is recorded in a section of the object
 * that contains it (one record at each end) and checked when the object is
 * loaded (a constructor every file including this header gets), with an
 * x86-64 decoder: for Hyb/Jump and Dyn/Fault, from the start to the end,
 * only forward branches that stay inside, no call, return, system call,
 * string-repeat or indirect jump but the final one, no use of r11 (Hyb),
 * at most TK_ASEQ_MAX_INSNS instructions.  A sequence that fails is never
 * rolled forward: its signals run at once, as if it were not a sequence
 * (tk_aseq_check() lists such sequences and tk_aseq_stats counts the
 * refusals).  So the check runs once per sequence, and a signal costs one
 * hash lookup.
 *
 * Rules: sequences do not nest; the block is entered at its top and left
 * at its end (no return, goto, break or longjmp out of it); it must not
 * fault (a page fault the kernel resolves is fine); code built with
 * sanitizers puts calls inside sequences, so functions that contain
 * Hyb/Jump or Dyn/Fault sequences need TK_ASEQ_NO_SANITIZE.
 *
 * x86-64 only; the machine-specific parts are the macros below and
 * src/arch/x86_64/aseq.c.
 */
#ifndef TRAPKIT_ASEQ_H
#define TRAPKIT_ASEQ_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TK_ASEQ_PRIO_MAX 1000000
#define TK_ASEQ_ALL TK_ASEQ_PRIO_MAX
#define TK_ASEQ_MAX_INSNS 64

enum tk_aseq_scheme { TK_ASEQ_DYN_JUMP_ = 1, TK_ASEQ_DYN_FAULT_ = 2, TK_ASEQ_HYB_JUMP_ = 3 };

/* Per-thread state.  The macros touch the first three fields. */
struct tk_aseq_thread {
    void *dest;                 /* Dyn: where the sequence's end jumps */
    long in_as;                 /* Dyn: the running sequence's priority + 1; 0 outside */
    const long *false_or_fault; /* Dyn/Fault: the word the end loads */
    uint64_t vmask;             /* tk_aseq_sigprocmask's mask (bit sig - 1) */
    uint64_t pending_unblock;   /* vmask bits the kernel holds for us */
};
extern __thread struct tk_aseq_thread tk__aseq_self __attribute__((tls_model("initial-exec")));

/* One record per end of a sequence, in section tk_aseq of its object. */
struct tk_aseq_rec {
    int32_t at;   /* the instruction it describes, relative to this field */
    int32_t end;  /* the sequence's end (where it jumps to), relative to this field */
    int32_t kind; /* TK_ASEQ_REC_* */
    int32_t prio; /* the priority level (Hyb: also the word after the jump) */
    int32_t line; /* __LINE__ */
    int32_t file; /* __FILE__, relative to this field */
};
#define TK_ASEQ_REC_DYN_ENTRY 1 /* at: just after the registration */
#define TK_ASEQ_REC_DYN_JUMP 2  /* at: the computed jump */
#define TK_ASEQ_REC_DYN_FAULT 3 /* at: the load that faults */
#define TK_ASEQ_REC_HYB_ENTRY 4 /* at: the first instruction of the sequence */
#define TK_ASEQ_REC_HYB_JUMP 5  /* at: the jump through r11 */

#define TK__STR2(x) #x
#define TK__STR(x) TK__STR2(x)
#define TK__REC(kind, at, end, prio)                                                               \
    ".pushsection tk_aseq,\"a\",@progbits\n\t"                                                     \
    ".balign 4\n\t"                                                                                \
    ".long " at " - .\n\t"                                                                         \
    ".long " end " - .\n\t"                                                                        \
    ".long " TK__STR(kind) "\n\t"                                                                  \
                           ".long " prio "\n\t"                                                    \
                           ".long " TK__STR(                                                       \
                               __LINE__) "\n\t"                                                    \
                                         ".long 7790f - .\n\t"                                     \
                                         ".pushsection .rodata.str1.1,\"aMS\",@progbits,1\n"       \
                                         "7790: .asciz \"" __FILE__ "\"\n\t"                       \
                                         ".popsection\n\t"                                         \
                                         ".popsection\n\t"

#define TK__PRIO_OK(prio) ((void)sizeof(char[((prio) >= 0 && (prio) <= TK_ASEQ_PRIO_MAX) ? 1 : -1]))

#ifndef TK_ASEQ_UNPROTECTED

/* The Dyn schemes' registration: destAddr = the end (label `end`, after
 * the sequence); inAS = prio + 1; then label `here`, the sequence's first
 * instruction, and its record. */
#define TK__DYN_ENTER(prio, here, end)                                                             \
    __asm__ volatile("lea " end "f(%%rip), %%r11\n\t"                                              \
                     "mov %%r11, %0\n\t"                                                           \
                     "movq %2, %1\n" here                                                          \
                     ":\n\t" TK__REC(TK_ASEQ_REC_DYN_ENTRY, here "b", end "f", "%c2-1")            \
                     : "=m"(tk__aseq_self.dest), "=m"(tk__aseq_self.in_as)                         \
                     : "i"((prio) + 1)                                                             \
                     : "r11", "memory")

/* Dyn/Jump: destAddr = end; inAS = prio + 1; ...; inAS = 0; jump *destAddr */
#define TK_ASEQ_DYN_JUMP(prio, ...)                                                                \
    do {                                                                                           \
        TK__PRIO_OK(prio);                                                                         \
        TK__DYN_ENTER(prio, "7780", "7781");                                                       \
        __VA_ARGS__                                                                                \
        __asm__ volatile("movq $0, %0\n"                                                           \
                         "7782:\n\t"                                                               \
                         "jmp *%1\n"                                                               \
                         "7781:\n\t" TK__REC(TK_ASEQ_REC_DYN_JUMP, "7782b", "7781b", "0")          \
                         : "=m"(tk__aseq_self.in_as)                                               \
                         : "m"(tk__aseq_self.dest)                                                 \
                         : "r11", "memory");                                                       \
    } while (0)

/* Dyn/Fault: destAddr = end; inAS = prio + 1; ...; inAS = *falseOrFault */
#define TK_ASEQ_DYN_FAULT(prio, ...)                                                               \
    do {                                                                                           \
        TK__PRIO_OK(prio);                                                                         \
        TK__DYN_ENTER(prio, "7783", "7784");                                                       \
        __VA_ARGS__                                                                                \
        __asm__ volatile("mov %1, %%r11\n"                                                         \
                         "7785:\n\t"                                                               \
                         "mov (%%r11), %%r11\n\t"                                                  \
                         "mov %%r11, %0\n"                                                         \
                         "7784:\n\t" TK__REC(TK_ASEQ_REC_DYN_FAULT, "7785b", "7784b", "0")         \
                         : "=m"(tk__aseq_self.in_as)                                               \
                         : "m"(tk__aseq_self.false_or_fault)                                       \
                         : "r11", "memory");                                                       \
    } while (0)

/* Hyb/Jump: r11 = end; ...; jump *r11; .long prio; end:
 * r11 is a live value from the first asm to the last, so the compiler
 * keeps it there and uses other registers for the block (the check
 * verifies it did). */
#define TK_ASEQ_HYB_JUMP(prio, ...)                                                                \
    do {                                                                                           \
        TK__PRIO_OK(prio);                                                                         \
        register void *tk__r11 __asm__("r11");                                                     \
        __asm__ volatile("lea 7787f(%%rip), %0\n"                                                  \
                         "7786:\n\t" TK__REC(TK_ASEQ_REC_HYB_ENTRY, "7786b", "7787f", "%c1")       \
                         : "=r"(tk__r11)                                                           \
                         : "i"(prio)                                                               \
                         : "memory");                                                              \
        __VA_ARGS__                                                                                \
        __asm__ volatile("7788:\n\t"                                                               \
                         "jmp *%0\n\t"                                                             \
                         ".long %c1\n"                                                             \
                         "7787:\n\t" TK__REC(TK_ASEQ_REC_HYB_JUMP, "7788b", "7787b", "%c1")        \
                         :                                                                         \
                         : "r"(tk__r11), "i"(prio)                                                 \
                         : "memory");                                                              \
    } while (0)

#else /* TK_ASEQ_UNPROTECTED: the same code without protection (to show what it prevents) */
#define TK_ASEQ_DYN_JUMP(prio, ...)                                                                \
    do {                                                                                           \
        __asm__ volatile("" ::: "memory");                                                         \
        __VA_ARGS__ __asm__ volatile("" ::: "memory");                                             \
    } while (0)
#define TK_ASEQ_DYN_FAULT TK_ASEQ_DYN_JUMP
#define TK_ASEQ_HYB_JUMP TK_ASEQ_DYN_JUMP
#endif

/* For functions that contain Hyb/Jump or Dyn/Fault sequences. */
#define TK_ASEQ_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* ---- signals --------------------------------------------------------------- */

typedef void (*tk_aseq_handler)(int sig, siginfo_t *info, void *ucontext);

/* Installs fn for sig (SIGHUP..SIGRTMAX except SIGKILL, SIGSTOP, and the
 * synchronous SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP): fn runs with mask
 * (plus sig, unless flags has SA_NODEFER) added to the thread's mask, at
 * once or, when sig lands inside a sequence of priority >= prio, at the
 * sequence's end.  flags: SA_RESTART, SA_ONSTACK, SA_NODEFER.  fn == NULL
 * restores the default action.  Returns 0 or a negative errno. */
int tk_aseq_signal(int sig, tk_aseq_handler fn, const sigset_t *mask, int flags, int prio);

/* A user-level sigprocmask for the signals installed with tk_aseq_signal
 * (section 6 of the paper): a few instructions instead of a system call.
 * A signal in the mask that arrives is held (the kernel's mask is raised
 * for it then, lazily) and runs when tk_aseq_sigprocmask unblocks it.
 * Limits: it masks only signals installed with tk_aseq_signal, in this
 * thread; sigsuspend, sigwait, pselect and signalfd and the kernel's
 * choice of thread for a process-directed signal see the kernel's mask,
 * not this one (a process-directed signal may land on a thread that masks
 * it here, and wait for it to unblock); a thread inherits no mask from its
 * creator; stop signals and the alternate-stack flags are not emulated.
 * how: SIG_BLOCK, SIG_UNBLOCK, SIG_SETMASK.  [signal-safe] */
int tk_aseq_sigprocmask(int how, const sigset_t *set, sigset_t *old);

/* ---- statistics and checking ----------------------------------------------- */

typedef struct tk_aseq_stats {
    uint64_t signals;      /* signals delivered to tk_aseq_signal handlers */
    uint64_t at_once;      /* handlers run at once */
    uint64_t rollforwards; /* signals deferred to the end of a sequence */
    uint64_t rolled[3];    /* of them, by scheme: Dyn/Jump, Dyn/Fault, Hyb/Jump */
    uint64_t refused;      /* in a sequence that failed the safety check: run at once */
    uint64_t held;         /* held by tk_aseq_sigprocmask */
    uint64_t sequences;    /* sequence records registered */
    uint64_t unsafe;       /* of them, failing the check */
} tk_aseq_stats;
/* This thread's counters (and the process's sequence counts). */
void tk_aseq_get_stats(tk_aseq_stats *st);

/* Writes one line per sequence that fails the safety check (file:line and
 * why) to fd; returns how many. */
int tk_aseq_check(int fd);

/* Registers the records [from, to) of an object (the constructor below
 * does this for every object that includes this header). */
void tk_aseq_register(const struct tk_aseq_rec *from, const struct tk_aseq_rec *to);

extern const struct tk_aseq_rec __start_tk_aseq[] __attribute__((weak, visibility("hidden")));
extern const struct tk_aseq_rec __stop_tk_aseq[] __attribute__((weak, visibility("hidden")));
__attribute__((constructor, used)) static void tk__aseq_register_this_object(void)
{
    const struct tk_aseq_rec *from = __start_tk_aseq, *to = __stop_tk_aseq;
    if (from != to) tk_aseq_register(from, to);
}

/* ---- data structures for a thread and its signal handlers ------------------ */
/* Each operation is one sequence, inlined where it is used: tk_aseq_push
 * etc. use Hyb/Jump; the _dyn_jump and _dyn_fault variants the other
 * schemes (for comparison).  They are safe between a thread and its own
 * signal handlers, not between threads.  The bodies with branches are in
 * assembly: a compiler may lay a C branch's block out after the end of
 * the sequence, which the check would refuse. */

struct tk_aseq_node {
    struct tk_aseq_node *next;
};

/* LIFO stack. */
struct tk_aseq_stack {
    struct tk_aseq_node *top;
};

/* FIFO queue: an enqueue stores the last node's link and the tail (two
 * shared stores, which a restartable sequence cannot commit at once). */
struct tk_aseq_queue {
    struct tk_aseq_node *head, *tail;
};

#define TK__ASEQ_DEFINE_DS(sfx, SEQ)                                                               \
    TK_ASEQ_NO_SANITIZE static inline void tk_aseq_push##sfx(struct tk_aseq_stack *s,              \
                                                             struct tk_aseq_node *n)               \
    {                                                                                              \
        SEQ(TK_ASEQ_ALL, {                                                                         \
            n->next = s->top;                                                                      \
            s->top = n;                                                                            \
        });                                                                                        \
    }                                                                                              \
    TK_ASEQ_NO_SANITIZE static inline struct tk_aseq_node *tk_aseq_pop##sfx(                       \
        struct tk_aseq_stack *s)                                                                   \
    {                                                                                              \
        struct tk_aseq_node *n, *next;                                                             \
        SEQ(TK_ASEQ_ALL, {                                                                         \
            __asm__ volatile("mov (%[s]), %[n]\n\t"                                                \
                             "test %[n], %[n]\n\t"                                                 \
                             "jz 1f\n\t"                                                           \
                             "mov (%[n]), %[x]\n\t"                                                \
                             "mov %[x], (%[s])\n"                                                  \
                             "1:"                                                                  \
                             : [n] "=&r"(n), [x] "=&r"(next)                                       \
                             : [s] "r"(&s->top)                                                    \
                             : "memory", "cc");                                                    \
        });                                                                                        \
        return n;                                                                                  \
    }                                                                                              \
    TK_ASEQ_NO_SANITIZE static inline void tk_aseq_enqueue##sfx(struct tk_aseq_queue *q,           \
                                                                struct tk_aseq_node *n)            \
    {                                                                                              \
        struct tk_aseq_node *t;                                                                    \
        n->next = 0;                                                                               \
        SEQ(TK_ASEQ_ALL, {                                                                         \
            __asm__ volatile("mov 8(%[q]), %[t]\n\t"                                               \
                             "test %[t], %[t]\n\t"                                                 \
                             "jz 1f\n\t"                                                           \
                             "mov %[n], (%[t])\n\t"                                                \
                             "jmp 2f\n"                                                            \
                             "1:\tmov %[n], (%[q])\n"                                              \
                             "2:\tmov %[n], 8(%[q])"                                               \
                             : [t] "=&r"(t)                                                        \
                             : [q] "r"(q), [n] "r"(n)                                              \
                             : "memory", "cc");                                                    \
        });                                                                                        \
    }                                                                                              \
    TK_ASEQ_NO_SANITIZE static inline struct tk_aseq_node *tk_aseq_dequeue##sfx(                   \
        struct tk_aseq_queue *q)                                                                   \
    {                                                                                              \
        struct tk_aseq_node *n, *next;                                                             \
        SEQ(TK_ASEQ_ALL, {                                                                         \
            __asm__ volatile("mov (%[q]), %[n]\n\t"                                                \
                             "test %[n], %[n]\n\t"                                                 \
                             "jz 1f\n\t"                                                           \
                             "mov (%[n]), %[x]\n\t"                                                \
                             "mov %[x], (%[q])\n\t"                                                \
                             "test %[x], %[x]\n\t"                                                 \
                             "jnz 1f\n\t"                                                          \
                             "mov %[x], 8(%[q])\n"                                                 \
                             "1:"                                                                  \
                             : [n] "=&r"(n), [x] "=&r"(next)                                       \
                             : [q] "r"(q)                                                          \
                             : "memory", "cc");                                                    \
        });                                                                                        \
        return n;                                                                                  \
    }                                                                                              \
    TK_ASEQ_NO_SANITIZE static inline bool tk_aseq_cas2##sfx(                                      \
        uint64_t *w, uint64_t o0, uint64_t o1, uint64_t n0, uint64_t n1)                           \
    {                                                                                              \
        bool ok;                                                                                   \
        SEQ(TK_ASEQ_ALL, {                                                                         \
            __asm__ volatile("cmp (%[w]), %[o0]\n\t"                                               \
                             "jne 1f\n\t"                                                          \
                             "cmp 8(%[w]), %[o1]\n\t"                                              \
                             "jne 1f\n\t"                                                          \
                             "mov %[n0], (%[w])\n\t"                                               \
                             "mov %[n1], 8(%[w])\n"                                                \
                             "1:\tsete %[ok]"                                                      \
                             : [ok] "=&r"(ok)                                                      \
                             : [w] "r"(w), [o0] "r"(o0), [o1] "r"(o1), [n0] "r"(n0), [n1] "r"(n1)  \
                             : "memory", "cc");                                                    \
        });                                                                                        \
        return ok;                                                                                 \
    }

/* push/pop: LIFO; enqueue/dequeue: FIFO; cas2: if w[0] == o0 and
 * w[1] == o1, stores n0 and n1 and returns true. */
TK__ASEQ_DEFINE_DS(, TK_ASEQ_HYB_JUMP)
TK__ASEQ_DEFINE_DS(_dyn_jump, TK_ASEQ_DYN_JUMP)
TK__ASEQ_DEFINE_DS(_dyn_fault, TK_ASEQ_DYN_FAULT)

#ifdef __cplusplus
}
#endif
#endif
