/* src/apps/guard/guard.c - guard pages: bump arenas whose limit check is a
 * guard page, and sandboxed linear memories (include/trapkit/guard.h says
 * what they offer).
 *
 * Neither an arena nor a sandbox is a trapkit region.  Their faults come
 * through a hook of trapkit's fault dispatch for faults outside every
 * region (tk__add_fault_hook: guard_fault), which finds their owner two
 * ways:
 *
 * - a table of live arenas and uffd sandboxes (struct slot), for faults
 *   that must be served wherever they happen: an arena's guard page, a uffd
 *   sandbox's first touch of a page.  Each slot is a small seqlock over the
 *   owner's address range, so the handler reads it without a lock and a
 *   creation only claims a free slot with one compare-and-swap.
 * - the faulting thread's records of escape frames (struct rec), one per
 *   tk_sandbox_call and tk_arena_try under way in it.  An out-of-bounds
 *   access of a sandbox is an error only under a call on that sandbox, so
 *   mprotect and madv-guard sandboxes need no table at all: creating one is
 *   nothing but its system calls, which is what the creation benchmark
 *   measures.
 *
 * Each call keeps its jump buffer in a frame on its own stack and a record
 * of it (its stack pointer, which stack, the sandbox or arena, a
 * generation number the frame holds too) in a thread-local array, so that
 * finding the live calls never reads a dead call's stack.  A call is left
 * normally by returning or by a C++ exception (this file is compiled with
 * -fexceptions: a cleanup drops the record); a siglongjmp of the
 * program's own out of fn cannot be seen, and its record is dropped by the
 * next entry or fault that finds it dead (rec_live): the thread's stack
 * pointer at or above the call's on the same stack, off the alternate
 * stack the call was made on, or the frame's generation overwritten.
 */
#include <trapkit/guard.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/context.h"
#include "core/internal.h"
#include "os/linux/os.h"
#include "os/linux/uffd.h"

#define GIB ((size_t)1 << 30)
#define INDEX_SPACE ((size_t)4 << 30) /* what a 32-bit offset reaches */

static size_t page_size; /* set by setup() */
static tk_action guard_fault(const tk_fault *f, void *arg);

/* ---- the fault handler's installation --------------------------------- */

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int setup_result;

static void setup(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    page_size = ps > 0 ? (size_t)ps : 4096;
    setup_result = tk__add_fault_hook(guard_fault);
}

static int ensure_setup(void)
{
    pthread_once(&setup_once, setup);
    return setup_result;
}

/* ---- the table of arenas and uffd sandboxes ---------------------------- */

enum { KIND_ARENA = 1, KIND_SANDBOX = 2 };
enum { NSLOTS = 4096 };

struct slot {
    atomic_uint seq; /* odd while the fields below change */
    atomic_uintptr_t lo, hi;
    _Atomic(void *) obj; /* NULL: free */
    atomic_int kind;
};
static struct slot slots[NSLOTS];
static atomic_int slots_used; /* slots at or past this index were never used */

static int slot_claim(uintptr_t lo, uintptr_t hi, void *obj, int kind)
{
    for (int i = 0; i < NSLOTS; i++) {
        struct slot *s = &slots[i];
        unsigned q = atomic_load(&s->seq);
        if ((q & 1) || atomic_load(&s->obj)) continue;
        if (!atomic_compare_exchange_strong(&s->seq, &q, q + 1)) continue;
        if (atomic_load(&s->obj)) { /* taken and released in between */
            atomic_store(&s->seq, q + 2);
            continue;
        }
        atomic_store(&s->lo, lo);
        atomic_store(&s->hi, hi);
        atomic_store(&s->kind, kind);
        atomic_store(&s->obj, obj);
        atomic_store(&s->seq, q + 2);
        int used = atomic_load(&slots_used);
        while (used < i + 1 && !atomic_compare_exchange_weak(&slots_used, &used, i + 1)) {
        }
        return i;
    }
    return tk__fail(-ENOMEM, "guard: more than 4096 arenas and uffd sandboxes at once");
}

static void slot_release(int i)
{
    struct slot *s = &slots[i];
    unsigned q = atomic_fetch_add(&s->seq, 1); /* odd: readers retry or skip */
    atomic_store(&s->lo, 0);
    atomic_store(&s->hi, 0);
    atomic_store(&s->obj, NULL);
    atomic_store(&s->seq, q + 2);
}

/* The owner of addr, or NULL.  [signal-safe] */
static void *slot_find(uintptr_t addr, int *kind)
{
    int n = atomic_load(&slots_used);
    for (int i = 0; i < n; i++) {
        struct slot *s = &slots[i];
        for (int tries = 0; tries < 100; tries++) {
            unsigned q = atomic_load(&s->seq);
            if (q & 1) continue;
            uintptr_t lo = atomic_load(&s->lo), hi = atomic_load(&s->hi);
            void *obj = atomic_load(&s->obj);
            int k = atomic_load(&s->kind);
            if (atomic_load(&s->seq) != q) continue;
            if (obj && addr >= lo && addr < hi) {
                *kind = k;
                return obj;
            }
            break;
        }
    }
    return NULL;
}

