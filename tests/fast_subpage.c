/* tests/fast_subpage.c - sub-page protection (512 B, 1 KiB, 2 KiB logical
 * pages on 4 KiB hardware pages): accesses to open sub-pages of a protected
 * hardware page complete without the handler, with the same results as on
 * ordinary memory; accesses that touch a protected sub-page reach it, at
 * the first protected byte.  Loads, stores, read-modify-write, atomics,
 * SSE, REP MOVS/STOS, accesses straddling two sub-pages; one thread and
 * many, under a signal flood.  Run with TRAPKIT_FAST on (emulation) and
 * off (single-stepping).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "testutil.h"

static volatile long calls;
static atomic_bool race_stop;
static volatile uintptr_t last_addr, last_page;
static volatile int last_access;

static tk_action open_subpage(const tk_fault *f, void *arg)
{
    (void)arg;
    calls++;
    last_addr = (uintptr_t)f->addr;
    last_page = (uintptr_t)f->page;
    last_access = f->access;
    return tk_test_open(f);
}

/* ---- instructions, each returning the flags it left ------------------- */
#define FLAGS_OUT "pushfq\n\tpop %[fl]\n\t"
#define RZ_IN "lea -128(%%rsp), %%rsp\n\t"
#define RZ_OUT "lea 128(%%rsp), %%rsp\n\t"
#define ARITH 0x8d5ul

struct res {
    uint64_t reg, flags;
};

typedef struct res (*op_fn)(void *p, uint64_t v);

#define OP_STORE(NAME, INSN)                                                                       \
    static struct res NAME(void *p, uint64_t v) {                                                  \
        struct res r = {v, 0};                                                                     \
        __asm__ volatile(RZ_IN "cmp %%rax, %%rax\n\t" INSN "\n\t" FLAGS_OUT RZ_OUT                 \
                         : [fl] "=r"(r.flags), [v] "+r"(r.reg)                                     \
                         : [p] "r"(p)                                                              \
                         : "cc", "memory", "rax");                                                 \
        r.flags &= ARITH;                                                                          \
        return r;                                                                                  \
    }

OP_STORE(op_movb, "movb %b[v], (%[p])")
OP_STORE(op_movw, "movw %w[v], (%[p])")
OP_STORE(op_movl, "movl %k[v], (%[p])")
OP_STORE(op_movq, "movq %[v], (%[p])")
OP_STORE(op_movimm, "movl $0x12345678, (%[p])")
OP_STORE(op_loadq, "movq (%[p]), %[v]")
OP_STORE(op_loadl, "movl (%[p]), %k[v]")
OP_STORE(op_movzbl, "movzbl (%[p]), %k[v]")
OP_STORE(op_movsbq, "movsbq (%[p]), %[v]")
OP_STORE(op_movswq, "movswq (%[p]), %[v]")
OP_STORE(op_movslq, "movslq (%[p]), %[v]")
OP_STORE(op_addl, "addl %k[v], (%[p])")
OP_STORE(op_addimm, "addq $-5, (%[p])")
OP_STORE(op_subb, "subb %b[v], (%[p])")
OP_STORE(op_sbbq, "stc\n\tsbbq %[v], (%[p])")
OP_STORE(op_adcl, "stc\n\tadcl (%[p]), %k[v]")
OP_STORE(op_orw, "orw (%[p]), %w[v]")
OP_STORE(op_xorq, "xorq %[v], (%[p])")
OP_STORE(op_andimm, "andl $0xf0f0f0f0, (%[p])")
OP_STORE(op_cmpq, "cmpq %[v], (%[p])")
OP_STORE(op_cmpb2, "cmpb (%[p]), %b[v]")
OP_STORE(op_testb, "testb $0x81, (%[p])")
OP_STORE(op_testq, "testq %[v], (%[p])")
OP_STORE(op_incq, "incq (%[p])")
OP_STORE(op_decb, "decb (%[p])")
OP_STORE(op_negl, "negl (%[p])")
OP_STORE(op_notw, "notw (%[p])")
OP_STORE(op_lockadd, "lock addq %[v], (%[p])")
OP_STORE(op_lockinc, "lock incl (%[p])")
OP_STORE(op_xadd, "lock xaddq %[v], (%[p])")
OP_STORE(op_xchg, "xchgl %k[v], (%[p])")
OP_STORE(op_cmpxchg_ok, "movq (%[p]), %%rax\n\tlock cmpxchgq %[v], (%[p])")
OP_STORE(op_cmpxchg_fail, "movq %[v], %%rax\n\tnotq %%rax\n\tlock cmpxchgq %[v], (%[p])\n\t"
                          "movq %%rax, %[v]")
