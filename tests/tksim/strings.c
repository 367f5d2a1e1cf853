/* tests/tksim/strings.c - string processing over a text spread across more
 * pages than a small data TLB holds: each piece of the text is copied,
 * measured and searched with the C library's string functions after a
 * read of 24 other pages.  strspn loads the stack guard (its page evicted
 * by then) and clears a 256-byte table on the stack: 32 stores in a row
 * right behind a load that misses the TLB.  Usage: strings [PIECES]
 * (default 300); prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT (1 << 20) /* 128 pages of 8 KiB */

static char text[TEXT];
static char out[TEXT];

int main(int argc, char **argv)
{
    long pieces = argc > 1 ? atol(argv[1]) : 300;
    unsigned long x = 99;
    memset(text, 'e', TEXT);
    for (size_t i = 0; i < TEXT; i += 29) { /* other letters, and a space now and then */
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        text[i] = (x >> 61) == 0 ? ' ' : (char)('a' + (x >> 40) % 26);
    }
    text[TEXT - 1] = 0;
    unsigned long sum = 0;
    for (long k = 0; k < pieces; k++) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        size_t from = (x >> 20) % (TEXT - 8192), to = (x >> 35) % (TEXT - 8192);
        size_t len = 64 + (x >> 50) % 4000;
        memcpy(out + to, text + from, len);
        out[to + len] = 0;
        sum += strlen(out + to) + (strchr(out + to, 'q') ? 1 : 0);
        for (size_t p = 0; p < 24; p++) sum += (unsigned char)text[(from + p * 8192 * 5) % TEXT];
        sum += strspn(out + to, "abcdefghijklm") + strcspn(text + from, " ");
    }
    printf("%lu\n", sum);
    return 0;
}
