// sim/syscall.cpp - the Linux system calls (riscv64, asm-generic numbers)
// tksim answers, and how.
//
// Answers that could differ between runs are fixed, so a run repeats: the
// clocks advance one nanosecond per instruction (and by what the program
// sleeps, without waiting), getrandom gives a fixed sequence, the process
// is pid and tid 1000 with uid and gid 0, uname and the resource limits are
// fixed.  Files are the host's, through sim/guestfs.hpp: read-only unless
// tksim was given --fs-root DIR, inside which the program may also create,
// write, rename and remove.  Where the answer changes the program's path
// through glibc, it is qemu-riscv64's (set_robust_list and rseq are not
// offered; /proc/self/exe is the program).
//
// Answered: files - openat, close, read, write, readv, writev, pread64,
// pwrite64, lseek, fstat, newfstatat, statx, getdents64, faccessat,
// faccessat2, readlinkat, mkdirat, unlinkat, symlinkat, renameat2,
// ftruncate, fsync, fdatasync, pipe2, dup, dup3, fcntl, ioctl (TCGETS,
// TCSETS*, TIOCGWINSZ, FIONREAD, FIOCLEX, FIONCLEX), getcwd, chdir, fchdir,
// umask; memory - brk, mmap (anonymous; private copies of files; shared
// file mappings, the file itself mapped in place, so that reads see it as
// it is now and writes reach it), munmap, mremap, msync, mprotect (checked,
// not enforced), madvise; time -
// clock_gettime, clock_getres, clock_nanosleep, nanosleep, gettimeofday,
// setitimer, getitimer, timer_create, timer_settime, timer_gettime,
// timer_getoverrun, timer_delete (on the clocks above: an expiry raises
// its signal between two instructions); waiting - ppoll, pselect6 (the
// real descriptors, waited on; with none, a sleep), rt_sigsuspend;
// the process - getpid, getppid, gettid, getuid, geteuid, getgid, getegid,
// prlimit64, getrlimit, setrlimit, getrandom, sysinfo, uname, sched_yield,
// rt_sigaction, rt_sigprocmask, sigaltstack (kept: tksim runs no signal
// handler), rt_sigpending, rt_sigtimedwait (a blocked signal raised is
// pending until taken or unblocked), kill, tkill, tgkill (to itself) - a
// signal raised that is not blocked or ignored ends the program as by the
// signal, status 128 + N (with a message when the program has a handler
// for it, and arming a timer for a signal with a handler is unsupported),
// set_tid_address, set_robust_list and rseq
// (-ENOSYS), futex (a single thread: nothing to wait for),
// riscv_flush_icache, exit, exit_group.  Any other call is reported on
// stderr once ("tksim: unsupported system call N (name)") and answered
// -ENOSYS: glibc tries newer calls and falls back on ENOSYS, as it must on
// older kernels.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstdio>
#include <string>

#include "machine.hpp"