/* ---- escape frames ------------------------------------------------------ */

/* A tk_sandbox_call or tk_arena_try under way: the part on the call's own
 * stack.  trapkit reads it only after its record (below) says the call may
 * still be live, and trusts it only while gen matches the record's. */
struct frame {
    sigjmp_buf jb;
    uint64_t gen; /* 0 until pushed */
    int code;
    tk_sandbox_trap trap;
};

/* The thread's calls under way, innermost last, in thread-local storage:
 * finding the live ones never follows a pointer through a dead call's
 * stack.  A record's call is dead once the thread has left its stack frame
 * (fn escaped past it by a siglongjmp of the program's own, or a signal
 * handler that made it has left its alternate stack); see rec_live(). */
enum { MAX_FRAMES = 64 };
struct rec {
    uintptr_t sp;     /* the call's frame address (its stack pointer at entry) */
    struct frame *fr; /* on that stack */
    uint64_t gen;     /* what fr->gen holds while the call is live */
    const void *obj;  /* the sandbox or arena */
    uintptr_t lo, hi; /* sandbox: the reservation; arena: 0, 0 */
    signed char kind; /* KIND_ARENA or KIND_SANDBOX */
    signed char alt;  /* made on the alternate signal stack: 1, 0, -1 not known */
};
static __thread struct rec recs[MAX_FRAMES] __attribute__((tls_model("initial-exec")));
static __thread int nrecs __attribute__((tls_model("initial-exec")));
static __thread uint64_t gen_last __attribute__((tls_model("initial-exec")));

/* Where the thread runs: its stack pointer, whether that lies on its
 * alternate signal stack, and that stack (NULL: not known). */
struct where {
    uintptr_t sp;
    bool on_alt;
    const stack_t *ss;
};

/* [signal-safe] */
static bool on_altstack(uintptr_t sp, const stack_t *ss)
{
    return ss && !(ss->ss_flags & SS_DISABLE) && ss->ss_size &&
           sp - (uintptr_t)ss->ss_sp < ss->ss_size;
}

/* The generation in a call's frame, which may lie in a dead call's stack
 * memory, reused since (inside a sanitizer's redzone: not checked).
 * [signal-safe] */
__attribute__((noinline, no_sanitize_address)) static uint64_t frame_gen(const struct frame *fr)
{
    return *(const volatile uint64_t *)&fr->gen;
}

/* Whether r's call may still be under way for code running at w.  Stack
 * pointers are compared only on the same stack: a call made on the
 * alternate stack is dead when the thread is no longer on it; a call made
 * on the thread's stack is live for a signal handler on the alternate
 * stack as far as addresses tell.  Last, the call's frame must still hold
 * its generation (read only when the stack pointers say the frame lies in
 * the live part of a stack).  [signal-safe] */
static bool rec_live(const struct rec *r, const struct where *w)
{
    bool alt = r->alt >= 0 ? r->alt : on_altstack(r->sp, w->ss);
    if (alt != w->on_alt) {
        if (alt) return false;
    } else if (r->sp <= w->sp) {
        return false;
    }
    return frame_gen(r->fr) == r->gen;
}

/* Drops the innermost records that code at w has left.  [signal-safe] */
static void drop_dead(const struct where *w)
{
    int n = nrecs;
    while (n > 0 && !rec_live(&recs[n - 1], w)) n--;
    nrecs = n;
    atomic_signal_fence(memory_order_seq_cst);
}

/* w for the calling code, at stack pointer sp; ss receives the thread's
 * alternate stack, asked of the kernel only when there are records to
 * compare with.  [signal-safe] */
static void where_here(struct where *w, stack_t *ss, uintptr_t sp)
{
    w->sp = sp;
    w->on_alt = false;
    w->ss = NULL;
    if (nrecs > 0 && sigaltstack(NULL, ss) == 0) {
        w->ss = ss;
        w->on_alt = (ss->ss_flags & SS_ONSTACK) || on_altstack(sp, ss);
    }
}

/* w for the code a fault interrupted.  The kernel saves the thread's
 * alternate stack in uc_stack but (since Linux 4.7) without SS_ONSTACK:
 * the stack pointer's place says.  [signal-safe] */
static void where_fault(struct where *w, const void *uc)
{
    const stack_t *ss = &((const ucontext_t *)uc)->uc_stack;
    w->sp = TK_CTX_SP(uc);
    w->on_alt = (ss->ss_flags & SS_ONSTACK) || on_altstack(w->sp, ss);
    w->ss = ss;
}

