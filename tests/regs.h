/* tests/regs.h - the whole register file around one instruction sequence.
 *
 * regs_run() loads random values into every general register but RSP, the
 * flags (CF PF AF ZF SF DF OF), MXCSR, the x87 control word, the vector
 * registers (xmm0-15, ymm0-15 with AVX, zmm0-31 and k0-7 with AVX-512) and
 * the 128-byte red zone below RSP, runs REGS_MIDDLE (assembly; by default
 * "regs_fault: a store to (%rdi)"), then saves everything again into
 * g_out; compare() checks it against g_in.  A test defines REGS_MIDDLE
 * before including this file, once.
 */
#ifndef TK_TEST_REGS_H
#define TK_TEST_REGS_H

#include <stddef.h>
#include <string.h>

#include "testutil.h"

#ifndef REGS_MIDDLE
#define REGS_MIDDLE                                                                                \
    ".globl regs_fault\n"                                                                          \
    "regs_fault:\n"                                                                                \
    "    movq %rax, (%rdi)\n"
#endif

struct regs {
    uint64_t gpr[16]; /* rax rbx rcx rdx rsi rdi rbp r8-r15, [15] = rsp */
    uint64_t rflags;
    uint32_t mxcsr;
    uint16_t fcw;
    uint8_t pad[50];
    uint8_t vec[32][64];
    uint64_t k[8];
    uint64_t red[16];
    int32_t level; /* 0 SSE, 1 AVX, 2 AVX-512 */
    int32_t pad2[15];
} __attribute__((aligned(64)));
_Static_assert(offsetof(struct regs, rflags) == 128, "layout");
_Static_assert(offsetof(struct regs, mxcsr) == 136, "layout");
_Static_assert(offsetof(struct regs, fcw) == 140, "layout");
_Static_assert(offsetof(struct regs, vec) == 192, "layout");
_Static_assert(offsetof(struct regs, k) == 2240, "layout");
_Static_assert(offsetof(struct regs, red) == 2304, "layout");
_Static_assert(offsetof(struct regs, level) == 2432, "layout");

struct regs g_in, g_out;
uint64_t g_saved_rsp;
void regs_run(void);

