// kernel/cxx/tests/conformance.cpp - the C++ the module promises, checked
// inside the kernel: global objects built at load and destroyed at unload,
// new and delete, RTTI and dynamic_cast, and exceptions (by type, by base,
// by pointer, catch (...), rethrow, nested, destructor order, from
// constructors, across the module's functions), the cases of
// tests/cxx_conformance that make sense in a kernel.  Each failed check
// writes its line; tkcxx_run_tests() gives the number that failed.
#include <new>
#include <stdint.h>
#include <string.h>
#include <tkcxx.h>
#include <typeinfo>

extern "C" std::type_info *__cxa_current_exception_type() noexcept;

namespace
{

int failures;
void check(bool ok, int line, const char *what)
{
    if (ok) return;
    failures++;
    char buf[200];
    tkk_snprintf(buf, sizeof buf, "KT-SAY tkcxx test FAILED: conformance.cpp:%d: %s", line, what);
    tkk_print(buf);
}
#define CHECK(x) check((x), __LINE__, #x)

// What happened, in order: one letter a step.
struct trail {
    char s[64];
    int n;
    void clear()
    {
        n = 0;
        s[0] = 0;
    }
    void add(char c)
    {
        if (n < 63) {
            s[n++] = c;
            s[n] = 0;
        }
    }
    bool is(const char *t) const { return strcmp(s, t) == 0; }
};
trail t;

struct mark { // adds its letter when destroyed
    char c;
    explicit mark(char ch) : c(ch) {}
    ~mark() { t.add(c); }
};

// ---- global objects ----
int globals_built;
struct global_obj {
    int v;
    global_obj(int x) : v(x)
    {
        globals_built++;
        // a throw and catch inside a constructor run at load
        try {
            if (x > 0) throw x;
        } catch (int i) {
            v = i * 10;
        }
        if (tkcxx_ctor_throws && x == 3) throw x; // nothing catches it: the load fails
    }
    ~global_obj() { globals_built--; }
};
global_obj g1(1), g2(2), g3(3);

// (module parameter dtor_throws) a global whose destructor throws at unload
struct dtor_throws_obj {
    ~dtor_throws_obj() noexcept(false)
    {
        if (tkcxx_dtor_throws) throw 9;
    }
} g4;

// ---- classes ----
struct base {
    int v;
    explicit base(int x) : v(x) {}
    virtual ~base() {}
    virtual int kind() const { return 0; }
};
struct derived : base {
    explicit derived(int x) : base(x) {}
    int kind() const override { return 1; }
};
struct more : derived {
    explicit more(int x) : derived(x) {}
    int kind() const override { return 2; }
};
struct other {
    virtual ~other() {}
    int o = 7;
};
struct both : derived, other { // multiple inheritance
    explicit both(int x) : derived(x) {}
};
struct vbase {
    virtual ~vbase() {}
    int vb = 3;
};
struct left : virtual vbase {
    int l = 1;
};
struct right : virtual vbase {
    int r = 2;
};
struct diamond : left, right {
    int d = 4;
};
struct priv : private base { // base not public: not caught as a base
    priv() : base(9) {}
};
struct src_x {
    virtual ~src_x() {}
};
struct dst_x {
    virtual ~dst_x() {}
};
struct via1 : dst_x {
};
struct via2 : dst_x {
};
struct twice_x : src_x, via1, private via2 {
};
struct once_x : src_x, via1 {
};
struct error_a : std::exception {
    const char *what() const noexcept override { return "error_a"; }
};

// The module's functions a throw crosses (not in-lined, so each is a frame).
[[gnu::noinline]] void thrower(int depth, int v)
{
    mark m('0' + static_cast<char>(depth % 10));
    if (depth == 0) throw derived(v);
    thrower(depth - 1, v);
    asm volatile("");
}

[[gnu::noinline]] int may_throw(int x)
{
    if (x > 0) throw x;
    return -x;
}

struct ctor_throws {
    mark a{'a'};
    mark b{'b'};
    ctor_throws() { throw 5; } // a and b are destroyed: b first
};

volatile size_t huge = size_t{1} << 40;
char *volatile seen;

[[gnu::noinline]] int many_args(long a, long b, long c, long d, long e, long f, long g, long h,
                                long i)
{
    if (a) throw static_cast<int>(a + b + c + d + e + f + g + h + i);
    return 0;
}

struct member_holder {
    int x = 3;
    int get() { return x; }
};

// base twice: once through a public path, once through a private one
struct left_base : base {
    left_base() : base(1) {}
};
struct right_base : base {
    right_base() : base(2) {}
};
struct twice : left_base, private right_base {
};

void quiet() noexcept {}
void loud() {}

struct counted {
    static int live;
    counted() { live++; }
    counted(const counted &) { live++; }
    ~counted() { live--; }
};
int counted::live;

void test_globals()
{
    CHECK(globals_built == 3);
    CHECK(g1.v == 10 && g2.v == 20 && g3.v == 30);
}

void test_new_delete()
{
    auto *d = new derived(4);
    CHECK(d->v == 4 && d->kind() == 1);
    delete d;
    int *a = new int[100];
    a[99] = 1;
    delete[] a;
    auto *p = new (std::nothrow) counted[3];
    CHECK(p && counted::live == 3);
    delete[] p;
    CHECK(counted::live == 0);
    bool threw = false;
    try {
        // more than kmalloc gives
        char *big = new char[huge];
        seen = big; // (else the compiler may drop the new and delete)
        delete[] big;
    } catch (const std::bad_alloc &e) {
        threw = strcmp(e.what(), "std::bad_alloc") == 0;
    }
    CHECK(threw);
}

void test_rtti()
{
    more m(1);
    base *b = &m;
    CHECK(typeid(*b) == typeid(more));
    CHECK(typeid(*b) != typeid(derived));
    CHECK(dynamic_cast<derived *>(b) == &m);
    CHECK(dynamic_cast<more *>(b) == &m);
    derived d(2);
    CHECK(dynamic_cast<more *>(static_cast<base *>(&d)) == nullptr);
    both x(3);
    other *o = &x;
    CHECK(dynamic_cast<both *>(o) == &x);
    CHECK(dynamic_cast<derived *>(o) == static_cast<derived *>(&x)); // cross cast
    CHECK(dynamic_cast<void *>(o) == static_cast<void *>(&x));
    diamond dm;
    vbase *vb = &dm;
    CHECK(dynamic_cast<diamond *>(vb) == &dm);
    CHECK(dynamic_cast<right *>(vb) == static_cast<right *>(&dm));
    CHECK(dynamic_cast<left *>(vb)->l == 1);
    bool threw = false;
    try {
        (void)dynamic_cast<more &>(static_cast<base &>(d));
    } catch (const std::bad_cast &) {
        threw = true;
    }
    CHECK(threw);
    CHECK(strcmp(typeid(int).name(), "i") == 0);
    // a cross cast to a base the object has twice (once privately): null
    twice_x tx;
    CHECK(dynamic_cast<dst_x *>(static_cast<src_x *>(&tx)) == nullptr);
    once_x ox;
    CHECK(dynamic_cast<dst_x *>(static_cast<src_x *>(&ox)) == static_cast<dst_x *>(&ox));
}

void test_exceptions()
{
    // by type, and no conversions but derived-to-base and qualification
    t.clear();
    try {
        try {
            throw 7;
        } catch (long) {
            CHECK(false);
        } catch (unsigned) {
            CHECK(false);
        }
    } catch (int i) {
        CHECK(i == 7);
        t.add('t');
    }
    CHECK(t.is("t"));
    // by base, by reference and by pointer; not base-to-derived
    try {
        throw derived(5);
    } catch (const more &) {
        CHECK(false);
    } catch (base &b) {
        CHECK(b.v == 5 && typeid(b) == typeid(derived) && b.kind() == 1);
    }
    static more m(6);
    try {
        throw &m;
    } catch (derived *) {
        CHECK(true);
    }
    try {
        throw &m;
    } catch (const base *b) { // pointer to base, with const added
        CHECK(b->v == 6);
    }
    try {
        throw &m;
    } catch (void *p) {
        CHECK(p == &m);
    }
    try {
        throw nullptr;
    } catch (base *p) {
        CHECK(p == nullptr);
    }
    // a second base of a class with two: the pointer is adjusted
    try {
        throw both(8);
    } catch (other &o) {
        CHECK(o.o == 7);
    }
    // a virtual base
    try {
        throw diamond();
    } catch (vbase &v) {
        CHECK(v.vb == 3);
    }
    // a private base is not a handler's match
    t.clear();
    try {
        try {
            throw priv();
        } catch (base &) {
            CHECK(false);
        }
    } catch (priv &) {
        t.add('p');
    }
    CHECK(t.is("p"));
    // catch (...), first match wins
    t.clear();
    try {
        throw error_a();
    } catch (const std::exception &e) {
        CHECK(strcmp(e.what(), "error_a") == 0);
        t.add('e');
    } catch (...) {
        CHECK(false);
    }
    try {
        throw 'c';
    } catch (...) {
        t.add('a');
    }
    CHECK(t.is("ea"));
    // through ten of the module's frames, each destroying its mark on the way
    t.clear();
    try {
        thrower(9, 11);
    } catch (derived &d) {
        CHECK(d.v == 11);
    }
    CHECK(t.is("0123456789"));
    // rethrow: the same object
    const void *first = nullptr, *second = nullptr;
    try {
        try {
            throw derived(1);
        } catch (base &b) {
            first = &b;
            throw;
        }
    } catch (derived &d) {
        second = &d;
    }
    CHECK(first && first == second);
    // nested: a throw and catch inside a handler, and inside a destructor
    // run by the unwinding
    t.clear();
    try {
        struct inner_throw {
            ~inner_throw()
            {
                try {
                    throw 2;
                } catch (int i) {
                    if (i == 2) t.add('i');
                }
            }
        } guard;
        throw 1;
    } catch (int i) {
        CHECK(i == 1);
        try {
            throw 3;
        } catch (int j) {
            CHECK(j == 3);
            t.add('n');
        }
        CHECK(__cxa_current_exception_type() && *__cxa_current_exception_type() == typeid(int));
    }
    CHECK(t.is("in"));
    // destructor order: innermost first, then the handler
    t.clear();
    try {
        mark a('a');
        {
            mark b('b');
            mark c('c');
            throw 4;
        }
    } catch (int) {
        t.add('H');
    }
    CHECK(t.is("cbaH"));
    // from a constructor: the members built so far are destroyed
    t.clear();
    try {
        ctor_throws x;
        CHECK(false);
    } catch (int i) {
        CHECK(i == 5);
    }
    CHECK(t.is("ba"));
    // the thrown object is destroyed once, when its handler ends
    CHECK(counted::live == 0);
    try {
        throw counted();
    } catch (const counted &) {
        CHECK(counted::live == 1);
    }
    CHECK(counted::live == 0);
    // through a virtual call and a function pointer
    struct thrower_base {
        virtual ~thrower_base() {}
        virtual void go(int v) = 0;
    };
    struct thrower_impl : thrower_base {
        void go(int v) override { may_throw(v); }
    };
    thrower_impl ti;
    thrower_base *tb = &ti;
    int (*volatile fp)(int) = may_throw;
    int got = 0;
    try {
        tb->go(12);
    } catch (int v) {
        got += v;
    }
    try {
        fp(13);
    } catch (int v) {
        got += v;
    }
    CHECK(got == 25);
    // caught by value: a copy, made from the thrown object; both destroyed
    try {
        throw counted();
    } catch (counted c) {
        CHECK(counted::live == 2);
    }
    CHECK(counted::live == 0);
    // a throw from a call that pushed arguments (the seventh on): the
    // handler's stack pointer is the same every time
    uint64_t sp0 = 0;
    bool sp_same = true;
    for (int k = 0; k < 50; k++) {
        try {
            many_args(1, 2, 3, 4, 5, 6, 7, 8, 9);
        } catch (int v) {
            uint64_t sp;
            asm volatile("mov %%rsp, %0" : "=r"(sp));
            if (k == 0) sp0 = sp;
            sp_same &= sp == sp0 && v == 45;
        }
    }
    CHECK(sp_same);
    // a null pointer to a derived class, caught as a pointer to a base
    t.clear();
    try {
        throw static_cast<more *>(nullptr);
    } catch (base *b) {
        if (!b) t.add('n');
    }
    try {
        throw static_cast<diamond *>(nullptr);
    } catch (vbase *v) {
        if (!v) t.add('v');
    }
    CHECK(t.is("nv"));
    // pointers to members: nullptr, and a qualification added
    try {
        throw nullptr;
    } catch (int member_holder::*p) {
        CHECK(p == nullptr);
    }
    try {
        throw nullptr;
    } catch (int (member_holder::*f)()) {
        CHECK(f == nullptr);
    }
    try {
        throw &member_holder::x;
    } catch (const int member_holder::*p) {
        member_holder h;
        CHECK(h.*p == 3);
    }
    // a base that is there twice (once privately) is ambiguous: no match
    t.clear();
    try {
        try {
            throw twice();
        } catch (base &) {
            CHECK(false);
        }
    } catch (twice &) {
        t.add('2');
    }
    CHECK(t.is("2"));
    // a pointer to a noexcept function is caught as a plain one, not the
    // other way round
    t.clear();
    try {
        void (*nf)() noexcept = quiet;
        throw nf;
    } catch (void (*f)()) {
        f();
        t.add('q');
    }
    try {
        try {
            void (*pf)() = loud;
            throw pf;
        } catch (void (*)() noexcept) {
            CHECK(false);
        }
    } catch (void (*)()) {
        t.add('l');
    }
    CHECK(t.is("ql"));
    // a function that returns normally after others threw and caught
    int sum = 0;
    for (int i = -3; i <= 3; i++) {
        try {
            sum += may_throw(i);
        } catch (int v) {
            sum += 100 * v;
        }
    }
    CHECK(sum == 3 + 2 + 1 + 0 + 100 + 200 + 300);
    // the exceptions are all freed
    tkcxx_counts c;
    tkcxx_get_counts(&c);
    CHECK(c.exceptions == 0);
}

} // namespace

