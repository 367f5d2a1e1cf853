/* bench/mosberger.c - Mosberger, Druschel & Peterson Table 1 on this
 * machine: what protecting an atomic sequence against the thread's own
 * signal handlers costs, per operation, in time-stamp-counter cycles.
 *
 * Tests (the paper's): null (an empty sequence), lifo (push then pop one
 * element), fifo (enqueue then dequeue one element).  Mechanisms:
 *   unprotected      the operation alone: trapkit/aseq.h's, built with
 *                    TK_ASEQ_UNPROTECTED (bench/mosberger_unprot.c)
 *   sigprocmask      glibc's sigprocmask around it (block SIGALRM, restore)
 *   rt-sigprocmask   the raw rt_sigprocmask system call around it
 *   aseq-sigprocmask trapkit's user-level sigprocmask around it (section 6)
 *   flag             an in-critical-section flag and a pending-signal check
 *   cas              lock-free with compare-and-swap: Treiber stack,
 *                    Michael-Scott queue (null: one CAS)
 *   rseq             Linux restartable sequences (null, lifo; a FIFO
 *                    enqueue needs two shared stores: not expressible)
 *   dyn-jump, dyn-fault, hyb-jump   trapkit's rollforward schemes
 * Each figure is the median over repetitions of the mean over many
 * iterations, every mechanism measured once per repetition, in turn.
 *
 * Also mosberger/rollforward: what one signal costs when it lands inside
 * a sequence and is rolled forward, beyond one delivered at once (raise()
 * inside a Dyn/Jump sequence against raise() outside); and
 * mosberger/breakeven-rate: the paper's section 4.3, R = (O_H - O_S) /
 * (D_A * O_R), the signal rate below which hyb-jump beats the alternative
 * (sigprocmask, cas), for the LIFO's sequences, in signals per second.
 * Both are derived (computed from the other figures) and say so.
 *
 * Cycles are counts of the time-stamp counter, read serialised
 * (bench_tsc); where the TSC is not invariant every figure is null with
 * the reason.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <trapkit/aseq.h>
#include <trapkit/error.h>
#include <unistd.h>

#include "bench.h"

enum mech {
    M_UNPROT,
    M_SIGPROCMASK,
    M_RT_SIGPROCMASK,
    M_ASEQ_SIGPROCMASK,
    M_FLAG,
    M_CAS,
    M_RSEQ,
    M_DYN_JUMP,
    M_DYN_FAULT,
    M_HYB_JUMP,
    NMECH
};
static const char *const mech_names[NMECH] = {
    "unprotected", "sigprocmask", "rt-sigprocmask", "aseq-sigprocmask", "flag",
    "cas",         "rseq",        "dyn-jump",       "dyn-fault",        "hyb-jump"};
enum test { T_NULL, T_LIFO, T_FIFO, NTEST };
static const char *const test_names[NTEST] = {"null", "lifo", "fifo"};

typedef uint64_t (*runner)(long n);

#include "mosberger.h"

static struct tk_aseq_stack stack;
static struct tk_aseq_queue queue;
static struct tk_aseq_node node;
static sigset_t alrm, alrm_old;

/* ---- plain operations (unprotected; inside the kernel-mask schemes) ---- */
static inline void plain_push(struct tk_aseq_node *n)
{
    n->next = stack.top;
    stack.top = n;
}
static inline struct tk_aseq_node *plain_pop(void)
{
    struct tk_aseq_node *n = stack.top;
    if (n) stack.top = n->next;
    return n;
}
static inline void plain_enq(struct tk_aseq_node *n)
{
    n->next = NULL;
    if (queue.tail)
        queue.tail->next = n;
    else
        queue.head = n;
    queue.tail = n;
}
static inline struct tk_aseq_node *plain_deq(void)
{
    struct tk_aseq_node *n = queue.head;
    if (n) {
        queue.head = n->next;
        if (!queue.head) queue.tail = NULL;
    }
    return n;
}
#define PLAIN_LIFO()                                                                               \
    do {                                                                                           \
        plain_push(&node);                                                                         \
        BARRIER();                                                                                 \
        plain_pop();                                                                               \
    } while (0)
