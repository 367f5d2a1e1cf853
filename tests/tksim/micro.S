/* tests/tksim/micro.S - micro-programs with known timing for tksim, one
 * per KIND (-DKIND=...), N instructions of interest (-DN=...), no C
 * library: the only memory accesses are the program's own.
 *   KIND 1: N dependent adds            (one a cycle)
 *   KIND 2: N adds in 4 independent chains (four a cycle on 4 units)
 *   KIND 3: N dependent loads, one word  (one every load-to-use latency)
 *   KIND 4: N loads, one in each of N different 8 KiB pages (N TLB misses)
 *   KIND 5: a loop of N steps, each a load from the next 8 KiB page whose
 *           address depends on the load before (the pages hold zeros):
 *           ld, add, add, addi, bnez - N TLB misses in a chain, and exactly
 *           N branches */
        .text
        .globl _start
_start:
#if KIND == 1
        li      a0, 0
        .rept   N
        addi    a0, a0, 1
        .endr
#elif KIND == 2
        li      a0, 0
        li      a1, 0
        li      a2, 0
        li      a3, 0
        .rept   N / 4
        addi    a0, a0, 1
        addi    a1, a1, 1
        addi    a2, a2, 1
        addi    a3, a3, 1
        .endr
#elif KIND == 3
        lla     a0, cell
        .rept   N
        ld      a0, 0(a0)
        .endr
#elif KIND == 4
        lla     a1, area
        li      a2, 8192
        .rept   N
        ld      a0, 0(a1)
        add     a1, a1, a2
        .endr
#elif KIND == 5
        lla     a1, area
        li      a2, 8192
        li      a3, N
1:      ld      a0, 0(a1)
        add     a1, a1, a0
        add     a1, a1, a2
        addi    a3, a3, -1
        bnez    a3, 1b
#endif
        li      a0, 0
        li      a7, 93          /* exit */
        ecall

        .data
        .balign 8
cell:   .dword  cell            /* points to itself */
        .bss
        .balign 8192
#if KIND == 5
area:   .skip   8192 * (N + 1)
#else
area:   .skip   8192 * 200
#endif