/* the register file through a fault: see regs_run() in fast_regs.c */
__asm__(".text\n"
        ".globl regs_run\n"
        ".type regs_run, @function\n"
        "regs_run:\n"
        "    push %rbx\n"
        "    push %rbp\n"
        "    push %r12\n"
        "    push %r13\n"
        "    push %r14\n"
        "    push %r15\n"
        "    mov %rsp, g_saved_rsp(%rip)\n"
        "    mov g_in+2432(%rip), %eax\n"
        "    cmp $2, %eax\n"
        "    je 2f\n"
        "    cmp $1, %eax\n"
        "    je 1f\n"
        "    movdqu g_in+192(%rip), %xmm0\n"
        "    movdqu g_in+256(%rip), %xmm1\n"
        "    movdqu g_in+320(%rip), %xmm2\n"
        "    movdqu g_in+384(%rip), %xmm3\n"
        "    movdqu g_in+448(%rip), %xmm4\n"
        "    movdqu g_in+512(%rip), %xmm5\n"
        "    movdqu g_in+576(%rip), %xmm6\n"
        "    movdqu g_in+640(%rip), %xmm7\n"
        "    movdqu g_in+704(%rip), %xmm8\n"
        "    movdqu g_in+768(%rip), %xmm9\n"
        "    movdqu g_in+832(%rip), %xmm10\n"
        "    movdqu g_in+896(%rip), %xmm11\n"
        "    movdqu g_in+960(%rip), %xmm12\n"
        "    movdqu g_in+1024(%rip), %xmm13\n"
        "    movdqu g_in+1088(%rip), %xmm14\n"
        "    movdqu g_in+1152(%rip), %xmm15\n"
        "    jmp 3f\n"
        "1:\n"
        "    vmovdqu g_in+192(%rip), %ymm0\n"
        "    vmovdqu g_in+256(%rip), %ymm1\n"
        "    vmovdqu g_in+320(%rip), %ymm2\n"
        "    vmovdqu g_in+384(%rip), %ymm3\n"
        "    vmovdqu g_in+448(%rip), %ymm4\n"
        "    vmovdqu g_in+512(%rip), %ymm5\n"
        "    vmovdqu g_in+576(%rip), %ymm6\n"
        "    vmovdqu g_in+640(%rip), %ymm7\n"
        "    vmovdqu g_in+704(%rip), %ymm8\n"
        "    vmovdqu g_in+768(%rip), %ymm9\n"
        "    vmovdqu g_in+832(%rip), %ymm10\n"
        "    vmovdqu g_in+896(%rip), %ymm11\n"
        "    vmovdqu g_in+960(%rip), %ymm12\n"
        "    vmovdqu g_in+1024(%rip), %ymm13\n"
        "    vmovdqu g_in+1088(%rip), %ymm14\n"
        "    vmovdqu g_in+1152(%rip), %ymm15\n"
        "    jmp 3f\n"
        "2:\n"
        "    vmovdqu64 g_in+192(%rip), %zmm0\n"
        "    vmovdqu64 g_in+256(%rip), %zmm1\n"
        "    vmovdqu64 g_in+320(%rip), %zmm2\n"
        "    vmovdqu64 g_in+384(%rip), %zmm3\n"
        "    vmovdqu64 g_in+448(%rip), %zmm4\n"
        "    vmovdqu64 g_in+512(%rip), %zmm5\n"
        "    vmovdqu64 g_in+576(%rip), %zmm6\n"
        "    vmovdqu64 g_in+640(%rip), %zmm7\n"
        "    vmovdqu64 g_in+704(%rip), %zmm8\n"
        "    vmovdqu64 g_in+768(%rip), %zmm9\n"
        "    vmovdqu64 g_in+832(%rip), %zmm10\n"
        "    vmovdqu64 g_in+896(%rip), %zmm11\n"
        "    vmovdqu64 g_in+960(%rip), %zmm12\n"
        "    vmovdqu64 g_in+1024(%rip), %zmm13\n"
        "    vmovdqu64 g_in+1088(%rip), %zmm14\n"
        "    vmovdqu64 g_in+1152(%rip), %zmm15\n"
        "    vmovdqu64 g_in+1216(%rip), %zmm16\n"
        "    vmovdqu64 g_in+1280(%rip), %zmm17\n"
        "    vmovdqu64 g_in+1344(%rip), %zmm18\n"
        "    vmovdqu64 g_in+1408(%rip), %zmm19\n"
        "    vmovdqu64 g_in+1472(%rip), %zmm20\n"
        "    vmovdqu64 g_in+1536(%rip), %zmm21\n"
        "    vmovdqu64 g_in+1600(%rip), %zmm22\n"
        "    vmovdqu64 g_in+1664(%rip), %zmm23\n"
        "    vmovdqu64 g_in+1728(%rip), %zmm24\n"
        "    vmovdqu64 g_in+1792(%rip), %zmm25\n"
        "    vmovdqu64 g_in+1856(%rip), %zmm26\n"
        "    vmovdqu64 g_in+1920(%rip), %zmm27\n"
        "    vmovdqu64 g_in+1984(%rip), %zmm28\n"
        "    vmovdqu64 g_in+2048(%rip), %zmm29\n"
        "    vmovdqu64 g_in+2112(%rip), %zmm30\n"
        "    vmovdqu64 g_in+2176(%rip), %zmm31\n"
        "    kmovq g_in+2240(%rip), %k0\n"
        "    kmovq g_in+2248(%rip), %k1\n"
        "    kmovq g_in+2256(%rip), %k2\n"
        "    kmovq g_in+2264(%rip), %k3\n"
        "    kmovq g_in+2272(%rip), %k4\n"
        "    kmovq g_in+2280(%rip), %k5\n"
        "    kmovq g_in+2288(%rip), %k6\n"
        "    kmovq g_in+2296(%rip), %k7\n"
        "3:\n"
        "    ldmxcsr g_in+136(%rip)\n"
        "    fldcw g_in+140(%rip)\n"
        "    pushq g_in+128(%rip)\n"
        "    popfq\n"
        "    mov g_in+2304(%rip), %rax\n"
        "    mov %rax, -128(%rsp)\n"
        "    mov g_in+2312(%rip), %rax\n"
        "    mov %rax, -120(%rsp)\n"
        "    mov g_in+2320(%rip), %rax\n"
        "    mov %rax, -112(%rsp)\n"
        "    mov g_in+2328(%rip), %rax\n"
        "    mov %rax, -104(%rsp)\n"
        "    mov g_in+2336(%rip), %rax\n"
        "    mov %rax, -96(%rsp)\n"
        "    mov g_in+2344(%rip), %rax\n"
        "    mov %rax, -88(%rsp)\n"
        "    mov g_in+2352(%rip), %rax\n"
        "    mov %rax, -80(%rsp)\n"
        "    mov g_in+2360(%rip), %rax\n"
        "    mov %rax, -72(%rsp)\n"
        "    mov g_in+2368(%rip), %rax\n"
        "    mov %rax, -64(%rsp)\n"
        "    mov g_in+2376(%rip), %rax\n"
        "    mov %rax, -56(%rsp)\n"
        "    mov g_in+2384(%rip), %rax\n"
        "    mov %rax, -48(%rsp)\n"
        "    mov g_in+2392(%rip), %rax\n"
        "    mov %rax, -40(%rsp)\n"
        "    mov g_in+2400(%rip), %rax\n"
        "    mov %rax, -32(%rsp)\n"
        "    mov g_in+2408(%rip), %rax\n"
        "    mov %rax, -24(%rsp)\n"
        "    mov g_in+2416(%rip), %rax\n"
        "    mov %rax, -16(%rsp)\n"
        "    mov g_in+2424(%rip), %rax\n"
        "    mov %rax, -8(%rsp)\n"
        "    mov %rsp, g_in+120(%rip)\n"
        "    mov g_in+0(%rip), %rax\n"
        "    mov g_in+8(%rip), %rbx\n"
        "    mov g_in+16(%rip), %rcx\n"
        "    mov g_in+24(%rip), %rdx\n"
        "    mov g_in+32(%rip), %rsi\n"
        "    mov g_in+40(%rip), %rdi\n"
        "    mov g_in+48(%rip), %rbp\n"
        "    mov g_in+56(%rip), %r8\n"
        "    mov g_in+64(%rip), %r9\n"
        "    mov g_in+72(%rip), %r10\n"
        "    mov g_in+80(%rip), %r11\n"
        "    mov g_in+88(%rip), %r12\n"
        "    mov g_in+96(%rip), %r13\n"
        "    mov g_in+104(%rip), %r14\n"
        "    mov g_in+112(%rip), %r15\n" REGS_MIDDLE "    mov %rax, g_out+0(%rip)\n"
        "    mov %rbx, g_out+8(%rip)\n"
        "    mov %rcx, g_out+16(%rip)\n"
        "    mov %rdx, g_out+24(%rip)\n"
        "    mov %rsi, g_out+32(%rip)\n"
        "    mov %rdi, g_out+40(%rip)\n"
        "    mov %rbp, g_out+48(%rip)\n"
        "    mov %r8, g_out+56(%rip)\n"
        "    mov %r9, g_out+64(%rip)\n"
        "    mov %r10, g_out+72(%rip)\n"
        "    mov %r11, g_out+80(%rip)\n"
        "    mov %r12, g_out+88(%rip)\n"
        "    mov %r13, g_out+96(%rip)\n"
        "    mov %r14, g_out+104(%rip)\n"
        "    mov %r15, g_out+112(%rip)\n"
        "    mov %rsp, g_out+120(%rip)\n"
        "    mov -128(%rsp), %rax\n"
        "    mov %rax, g_out+2304(%rip)\n"
        "    mov -120(%rsp), %rax\n"
        "    mov %rax, g_out+2312(%rip)\n"
        "    mov -112(%rsp), %rax\n"
        "    mov %rax, g_out+2320(%rip)\n"
        "    mov -104(%rsp), %rax\n"
        "    mov %rax, g_out+2328(%rip)\n"
        "    mov -96(%rsp), %rax\n"
        "    mov %rax, g_out+2336(%rip)\n"
        "    mov -88(%rsp), %rax\n"
        "    mov %rax, g_out+2344(%rip)\n"
        "    mov -80(%rsp), %rax\n"
        "    mov %rax, g_out+2352(%rip)\n"
        "    mov -72(%rsp), %rax\n"
        "    mov %rax, g_out+2360(%rip)\n"
        "    mov -64(%rsp), %rax\n"
        "    mov %rax, g_out+2368(%rip)\n"
        "    mov -56(%rsp), %rax\n"
        "    mov %rax, g_out+2376(%rip)\n"
        "    mov -48(%rsp), %rax\n"
        "    mov %rax, g_out+2384(%rip)\n"
        "    mov -40(%rsp), %rax\n"
        "    mov %rax, g_out+2392(%rip)\n"
        "    mov -32(%rsp), %rax\n"
        "    mov %rax, g_out+2400(%rip)\n"
        "    mov -24(%rsp), %rax\n"
        "    mov %rax, g_out+2408(%rip)\n"
        "    mov -16(%rsp), %rax\n"
        "    mov %rax, g_out+2416(%rip)\n"
        "    mov -8(%rsp), %rax\n"
        "    mov %rax, g_out+2424(%rip)\n"
        "    pushfq\n"
        "    popq g_out+128(%rip)\n"
        "    cld\n"
        "    stmxcsr g_out+136(%rip)\n"
        "    fnstcw g_out+140(%rip)\n"
        "    mov g_in+2432(%rip), %eax\n"
        "    cmp $2, %eax\n"
        "    je 2f\n"
        "    cmp $1, %eax\n"
        "    je 1f\n"
        "    movdqu %xmm0, g_out+192(%rip)\n"
        "    movdqu %xmm1, g_out+256(%rip)\n"
        "    movdqu %xmm2, g_out+320(%rip)\n"
        "    movdqu %xmm3, g_out+384(%rip)\n"
        "    movdqu %xmm4, g_out+448(%rip)\n"
        "    movdqu %xmm5, g_out+512(%rip)\n"
        "    movdqu %xmm6, g_out+576(%rip)\n"
        "    movdqu %xmm7, g_out+640(%rip)\n"
        "    movdqu %xmm8, g_out+704(%rip)\n"
        "    movdqu %xmm9, g_out+768(%rip)\n"
        "    movdqu %xmm10, g_out+832(%rip)\n"
        "    movdqu %xmm11, g_out+896(%rip)\n"
        "    movdqu %xmm12, g_out+960(%rip)\n"
        "    movdqu %xmm13, g_out+1024(%rip)\n"
        "    movdqu %xmm14, g_out+1088(%rip)\n"
        "    movdqu %xmm15, g_out+1152(%rip)\n"
        "    jmp 3f\n"
        "1:\n"
        "    vmovdqu %ymm0, g_out+192(%rip)\n"
        "    vmovdqu %ymm1, g_out+256(%rip)\n"
        "    vmovdqu %ymm2, g_out+320(%rip)\n"
        "    vmovdqu %ymm3, g_out+384(%rip)\n"
        "    vmovdqu %ymm4, g_out+448(%rip)\n"
        "    vmovdqu %ymm5, g_out+512(%rip)\n"
        "    vmovdqu %ymm6, g_out+576(%rip)\n"
        "    vmovdqu %ymm7, g_out+640(%rip)\n"
        "    vmovdqu %ymm8, g_out+704(%rip)\n"
        "    vmovdqu %ymm9, g_out+768(%rip)\n"
        "    vmovdqu %ymm10, g_out+832(%rip)\n"
        "    vmovdqu %ymm11, g_out+896(%rip)\n"
        "    vmovdqu %ymm12, g_out+960(%rip)\n"
        "    vmovdqu %ymm13, g_out+1024(%rip)\n"
        "    vmovdqu %ymm14, g_out+1088(%rip)\n"
        "    vmovdqu %ymm15, g_out+1152(%rip)\n"
        "    jmp 3f\n"
        "2:\n"
        "    vmovdqu64 %zmm0, g_out+192(%rip)\n"
        "    vmovdqu64 %zmm1, g_out+256(%rip)\n"
        "    vmovdqu64 %zmm2, g_out+320(%rip)\n"
        "    vmovdqu64 %zmm3, g_out+384(%rip)\n"
        "    vmovdqu64 %zmm4, g_out+448(%rip)\n"
        "    vmovdqu64 %zmm5, g_out+512(%rip)\n"
        "    vmovdqu64 %zmm6, g_out+576(%rip)\n"
        "    vmovdqu64 %zmm7, g_out+640(%rip)\n"
        "    vmovdqu64 %zmm8, g_out+704(%rip)\n"
        "    vmovdqu64 %zmm9, g_out+768(%rip)\n"
        "    vmovdqu64 %zmm10, g_out+832(%rip)\n"
        "    vmovdqu64 %zmm11, g_out+896(%rip)\n"
        "    vmovdqu64 %zmm12, g_out+960(%rip)\n"
        "    vmovdqu64 %zmm13, g_out+1024(%rip)\n"
        "    vmovdqu64 %zmm14, g_out+1088(%rip)\n"
        "    vmovdqu64 %zmm15, g_out+1152(%rip)\n"
        "    vmovdqu64 %zmm16, g_out+1216(%rip)\n"
        "    vmovdqu64 %zmm17, g_out+1280(%rip)\n"
        "    vmovdqu64 %zmm18, g_out+1344(%rip)\n"
        "    vmovdqu64 %zmm19, g_out+1408(%rip)\n"
        "    vmovdqu64 %zmm20, g_out+1472(%rip)\n"
        "    vmovdqu64 %zmm21, g_out+1536(%rip)\n"
        "    vmovdqu64 %zmm22, g_out+1600(%rip)\n"
        "    vmovdqu64 %zmm23, g_out+1664(%rip)\n"
        "    vmovdqu64 %zmm24, g_out+1728(%rip)\n"
        "    vmovdqu64 %zmm25, g_out+1792(%rip)\n"
        "    vmovdqu64 %zmm26, g_out+1856(%rip)\n"
        "    vmovdqu64 %zmm27, g_out+1920(%rip)\n"
        "    vmovdqu64 %zmm28, g_out+1984(%rip)\n"
        "    vmovdqu64 %zmm29, g_out+2048(%rip)\n"
        "    vmovdqu64 %zmm30, g_out+2112(%rip)\n"
        "    vmovdqu64 %zmm31, g_out+2176(%rip)\n"
        "    kmovq %k0, g_out+2240(%rip)\n"
        "    kmovq %k1, g_out+2248(%rip)\n"
        "    kmovq %k2, g_out+2256(%rip)\n"
        "    kmovq %k3, g_out+2264(%rip)\n"
        "    kmovq %k4, g_out+2272(%rip)\n"
        "    kmovq %k5, g_out+2280(%rip)\n"
        "    kmovq %k6, g_out+2288(%rip)\n"
        "    kmovq %k7, g_out+2296(%rip)\n"
        "3:\n"
        "    test %eax, %eax\n"
        "    jz 4f\n"
        "    vzeroupper\n"
        "4:\n"
        "    mov g_saved_rsp(%rip), %rsp\n"
        "    pop %r15\n"
        "    pop %r14\n"
        "    pop %r13\n"
        "    pop %r12\n"
        "    pop %rbp\n"
        "    pop %rbx\n"
        "    ret\n"
        ".size regs_run, . - regs_run\n");

