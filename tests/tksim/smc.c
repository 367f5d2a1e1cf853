/* Code written at run time: tksim must run what the program wrote once it
 * has made the write visible to instruction fetch (fence.i, or
 * riscv_flush_icache through __builtin___clear_cache), as qemu-riscv64 and
 * the hardware do.  Each part writes a function, runs it, rewrites it in
 * place and runs it again; the output must equal qemu-riscv64's.
 * Build: riscv64-linux-gnu-gcc -O2 -static -o smc smc.c */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

typedef long (*fn)(long);

/* addi a0, a0, imm; ret */
static void put_addi(uint32_t *code, int imm)
{
    code[0] = ((uint32_t)(imm & 0xfff) << 20) | (10u << 15) | (0u << 12) | (10u << 7) | 0x13;
    code[1] = 0x00008067; /* jalr x0, 0(ra) */
}

/* li a0, imm (c.li, imm in [-32, 31]); ret (c.jr ra): two compressed ones */
static void put_cli(uint16_t *code, int imm)
{
    code[0] = (uint16_t)(0x4000 | ((imm >> 5 & 1) << 12) | (10 << 7) | ((imm & 31) << 2) | 1);
    code[1] = 0x8082;
}

static void fence_i(void)
{
    __asm__ volatile("fence.i" ::: "memory");
}

int main(void)
{
    long sum = 0;

    /* 1: a read-write-execute page, rewritten between calls, fence.i */
    uint32_t *rwx =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (rwx == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (int round = 0; round < 8; round++) {
        put_addi(rwx, 100 * round + 7);
        fence_i();
        long r = 0;
        for (int k = 0; k < 50; k++) /* hot: decoded once, run many times */
            r = ((fn)(uintptr_t)rwx)(k);
        printf("rwx round %d: f(49) = %ld\n", round, r);
        sum += r;
    }

    /* 2: write, mprotect to read-execute, __builtin___clear_cache
     * (riscv_flush_icache), run; back to read-write, rewrite, again */
    uint32_t *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (int round = 0; round < 6; round++) {
        if (mprotect(page, 8192, PROT_READ | PROT_WRITE) != 0) {
            perror("mprotect");
            return 1;
        }
        uint32_t *at = page + 1024 - 1; /* an instruction across the page boundary too */
        put_addi(at, -3 * round - 1);
        if (mprotect(page, 8192, PROT_READ | PROT_EXEC) != 0) {
            perror("mprotect");
            return 1;
        }
        __builtin___clear_cache((char *)at, (char *)(at + 2));
        long r = ((fn)(uintptr_t)at)(1000);
        printf("mprotect round %d: f(1000) = %ld\n", round, r);
        sum += r;
    }

    /* 3: the same address holds two compressed instructions, then one
     * 32-bit and one compressed, then two compressed again */
    for (int round = 0; round < 6; round++) {
        uint16_t *c = (uint16_t *)(rwx + 64);
        if (round % 2 == 0)
            put_cli(c, round * 5 - 12);
        else
            put_addi((uint32_t *)c, 400 + round);
        fence_i();
        long r = ((fn)(uintptr_t)c)(5);
        printf("length round %d: f(5) = %ld\n", round, r);
        sum += r;
    }

    /* 4: a function that rewrites its own next instruction (the store and
     * fence.i inside the code that runs) */
    uint32_t *self = rwx + 128;
    /* sw a1, 8(a2); fence.i; (the word at 8 is overwritten:) nop; ret */
    self[0] = (11u << 20) | (12u << 15) | (2u << 12) | (8u << 7) | 0x23;
    self[1] = 0x0000100f; /* fence.i */
    self[2] = 0x00000013; /* nop, replaced */
    self[3] = 0x00008067; /* ret */
    fence_i();
    for (int round = 0; round < 4; round++) {
        uint32_t insn = ((uint32_t)(round * 11 & 0xfff) << 20) | (10u << 15) | (10u << 7) | 0x13;
        long r;
        __asm__ volatile("mv a0, %1\n\tmv a1, %2\n\tmv a2, %3\n\tjalr ra, 0(%3)\n\tmv %0, a0"
                         : "=r"(r)
                         : "r"(1L), "r"((long)insn), "r"(self)
                         : "a0", "a1", "a2", "ra", "memory");
        printf("self round %d: f(1) = %ld\n", round, r);
        sum += r;
    }

    printf("sum %ld\n", sum);
    return 0;
}