#define PLAIN_FIFO()                                                                               \
    do {                                                                                           \
        plain_enq(&node);                                                                          \
        BARRIER();                                                                                 \
        plain_deq();                                                                               \
    } while (0)

/* ---- kernel masks ---- */
#define SIGPROCMASK(op)                                                                            \
    do {                                                                                           \
        sigprocmask(SIG_BLOCK, &alrm, &alrm_old);                                                  \
        op;                                                                                        \
        sigprocmask(SIG_SETMASK, &alrm_old, NULL);                                                 \
    } while (0)
#define RT_SIGPROCMASK(op)                                                                         \
    do {                                                                                           \
        syscall(SYS_rt_sigprocmask, SIG_BLOCK, &alrm, &alrm_old, _NSIG / 8);                       \
        op;                                                                                        \
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &alrm_old, NULL, _NSIG / 8);                      \
    } while (0)
#define ASEQ_SIGPROCMASK(op)                                                                       \
    do {                                                                                           \
        tk_aseq_sigprocmask(SIG_BLOCK, &alrm, &alrm_old);                                          \
        op;                                                                                        \
        tk_aseq_sigprocmask(SIG_SETMASK, &alrm_old, NULL);                                         \
    } while (0)

/* ---- a flag the handler checks, and a pending flag the code checks ---- */
static __thread volatile int in_cs, pending;
static void run_pending(void)
{
    pending = 0;
}
#define FLAG(op)                                                                                   \
    do {                                                                                           \
        in_cs = 1;                                                                                 \
        BARRIER();                                                                                 \
        op;                                                                                        \
        BARRIER();                                                                                 \
        in_cs = 0;                                                                                 \
        if (__builtin_expect(pending, 0)) run_pending();                                           \
    } while (0)