#define FLAGS_CHECKED 0xCD5ull /* CF PF AF ZF SF DF OF */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    return tk_test_xorshift(&rng);
}

/* Dirties vector, x87 and SSE state the way a real handler might. */
static void dirty_fp_state(void)
{
    volatile unsigned char buf[512];
    memset((void *)buf, (int)(rnd() & 0xff), sizeof buf);
    volatile double x = 1.0 / 3.0, y = x * 7.25;
    volatile long double z = (long double)y / 3.0L;
    (void)z;
}

/* 0 SSE, 1 AVX, 2 AVX-512: what this CPU has */
static int level;

static void randomise(void *page)
{
    for (int i = 0; i < 15; i++) g_in.gpr[i] = rnd();
    g_in.gpr[5] = (uint64_t)page; /* rdi: the store's address */
    g_in.rflags = 0x202 | (rnd() & FLAGS_CHECKED);
    g_in.mxcsr = 0x1f80 | (uint32_t)(rnd() & 0x6000) | (rnd() & 1 ? 0x8040 : 0);
    g_in.fcw = (uint16_t)(0x037f | (rnd() & 0x0c00));
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 64; j += 8) {
            uint64_t v = rnd();
            memcpy(&g_in.vec[i][j], &v, 8);
        }
    for (int i = 0; i < 8; i++) g_in.k[i] = rnd();
    for (int i = 0; i < 16; i++) g_in.red[i] = rnd();
    g_in.level = level;
}

