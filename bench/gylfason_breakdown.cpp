// bench/gylfason_breakdown.cpp - Gylfason & Hjalmtysson's Table 2: where
// the time of a one-frame throw goes.  Run by bench_gylfason as a child,
// once with the system's runtime (libgcc) and once with libtrapkit_eh.so
// preloaded (trapkit); prints "experiment<TAB>params<TAB>ns" lines.
//
// The program defines the C++ runtime's entry points its own code calls
// (__cxa_allocate_exception, __cxa_begin_catch, __cxa_end_catch) and the
// personality routine its own frames name, records the time-stamp counter
// in each and calls the real one.  The parts:
//   allocation  __cxa_allocate_exception
//   search      from there until the personality routine finds the handler
//               (libgcc's first phase, which begins by computing the
//               state of _Unwind_RaiseException's own frame)
//   cleanup     until it is asked to install the handler's frame (libgcc's
//               second phase); for trapkit, its one phase, until the
//               runtime's install point (tk_eh_set_trace)
//   install     until the landing pad calls __cxa_begin_catch
//   catch       __cxa_begin_catch to the return of __cxa_end_catch
#include <dlfcn.h>
#include <unwind.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "trapkit/eh.h"

extern "C" {
#include "bench.h"
}

namespace
{

// time-stamp counter readings of the current throw
uint64_t t_alloc0, t_alloc1, t_found, t_install, t_begin, t_end;
bool handler_found, installed;

template <class F> F real(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "gylfason_breakdown: %s not found\n", name);
        exit(1);
    }
    return reinterpret_cast<F>(p);
}

__attribute__((noinline)) void thrower()
{
    throw 42;
}

void on_trace(int point)
{
    if (point == TK_EH_TRACE_INSTALL) t_install = bench_tsc();
}

} // namespace

extern "C" {

void *__cxa_allocate_exception(size_t n) noexcept
{
    static auto fn = real<void *(*)(size_t)>("__cxa_allocate_exception");
    t_alloc0 = bench_tsc();
    void *p = fn(n);
    t_alloc1 = bench_tsc();
    return p;
}

_Unwind_Reason_Code __gxx_personality_v0(int version, _Unwind_Action actions, uint64_t cls,
                                         _Unwind_Exception *ue, _Unwind_Context *ctx)
{
    static auto fn =
        real<_Unwind_Reason_Code (*)(int, _Unwind_Action, uint64_t, _Unwind_Exception *,
                                     _Unwind_Context *)>("__gxx_personality_v0");
    _Unwind_Reason_Code r = fn(version, actions, cls, ue, ctx);
    if ((actions & _UA_SEARCH_PHASE) && r == _URC_HANDLER_FOUND) {
        t_found = bench_tsc();
        handler_found = true;
    }
    if ((actions & _UA_HANDLER_FRAME) && r == _URC_INSTALL_CONTEXT) {
        t_install = bench_tsc();
        installed = true;
    }
    return r;
}

void *__cxa_begin_catch(void *ue) noexcept
{
    static auto fn = real<void *(*)(void *)>("__cxa_begin_catch");
    t_begin = bench_tsc();
    return fn(ue);
}

void __cxa_end_catch()
{
    static auto fn = real<void (*)()>("__cxa_end_catch");
    fn();
    t_end = bench_tsc();
}

} // extern "C"

int main(int argc, char **argv)
{
    long n = argc > 1 && strcmp(argv[1], "--quick") == 0 ? 2000 : 20000;
    auto set_trace =
        reinterpret_cast<void (*)(void (*)(int))>(dlsym(RTLD_DEFAULT, "tk_eh_set_trace"));
    bool ours = set_trace != nullptr;
    if (ours) set_trace(on_trace);
    double per_ns = bench_tsc_per_ns();
    std::vector<double> parts[5];
    for (long i = 0; i < n; i++) {
        handler_found = installed = false;
        try {
            thrower();
        } catch (int) {
        }
        if (ours) t_found = t_alloc1; // one phase: no search of its own
        if (i < n / 10) continue;     // warm up
        uint64_t t[] = {t_alloc0, t_alloc1, t_found, t_install, t_begin, t_end};
        for (int k = 0; k < 5; k++)
            parts[k].push_back(static_cast<double>(t[k + 1] - t[k]) / per_ns);
    }
    if (!ours && (!handler_found || !installed)) {
        fprintf(stderr, "gylfason_breakdown: the personality routine was not seen\n");
        return 1;
    }
    const char *names[] = {"allocation", "search", "cleanup", "install", "catch"};
    for (int k = 0; k < 5; k++) {
        if (ours && k == 1) continue; // reported as not applicable by the parent
        // the mean of the middle 90%: the counter ticks coarsely in some
        // virtual machines, so a median would be one of a few values
        auto &v = parts[k];
        std::sort(v.begin(), v.end());
        size_t lo = v.size() / 20, hi = v.size() - v.size() / 20;
        double sum = 0;
        for (size_t j = lo; j < hi; j++) sum += v[j];
        printf("gylfason/breakdown\t\"frames\": 1, \"part\": \"%s\"\t%.6g\n", names[k],
               sum / static_cast<double>(hi - lo));
    }
    return 0;
}
