/* tests/guard_basic.c - guard pages (trapkit/guard.h): sandboxes on every
 * path and bump arenas.
 *
 * Sandboxes: out-of-bounds accesses reported by tk_sandbox_call with their
 * offset, repeatedly, nested, with a SIGSEGV handler of the program's own
 * installed first; grow and reset; content; bad configurations refused;
 * faults outside every sandbox (or outside a call) still kill the process;
 * calls left early by the program's own siglongjmp (the stack reused, more
 * of them than a thread may have under way, then an out-of-bounds access
 * outside every call, which must kill); at most 64 calls nested; calls in
 * a signal handler on an alternate stack, above and below the thread's
 * stack, nested in the call the signal interrupted.
 * Arenas: growth in place, the hard limit, on_full resetting the arena
 * (the faulting allocation retried at the new top), large objects, the
 * checked variant, and failures outside tk_arena_try.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <trapkit/guard.h>

#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

static char *self_path;

/* ---- sandbox helpers --------------------------------------------------- */

struct access {
    uint64_t off;
    int write;
    uint8_t value;  /* read: what was read */
    int iterations; /* for the nested cases */
    tk_sandbox *other;
    uint64_t other_off;
    int inner_rc;
    tk_sandbox_trap inner_trap;
};

static void do_access(tk_sandbox *sb, void *arg)
{
    struct access *a = arg;
    volatile uint8_t *p = (uint8_t *)tk_sandbox_base(sb) + a->off;
    if (a->write)
        *p = 0x5a;
    else
        a->value = *p;
}

static int access_at(tk_sandbox *sb, uint64_t off, int write, tk_sandbox_trap *t)
{
    struct access a = {.off = off, .write = write};
    return tk_sandbox_call(sb, do_access, &a, t);
}

static void expect_oob(tk_sandbox *sb, uint64_t off, int write)
{
    tk_sandbox_trap t;
    memset(&t, 0, sizeof t);
    int rc = access_at(sb, off, write, &t);
    if (rc != -EFAULT)
        fprintf(stderr, "offset %#llx (%s): rc %d\n", (unsigned long long)off,
                write ? "write" : "read", rc);
    CHECK(rc == -EFAULT);
    CHECK(t.sandbox == sb);
    CHECK(t.offset == off);
    CHECK(t.access == (write ? TK_ACCESS_WRITE : TK_ACCESS_READ));
    CHECK(t.pc != NULL);
}

/* A jump into the sandbox's memory, inside its size: the memory is never
 * executable, so the call returns -EFAULT with an instruction fetch. */
static void jump_in(tk_sandbox *sb, void *arg)
{
    uint8_t *p = (uint8_t *)tk_sandbox_base(sb) + *(uint64_t *)arg;
    *p = 0xc3; /* ret, were it executable */
    ((void (*)(void))(uintptr_t)p)();
}

static void expect_exec_fault(tk_sandbox *sb, uint64_t off)
{
    tk_sandbox_trap t;
    memset(&t, 0, sizeof t);
    CHECK(tk_sandbox_call(sb, jump_in, &off, &t) == -EFAULT);
    CHECK(t.sandbox == sb);
    CHECK(t.offset == off);
    CHECK(t.access == TK_ACCESS_EXEC);
}

static void expect_ok(tk_sandbox *sb, uint64_t off)
{
    CHECK_OK(access_at(sb, off, 1, NULL));
    struct access a = {.off = off};
    CHECK_OK(tk_sandbox_call(sb, do_access, &a, NULL));
    CHECK(a.value == 0x5a);
}

/* Inner call on another sandbox, then (optionally) an access of the outer
 * sandbox's out of bounds from inside the inner call. */
static void inner_oob_outer(tk_sandbox *sb, void *arg)
{
    struct access *a = arg;
    volatile uint8_t *p = (uint8_t *)tk_sandbox_base(a->other) + a->other_off;
    (void)*p;
    (void)sb;
}

static void nested(tk_sandbox *sb, void *arg)
{
    struct access *a = arg;
    /* a fault in the inner sandbox goes to the inner call */
    a->inner_rc = access_at(a->other, a->other_off, 0, &a->inner_trap);
    a->iterations++;
    /* a fault in the outer sandbox from inside a call on the inner one goes
     * to the outer call, unwinding the inner */
    struct access b = {.other = sb, .other_off = a->off};
    tk_sandbox_call(a->other, inner_oob_outer, &b, NULL);
    a->iterations += 100; /* not reached */
}