static void compare(const char *setting, long iter)
{
    int nvec = level == 2 ? 32 : 16, width = level == 2 ? 64 : level == 1 ? 32 : 16;
    const char *gname[16] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8",
                             "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rsp"};
    int bad = 0;
    for (int i = 0; i < 16; i++)
        if (g_in.gpr[i] != g_out.gpr[i]) {
            fprintf(stderr, "%s #%ld: %s %#lx -> %#lx\n", setting, iter, gname[i],
                    (unsigned long)g_in.gpr[i], (unsigned long)g_out.gpr[i]);
            bad = 1;
        }
    if ((g_in.rflags ^ g_out.rflags) & FLAGS_CHECKED) {
        fprintf(stderr, "%s #%ld: rflags %#lx -> %#lx\n", setting, iter, (unsigned long)g_in.rflags,
                (unsigned long)g_out.rflags);
        bad = 1;
    }
    if (g_in.mxcsr != g_out.mxcsr || g_in.fcw != g_out.fcw) {
        fprintf(stderr, "%s #%ld: mxcsr %#x -> %#x, fcw %#x -> %#x\n", setting, iter, g_in.mxcsr,
                g_out.mxcsr, g_in.fcw, g_out.fcw);
        bad = 1;
    }
    for (int i = 0; i < nvec; i++)
        if (memcmp(g_in.vec[i], g_out.vec[i], (size_t)width)) {
            fprintf(stderr, "%s #%ld: vector register %d changed\n", setting, iter, i);
            bad = 1;
        }
    if (level == 2 && memcmp(g_in.k, g_out.k, sizeof g_in.k)) {
        fprintf(stderr, "%s #%ld: opmask registers changed\n", setting, iter);
        bad = 1;
    }
    if (memcmp(g_in.red, g_out.red, sizeof g_in.red)) {
        fprintf(stderr, "%s #%ld: the red zone changed\n", setting, iter);
        bad = 1;
    }
    if (bad) exit(1);
}

#endif