namespace tksim
{

const char *syscall_name(uint64_t n); // sim/sysnames.cpp

namespace
{
constexpr uint64_t PAGE = 4096;
constexpr uint64_t PID = 1000;
constexpr int64_t NS = 1000000000;
constexpr uint64_t EPOCH_NS = 1700000000ull * 1000000000ull; // CLOCK_REALTIME at the start

// The guest's open flags, struct flock, dirent64, statx and the AT_* flags
// have the host's layout and values: riscv64 uses asm-generic's, as x86-64
// does, and tksim passes them through.
static_assert(O_DIRECTORY == 0200000 && O_NOFOLLOW == 0400000 && O_DIRECT == 040000 &&
                  O_CLOEXEC == 02000000 && O_PATH == 010000000,
              "the host's open flags are asm-generic's, as the guest's");

uint64_t err(int e)
{
    return static_cast<uint64_t>(-static_cast<int64_t>(e));
}
uint64_t ret(int64_t r) // a host call's result: r, or -errno when r < 0
{
    return r < 0 ? err(errno) : static_cast<uint64_t>(r);
}
uint64_t neg(int64_t r) // a result already -errno or a value
{
    return static_cast<uint64_t>(r);
}
int64_t dirfd_arg(uint64_t a) // the kernel takes an int
{
    return static_cast<int32_t>(a);
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

// the kernel's struct termios (asm-generic: 19 control characters), 36 bytes
struct kernel_termios {
    uint32_t iflag, oflag, cflag, lflag;
    uint8_t line, cc[19];
};
static_assert(sizeof(kernel_termios) == 36, "struct termios of the kernel");

// What the last component of a path is, for the calls that create or
// remove it (Linux's LAST_NORM, LAST_DOT, LAST_DOTDOT, LAST_ROOT).
enum Last { NAME, DOT, DOTDOT, ROOT };
Last last_kind(const std::string &last)
{
    if (last == "/") return ROOT;
    std::string bare = last.substr(0, last.find('/'));
    return bare == "." ? DOT : bare == ".." ? DOTDOT : NAME;
}

// closes a host descriptor when it goes
struct HostFd {
    int fd;
    explicit HostFd(int f) : fd(f) {}
    ~HostFd()
    {
        if (fd >= 0) close(fd);
    }
    HostFd(const HostFd &) = delete;
    HostFd &operator=(const HostFd &) = delete;
};

bool is_regular_or_dir(int fd) // what a read-only mount refuses to write
{
    struct stat st;
    return fstat(fd, &st) == 0 &&
           (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode));
}

} // namespace

uint8_t *Machine::user(uint64_t addr, uint64_t len)
{
    if (len == 0) return base_; // (never written through)
    if (addr >= SPACE || len > SPACE - addr || !range_mapped(addr, len)) throw Efault{};
    return base_ + addr;
}

// A NUL-terminated path in guest memory; false when it is longer than
// PATH_MAX (Efault when it runs into unmapped memory).
bool Machine::guest_path(uint64_t addr, std::string *out)
{
    out->clear();
    for (uint64_t p = addr;; p++) {
        char c = static_cast<char>(*user(p, 1));
        if (!c) return true;
        *out += c;
        if (out->size() >= 4096) return false;
    }
}

bool Machine::range_mapped(uint64_t addr, uint64_t len) const
{
    if (len == 0) return true;
    if (addr >= SPACE || len > SPACE - addr) return false;
    for (uint64_t p = addr / PAGE; p <= (addr + len - 1) / PAGE; p++)
        if (!mapped(p)) return false;
    return true;
}

uint64_t Machine::find_free(uint64_t from, uint64_t len) const
{
    const uint64_t limit = STACK_TOP - STACK_SIZE; // (the stack's reservation is below its top)
    uint64_t need = len / PAGE, run = 0, start = from / PAGE;
    for (uint64_t p = from / PAGE; p < limit / PAGE;) {
        if (run >= need) break;
        if (p % 64 == 0 && p + 64 <= limit / PAGE && map_bits_[p / 64] == 0) {
            run += 64; // a whole free word
            p += 64;
        } else if (mapped(p)) {
            run = 0;
            start = ++p;
        } else {
            run++;
            p++;
        }
    }
    return run >= need && start * PAGE + len < limit ? start * PAGE : NO_ROOM;
}

bool Machine::range_free(uint64_t addr, uint64_t len) const
{
    if (addr >= SPACE || len > SPACE - addr) return false;
    for (uint64_t p = addr / PAGE; p < (addr + len + PAGE - 1) / PAGE; p++)
        if (mapped(p)) return false;
    return true;
}

void Machine::unmap(uint64_t addr, uint64_t len)
{
    uint64_t lo = addr & ~(PAGE - 1), hi = (addr + len + PAGE - 1) & ~(PAGE - 1);
    if (hi <= lo) return;
    // a fresh inaccessible reservation in place: the contents go
    mmap(base_ + lo, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
         -1, 0);
    for (uint64_t p = lo / PAGE; p < hi / PAGE; p++) map_bits_[p / 64] &= ~(1ull << (p % 64));
    if (!file_maps_.empty()) forget_file_maps(lo, hi);
    flush_decoded();
}

namespace
{
// A guest access to a shared file mapping past the file's end: the host's
// SIGBUS, which on Linux is the program's (and ends it, as the program has
// no handler tksim would run).  Installed with the first file mapping.
uint8_t *guest_base;
void on_sigbus(int sig, siginfo_t *si, void *)
{
    auto *a = static_cast<uint8_t *>(si->si_addr);
    if (a < guest_base || a >= guest_base + Machine::SPACE) {
        signal(sig, SIG_DFL); // tksim's own: the fault again, now fatal
        return;
    }
    static const char msg[] = "tksim: the program touched a shared file mapping past the file's "
                              "end: it ends as by SIGBUS (exit status 135)\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    _exit(128 + SIGBUS);
}
} // namespace

int64_t Machine::map_file(uint64_t at, uint64_t len, int fd, uint64_t off, int host_flags)
{
    if (!guest_base) {
        guest_base = base_;
        struct sigaction sa = {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGBUS, &sa, nullptr);
    }
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (own < 0) return -errno;
    if (mmap(base_ + at, len, PROT_READ | PROT_WRITE, host_flags | MAP_FIXED, fd,
             static_cast<off_t>(off)) == MAP_FAILED) {
        int e = errno;
        close(own);
        return -e;
    }
    file_maps_[at] = FileMap{at + len, own, off, host_flags};
    return 0;
}

const std::pair<const uint64_t, Machine::FileMap> *Machine::file_map_at(uint64_t addr) const
{
    auto it = file_maps_.upper_bound(addr);
    if (it == file_maps_.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &*it : nullptr;
}

void Machine::forget_file_maps(uint64_t lo, uint64_t hi)
{
    auto it = file_maps_.upper_bound(lo);
    if (it != file_maps_.begin() && std::prev(it)->second.end > lo) --it;
    while (it != file_maps_.end() && it->first < hi) {
        uint64_t start = it->first;
        FileMap f = it->second;
        it = file_maps_.erase(it);
        // what is left of it below lo and above hi stays, each piece with
        // a descriptor of its own
        bool below = start<lo, above = f.end> hi;
        if (below) file_maps_[start] = FileMap{lo, f.fd, f.off, f.host_flags};
        if (above) {
            int fd = below ? fcntl(f.fd, F_DUPFD_CLOEXEC, 3) : f.fd;
            it = file_maps_.emplace(hi, FileMap{f.end, fd, f.off + (hi - start), f.host_flags})
                     .first;
            ++it;
        }
        if (!below && !above) close(f.fd);
    }
}

uint64_t Machine::clock_ns(int clock) const
{
    if (clock == 2 || clock == 3) return instret_; // the process's and thread's CPU time
    return EPOCH_NS + instret_ + slept_ns_;
}

uint64_t Machine::do_mmap(uint64_t addr, uint64_t len, int prot, int flags, int fd, uint64_t off)
{
    if (len == 0 || (off & (PAGE - 1)) || (flags & 3) == 0 || (prot & ~7)) return err(EINVAL);
    len = (len + PAGE - 1) & ~(PAGE - 1);
    int hfd = -1, host_flags = MAP_PRIVATE;
    bool shared = false; // a file mapped MAP_SHARED (or MAP_SHARED_VALIDATE)
    if (!(flags & MAP_ANONYMOUS)) {
        if ((hfd = fs_.host(fd)) < 0) return err(EBADF);
        struct stat st;
        if (fstat(hfd, &st) != 0 || !S_ISREG(st.st_mode)) return err(ENODEV);
        // as Linux: the descriptor must be open for reading, and for
        // writing too to map it shared and writable
        int fl = fcntl(hfd, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY) return err(EACCES);
        if ((flags & 3) != MAP_PRIVATE) {
            shared = true;
            if ((fl & O_ACCMODE) == O_RDWR)
                host_flags = MAP_SHARED;
            else if (prot & PROT_WRITE)
                return err(EACCES);
        }
    }
    uint64_t at;
    if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
        if ((addr & (PAGE - 1)) || addr >= SPACE || len > SPACE - addr) return err(EINVAL);
        if ((flags & MAP_FIXED_NOREPLACE) && !(flags & MAP_FIXED) && !range_free(addr, len))
            return err(EEXIST);
        at = addr;
    } else {
        // first fit from where the last one went, then from the start
        // again (space unmapped since is used again)
        at = find_free(mmap_next_, len);
        if (at == NO_ROOM) at = find_free(MMAP_BASE, len);
        if (at == NO_ROOM) return err(ENOMEM);
        mmap_next_ = at + len + PAGE; // a hole between mappings
    }
    if (at + len >= STACK_TOP - STACK_SIZE && !(flags & MAP_FIXED)) return err(ENOMEM);
    // What is not mapped reads as zeros (unmap() leaves fresh pages), so
    // only a fixed mapping over mapped pages has contents to drop; the
    // pages are not written, so a large reservation costs the host
    // nothing until the program touches it.
    if (flags & MAP_FIXED) unmap(at, len);
    if (!map(at, len)) return err(ENOMEM);
    if (shared) { // the file itself, in place
        if (int64_t e = map_file(at, len, hfd, off, host_flags)) {
            unmap(at, len);
            return neg(e);
        }
    } else if (hfd >= 0) {
        ssize_t got = pread(hfd, base_ + at, len, static_cast<off_t>(off)); // private: a copy
        if (got < 0) return err(errno);
    }
    flush_decoded();
    return at;
}

uint64_t Machine::do_mremap(uint64_t old, uint64_t old_len, uint64_t len, int flags, uint64_t to)
{
    if ((old & (PAGE - 1)) || len == 0 || (flags & ~3) || ((flags & MREMAP_FIXED) && !(flags & 1)))
        return err(EINVAL);
    old_len = (old_len + PAGE - 1) & ~(PAGE - 1);
    len = (len + PAGE - 1) & ~(PAGE - 1);
    if (len <= old_len && !(flags & MREMAP_FIXED)) { // (Linux unmaps the tail, mapped or not)
        unmap(old + len, old_len - len);
        return old;
    }
    if (old_len == 0 || !range_mapped(old, old_len)) return err(EFAULT);
    // a shared file mapping stays one: its new pages are the file's too
    const auto *fm = file_map_at(old);
    bool file = fm && old + old_len <= fm->second.end;
    FileMap f = file ? fm->second : FileMap{};
    uint64_t file_off = file ? f.off + (old - fm->first) : 0;
    if (flags & MREMAP_FIXED) {
        if ((to & (PAGE - 1)) || to >= SPACE || len > SPACE - to ||
            (to < old + old_len && old < to + len))
            return err(EINVAL);
    } else if (range_free(old + old_len, len - old_len) &&
               old + len < STACK_TOP - STACK_SIZE) {                // grows in place
        if (!map(old + old_len, len - old_len)) return err(ENOMEM); // (free: zeros)
        if (file) {
            if (int64_t e = map_file(old + old_len, len - old_len, f.fd, file_off + old_len,
                                     f.host_flags)) {
                unmap(old + old_len, len - old_len);
                return neg(e);
            }
        }
        flush_decoded();
        return old;
    } else if (!(flags & MREMAP_MAYMOVE)) {
        return err(ENOMEM);
    }
    uint64_t at =
        flags & MREMAP_FIXED ? to : do_mmap(0, len, 3, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (flags & MREMAP_FIXED) {
        unmap(to, len); // (zeros from here)
        if (!map(to, len)) return err(ENOMEM);
    } else if (static_cast<int64_t>(at) < 0) {
        return at;
    }
    if (file) {
        if (int64_t e = map_file(at, len, f.fd, file_off, f.host_flags)) {
            unmap(at, len);
            return neg(e);
        }
    } else {
        memcpy(base_ + at, base_ + old, std::min(len, old_len));
    }
    unmap(old, old_len);
    return at;
}

uint64_t Machine::syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                          uint64_t a4, uint64_t a5)
{
    syscalls++;
    try {
        switch (n) {
        case 17 ... 83:
        case 88:
        case 166:
        case 276:
        case 291:
        case 439:
            return file_syscall(n, a0, a1, a2, a3, a4, a5);
        case 214 ... 216:
        case 222:
        case 226:
        case 227:
        case 233:
            return memory_syscall(n, a0, a1, a2, a3, a4, a5);
        case 93: // exit
        case 94: // exit_group
            exited_ = true;
            exit_code_ = static_cast<int>(a0 & 0xff);
            return 0;
        case 96: // set_tid_address
            return PID;
        case 98: // futex: one thread, nothing to wait for
            return 0;
        case 99:  // set_robust_list: not offered (as qemu-riscv64 answers; glibc does without)
        case 293: // rseq: likewise
            return err(ENOSYS);
        case 101:   // nanosleep
        case 115: { // clock_nanosleep: the clocks run on by the time asked; no waiting
            int clock = n == 101 ? 0 : static_cast<int>(a0);
            uint64_t req = n == 101 ? a0 : a2, flags = n == 101 ? 0 : a1;
            if (clock != 0 && clock != 1 && clock != 2 && clock != 7 && clock != 11)
                return err(clock >= 4 && clock <= 6 ? EOPNOTSUPP : EINVAL);
            int64_t ts[2];
            memcpy(ts, user(req, 16), 16);
            if (ts[0] < 0 || ts[1] < 0 || ts[1] >= NS) return err(EINVAL);
            uint64_t want = static_cast<uint64_t>(ts[0]) * NS + static_cast<uint64_t>(ts[1]);
            if (flags & 1) { // TIMER_ABSTIME
                uint64_t now = clock_ns(clock);
                want = want > now ? want - now : 0;
            }
            if (clock != 2) slept_ns_ += want; // (CPU time does not pass while asleep)
            rearm(); // (a timer that expired meanwhile acts before the next instruction)
            return 0;
        }
        case 113:   // clock_gettime
        case 114: { // clock_getres
            int clock = static_cast<int>(a0);
            if (clock < 0 || clock > 11 || clock == 10) return err(EINVAL);
            uint64_t ns = n == 113 ? clock_ns(clock) : 1;
            if (a1) {
                uint64_t ts[2] = {ns / NS, ns % NS};
                memcpy(user(a1, 16), ts, 16);
            }
            return 0;
        }
        case 169: { // gettimeofday
            uint64_t ns = clock_ns(0);
            if (a0) {
                uint64_t tv[2] = {ns / NS, ns % NS / 1000};
                memcpy(user(a0, 16), tv, 16);
            }
            if (a1) memset(user(a1, 8), 0, 8); // struct timezone: UTC
            return 0;
        }
        case 124: // sched_yield
            return 0;
        case 129:   // kill
        case 130:   // tkill
        case 131: { // tgkill: to itself only; the program ends as by the signal
            uint64_t target = n == 131 ? a1 : a0, sig = n == 131 ? a2 : a1;
            if (n == 131 && a0 != PID) return err(ESRCH);
            if (target != PID && !(n == 129 && (target == 0 || static_cast<int64_t>(target) == -1)))
                return err(ESRCH);
            if (sig > 64) return err(EINVAL);
            if (sig == 0) return 0;
            raise(sig);
            return 0;
        }
        case 132: { // sigaltstack: kept, never used
            uint64_t old[3] = {altstack_[0], altstack_[1], altstack_[2]};
            if (a0) {
                uint64_t ss[3];
                memcpy(ss, user(a0, 24), 24);
                if ((ss[1] & 0xffffffffu) & ~2u) return err(EINVAL);
                if (!(ss[1] & 2) && ss[2] < 2048) return err(ENOMEM); // MINSIGSTKSZ
                altstack_[0] = ss[0];
                altstack_[1] = ss[1] & 0xffffffffu;
                altstack_[2] = ss[2];
            }
            if (a1) memcpy(user(a1, 24), old, 24);
            return 0;
        }
        case 134: { // rt_sigaction: kept, so a program reads back what it set
            if (a3 != 8 || a0 < 1 || a0 > 64) return err(EINVAL);
            if (a1 && (a0 == 9 || a0 == 19)) return err(EINVAL); // SIGKILL, SIGSTOP
            uint64_t old[3] = {sigactions_[a0][0], sigactions_[a0][1], sigactions_[a0][2]};
            if (a1) memcpy(sigactions_[a0], user(a1, 24), 24);
            if (a2) memcpy(user(a2, 24), old, 24);
            return 0;
        }
        case 135: { // rt_sigprocmask
            if (a3 != 8) return err(EINVAL);
            uint64_t old = sigmask_;
            if (a1) {
                uint64_t set;
                memcpy(&set, user(a1, 8), 8);
                if (a0 == 0)
                    sigmask_ |= set; // SIG_BLOCK
                else if (a0 == 1)
                    sigmask_ &= ~set; // SIG_UNBLOCK
                else if (a0 == 2)
                    sigmask_ = set; // SIG_SETMASK
                else
                    return err(EINVAL);
                sigmask_ &= ~((1ull << (9 - 1)) | (1ull << (19 - 1))); // never SIGKILL, SIGSTOP
            }
            if (a2) memcpy(user(a2, 8), &old, 8);
            // a signal pending and now unblocked acts at once
            for (uint64_t sig = 1; sig <= 64 && (pending_ & ~sigmask_); sig++)
                if (pending_ & ~sigmask_ & (1ull << (sig - 1))) {
                    pending_ &= ~(1ull << (sig - 1));
                    raise(sig);
                }
            return 0;
        }
        case 136: { // rt_sigpending
            if (a1 > 8) return err(EINVAL);
            memcpy(user(a0, a1), &pending_, a1);
            return 0;
        }
        case 133: { // rt_sigsuspend(mask, size): until a timer's signal ends the program
            if (a1 != 8) return err(EINVAL);
            uint64_t old = sigmask_, mask;
            memcpy(&mask, user(a0, 8), 8);
            sigmask_ = mask & ~((1ull << (9 - 1)) | (1ull << (19 - 1)));
            for (uint64_t sig = 1; sig <= 64 && !exited_; sig++)
                if (pending_ & ~sigmask_ & (1ull << (sig - 1))) {
                    pending_ &= ~(1ull << (sig - 1));
                    raise(sig);
                }
            bool woke = exited_ || wait_for_signal();
            sigmask_ = old;
            return woke ? err(EINTR) : unsupported(n);
        }
        case 137: { // rt_sigtimedwait(set, info, timeout, size): a timer's signal, the clocks run
                    // on
            if (a3 != 8) return err(EINVAL);
            uint64_t set;
            memcpy(&set, user(a0, 8), 8);
            set &= ~((1ull << (9 - 1)) | (1ull << (19 - 1)));
            uint64_t timeout = ~0ull;
            if (a2) {
                int64_t ts[2];
                memcpy(ts, user(a2, 16), 16);
                if (ts[0] < 0 || ts[1] < 0 || ts[1] >= NS) return err(EINVAL);
                timeout = static_cast<uint64_t>(ts[0]) * NS + static_cast<uint64_t>(ts[1]);
            }
            // (the signals waited for count as blocked meanwhile, as on Linux)
            uint64_t old = sigmask_;
            sigmask_ |= set;
            uint64_t got = 0;
            for (;;) {
                if (pending_ & set) {
                    got = static_cast<uint64_t>(__builtin_ctzll(pending_ & set)) + 1;
                    pending_ &= ~(1ull << (got - 1));
                    break;
                }
                // the next expiry of a wall-clock timer raising one of them
                uint64_t wake = ~0ull;
                for (const Timer &t : timers_)
                    if (t.used && t.value && t.sig && (set >> (t.sig - 1) & 1) && t.clock != 2 &&
                        t.clock != 3)
                        wake = std::min(wake, time_left(t));
                if (wake == ~0ull && timeout == ~0ull) { // for ever
                    sigmask_ = old;
                    return unsupported(n);
                }
                if (timeout < wake) {
                    slept_ns_ += timeout;
                    break;
                }
                slept_ns_ += wake;
                if (timeout != ~0ull) timeout -= wake;
                fire_due();
                if (exited_) break;
            }
            sigmask_ = old;
            rearm();
            if (!got) return exited_ ? 0 : err(EAGAIN);
            if (a1) {
                int32_t info[32] = {}; // siginfo_t: signo, errno, code
                info[0] = static_cast<int32_t>(got);
                info[2] = got == 14 || got == 26 || got == 27 ? 0x80 : -2; // SI_KERNEL, SI_TIMER
                memcpy(user(a1, sizeof info), info, sizeof info);
            }
            return got;
        }
        case 102: // getitimer
        case 103: // setitimer
        case 107: // timer_create
        case 108: // timer_gettime
        case 109: // timer_getoverrun
        case 110: // timer_settime
        case 111: // timer_delete
            return timer_syscall(n, a0, a1, a2, a3);
        case 160: { // uname
            char u[6][65] = {};
            strcpy(u[0], "Linux");
            strcpy(u[1], "tksim");
            strcpy(u[2], "6.1.0");
            strcpy(u[3], "#1");
            strcpy(u[4], "riscv64");
            strcpy(u[5], "(none)");
            memcpy(user(a0, sizeof u), u, sizeof u);
            return 0;
        }
        case 172: // getpid
        case 178: // gettid
            return PID;
        case 173: // getppid
            return 1;
        case 174: // getuid
        case 175: // geteuid
        case 176: // getgid
        case 177: // getegid
            return 0;
        case 163:   // getrlimit
        case 164:   // setrlimit
        case 261: { // prlimit64(pid, resource, new, old): new is read, then old written
            uint64_t res = n == 261 ? a1 : a0;
            uint64_t new_at = n == 261 ? a2 : n == 164 ? a1 : 0;
            uint64_t old_at = n == 261 ? a3 : n == 163 ? a1 : 0;
            if (n == 261 && a0 != 0 && a0 != PID) return err(ESRCH);
            if (res >= 16) return err(EINVAL);
            uint64_t old[2] = {rlimits_[res][0], rlimits_[res][1]};
            if (new_at) {
                uint64_t lim[2];
                memcpy(lim, user(new_at, 16), 16);
                if (lim[0] > lim[1]) return err(EINVAL);
                if (res == 7 && lim[1] > (1u << 20)) return err(EPERM); // fs.nr_open
                rlimits_[res][0] = lim[0];
                rlimits_[res][1] = lim[1];
                if (res == 7) fs_.max_fds = lim[0];
            }
            if (old_at) memcpy(user(old_at, 16), old, 16);
            return 0;
        }
        case 153: { // times: the program's CPU time is its instructions (a nanosecond each)
            const uint64_t tick = NS / 100;
            if (a0) {
                uint64_t t[4] = {instret_ / tick, 0, 0, 0}; // utime, stime, cutime, cstime
                memcpy(user(a0, sizeof t), t, sizeof t);
            }
            return (instret_ + slept_ns_) / tick; // (ticks since the program started)
        }
        case 165: { // getrusage(who, usage): self or thread (the one thread), or children (none)
            int64_t who = static_cast<int32_t>(a0);
            if (who != 0 && who != 1 && who != -1) return err(EINVAL);
            uint64_t ru[18] = {}; // struct rusage: two timevals, then 14 longs
            if (who != -1) {
                ru[0] = instret_ / NS;
                ru[1] = instret_ % NS / 1000;
                ru[4] = 4096; // ru_maxrss (KiB): a token figure, never 0
            }
            memcpy(user(a1, sizeof ru), ru, sizeof ru);
            return 0;
        }
        case 122: // sched_setaffinity: the one hart
            return 0;
        case 123: { // sched_getaffinity(pid, len, mask): CPU 0; the bytes written
            if (a1 < 8 || (a1 & 7)) return err(EINVAL);
            uint64_t one = 1;
            memset(user(a2, a1), 0, a1);
            memcpy(user(a2, 8), &one, 8);
            return 8;
        }
        case 140: // setpriority
            return 0;
        case 141: // getpriority: 20 - nice, nice 0
            return 20;
        case 154: // setpgid
            return 0;
        case 155: // getpgid
        case 156: // getsid
            return PID;
        case 157: // setsid: already a group leader
            return err(EPERM);
        case 158: // getgroups: no supplementary groups
            return 0;
        case 167: {         // prctl: the thread's name, and dumpability; the rest refused
            if (a0 == 15) { // PR_SET_NAME
                memset(thread_name_, 0, sizeof thread_name_);
                const uint8_t *p = user(a1, 1);
                for (size_t k = 0; k + 1 < sizeof thread_name_; k++) {
                    p = user(a1 + k, 1);
                    if (!*p) break;
                    thread_name_[k] = static_cast<char>(*p);
                }
                return 0;
            }
            if (a0 == 16) { // PR_GET_NAME
                memcpy(user(a1, sizeof thread_name_), thread_name_, sizeof thread_name_);
                return 0;
            }
            if (a0 == 3) return 1;                         // PR_GET_DUMPABLE
            if (a0 == 4) return a1 <= 1 ? 0 : err(EINVAL); // PR_SET_DUMPABLE
            return err(EINVAL);
        }
        case 228: // mlock
        case 229: // munlock
            return range_mapped(a0 & ~(PAGE - 1), a1 + (a0 & (PAGE - 1))) ? 0 : err(ENOMEM);
        case 230: // mlockall
        case 231: // munlockall
            return 0;
        case 179: { // sysinfo: the host's (qsort sizes its buffer by the memory size)
            struct sysinfo si;
            if (::sysinfo(&si) != 0) return err(errno);
            memcpy(user(a0, sizeof si), &si, sizeof si);
            return 0;
        }
        case 259: // riscv_flush_icache(start, end, flags): all of it, in this one hart
            if (a2 & ~1ull) return err(EINVAL);
            flush_decoded();
            return 0;
        case 278: { // getrandom: a fixed sequence
            if (a2 & ~7ull) return err(EINVAL);
            uint8_t *p = user(a0, a1);
            for (uint64_t i = 0; i < a1; i++) {
                random_state_ = random_state_ * 6364136223846793005ull + 1442695040888963407ull;
                p[i] = static_cast<uint8_t>(random_state_ >> 56);
            }
            return a1;
        }
        default:
            return unsupported(n);
        }
    } catch (const Efault &) {
        return err(EFAULT);
    }
}

uint64_t Machine::memory_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                                 uint64_t a4, uint64_t a5)
{
    switch (n) {
    case 214: { // brk: 0 (or anything below the start) asks where it is
        if (a0 < brk_start_) return brk_;
        uint64_t top = (a0 + PAGE - 1) & ~(PAGE - 1), old_top = (brk_ + PAGE - 1) & ~(PAGE - 1);
        if (top >= MMAP_BASE) return brk_;
        if (top > old_top) {
            if (!range_free(old_top, top - old_top) || !map(old_top, top - old_top)) return brk_;
        } else if (top < old_top) {
            unmap(top, old_top - top); // grown again later, the pages read as zero
        }
        brk_ = a0;
        return brk_;
    }
    case 215: // munmap
        if ((a0 & (PAGE - 1)) || a1 == 0 || a0 >= SPACE || a1 > SPACE - a0) return err(EINVAL);
        unmap(a0, a1);
        return 0;
    case 216: // mremap
        return do_mremap(a0, a1, a2, static_cast<int>(a3), a4);
    case 222: // mmap
        return do_mmap(a0, a1, static_cast<int>(a2), static_cast<int>(a3),
                       static_cast<int>(static_cast<int32_t>(a4)), a5);
    case 226: { // mprotect: checked; pages stay readable, writable and executable
        if ((a0 & (PAGE - 1)) || (a2 & ~(7ull | PROT_GROWSDOWN | PROT_GROWSUP))) return err(EINVAL);
        uint64_t len = (a1 + PAGE - 1) & ~(PAGE - 1);
        if (!range_mapped(a0, len)) return err(ENOMEM);
        // a shared mapping of a file open read-only may not become writable
        if ((a2 & PROT_WRITE) && !file_maps_.empty() && len)
            for (uint64_t p = a0; p < a0 + len; p += PAGE) {
                const auto *fm = file_map_at(p);
                if (fm && fm->second.host_flags == MAP_PRIVATE) return err(EACCES);
            }
        return 0;
    }
    case 227: { // msync(addr, len, flags): the host's, on the same pages
        if ((a0 & (PAGE - 1)) || (a2 & ~7ull) || ((a2 & MS_ASYNC) && (a2 & MS_SYNC)))
            return err(EINVAL);
        uint64_t len = (a1 + PAGE - 1) & ~(PAGE - 1);
        if (!range_mapped(a0, len)) return err(ENOMEM);
        return len ? ret(msync(base_ + a0, len, static_cast<int>(a2))) : 0;
    }
    case 233: { // madvise: what drops pages zeroes them; the rest are hints
        if (a0 & (PAGE - 1)) return err(EINVAL);
        bool known = a2 <= 4 || (a2 >= 8 && a2 <= 23) || a2 == 100 || a2 == 101;
        if (!known) return err(EINVAL);
        uint64_t len = (a1 + PAGE - 1) & ~(PAGE - 1);
        if (!range_mapped(a0, len)) return err(ENOMEM);
        if (a2 == MADV_DONTNEED || a2 == MADV_FREE || a2 == MADV_REMOVE) {
            if (len) madvise(base_ + a0, len, MADV_DONTNEED);
        }
        return 0;
    }
    }
    return unsupported(n);
}

