// sim/tksim.cpp - the tksim command.
//
//   tksim [options] PROGRAM [ARGS...]
//
// Runs a static RV64GC Linux program.  Options:
//   --functional       the functional machine alone (no timing model)
//   --trace-pc FILE    every executed PC, one hexadecimal number per line
//                      (compare with qemu-riscv64 -singlestep -d nochain,exec)
//   --max-insns N      stop after N instructions
//   --stats-json FILE  the run's statistics as JSON
//   --quiet            no summary on stderr
// The program's stdout and stderr are tksim's; tksim's own summary goes
// to stderr after the program's output.  Exit status: the program's, or
// 2 for a usage error, 3 for a program tksim cannot load, 4 for a guest
// fault (illegal instruction, access to unmapped memory).
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "machine.hpp"

using namespace tksim;

namespace
{

void usage(FILE *f)
{
    fprintf(f, "usage: tksim [--functional] [--trace-pc FILE] [--max-insns N] [--stats-json FILE] "
               "[--quiet] PROGRAM [ARGS...]\n");
}

double now()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

} // namespace

int main(int argc, char **argv)
{
    const char *trace_path = nullptr, *json_path = nullptr;
    uint64_t max_insns = 0;
    bool quiet = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) {
                fprintf(stderr, "tksim: %s needs a value\n", a.c_str());
                exit(2);
            }
            return argv[++i];
        };
        if (a == "--functional")
            ; // the only mode so far
        else if (a == "--trace-pc")
            trace_path = value();
        else if (a == "--max-insns") {
            char *end;
            const char *v = value();
            max_insns = strtoull(v, &end, 10);
            if (*end || !*v) {
                fprintf(stderr, "tksim: --max-insns wants a number, not '%s'\n", v);
                return 2;
            }
        } else if (a == "--stats-json")
            json_path = value();
        else if (a == "--quiet")
            quiet = true;
        else if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else if (a == "--") {
            i++;
            break;
        } else {
            fprintf(stderr, "tksim: unknown option %s\n", a.c_str());
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    std::vector<std::string> args(argv + i, argv + argc);
    Machine m;
    std::string err;
    if (!m.load(args[0], args, {}, &err)) {
        fprintf(stderr, "tksim: %s\n", err.c_str());
        return 3;
    }
    FILE *trace = nullptr;
    if (trace_path && !(trace = fopen(trace_path, "w"))) {
        perror(trace_path);
        return 2;
    }
    double t0 = now();
    int rc = 0;
    Step s;
    try {
        while (!m.exited() && (max_insns == 0 || m.instret() < max_insns)) {
            if (trace) fprintf(trace, "%llx\n", static_cast<unsigned long long>(m.pc()));
            m.step(&s);
        }
        rc = m.exited() ? m.exit_code() : 0;
    } catch (const GuestFault &f) {
        fflush(stdout);
        fprintf(stderr, "tksim: guest fault at pc 0x%llx: %s (0x%llx) after %llu instructions\n",
                static_cast<unsigned long long>(f.pc), f.what,
                static_cast<unsigned long long>(f.addr),
                static_cast<unsigned long long>(m.instret()));
        rc = 4;
    }
    double secs = now() - t0;
    if (trace) fclose(trace);
    fflush(stdout);
    double mips = secs > 0 ? static_cast<double>(m.instret()) / secs / 1e6 : 0;
    if (!quiet)
        fprintf(stderr, "tksim: %llu instructions, %llu system calls, %.3f s (%.1f million/s)%s\n",
                static_cast<unsigned long long>(m.instret()),
                static_cast<unsigned long long>(m.syscalls), secs, mips,
                m.exited() ? "" : ", stopped before the program's end");
    if (json_path) {
        FILE *j = fopen(json_path, "w");
        if (!j) {
            perror(json_path);
            return 2;
        }
        fprintf(j,
                "{\"program\": \"%s\", \"instructions\": %llu, \"syscalls\": %llu, "
                "\"exit_code\": %d, \"exited\": %s, \"seconds\": %.6f, \"ips\": %.1f}\n",
                args[0].c_str(), static_cast<unsigned long long>(m.instret()),
                static_cast<unsigned long long>(m.syscalls), m.exit_code(),
                m.exited() ? "true" : "false", secs, mips * 1e6);
        fclose(j);
    }
    return rc;
}
