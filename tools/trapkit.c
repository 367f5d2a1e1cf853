/* tools/trapkit.c - the `trapkit` command.
 *
 *   trapkit probe [--json]   what this kernel and CPU offer, and which
 *                            mechanism trapkit uses for each primitive
 *   trapkit report [--quick] run the benchmarks and write the report
 *                            (from a build tree: bench/report.py)
 *   trapkit version          the version
 *   trapkit help             usage
 *
 * Exit status: 0 success, 1 failure, 2 usage error.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <trapkit/trapkit.h>

static const char usage_text[] =
    "usage: trapkit <command> [options]\n"
    "\n"
    "commands:\n"
    "  probe           print what this kernel and CPU offer and which mechanism\n"
    "                  trapkit uses for each primitive\n"
    "  probe --json    the same facts as one JSON object\n"
    "  report [--quick] [--out DIR] [--docs FILE] [--only LIST]\n"
    "                  run the benchmarks (briefly with --quick) and write\n"
    "                  DIR/results.json, DIR/index.html with plots, and FILE\n"
    "                  (default: report/ and docs/results.md in the source tree)\n"
    "  version         print the version\n"
    "  help            print this help\n"
    "\n"
    "environment:\n"
    "  TRAPKIT_BACKEND=<mechanism>  force a mechanism for every region (posix,\n"
    "                  uffd-sigbus, uffd-thread, pagemap-scan, soft-dirty, pkeys,\n"
    "                  fast-kernel, auto)\n";

static int usage_error(const char *fmt, const char *arg)
{
    fputs("trapkit: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nrun 'trapkit help' for usage\n", stderr);
    return 2;
}

/* ---- the table ------------------------------------------------------------ */

#define MAX_ROWS 64
#define VALUE_LEN 512
#define LINE_WIDTH 100

struct row {
    const char *fact; /* NULL: value is a section title */
    char value[VALUE_LEN];
};

static struct row rows[MAX_ROWS];
static int nrows;

__attribute__((format(printf, 2, 3))) static void add(const char *fact, const char *fmt, ...)
{
    if (nrows == MAX_ROWS) return;
    struct row *r = &rows[nrows++];
    r->fact = fact;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->value, sizeof r->value, fmt, ap);
    va_end(ap);
}

static void section(const char *title)
{
    add(NULL, "%s", title);
}

/* Prints value starting at column col, wrapping at spaces so that lines stay
 * within LINE_WIDTH; continuation lines start at col. */
static void print_wrapped(const char *v, int col)
{
    int room = LINE_WIDTH - col;
    if (room < 30) room = 30;
    bool first_line = true;
    while (*v) {
        int n = (int)strlen(v);
        if (n > room) {
            int cut = room;
            while (cut > 0 && v[cut] != ' ') cut--;
            if (cut == 0) { /* one long word: break after it */
                cut = room;
                while (v[cut] && v[cut] != ' ') cut++;
            }
            n = cut;
        }
        if (!first_line) printf("\n%*s", col, "");
        fwrite(v, 1, (size_t)n, stdout);
        first_line = false;
        v += n;
        while (*v == ' ') v++;
    }
    putchar('\n');
}

static void print_table(void)
{
    int width = 0;
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].fact) continue;
        int n = (int)strlen(rows[i].fact);
        if (n > width) width = n;
    }
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].fact) {
            printf("%s%s\n", i ? "\n" : "", rows[i].value);
            continue;
        }
        printf("  %-*s  ", width, rows[i].fact);
        print_wrapped(rows[i].value, width + 4);
    }
}

/* ---- formatting helpers ----------------------------------------------------- */

static const char *yes_no(bool b)
{
    return b ? "yes" : "no";
}

static void fmt_size(char *buf, size_t size, size_t bytes)
{
    if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
        snprintf(buf, size, "%zu GiB", bytes >> 30);
    else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, size, "%zu MiB", bytes >> 20);
    else if (bytes >= (1u << 10) && bytes % (1u << 10) == 0)
        snprintf(buf, size, "%zu KiB", bytes >> 10);
    else
        snprintf(buf, size, "%zu bytes", bytes);
}

