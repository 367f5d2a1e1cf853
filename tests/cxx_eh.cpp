// tests/cxx_eh.cpp - what trapkit's throw runtime (libtrapkit_eh.so) does
// beyond the standard's rules (cxx_conformance covers those): frames it
// hands to libgcc (C cleanups, forced unwinding by pthread_cancel), frames
// it passes through (C without -fexceptions), objects loaded and unloaded
// while other threads throw, and the counts TRAPKIT_EH_STATS writes at
// exit (each throw once, whichever thread made it and whenever).
// Usage: cxx_eh PLUGIN_A PLUGIN_B (tests/eh/plugin.cpp, built twice)
#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cxx_check.hpp"

extern "C" void c_call_with_cleanup(void (*fn)(void *), void *arg, int *cleaned);
extern "C" void c_call_plain(void (*fn)(void *), void *arg);

namespace
{

tk_eh_stats stats()
{
    tk_eh_stats s;
    tk_eh_get_stats(&s);
    return s;
}

struct counted {
    std::atomic<int> *n;
    ~counted() { ++*n; }
};

void throw_value(void *arg)
{
    throw *static_cast<int *>(arg);
}

__attribute__((noinline)) void deep(int d, int v, std::atomic<int> *dtors)
{
    counted c{dtors};
    if (d == 0) throw v;
    deep(d - 1, v, dtors);
    __asm__ volatile("" ::: "memory");
}

// the same call sites every time
__attribute__((noinline)) void throw_deep(std::atomic<int> *dtors)
{
    try {
        deep(4, 1, dtors);
    } catch (int) {
    }
}

std::atomic<int> cancel_dtors{0};
std::atomic<bool> parked{false};

void *cancelled(void *)
{
    counted c{&cancel_dtors};
    parked = true;
    for (;;) pause(); // a cancellation point
    return nullptr;
}

// ---- TRAPKIT_EH_STATS: a child that throws a known number of times ----
constexpr int MAIN_THROWS = 100, THREAD_THROWS = 60, LIVE_THROWS = 30, TLS_THROWS = 5,
              FORK_THROWS = 7;

__attribute__((noinline)) void throw_and_catch(int n)
{
    for (int i = 0; i < n; i++) {
        try {
            throw i;
        } catch (int) {
        }
    }
}

// Throws when its thread ends.  Constructed before the thread's first
// throw, so its destructor runs after any thread_local destructor the
// runtime may register on that throw (they run in reverse order).
struct throws_at_thread_exit {
    bool armed = false;
    ~throws_at_thread_exit()
    {
        if (armed) throw_and_catch(TLS_THROWS);
    }
};
thread_local throws_at_thread_exit at_thread_exit;

std::atomic<bool> live_done{false};

// The child: MAIN_THROWS in main, THREAD_THROWS in a thread that ends,
// LIVE_THROWS in a thread still running at exit, TLS_THROWS in each of
// main's and the ended thread's thread-exit destructors; a grandchild
// forked halfway throws FORK_THROWS (and its own TLS_THROWS at exit) and
// writes its own line first.
int stats_child()
{
    at_thread_exit.armed = true;
    throw_and_catch(MAIN_THROWS / 2);
    std::thread([] {
        at_thread_exit.armed = true;
        throw_and_catch(THREAD_THROWS);
    }).join();
    std::thread([] {
        throw_and_catch(LIVE_THROWS);
        live_done = true;
        for (;;) pause();
    }).detach();
    while (!live_done) usleep(1000);
    pid_t pid = fork();
    if (pid == 0) {
        throw_and_catch(FORK_THROWS);
        exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    throw_and_catch(MAIN_THROWS - MAIN_THROWS / 2);
    return 0;
}

// Runs the child (this program again) with TRAPKIT_EH_STATS and checks
// the lines it wrote: throws and handlers, each counted once.
void check_stats_at_exit()
{
    char path[] = "/tmp/tk_eh_stats.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("TRAPKIT_EH_STATS", path, 1);
        execl("/proc/self/exe", "cxx_eh", "--stats-child", static_cast<char *>(nullptr));
        _exit(127);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    std::vector<std::string> lines;
    if (FILE *f = fopen(path, "r")) {
        char line[512];
        while (fgets(line, sizeof line, f)) lines.emplace_back(line);
        fclose(f);
    }
    unlink(path);
    unsigned long long want[2] = {FORK_THROWS + TLS_THROWS,
                                  MAIN_THROWS + THREAD_THROWS + LIVE_THROWS + 2 * TLS_THROWS};
    for (size_t i = 0; i < lines.size(); i++)
        printf("TRAPKIT_EH_STATS, %s: %s", i == 0 ? "forked child" : "child", lines[i].c_str());
    CHECK(lines.size() == 2);
    for (size_t i = 0; i < 2; i++) {
        unsigned long long throws = 0, handlers = 0;
        CHECK(sscanf(lines[i].c_str(),
                     "throws %llu frames %*u cache_hits %*u cache_misses %*u cleanups %*u "
                     "handlers %llu",
                     &throws, &handlers) == 2);
        CHECK(throws == want[i] && handlers == want[i]);
    }
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--stats-child") == 0) return stats_child();
    CHECK(argc == 3);
    check_stats_at_exit();
    // C frames with a cleanup: libgcc takes the throw there, the cleanup
    // runs, the C++ handler above gets the exception
    {
        tk_eh_stats before = stats();
        int cleaned = 0, v = 7, got = 0;
        std::atomic<int> dtors{0};
        try {
            counted c{&dtors};
            c_call_with_cleanup(throw_value, &v, &cleaned);
        } catch (int e) {
            got = e;
        }
        CHECK(got == 7 && cleaned == 1 && dtors == 1);
        CHECK(stats().handed_off > before.handed_off);
        // and a rethrow of it goes through trapkit again
        tk_eh_stats mid = stats();
        got = 0;
        try {
            try {
                c_call_with_cleanup(throw_value, &v, &cleaned);
            } catch (int) {
                throw;
            }
        } catch (int e) {
            got = e;
        }
        CHECK(got == 7 && cleaned == 2);
        CHECK(stats().throws >= mid.throws + 2);
    }
    // C frames without -fexceptions: passed through, not handed off
    {
        tk_eh_stats before = stats();
        int v = 9, got = 0;
        try {
            c_call_plain(throw_value, &v);
        } catch (int e) {
            got = e;
        }
        CHECK(got == 9);
        CHECK(stats().handed_off == before.handed_off);
    }
    // pthread_cancel: forced unwinding (libgcc's) runs the destructor
    {
        pthread_t t;
        CHECK(pthread_create(&t, nullptr, cancelled, nullptr) == 0);
        while (!parked) usleep(1000);
        CHECK(pthread_cancel(t) == 0);
        void *ret = nullptr;
        CHECK(pthread_join(t, &ret) == 0);
        CHECK(ret == PTHREAD_CANCELED && cancel_dtors == 1);
    }
    // every dlclose empties the PC table: the next throw computes its
    // call sites again
    {
        std::atomic<int> dtors{0};
        throw_deep(&dtors);
        throw_deep(&dtors);
        tk_eh_stats warm = stats();
        throw_deep(&dtors);
        CHECK(stats().cache_misses == warm.cache_misses); // all found
        void *h = dlopen(argv[1], RTLD_NOW);
        CHECK(h);
        CHECK(dlclose(h) == 0);
        tk_eh_stats after = stats();
        CHECK(after.generation > warm.generation);
        throw_deep(&dtors);
        CHECK(stats().cache_misses > after.cache_misses);
        CHECK(dtors == 20);
    }
    // objects loaded and unloaded (two at the same address, in turn) while
    // other threads throw through their own frames
    {
        std::atomic<bool> stop{false};
        std::atomic<int> bad{0};
        std::vector<std::thread> throwers;
        for (int t = 0; t < 2; t++)
            throwers.emplace_back([&, t] {
                std::atomic<int> dtors{0};
                long n = 0;
                while (!stop) {
                    int v = t * 1000000 + static_cast<int>(n % 1000);
                    try {
                        deep(static_cast<int>(n % 6), v, &dtors);
                        bad++;
                    } catch (int e) {
                        if (e != v) bad++;
                    }
                    n++;
                }
                (void)dtors;
            });
        int loads = 0;
        for (int i = 0; i < 200; i++) {
            const char *path = argv[1 + i % 2];
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            CHECK(h);
            auto run = reinterpret_cast<int (*)(int, int *)>(dlsym(h, "plugin_run"));
            CHECK(run);
            int dtors = 0, r = 0, v = 100 + i;
            try {
                r = run(v, &dtors);
            } catch (int e) { // plugin_b lets the int out
                r = e == v ? 2 : -2;
            }
            CHECK(r == (i % 2 == 0 ? 1 : 2));
            CHECK(dtors == 4);
            CHECK(dlclose(h) == 0);
            loads++;
        }
        stop = true;
        for (auto &t : throwers) t.join();
        CHECK(bad == 0 && loads == 200);
    }
    check_eh_runtime();
    printf("ok\n");
    return 0;
}
