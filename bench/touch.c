#include "touch.h"

__asm__(".text\n"
        ".globl bench_touch\n"
        ".type bench_touch, @function\n"
        "bench_touch:\n"
        "    movb $1, (%rdi)\n"
        ".globl bench_touch_resume\n"
        "bench_touch_resume:\n"
        "    ret\n"
        ".size bench_touch, . - bench_touch\n");

__asm__(".text\n"
        ".globl bench_ud2\n"
        ".type bench_ud2, @function\n"
        "bench_ud2:\n"
        "    ud2\n"
        ".globl bench_ud2_resume\n"
        "bench_ud2_resume:\n"
        "    ret\n"
        ".size bench_ud2, . - bench_ud2\n");

__asm__(".text\n"
        ".globl bench_int3\n"
        ".type bench_int3, @function\n"
        "bench_int3:\n"
        "    int3\n"
        ".globl bench_int3_resume\n"
        "bench_int3_resume:\n"
        "    ret\n"
        ".size bench_int3, . - bench_int3\n");

volatile uint64_t bench_t_entry, bench_t_exit;

void bench_measure(struct bench_split *s, void (*raise_it)(volatile void *), volatile void *p,
                   long iters)
{
    double per_ns = bench_tsc_per_ns();
    double d = 0, r = 0;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; i++) {
        uint64_t before = bench_tsc();
        raise_it(p);
        uint64_t after = bench_tsc();
        d += (double)(bench_t_entry - before);
        r += (double)(after - bench_t_exit);
    }
    uint64_t t1 = bench_now_ns();
    bench_add(&s->deliver, d / per_ns / (double)iters);
    bench_add(&s->ret, r / per_ns / (double)iters);
    bench_add(&s->round, (double)(t1 - t0) / (double)iters);
}

tk_action bench_null_handler(const tk_fault *f, void *arg)
{
    bench_t_entry = bench_tsc();
    (void)arg;
    tk_action a = bench_skip_touch(f->ucontext) ? TK_RESUME : TK_DECLINE;
    bench_t_exit = bench_tsc();
    return a;
}