/* Registers fr, the frame of a call whose frame address is sp, as the
 * thread's innermost.  Returns 0 or -EOVERFLOW.  [signal-safe] */
static int frame_push(struct frame *fr, int kind, const void *obj, uintptr_t lo, uintptr_t hi,
                      uintptr_t sp)
{
    stack_t ss;
    struct where w;
    where_here(&w, &ss, sp);
    drop_dead(&w);
    uint64_t g = gen_last + 0x9e3779b97f4a7c15u; /* odd: every value once, far from small ints */
    if (g == 0) g += 0x9e3779b97f4a7c15u;
    gen_last = g;
    fr->gen = g;
    fr->code = 0;
    struct rec r = {.sp = sp,
                    .fr = fr,
                    .gen = g,
                    .obj = obj,
                    .lo = lo,
                    .hi = hi,
                    .kind = (signed char)kind,
                    .alt = w.ss ? (signed char)w.on_alt : -1};
    /* A signal handler may run at any point here and push and pop records
     * of its own at the same index: write, publish, and check that the
     * record survived; a handler that interrupts after the publication
     * sees it as live and pushes above it. */
    for (;;) {
        int n = nrecs;
        if (n >= MAX_FRAMES) {
            fr->gen = 0;
            return tk__failf(-EOVERFLOW,
                             "guard: more than %d tk_sandbox_call and tk_arena_try "
                             "under way in one thread",
                             MAX_FRAMES);
        }
        recs[n] = r;
        atomic_signal_fence(memory_order_seq_cst);
        nrecs = n + 1;
        atomic_signal_fence(memory_order_seq_cst);
        if (nrecs > n && recs[n].fr == fr && recs[n].gen == g && recs[n].sp == sp &&
            recs[n].obj == obj && recs[n].lo == lo && recs[n].hi == hi && recs[n].kind == kind &&
            recs[n].alt == r.alt)
            return 0;
    }
}

/* The cleanup of a call's frame: drops its record and those of the calls
 * inside it, when the call returns, is left by a C++ exception (this file
 * is compiled with -fexceptions), or returns after an escape (whose record
 * escape() dropped).  [signal-safe] */
static void frame_pop(struct frame *fr)
{
    if (!fr->gen) return;
    for (int i = nrecs; i > 0; i--) {
        if (recs[i - 1].fr == fr && recs[i - 1].gen == fr->gen) {
            nrecs = i - 1;
            break;
        }
    }
    fr->gen = 0;
    atomic_signal_fence(memory_order_seq_cst);
}

/* Leaves by siglongjmp to the call of record i (from the fault handler,
 * with uc the interrupted context, or from ordinary code with uc NULL),
 * dropping it and the records inside it.  [signal-safe] */
static _Noreturn void escape(int i, const void *uc)
{
    struct frame *fr = recs[i].fr;
    nrecs = i;
    atomic_signal_fence(memory_order_seq_cst);
    /* The mask as at the faulting access: trapkit's handler runs with it
     * already (SA_NODEFER, an empty sa_mask), but a handler that chains to
     * trapkit's may have added signals. */
    if (uc) sigprocmask(SIG_SETMASK, &((const ucontext_t *)uc)->uc_sigmask, NULL);
    siglongjmp(fr->jb, 1);
}

/* ---- tk_arena --------------------------------------------------------- */

/* The bytes of tk_arena_alloc's check: movq $0, -8(%rax) */
static const unsigned char probe_insn[8] = {0x48, 0xc7, 0x40, 0xf8, 0x00, 0x00, 0x00, 0x00};

int tk_arena_create(const tk_arena_config *cfg, tk_arena **out)
{
    if (!out) return tk__fail(-EINVAL, "tk_arena_create: out is NULL");
    *out = NULL;
    int err = ensure_setup();
    if (err) return err;
    tk_arena_config c = {0};
    if (cfg) c = *cfg;
    if (!c.max_size) c.max_size = GIB;
    if (!c.chunk) c.chunk = c.max_size < 65536 ? c.max_size : 65536;
    if (c.max_size % page_size || c.chunk % page_size)
        return tk__failf(-EINVAL,
                         "tk_arena_create: max_size (%zu) and chunk (%zu) must be "
                         "multiples of the page size (%zu)",
                         c.max_size, c.chunk, page_size);
    if (c.chunk > c.max_size)
        return tk__failf(-EINVAL, "tk_arena_create: chunk (%zu) is larger than max_size (%zu)",
                         c.chunk, c.max_size);
    if (c.max_size > ((size_t)1 << 46))
        return tk__failf(-EINVAL, "tk_arena_create: max_size (%zu) is larger than 64 TiB",
                         c.max_size);
    tk_arena *a = calloc(1, sizeof *a);
    if (!a) return tk__fail(-ENOMEM, "tk_arena_create: out of memory");
    size_t total = c.max_size + TK_ARENA_INLINE_MAX;
    total = (total + page_size - 1) & ~(page_size - 1);
    void *m = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        free(a);
        return tk__failf(-ENOMEM, "tk_arena_create: cannot reserve %zu bytes: %s", total,
                         strerror(errno));
    }
    if (mprotect(m, c.chunk, PROT_READ | PROT_WRITE) < 0) {
        int e = errno;
        munmap(m, total);
        free(a);
        return tk__failf(-e, "tk_arena_create: mprotect: %s", strerror(e));
    }
    a->base_ = m;
    a->top = m;
    a->limit = (char *)m + c.chunk;
    a->max_ = c.max_size;
    a->chunk_ = c.chunk;
    a->on_full_ = c.on_full;
    a->arg_ = c.arg;
    int s = slot_claim((uintptr_t)m, (uintptr_t)m + total, a, KIND_ARENA);
    if (s < 0) {
        munmap(m, total);
        free(a);
        return s;
    }
    a->slot_ = s;
    *out = a;
    return 0;
}