/* ---- compare-and-swap ---- */
static uint64_t cas_word;
static struct tk_aseq_node *_Atomic cas_top;
static void cas_push(struct tk_aseq_node *n)
{
    struct tk_aseq_node *t = __atomic_load_n(&cas_top, __ATOMIC_RELAXED);
    do n->next = t;
    while (!__atomic_compare_exchange_n(&cas_top, &t, n, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}
static struct tk_aseq_node *cas_pop(void)
{
    struct tk_aseq_node *t = __atomic_load_n(&cas_top, __ATOMIC_ACQUIRE);
    while (t && !__atomic_compare_exchange_n(&cas_top, &t, t->next, 1, __ATOMIC_ACQUIRE,
                                             __ATOMIC_ACQUIRE)) {
    }
    return t;
}
/* Michael-Scott queue with a dummy node */
struct msnode {
    struct msnode *_Atomic next;
};
static struct msnode ms_dummy, ms_nodes[2];
static struct msnode *_Atomic ms_head = &ms_dummy, *_Atomic ms_tail = &ms_dummy;
static void ms_enq(struct msnode *n)
{
    __atomic_store_n(&n->next, NULL, __ATOMIC_RELAXED);
    for (;;) {
        struct msnode *t = __atomic_load_n(&ms_tail, __ATOMIC_ACQUIRE);
        struct msnode *nx = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE);
        if (t != __atomic_load_n(&ms_tail, __ATOMIC_ACQUIRE)) continue;
        if (nx) {
            __atomic_compare_exchange_n(&ms_tail, &t, nx, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
            continue;
        }
        struct msnode *null = NULL;
        if (__atomic_compare_exchange_n(&t->next, &null, n, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED)) {
            __atomic_compare_exchange_n(&ms_tail, &t, n, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
            return;
        }
    }
}
/* returns the node that now stops being the dummy (free for reuse) */
static struct msnode *ms_deq(void)
{
    for (;;) {
        struct msnode *h = __atomic_load_n(&ms_head, __ATOMIC_ACQUIRE);
        struct msnode *t = __atomic_load_n(&ms_tail, __ATOMIC_ACQUIRE);
        struct msnode *nx = __atomic_load_n(&h->next, __ATOMIC_ACQUIRE);
        if (h != __atomic_load_n(&ms_head, __ATOMIC_ACQUIRE)) continue;
        if (!nx) return NULL;
        if (h == t) {
            __atomic_compare_exchange_n(&ms_tail, &t, nx, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
            continue;
        }
        if (__atomic_compare_exchange_n(&ms_head, &h, nx, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            return h;
    }
}

/* ---- restartable sequences (glibc registers the thread's area) ---- */
static struct rseq *rs;
/* The descriptor (3), its abort handler (4, after the signature) that
 * retries from 5; the sequence runs from 1 to 2, its last store commits. */
#define RSEQ_CS                                                                                    \
    ".pushsection __rseq_cs, \"aw\"\n\t.balign 32\n"                                               \
    "3:\t.long 0, 0\n\t.quad 1f, 2f - 1f, 4f\n\t.popsection\n\t"                                   \
    ".pushsection __rseq_failure, \"ax\"\n\t.long 0x53053053\n"                                    \
    "4:\tjmp 5f\n\t.popsection\n\t"
static inline void rseq_null(void)
{
    __asm__ volatile(RSEQ_CS "5:\tlea 3b(%%rip), %%rax\n\t"
                             "mov %%rax, %c[cs](%[rs])\n"
                             "1:\n2:\n"
                     :
                     : [rs] "r"(rs), [cs] "i"(offsetof(struct rseq, rseq_cs))
                     : "rax", "memory");
}
static inline void rseq_push(struct tk_aseq_node *n)
{
    __asm__ volatile(
        RSEQ_CS "5:\tlea 3b(%%rip), %%rax\n\t"
                "mov %%rax, %c[cs](%[rs])\n"
                "1:\tmov (%[s]), %%rax\n\t"
                "mov %%rax, (%[n])\n\t"
                "mov %[n], (%[s])\n"
                "2:\n"
        :
        : [rs] "r"(rs), [cs] "i"(offsetof(struct rseq, rseq_cs)), [s] "r"(&stack.top), [n] "r"(n)
        : "rax", "memory");
}
static inline struct tk_aseq_node *rseq_pop(void)
{
    struct tk_aseq_node *n;
    __asm__ volatile(RSEQ_CS "5:\tlea 3b(%%rip), %%rax\n\t"
                             "mov %%rax, %c[cs](%[rs])\n"
                             "1:\tmov (%[s]), %[n]\n\t"
                             "test %[n], %[n]\n\t"
                             "jz 2f\n\t"
                             "mov (%[n]), %%rax\n\t"
                             "mov %%rax, (%[s])\n"
                             "2:\n"
                     : [n] "=&r"(n)
                     : [rs] "r"(rs), [cs] "i"(offsetof(struct rseq, rseq_cs)), [s] "r"(&stack.top)
                     : "rax", "memory", "cc");
    return n;
}

/* ---- the runners ---- */
TK_ASEQ_NO_SANITIZE __attribute__((noinline)) static uint64_t null_unprot(long n)
{
    TIMED(n, BARRIER());
}
__attribute__((noinline)) static uint64_t null_sigprocmask(long n)
{
    TIMED(n, SIGPROCMASK(BARRIER()));
}
__attribute__((noinline)) static uint64_t null_rt(long n)
{
    TIMED(n, RT_SIGPROCMASK(BARRIER()));
}
__attribute__((noinline)) static uint64_t null_aseq_mask(long n)
{
    TIMED(n, ASEQ_SIGPROCMASK(BARRIER()));
}
__attribute__((noinline)) static uint64_t null_flag(long n)
{
    TIMED(n, FLAG(BARRIER()));
}
__attribute__((noinline)) static uint64_t null_cas(long n)
{
    TIMED(n, {
        uint64_t v = cas_word;
        __atomic_compare_exchange_n(&cas_word, &v, v + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
    });
}
__attribute__((noinline)) static uint64_t null_rseq(long n)
{
    TIMED(n, rseq_null());
}
TK_ASEQ_NO_SANITIZE __attribute__((noinline)) static uint64_t null_dyn_jump(long n)
{
    TIMED(n, TK_ASEQ_DYN_JUMP(TK_ASEQ_ALL, {}));
}
TK_ASEQ_NO_SANITIZE __attribute__((noinline)) static uint64_t null_dyn_fault(long n)
{
    TIMED(n, TK_ASEQ_DYN_FAULT(TK_ASEQ_ALL, {}));
}
TK_ASEQ_NO_SANITIZE __attribute__((noinline)) static uint64_t null_hyb_jump(long n)
{
    TIMED(n, TK_ASEQ_HYB_JUMP(TK_ASEQ_ALL, {}));
}

__attribute__((noinline)) static uint64_t lifo_sigprocmask(long n)
{
    TIMED(n, {
        SIGPROCMASK(plain_push(&node));
        SIGPROCMASK(plain_pop());
    });
}
__attribute__((noinline)) static uint64_t lifo_rt(long n)
{
    TIMED(n, {
        RT_SIGPROCMASK(plain_push(&node));
        RT_SIGPROCMASK(plain_pop());
    });
}
__attribute__((noinline)) static uint64_t lifo_aseq_mask(long n)
{
    TIMED(n, {
        ASEQ_SIGPROCMASK(plain_push(&node));
        ASEQ_SIGPROCMASK(plain_pop());
    });
}
__attribute__((noinline)) static uint64_t lifo_flag(long n)
{
    TIMED(n, {
        FLAG(plain_push(&node));
        FLAG(plain_pop());
    });
}
__attribute__((noinline)) static uint64_t lifo_cas(long n)
{
    TIMED(n, {
        cas_push(&node);
        cas_pop();
    });
}
__attribute__((noinline)) static uint64_t lifo_rseq(long n)
{
    TIMED(n, {
        rseq_push(&node);
        rseq_pop();
    });
}
__attribute__((noinline)) static uint64_t lifo_dyn_jump(long n)
{
    TIMED(n, {
        tk_aseq_push_dyn_jump(&stack, &node);
        tk_aseq_pop_dyn_jump(&stack);
    });
}
__attribute__((noinline)) static uint64_t lifo_dyn_fault(long n)
{
    TIMED(n, {
        tk_aseq_push_dyn_fault(&stack, &node);
        tk_aseq_pop_dyn_fault(&stack);
    });
}
__attribute__((noinline)) static uint64_t lifo_hyb_jump(long n)
{
    TIMED(n, {
        tk_aseq_push(&stack, &node);
        tk_aseq_pop(&stack);
    });
}

__attribute__((noinline)) static uint64_t fifo_sigprocmask(long n)
{
    TIMED(n, {
        SIGPROCMASK(plain_enq(&node));
        SIGPROCMASK(plain_deq());
    });
}
__attribute__((noinline)) static uint64_t fifo_rt(long n)
{
    TIMED(n, {
        RT_SIGPROCMASK(plain_enq(&node));
        RT_SIGPROCMASK(plain_deq());
    });
}
__attribute__((noinline)) static uint64_t fifo_aseq_mask(long n)
{
    TIMED(n, {
        ASEQ_SIGPROCMASK(plain_enq(&node));
        ASEQ_SIGPROCMASK(plain_deq());
    });
}
__attribute__((noinline)) static uint64_t fifo_flag(long n)
{
    TIMED(n, {
        FLAG(plain_enq(&node));
        FLAG(plain_deq());
    });
}
__attribute__((noinline)) static uint64_t fifo_cas(long n)
{
    static struct msnode *spare = &ms_nodes[0];
    TIMED(n, {
        ms_enq(spare);
        spare = ms_deq();
    });
}
__attribute__((noinline)) static uint64_t fifo_dyn_jump(long n)
{
    TIMED(n, {
        tk_aseq_enqueue_dyn_jump(&queue, &node);
        tk_aseq_dequeue_dyn_jump(&queue);
    });
}
__attribute__((noinline)) static uint64_t fifo_dyn_fault(long n)
{
    TIMED(n, {
        tk_aseq_enqueue_dyn_fault(&queue, &node);
        tk_aseq_dequeue_dyn_fault(&queue);
    });
}
__attribute__((noinline)) static uint64_t fifo_hyb_jump(long n)
{
    TIMED(n, {
        tk_aseq_enqueue(&queue, &node);
        tk_aseq_dequeue(&queue);
    });
}

static const runner runners[NTEST][NMECH] = {
    {null_unprot, null_sigprocmask, null_rt, null_aseq_mask, null_flag, null_cas, null_rseq,
     null_dyn_jump, null_dyn_fault, null_hyb_jump},
    {lifo_unprot, lifo_sigprocmask, lifo_rt, lifo_aseq_mask, lifo_flag, lifo_cas, lifo_rseq,
     lifo_dyn_jump, lifo_dyn_fault, lifo_hyb_jump},
    {fifo_unprot, fifo_sigprocmask, fifo_rt, fifo_aseq_mask, fifo_flag, fifo_cas, NULL,
     fifo_dyn_jump, fifo_dyn_fault, fifo_hyb_jump},
};

/* ---- one rollforward ---- */
static volatile long handled;
static void on_usr2(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    handled++;
}
__attribute__((noinline)) static uint64_t raise_outside(long n)
{
    TIMED(n, raise(SIGUSR2));
}
__attribute__((noinline)) static uint64_t raise_inside(long n)
{
    TIMED(n, TK_ASEQ_DYN_JUMP(TK_ASEQ_ALL, { raise(SIGUSR2); }));
}

static void on_alrm(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double med(struct bench_fig *f)
{
    double v[64];
    memcpy(v, f->v, sizeof(double) * (size_t)f->n);
    qsort(v, (size_t)f->n, sizeof v[0], cmp_double);
    return f->n ? v[f->n / 2] : 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    if (tk_aseq_signal(SIGALRM, on_alrm, NULL, SA_RESTART, 0) ||
        tk_aseq_signal(SIGUSR2, on_usr2, NULL, SA_RESTART, 0)) {
        fprintf(stderr, "mosberger: %s\n", tk_last_error());
        return 1;
    }
    if (__rseq_size > 0) rs = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
    double tsc_per_ns = bench_tsc_per_ns();

    long iters[NMECH];
    for (int m = 0; m < NMECH; m++) {
        bool slow = m == M_SIGPROCMASK || m == M_RT_SIGPROCMASK;
        iters[m] = (o.quick ? 20000 : 1000000) / (slow ? 50 : 1);
    }
    static struct bench_fig fig[NTEST][NMECH];
    for (int r = -1; r < o.reps; r++) {
        for (int t = 0; t < NTEST; t++)
            for (int m = 0; m < NMECH; m++) {
                if (!runners[t][m] || (m == M_RSEQ && !rs)) continue;
                uint64_t c = runners[t][m](iters[m]);
                if (r >= 0) bench_add(&fig[t][m], (double)c / (double)iters[m]);
            }
        bench_progress("mosberger: repetition %d of %d", r + 1, o.reps);
    }
    double md[NTEST][NMECH]; /* medians, before emitting uses the figures */
    for (int t = 0; t < NTEST; t++)
        for (int m = 0; m < NMECH; m++) md[t][m] = med(&fig[t][m]);
    for (int t = 0; t < NTEST; t++)
        for (int m = 0; m < NMECH; m++) {
            char exp[64];
            snprintf(exp, sizeof exp, "mosberger/%s", test_names[t]);
            if (m == M_RSEQ && !rs)
                bench_emit_null(exp, mech_names[m], "", "cycles", "cycles",
                                "glibc did not register restartable sequences for this thread");
            else if (!runners[t][m])
                bench_emit_null(exp, mech_names[m], "", "cycles", "cycles",
                                "an enqueue stores the last node's link and the tail; a "
                                "restartable sequence commits one store");
            else
                bench_emit_tsc(exp, mech_names[m], "", "cycles", "cycles", &fig[t][m]);
        }

    /* one rollforward: raise() deferred to a Dyn/Jump sequence's end against
     * raise() outside any sequence, interleaved */
    struct bench_fig rin = {.n = 0}, rout = {.n = 0}, rdiff = {.n = 0};
    long rn = o.quick ? 2000 : 50000;
    for (int r = -1; r < o.reps; r++) {
        long h0 = handled;
        double a = (double)raise_outside(rn) / (double)rn;
        double b = (double)raise_inside(rn) / (double)rn;
        if (handled - h0 != 2 * rn) {
            fprintf(stderr, "mosberger: %ld signals handled of %ld\n", handled - h0, 2 * rn);
            return 1;
        }
        if (r >= 0) {
            bench_add(&rout, a);
            bench_add(&rin, b);
            bench_add(&rdiff, b - a);
        }
    }
    double o_r = med(&rdiff);
    const char *tsc_why = bench_tsc_unusable();
    bench_emit_tsc("mosberger/signal", "at-once", "\"how\": \"raise\"", "cycles", "cycles", &rout);
    bench_emit_tsc("mosberger/signal", "dyn-jump", "\"how\": \"raise, rolled forward\"", "cycles",
                   "cycles", &rin);
    const char *from_signal = "\"derived\": true, \"derived_from\": [\"mosberger/signal\"]";
    if (tsc_why)
        bench_emit_null_ex("mosberger/rollforward", "dyn-jump", "", "cycles", "cycles", tsc_why,
                           from_signal);
    else
        bench_emit_ex("mosberger/rollforward", "dyn-jump", "", "cycles", "cycles", &rdiff,
                      from_signal);

    /* section 4.3: R = (O_H - O_S) / (D_A * O_R) for the LIFO's sequences
     * (two per operation), D_A their unprotected duration */
    double d_a = md[T_LIFO][M_UNPROT] / 2;
    double o_s = (md[T_LIFO][M_HYB_JUMP] - md[T_LIFO][M_UNPROT]) / 2;
    if (o_s < 0) o_s = 0;
    const int versus[] = {M_SIGPROCMASK, M_CAS};
    for (size_t k = 0; k < sizeof versus / sizeof versus[0]; k++) {
        int m = versus[k];
        double o_h = (md[T_LIFO][m] - md[T_LIFO][M_UNPROT]) / 2;
        char p[96];
        snprintf(p, sizeof p, "\"versus\": \"%s\", \"sequence_cycles\": %.1f", mech_names[m], d_a);
        const char *from = "\"derived\": true, \"derived_from\": [\"mosberger/lifo\", "
                           "\"mosberger/rollforward\"]";
        if (tsc_why) {
            bench_emit_null_ex("mosberger/breakeven-rate", "hyb-jump", p, "rate", "per_s", tsc_why,
                               from);
            continue;
        }
        if (o_r <= 0 || d_a <= 0 || o_h <= o_s) {
            bench_emit_null_ex("mosberger/breakeven-rate", "hyb-jump", p, "rate", "per_s",
                               "hyb-jump is not cheaper per sequence here", from);
            continue;
        }
        double r_per_cycle = (o_h - o_s) / (d_a * o_r);
        struct bench_fig rate = {.n = 0};
        bench_add(&rate, r_per_cycle * tsc_per_ns * 1e9);
        bench_emit_ex("mosberger/breakeven-rate", "hyb-jump", p, "rate", "per_s", &rate, from);
    }
    return 0;
}