extern "C" int tkcxx_run_tests(void *)
{
    failures = 0;
    // each test under every combination of the optimisations
    struct tkcxx_opts saved = tkcxx_opts;
    for (int m = 0; m < 8; m++) {
        tkcxx_opts = {m & 1, (m >> 1) & 1, (m >> 2) & 1, 0};
        tkcxx_flush_cache();
        test_globals();
        test_new_delete();
        test_rtti();
        test_exceptions();
    }
    tkcxx_opts = saved;
    char buf[120];
    tkk_snprintf(buf, sizeof buf, "tkcxx: tests: %d checks failed", failures);
    tkk_print(buf);
    return failures;
}

// What nothing catches: the boundary reports it (module.c checks what the
// call gives).
extern "C" int tkcxx_uncaught(void *)
{
    thrower(3, 1);
    return 0;
}

[[gnu::noinline]] static void noexcept_thrower() noexcept
{
    may_throw(1);
}
static void (*volatile call_noexcept)() = noexcept_thrower;

extern "C" int tkcxx_terminates(void *)
{
    call_noexcept();
    return 0;
}

// a destructor that throws while the unwinding runs it for another
// exception (destructors are noexcept: std::terminate)
struct throws_in_dtor {
    ~throws_in_dtor() { may_throw(2); }
};

extern "C" int tkcxx_throws_in_unwinding(void *)
{
    throws_in_dtor t;
    may_throw(1);
    return 0;
}