int tk_arena_destroy(tk_arena *a)
{
    if (!a) return tk__fail(-EINVAL, "tk_arena_destroy: NULL arena");
    slot_release(a->slot_);
    size_t total = (a->max_ + TK_ARENA_INLINE_MAX + page_size - 1) & ~(page_size - 1);
    munmap(a->base_, total);
    free(a);
    return 0;
}

/* [signal-safe] */
void tk_arena_reset(tk_arena *a)
{
    if (!a) return;
    a->top = a->base_;
    a->resets_++;
}

/* [signal-safe] */
void *tk_arena_base(const tk_arena *a)
{
    return a ? a->base_ : NULL;
}

/* [signal-safe] */
size_t tk_arena_used(const tk_arena *a)
{
    return a ? (size_t)(a->top - a->base_) : 0;
}

size_t tk_arena_committed(const tk_arena *a)
{
    return a ? (size_t)(a->limit - a->base_) : 0;
}

/* Makes room for an object of sz bytes that would end at *end: asks
 * on_full, then commits chunks until *end is below the limit.  Returns 0
 * (*end is where the object now ends) or a negative errno.  Runs in the
 * fault handler.  [signal-safe] */
static int arena_room(tk_arena *a, size_t sz, uintptr_t *end)
{
    if (a->on_full_) {
        unsigned long resets = a->resets_;
        int r = a->on_full_(a, sz, a->arg_);
        if (r < 0) return r;
        if (r == TK_ARENA_RETRY) {
            if (a->resets_ == resets) return -EINVAL; /* nothing was reset: no new top */
            *end = (uintptr_t)a->top + sz;
        } else if (r != TK_ARENA_GROW) {
            return -EINVAL;
        }
    }
    uintptr_t base = (uintptr_t)a->base_;
    if (*end <= (uintptr_t)a->limit) return 0;
    if (*end - base > a->max_) return -ENOMEM;
    size_t want = (*end - base + a->chunk_ - 1) / a->chunk_ * a->chunk_;
    if (want > a->max_) want = a->max_;
    size_t have = (size_t)(a->limit - a->base_);
    if (mprotect(a->limit, want - have, PROT_READ | PROT_WRITE) < 0) return -ENOMEM;
    a->limit = a->base_ + want;
    return 0;
}

/* The record of the innermost live tk_arena_try on a in this thread, for
 * code at w, or -1.  [signal-safe] */
static int arena_frame(const tk_arena *a, const struct where *w)
{
    drop_dead(w);
    for (int i = nrecs; i > 0; i--)
        if (recs[i - 1].kind == KIND_ARENA && recs[i - 1].obj == a && rec_live(&recs[i - 1], w))
            return i - 1;
    return -1;
}

/* Escapes to the innermost tk_arena_try on a with code r, if there is one
 * (from ordinary code).  [signal-safe] */
static void arena_escape_here(const tk_arena *a, int r)
{
    stack_t ss;
    struct where w;
    where_here(&w, &ss, (uintptr_t)__builtin_frame_address(0));
    int i = arena_frame(a, &w);
    if (i >= 0) {
        recs[i].fr->code = r;
        escape(i, NULL);
    }
}