static bool make_sandbox(enum tk_sandbox_path path, size_t size, size_t max, tk_sandbox **out)
{
    tk_sandbox_config c = {.size = size, .max_size = max, .guard = 64 * KIB, .path = path};
    int rc = tk_sandbox_create(&c, out);
    if (rc == -EOPNOTSUPP) {
        printf("path %s unavailable here: %s\n", tk_sandbox_path_name(path), tk_last_error());
        return false;
    }
    CHECK_OK(rc);
    CHECK(tk_sandbox_path(*out) == path);
    return true;
}

static void test_bad_config(void)
{
    tk_sandbox *sb = NULL;
    struct {
        tk_sandbox_config c;
        const char *word;
    } bad[] = {
        {{.size = 100}, "multiple"},      {{.size = 8192, .max_size = 4096}, "larger"},
        {{.max_size = 8 * GIB}, "4 GiB"}, {{.guard = 12345}, "multiple"},
        {{.flags = 0x80}, "flags"},       {{.path = (enum tk_sandbox_path)42}, "path"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_ERR(tk_sandbox_create(&bad[i].c, &sb), -EINVAL);
        CHECK(sb == NULL);
        if (!strstr(tk_last_error(), bad[i].word)) {
            fprintf(stderr, "case %zu: message \"%s\" lacks \"%s\"\n", i, tk_last_error(),
                    bad[i].word);
            exit(1);
        }
    }
    CHECK_ERR(tk_sandbox_create(NULL, NULL), -EINVAL);
    CHECK_ERR(tk_sandbox_call(NULL, do_access, NULL, NULL), -EINVAL);
    CHECK_ERR(tk_sandbox_destroy(NULL), -EINVAL);
    /* NULL handles to the accessors: an answer, not a crash */
    CHECK(tk_sandbox_base(NULL) == NULL && tk_sandbox_size(NULL) == 0);
    CHECK(tk_sandbox_path(NULL) == TK_SANDBOX_PATH_COUNT_);
    CHECK(tk_arena_base(NULL) == NULL && tk_arena_used(NULL) == 0 && tk_arena_committed(NULL) == 0);
    tk_arena_reset(NULL);
    CHECK(tk_arena_alloc_slow(NULL, 10) == NULL && strstr(tk_last_error(), "NULL"));
    CHECK(tk_sandbox_path_parse("madv-guard") == TK_SANDBOX_MADV_GUARD);
    CHECK(tk_sandbox_path_parse("uffd") == TK_SANDBOX_UFFD);
    CHECK(tk_sandbox_path_parse("nonsense") == TK_SANDBOX_PATH_COUNT_);
    CHECK(strcmp(tk_sandbox_path_name(TK_SANDBOX_MPROTECT), "mprotect") == 0);

    tk_sandbox_config ok = {.size = 64 * KIB, .max_size = MIB, .guard = 4096};
    CHECK_OK(tk_sandbox_create(&ok, &sb));
    CHECK_ERR(tk_sandbox_grow(sb, 2 * MIB), -ENOMEM);
    CHECK(strstr(tk_last_error(), "max_size"));
    CHECK_ERR(tk_sandbox_grow(sb, 4096), -EINVAL);
    CHECK_ERR(tk_sandbox_grow(sb, 64 * KIB + 1), -EINVAL);
    CHECK(strstr(tk_last_error(), "multiple"));
    CHECK_OK(tk_sandbox_destroy(sb));
}

static void test_path(enum tk_sandbox_path path)
{
    tk_sandbox *sb, *sb2;
    if (!make_sandbox(path, 64 * KIB, MIB, &sb)) return;
    CHECK(make_sandbox(path, 16 * KIB, 64 * KIB, &sb2));
    size_t ps = tk_test_page();
    uint8_t *base = tk_sandbox_base(sb);
    CHECK(tk_sandbox_size(sb) == 64 * KIB);

    /* content: zero, then what was written, from inside and outside calls */
    for (size_t off = 0; off < 64 * KIB; off += ps) CHECK(base[off] == 0);
    for (size_t i = 0; i < 64 * KIB; i += 61) base[i] = (uint8_t)(i * 7);
    for (size_t i = 0; i < 64 * KIB; i += 61) CHECK(base[i] == (uint8_t)(i * 7));
    expect_ok(sb, 64 * KIB - 1);
    expect_ok(sb, 0);

    /* out of bounds: past the size, past max_size, the top of the index
     * space, the guard; reads and writes; again and again */
    for (int round = 0; round < 200; round++) {
        expect_oob(sb, 64 * KIB, round & 1);
        expect_oob(sb, 64 * KIB + 123, 0);
        expect_oob(sb, MIB + 5, 1);
        expect_oob(sb, 0xffffffffu, round & 1);
        expect_oob(sb, 4 * GIB + 1000, 0);
    }
    expect_ok(sb, 100);
    expect_exec_fault(sb, 0);
    expect_exec_fault(sb, 8 * KIB + 64);
    expect_ok(sb, 100);

    /* grow: the new bytes are there and zero, the bound moved */
    CHECK_OK(tk_sandbox_grow(sb, 64 * KIB + ps));
    CHECK(tk_sandbox_size(sb) == 64 * KIB + ps);
    CHECK(base[64 * KIB] == 0 && base[64 * KIB + ps - 1] == 0);
    expect_ok(sb, 64 * KIB);
    expect_oob(sb, 64 * KIB + ps, 1);
    CHECK_OK(tk_sandbox_grow(sb, 512 * KIB));
    for (size_t off = 64 * KIB + ps; off < 512 * KIB; off += ps) CHECK(base[off] == 0);
    expect_ok(sb, 512 * KIB - 1);
    expect_oob(sb, 512 * KIB, 0);
    CHECK_OK(tk_sandbox_grow(sb, MIB)); /* up to max_size */
    expect_ok(sb, MIB - 1);
    expect_oob(sb, MIB, 1);
    CHECK(base[50 * 61] == (uint8_t)(50 * 61 * 7)); /* old content kept */

    /* reset: the initial size, all zero, the bound back */
    CHECK_OK(tk_sandbox_reset(sb));
    CHECK(tk_sandbox_size(sb) == 64 * KIB);
    for (size_t off = 0; off < 64 * KIB; off += 61) CHECK(base[off] == 0);
    expect_oob(sb, 64 * KIB, 0);
    expect_oob(sb, 512 * KIB, 1);
    expect_ok(sb, 64 * KIB - 8);
    /* grow after a reset, twice over */
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tk_sandbox_grow(sb, 256 * KIB));
        CHECK(base[200 * KIB] == 0);
        expect_ok(sb, 200 * KIB);
        expect_oob(sb, 256 * KIB, 1);
        CHECK_OK(tk_sandbox_reset(sb));
        expect_oob(sb, 200 * KIB, 0);
    }

    /* nested calls */
    for (int round = 0; round < 50; round++) {
        struct access a = {.off = 64 * KIB + 8, .other = sb2, .other_off = 16 * KIB};
        tk_sandbox_trap t;
        int rc = tk_sandbox_call(sb, nested, &a, &t);
        CHECK(rc == -EFAULT);
        CHECK(t.sandbox == sb && t.offset == 64 * KIB + 8);
        CHECK(a.inner_rc == -EFAULT);
        CHECK(a.inner_trap.sandbox == sb2 && a.inner_trap.offset == 16 * KIB);
        CHECK(a.iterations == 1);
    }
    expect_ok(sb2, 100);
    expect_oob(sb2, 16 * KIB, 0);

    CHECK_OK(tk_sandbox_destroy(sb2));
    CHECK_OK(tk_sandbox_destroy(sb));
    printf("path %s: ok\n", tk_sandbox_path_name(path));
}

