// sim/tksim.cpp - the tksim command.
//
//   tksim [options] PROGRAM [ARGS...]
//
// Runs a static RV64GC Linux program on the timing model (sim/core.hpp)
// and prints its statistics.  Options:
//   --config FILE      timing parameters, "key = value" lines (sim/configs/)
//   --set KEY=VALUE    one parameter (after --config; repeatable), e.g.
//                      --set scheme=prepend --set tlb_entries=32
//   --functional       the functional machine alone (no timing model)
//   --tlb-model        with --functional: count data TLB misses with a
//                      plain model of the configured TLB (size,
//                      replacement, page size) fed every access in program
//                      order - the reference the timing model is checked by
//   --trace-pc FILE    every executed PC, one hexadecimal number per line
//                      (compare with qemu-riscv64 -singlestep -d nochain,exec)
//   --max-insns N      stop after N instructions
//   --stats-json FILE  the run's statistics as JSON
//   --quiet            no summary on stderr
// The program's stdout and stderr are tksim's; tksim's own summary goes
// to stderr after the program's output.  Exit status: the program's, or
// 2 for a usage error, 3 for a program tksim cannot load, 4 for a guest
// fault (illegal instruction, access to unmapped memory), 5 for a stuck
// pipeline (its state is printed).
#include <time.h>

#include <cstdio>
#include <list>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core.hpp"
#include "machine.hpp"

using namespace tksim;

namespace
{

void usage(FILE *f)
{
    fprintf(f, "usage: tksim [--config FILE] [--set KEY=VALUE]... [--functional] [--trace-pc FILE] "
               "[--max-insns N] [--stats-json FILE] [--quiet] PROGRAM [ARGS...]\n");
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
    bool quiet = false, functional = false, tlb_model = false;
    Config cfg;
    std::string cerr;
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
            functional = true;
        else if (a == "--tlb-model")
            tlb_model = true;
        else if (a == "--config") {
            if (!cfg.read(value(), &cerr)) {
                fprintf(stderr, "tksim: %s\n", cerr.c_str());
                return 2;
            }
        } else if (a == "--set") {
            std::string kv = value();
            size_t eq = kv.find('=');
            if (eq == std::string::npos || !cfg.set(kv.substr(0, eq), kv.substr(eq + 1), &cerr)) {
                fprintf(stderr, "tksim: --set %s: %s\n", kv.c_str(),
                        eq == std::string::npos ? "wants KEY=VALUE" : cerr.c_str());
                return 2;
            }
            if (!cfg.line_ok()) {
                fprintf(stderr,
                        "tksim: --set %s: the caches' sizes, ways and line size do not make "
                        "whole sets\n",
                        kv.c_str());
                return 2;
            }
        } else if (a == "--trace-pc")
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
    if (!functional) {
        if (trace_path) {
            fprintf(stderr, "tksim: --trace-pc goes with --functional\n");
            return 2;
        }
        Core core(m, cfg);
        int rc = 0;
        bool ok = true;
        try {
            ok = core.run(max_insns);
            rc = m.exited() ? m.exit_code() : 0;
        } catch (const GuestFault &f) {
            fflush(stdout);
            fprintf(stderr, "tksim: guest fault at pc 0x%llx: %s (0x%llx)\n",
                    static_cast<unsigned long long>(f.pc), f.what,
                    static_cast<unsigned long long>(f.addr));
            return 4;
        }
        fflush(stdout);
        if (!quiet) fprintf(stderr, "tksim: %s\n%s", args[0].c_str(), core.stats_table().c_str());
        if (json_path) {
            FILE *j = fopen(json_path, "w");
            if (!j) {
                perror(json_path);
                return 2;
            }
            std::string js = core.stats_json();
            js.pop_back(); // the closing brace: the machine's part follows
            fprintf(j, "%s, \"program\": \"%s\", \"exit_code\": %d, \"state_hash\": \"%016llx\"}\n",
                    js.c_str(), args[0].c_str(), m.exit_code(),
                    static_cast<unsigned long long>(m.state_hash()));
            fclose(j);
        }
        return ok ? rc : 5;
    }
    // the reference TLB: a list of pages, most recently used first (LRU),
    // or a ring with a next-victim index (round-robin)
    std::list<uint64_t> lru;
    std::vector<uint64_t> ring(static_cast<size_t>(cfg.tlb_entries), ~0ull);
    size_t ring_next = 0;
    uint64_t tlb_misses = 0, tlb_accesses = 0;
    auto tlb_access = [&](uint64_t vpn) {
        tlb_accesses++;
        if (cfg.tlb_replacement == Replacement::LRU) {
            for (auto it = lru.begin(); it != lru.end(); ++it)
                if (*it == vpn) {
                    lru.splice(lru.begin(), lru, it);
                    return;
                }
            tlb_misses++;
            lru.push_front(vpn);
            if (lru.size() > static_cast<size_t>(cfg.tlb_entries)) lru.pop_back();
        } else {
            for (uint64_t p : ring)
                if (p == vpn) return;
            tlb_misses++;
            ring[ring_next] = vpn;
            ring_next = (ring_next + 1) % ring.size();
        }
    };
    double t0 = now();
    int rc = 0;
    Step s;
    try {
        while (!m.exited() && (max_insns == 0 || m.instret() < max_insns)) {
            if (trace) fprintf(trace, "%llx\n", static_cast<unsigned long long>(m.pc()));
            m.step(&s);
            if (tlb_model &&
                (s.inst->cls == C_LOAD || s.inst->cls == C_STORE || s.inst->cls == C_AMO))
                tlb_access(s.addr >> cfg.page_bits);
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
                "\"exit_code\": %d, \"exited\": %s, \"state_hash\": \"%016llx\", "
                "\"tlb_accesses\": %llu, \"tlb_misses\": %llu, \"seconds\": %.6f, "
                "\"ips\": %.1f}\n",
                args[0].c_str(), static_cast<unsigned long long>(m.instret()),
                static_cast<unsigned long long>(m.syscalls), m.exit_code(),
                m.exited() ? "true" : "false", static_cast<unsigned long long>(m.state_hash()),
                static_cast<unsigned long long>(tlb_accesses),
                static_cast<unsigned long long>(tlb_misses), secs, mips * 1e6);
        fclose(j);
    }
    return rc;
}