uint64_t Machine::file_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                               uint64_t a4, uint64_t a5)
{
    int fd = fs_.host(static_cast<int32_t>(a0)); // for the calls on a descriptor
    std::string path, last;
    // path argument a (guest address) read, or the error returned
#define PATH_ARG(a)                                                                                \
    do {                                                                                           \
        if (!guest_path((a), &path)) return err(ENAMETOOLONG);                                     \
    } while (0)
    // linkat's and renameat2's two paths (a1 from directory a0, a3 from a2):
    // the directories that hold their last components (in path and last,
    // *to_last); 0 or -errno
    auto two_parents = [&](HostFd &from, HostFd &to, std::string *to_last) -> int64_t {
        std::string to_path;
        if (!guest_path(a1, &path) || !guest_path(a3, &to_path)) return -ENAMETOOLONG;
        if ((from.fd = fs_.parent(dirfd_arg(a0), path, &last)) < 0) return from.fd;
        if ((to.fd = fs_.parent(dirfd_arg(a2), to_path, to_last)) < 0) return to.fd;
        return 0;
    };
    switch (n) {
    case 17: { // getcwd: the length, with the NUL
        std::string cwd;
        if (int64_t e = fs_.getcwd(&cwd)) return neg(e);
        if (cwd.size() + 1 > a1) return err(ERANGE);
        memcpy(user(a0, cwd.size() + 1), cwd.c_str(), cwd.size() + 1);
        return cwd.size() + 1;
    }
    case 23: // dup
        if (fd < 0) return err(EBADF);
        return neg(fs_.add(fcntl(fd, F_DUPFD_CLOEXEC, 3), 0, false));
    case 24: // dup3
        if (a2 & ~static_cast<uint64_t>(O_CLOEXEC)) return err(EINVAL);
        if (a0 == a1) return err(EINVAL);
        return neg(fs_.dup3(static_cast<int32_t>(a0), static_cast<int32_t>(a1), a2 & O_CLOEXEC));
    case 25: { // fcntl
        if (fd < 0) return err(EBADF);
        switch (a1) {
        case F_DUPFD:
        case F_DUPFD_CLOEXEC:
            if (a2 >= fs_.max_fds) return err(EINVAL);
            return neg(fs_.add(fcntl(fd, F_DUPFD_CLOEXEC, 3), static_cast<int64_t>(a2),
                               a1 == F_DUPFD_CLOEXEC));
        case F_GETFD:
            return neg(fs_.get_cloexec(static_cast<int32_t>(a0)));
        case F_SETFD:
            return neg(fs_.set_cloexec(static_cast<int32_t>(a0), a2 & FD_CLOEXEC));
        case F_GETFL:
            return ret(fcntl(fd, F_GETFL));
        case F_SETFL:
            return ret(fcntl(fd, F_SETFL, static_cast<int>(a2)));
        case F_GETLK:
        case F_SETLK:
        case F_SETLKW:
        case F_OFD_GETLK:
        case F_OFD_SETLK:
        case F_OFD_SETLKW: { // struct flock: the same 32 bytes on both
            struct flock fl;
            static_assert(sizeof fl == 32, "struct flock of asm-generic");
            memcpy(&fl, user(a2, sizeof fl), sizeof fl);
            if (fcntl(fd, static_cast<int>(a1), &fl) != 0) return err(errno);
            memcpy(user(a2, sizeof fl), &fl, sizeof fl);
            return 0;
        }
        case F_GETPIPE_SZ:
        case F_SETPIPE_SZ:
            return ret(fcntl(fd, static_cast<int>(a1), static_cast<int>(a2)));
        }
        return err(EINVAL);
    }
    case 29: { // ioctl: terminal queries and settings, answered by the real descriptor
        if (fd < 0) return err(EBADF);
        switch (a1) {
        case TCGETS: {
            kernel_termios t;
            if (ioctl(fd, TCGETS, &t) != 0) return err(errno);
            memcpy(user(a2, sizeof t), &t, sizeof t);
            return 0;
        }
        case TCSETS:
        case TCSETSW:
        case TCSETSF: {
            kernel_termios t;
            memcpy(&t, user(a2, sizeof t), sizeof t);
            return ioctl(fd, a1, &t) == 0 ? 0 : err(errno);
        }
        case TIOCGWINSZ: {
            struct winsize w;
            if (ioctl(fd, TIOCGWINSZ, &w) != 0) return err(errno);
            memcpy(user(a2, sizeof w), &w, sizeof w);
            return 0;
        }
        case FIONREAD: {
            int v;
            if (ioctl(fd, FIONREAD, &v) != 0) return err(errno);
            memcpy(user(a2, 4), &v, 4);
            return 0;
        }
        case FIOCLEX:
        case FIONCLEX:
            return neg(fs_.set_cloexec(static_cast<int32_t>(a0), a1 == FIOCLEX));
        }
        return err(ENOTTY);
    }
    case 34: { // mkdirat
        PATH_ARG(a1);
        HostFd dir(fs_.parent(dirfd_arg(a0), path, &last));
        if (dir.fd < 0) return neg(dir.fd);
        if (last_kind(last) != NAME) return err(EEXIST);
        if (!fs_.writable()) {
            struct stat st;
            return fstatat(dir.fd, last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? err(EEXIST)
                                                                                : err(EROFS);
        }
        return ret(mkdirat(dir.fd, last.c_str(), static_cast<mode_t>(a2)));
    }
    case 35: { // unlinkat
        if (a2 & ~static_cast<uint64_t>(AT_REMOVEDIR)) return err(EINVAL);
        PATH_ARG(a1);
        HostFd dir(fs_.parent(dirfd_arg(a0), path, &last));
        if (dir.fd < 0) return neg(dir.fd);
        bool rmdir = a2 & AT_REMOVEDIR;
        switch (last_kind(last)) {
        case DOT:
            return err(rmdir ? EINVAL : EISDIR);
        case DOTDOT:
            return err(rmdir ? ENOTEMPTY : EISDIR);
        case ROOT:
            return err(rmdir ? EBUSY : EISDIR);
        case NAME:
            break;
        }
        if (!fs_.writable()) return err(EROFS); // (before the name is looked up, as Linux)
        return ret(unlinkat(dir.fd, last.c_str(), static_cast<int>(a2)));
    }
    case 36: { // symlinkat(target, newdirfd, linkpath)
        std::string target;
        if (!guest_path(a0, &target)) return err(ENAMETOOLONG);
        PATH_ARG(a2);
        HostFd dir(fs_.parent(dirfd_arg(a1), path, &last));
        if (dir.fd < 0) return neg(dir.fd);
        if (last_kind(last) != NAME) return err(EEXIST);
        if (target.empty()) return err(ENOENT);
        if (!fs_.writable()) {
            struct stat st;
            return fstatat(dir.fd, last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? err(EEXIST)
                                                                                : err(EROFS);
        }
        return ret(symlinkat(target.c_str(), dir.fd, last.c_str())); // resolved in the root later
    }
    case 46: // ftruncate
        if (fd < 0) return err(EBADF);
        return ret(ftruncate(fd, static_cast<off_t>(a1)));
    case 45: { // truncate(path, length)
        PATH_ARG(a0);
        HostFd f(fs_.open(GuestFs::CWD, path, O_PATH, 0));
        if (f.fd < 0) return neg(f.fd);
        if (!fs_.writable()) return err(EROFS);
        HostFd w(fs_.open(GuestFs::CWD, path, O_WRONLY, 0));
        if (w.fd < 0) return neg(w.fd);
        return ret(ftruncate(w.fd, static_cast<off_t>(a1)));
    }
    case 43:   // statfs(path, buf)
    case 44: { // fstatfs(fd, buf): the host's, of the file system that holds it
        struct statfs sf;
        int h = fd;
        HostFd f(-1);
        if (n == 43) {
            PATH_ARG(a0);
            f.fd = fs_.open(GuestFs::CWD, path, O_PATH, 0);
            if (f.fd < 0) return neg(f.fd);
            h = f.fd;
        } else if (fd < 0) {
            return err(EBADF);
        }
        if (fstatfs(h, &sf) != 0) return err(errno);
        if (!fs_.writable()) sf.f_flags |= ST_RDONLY;
        static_assert(sizeof sf == 120, "struct statfs: asm-generic's 64-bit layout, as riscv64's");
        memcpy(user(a1, sizeof sf), &sf, sizeof sf);
        return 0;
    }
    case 37: { // linkat(olddirfd, oldpath, newdirfd, newpath, flags)
        if (a4 & ~static_cast<uint64_t>(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)) return err(EINVAL);
        std::string to_last;
        HostFd from_dir(-1), to_dir(-1);
        if (int64_t e = two_parents(from_dir, to_dir, &to_last)) return neg(e);
        if (last_kind(to_last) != NAME) return err(EEXIST);
        if (!fs_.writable()) return err(EROFS);
        return ret(linkat(from_dir.fd, last.c_str(), to_dir.fd, to_last.c_str(),
                          static_cast<int>(a4 & AT_SYMLINK_FOLLOW)));
    }
    case 52: // fchmod
        if (fd < 0) return err(EBADF);
        if (!fs_.writable()) return err(EROFS);
        return ret(fchmod(fd, static_cast<mode_t>(a1 & 07777)));
    case 53: { // fchmodat(dirfd, path, mode)
        PATH_ARG(a1);
        HostFd dir(fs_.parent(dirfd_arg(a0), path, &last));
        if (dir.fd < 0) return neg(dir.fd);
        struct stat st;
        if (last_kind(last) == NAME && fstatat(dir.fd, last.c_str(), &st, 0) != 0)
            return err(errno);
        if (!fs_.writable()) return err(EROFS);
        if (last_kind(last) != NAME) { // ".", "..", "/": the directory itself
            HostFd d(fs_.open(dirfd_arg(a0), path, O_RDONLY | O_DIRECTORY, 0));
            if (d.fd < 0) return neg(d.fd);
            return ret(fchmod(d.fd, static_cast<mode_t>(a2 & 07777)));
        }
        return ret(fchmodat(dir.fd, last.c_str(), static_cast<mode_t>(a2 & 07777), 0));
    }
    case 88: { // utimensat(dirfd, path, times, flags): path NULL is dirfd itself
        if (a3 & ~static_cast<uint64_t>(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) return err(EINVAL);
        struct timespec ts[2], *tp = nullptr;
        if (a2) {
            memcpy(ts, user(a2, sizeof ts), sizeof ts);
            tp = ts;
        }
        if (a1 == 0) {
            if (fd < 0) return err(EBADF);
            if (!fs_.writable()) return err(EROFS);
            return ret(futimens(fd, tp));
        }
        PATH_ARG(a1);
        HostFd f(
            fs_.open(dirfd_arg(a0), path, O_PATH | (a3 & AT_SYMLINK_NOFOLLOW ? O_NOFOLLOW : 0), 0));
        if (f.fd < 0) return neg(f.fd);
        if (!fs_.writable()) return err(EROFS);
        HostFd dir(fs_.parent(dirfd_arg(a0), path, &last));
        if (dir.fd < 0) return neg(dir.fd);
        if (last_kind(last) != NAME) return ret(utimensat(f.fd, "", tp, AT_EMPTY_PATH));
        return ret(utimensat(dir.fd, last.c_str(), tp, static_cast<int>(a3 & AT_SYMLINK_NOFOLLOW)));
    }
    case 73: { // ppoll(fds, nfds, timeout, sigmask, size): the real descriptors, waited on
        if (a1 > fs_.max_fds) return err(EINVAL);
        std::vector<struct pollfd> p(a1);
        if (a1) memcpy(p.data(), user(a0, a1 * sizeof(struct pollfd)), a1 * sizeof(struct pollfd));
        std::vector<int> guest_fd(a1);
        for (size_t k = 0; k < p.size(); k++) {
            guest_fd[k] = p[k].fd;
            if (p[k].fd >= 0 && (p[k].fd = fs_.host(p[k].fd)) < 0) p[k].fd = -2; // (POLLNVAL)
        }
        struct timespec t, *tp = nullptr;
        if (a2) {
            memcpy(&t, user(a2, sizeof t), sizeof t);
            if (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= NS) return err(EINVAL);
            tp = &t;
        }
        if (std::all_of(guest_fd.begin(), guest_fd.end(), [](int g) { return g < 0; })) {
            uint64_t mask = sigmask_; // (pause() is ppoll with nothing to wait for)
            if (a3) {
                if (a4 != 8) return err(EINVAL);
                memcpy(&mask, user(a3, 8), 8);
            }
            uint64_t want =
                a2 ? static_cast<uint64_t>(t.tv_sec) * NS + static_cast<uint64_t>(t.tv_nsec) : 0;
            return idle(n, a2, want, mask);
        }
        // a descriptor that is not open answers POLLNVAL at once
        int64_t nval = 0;
        for (struct pollfd &q : p)
            if (q.fd == -2) {
                q.fd = -1; // (the host passes it over)
                nval++;
            }
        struct timespec zero = {0, 0};
        int64_t r = ::ppoll(p.data(), p.size(), nval ? &zero : tp, nullptr);
        if (r < 0) return err(errno);
        for (size_t k = 0; k < p.size(); k++) {
            if (guest_fd[k] >= 0 && p[k].fd == -1) p[k].revents = POLLNVAL;
            p[k].fd = guest_fd[k];
        }
        r += nval;
        if (a1) memcpy(user(a0, a1 * sizeof(struct pollfd)), p.data(), a1 * sizeof(struct pollfd));
        return static_cast<uint64_t>(r);
    }
    case 72: { // pselect6(nfds, readfds, writefds, exceptfds, timeout, sigmask): as ppoll
        int64_t nfds = static_cast<int32_t>(a0);
        if (nfds < 0) return err(EINVAL);
        nfds = std::min<int64_t>(nfds, static_cast<int64_t>(fs_.max_fds));
        uint64_t words = (static_cast<uint64_t>(nfds) + 63) / 64;
        std::vector<uint64_t> sets[3];
        const uint64_t at[3] = {a1, a2, a3};
        for (int k = 0; k < 3; k++) {
            sets[k].assign(words, 0);
            if (at[k] && words) memcpy(sets[k].data(), user(at[k], words * 8), words * 8);
        }
        struct timespec t = {0, 0};
        if (a4) {
            memcpy(&t, user(a4, sizeof t), sizeof t);
            if (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= NS) return err(EINVAL);
        }
        uint64_t mask = sigmask_;
        if (a5) { // {const sigset_t *, size_t}: the mask while it waits
            uint64_t sm[2];
            memcpy(sm, user(a5, 16), 16);
            if (sm[0]) {
                if (sm[1] != 8) return err(EINVAL);
                memcpy(&mask, user(sm[0], 8), 8);
            }
        }
        // the descriptors asked about, each a pollfd (Linux's own mapping)
        std::vector<struct pollfd> p;
        std::vector<int> guest_fd;
        for (int64_t g = 0; g < nfds; g++) {
            short ev = 0;
            if (sets[0][g / 64] >> (g % 64) & 1) ev |= POLLIN;
            if (sets[1][g / 64] >> (g % 64) & 1) ev |= POLLOUT;
            if (sets[2][g / 64] >> (g % 64) & 1) ev |= POLLPRI;
            if (!ev) continue;
            int h = fs_.host(g);
            if (h < 0) return err(EBADF);
            p.push_back(pollfd{h, ev, 0});
            guest_fd.push_back(static_cast<int>(g));
        }
        uint64_t want = static_cast<uint64_t>(t.tv_sec) * NS + static_cast<uint64_t>(t.tv_nsec);
        if (p.empty()) return idle(n, a4, want, mask); // (a sleep)
        int64_t r = ::ppoll(p.data(), p.size(), a4 ? &t : nullptr, nullptr);
        if (r < 0) return err(errno);
        for (int k = 0; k < 3; k++) std::fill(sets[k].begin(), sets[k].end(), 0);
        int64_t bits = 0;
        for (size_t k = 0; k < p.size(); k++) {
            int g = guest_fd[k];
            short re = p[k].revents, ev = p[k].events;
            bool ready[3] = {(ev & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR)),
                             (ev & POLLOUT) && (re & (POLLOUT | POLLERR)),
                             (ev & POLLPRI) && (re & POLLPRI)};
            for (int s = 0; s < 3; s++)
                if (ready[s]) {
                    sets[s][g / 64] |= 1ull << (g % 64);
                    bits++;
                }
        }
        for (int k = 0; k < 3; k++)
            if (at[k] && words) memcpy(user(at[k], words * 8), sets[k].data(), words * 8);
        if (a4 && bits == 0) { // timed out: the clocks run on by the timeout
            slept_ns_ += want;
            rearm();
            struct timespec zero = {0, 0};
            memcpy(user(a4, sizeof zero), &zero, sizeof zero);
        }
        return static_cast<uint64_t>(bits);
    }
    case 48:    // faccessat(dirfd, path, mode)
    case 439: { // faccessat2(dirfd, path, mode, flags)
        int flags = n == 439 ? static_cast<int>(a3) : 0;
        if ((a2 & ~7ull) || (flags & ~(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)))
            return err(EINVAL);
        PATH_ARG(a1);
        int h;
        if (path.empty() && (flags & AT_EMPTY_PATH)) {
            if ((h = fs_.dir_host(dirfd_arg(a0))) < 0) return err(EBADF);
            h = fcntl(h, F_DUPFD_CLOEXEC, 3);
        } else {
            h = fs_.open(dirfd_arg(a0), path,
                         O_PATH | (flags & AT_SYMLINK_NOFOLLOW ? O_NOFOLLOW : 0), 0);
        }
        HostFd f(h);
        if (f.fd < 0) return neg(f.fd);
        // a read-only mount refuses W_OK before it looks at the permissions
        if ((a2 & W_OK) && !fs_.writable() && is_regular_or_dir(f.fd)) return err(EROFS);
        return ::syscall(SYS_faccessat2, f.fd, "", static_cast<int>(a2),
                         AT_EMPTY_PATH | (flags & AT_EACCESS)) == 0
                   ? 0
                   : err(errno);
    }
    case 49:   // chdir
    case 50: { // fchdir
        int h;
        if (n == 49) {
            PATH_ARG(a0);
            h = fs_.open(GuestFs::CWD, path, O_PATH | O_DIRECTORY, 0);
        } else {
            if (fd < 0) return err(EBADF);
            h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        }
        if (h < 0) return neg(h);
        return neg(fs_.chdir(h));
    }
    case 56: { // openat
        PATH_ARG(a1);
        int flags = static_cast<int>(a2);
        bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_TRUNC | O_CREAT)) ||
                      (flags & O_TMPFILE) == O_TMPFILE;
        int h;
        if (path == "/proc/self/exe" && !writes)
            h = ::open(exe_path_.c_str(), flags | O_CLOEXEC);
        else if (writes && !fs_.writable()) {
            // as a read-only mount answers: the file's own errors first
            HostFd f(fs_.open(dirfd_arg(a0), path, O_PATH | (flags & O_NOFOLLOW), 0));
            if (f.fd < 0) {
                if (f.fd != -ENOENT || !(flags & O_CREAT)) return neg(f.fd);
                HostFd dir(fs_.parent(dirfd_arg(a0), path, &last));
                return dir.fd < 0 ? neg(dir.fd) : err(EROFS);
            }
            struct stat st;
            if (fstat(f.fd, &st) != 0) return err(errno);
            if ((flags & O_CREAT) && (flags & O_EXCL)) return err(EEXIST);
            bool modifies = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
            if ((flags & O_TMPFILE) == O_TMPFILE) return err(EROFS);
            if (S_ISDIR(st.st_mode) && modifies) return err(EISDIR);
            if (modifies && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) return err(EROFS);
            // read-only after all (O_CREAT of a file that exists), or a device, a FIFO
            h = fs_.open(dirfd_arg(a0), path, flags & ~(O_CREAT | O_EXCL), 0);
        } else
            h = fs_.open(dirfd_arg(a0), path, flags, static_cast<unsigned>(a3));
        if (h < 0) return neg(h);
        return neg(fs_.add(h, 0, flags & O_CLOEXEC));
    }
    case 57: // close
        return neg(fs_.close(static_cast<int32_t>(a0)));
    case 59: { // pipe2
        if (a1 & ~static_cast<uint64_t>(O_CLOEXEC | O_NONBLOCK | O_DIRECT)) return err(EINVAL);
        int p[2];
        user(a0, 8);
        if (pipe2(p, static_cast<int>(a1) | O_CLOEXEC) != 0) return err(errno);
        int64_t r = fs_.add(p[0], 0, a1 & O_CLOEXEC);
        if (r < 0) {
            close(p[1]);
            return neg(r);
        }
        int64_t w = fs_.add(p[1], 0, a1 & O_CLOEXEC);
        if (w < 0) {
            fs_.close(r);
            return neg(w);
        }
        int32_t g[2] = {static_cast<int32_t>(r), static_cast<int32_t>(w)};
        memcpy(user(a0, 8), g, 8);
        return 0;
    }
    case 61: // getdents64: struct linux_dirent64 is the same on both
        if (fd < 0) return err(EBADF);
        return ret(::syscall(SYS_getdents64, fd, user(a1, a2), a2));
    case 62: // lseek
        if (fd < 0) return err(EBADF);
        return ret(lseek(fd, static_cast<off_t>(a1), static_cast<int>(a2)));
    case 63: // read
    case 64: // write
        if (fd < 0) return err(EBADF);
        if (a2 == 0) return ret(n == 63 ? read(fd, nullptr, 0) : write(fd, nullptr, 0));
        return ret(n == 63 ? read(fd, user(a1, a2), a2) : write(fd, user(a1, a2), a2));
    case 65:   // readv
    case 66: { // writev
        if (fd < 0) return err(EBADF);
        if (a2 > 1024) return err(EINVAL);
        std::vector<iovec> iov(a2);
        for (uint64_t i = 0; i < a2; i++) {
            uint64_t v[2];
            memcpy(v, user(a1 + 16 * i, 16), 16);
            iov[i] = iovec{user(v[0], v[1]), v[1]};
        }
        int cnt = static_cast<int>(a2);
        return ret(n == 65 ? readv(fd, iov.data(), cnt) : writev(fd, iov.data(), cnt));
    }
    case 67: // pread64
    case 68: // pwrite64
        if (fd < 0) return err(EBADF);
        return ret(n == 67 ? pread(fd, user(a1, a2), a2, static_cast<off_t>(a3))
                           : pwrite(fd, user(a1, a2), a2, static_cast<off_t>(a3)));
    case 78: { // readlinkat: /proc/self/exe is the program
        PATH_ARG(a1);
        if (static_cast<int64_t>(a3) <= 0) return err(EINVAL);
        if (path == "/proc/self/exe") {
            uint64_t len = std::min<uint64_t>(exe_path_.size(), a3);
            memcpy(user(a2, len), exe_path_.data(), len);
            return len;
        }
        HostFd f(fs_.open(dirfd_arg(a0), path, O_PATH | O_NOFOLLOW, 0));
        if (f.fd < 0) return neg(f.fd);
        struct stat st;
        if (fstat(f.fd, &st) != 0) return err(errno);
        if (!S_ISLNK(st.st_mode)) return err(EINVAL);
        std::vector<char> buf(a3 < 4096 ? a3 : 4096);
        ssize_t len = readlinkat(f.fd, "", buf.data(), buf.size());
        if (len < 0) return err(errno);
        memcpy(user(a2, static_cast<uint64_t>(len)), buf.data(), static_cast<size_t>(len));
        return static_cast<uint64_t>(len);
    }
    case 79:    // newfstatat
    case 291: { // statx(dirfd, path, flags, mask, buf)
        int flags = static_cast<int>(n == 79 ? a3 : a2);
        int known = AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT |
                    (n == 291 ? AT_STATX_SYNC_TYPE : 0);
        if (flags & ~known) return err(EINVAL);
        if (n == 291 && (a3 & STATX__RESERVED)) return err(EINVAL);
        PATH_ARG(a1);
        int h;
        if (path.empty() && (flags & AT_EMPTY_PATH)) {
            if ((h = fs_.dir_host(dirfd_arg(a0))) < 0) return err(EBADF);
            h = fcntl(h, F_DUPFD_CLOEXEC, 3);
        } else {
            h = fs_.open(dirfd_arg(a0), path,
                         O_PATH | (flags & AT_SYMLINK_NOFOLLOW ? O_NOFOLLOW : 0), 0);
        }
        HostFd f(h);
        if (f.fd < 0) return neg(f.fd);
        if (n == 291) {
            struct statx stx;
            static_assert(sizeof stx == 256, "struct statx");
            if (statx(f.fd, "", AT_EMPTY_PATH | (flags & AT_STATX_SYNC_TYPE),
                      static_cast<unsigned>(a3), &stx) != 0)
                return err(errno);
            memcpy(user(a4, sizeof stx), &stx, sizeof stx);
            return 0;
        }
        struct stat st;
        if (fstat(f.fd, &st) != 0) return err(errno);
        guest_stat g = convert(st);
        memcpy(user(a2, sizeof g), &g, sizeof g);
        return 0;
    }
    case 80: { // fstat
        if (fd < 0) return err(EBADF);
        struct stat st;
        if (fstat(fd, &st) != 0) return err(errno);
        guest_stat g = convert(st);
        memcpy(user(a1, sizeof g), &g, sizeof g);
        return 0;
    }
    case 81: // sync
        return 0;
    case 82: // fsync
    case 83: // fdatasync
        if (fd < 0) return err(EBADF);
        return ret(n == 82 ? fsync(fd) : fdatasync(fd));
    case 166: // umask: the guest's is tksim's (which creates no file while the guest runs)
        return umask(static_cast<mode_t>(a0 & 0777));
    case 276: { // renameat2(olddirfd, oldpath, newdirfd, newpath, flags)
        if ((a4 & ~7ull) || ((a4 & 1) && (a4 & 2))) return err(EINVAL);
        std::string to_last;
        HostFd from_dir(-1), to_dir(-1);
        if (int64_t e = two_parents(from_dir, to_dir, &to_last)) return neg(e);
        if (last_kind(last) != NAME || last_kind(to_last) != NAME) return err(EBUSY);
        if (!fs_.writable()) return err(EROFS); // (before the names are looked up, as Linux)
        return ret(::syscall(SYS_renameat2, from_dir.fd, last.c_str(), to_dir.fd, to_last.c_str(),
                             static_cast<unsigned>(a4)));
    }
    }
#undef PATH_ARG
    return unsupported(n); // (a number in file_syscall's ranges it does not answer)
}