/* Appends s to buf (of size VALUE_LEN), separated by sep if buf is not empty. */
static void append(char *buf, const char *sep, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, VALUE_LEN - n, "%s%s", n ? sep : "", s);
}

static const char *uffd_ioctl_name(unsigned bit)
{
    switch (bit) {
    case 0x00:
        return "REGISTER";
    case 0x01:
        return "UNREGISTER";
    case 0x02:
        return "WAKE";
    case 0x03:
        return "COPY";
    case 0x04:
        return "ZEROPAGE";
    case 0x05:
        return "MOVE";
    case 0x06:
        return "WRITEPROTECT";
    case 0x07:
        return "CONTINUE";
    case 0x08:
        return "POISON";
    case 0x3f:
        return "API";
    default:
        return NULL;
    }
}

static const char *uffd_access_text(enum tk_uffd_access a)
{
    switch (a) {
    case TK_UFFD_SYSCALL:
        return "yes, by userfaultfd(2)";
    case TK_UFFD_DEVICE:
        return "yes, by /dev/userfaultfd";
    case TK_UFFD_USER_MODE_ONLY:
        return "yes, user-mode faults only (userfaultfd(2) with UFFD_USER_MODE_ONLY)";
    case TK_UFFD_NONE:
    default:
        return "no (userfaultfd(2), /dev/userfaultfd and UFFD_USER_MODE_ONLY all refused)";
    }
}

/* ---- trapkit probe -------------------------------------------------------- */

static int cmd_probe_json(void)
{
    tk_probe_info p;
    int r = tk_probe(&p);
    if (r < 0)
        fprintf(stderr, "trapkit: warning: some facts could not be read: %s\n", tk_strerror(r));
    int n = tk_probe_json(&p, NULL, 0);
    if (n < 0) {
        fprintf(stderr, "trapkit: %s\n", tk_strerror(n));
        return 1;
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fprintf(stderr, "trapkit: out of memory\n");
        return 1;
    }
    tk_probe_json(&p, buf, (size_t)n + 1);
    puts(buf);
    free(buf);
    return fflush(stdout) == 0 ? 0 : 1;
}

static const enum tk_mech all_mechs[] = {
    TK_MECH_POSIX,      TK_MECH_UFFD_SIGBUS, TK_MECH_UFFD_THREAD, TK_MECH_PAGEMAP_SCAN,
    TK_MECH_SOFT_DIRTY, TK_MECH_PKEYS,       TK_MECH_FAST_KERNEL,
};

