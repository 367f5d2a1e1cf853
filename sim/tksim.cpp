// sim/tksim.cpp - the tksim command.
//
//   tksim [options] PROGRAM [ARGS...]
//
// Runs a static RV64GC Linux program on the timing model (sim/core.hpp)
// and prints its statistics.  usage() lists the options.
//
// The program's stdout and stderr are tksim's; tksim's own summary goes
// to stderr after the program's output.  Exit status: the program's (its
// exit status, or 128 + N when it ended by signal N), or one of tksim's
// own, from 100 up (TK_EXIT_*), which tksim always explains on stderr in a
// line that ends "(exit status N)"; a program that exits with 100-103
// itself is told apart by that line, or by --stats-json's "exited".
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <string>
#include <vector>

#include "core.hpp"
#include "machine.hpp"

using namespace tksim;

namespace
{

// tksim's own exit statuses, above those programs commonly use
enum : int {
    TK_EXIT_USAGE = 100, // a bad command line, configuration or output file
    TK_EXIT_LOAD = 101,  // not a program tksim runs
    TK_EXIT_FAULT = 102, // a fault the program has no handler for: illegal instruction, ...
    TK_EXIT_STUCK = 103, // the timing model's pipeline was stuck (its state is printed)
};

// ", SIGSEGV unhandled": the signal Linux would send the program for the
// fault, which it has no handler for (where the fault is one)
std::string unhandled(const GuestFault &f)
{
    const char *abbrev = f.sig > 0 ? sigabbrev_np(f.sig) : nullptr;
    return abbrev ? std::string(", SIG") + abbrev + " unhandled" : std::string();
}

void usage(FILE *f)
{
    fprintf(f, "usage: tksim [options] PROGRAM [ARGS...]\n"
               "Runs a static RV64GC (and Zba, Zbb) Linux program on tksim's timing model.\n"
               "  --config FILE      timing parameters, \"key = value\" lines (sim/configs/)\n"
               "  --set KEY=VALUE    one parameter, over --config's (repeatable)\n"
               "  --functional       the functional machine alone (no timing model)\n"
               "  --tlb-model        with --functional: count data TLB misses with a plain model\n"
               "  --trace-pc FILE    with --functional: every executed PC, one a line\n"
               "  --max-insns N      stop after N instructions (N >= 1)\n"
               "  --stats-json FILE  the run's statistics as JSON\n"
               "  --fs-root DIR      the program sees DIR as / and may create and write files\n"
               "                     there; without it, it reads the host's files and writes\n"
               "                     fail with EROFS\n"
               "  -E, --env NAME=VALUE  a variable of the program's environment (repeatable;\n"
               "                     the environment is empty otherwise, so runs repeat)\n"
               "  --host-env         the program's environment starts as tksim's own\n"
               "  --quiet            no summary on stderr\n"
               "A system call tksim does not answer gets -ENOSYS, reported once on stderr.\n"
               "Exit status: the program's (128 + N if signal N ended it), or tksim's own:\n"
               "  100 usage (bad option, configuration or output file), 101 not a program\n"
               "  tksim runs, 102 the program faulted (no handler took the fault's signal),\n"
               "  103 the timing model's pipeline stuck;\n"
               "  tksim says so on stderr, in a line ending \"(exit status N)\".\n");
}

// s as a JSON string's contents.
std::string json_escape(const std::string &s)
{
    std::string o;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char b[8];
            snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o;
}

// Ends tksim with one of its own statuses, saying why on stderr.
[[noreturn]] __attribute__((format(printf, 2, 3))) void fail(int status, const char *fmt, ...)
{
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fputs("tksim: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (exit status %d)\n", status);
    exit(status);
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
    const char *trace_path = nullptr, *json_path = nullptr, *fs_root = nullptr;
    uint64_t max_insns = 0; // 0: no limit
    bool quiet = false, functional = false, tlb_model = false, host_env = false;
    std::vector<std::string> env_set; // -E NAME=VALUE, in order
    Config cfg;
    std::string cerr;
    GuestFs::reserve_std();
    std::vector<std::string> configs, sets; // (read in that order once every option is in)
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) fail(TK_EXIT_USAGE, "%s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--functional")
            functional = true;
        else if (a == "--tlb-model")
            tlb_model = true;
        else if (a == "--config")
            configs.push_back(value());
        else if (a == "--set")
            sets.push_back(value());
        else if (a == "-E" || a == "--env") {
            std::string kv = value();
            size_t eq = kv.find('=');
            if (eq == 0 || eq == std::string::npos)
                fail(TK_EXIT_USAGE, "%s %s: wants NAME=VALUE", a.c_str(), kv.c_str());
            env_set.push_back(kv);
        } else if (a == "--host-env") {
            host_env = true;
        } else if (a == "--trace-pc")
            trace_path = value();
        else if (a == "--max-insns") {
            const char *v = value();
            char *end;
            errno = 0;
            max_insns = strtoull(v, &end, 10);
            // (strtoull takes "-1" as 2^64 - 1: only digits are a count)
            if (*v < '0' || *v > '9' || *end || errno == ERANGE || max_insns == 0)
                fail(TK_EXIT_USAGE, "--max-insns wants a number of instructions from 1, not '%s'",
                     v);
        } else if (a == "--stats-json")
            json_path = value();
        else if (a == "--fs-root")
            fs_root = value();
        else if (a == "--quiet")
            quiet = true;
        else if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else if (a == "--") {
            i++;
            break;
        } else {
            usage(stderr);
            fail(TK_EXIT_USAGE, "unknown option %s", a.c_str());
        }
    }
    if (i >= argc) {
        usage(stderr);
        fail(TK_EXIT_USAGE, "no program given");
    }
    // the configuration files, then every --set over them, wherever on the
    // command line they came
    for (const std::string &c : configs)
        if (!cfg.read(c, &cerr)) fail(TK_EXIT_USAGE, "%s", cerr.c_str());
    for (const std::string &kv : sets) {
        size_t eq = kv.find('=');
        if (eq == std::string::npos || !cfg.set(kv.substr(0, eq), kv.substr(eq + 1), &cerr))
            fail(TK_EXIT_USAGE, "--set %s: %s", kv.c_str(),
                 eq == std::string::npos ? "wants KEY=VALUE" : cerr.c_str());
    }
    if (!functional && trace_path) fail(TK_EXIT_USAGE, "--trace-pc goes with --functional");
    if (!functional && tlb_model) fail(TK_EXIT_USAGE, "--tlb-model goes with --functional");
    // (the whole configuration, once every --set is in: their order does not matter)
    if (!functional && !cfg.check(&cerr)) fail(TK_EXIT_USAGE, "%s", cerr.c_str());
    // the output files are opened before the run, so a bad one stops it now
    // (the statistics file takes a first byte now: a full device says so)
    FILE *trace = nullptr, *json = nullptr;
    if (trace_path && !(trace = fopen(trace_path, "w")))
        fail(TK_EXIT_USAGE, "--trace-pc %s: %s", trace_path, strerror(errno));
    if (json_path && (!(json = fopen(json_path, "w")) || fputc(' ', json) == EOF || fflush(json)))
        fail(TK_EXIT_USAGE, "--stats-json %s: %s", json_path, strerror(errno));
    std::vector<std::string> args(argv + i, argv + argc);
    std::vector<std::string> envp;
    if (host_env)
        for (char **e = environ; *e; e++) envp.emplace_back(*e);
    for (const std::string &kv : env_set) { // (replacing the variable if there)
        std::string name = kv.substr(0, kv.find('=') + 1);
        for (auto it = envp.begin(); it != envp.end();)
            it = it->compare(0, name.size(), name) == 0 ? envp.erase(it) : it + 1;
        envp.push_back(kv);
    }
    Machine m;
    std::string err;
    if (fs_root && !m.set_fs_root(fs_root, &err)) fail(TK_EXIT_USAGE, "%s", err.c_str());
    if (!m.load(args[0], args, envp, &err)) fail(TK_EXIT_LOAD, "%s", err.c_str());
    const std::string program = json_escape(args[0]);
    if (!functional) {
        Core core(m, cfg);
        int rc = 0;
        bool ok = true;
        try {
            ok = core.run(max_insns);
            rc = m.exited() ? m.exit_code() : 0;
        } catch (const GuestFault &f) {
            if (json) { // what is known: the fault, and the instructions before it
                fprintf(json,
                        "{\"program\": \"%s\", \"instructions\": %llu, \"exited\": false, "
                        "\"fault\": \"%s at pc 0x%llx (0x%llx)\", \"state_hash\": \"%016llx\"}\n",
                        program.c_str(), static_cast<unsigned long long>(core.stats().user_insns),
                        json_escape(f.what).c_str(), static_cast<unsigned long long>(f.pc),
                        static_cast<unsigned long long>(f.addr),
                        static_cast<unsigned long long>(m.state_hash()));
                fclose(json);
            }
            fail(TK_EXIT_FAULT, "guest fault at pc 0x%llx: %s (0x%llx)%s",
                 static_cast<unsigned long long>(f.pc), f.what,
                 static_cast<unsigned long long>(f.addr), unhandled(f).c_str());
        }
        fflush(stdout);
        if (!quiet) fprintf(stderr, "tksim: %s\n%s", args[0].c_str(), core.stats_table().c_str());
        if (json) {
            std::string js = core.stats_json();
            js.pop_back(); // the closing brace: the machine's part follows
            fprintf(json,
                    "%s, \"program\": \"%s\", \"exit_code\": %d, \"exited\": %s, "
                    "\"state_hash\": \"%016llx\"}\n",
                    js.c_str(), program.c_str(), m.exit_code(), m.exited() ? "true" : "false",
                    static_cast<unsigned long long>(m.state_hash()));
            if (fclose(json) != 0)
                fail(TK_EXIT_USAGE, "--stats-json %s: %s", json_path, strerror(errno));
        }
        if (!ok) fail(TK_EXIT_STUCK, "the timing model's pipeline was stuck (its state is above)");
        return rc;
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
    std::string fault; // (the JSON's "fault": what stopped the program, if it faulted)
    Step s;
    try {
        // (at the limit or a timer's expiry the machine's at_stop() says
        // whether the run stops: a timer's signal may end the program)
        m.set_max_insns(max_insns);
        while (!m.exited() && (m.instret() < m.stop_at() || !m.at_stop())) {
            m.step(&s);
            // (the PC the step ran: a fault's handler's first instruction,
            // not the instruction that faulted)
            if (trace) fprintf(trace, "%llx\n", static_cast<unsigned long long>(s.pc));
            if (tlb_model &&
                (s.inst->cls == C_LOAD || s.inst->cls == C_STORE || s.inst->cls == C_AMO))
                tlb_access(s.addr >> cfg.page_bits);
        }
        rc = m.exited() ? m.exit_code() : 0;
    } catch (const GuestFault &f) {
        fflush(stdout);
        fprintf(stderr,
                "tksim: guest fault at pc 0x%llx: %s (0x%llx)%s after %llu instructions (exit "
                "status %d)\n",
                static_cast<unsigned long long>(f.pc), f.what,
                static_cast<unsigned long long>(f.addr), unhandled(f).c_str(),
                static_cast<unsigned long long>(m.instret()), TK_EXIT_FAULT);
        rc = TK_EXIT_FAULT;
        char b[256];
        snprintf(b, sizeof b, "%s at pc 0x%llx (0x%llx)", f.what,
                 static_cast<unsigned long long>(f.pc), static_cast<unsigned long long>(f.addr));
        fault = b;
    }
    double secs = now() - t0;
    if (trace && (ferror(trace) | fclose(trace)))
        fail(TK_EXIT_USAGE, "--trace-pc %s: %s", trace_path,
             errno ? strerror(errno) : "a write failed");
    fflush(stdout);
    double mips = secs > 0 ? static_cast<double>(m.instret()) / secs / 1e6 : 0;
    if (!quiet)
        fprintf(stderr, "tksim: %llu instructions, %llu system calls, %.3f s (%.1f million/s)%s\n",
                static_cast<unsigned long long>(m.instret()),
                static_cast<unsigned long long>(m.syscalls), secs, mips,
                m.exited() ? "" : ", stopped before the program's end");
    if (json) {
        fprintf(json,
                "{\"program\": \"%s\", \"instructions\": %llu, \"syscalls\": %llu, "
                "\"exit_code\": %d, \"exited\": %s, %s\"state_hash\": \"%016llx\", "
                "\"tlb_accesses\": %llu, \"tlb_misses\": %llu, \"seconds\": %.6f, "
                "\"ips\": %.1f}\n",
                program.c_str(), static_cast<unsigned long long>(m.instret()),
                static_cast<unsigned long long>(m.syscalls), m.exit_code(),
                m.exited() ? "true" : "false",
                fault.empty() ? "" : ("\"fault\": \"" + json_escape(fault) + "\", ").c_str(),
                static_cast<unsigned long long>(m.state_hash()),
                static_cast<unsigned long long>(tlb_accesses),
                static_cast<unsigned long long>(tlb_misses), secs, mips * 1e6);
        if (fclose(json) != 0)
            fail(TK_EXIT_USAGE, "--stats-json %s: %s", json_path, strerror(errno));
    }
    return rc;
}
