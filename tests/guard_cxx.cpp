// tests/guard_cxx.cpp - C++ exceptions through tk_sandbox_call and
// tk_arena_try (trapkit/guard.h), built with -fnon-call-exceptions against
// libtrapkit_cxx.
//
// fn leaves its call by an exception: a fault in fn that trapkit_cxx turns
// into tk::access_violation, or a throw of fn's own from inside nested
// calls.  The exception drops the calls it passes through: the next calls
// work (with the stack reused, more times than a thread may have calls
// under way), and an out-of-bounds access made afterwards outside every
// call, deeper on the stack than the abandoned call, kills the process
// instead of jumping back into it.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <trapkit/exception.hpp>
#include <trapkit/guard.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "cxx_check.hpp"

static const size_t KIB = 1024;
// an inaccessible page outside every sandbox (not NULL: UBSan checks NULL)
static int *volatile badp;

static void bad_in_fn(tk_sandbox *, void *)
{
    *(volatile int *)badp = 1;
}
static void throw_in_fn(tk_sandbox *, void *)
{
    throw std::runtime_error("fn");
}
static void nothing(tk_sandbox *, void *) {}
static void oob(tk_sandbox *sb, void *arg)
{
    *((volatile char *)tk_sandbox_base(sb) + (uintptr_t)arg) = 1;
}
// a call on the other sandbox inside, which throws
static void nested_throw(tk_sandbox *, void *arg)
{
    tk_sandbox_call(static_cast<tk_sandbox *>(arg), throw_in_fn, nullptr, nullptr);
}
static void arena_bad(tk_arena *, void *)
{
    *(volatile int *)badp = 1;
}
static void arena_exhaust(tk_arena *a, void *)
{
    for (;;) static_cast<volatile uint64_t *>(tk_arena_alloc(a, 64))[0] = 1;
}

static void __attribute__((noinline)) scribble()
{
    volatile unsigned long buf[2048];
    for (size_t i = 0; i < 2048; i++) buf[i] = i;
    __asm__ volatile("" ::"r"(buf) : "memory");
}

static bool __attribute__((noinline)) bad_in_call(tk_sandbox *sb)
{
    try {
        tk::fault_scope scope;
        tk_sandbox_call(sb, bad_in_fn, nullptr, nullptr);
        // bad_in_fn never returns: back here, a fault jumped into this
        // call after the exception had left it
        fprintf(stderr, "tk_sandbox_call returned after an exception left it\n");
        _exit(5);
    } catch (const tk::access_violation &e) {
        return e.address() == badp;
    }
}

static void __attribute__((noinline)) oob_deep_outside(tk_sandbox *sb)
{
    volatile char pad[8192]; // not written: the abandoned call's frame stays
    __asm__ volatile("" ::"r"(pad) : "memory");
    *((volatile char *)tk_sandbox_base(sb) + 64 * KIB) = 1;
}

int main()
{
    setvbuf(stdout, nullptr, _IONBF, 0);
    void *page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    badp = static_cast<int *>(page);
    tk_sandbox_config c = {};
    c.size = 64 * KIB;
    c.max_size = 1024 * KIB;
    tk_sandbox *sb, *sb2;
    CHECK(tk_sandbox_create(&c, &sb) == 0);
    CHECK(tk_sandbox_create(&c, &sb2) == 0);
    for (int i = 0; i < 200; i++) {
        CHECK(bad_in_call(sb));
        bool caught = false;
        try {
            tk_sandbox_call(sb, nested_throw, sb2, nullptr);
        } catch (const std::runtime_error &) {
            caught = true;
        }
        CHECK(caught);
        if (i & 1) scribble();
        CHECK(tk_sandbox_call(sb, nothing, nullptr, nullptr) == 0);
        tk_sandbox_trap t = {};
        CHECK(tk_sandbox_call(sb, oob, (void *)(64 * KIB + i), &t) == -EFAULT);
        CHECK(t.sandbox == sb && t.offset == 64 * KIB + i);
        CHECK(tk_sandbox_call(sb2, oob, (void *)(128 * KIB), &t) == -EFAULT);
        CHECK(t.sandbox == sb2 && t.offset == 128 * KIB);
    }

    // an exception left the call: an out-of-bounds access outside every
    // call is not trapkit's, even deeper on the stack than that call was
    fflush(nullptr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (!bad_in_call(sb)) _exit(4);
        oob_deep_outside(sb);
        _exit(3);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV) {
        fprintf(stderr, "child: status %#x, expected death by SIGSEGV\n", st);
        return 1;
    }

    tk_arena *a;
    tk_arena_config ac = {};
    ac.max_size = 64 * KIB;
    ac.chunk = 4 * KIB;
    CHECK(tk_arena_create(&ac, &a) == 0);
    for (int i = 0; i < 100; i++) {
        bool caught = false;
        try {
            tk::fault_scope scope;
            tk_arena_try(a, arena_bad, nullptr);
        } catch (const tk::access_violation &) {
            caught = true;
        }
        CHECK(caught);
        if (i & 1) scribble();
        tk_arena_reset(a);
        CHECK(tk_arena_try(a, arena_exhaust, nullptr) == -ENOMEM);
    }
    CHECK(tk_arena_destroy(a) == 0);
    CHECK(tk_sandbox_destroy(sb2) == 0);
    CHECK(tk_sandbox_destroy(sb) == 0);
    printf("guard_cxx: ok\n");
    return 0;
}
