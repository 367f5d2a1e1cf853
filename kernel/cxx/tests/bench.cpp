// kernel/cxx/tests/bench.cpp - the seed's Tables 1-4 where its runtime ran:
// dynamic_cast down a class chain (Table 1), where a one-frame throw's time
// goes (Table 2), and a throw caught 1 to 20 frames up, with and without a
// destructor in each frame, against an error code returned through the
// same frames (Tables 3 and 4).  In the module (tkcxx.ko) each is measured
// with the runtime's optimisations all on ("tkcxx"), all off
// ("tkcxx-unoptimised") and each one off in turn; the same file built with
// -DTKCXX_USER is tkcxx-user, the same code in a user process against g++'s
// own runtime (libstdc++ over libgcc's unwinder: "libgcc").
//
// Times are read from the time-stamp counter: under qemu -icount shift=0 it
// counts instructions (unit "insn": the module's parameter unit=insn, the
// process's TKCXX_UNIT=insn).  Each figure is the median of REPS runs; every
// result is a "KT-JSON {...}" line (scripts/kernel-test.py collects them).
#include <stdint.h>
#include <string.h>

#include "tkcxx.h"
#include <typeinfo>

namespace
{

volatile long sink;
struct guard {
    ~guard() { sink = sink + 1; }
};

[[gnu::noinline]] void throw_int(int d)
{
    if (d <= 1) throw 42;
    throw_int(d - 1);
    asm volatile("" ::: "memory"); // not a tail call: every frame stays
}

[[gnu::noinline]] void throw_dtors(int d)
{
    guard g;
    if (d <= 1) throw 42;
    throw_dtors(d - 1);
    asm volatile("" ::: "memory");
}

// (the failure read from memory, so the compiler cannot know every call
// fails and fold the frames away)
volatile int failure = -5;

[[gnu::noinline]] int error_code(int d)
{
    if (d <= 1) return failure;
    int r = error_code(d - 1);
    asm volatile("" ::: "memory");
    if (r < 0) return r;
    return r + 1;
}

[[gnu::noinline]] int error_code_dtors(int d)
{
    guard g;
    if (d <= 1) return failure;
    int r = error_code_dtors(d - 1);
    asm volatile("" ::: "memory");
    if (r < 0) return r;
    return r + 1;
}

// Table 1's chain: A <- B <- C <- D <- E, a cast of an A * to B *
struct A {
    virtual ~A() {}
};
struct B : A {
};
struct C : B {
};
struct D : C {
};
struct E : D {
};
[[gnu::noinline]] B *to_b(A *a)
{
    return dynamic_cast<B *>(a);
}

inline uint64_t ticks()
{
    uint32_t lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return static_cast<uint64_t>(hi) << 32 | lo;
}

constexpr int REPS = 15;
const int FRAMES[] = {1, 2, 3, 4, 5, 10, 15, 20};

struct stat3 {
    uint64_t median, min, max;
};
stat3 summary(uint64_t *v, int n)
{
    for (int i = 1; i < n; i++) { // insertion sort
        uint64_t x = v[i];
        int j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    return {v[n / 2], v[0], v[n - 1]};
}

// f() run per times in each of REPS runs: the median cost of one
template <class F> stat3 measure(int per, F f)
{
    uint64_t v[REPS];
    f(); // (the first: caches warm, as the seed measured)
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = ticks();
        for (int i = 0; i < per; i++) f();
        v[r] = (ticks() - t0) / static_cast<uint64_t>(per);
    }
    return summary(v, REPS);
}

const char *unit = "TSC ticks";
const char *where = "kernel";

void emit(const char *exp, const char *mech, const char *params, stat3 s)
{
    char line[400];
    tkk_snprintf(line, sizeof line,
                 "KT-JSON {\"experiment\": \"%s\", \"mechanism\": \"%s\", \"params\": {%s, "
                 "\"where\": \"%s\"}, \"metric\": \"%s\", \"unit\": \"%s\", \"median\": %llu, "
                 "\"min\": %llu, \"max\": %llu, \"n\": %d}",
                 exp, mech, params, where, strcmp(unit, "insn") ? "time" : "instructions", unit,
                 static_cast<unsigned long long>(s.median), static_cast<unsigned long long>(s.min),
                 static_cast<unsigned long long>(s.max), REPS);
    tkk_print(line);
}

void frames_param(char *buf, int n, int frames)
{
    tkk_snprintf(buf, static_cast<size_t>(n), "\"frames\": %d", frames);
}

// Tables 3 and 4 (and the error codes) for one runtime configuration
void throws(const char *mech)
{
    char p[64];
    for (int f : FRAMES) {
        frames_param(p, sizeof p, f);
        emit("gylfason/kernel-throw-int", mech, p, measure(1, [f] {
                 try {
                     throw_int(f);
                 } catch (int) {
                 }
             }));
        emit("gylfason/kernel-throw-with-destructors", mech, p, measure(1, [f] {
                 try {
                     throw_dtors(f);
                 } catch (int) {
                 }
             }));
    }
}

void error_codes()
{
    char p[64];
    for (int f : FRAMES) {
        frames_param(p, sizeof p, f);
        emit("gylfason/kernel-throw-int", "error-code", p,
             measure(100, [f] { sink = sink + error_code(f); }));
        emit("gylfason/kernel-throw-with-destructors", "error-code", p,
             measure(100, [f] { sink = sink + error_code_dtors(f); }));
    }
}

void dynamic_casts(const char *mech)
{
    static B b;
    static C c;
    static D d;
    static E e;
    A *objs[] = {&b, &c, &d, &e};
    const char *names[] = {"B", "C", "D", "E"};
    for (int i = 0; i < 4; i++) {
        char p[64];
        tkk_snprintf(p, sizeof p, "\"class\": \"%s\"", names[i]);
        A *a = objs[i];
        emit("gylfason/kernel-dynamic-cast", mech, p, measure(100, [a] {
                 if (!to_b(a)) sink = sink + 1;
             }));
    }
}

} // namespace

