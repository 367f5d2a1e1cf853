// tests/eh/plugin.cpp - a shared object loaded and unloaded while other
// threads throw (tests/cxx_eh.cpp).  Built twice: PLUGIN_CATCHES int
// (plugin_a: the exception is caught inside) or long (plugin_b: it leaves
// the plugin for the caller).
#include <string>

namespace
{
struct counted {
    int *n;
    ~counted() { ++*n; }
};

__attribute__((noinline)) void deep(int d, int v, int *dtors)
{
    counted c{dtors};
    if (d == 0) throw v;
    deep(d - 1, v, dtors);
    __asm__ volatile("" ::: "memory");
}
} // namespace

// 1: caught in the plugin; otherwise the int leaves it.
extern "C" __attribute__((visibility("default"))) int plugin_run(int v, int *dtors)
{
    try {
        deep(3, v, dtors);
    } catch (PLUGIN_CATCHES got) {
        return got == v ? 1 : -1;
    }
    return 0;
}