/* ---- calls left early --------------------------------------------------- */

/* fn leaves its call by a siglongjmp of the program's own (as a runtime's
 * exception would): trapkit cannot see it, and must neither read the dead
 * call's frame nor jump back into it once the program has made a call from
 * the level it jumped to. */
static sigjmp_buf leave_jb;
static int nest_rc[80];

static void leave(tk_sandbox *sb, void *arg)
{
    (void)sb;
    (void)arg;
    siglongjmp(leave_jb, 1);
}

static void nothing(tk_sandbox *sb, void *arg)
{
    (void)sb;
    (void)arg;
}

static __attribute__((noinline)) void enter_and_leave(tk_sandbox *sb)
{
    if (sigsetjmp(leave_jb, 0) == 0) {
        tk_sandbox_call(sb, leave, NULL, NULL);
        CHECK(!"tk_sandbox_call returned after fn left it");
    }
}

/* Ordinary use of the stack where the dead call's frame was: small
 * integers, as stacks hold. */
static __attribute__((noinline)) void scribble(void)
{
    volatile unsigned long buf[2048];
    for (size_t i = 0; i < 2048; i++) buf[i] = i;
    __asm__ volatile("" ::"r"(buf) : "memory");
}

/* A call made deeper on the stack than the dead one, whose frame is left
 * intact below the one we make here. */
static __attribute__((noinline)) void oob_deeper(tk_sandbox *sb, uint64_t off)
{
    volatile char pad[8192]; /* not written */
    __asm__ volatile("" ::"r"(pad) : "memory");
    expect_oob(sb, off, 1);
}

static void leave_arena(tk_arena *a, void *arg)
{
    (void)a;
    (void)arg;
    siglongjmp(leave_jb, 1);
}

static void exhaust(tk_arena *a, void *arg)
{
    (void)arg;
    for (;;) {
        uint64_t *c = tk_arena_alloc(a, 64);
        c[0] = 1;
    }
}