void *tk_arena_alloc_slow(tk_arena *a, size_t n)
{
    if (!a) {
        tk__fail(-EINVAL, "tk_arena_alloc: the arena is NULL");
        return NULL;
    }
    size_t sz = TK__ARENA_ROUND(n);
    if (sz < n || sz > a->max_) {
        a->top = a->limit;
        arena_escape_here(a, -ENOMEM);
        tk__failf(-ENOMEM, "tk_arena_alloc: %zu bytes is more than the arena's max_size (%zu)", n,
                  a->max_);
        return NULL;
    }
    uintptr_t end = (uintptr_t)a->top + sz;
    if (end > (uintptr_t)a->limit) {
        int r = arena_room(a, sz, &end);
        if (r < 0) {
            a->top = a->limit;
            arena_escape_here(a, r);
            if (r == -ENOMEM)
                tk__failf(r, "tk_arena_alloc: the arena's limit of %zu bytes is reached", a->max_);
            else
                tk__failf(r, "tk_arena_alloc: on_full refused the allocation (%d)", r);
            return NULL;
        }
    }
    a->top = (char *)end;
    /* as tk_arena_alloc's store does: the last 8 bytes zero (for every
     * object: a large one comes here from tk_arena_alloc itself) */
    memset((char *)end - 8, 0, 8);
    return (char *)end - sz;
}

