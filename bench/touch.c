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