static void nest(tk_sandbox *sb, void *arg)
{
    int d = (int)(intptr_t)arg;
    if (d < 70) nest_rc[d + 1] = tk_sandbox_call(sb, nest, (void *)(intptr_t)(d + 1), NULL);
}

static void test_left_early(enum tk_sandbox_path path)
{
    tk_sandbox *sb;
    if (!make_sandbox(path, 64 * KIB, MIB, &sb)) return;
    /* more times than a thread may have calls under way: dead calls do not
     * pile up */
    for (int i = 0; i < 200; i++) {
        enter_and_leave(sb);
        if (i % 16 == 0) oob_deeper(sb, 100 * KIB + (uint64_t)i);
        if (i & 1) scribble();
        /* a call from above the dead one, then deeper */
        CHECK_OK(tk_sandbox_call(sb, nothing, NULL, NULL));
        expect_oob(sb, 64 * KIB + (uint64_t)i, i & 1);
    }
    expect_ok(sb, 10);

    /* at most 64 calls under way in a thread; the 65th is refused */
    memset(nest_rc, 0x7f, sizeof nest_rc);
    nest_rc[1] = tk_sandbox_call(sb, nest, (void *)(intptr_t)1, NULL);
    for (int d = 1; d <= 64; d++) CHECK(nest_rc[d] == 0);
    CHECK(nest_rc[65] == -EOVERFLOW);
    CHECK(strstr(tk_last_error(), "64"));
    expect_oob(sb, 64 * KIB, 0);

    /* arenas: the next tk_arena_try after one left early still gets its
     * allocation failure */
    tk_arena *a;
    tk_arena_config c = {.max_size = 64 * KIB, .chunk = 4 * KIB};
    CHECK_OK(tk_arena_create(&c, &a));
    for (int i = 0; i < 100; i++) {
        if (sigsetjmp(leave_jb, 0) == 0) {
            tk_arena_try(a, leave_arena, NULL);
            CHECK(!"tk_arena_try returned after fn left it");
        }
        if (i & 1) scribble();
        tk_arena_reset(a);
        CHECK(tk_arena_try(a, exhaust, NULL) == -ENOMEM);
    }
    CHECK_OK(tk_arena_destroy(a));
    CHECK_OK(tk_sandbox_destroy(sb));
}

/* ---- a call in a signal handler on the alternate stack ----------------- */

#define ALT_SIZE (256 * KIB)
static tk_sandbox *alt_sb;
static void *alt_mem;
static volatile int alt_on_alt, alt_inner_rc, alt_left, alt_after_rc;
static volatile uint64_t alt_inner_off;

static void alt_oob(tk_sandbox *sb, void *arg)
{
    *(volatile char *)((char *)tk_sandbox_base(sb) + (uintptr_t)arg) = 1;
}

static void on_usr1(int sig)
{
    (void)sig;
    stack_t cur;
    alt_on_alt = sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_ONSTACK);
    tk_sandbox_trap t = {0};
    alt_inner_rc = tk_sandbox_call(alt_sb, alt_oob, (void *)(uintptr_t)(200 * KIB), &t);
    alt_inner_off = t.offset;
    /* a call left early on the alternate stack */
    if (sigsetjmp(leave_jb, 0) == 0)
        tk_sandbox_call(alt_sb, leave, NULL, NULL);
    else
        alt_left = 1;
    alt_after_rc = tk_sandbox_call(alt_sb, nothing, NULL, NULL);
}

static void alt_outer(tk_sandbox *sb, void *arg)
{
    (void)arg;
    raise(SIGUSR1);
    alt_oob(sb, (void *)(uintptr_t)(300 * KIB));
}

static void *alt_thread(void *arg)
{
    (void)arg;
    stack_t ss = {.ss_sp = alt_mem, .ss_size = ALT_SIZE};
    CHECK(sigaltstack(&ss, NULL) == 0);
    for (int i = 0; i < 20; i++) {
        alt_on_alt = alt_left = 0;
        alt_inner_rc = alt_after_rc = 1;
        tk_sandbox_trap t = {0};
        int rc = tk_sandbox_call(alt_sb, alt_outer, NULL, &t);
        CHECK(alt_on_alt);
        CHECK(alt_inner_rc == -EFAULT && alt_inner_off == 200 * KIB);
        CHECK(alt_left && alt_after_rc == 0);
        /* the outer call's frame survived the handler's calls */
        CHECK(rc == -EFAULT && t.offset == 300 * KIB);
        if (i & 1) scribble();
        expect_oob(alt_sb, 64 * KIB + (uint64_t)i, 1);
    }
    ss.ss_flags = SS_DISABLE;
    CHECK(sigaltstack(&ss, NULL) == 0);
    return NULL;
}