OP_STORE(op_sse_store, "movq %[v], %%xmm0\n\tpunpcklqdq %%xmm0, %%xmm0\n\tmovdqu %%xmm0, (%[p])")
OP_STORE(op_sse_load, "movdqu (%[p]), %%xmm1\n\tpsrldq $3, %%xmm1\n\tmovq %%xmm1, %[v]")
OP_STORE(op_movss, "movss (%[p]), %%xmm2\n\tmovq %%xmm2, %[v]")
OP_STORE(op_movsd_st, "movq %[v], %%xmm3\n\tmovsd %%xmm3, (%[p])")
OP_STORE(op_movq_ld, "movq (%[p]), %%xmm4\n\tmovq %%xmm4, %[v]")

static const struct {
    const char *name;
    op_fn fn;
    unsigned len; /* bytes touched */
} OPS[] = {
    {"movb", op_movb, 1},
    {"movw", op_movw, 2},
    {"movl", op_movl, 4},
    {"movq", op_movq, 8},
    {"mov imm", op_movimm, 4},
    {"load q", op_loadq, 8},
    {"load l", op_loadl, 4},
    {"movzbl", op_movzbl, 1},
    {"movsbq", op_movsbq, 1},
    {"movswq", op_movswq, 2},
    {"movslq", op_movslq, 4},
    {"add", op_addl, 4},
    {"add imm", op_addimm, 8},
    {"sub b", op_subb, 1},
    {"sbb", op_sbbq, 8},
    {"adc", op_adcl, 4},
    {"or w", op_orw, 2},
    {"xor", op_xorq, 8},
    {"and imm", op_andimm, 4},
    {"cmp", op_cmpq, 8},
    {"cmp b", op_cmpb2, 1},
    {"test imm", op_testb, 1},
    {"test", op_testq, 8},
    {"inc", op_incq, 8},
    {"dec b", op_decb, 1},
    {"neg", op_negl, 4},
    {"not w", op_notw, 2},
    {"lock add", op_lockadd, 8},
    {"lock inc", op_lockinc, 4},
    {"xadd", op_xadd, 8},
    {"xchg", op_xchg, 4},
    {"cmpxchg ok", op_cmpxchg_ok, 8},
    {"cmpxchg fail", op_cmpxchg_fail, 8},
    {"movdqu st", op_sse_store, 16},
    {"movdqu ld", op_sse_load, 16},
    {"movss", op_movss, 4},
    {"movsd st", op_movsd_st, 8},
    {"movq ld", op_movq_ld, 8},
};
enum { NOPS = sizeof OPS / sizeof OPS[0] };

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    return tk_test_xorshift(&rng);
}

static void rep_stosb(void *dst, int c, size_t n)
{
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(c) : "memory");
}