static void write_msg(const char *s)
{
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

/* A fault in an arena's reservation.  [signal-safe] */
static tk_action arena_fault(tk_arena *a, const tk_fault *f, const struct where *w)
{
#if defined(__x86_64__)
    ucontext_t *uc = f->ucontext;
    if (!uc || !f->pc || f->access == TK_ACCESS_EXEC) return TK_DECLINE;
    if (memcmp(f->pc, probe_insn, sizeof probe_insn) != 0)
        return TK_DECLINE; /* not an allocation */
    uintptr_t end = (uintptr_t)uc->uc_mcontext.gregs[REG_RAX];
    size_t sz = (size_t)uc->uc_mcontext.gregs[REG_RDX];
    if ((uintptr_t)f->addr != end - 8) return TK_DECLINE;
    int r = arena_room(a, sz, &end);
    if (r == 0) {
        uc->uc_mcontext.gregs[REG_RAX] = (greg_t)end;
        return TK_RESUME;
    }
    a->top = a->limit;
    int i = arena_frame(a, w);
    if (i >= 0) {
        recs[i].fr->code = r;
        escape(i, uc);
    }
    write_msg(r == -ENOMEM ? "trapkit: arena allocation beyond the arena's max_size outside "
                             "tk_arena_try\n"
                           : "trapkit: arena allocation refused by on_full outside tk_arena_try\n");
    return TK_DECLINE;
#else
    (void)a;
    (void)f;
    (void)w;
    (void)write_msg;
    (void)probe_insn;
    return TK_DECLINE;
#endif
}

int tk_arena_try(tk_arena *a, void (*fn)(tk_arena *a, void *arg), void *arg)
{
    if (!a || !fn) return tk__fail(-EINVAL, "tk_arena_try: NULL arena or function");
    struct frame fr __attribute__((cleanup(frame_pop)));
    fr.gen = 0;
    if (sigsetjmp(fr.jb, 0) == 0) {
        int e = frame_push(&fr, KIND_ARENA, a, 0, 0, (uintptr_t)__builtin_frame_address(0));
        if (e) return e;
        fn(a, arg);
        return 0;
    }
    return fr.code;
}

/* ---- tk_sandbox -------------------------------------------------------- */

struct tk_sandbox {
    char *base;
    size_t total;   /* the reservation: 4 GiB + guard */
    size_t initial; /* the size at creation and after a reset */
    size_t max;     /* max_size */
    atomic_size_t size;
    size_t committed; /* madv-guard: read-write mapping up to here; uffd: max */
    size_t high;      /* uffd: the largest size since the last reset */
    enum tk_sandbox_path path;
    int slot; /* uffd: its slot; else -1 */
};

static const char *const path_names[TK_SANDBOX_PATH_COUNT_] = {"auto", "mprotect", "madv-guard",
                                                               "uffd"};

const char *tk_sandbox_path_name(enum tk_sandbox_path p)
{
    return (unsigned)p < TK_SANDBOX_PATH_COUNT_ ? path_names[p] : "?";
}

enum tk_sandbox_path tk_sandbox_path_parse(const char *name)
{
    for (int i = 0; name && i < TK_SANDBOX_PATH_COUNT_; i++)
        if (strcmp(name, path_names[i]) == 0) return (enum tk_sandbox_path)i;
    return TK_SANDBOX_PATH_COUNT_;
}

/* The process's userfaultfd for uffd sandboxes, opened on first use and
 * again in a child of fork() (a userfaultfd stays bound to the address
 * space that opened it: registering through the parent's would register
 * the parent's memory). */
static pthread_mutex_t uffd_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int uffd_fd = -1;
static pid_t uffd_pid;

static int uffd_get(void)
{
    pthread_mutex_lock(&uffd_lock);
    int r = atomic_load(&uffd_fd);
    if (r >= 0 && uffd_pid != getpid()) {
        close(r);
        r = -1;
        atomic_store(&uffd_fd, -1);
    }
    if (r < 0) {
        const tk_probe_info *p = tk__probe();
        if (!tk_probe_has_uffd(p, UFFD_FEATURE_SIGBUS)) {
            r = tk__fail(-EOPNOTSUPP, "tk_sandbox_create: the uffd path needs userfaultfd with "
                                      "UFFD_FEATURE_SIGBUS (Linux 4.14), which this process "
                                      "cannot use here");
        } else {
            int fd = tk__uffd_create(UFFD_FEATURE_SIGBUS);
            if (fd < 0) {
                r = tk__failf(-EOPNOTSUPP, "tk_sandbox_create: cannot open a userfaultfd: %s",
                              strerror(-fd));
            } else {
                uffd_pid = getpid();
                atomic_store(&uffd_fd, fd);
                r = fd;
            }
        }
    }
    pthread_mutex_unlock(&uffd_lock);
    return r;
}

/* Zero-fills the page at addr for an access: UFFDIO_COPY of zeros for a
 * write (the page comes writable, no second fault), UFFDIO_ZEROPAGE for a
 * read.  Another thread filling it first (EEXIST) is success.  These two
 * ioctls are issued here rather than in src/os/linux because only this
 * module uses missing-mode userfaultfd.  [signal-safe] */
static int uffd_fill(uintptr_t addr, enum tk_access access)
{
    static const unsigned char zeros[65536] __attribute__((aligned(4096)));
    int saved = errno, r = 0;
    uintptr_t page = addr & ~(uintptr_t)(page_size - 1);
    if (access == TK_ACCESS_WRITE && page_size <= sizeof zeros) {
        struct uffdio_copy c = {.dst = page, .src = (uintptr_t)zeros, .len = page_size};
        if (ioctl(atomic_load(&uffd_fd), UFFDIO_COPY, &c) < 0 && errno != EEXIST) r = -errno;
    } else {
        struct uffdio_zeropage z = {.range = {.start = page, .len = page_size}};
        if (ioctl(atomic_load(&uffd_fd), UFFDIO_ZEROPAGE, &z) < 0 && errno != EEXIST) r = -errno;
    }
    errno = saved;
    return r;
}

static int sys_err(const char *what, int e)
{
    return tk__failf(e == ENOMEM ? -ENOMEM : -e, "%s: %s", what, strerror(e));
}

int tk_sandbox_create(const tk_sandbox_config *cfg, tk_sandbox **out)
{
    if (!out) return tk__fail(-EINVAL, "tk_sandbox_create: out is NULL");
    *out = NULL;
    int err = ensure_setup();
    if (err) return err;
    tk_sandbox_config c = {0};
    if (cfg) c = *cfg;
    if (!c.max_size) c.max_size = INDEX_SPACE;
    if (!c.guard) c.guard = 2 * GIB;
    if (c.flags) return tk__failf(-EINVAL, "tk_sandbox_create: unknown flags 0x%x", c.flags);
    if ((unsigned)c.path >= TK_SANDBOX_PATH_COUNT_)
        return tk__failf(-EINVAL, "tk_sandbox_create: unknown path %d", (int)c.path);
    if (c.size % page_size || c.max_size % page_size || c.guard % page_size)
        return tk__failf(-EINVAL,
                         "tk_sandbox_create: size (%zu), max_size (%zu) and guard (%zu) "
                         "must be multiples of the page size (%zu)",
                         c.size, c.max_size, c.guard, page_size);
    if (c.max_size > INDEX_SPACE)
        return tk__failf(-EINVAL,
                         "tk_sandbox_create: max_size (%zu) is more than the 4 GiB a "
                         "32-bit offset reaches",
                         c.max_size);
    if (c.size > c.max_size)
        return tk__failf(-EINVAL, "tk_sandbox_create: size (%zu) is larger than max_size (%zu)",
                         c.size, c.max_size);
    if (c.guard > ((size_t)1 << 40))
        return tk__failf(-EINVAL, "tk_sandbox_create: guard (%zu) is larger than 1 TiB", c.guard);
    const tk_probe_info *p = tk__probe();
    if (c.path == TK_SANDBOX_AUTO)
        c.path = p->madv_guard_install ? TK_SANDBOX_MADV_GUARD : TK_SANDBOX_MPROTECT;
    if (c.path == TK_SANDBOX_MADV_GUARD && !p->madv_guard_install)
        return tk__fail(-EOPNOTSUPP, "tk_sandbox_create: the madv-guard path needs "
                                     "MADV_GUARD_INSTALL (Linux 6.13), which this kernel lacks");
    int ufd = -1;
    if (c.path == TK_SANDBOX_UFFD && (ufd = uffd_get()) < 0) return ufd;

    tk_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) return tk__fail(-ENOMEM, "tk_sandbox_create: out of memory");
    sb->total = INDEX_SPACE + c.guard;
    sb->initial = c.size;
    sb->max = c.max_size;
    sb->path = c.path;
    sb->slot = -1;
    atomic_init(&sb->size, c.size);
    void *m = mmap(NULL, sb->total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        free(sb);
        return tk__failf(-ENOMEM, "tk_sandbox_create: cannot reserve %zu bytes: %s",
                         (size_t)INDEX_SPACE + c.guard, strerror(e));
    }
    sb->base = m;
    int r = 0;
    switch (c.path) {
    case TK_SANDBOX_MPROTECT:
        sb->committed = c.size;
        if (c.size && mprotect(m, c.size, PROT_READ | PROT_WRITE) < 0)
            r = sys_err("tk_sandbox_create: mprotect", errno);
        break;
    case TK_SANDBOX_MADV_GUARD:
        /* committed = size: a reset needs no call on it, and the first
         * grow commits ahead */
        sb->committed = c.size;
        if (c.size && mprotect(m, c.size, PROT_READ | PROT_WRITE) < 0)
            r = sys_err("tk_sandbox_create: mprotect", errno);
        break;
    case TK_SANDBOX_UFFD: {
        sb->committed = c.max_size;
        sb->high = c.size;
        if (mprotect(m, c.max_size, PROT_READ | PROT_WRITE) < 0) {
            r = sys_err("tk_sandbox_create: mprotect", errno);
            break;
        }
        struct uffdio_register reg = {.range = {.start = (uintptr_t)m, .len = c.max_size},
                                      .mode = UFFDIO_REGISTER_MODE_MISSING};
        if (ioctl(ufd, UFFDIO_REGISTER, &reg) < 0) {
            r = sys_err("tk_sandbox_create: UFFDIO_REGISTER", errno);
            break;
        }
        uint64_t need = (uint64_t)1 << _UFFDIO_COPY | (uint64_t)1 << _UFFDIO_ZEROPAGE;
        if ((reg.ioctls & need) != need) {
            r = tk__fail(-EOPNOTSUPP, "tk_sandbox_create: userfaultfd offers no UFFDIO_COPY or "
                                      "UFFDIO_ZEROPAGE for anonymous memory here");
            break;
        }
        int s = slot_claim((uintptr_t)m, (uintptr_t)m + c.max_size, sb, KIND_SANDBOX);
        if (s < 0)
            r = s;
        else
            sb->slot = s;
        break;
    }
    default:
        r = tk__fail(-EINVAL, "tk_sandbox_create: bad path");
    }
    if (r < 0) {
        munmap(m, sb->total);
        free(sb);
        return r;
    }
    *out = sb;
    return 0;
}