static void test_altstack(enum tk_sandbox_path path)
{
    if (!make_sandbox(path, 64 * KIB, MIB, &alt_sb)) return;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, &old) == 0);
    for (int order = 0; order < 2; order++) {
        pthread_attr_t at;
        CHECK(pthread_attr_init(&at) == 0);
        void *st = NULL;
        if (order == 0) {
            /* the alternate stack mapped first: above the thread's stack */
            alt_mem =
                mmap(NULL, ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        } else {
            /* the thread's stack mapped first: the alternate stack below it */
            st = mmap(NULL, 8 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CHECK(st != MAP_FAILED);
            alt_mem =
                mmap(NULL, ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CHECK(pthread_attr_setstack(&at, st, 8 * MIB) == 0);
        }
        CHECK(alt_mem != MAP_FAILED);
        pthread_t th;
        CHECK(pthread_create(&th, &at, alt_thread, NULL) == 0);
        CHECK(pthread_join(th, NULL) == 0);
        CHECK(pthread_attr_destroy(&at) == 0);
        munmap(alt_mem, ALT_SIZE);
        if (st) munmap(st, 8 * MIB);
    }
    CHECK(sigaction(SIGUSR1, &old, NULL) == 0);
    CHECK_OK(tk_sandbox_destroy(alt_sb));
}

/* ---- processes that must die ------------------------------------------ */

static enum tk_sandbox_path child_path;

static void child_wild_write(void *arg)
{
    (void)arg;
    tk_sandbox *sb;
    if (!make_sandbox(child_path, 64 * KIB, MIB, &sb)) _exit(77);
    /* inside a call, but outside every sandbox */
    char *elsewhere = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct access a = {.off = (uint64_t)(elsewhere - (char *)tk_sandbox_base(sb)), .write = 1};
    tk_sandbox_call(sb, do_access, &a, NULL);
    _exit(3);
}

static void child_oob_outside_call(void *arg)
{
    (void)arg;
    tk_sandbox *sb;
    if (!make_sandbox(child_path, 64 * KIB, MIB, &sb)) _exit(77);
    volatile char *p = (char *)tk_sandbox_base(sb) + 64 * KIB;
    *p = 1;
    _exit(3);
}

/* An out-of-bounds access outside every call, deeper on the stack than a
 * call left early, once the program has made a call from the level it
 * jumped to: not trapkit's. */
static __attribute__((noinline)) void oob_deep_outside(tk_sandbox *sb)
{
    volatile char pad[8192]; /* not written: the dead call's frame stays */
    __asm__ volatile("" ::"r"(pad) : "memory");
    *((volatile char *)tk_sandbox_base(sb) + 64 * KIB) = 1;
}

static void child_oob_after_left(void *arg)
{
    (void)arg;
    tk_sandbox *sb;
    if (!make_sandbox(child_path, 64 * KIB, MIB, &sb)) _exit(77);
    enter_and_leave(sb);
    if (tk_sandbox_call(sb, nothing, NULL, NULL) != 0) _exit(4);
    oob_deep_outside(sb);
    _exit(3);
}

static void expect_death(void (*fn)(void *), int sig)
{
    int st = tk_test_in_child(fn, NULL);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) return;
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) {
        fprintf(stderr, "child: status %#x, expected death by signal %d\n", st, sig);
        exit(1);
    }
}

/* A SIGSEGV handler of the program's own, installed before trapkit's: it
 * gets the faults that are not a sandbox's; the sandbox's still come back
 * as -EFAULT. */
static sigjmp_buf own_jb;
static volatile sig_atomic_t own_count;

static void own_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    own_count++;
    siglongjmp(own_jb, 1);
}

static void child_own_handler(void *arg)
{
    (void)arg;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = own_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) < 0) _exit(2);
    if (sigaction(SIGBUS, &sa, NULL) < 0) _exit(2);
    tk_sandbox *sb;
    if (!make_sandbox(child_path, 64 * KIB, MIB, &sb)) _exit(77);
    char *elsewhere = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 20; i++) {
        expect_oob(sb, 64 * KIB + (uint64_t)i, i & 1);
        if (sigsetjmp(own_jb, 1) == 0) {
            *(volatile char *)elsewhere = 1;
            _exit(4);
        }
        if (own_count != i + 1) _exit(5);
    }
    expect_ok(sb, 10);
    _exit(0);
}

/* A timer's signal handler (SA_NODEFER, so that it interrupts itself)
 * makes a sandbox call that faults, every 35 us, while the thread's own
 * calls fault too: the handler's faults nest inside one another as deep as
 * the calls under way (here up to 32), and each call still returns
 * -EFAULT, the process never killed. */