static int cmd_probe_table(void)
{
    tk_probe_info p;
    int r = tk_probe(&p);
    char v[VALUE_LEN], tmp[64];

    printf("trapkit %s probe\n\n", TRAPKIT_VERSION);
    if (r < 0) printf("(some facts could not be read: %s)\n\n", tk_strerror(r));
    const char *mask = getenv("TRAPKIT_PROBE_MASK");
    if (mask && *mask)
        printf("TRAPKIT_PROBE_MASK=%s: those features are hidden below and trapkit does not use "
               "them\n\n",
               mask);

    section("machine");
    add("kernel", "%s", p.kernel_release[0] ? p.kernel_release : "(unknown)");
    add("CPU", "%s", p.cpu_model[0] ? p.cpu_model : "(unknown)");
    add("CPUs online", "%d", p.ncpus);
    add("page size", "%zu bytes", p.page_size);
    v[0] = 0;
    for (int i = 0; i < p.n_huge_page_sizes; i++) {
        fmt_size(tmp, sizeof tmp, p.huge_page_sizes[i]);
        append(v, ", ", tmp);
    }
    add("huge page sizes", "%s", v[0] ? v : "none (no /sys/kernel/mm/hugepages)");
    add("transparent huge pages", "%s", p.thp_mode[0] ? p.thp_mode : "not available");
    if (p.max_map_count >= 0)
        add("vm.max_map_count", "%ld", p.max_map_count);
    else
        add("vm.max_map_count", "unreadable");
    add("mappings of this process", "%ld", p.map_count);
    add("AT_MINSIGSTKSZ", "%zu bytes (signal frame size the kernel needs)", p.minsigstksz);

    section("kernel and CPU features");
    add("userfaultfd", "%s", uffd_access_text(p.uffd_access));
    if (p.uffd_access != TK_UFFD_NONE) {
        v[0] = 0;
        for (unsigned b = 0; b < 64; b++) {
            if (!(p.uffd_features & (UINT64_C(1) << b))) continue;
            const char *name = tk_uffd_feature_name(b);
            if (!name) {
                snprintf(tmp, sizeof tmp, "bit%u", b);
                name = tmp;
            }
            append(v, " ", name);
        }
        add("userfaultfd features", "%s", v[0] ? v : "none (the API handshake failed)");
        v[0] = 0;
        for (unsigned b = 0; b < 64; b++) {
            if (!(p.uffd_ioctls & (UINT64_C(1) << b))) continue;
            const char *name = uffd_ioctl_name(b);
            if (!name) {
                snprintf(tmp, sizeof tmp, "bit%u", b);
                name = tmp;
            }
            append(v, " ", name);
        }
        add("ioctls on a WP range", "%s",
            v[0] ? v : "none (registering a page for write protection failed)");
        if (p.uffd_ioctls >> _UFFDIO_WRITEPROTECT & 1)
            add("write after unprotect", "%s",
                p.uffd_wp_unprotect_writable
                    ? "no fault (the kernel makes the page writable)"
                    : "one kernel fault per page (the page stays read-only: Linux < 6.3)");
    }
    add("PAGEMAP_SCAN ioctl", "%s", yes_no(p.pagemap_scan));
    add("soft-dirty bits", "%s", yes_no(p.soft_dirty));
    add("pkeys in the CPU", "%s", p.pkeys_cpu ? "yes (CPUID PKU and OSPKE)" : "no");
    add("pkeys in the kernel", "%s", p.pkeys_kernel ? "yes (pkey_alloc works)" : "no");
    add("pkeys available", "%d", p.pkeys_available);
    add("MADV_GUARD_INSTALL", "%s", yes_no(p.madv_guard_install));
    const char *fk_why = NULL;
    bool fk = tk_mech_available(TK_MECH_FAST_KERNEL, 0, &fk_why);
    add("fast exception path", "%s", fk ? "yes (kernel/fastexc: prctl PR_FASTEXC)" : "no");
    add("memfd_create", "%s", yes_no(p.map2));

    section("mechanism for each primitive");
    const char *env = getenv("TRAPKIT_BACKEND");
    enum tk_mech forced = TK_MECH_AUTO;
    bool env_bad = false;
    if (env && *env && strcmp(env, "auto") != 0) {
        forced = tk_mech_parse(env);
        if (forced == TK_MECH_COUNT_) {
            forced = TK_MECH_AUTO;
            env_bad = true;
        }
    }
    if (env_bad) {
        add("TRAPKIT_BACKEND", "'%s' names no mechanism: creating a region fails", env);
    } else if (forced != TK_MECH_AUTO) {
        const char *why = NULL;
        if (tk_mech_available(forced, 0, &why))
            add("TRAPKIT_BACKEND", "%s (forced mechanism for every region)", tk_mech_name(forced));
        else
            add("TRAPKIT_BACKEND", "%s (forced, but unavailable here: %s)", tk_mech_name(forced),
                why);
    } else {
        add("TRAPKIT_BACKEND", "%s (trapkit chooses)", env && *env ? env : "unset");
    }

    if (forced != TK_MECH_AUTO) {
        add("TRAP, PROT1, PROTN, UNPROT", "%s (forced by TRAPKIT_BACKEND; default here: %s)",
            tk_mech_name(forced), tk_mech_name(p.mech_trap));
        add("DIRTY", "%s (forced by TRAPKIT_BACKEND; default here: %s)", tk_mech_name(forced),
            tk_mech_name(p.mech_dirty));
    } else {
        add("TRAP, PROT1, PROTN, UNPROT", "%s", tk_mech_name(p.mech_trap));
        add("DIRTY", "%s", tk_mech_name(p.mech_dirty));
    }
    add("no-access protection", "%s (mprotect)", tk_mech_name(p.mech_noaccess));
    if (p.map2) {
        enum tk_mech m2 = forced != TK_MECH_AUTO ? forced : tk_mech_default(TK_REGION_MAP2);
        if (forced == TK_MECH_AUTO && m2 != p.mech_trap)
            add("MAP2", "memfd views (MAP2 regions use %s)", tk_mech_name(m2));
        else
            add("MAP2", "memfd views");
    } else {
        add("MAP2", "unavailable (memfd_create failed)");
    }
    add("PAGESIZE", "multiples of %zu", p.page_size);
    section("mechanisms on this machine");
    for (size_t i = 0; i < sizeof all_mechs / sizeof all_mechs[0]; i++) {
        enum tk_mech m = all_mechs[i];
        const char *why = NULL, *why2 = NULL;
        if (!tk_mech_available(m, 0, &why)) {
            add(tk_mech_name(m), "unavailable: %s", why ? why : "(no reason given)");
        } else if (!tk_mech_available(m, TK_REGION_MAP2, &why2)) {
            add(tk_mech_name(m), "available (not for MAP2 regions: %s)",
                why2 ? why2 : "(no reason given)");
        } else {
            add(tk_mech_name(m), "available");
        }
    }

    print_table();
    return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_probe(int argc, char **argv)
{
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            return usage_error("probe: unknown option '%s'", argv[i]);
        } else {
            return usage_error("probe: unexpected argument '%s'", argv[i]);
        }
    }
    return json ? cmd_probe_json() : cmd_probe_table();
}