int tk_sandbox_destroy(tk_sandbox *sb)
{
    if (!sb) return tk__fail(-EINVAL, "tk_sandbox_destroy: NULL sandbox");
    if (sb->slot >= 0) slot_release(sb->slot);
    munmap(sb->base, sb->total); /* the userfaultfd registration goes with it */
    free(sb);
    return 0;
}

/* [signal-safe] */
void *tk_sandbox_base(const tk_sandbox *sb)
{
    return sb ? sb->base : NULL;
}

/* [signal-safe] */
size_t tk_sandbox_size(const tk_sandbox *sb)
{
    return sb ? atomic_load_explicit(&sb->size, memory_order_acquire) : 0;
}

enum tk_sandbox_path tk_sandbox_path(const tk_sandbox *sb)
{
    return sb ? sb->path : TK_SANDBOX_PATH_COUNT_;
}

int tk_sandbox_grow(tk_sandbox *sb, size_t new_size)
{
    if (!sb) return tk__fail(-EINVAL, "tk_sandbox_grow: NULL sandbox");
    size_t size = atomic_load(&sb->size);
    if (new_size % page_size)
        return tk__failf(-EINVAL, "tk_sandbox_grow: %zu is not a multiple of the page size",
                         new_size);
    if (new_size < size)
        return tk__failf(-EINVAL, "tk_sandbox_grow: %zu is less than the size (%zu)", new_size,
                         size);
    if (new_size > sb->max)
        return tk__failf(-ENOMEM, "tk_sandbox_grow: %zu is more than max_size (%zu)", new_size,
                         sb->max);
    if (new_size == size) return 0;
    char *b = sb->base;
    switch (sb->path) {
    case TK_SANDBOX_MPROTECT:
        if (mprotect(b + size, new_size - size, PROT_READ | PROT_WRITE) < 0)
            return sys_err("tk_sandbox_grow: mprotect", errno);
        break;
    case TK_SANDBOX_MADV_GUARD: {
        size_t open_to = new_size < sb->committed ? new_size : sb->committed;
        if (open_to > size && madvise(b + size, open_to - size, MADV_GUARD_REMOVE) < 0)
            return sys_err("tk_sandbox_grow: MADV_GUARD_REMOVE", errno);
        if (new_size > sb->committed) {
            /* commit ahead (doubling, at least 1 MiB), guard markers past the size */
            size_t c = sb->committed * 2;
            if (c < new_size) c = new_size;
            if (c < ((size_t)1 << 20)) c = (size_t)1 << 20;
            if (c > sb->max) c = sb->max;
            if (c > new_size && madvise(b + new_size, c - new_size, MADV_GUARD_INSTALL) < 0)
                return sys_err("tk_sandbox_grow: MADV_GUARD_INSTALL", errno);
            if (mprotect(b + sb->committed, c - sb->committed, PROT_READ | PROT_WRITE) < 0) {
                int e = errno;
                if (c > new_size) madvise(b + new_size, c - new_size, MADV_GUARD_REMOVE);
                return sys_err("tk_sandbox_grow: mprotect", e);
            }
            sb->committed = c;
        }
        break;
    }
    case TK_SANDBOX_UFFD:
        if (new_size > sb->high) sb->high = new_size;
        break;
    default:
        return -EINVAL;
    }
    atomic_store_explicit(&sb->size, new_size, memory_order_release);
    return 0;
}