static tk_sandbox *flood_a, *flood_b;
static volatile sig_atomic_t flood_ok, flood_bad;

static void flood_oob(tk_sandbox *sb, void *arg)
{
    (void)arg;
    ((volatile char *)tk_sandbox_base(sb))[MIB + 8] = 7;
}

static volatile sig_atomic_t flood_depth, flood_deepest;

static void on_flood_alarm(int sig)
{
    (void)sig;
    /* (at most 32 deep: where a handler takes longer than the period, as
     * under a sanitizer, they would nest without end) */
    if (flood_depth >= 32) return;
    int saved = errno;
    if (++flood_depth > flood_deepest) flood_deepest = flood_depth;
    tk_sandbox_trap t;
    int r = tk_sandbox_call(flood_b, flood_oob, NULL, &t);
    if (r == -EFAULT && t.sandbox == flood_b && t.offset == MIB + 8)
        flood_ok++;
    else if (r != -EOVERFLOW)
        flood_bad++;
    flood_depth--;
    errno = saved;
}

static void flood_long(tk_sandbox *sb, void *arg)
{
    (void)arg;
    volatile char *m = tk_sandbox_base(sb);
    for (long i = 0; i < 300000; i++) m[i & 0xffff]++;
    m[MIB] = 1;
}

static void child_nodefer_flood(void *arg)
{
    (void)arg;
    if (!make_sandbox(child_path, 64 * KIB, MIB, &flood_a)) _exit(77);
    if (!make_sandbox(child_path, 64 * KIB, MIB, &flood_b)) _exit(77);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_flood_alarm;
    sa.sa_flags = SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) < 0) _exit(2);
    struct itimerval it = {{0, 35}, {0, 35}};
    if (setitimer(ITIMER_REAL, &it, NULL) < 0) _exit(2);
    for (int k = 0; k < 200; k++) {
        tk_sandbox_trap t;
        int r = tk_sandbox_call(flood_a, flood_long, NULL, &t);
        if (r != -EFAULT || t.sandbox != flood_a || t.offset != MIB) _exit(3);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    if (flood_bad != 0) _exit(4);
    if (flood_ok == 0) _exit(5);
    printf("  %s: %d handlers' calls, nested up to %d deep\n", tk_sandbox_path_name(child_path),
           (int)flood_ok, (int)flood_deepest);
    _exit(0);
}

static void test_nodefer_flood(enum tk_sandbox_path path)
{
    child_path = path;
    int st = tk_test_in_child(child_nodefer_flood, NULL);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) return;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "nested flood, path %s: status %#x\n", tk_sandbox_path_name(path), st);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- arenas ------------------------------------------------------------ */

struct cell {
    uint64_t car, cdr;
};

static void test_arena_bad_config(void)
{
    tk_arena *a = NULL;
    tk_arena_config c = {.max_size = 100000};
    CHECK_ERR(tk_arena_create(&c, &a), -EINVAL);
    CHECK(strstr(tk_last_error(), "multiple"));
    c = (tk_arena_config){.max_size = 64 * KIB, .chunk = 128 * KIB};
    CHECK_ERR(tk_arena_create(&c, &a), -EINVAL);
    CHECK(strstr(tk_last_error(), "larger"));
    CHECK(a == NULL);
    CHECK_ERR(tk_arena_create(&c, NULL), -EINVAL);
    CHECK_ERR(tk_arena_destroy(NULL), -EINVAL);
}

/* growth in place: allocations cross many chunk limits; every object is
 * where it should be and keeps its contents */
