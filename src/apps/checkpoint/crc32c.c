/* src/apps/checkpoint/crc32c.c - CRC-32C (Castagnoli), with the SSE4.2
 * instruction where the CPU has it.  [signal-safe] */
#include "apps/checkpoint/image.h"

#include <stdbool.h>
#include <string.h>

static uint32_t table[256];
static int have_hw = -1;

static void init_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        table[i] = c;
    }
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p,
                                                         size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

/* Call once before any use from a signal handler. */
void tk__crc32c_init(void)
{
    if (have_hw >= 0) return;
    init_table();
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    have_hw = 0;
#endif
}

uint32_t tk__crc32c(uint32_t seed, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t crc = ~seed;
#if defined(__x86_64__)
    if (have_hw == 1) return ~crc_hw(crc, p, n);
#endif
    while (n--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