/* ---- trapkit report -------------------------------------------------------- */

#ifndef TK_SOURCE_DIR
#define TK_SOURCE_DIR "."
#endif
#ifndef TK_BENCH_DIR
#define TK_BENCH_DIR "bench"
#endif

static int cmd_report(int argc, char **argv)
{
    const char *out = TK_SOURCE_DIR "/report", *docs = TK_SOURCE_DIR "/docs/results.md";
    const char *only = NULL;
    bool quick = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if ((strcmp(argv[i], "--out") == 0 || strcmp(argv[i], "--docs") == 0 ||
                    strcmp(argv[i], "--only") == 0) &&
                   i + 1 < argc) {
            const char **dst = argv[i][2] == 'o' && argv[i][3] == 'u' ? &out
                               : argv[i][2] == 'd'                    ? &docs
                                                                      : &only;
            *dst = argv[++i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else {
            return usage_error("report: unknown argument '%s'", argv[i]);
        }
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "trapkit report: cannot find this program: %s\n", strerror(errno));
        return 1;
    }
    self[n] = 0;
    const char *script = TK_SOURCE_DIR "/bench/report.py";
    struct stat st;
    if (stat(script, &st) != 0 || stat(TK_BENCH_DIR "/bench_appel_li", &st) != 0) {
        fprintf(stderr,
                "trapkit report: the benchmarks are not here (%s); the report runs from "
                "a build tree: make report\n",
                TK_BENCH_DIR);
        return 1;
    }
    /* Debian's python3 has matplotlib (scripts/install-deps.sh) */
    const char *python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    const char *args[16];
    int k = 0;
    args[k++] = python;
    args[k++] = script;
    args[k++] = "--bench-dir";
    args[k++] = TK_BENCH_DIR;
    args[k++] = "--trapkit";
    args[k++] = self;
    args[k++] = "--out";
    args[k++] = out;
    args[k++] = "--docs";
    args[k++] = docs;
    if (quick) args[k++] = "--quick";
    if (only) {
        args[k++] = "--only";
        args[k++] = only;
    }
    args[k] = NULL;
    execvp(python, (char *const *)args);
    fprintf(stderr, "trapkit report: cannot run %s: %s\n", python, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc > 2) return usage_error("%s takes no arguments", cmd);
        fputs(usage_text, stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        if (argc > 2) return usage_error("%s takes no arguments", cmd);
        printf("trapkit %s\n", TRAPKIT_VERSION);
        return 0;
    }
    if (strcmp(cmd, "probe") == 0) return cmd_probe(argc - 2, argv + 2);
    if (strcmp(cmd, "report") == 0) return cmd_report(argc - 2, argv + 2);
    if (cmd[0] == '-') return usage_error("unknown option '%s'", cmd);
    return usage_error("unknown command '%s'", cmd);
}
