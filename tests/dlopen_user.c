/* libtrapkit.so opened with dlopen() after start-up, as a plugin or Python's
 * ctypes would (README, "Loading it at run time"): with glibc's static TLS
 * reserve raised (the test's environment) it loads, and a DIRTY region made
 * through it sees the pages written, on each mechanism the machine has -
 * its fault handler running with the thread-local storage dlopen gave it.
 *
 *   dlopen_user LIBTRAPKIT */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <trapkit/region.h>

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "tk_init");
    int (*create)(const tk_region_config *, tk_region **) =
        (int (*)(const tk_region_config *, tk_region **))dlsym(h, "tk_region_create");
    void *(*base_of)(tk_region *) = (void *(*)(tk_region *))dlsym(h, "tk_region_base");
    int (*dirty)(tk_region *, uint64_t *, size_t) =
        (int (*)(tk_region *, uint64_t *, size_t))dlsym(h, "tk_dirty");
    int (*destroy)(tk_region *) = (int (*)(tk_region *))dlsym(h, "tk_region_destroy");
    const char *(*last_error)(void) = (const char *(*)(void))dlsym(h, "tk_last_error");
    if (!init || !create || !base_of || !dirty || !destroy || !last_error || init() != 0) {
        fprintf(stderr, "trapkit's symbols or tk_init\n");
        return 1;
    }
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    enum tk_mech mechs[] = {TK_MECH_POSIX, TK_MECH_UFFD_SIGBUS, TK_MECH_UFFD_THREAD,
                            TK_MECH_PAGEMAP_SCAN};
    int tried = 0;
    for (unsigned m = 0; m < sizeof mechs / sizeof mechs[0]; m++) {
        tk_region_config c = {.len = 64 * ps, .mech = mechs[m], .flags = TK_REGION_DIRTY};
        tk_region *r;
        if (create(&c, &r) != 0) {
            printf("mechanism %u: not here (%s)\n", (unsigned)mechs[m], last_error());
            continue;
        }
        char *p = base_of(r);
        uint64_t bits = 0;
        dirty(r, &bits, 64); /* (a fresh interval) */
        for (int round = 0; round < 3; round++) {
            for (size_t i = 0; i < 64; i += 3) p[i * ps] = (char)round;
            int n = dirty(r, &bits, 64);
            uint64_t want = 0;
            for (size_t i = 0; i < 64; i += 3) want |= 1ull << i;
            if (n != 22 || bits != want) {
                fprintf(stderr, "mechanism %u, round %d: %d pages dirty (%#llx)\n",
                        (unsigned)mechs[m], round, n, (unsigned long long)bits);
                return 1;
            }
        }
        destroy(r);
        tried++;
        printf("mechanism %u: 3 rounds of 22 pages written, all seen\n", (unsigned)mechs[m]);
    }
    return tried ? 0 : 1;
}