#ifndef TKCXX_USER
// Table 2: the parts of a one-frame throw, from the runtime's time stamps
void breakdown(const char *mech)
{
    const char *names[] = {"allocation", "search", "unwind", "install", "catch"};
    uint64_t v[5][REPS];
    tkcxx_opts.trace = 1;
    for (int r = -1; r < REPS; r++) {
        try {
            throw_int(1);
        } catch (int) {
        }
        if (r < 0) continue; // (warm)
        const uint64_t *t = tkcxx_stamps;
        v[0][r] = t[TKCXX_T_ALLOC1] - t[TKCXX_T_ALLOC0];
        v[1][r] = t[TKCXX_T_FOUND] - t[TKCXX_T_RAISE];
        v[2][r] = t[TKCXX_T_INSTALL] - t[TKCXX_T_FOUND];
        v[3][r] = t[TKCXX_T_BEGIN] - t[TKCXX_T_INSTALL];
        v[4][r] = t[TKCXX_T_END] - t[TKCXX_T_BEGIN];
    }
    tkcxx_opts.trace = 0;
    for (int k = 0; k < 5; k++) {
        char p[64];
        tkk_snprintf(p, sizeof p, "\"frames\": 1, \"part\": \"%s\"", names[k]);
        emit("gylfason/kernel-breakdown", mech, p, summary(v[k], REPS));
    }
}

extern "C" int tkcxx_run_bench(void *)
{
    unit = tkcxx_unit;
    struct config {
        const char *mech;
        struct tkcxx_opts o;
    };
    const config configs[] = {
        {"tkcxx", {1, 1, 1, 0}},
        {"tkcxx-unoptimised", {0, 0, 0, 0}},
        {"tkcxx-no-one-phase", {0, 1, 1, 0}},
        {"tkcxx-no-inline-raise", {1, 0, 1, 0}},
        {"tkcxx-no-cache", {1, 1, 0, 0}},
        {"tkcxx-one-phase-only", {1, 0, 0, 0}},
    };
    struct tkcxx_opts saved = tkcxx_opts;
    for (const config &c : configs) {
        tkcxx_opts = c.o;
        tkcxx_flush_cache();
        char line[120];
        tkk_snprintf(line, sizeof line, "KT-SAY tkcxx bench: %s", c.mech);
        tkk_print(line);
        throws(c.mech);
        breakdown(c.mech);
    }
    tkcxx_opts = saved;
    error_codes();
    dynamic_casts("tkcxx");
    return 0;
}
#else
// tkcxx-user: the same measurements in a process, with g++'s runtime
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
void tkk_print(const char *s)
{
    puts(s);
    fflush(stdout);
}
int tkk_snprintf(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}
}

int main()
{
    const char *u = getenv("TKCXX_UNIT");
    if (u) unit = u;
    where = "user";
    throws("libgcc");
    error_codes();
    dynamic_casts("libgcc");
    return 0;
}
#endif