void Machine::raise(uint64_t sig)
{
    uint64_t bit = 1ull << (sig - 1);
    if ((sigmask_ & bit) && sig != 9 && sig != 19) {
        pending_ |= bit; // (taken by rt_sigtimedwait, or acts when unblocked)
        return;
    }
    uint64_t handler = sigactions_[sig][0];
    bool ignored_by_default = sig == 17 || sig == 18 || sig == 23 || sig == 28;
    if ((handler == 1 || (handler == 0 && ignored_by_default)) && sig != 9 && sig != 19)
        return; // SIG_IGN, or ignored by default
    if (handler > 1)
        fprintf(stderr,
                "tksim: signal %llu sent to the program's own handler: tksim does not "
                "deliver signals; the program ends as by the signal\n",
                static_cast<unsigned long long>(sig));
    exited_ = true;
    exit_code_ = 128 + static_cast<int>(sig);
}

uint64_t Machine::time_left(const Timer &t) const
{
    uint64_t now = clock_ns(t.clock);
    return !t.value ? 0 : t.value > now ? t.value - now : 0;
}

void Machine::rearm()
{
    stop_at_ = max_insns_;
    for (const Timer &t : timers_)
        if (t.used && t.value && t.sig) stop_at_ = std::min(stop_at_, instret_ + time_left(t));
}

