// tests/cxx_unwind.cpp - libtrapkit_cxx's caching CFI unwinder (cxx/unwind.hpp)
// walks the same frames as the system's unwinder (libgcc's _Unwind_Backtrace):
// the same return addresses and stack pointers, through deep call chains,
// frames of every shape the compiler emits here (frame pointer or not,
// variable-size stack allocations), and a signal handler's frame (glibc's
// sigreturn trampoline, described by expressions); a second walk takes every
// frame state from the cache.
#include <signal.h>
#include <ucontext.h>
#include <unwind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../cxx/unwind.hpp"

#include "cxx_check.hpp"

struct frame {
    uintptr_t ip, sp;
};

static _Unwind_Reason_Code record(struct _Unwind_Context *c, void *arg)
{
    auto *v = static_cast<std::vector<frame> *>(arg);
    v->push_back({_Unwind_GetIP(c), _Unwind_GetCFA(c)});
    return _URC_NO_REASON;
}

static int walks_compared, frames_compared;

// Walks from here with both unwinders and compares every caller's frame.
__attribute__((noinline)) static void compare_walks()
{
    std::vector<frame> theirs, ours;
    _Unwind_Backtrace(record, &theirs);
    ucontext_t uc;
    getcontext(&uc);
    namespace u = tk::unw;
    u::context c;
    const int map[][2] = {{u::RBX, REG_RBX}, {u::RBP, REG_RBP}, {u::RSP, REG_RSP},
                          {u::R12, REG_R12}, {u::R13, REG_R13}, {u::R14, REG_R14},
                          {u::R15, REG_R15}, {u::RA, REG_RIP}};
    for (auto &m : map) {
        c.reg[m[0]] = static_cast<uint64_t>(uc.uc_mcontext.gregs[m[1]]);
        c.valid[m[0]] = true;
    }
    for (int n = 0; n < 10000; n++) {
        uintptr_t pc = c.pc();
        ours.push_back({pc, c.reg[u::RSP]});
        u::frame_state fs;
        if (!u::state_for(c.pc_exact ? pc : pc - 1, &fs)) break;
        uint64_t cfa;
        if (!u::step(c, fs, &cfa)) break;
    }
    // theirs[0] and ours[0] are this function (at different places in it)
    CHECK(theirs.size() >= 3 && ours.size() >= 3);
    size_t n = theirs.size() < ours.size() ? theirs.size() : ours.size();
    for (size_t i = 1; i < n; i++) {
        if (theirs[i].ip != ours[i].ip || theirs[i].sp != ours[i].sp) {
            fprintf(stderr, "frame %zu: libgcc ip %#lx sp %#lx, ours ip %#lx sp %#lx\n", i,
                    (unsigned long)theirs[i].ip, (unsigned long)theirs[i].sp,
                    (unsigned long)ours[i].ip, (unsigned long)ours[i].sp);
            exit(1);
        }
        frames_compared++;
    }
    // the walks end together (libgcc stops at the outermost frame)
    CHECK(theirs.size() == ours.size() || theirs.size() + 1 == ours.size() ||
          ours.size() + 1 == theirs.size());
    walks_compared++;
}

__attribute__((noinline)) static void chain(int d)
{
    if (d == 0) {
        compare_walks();
        return;
    }
    volatile char *buf =
        static_cast<volatile char *>(__builtin_alloca(16 + d * 8)); // dynamic frames
    buf[0] = 1;
    chain(d - 1);
    __asm__ volatile("" ::: "memory");
}

static void on_signal(int, siginfo_t *, void *)
{
    chain(3); // walks cross the signal frame
}

int main()
{
    chain(0);
    chain(30);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, nullptr);
    raise(SIGUSR1);
    // the same walk twice from one place: the second finds every frame but
    // the outermost, which has no frame state to keep
    tk::unw::cache_stats before{}, after{};
    for (int i = 0; i < 2; i++) {
        before = after;
        chain(30);
        after = tk::unw::stats();
    }
    CHECK(after.hits - before.hits >= 30);
    CHECK(after.misses - before.misses <= 1);
    printf("ok: %d walks, %d frames the same as libgcc's; cache %lu hits, %lu misses\n",
           walks_compared, frames_compared, (unsigned long)after.hits, (unsigned long)after.misses);
    return 0;
}
