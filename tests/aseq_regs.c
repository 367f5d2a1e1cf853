/* tests/aseq_regs.c - a rolled-forward atomic sequence leaves every
 * register as it found it.
 *
 * regs_run() (tests/regs.h) loads random values into the whole register
 * file and the red zone, then runs three sequences back to back, one per
 * scheme (Dyn/Jump, Dyn/Fault, Hyb/Jump), written in assembly with the
 * records trapkit/aseq.h's macros emit, and saves everything again.
 * Another thread floods the main thread with a signal whose handler
 * (installed with tk_aseq_signal) dirties the vector, x87 and SSE state
 * and the stack; signals that land inside a sequence are rolled forward,
 * through the landing (Dyn/Jump, Hyb/Jump) or the fault page (Dyn/Fault).
 * Every register but r11 (the schemes' scratch register, which ends as the
 * last sequence's end address) must come out as it went in.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <trapkit/aseq.h>

#define SEQ_NOPS ".rept 24\n nop\n .endr\n"
#define TLS "%fs:tk__aseq_self@tpoff"
#define REGS_MIDDLE                                                                                \
    /* Dyn/Jump */                                                                                 \
    "    lea 7781f(%rip), %r11\n"                                                                  \
    "    mov %r11, " TLS "\n"                                                                      \
    "    movq $1000001, " TLS "+8\n"                                                               \
    "7780:\n" TK__REC(TK_ASEQ_REC_DYN_ENTRY, "7780b", "7781f", "1000000") SEQ_NOPS                 \
        "    movq $0, " TLS "+8\n"                                                                 \
        "7782:\n"                                                                                  \
        "    jmp *" TLS "\n"                                                                       \
        "7781:\n" TK__REC(TK_ASEQ_REC_DYN_JUMP, "7782b", "7781b", "0") /* Dyn/Fault */             \
        "    lea 7784f(%rip), %r11\n"                                                              \
        "    mov %r11, " TLS "\n"                                                                  \
        "    movq $1000001, " TLS "+8\n"                                                           \
        "7783:\n" TK__REC(TK_ASEQ_REC_DYN_ENTRY, "7783b", "7784f", "1000000") SEQ_NOPS             \
        "    mov " TLS "+16, %r11\n"                                                               \
        "7785:\n"                                                                                  \
        "    mov (%r11), %r11\n"                                                                   \
        "    mov %r11, " TLS "+8\n"                                                                \
        "7784:\n" TK__REC(TK_ASEQ_REC_DYN_FAULT, "7785b", "7784b", "0") /* Hyb/Jump */             \
        "    lea 7787f(%rip), %r11\n"                                                              \
        "7786:\n" TK__REC(TK_ASEQ_REC_HYB_ENTRY, "7786b", "7787f", "1000000") SEQ_NOPS             \
        "7788:\n"                                                                                  \
        "    jmp *%r11\n"                                                                          \
        "    .long 1000000\n"                                                                      \
        "7787:\n"                                                                                  \
        ".globl regs_seq_end\n"                                                                    \
        "regs_seq_end:\n" TK__REC(TK_ASEQ_REC_HYB_JUMP, "7788b", "7787b", "1000000")

#include "regs.h"
extern char regs_seq_end[];

static pthread_t main_thread;
static atomic_bool stop;
static volatile long handled;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    handled++;
    dirty_fp_state();
}

static void *flood(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        pthread_kill(main_thread, SIGUSR1);
        for (int i = 0; i < 200; i++) __builtin_ia32_pause();
    }
    return NULL;
}

int main(void)
{
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        level = 2;
    else if (__builtin_cpu_supports("avx"))
        level = 1;
    CHECK(tk_aseq_check(2) == 0);
    main_thread = pthread_self();
    CHECK_OK(tk_aseq_signal(SIGUSR1, on_signal, NULL, SA_RESTART, 0));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, flood, NULL) == 0);
    tk_aseq_stats st;
    long i;
    /* 5,000,000 runs, or more (up to 200 s) until 100 rollforwards landed:
     * a loaded machine delivers fewer signals inside the sequences (under
     * AddressSanitizer, whose checks make each run ~10 times longer,
     * 1,000,000: as many signals land) */
#ifdef __SANITIZE_ADDRESS__
    const long min_runs = 1000000;
#else
    const long min_runs = 5000000;
#endif
    time_t t0 = time(NULL);
    for (i = 0;; i++) {
        if (i >= min_runs) {
            tk_aseq_get_stats(&st);
            if (st.rollforwards >= 100 || time(NULL) - t0 > 200) break;
        }
        randomise(NULL);
        g_in.gpr[10] = (uint64_t)regs_seq_end; /* r11 ends as the last sequence's end */
        regs_run();
        compare("flood", i);
        tk_aseq_get_stats(&st);
        if (st.rolled[0] >= 500 && st.rolled[1] >= 500 && st.rolled[2] >= 500) break;
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    tk_aseq_get_stats(&st);
    printf("vector level %d: %ld runs, %lu signals, %lu rolled forward, %lu at once\n", level, i,
           (unsigned long)st.signals, (unsigned long)st.rollforwards, (unsigned long)st.at_once);
    printf("by scheme: Dyn/Jump %lu, Dyn/Fault %lu, Hyb/Jump %lu\n", (unsigned long)st.rolled[0],
           (unsigned long)st.rolled[1], (unsigned long)st.rolled[2]);
    CHECK(st.rollforwards >= 100);
    CHECK(st.rolled[0] > 0 && st.rolled[1] > 0 && st.rolled[2] > 0);
    CHECK(st.refused == 0);
    printf("ok: registers intact across %lu rollforwards\n", (unsigned long)st.rollforwards);
    return 0;
}