static void test_arena_grow(bool checked)
{
    tk_arena *a;
    tk_arena_config c = {.max_size = 64 * MIB, .chunk = 64 * KIB};
    CHECK_OK(tk_arena_create(&c, &a));
    char *base = tk_arena_base(a);
    size_t n = 200000; /* 3.2 MB: 49 growths */
    struct cell *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        struct cell *x =
            checked ? tk_arena_alloc_checked(a, sizeof *x) : tk_arena_alloc(a, sizeof *x);
        CHECK((char *)x == base + i * sizeof *x);
        x->car = i;
        x->cdr = (uint64_t)(uintptr_t)prev;
        prev = x;
    }
    CHECK(tk_arena_used(a) == n * sizeof(struct cell));
    CHECK(tk_arena_committed(a) >= tk_arena_used(a));
    CHECK(tk_arena_committed(a) < tk_arena_used(a) + 64 * KIB);
    size_t k = n;
    for (struct cell *x = prev; x; x = (struct cell *)(uintptr_t)x->cdr) CHECK(x->car == --k);
    CHECK(k == 0);
    /* odd sizes: rounded to 16, aligned */
    for (size_t sz = 0; sz < 3000; sz += 7) {
        char *p = tk_arena_alloc(a, sz);
        CHECK(((uintptr_t)p & 15) == 0);
        memset(p, 0xab, sz);
        char *q = tk_arena_alloc_checked(a, 1);
        CHECK(q == p + (sz ? (sz + 15) / 16 * 16 : 16));
    }
    /* large objects take the explicit path */
    char *big = tk_arena_alloc(a, 300 * KIB);
    CHECK(big != NULL);
    memset(big, 1, 300 * KIB);
    CHECK(tk_arena_committed(a) >= tk_arena_used(a));
    /* their last 8 bytes zero too, memory reused after a reset included */
    tk_arena_reset(a);
    char *p1 = tk_arena_alloc(a, 10000);
    memset(p1, 0xee, TK__ARENA_ROUND(10000));
    tk_arena_reset(a);
    char *p2 = tk_arena_alloc(a, 10000);
    uint64_t last;
    memcpy(&last, p2 + TK__ARENA_ROUND(10000) - 8, 8);
    CHECK(p2 == p1 && last == 0 && (unsigned char)p2[0] == 0xee);
    CHECK_OK(tk_arena_destroy(a));
}

/* the hard limit: an allocation past max_size fails, tk_arena_try says so */
static void fill(tk_arena *a, void *arg)
{
    size_t *count = arg;
    for (;;) {
        uint64_t *x = tk_arena_alloc(a, 48);
        x[0] = *count;
        ++*count;
    }
}

static void fill_checked(tk_arena *a, void *arg)
{
    size_t *count = arg;
    for (;;) {
        uint64_t *x = tk_arena_alloc_checked(a, 48);
        x[0] = *count;
        ++*count;
    }
}

static void nested_try(tk_arena *a, void *arg)
{
    tk_arena *other = arg;
    size_t count = 0;
    /* the inner arena's failure goes to the inner try */
    CHECK(tk_arena_try(other, fill, &count) == -ENOMEM);
    CHECK(count == 64 * KIB / 48);
    size_t c2 = 0;
    fill(a, &c2); /* the outer arena's failure: out of here */
}

static void test_arena_limit(void)
{
    tk_arena *a;
    tk_arena_config c = {.max_size = 256 * KIB, .chunk = 64 * KIB};
    CHECK_OK(tk_arena_create(&c, &a));
    for (int round = 0; round < 20; round++) {
        size_t count = 0;
        int rc = tk_arena_try(a, (round & 1) ? fill_checked : fill, &count);
        CHECK(rc == -ENOMEM);
        if (count != 256 * KIB / 48)
            fprintf(stderr, "count %zu round %d used %zu\n", count, round, tk_arena_used(a));
        CHECK(count == 256 * KIB / 48);
        CHECK(tk_arena_committed(a) == 256 * KIB);
        uint64_t *x = tk_arena_base(a);
        for (size_t i = 0; i < count; i++) CHECK(x[i * 6] == i);
        /* full until reset */
        CHECK(tk_arena_alloc_checked(a, 16) == NULL);
        CHECK(strstr(tk_last_error(), "limit"));
        tk_arena_reset(a);
        CHECK(tk_arena_used(a) == 0);
    }
    tk_arena *b;
    c.max_size = 64 * KIB;
    CHECK_OK(tk_arena_create(&c, &b));
    CHECK(tk_arena_try(a, nested_try, b) == -ENOMEM);
    CHECK(tk_arena_alloc_slow(a, 2 * MIB) == NULL); /* more than max_size */
    CHECK_OK(tk_arena_destroy(b));
    CHECK_OK(tk_arena_destroy(a));
}

/* on_full resets the arena (a collector whose nursery holds nothing live):
 * the allocation that found it full is redone at the base */
struct nursery {
    int calls;
    int refuse_after;
};

static int on_full_reset(tk_arena *a, size_t size, void *arg)
{
    struct nursery *n = arg;
    if (size == 0 || size % 16) return -EINVAL;
    if (n->refuse_after && n->calls >= n->refuse_after) return -ENOSPC;
    n->calls++;
    tk_arena_reset(a);
    return TK_ARENA_RETRY;
}

static void nursery_loop(tk_arena *a, void *arg)
{
    (void)arg;
    for (;;) (void)tk_arena_alloc(a, 32);
}