int tk_sandbox_reset(tk_sandbox *sb)
{
    if (!sb) return tk__fail(-EINVAL, "tk_sandbox_reset: NULL sandbox");
    size_t size = atomic_load(&sb->size), init = sb->initial;
    char *b = sb->base;
    switch (sb->path) {
    case TK_SANDBOX_MPROTECT:
        if (size && madvise(b, size, MADV_DONTNEED) < 0)
            return sys_err("tk_sandbox_reset: MADV_DONTNEED", errno);
        if (size > init && mprotect(b + init, size - init, PROT_NONE) < 0)
            return sys_err("tk_sandbox_reset: mprotect", errno);
        break;
    case TK_SANDBOX_MADV_GUARD:
        if (init && madvise(b, init, MADV_DONTNEED) < 0)
            return sys_err("tk_sandbox_reset: MADV_DONTNEED", errno);
        /* installing a guard marker drops the page under it */
        if (size > init && madvise(b + init, size - init, MADV_GUARD_INSTALL) < 0)
            return sys_err("tk_sandbox_reset: MADV_GUARD_INSTALL", errno);
        break;
    case TK_SANDBOX_UFFD:
        atomic_store(&sb->size, init);
        if (sb->high && madvise(b, sb->high, MADV_DONTNEED) < 0)
            return sys_err("tk_sandbox_reset: MADV_DONTNEED", errno);
        sb->high = init;
        break;
    default:
        return -EINVAL;
    }
    atomic_store(&sb->size, init);
    return 0;
}

int tk_sandbox_call(tk_sandbox *sb, void (*fn)(tk_sandbox *sb, void *arg), void *arg,
                    tk_sandbox_trap *trap)
{
    if (!sb || !fn) return tk__fail(-EINVAL, "tk_sandbox_call: NULL sandbox or function");
    struct frame fr __attribute__((cleanup(frame_pop)));
    fr.gen = 0;
    if (sigsetjmp(fr.jb, 0) == 0) {
        uintptr_t lo = (uintptr_t)sb->base;
        int e = frame_push(&fr, KIND_SANDBOX, sb, lo, lo + sb->total,
                           (uintptr_t)__builtin_frame_address(0));
        if (e) return e;
        fn(sb, arg);
        return 0;
    }
    if (trap) *trap = fr.trap;
    return -EFAULT;
}

/* ---- the fault handler ------------------------------------------------- */

/* [signal-safe]: reads the table and the thread's frames, makes only
 * system calls (mprotect, ioctl, sigprocmask), and leaves by siglongjmp
 * or returns. */
static tk_action guard_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    int sig = (int)(f->flags >> 16);
    if ((sig != SIGSEGV && sig != SIGBUS) || !f->ucontext) return TK_DECLINE;
    uintptr_t addr = (uintptr_t)f->addr;
    struct where w;
    where_fault(&w, f->ucontext);
    drop_dead(&w);

    int kind = 0;
    void *owner = slot_find(addr, &kind);
    if (owner && kind == KIND_ARENA) return arena_fault(owner, f, &w);
    if (owner && kind == KIND_SANDBOX && sig == SIGBUS) {
        tk_sandbox *sb = owner;
        if (addr - (uintptr_t)sb->base < tk_sandbox_size(sb)) {
            if (uffd_fill(addr, f->access) == 0) return TK_RESUME;
            return TK_DECLINE;
        }
    }
    for (int i = nrecs; i > 0; i--) {
        const struct rec *r = &recs[i - 1];
        if (r->kind != KIND_SANDBOX || addr < r->lo || addr >= r->hi || !rec_live(r, &w)) continue;
        struct frame *fr = r->fr;
        fr->trap.sandbox = (tk_sandbox *)r->obj;
        fr->trap.offset = addr - r->lo;
        fr->trap.access = f->access;
        fr->trap.pc = f->pc;
        escape(i - 1, f->ucontext);
    }
    return TK_DECLINE;
}
