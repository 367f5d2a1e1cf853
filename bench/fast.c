/* bench/fast.c - the fast paths' own experiments.
 *
 *   thekkath-levy/deliver-subpage  Thekkath & Levy Table 2, row 3: a store to
 *                  a read-only 1 KiB sub-page, delivered to a null handler
 *                  (which steps over it), with the fast paths on
 *                  (`fast-signal`) and off (`trapkit-posix`).  Linux itself
 *                  has no sub-page protection, so `posix` has no figure.
 *   subpage/open-access  A store to an open sub-page of a protected
 *                  hardware page, which completes without the handler: by
 *                  emulation (`emulate`, TK_FAST_SUBPAGE) or by opening the
 *                  page and single-stepping (`single-step`), per access.
 *   eager/trap+record  Protect a page, write it, a handler that records
 *                  the fault: with eager amplification (the handler makes
 *                  no call; `params.eager` true) or the handler opening the
 *                  page itself (false), per mechanism (the seed: 18 us with
 *                  eager amplification on a 25 MHz R3000).
 */
#include <string.h>
#include <sys/mman.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "bench.h"
#include "touch.h"

static volatile long recorded;
static tk_action record(const tk_fault *f, void *arg)
{
    (void)arg;
    (void)f;
    recorded++; /* the page is open already (or is opened after, eager off) */
    return TK_RESUME;
}

static tk_action open_it(const tk_fault *f, void *arg)
{
    (void)arg;
    recorded++;
    return tk_unprot(f->region, f->page, tk_region_page_size(f->region)) ? TK_DECLINE : TK_RESUME;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    size_t hw = (size_t)sysconf(_SC_PAGESIZE);
    long iters = o.quick ? 500 : 5000;
    unsigned all = tk_fast_paths_available();
    bench_progress("fast paths: sub-page delivery and completion, eager amplification");

    /* ---- sub-pages ---- */
    const size_t sp = 1024;
    tk_region *r;
    tk_region_config c = {.len = hw, .handler = bench_null_handler, .page_size = sp};
    int err = tk_region_create(&c, &r);
    struct bench_split sub[2];
    struct bench_fig open_fig[2];
    memset(sub, 0, sizeof sub);
    memset(open_fig, 0, sizeof open_fig);
    const char *sub_why = NULL;
    if (err) {
        sub_why = tk_last_error();
    } else {
        char *b = tk_region_base(r);
        tk_protect(r, b, sp, TK_PROT_READ);
        for (int rep = -1; rep < o.reps; rep++)
            for (int fast = 0; fast < 2; fast++) {
                tk_set_fast_paths(fast ? all : 0);
                struct bench_split tmp;
                memset(&tmp, 0, sizeof tmp);
                bench_measure(rep < 0 ? &tmp : &sub[fast], bench_touch, b, iters);
                uint64_t t0 = bench_now_ns();
                for (long i = 0; i < iters; i++) bench_touch(b + sp + 8 * (i & 63));
                double per = (double)(bench_now_ns() - t0) / (double)iters;
                if (rep >= 0) bench_add(&open_fig[fast], per);
            }
        tk_region_destroy(r);
    }
    const char *ids[2] = {"trapkit-posix", "fast-signal"};
    const char *p_sub = "\"subpage\": 1024";
    for (int fast = 0; fast < 2; fast++) {
        if (sub_why) {
            bench_emit_null("thekkath-levy/deliver-subpage", ids[fast], p_sub, "time", "ns",
                            sub_why);
            continue;
        }
        bench_emit_tsc("thekkath-levy/deliver-subpage", ids[fast], p_sub, "time", "ns",
                       &sub[fast].deliver);
        bench_emit_tsc("thekkath-levy/return", ids[fast], "\"exception\": \"subpage\"", "time",
                       "ns", &sub[fast].ret);
    }
    bench_emit_null("thekkath-levy/deliver-subpage", "posix", p_sub, "time", "ns",
                    "Linux has no sub-page protection; trapkit builds it on mprotect");
    const char *how[2] = {"single-step", "emulate"};
    for (int fast = 0; fast < 2; fast++) {
        if (sub_why)
            bench_emit_null("subpage/open-access", how[fast], p_sub, "time", "ns", sub_why);
        else
            bench_emit("subpage/open-access", how[fast], p_sub, "time", "ns", &open_fig[fast]);
    }

    /* ---- eager amplification ---- */
    enum tk_mech mechs[] = {TK_MECH_POSIX, TK_MECH_UFFD_SIGBUS, TK_MECH_PKEYS};
    enum { NM = 3 };
    struct bench_fig eager[NM][2];
    memset(eager, 0, sizeof eager);
    tk_region *er[NM][2] = {{0}};
    const char *why[NM] = {0};
    for (int m = 0; m < NM; m++)
        for (int e = 0; e < 2; e++) {
            tk_region_config ec = {.len = hw,
                                   .handler = e ? record : open_it,
                                   .mech = mechs[m],
                                   .flags = e ? TK_REGION_EAGER : 0};
            if (tk_region_create(&ec, &er[m][e])) why[m] = tk_last_error();
        }
    tk_set_fast_paths(all);
    for (int rep = -1; rep < o.reps; rep++)
        for (int m = 0; m < NM; m++)
            for (int e = 0; e < 2 && !why[m]; e++) {
                tk_region *rr = er[m][e];
                volatile char *p = tk_region_base(rr);
                size_t len = tk_region_page_size(rr);
                uint64_t t0 = bench_now_ns();
                for (long i = 0; i < iters; i++) {
                    tk_protect(rr, (void *)p, len, TK_PROT_READ);
                    p[0] = (char)i;
                }
                double per = (double)(bench_now_ns() - t0) / (double)iters;
                if (rep >= 0) bench_add(&eager[m][e], per);
            }
    for (int m = 0; m < NM; m++)
        for (int e = 0; e < 2; e++) {
            const char *pp = e ? "\"eager\": true" : "\"eager\": false";
            if (why[m])
                bench_emit_null("eager/trap+record", tk_mech_name(mechs[m]), pp, "time", "ns",
                                why[m]);
            else
                bench_emit("eager/trap+record", tk_mech_name(mechs[m]), pp, "time", "ns",
                           &eager[m][e]);
            if (er[m][e]) tk_region_destroy(er[m][e]);
        }
    return 0;
}