void Machine::fire_due()
{
    for (Timer &t : timers_) {
        if (!t.used || !t.value || !t.sig || exited_) continue;
        uint64_t now = clock_ns(t.clock);
        if (now < t.value) continue;
        if (t.interval) { // the next expiry after now; the ones missed are overruns
            uint64_t missed = (now - t.value) / t.interval;
            t.value += (missed + 1) * t.interval;
            t.overrun = static_cast<int>(std::min<uint64_t>(missed, INT32_MAX));
        } else {
            t.value = 0;
            t.overrun = 0;
        }
        raise(static_cast<uint64_t>(t.sig));
    }
}

bool Machine::at_stop()
{
    fire_due();
    rearm();
    return exited_ || instret_ >= max_insns_;
}

uint64_t Machine::next_wake() const
{
    uint64_t wake = ~0ull;
    for (const Timer &t : timers_) {
        if (!t.used || !t.value || !t.sig || t.clock == 2 || t.clock == 3) continue;
        uint64_t handler = sigactions_[t.sig][0];
        bool ignored = handler == 1 ||
                       (handler == 0 && (t.sig == 17 || t.sig == 18 || t.sig == 23 || t.sig == 28));
        if (ignored || (sigmask_ >> (t.sig - 1) & 1)) continue;
        wake = std::min(wake, time_left(t));
    }
    return wake;
}