static void rep_movsb(void *dst, const void *src, size_t n)
{
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static void rep_movsq(void *dst, const void *src, size_t n)
{
    __asm__ volatile("rep movsq" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

/* Every instruction on an open sub-page next to a protected one gives the
 * same memory, register and flags as on ordinary memory, without calling
 * the handler. */
static void test_open_subpages(size_t sp)
{
    size_t hw = tk_test_page();
    tk_region_config c = {.len = 2 * hw, .handler = open_subpage, .page_size = sp};
    tk_region *r;
    CHECK_OK(tk_region_create(&c, &r));
    CHECK(tk_region_page_size(r) == sp);
    unsigned char *base = tk_region_base(r);
    unsigned char *plain =
        mmap(NULL, hw, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(plain != MAP_FAILED);
    size_t per = hw / sp;
    for (size_t prot_sp = 0; prot_sp < per; prot_sp++) {
        unsigned char *guard = base + prot_sp * sp;
        for (size_t k = 0; k < per; k++) {
            if (k == prot_sp) continue;
            for (int o = 0; o < NOPS; o++) {
                /* a random offset where the access fits in sub-page k */
                size_t off = k * sp + (rnd() % (sp - 16));
                uint64_t init = rnd(), v = rnd();
                memcpy(base + off, &init, 8);
                memcpy(base + off + 8, &init, 8);
                memcpy(plain + off, &init, 8);
                memcpy(plain + off + 8, &init, 8);
                CHECK_OK(tk_protect(r, guard, sp, (o & 1) ? TK_PROT_READ : TK_PROT_NONE));
                long before = calls;
                struct res got = OPS[o].fn(base + off, v);
                struct res want = OPS[o].fn(plain + off, v);
                if (calls != before || got.reg != want.reg || got.flags != want.flags ||
                    memcmp(base + off, plain + off, 16)) {
                    fprintf(stderr,
                            "%zu-byte sub-pages, %s at offset %zu (sub-page %zu protected): "
                            "handler calls %ld, reg %#lx/%#lx, flags %#lx/%#lx\n",
                            sp, OPS[o].name, off, prot_sp, calls - before, (unsigned long)got.reg,
                            (unsigned long)want.reg, (unsigned long)got.flags,
                            (unsigned long)want.flags);
                    exit(1);
                }
                CHECK_OK(tk_unprot(r, guard, sp));
            }
        }
    }

    /* A straddling access reaches the handler at the first protected byte,
     * then completes. */
    for (size_t k = 1; k < per; k++) {
        unsigned char *edge = base + k * sp;
        CHECK_OK(tk_protect(r, edge, sp, TK_PROT_READ));
        long before = calls;
        op_movq(edge - 4, 0x1122334455667788ull);
        CHECK(calls == before + 1);
        CHECK(last_addr == (uintptr_t)edge && last_page == (uintptr_t)edge);
        CHECK(last_access == TK_ACCESS_WRITE);
        uint64_t back;
        memcpy(&back, edge - 4, 8);
        CHECK(back == 0x1122334455667788ull);
    }

    /* Reading a no-access sub-page reaches the handler as a read; reading
     * a read-only one does not. */
    CHECK_OK(tk_protect(r, base, sp, TK_PROT_NONE));
    CHECK_OK(tk_protect(r, base + sp, sp, TK_PROT_READ));
    long before = calls;
    (void)op_loadq(base + sp + 8, 0);
    CHECK(calls == before);
    (void)op_loadl(base + 12, 0);
    CHECK(calls == before + 1 && last_access == TK_ACCESS_READ &&
          last_addr == (uintptr_t)base + 12);
    CHECK_OK(tk_unprot(r, base, 2 * hw));

    /* REP STOS and REP MOVS run up to the protected sub-page, reach the
     * handler there once, and finish. */
    unsigned char *mid = base + sp;
    CHECK_OK(tk_protect(r, mid + sp, sp, TK_PROT_READ));
    before = calls;
    rep_stosb(mid, 0xab, 2 * sp);
    CHECK(calls == before + 1 && last_addr == (uintptr_t)(mid + sp));
    for (size_t i = 0; i < 2 * sp; i++) CHECK(mid[i] == 0xab);
    for (size_t i = 0; i < hw; i++) plain[i] = (unsigned char)rnd();
    CHECK_OK(tk_protect(r, mid + sp, sp, TK_PROT_READ));
    before = calls;
    rep_movsb(mid + 3, plain, 2 * sp - 3);
    CHECK(calls == before + 1 && last_addr == (uintptr_t)(mid + sp));
    CHECK(memcmp(mid + 3, plain, 2 * sp - 3) == 0);
    /* backwards (DF set) and in 8-byte elements */
    CHECK_OK(tk_protect(r, mid, sp, TK_PROT_READ));
    before = calls;
    rep_movsq(mid + sp, plain + 64, sp / 8);
    CHECK(calls == before && memcmp(mid + sp, plain + 64, sp) == 0);
    __asm__ volatile("std\n\trep movsb\n\tcld"
                     :
                     : "D"(mid + 2 * sp - 1), "S"(plain + 2 * sp - 1), "c"(sp)
                     : "memory");
    CHECK(calls == before && memcmp(mid + sp, plain + sp, sp) == 0);
    CHECK_OK(tk_unprot(r, mid, sp));

    munmap(plain, hw);
    CHECK_OK(tk_region_destroy(r));
}

/* ---- threads ------------------------------------------------------------ */
struct worker {
    tk_region *r;
    volatile uint64_t *own;
    volatile uint64_t *shared;
    long iters;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (long i = 0; i < w->iters; i++) {
        *w->own += 1;                                       /* plain add on its own sub-page */
        __atomic_fetch_add(w->shared, 1, __ATOMIC_SEQ_CST); /* lock add, shared */
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
}

static void test_threads(size_t sp)
{
    size_t hw = tk_test_page();
    tk_region_config c = {.len = hw, .handler = open_subpage, .page_size = sp};
    tk_region *r;
    CHECK_OK(tk_region_create(&c, &r));
    unsigned char *base = tk_region_base(r);
    memset(base, 0x5a, sp);
    CHECK_OK(tk_protect(r, base, sp, TK_PROT_READ)); /* sub-page 0 stays read-only */
    enum { NT = 4 };
    size_t per = hw / sp;
    struct worker w[NT];
    pthread_t t[NT];
    volatile uint64_t *shared = (volatile uint64_t *)(base + sp + 64);
    *shared = 0;
    long before = calls;
    for (int i = 0; i < NT; i++) {
        size_t k = 1 + (size_t)i % (per - 1);
        w[i] =
            (struct worker){r, (volatile uint64_t *)(base + k * sp + 8 * (size_t)i), shared, 3000};
        *w[i].own = 0;
    }
    struct itimerval it = {{0, 200}, {0, 200}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    for (int i = 0; i < NT; i++) CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    struct itimerval stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &stop, NULL);
    for (int i = 0; i < NT; i++) CHECK(*w[i].own == 3000);
    CHECK(*shared == 3000u * NT);
    CHECK(calls == before);
    for (size_t i = 0; i < sp; i++) CHECK(base[i] == 0x5a); /* the protected one, untouched */
    CHECK(tk_protection(r, base) == TK_PROT_READ);
    CHECK_OK(tk_region_destroy(r));
}

/* tk_protect against a writer on another sub-page of the same hardware
 * page: once it returns, no write of that thread lands (this thread's own
 * reads of the page are completed by emulation or a read-only step). */
static tk_action wait_open(const tk_fault *f, void *arg)
{
    (void)arg;
    while (tk_protection(f->region, f->page) != TK_PROT_RW && !atomic_load(&race_stop))
        __builtin_ia32_pause();
    return TK_RESUME;
}

static void *race_writer(void *arg)
{
    _Atomic long *x = arg; /* racing with the reads below on purpose: relaxed atomics */
    for (long i = 1; !atomic_load(&race_stop); i++)
        atomic_store_explicit(x, i, memory_order_relaxed);
    return NULL;
}

static void test_protect_race(void)
{
    tk_region_config c = {.len = tk_test_page(), .handler = wait_open, .page_size = 64};
    tk_region *r;
    CHECK_OK(tk_region_create(&c, &r));
    char *b = tk_region_base(r);
    CHECK_OK(tk_protect(r, b, 64, TK_PROT_NONE)); /* the hardware page stays protected */
    atomic_store(&race_stop, false);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, race_writer, b + 64) == 0);
    long late = 0;
    for (long k = 0; k < 100000; k++) {
        CHECK_OK(tk_protect(r, b + 64, 64, TK_PROT_READ));
        long v1 = atomic_load_explicit((_Atomic long *)(b + 64), memory_order_relaxed);
        for (int s = 0; s < 100; s++) __builtin_ia32_pause();
        long v2 = atomic_load_explicit((_Atomic long *)(b + 64), memory_order_relaxed);
        late += v1 != v2;
        CHECK_OK(tk_unprot(r, b + 64, 64));
    }
    atomic_store(&race_stop, true);
    pthread_join(t, NULL);
    if (late) fprintf(stderr, "%ld writes landed after tk_protect(READ) returned\n", late);
    CHECK(late == 0);
    CHECK_OK(tk_region_destroy(r));
}

static void test_bad_input(void)
{
    size_t hw = tk_test_page();
    tk_region *r;
    tk_region_config c = {.len = hw, .page_size = 1024};
    void *m = mmap(NULL, hw, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    c.addr = m;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.addr = NULL;
    c.flags = TK_REGION_DIRTY;
    CHECK_ERR(tk_region_create(&c, &r), -EOPNOTSUPP);
    c.flags = 0;
    c.mech = TK_MECH_UFFD_SIGBUS;
    CHECK_ERR(tk_region_create(&c, &r), -EOPNOTSUPP);
    c.mech = TK_MECH_AUTO;
    c.page_size = 32;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.page_size = 768;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.page_size = 1024;
    c.len = 3 * 1024;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.len = hw;
    CHECK_OK(tk_region_create(&c, &r));
    unsigned char *b = tk_region_base(r);
    CHECK_ERR(tk_protect(r, b + 512, 1024, TK_PROT_READ), -EINVAL); /* unaligned */
    CHECK_ERR(tk_protect(r, b + 1024, 100, TK_PROT_READ), -EINVAL);
    CHECK_ERR(tk_protect(r, b + hw, 1024, TK_PROT_READ), -EINVAL); /* outside */
    CHECK_OK(tk_region_destroy(r));
    munmap(m, hw);
}

int main(void)
{
    if (tk_test_page() != 4096) {
        printf("skipped: the sub-page sizes tested are for 4 KiB pages\n");
        return TK_SKIP;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    test_bad_input();
    test_protect_race();
    size_t sizes[] = {512, 1024, 2048};
    for (int i = 0; i < 3; i++) {
        test_open_subpages(sizes[i]);
        test_threads(sizes[i]);
        printf("%zu-byte sub-pages: ok\n", sizes[i]);
    }
    printf("ok: sub-page protection (%s)\n",
           (tk_fast_paths() & TK_FAST_SUBPAGE) ? "emulation" : "single-step");
    return 0;
}
