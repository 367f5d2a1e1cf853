// tests/cxx_faults.cpp - processor faults become C++ exceptions inside a
// tk::fault_scope (trapkit/exception.hpp), built with -fnon-call-exceptions.
//
// Each case: the exception's type and fields; destructors of every frame
// between the fault and the handler run, innermost first; the program goes
// on normally after (faults again, nested scopes, other threads).  Cases
// that must crash as without trapkit (outside any scope, inside the C
// library, sent signals) run in a child process, which must die of the
// signal.
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <trapkit/exception.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cxx_check.hpp"

static std::string trail; // destructor order

struct noisy {
    char name;
    explicit noisy(char n) : name(n) {}
    ~noisy() { trail += name; }
};

static volatile int *volatile null_ptr; // an inaccessible page (not NULL: UBSan checks NULL)
static volatile int zero;

__attribute__((noinline)) static int read_at(volatile int *p)
{
    noisy a('a');
    return *p;
}

__attribute__((noinline)) static void write_at(volatile int *p, int v)
{
    noisy w('w');
    *p = v;
}

__attribute__((noinline)) static int deep(int n, volatile int *p)
{
    noisy d(static_cast<char>('0' + n % 10));
    if (n == 0) return read_at(p);
    return deep(n - 1, p) + 1;
}

// the division must reach the CPU (UBSan would stop it first)
__attribute__((noinline, no_sanitize("undefined"))) static int divide(int a, int b)
{
    noisy q('q');
    return a / b;
}

// ud2 (an undefined instruction).  The compiler does not take an asm
// statement (or __builtin_trap) for one that may throw, so this frame has
// no cleanup for it; its caller's destructors run.
__attribute__((noinline)) static void undefined_instruction()
{
    __asm__ volatile("ud2");
}

__attribute__((noinline)) static void call_undefined()
{
    noisy u('u');
    undefined_instruction();
}

// noipa: otherwise the compiler proves it cannot throw (stack accesses do
// not trap, as far as it knows) and drops the handlers around its call
[[maybe_unused]] __attribute__((noipa)) static int recurse(int n)
{
    volatile char pad[512];
    pad[0] = static_cast<char>(n);
    if (n == -1) return 0; // never: keeps the compiler from calling it infinite
    return recurse(n + 1) + pad[0];
}

static void *thread_case(void *arg)
{
    tk::fault_scope scope;
    int caught = 0;
    for (int i = 0; i < 1000; i++) {
        try {
            read_at(null_ptr + i);
        } catch (const tk::access_violation &e) {
            if (e.address() == (void *)(null_ptr + i)) caught++;
        }
    }
    *static_cast<int *>(arg) = caught;
    return nullptr;
}

// Runs fn in a child; returns the signal it died of (0 if it exited).
// Under AddressSanitizer a SIGSEGV is reported by it and the child exits
// with its exit code (1): counted as the SIGSEGV.
static int in_child(void (*fn)())
{
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
#ifdef __SANITIZE_ADDRESS__
    if (WIFEXITED(st) && WEXITSTATUS(st) == 1) return SIGSEGV;
#endif
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

int main()
{
    null_ptr = static_cast<volatile int *>(
        mmap(nullptr, 65536, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    CHECK(null_ptr != MAP_FAILED);
    // a read and a write, with the address and direction
    {
        tk::fault_scope scope;
        trail.clear();
        try {
            read_at(null_ptr + 4);
            CHECK(false);
        } catch (const tk::access_violation &e) {
            CHECK(e.address() == (void *)(null_ptr + 4));
            CHECK(!e.is_write());
            CHECK(e.signal() == SIGSEGV);
            CHECK(strstr(e.what(), "read"));
        }
        CHECK(trail == "a");
        trail.clear();
        try {
            write_at(null_ptr + 2, 7);
            CHECK(false);
        } catch (const tk::hardware_exception &e) { // by base class
            CHECK(e.address() == (void *)(null_ptr + 2));
            CHECK(dynamic_cast<const tk::access_violation &>(e).is_write());
        }
        CHECK(trail == "w");
    }
    // deep: 20 frames with destructors, innermost first
    {
        tk::fault_scope scope;
        trail.clear();
        try {
            deep(19, null_ptr);
        } catch (const std::exception &e) { // by std::exception
            CHECK(strstr(e.what(), "access violation"));
        }
        CHECK(trail == "a01234567890123456789");
    }
    // division by zero, illegal instruction, catch (...), rethrow
    {
        tk::fault_scope scope;
        trail.clear();
        try {
            divide(1, zero);
        } catch (const tk::divide_by_zero &e) {
            CHECK(e.signal() == SIGFPE);
        }
        CHECK(trail == "q");
        bool caught = false;
        try {
            try {
                trail.clear();
                call_undefined();
            } catch (...) {
                CHECK(trail == "u");
                throw; // rethrow the converted fault
            }
        } catch (const tk::illegal_instruction &) {
            caught = true;
        }
        CHECK(caught);
        // a fault in a catch handler is converted too
        caught = false;
        try {
            try {
                read_at(null_ptr);
            } catch (const tk::access_violation &) {
                read_at(null_ptr + 1);
            }
        } catch (const tk::access_violation &e) {
            caught = e.address() == (void *)(null_ptr + 1);
        }
        CHECK(caught);
        // an unmapped page (not only NULL), many times
        void *page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        int n = 0;
        for (int i = 0; i < 10000; i++) {
            try {
                read_at(static_cast<volatile int *>(page));
            } catch (const tk::access_violation &e) {
                n += e.address() == page;
            }
        }
        CHECK(n == 10000);
    }
    // other threads, at once
    {
        pthread_t th[4];
        int caught[4] = {0, 0, 0, 0};
        for (int i = 0; i < 4; i++)
            CHECK(pthread_create(&th[i], nullptr, thread_case, &caught[i]) == 0);
        for (int i = 0; i < 4; i++) pthread_join(th[i], nullptr);
        for (int i = 0; i < 4; i++) CHECK(caught[i] == 1000);
    }
    // stack overflow, then the program goes on.  (Not under ThreadSanitizer:
    // its instrumentation gives every frame a cleanup, __tsan_func_exit, so
    // unwinding runs code in the innermost frames, on the exhausted stack;
    // that faults again during the throw, and std::terminate follows.)
    {
        tk::fault_scope scope;
#ifndef __SANITIZE_THREAD__
        bool caught = false;
        try {
            recurse(0);
        } catch (const tk::stack_overflow &) {
            caught = true;
        }
        CHECK(caught);
#endif
        trail.clear();
        try {
            read_at(null_ptr);
        } catch (const tk::access_violation &) {
        }
        CHECK(trail == "a");
    }
    // what must still crash: outside a scope; inside the C library; a
    // scope that has ended
    CHECK(in_child([] { read_at(null_ptr); }) == SIGSEGV);
    CHECK(in_child([] {
              tk::fault_scope scope;
              try {
                  const char *volatile bad = reinterpret_cast<const char *>(8);
                  if (strlen(bad) != 1) _exit(4); // faults in libc: not converted
              } catch (...) {
                  _exit(3);
              }
          }) == SIGSEGV);
    CHECK(in_child([] {
              {
                  tk::fault_scope scope;
              }
              read_at(null_ptr);
          }) == SIGSEGV);
    CHECK(in_child([] {
              tk::fault_scope scope;
              kill(getpid(), SIGFPE); // sent, not raised by an instruction
          }) == SIGFPE);
    check_eh_runtime();
    printf("ok\n");
    return 0;
}