bool Machine::wait_for_signal()
{
    uint64_t wake = next_wake();
    if (wake == ~0ull) return false;
    slept_ns_ += wake;
    fire_due(); // (ends the program: the signal neither blocked nor ignored)
    rearm();
    return true;
}

uint64_t Machine::idle(uint64_t n, uint64_t ts_at, uint64_t want, uint64_t mask)
{
    uint64_t old = sigmask_;
    sigmask_ = mask & ~((1ull << (9 - 1)) | (1ull << (19 - 1)));
    uint64_t wake = next_wake();
    sigmask_ = old;
    if (!ts_at && wake == ~0ull) return unsupported(n); // (it would wait for ever)
    if (!ts_at || wake < want) { // a timer's signal ends it (and the program)
        slept_ns_ += wake;
        sigmask_ = mask;
        fire_due();
        sigmask_ = old;
        rearm();
        return err(EINTR);
    }
    slept_ns_ += want;
    rearm();
    struct timespec zero = {0, 0}; // (the time left)
    memcpy(user(ts_at, sizeof zero), &zero, sizeof zero);
    return 0;
}

uint64_t Machine::timer_syscall(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3)
{
    // a timer's setting: {interval, value}, timevals (µs) for the
    // itimers, timespecs for the POSIX timers
    auto get_setting = [&](uint64_t at, bool usec, uint64_t *interval, uint64_t *value) {
        int64_t v[4];
        memcpy(v, user(at, sizeof v), sizeof v);
        int64_t unit = usec ? 1000 : 1, top = usec ? 1000000 : NS;
        for (int k = 0; k < 4; k += 2)
            if (v[k] < 0 || v[k + 1] < 0 || v[k + 1] >= top) return false;
        *interval = static_cast<uint64_t>(v[0]) * NS + static_cast<uint64_t>(v[1] * unit);
        *value = static_cast<uint64_t>(v[2]) * NS + static_cast<uint64_t>(v[3] * unit);
        return true;
    };
    auto put_setting = [&](uint64_t at, bool usec, const Timer &t) {
        uint64_t left = time_left(t);
        if (t.value && left == 0) left = 1; // (expired, not yet raised: still armed)
        if (usec && left) left = (left + 999) / 1000 * 1000; // (Linux rounds up to a µs)
        uint64_t unit = usec ? 1000 : 1;
        int64_t v[4] = {static_cast<int64_t>(t.interval / NS),
                        static_cast<int64_t>(t.interval % NS / unit),
                        static_cast<int64_t>(left / NS), static_cast<int64_t>(left % NS / unit)};
        memcpy(user(at, sizeof v), v, sizeof v);
    };
    // a POSIX timer by id, or nullptr
    auto posix = [&](uint64_t id) -> Timer * {
        int64_t k = static_cast<int32_t>(id);
        if (k < 0 || static_cast<uint64_t>(k) + 3 >= timers_.size()) return nullptr;
        Timer &t = timers_[static_cast<size_t>(k) + 3];
        return t.used ? &t : nullptr;
    };
    switch (n) {
    case 102:   // getitimer(which, value)
    case 103: { // setitimer(which, new, old): ITIMER_REAL, _VIRTUAL, _PROF
        if (a0 > 2) return err(EINVAL);
        Timer &t = timers_[a0];
        if (n == 102) {
            put_setting(a1, true, t);
            return 0;
        }
        uint64_t interval = 0, value = 0; // (no new setting: disarmed, as Linux does)
        if (a1 && !get_setting(a1, true, &interval, &value)) return err(EINVAL);
        static const int sig[3] = {14, 26, 27};               // SIGALRM, SIGVTALRM, SIGPROF
        if (value && catches(sig[a0])) return unsupported(n); // (no handler runs)
        if (a2) put_setting(a2, true, t);
        t = Timer{true, a0 == 0 ? 0 : 2, sig[a0], 0, 0, 0};
        if (value) {
            t.value = clock_ns(t.clock) + value;
            t.interval = interval;
        }
        rearm();
        return 0;
    }
    case 107: { // timer_create(clock, sigevent, id)
        int64_t clock = static_cast<int32_t>(a0);
        if (clock < 0) return unsupported(n); // (another process's or thread's CPU clock)
        if (clock == 4 || clock == 5 || clock == 6) return err(EOPNOTSUPP); // no timers on them
        if (clock > 11 || clock == 10) return err(EINVAL);
        Timer t{true, static_cast<int>(clock), 14, 0, 0, 0};
        if (a1) { // struct sigevent: value, signo, notify, thread id
            int32_t ev[4];
            memcpy(ev, user(a1 + 8, sizeof ev), sizeof ev);
            int notify = ev[1];
            if (notify == 1) // SIGEV_NONE
                t.sig = 0;
            else if (notify == 0 || (notify == 4 && ev[2] == static_cast<int32_t>(PID))) {
                if (ev[0] < 1 || ev[0] > 64) return err(EINVAL);
                t.sig = ev[0]; // SIGEV_SIGNAL, SIGEV_THREAD_ID to the one thread
            } else {
                return err(EINVAL);
            }
        }
        size_t k = 3;
        while (k < timers_.size() && timers_[k].used) k++;
        if (k == timers_.size()) timers_.emplace_back();
        int32_t id = static_cast<int32_t>(k - 3);
        memcpy(user(a2, 4), &id, 4);
        timers_[k] = t;
        return 0;
    }
    case 108: { // timer_gettime(id, setting)
        Timer *t = posix(a0);
        if (!t) return err(EINVAL);
        Timer now = *t;
        if (!t->sig && t->value && t->interval && clock_ns(t->clock) >= t->value) {
            // (a SIGEV_NONE timer is not raised: its next expiry is worked out)
            uint64_t missed = (clock_ns(t->clock) - t->value) / t->interval;
            now.value = t->value + (missed + 1) * t->interval;
        }
        put_setting(a1, false, now);
        return 0;
    }
    case 109: { // timer_getoverrun(id)
        Timer *t = posix(a0);
        return t ? static_cast<uint64_t>(t->overrun) : err(EINVAL);
    }
    case 110: { // timer_settime(id, flags, new, old)
        Timer *t = posix(a0);
        if (!t) return err(EINVAL);
        if (a1 & ~1ull) return err(EINVAL);
        uint64_t interval, value;
        if (!get_setting(a2, false, &interval, &value)) return err(EINVAL);
        if (value && catches(t->sig)) return unsupported(n); // (no handler runs)
        if (a3) put_setting(a3, false, *t);
        t->value = 0;
        t->interval = 0;
        if (value) {
            uint64_t now = clock_ns(t->clock);
            // TIMER_ABSTIME: the time on its clock (one past is due at once)
            t->value = a1 & 1 ? value : now + value;
            t->interval = interval;
        }
        rearm();
        return 0;
    }
    case 111: { // timer_delete(id)
        Timer *t = posix(a0);
        if (!t) return err(EINVAL);
        *t = Timer{};
        rearm();
        return 0;
    }
    }
    return unsupported(n);
}

uint64_t Machine::unsupported(uint64_t n)
{
    if (reported_.insert(n).second) { // (any 64-bit number: a set, not a table by number)
        fprintf(stderr,
                "tksim: unsupported system call %llu (%s) at pc 0x%llx: the program gets -ENOSYS "
                "(reported once)\n",
                static_cast<unsigned long long>(n), syscall_name(n),
                static_cast<unsigned long long>(pc_));
    }
    return err(ENOSYS);
}

} // namespace tksim
