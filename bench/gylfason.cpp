// bench/gylfason.cpp - Gylfason & Hjalmtysson's measurements of C++
// exceptions on this machine: what a throw costs through 1 to 20 frames
// (an int, an object, frames with destructors), dynamic_cast down a class
// chain, a system call that reports failure by exception at a given rate,
// the first throw of a process, and throws per second from 1 and 2
// threads.
//
// Mechanisms: libgcc (libstdc++ over GCC's unwinder, the system's),
// llvm-libunwind (the same program with LLVM's libunwind preloaded, where
// Debian's libunwind-14 is installed), trapkit (the same program with
// libtrapkit_eh.so preloaded: include/trapkit/eh.h), error-code (the
// failing system call returning an error instead).  Each mechanism runs in its own process; the
// parent runs them in turn, once per repetition, and reports medians.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <string>
#include <vector>

extern "C" {
#include "bench.h"
}

namespace
{

const char *const llvm_unwind = "/usr/lib/llvm-14/lib/libunwind.so.1";
volatile long sink;
volatile int zero_frames; // read by every frame so the compiler keeps them

struct os_exception { // the paper's OSException: a message, a severity, a virtual
    const char *message;
    int severity;
    os_exception(const char *m, int s) : message(m), severity(s) {}
    virtual ~os_exception() = default;
    virtual void report() { sink += severity; }
};
struct pronto_exception : os_exception {
    pronto_exception() : os_exception("pronto", 2) {}
};

struct guard {
    ~guard() { sink = sink + 1; }
};

__attribute__((noinline)) void throw_int(int d)
{
    if (d <= 1) throw 42;
    throw_int(d - 1);
    __asm__ volatile("" ::: "memory"); // not a tail call: every frame stays
}

__attribute__((noinline)) void throw_object(int d)
{
    if (d <= 1) throw pronto_exception();
    throw_object(d - 1);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void throw_destructors(int d)
{
    guard g;
    if (d <= 1) throw 42;
    throw_destructors(d - 1);
    __asm__ volatile("" ::: "memory");
}

template <class F> double ns_per(long n, F f)
{
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < n; i++) f(i);
    return static_cast<double>(bench_now_ns() - t0) / static_cast<double>(n);
}

// dynamic_cast<B *> of an A * to a B, C, D or E
struct A {
    virtual ~A() = default;
};
struct B : A {
};
struct C : B {
};
struct D : C {
};
struct E : D {
};

__attribute__((noinline)) B *to_b(A *a)
{
    return dynamic_cast<B *>(a);
}

// a system call that fails at the given rate: by exception or error code
__attribute__((noinline)) long call_or_throw(bool fail)
{
    long r = syscall(SYS_getppid);
    if (fail) throw static_cast<int>(-r);
    return r;
}
__attribute__((noinline)) long call_or_error(bool fail)
{
    long r = syscall(SYS_getppid);
    return fail ? -1 : r;
}

void out(const char *exp, const std::string &params, double v)
{
    printf("%s\t%s\t%.6g\n", exp, params.c_str(), v);
}

std::atomic<bool> stop_threads;
std::atomic<long> thrown;

void *throw_loop(void *)
{
    long n = 0;
    while (!stop_threads.load(std::memory_order_relaxed)) {
        try {
            throw_int(1);
        } catch (int) {
            n++;
        }
    }
    thrown += n;
    return nullptr;
}

// One repetition of everything, for the mechanism this process runs with.
void child(bool quick, bool error_code)
{
    long n = quick ? 2000 : 20000;
    const double rates[] = {0, 0.001, 0.01, 0.1, 1};
    if (error_code) { // the failing system call only
        for (double r : rates) {
            long period = r > 0 ? static_cast<long>(1 / r + 0.5) : 0;
            char p[64];
            snprintf(p, sizeof p, "\"failure_rate\": %g", r);
            out("gylfason/syscall-error", p, ns_per(n * 5, [period](long i) {
                    if (call_or_error(period && i % period == 0) < 0) sink += 1;
                }));
        }
        return;
    }
    // the first throw of the process (the unwinder builds its tables)
    uint64_t t0 = bench_now_ns();
    try {
        throw_int(1);
    } catch (int) {
    }
    out("gylfason/first-throw", "", static_cast<double>(bench_now_ns() - t0));

    const int frames[] = {1, 2, 3, 4, 5, 10, 20};
    for (int f : frames) {
        std::string p = "\"frames\": " + std::to_string(f);
        long k = f > 5 ? n / 4 : n;
        out("gylfason/throw-int", p, ns_per(k, [f](long) {
                try {
                    throw_int(f);
                } catch (int) {
                }
            }));
        out("gylfason/throw-object", p, ns_per(k, [f](long) {
                try {
                    throw_object(f);
                } catch (os_exception &e) {
                    e.report();
                }
            }));
        out("gylfason/throw-with-destructors", p, ns_per(k, [f](long) {
                try {
                    throw_destructors(f);
                } catch (int) {
                }
            }));
    }
    B b;
    C c;
    D d;
    E e;
    A *objs[] = {&b, &c, &d, &e};
    for (int depth = 1; depth <= 4; depth++) {
        A *a = objs[depth - 1];
        out("gylfason/dynamic-cast", "\"depth\": " + std::to_string(depth),
            ns_per(n * 50, [a](long) { sink += to_b(a) != nullptr; }));
    }
    for (double r : rates) {
        long period = r > 0 ? static_cast<long>(1 / r + 0.5) : 0;
        char p[64];
        snprintf(p, sizeof p, "\"failure_rate\": %g", r);
        out("gylfason/syscall-error", p, ns_per(n * 5, [period](long i) {
                try {
                    sink += call_or_throw(period && i % period == 0);
                } catch (int) {
                    sink += 1;
                }
            }));
    }
    // throwing threads: never more than CPUs (the main thread sleeps)
    int max_threads = std::min(2, bench_ncpus());
    for (int threads = 1; threads <= max_threads; threads++) {
        stop_threads = false;
        thrown = 0;
        pthread_t th[2];
        uint64_t s = bench_now_ns();
        for (int t = 0; t < threads; t++) pthread_create(&th[t], nullptr, throw_loop, nullptr);
        usleep(quick ? 50000 : 200000);
        stop_threads = true;
        for (int t = 0; t < threads; t++) pthread_join(th[t], nullptr);
        double secs = static_cast<double>(bench_now_ns() - s) / 1e9;
        out("gylfason/throughput", "\"threads\": " + std::to_string(threads),
            static_cast<double>(thrown.load()) / secs);
    }
}

struct key {
    std::string mech, exp, params;
    // params in numeric order ("frames": 2 before "frames": 10)
    double num() const
    {
        size_t c = params.find(':');
        return c == std::string::npos ? 0 : atof(params.c_str() + c + 1);
    }
    bool operator<(const key &o) const
    {
        double a = num(), b = o.num();
        return std::tie(mech, exp, a, params) < std::tie(o.mech, o.exp, b, o.params);
    }
};

// Runs one repetition of mechanism m in a child; adds its figures.
bool run_child(const char *exe, const std::string &m, bool quick, std::map<key, bench_fig> *figs,
               bool keep)
{
    int fds[2];
    if (pipe(fds) < 0) return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (m == "llvm-libunwind") setenv("LD_PRELOAD", llvm_unwind, 1);
        if (m == "trapkit") setenv("LD_PRELOAD", TK_EH_LIB, 1);
        setenv("TK_GYLFASON_CHILD", m.c_str(), 1);
        execl(exe, exe, quick ? "--quick" : "--reps", quick ? nullptr : "1", nullptr);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : nullptr;
        if (!t2) continue;
        *t1 = *t2 = 0;
        if (keep) bench_add(&(*figs)[key{m, line, t1 + 1}], atof(t2 + 1));
    }
    if (f) fclose(f);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

} // namespace

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    if (const char *m = getenv("TK_GYLFASON_CHILD")) {
        if (strcmp(m, "trapkit") == 0 && !dlsym(RTLD_DEFAULT, "tk_eh_get_stats")) {
            fprintf(stderr, "gylfason: %s is not loaded\n", TK_EH_LIB);
            return 1;
        }
        child(o.quick, strcmp(m, "error-code") == 0);
        return 0;
    }
    std::vector<std::string> mechs = {"libgcc", "trapkit", "error-code"};
    bool have_llvm = access(llvm_unwind, R_OK) == 0;
    if (have_llvm) mechs.push_back("llvm-libunwind");
    std::map<key, bench_fig> figs;
    for (int r = -1; r < o.reps; r++) {
        for (const auto &m : mechs)
            if (!run_child("/proc/self/exe", m, o.quick, &figs, r >= 0)) {
                fprintf(stderr, "gylfason: the %s run failed\n", m.c_str());
                return 1;
            }
        // Table 2: the parts of a one-frame throw (bench/gylfason_breakdown.cpp)
        for (const char *m : {"libgcc", "trapkit"})
            if (!run_child(TK_BREAKDOWN_EXE, m, o.quick, &figs, r >= 0)) {
                fprintf(stderr, "gylfason: the %s breakdown failed\n", m);
                return 1;
            }
        bench_progress("gylfason: repetition %d of %d", r + 1, o.reps);
    }
    std::vector<std::string> rated; // runtimes with a one-thread throughput
    for (auto &[k, f] : figs)
        if (k.exp == "gylfason/throughput") rated.push_back(k.mech);
    for (auto &[k, f] : figs) {
        bool rate = k.exp == "gylfason/throughput";
        // Table 2's parts are TSC readings (bench_tsc); null where it is not invariant
        if (k.exp == "gylfason/breakdown")
            bench_emit_tsc(k.exp.c_str(), k.mech.c_str(), k.params.c_str(), "time", "ns", &f);
        else
            bench_emit(k.exp.c_str(), k.mech.c_str(), k.params.c_str(),
                       rate ? "throughput" : "time", rate ? "ops_per_s" : "ns", &f);
    }
    if (bench_ncpus() < 2)
        for (const auto &m : rated)
            bench_emit_null("gylfason/throughput", m.c_str(), "\"threads\": 2", "throughput",
                            "ops_per_s",
                            "2 throwing threads on 1 CPU would measure the scheduler's time "
                            "slices: never more busy threads than CPUs");
    bench_emit_null("gylfason/breakdown", "trapkit", "\"frames\": 1, \"part\": \"search\"", "time",
                    "ns", "one phase: the search is the unwinding (the cleanup part)");
    if (!have_llvm)
        bench_emit_null("gylfason/throw-int", "llvm-libunwind", "\"frames\": 1", "time", "ns",
                        "LLVM's libunwind is not installed (Debian package libunwind-14)");
    return 0;
}
