// tests/cxx_region_throw.cpp - a region's fault handler leaves by throwing a
// C++ exception, 100,000 times on each signal-delivered mechanism (built with
// -fnon-call-exceptions, so the faulting store may throw).  The exception
// reaches the try block around the store with the destructors in between
// run; afterwards faults are still handled normally and the region table
// still frees destroyed regions.  (uffd-thread runs handlers on trapkit's
// own thread: a throw cannot reach the faulting thread, so it is not tried.)
#include <stdio.h>
#include <string.h>
#include <trapkit/trapkit.h>

#include <stdexcept>

#include "cxx_check.hpp"

static long destroyed;
static bool resume_mode;

struct guard {
    ~guard() { destroyed++; }
};

struct page_fault : std::runtime_error {
    void *page;
    explicit page_fault(void *p) : std::runtime_error("protected page"), page(p) {}
};

static tk_action on_fault(const tk_fault *f, void *)
{
    if (resume_mode)
        return tk_unprot(f->region, f->page, tk_region_page_size(f->region)) < 0 ? TK_DECLINE
                                                                                 : TK_RESUME;
    throw page_fault(f->page);
}

__attribute__((noinline)) static void store(volatile char *p, char v)
{
    guard g;
    *p = v;
}

int main()
{
    const tk_mech mechs[] = {TK_MECH_POSIX, TK_MECH_UFFD_SIGBUS, TK_MECH_PAGEMAP_SCAN};
    for (tk_mech m : mechs) {
        tk_region_config cfg = {};
        cfg.len = 4 * 4096;
        cfg.handler = on_fault;
        cfg.mech = m;
        tk_region *r = nullptr;
        int err = tk_region_create(&cfg, &r);
        if (err == -EOPNOTSUPP) {
            printf("%s: skipped (%s)\n", tk_mech_name(m), tk_last_error());
            continue;
        }
        CHECK(err == 0);
        char *base = static_cast<char *>(tk_region_base(r));
        CHECK(tk_protn(r, base, 4 * 4096, TK_PROT_READ) == 0);
        resume_mode = false;
        destroyed = 0;
        long caught = 0;
        for (long i = 0; i < 100000; i++) {
            try {
                store(base + (i % 4) * 4096, 1);
            } catch (const page_fault &e) {
                if (e.page == base + (i % 4) * 4096) caught++;
            }
        }
        CHECK(caught == 100000);
        CHECK(destroyed == 100000);
        CHECK(base[0] == 0);
        resume_mode = true;
        store(base, 5);
        CHECK(base[0] == 5);
        CHECK(tk_region_destroy(r) == 0);
        printf("%s: 100000 exceptions thrown from the region handler\n", tk_mech_name(m));
    }
    // the table still frees what is destroyed
    for (int i = 0; i < 1000; i++) {
        tk_region_config cfg = {};
        cfg.len = 4096;
        tk_region *r = nullptr;
        CHECK(tk_region_create(&cfg, &r) == 0);
        CHECK(tk_region_destroy(r) == 0);
    }
    return 0;
}