static void test_arena_retry(void)
{
    tk_arena *a;
    struct nursery n = {0};
    tk_arena_config c = {
        .max_size = 64 * KIB, .chunk = 64 * KIB, .on_full = on_full_reset, .arg = &n};
    CHECK_OK(tk_arena_create(&c, &a));
    char *base = tk_arena_base(a);
    for (size_t i = 0; i < 100000; i++) {
        size_t sz = (i % 5 == 0) ? 48 : 16;
        char *p = (i & 1) ? tk_arena_alloc(a, sz) : tk_arena_alloc_checked(a, sz);
        CHECK(p >= base && p + sz <= base + 64 * KIB);
        memset(p, (int)i, sz);
        CHECK(tk_arena_used(a) == (size_t)(p + sz - base));
    }
    CHECK(n.calls > 30);
    CHECK(tk_arena_committed(a) == 64 * KIB); /* never grew */
    /* on_full refusing: the allocation fails with its code */
    n.refuse_after = n.calls + 3;
    CHECK(tk_arena_try(a, nursery_loop, NULL) == -ENOSPC);
    CHECK(n.calls == n.refuse_after);
    CHECK_OK(tk_arena_destroy(a));
}

static void child_arena_overflow(void *arg)
{
    (void)arg;
    tk_arena *a;
    tk_arena_config c = {.max_size = 64 * KIB, .chunk = 64 * KIB};
    if (tk_arena_create(&c, &a) < 0) _exit(2);
    for (;;) (void)tk_arena_alloc(a, 64);
}

static void child_arena_scribble(void *arg)
{
    (void)arg;
    tk_arena *a;
    tk_arena_config c = {.max_size = MIB, .chunk = 64 * KIB};
    if (tk_arena_create(&c, &a) < 0) _exit(2);
    char *p = tk_arena_alloc(a, 64);
    /* a write past the object into the guard is a bug, not an allocation */
    memset(p, 1, 64 * KIB + 100);
    _exit(3);
}

static void test_masked(void)
{
    /* run again with the probe hiding MADV_GUARD_INSTALL */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("TRAPKIT_PROBE_MASK", "guard", 1);
        execl(self_path, self_path, "masked", (char *)NULL);
        _exit(2);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int run_masked(void)
{
    tk_probe_info p;
    CHECK_OK(tk_probe(&p));
    if (p.madv_guard_install) {
        printf("masked: TRAPKIT_PROBE_MASK=guard did not hide MADV_GUARD_INSTALL\n");
        return 1;
    }
    tk_sandbox *sb;
    tk_sandbox_config c = {.size = 64 * KIB, .path = TK_SANDBOX_MADV_GUARD};
    CHECK_ERR(tk_sandbox_create(&c, &sb), -EOPNOTSUPP);
    CHECK(strstr(tk_last_error(), "MADV_GUARD_INSTALL"));
    /* the automatic choice falls back to mprotect */
    c.path = TK_SANDBOX_AUTO;
    CHECK_OK(tk_sandbox_create(&c, &sb));
    CHECK(tk_sandbox_path(sb) == TK_SANDBOX_MPROTECT);
    expect_oob(sb, 64 * KIB, 1);
    CHECK_OK(tk_sandbox_destroy(sb));
    printf("masked: ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc > 1 && strcmp(argv[1], "masked") == 0) return run_masked();
    setvbuf(stdout, NULL, _IONBF, 0);

    /* the program's own handler first, in a fresh process image per path
     * (trapkit must install after it) */
    for (int p = TK_SANDBOX_MPROTECT; p < TK_SANDBOX_PATH_COUNT_; p++) {
        child_path = (enum tk_sandbox_path)p;
        int st = tk_test_in_child(child_own_handler, NULL);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77) continue;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "own handler, path %s: status %#x\n", tk_sandbox_path_name(p), st);
            return 1;
        }
    }

    test_bad_config();
    for (int p = TK_SANDBOX_MPROTECT; p < TK_SANDBOX_PATH_COUNT_; p++)
        test_path((enum tk_sandbox_path)p);
    for (int p = TK_SANDBOX_MPROTECT; p < TK_SANDBOX_PATH_COUNT_; p++) {
        child_path = (enum tk_sandbox_path)p;
        expect_death(child_wild_write, SIGSEGV);
        expect_death(child_oob_outside_call, p == TK_SANDBOX_UFFD ? SIGBUS : SIGSEGV);
        expect_death(child_oob_after_left, p == TK_SANDBOX_UFFD ? SIGBUS : SIGSEGV);
        test_left_early((enum tk_sandbox_path)p);
        test_altstack((enum tk_sandbox_path)p);
        test_nodefer_flood((enum tk_sandbox_path)p);
    }
    test_masked();
    printf("sandboxes: ok\n");

    test_arena_bad_config();
    test_arena_grow(false);
    test_arena_grow(true);
    test_arena_limit();
    test_arena_retry();
    expect_death(child_arena_overflow, SIGSEGV);
    expect_death(child_arena_scribble, SIGSEGV);
    printf("arenas: ok\n");
    return 0;
}
