// sim/syscall.cpp - the Linux system calls (riscv64, asm-generic numbers)
// that static programs make, as tksim answers them.  Answers that could
// differ between runs are fixed (the time is the instruction count, the
// random bytes are a fixed sequence, the process is pid 1000), so a run
// repeats exactly; file descriptors are the simulator's own (reads of
// files the program opens read-only, writes to stdout and stderr).
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <string>

#include "machine.hpp"

namespace tksim
{

namespace
{
constexpr uint64_t PAGE = 4096;

uint64_t err(int e)
{
    return static_cast<uint64_t>(-static_cast<int64_t>(e));
}

// struct stat of asm-generic (riscv64), 128 bytes
struct guest_stat {
    uint64_t dev, ino;
    uint32_t mode, nlink, uid, gid;
    uint64_t rdev, pad1;
    int64_t size;
    int32_t blksize, pad2;
    int64_t blocks;
    int64_t atime, atime_ns, mtime, mtime_ns, ctime, ctime_ns;
    uint32_t unused4, unused5;
};
static_assert(sizeof(guest_stat) == 128, "riscv64 struct stat");

guest_stat convert(const struct stat &st)
{
    guest_stat g{};
    g.dev = st.st_dev;
    g.ino = st.st_ino;
    g.mode = st.st_mode;
    g.nlink = static_cast<uint32_t>(st.st_nlink);
    g.uid = st.st_uid;
    g.gid = st.st_gid;
    g.rdev = st.st_rdev;
    g.size = st.st_size;
    g.blksize = static_cast<int32_t>(st.st_blksize);
    g.blocks = st.st_blocks;
    g.atime = st.st_atim.tv_sec;
    g.atime_ns = st.st_atim.tv_nsec;
    g.mtime = st.st_mtim.tv_sec;
    g.mtime_ns = st.st_mtim.tv_nsec;
    g.ctime = st.st_ctim.tv_sec;
    g.ctime_ns = st.st_ctim.tv_nsec;
    return g;
}
} // namespace

// A NUL-terminated path in guest memory; false when it is over PATH_MAX.
bool Machine::guest_path(uint64_t addr, uint64_t pc, std::string *out)
{
    out->clear();
    for (uint64_t p = addr;; p++) {
        char c = static_cast<char>(*host(p, 1, pc));
        if (!c) return true;
        *out += c;
        if (out->size() > 4096) return false;
    }
}

uint64_t Machine::do_mmap(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off)
{
    (void)prot;
    (void)off;
    if (len == 0) return err(EINVAL);
    if (!(flags & MAP_ANONYMOUS) || fd != -1) return err(ENODEV); // no file mappings
    len = (len + PAGE - 1) & ~(PAGE - 1);
    uint64_t at;
    if (flags & MAP_FIXED) {
        if (addr & (PAGE - 1)) return err(EINVAL);
        at = addr;
    } else {
        at = mmap_next_;
        mmap_next_ += len + PAGE; // a hole between mappings
    }
    if (at + len >= STACK_TOP - STACK_SIZE || !map(at, len)) return err(ENOMEM);
    memset(base_ + at, 0, len);
    return at;
}

uint64_t Machine::syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                          uint64_t a4, uint64_t a5)
{
    syscalls++;
    uint64_t pc = pc_;
    switch (n) {
    case 17: { // getcwd
        if (a1 < 2) return err(ERANGE);
        memcpy(host(a0, 2, pc), "/", 2);
        return a0;
    }
    case 29: { // ioctl: terminal queries answered from the real descriptor
        if (a1 == TCGETS) {
            struct termios t;
            if (ioctl(static_cast<int>(a0), TCGETS, &t) != 0) return err(errno);
            memcpy(host(a2, sizeof t, pc), &t, sizeof t);
            return 0;
        }
        if (a1 == TIOCGWINSZ) {
            struct winsize w;
            if (ioctl(static_cast<int>(a0), TIOCGWINSZ, &w) != 0) return err(errno);
            memcpy(host(a2, sizeof w, pc), &w, sizeof w);
            return 0;
        }
        return err(ENOTTY);
    }
    case 48: // faccessat
        return err(ENOENT);
    case 56: { // openat: read-only opens of the host's files
        if ((a2 & O_ACCMODE) != O_RDONLY) return err(EACCES);
        std::string path;
        if (!guest_path(a1, pc, &path)) return err(ENAMETOOLONG);
        int fd = openat(AT_FDCWD, path.c_str(), O_RDONLY | O_CLOEXEC);
        return fd < 0 ? err(errno) : static_cast<uint64_t>(fd);
    }
    case 57: // close
        if (a0 <= 2) return 0;
        return close(static_cast<int>(a0)) == 0 ? 0 : err(errno);
    case 62: { // lseek
        off_t r = lseek(static_cast<int>(a0), static_cast<off_t>(a1), static_cast<int>(a2));
        return r < 0 ? err(errno) : static_cast<uint64_t>(r);
    }
    case 63: { // read
        if (a2 == 0) return 0;
        ssize_t r = read(static_cast<int>(a0), host(a1, a2, pc), a2);
        return r < 0 ? err(errno) : static_cast<uint64_t>(r);
    }
    case 64: { // write
        if (a2 == 0) return 0;
        int fd = a0 == 1 ? stdout_fd : a0 == 2 ? stderr_fd : -1;
        if (fd < 0) return err(EBADF);
        ssize_t r = write(fd, host(a1, a2, pc), a2);
        return r < 0 ? err(errno) : static_cast<uint64_t>(r);
    }
    case 66: { // writev
        int fd = a0 == 1 ? stdout_fd : a0 == 2 ? stderr_fd : -1;
        if (fd < 0) return err(EBADF);
        uint64_t total = 0;
        for (uint64_t i = 0; i < a2; i++) {
            uint64_t base = load_mem<uint64_t>(a1 + 16 * i, pc),
                     len = load_mem<uint64_t>(a1 + 16 * i + 8, pc);
            if (len == 0) continue;
            ssize_t r = write(fd, host(base, len, pc), len);
            if (r < 0) return total ? total : err(errno);
            total += static_cast<uint64_t>(r);
        }
        return total;
    }
    case 78: { // readlinkat: /proc/self/exe is the program; nothing else is a link
        std::string path;
        if (!guest_path(a1, pc, &path)) return err(ENAMETOOLONG);
        if (path != "/proc/self/exe") return err(ENOENT);
        uint64_t n = std::min<uint64_t>(exe_path_.size(), a3);
        if (n) memcpy(host(a2, n, pc), exe_path_.data(), n);
        return n;
    }
    case 79:   // newfstatat (with AT_EMPTY_PATH: the descriptor itself)
    case 80: { // fstat
        struct stat st;
        int fd = static_cast<int>(a0);
        if (n == 79) {
            if (!(a3 & AT_EMPTY_PATH) || *host(a1, 1, pc) != 0) return err(ENOENT);
        }
        if (fstat(fd, &st) != 0) return err(errno);
        guest_stat g = convert(st);
        memcpy(host(n == 79 ? a2 : a1, sizeof g, pc), &g, sizeof g);
        return 0;
    }
    case 93: // exit
    case 94: // exit_group
        exited_ = true;
        exit_code_ = static_cast<int>(a0 & 0xff);
        return 0;
    case 96: // set_tid_address
        return 1000;
    case 98: // futex: one thread, nothing to wait for
        return 0;
    case 99: // set_robust_list: not offered (as qemu-riscv64 answers; glibc does without)
        return err(ENOSYS);
    case 179: { // sysinfo: the host's (qsort sizes its buffer by the memory size)
        struct sysinfo si;
        if (::sysinfo(&si) != 0) return err(errno);
        memcpy(host(a0, sizeof si, pc), &si, sizeof si);
        return 0;
    }
    case 113: { // clock_gettime: 1 ns per instruction from a fixed start
        uint64_t ns = 1700000000ull * 1000000000ull + instret_;
        uint64_t ts[2] = {ns / 1000000000ull, ns % 1000000000ull};
        memcpy(host(a1, 16, pc), ts, 16);
        return 0;
    }
    case 129: // kill
    case 131: // tgkill: abort()
        exited_ = true;
        exit_code_ = 128 + static_cast<int>(n == 131 ? a2 : a1);
        return 0;
    case 132: // sigaltstack
    case 134: // rt_sigaction
    case 135: // rt_sigprocmask
        return 0;
    case 160: { // uname
        char u[6][65] = {};
        strcpy(u[0], "Linux");
        strcpy(u[1], "tksim");
        strcpy(u[2], "6.1.0");
        strcpy(u[3], "#1");
        strcpy(u[4], "riscv64");
        memcpy(host(a0, sizeof u, pc), u, sizeof u);
        return 0;
    }
    case 172: // getpid
    case 178: // gettid
        return 1000;
    case 173: // getppid
        return 1;
    case 174: // getuid
    case 175: // geteuid
    case 176: // getgid
    case 177: // getegid
        return 0;
    case 214: { // brk: 0 (or anything below the start) asks where it is
        if (a0 < brk_start_) return brk_;
        uint64_t top = (a0 + PAGE - 1) & ~(PAGE - 1);
        if (top >= MMAP_BASE) return brk_;
        if (a0 > brk_ && !map(brk_start_, top - brk_start_)) return brk_;
        brk_ = a0;
        return brk_;
    }
    case 215: // munmap: the pages stay (a later access is not caught)
        return (a0 & (PAGE - 1)) ? err(EINVAL) : 0;
    case 216: // mremap: not offered (glibc's realloc copies instead)
        return err(ENOSYS);
    case 222: // mmap
        return do_mmap(a0, a1, static_cast<int>(a2), static_cast<int>(a3), static_cast<int>(a4),
                       a5);
    case 226: // mprotect
    case 233: // madvise
        return 0;
    case 259: // riscv_flush_icache(start, end, flags): all of it, in this one hart
        if (a2 & ~1ull) return err(EINVAL);
        flush_decoded();
        return 0;
    case 261: { // prlimit64
        if (a2) {
            uint64_t lim[2] = {~0ull, ~0ull};
            if (a1 == 3) lim[0] = lim[1] = STACK_SIZE; // RLIMIT_STACK
            memcpy(host(a2, 16, pc), lim, 16);
        }
        return 0;
    }
    case 278: { // getrandom: a fixed sequence
        uint8_t *p = host(a0, a1, pc);
        for (uint64_t i = 0; i < a1; i++) {
            random_state_ = random_state_ * 6364136223846793005ull + 1442695040888963407ull;
            p[i] = static_cast<uint8_t>(random_state_ >> 56);
        }
        return a1;
    }
    case 293: // rseq
        return err(ENOSYS);
    default:
        fprintf(stderr, "tksim: system call %llu is not supported (pc 0x%llx): -ENOSYS\n",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(pc));
        return err(ENOSYS);
    }
}

} // namespace tksim
