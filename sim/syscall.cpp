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
// umask (a write to a pipe no one reads sends the program SIGPIPE, as
// Linux does); memory - brk, mmap (anonymous; private copies of files;
// shared file mappings, the file itself mapped in place, so that reads see
// it as it is now and writes reach it; a page past the file's end is
// SIGBUS's), munmap, mremap, msync, mprotect (enforced for the program's
// loads and stores: a load needs any of PROT_READ, PROT_WRITE and
// PROT_EXEC, a store PROT_WRITE; instruction fetch needs what a load does,
// and a system call's buffer the same, whichever way it goes), madvise;
// time - clock_gettime, clock_getres, clock_nanosleep, nanosleep,
// gettimeofday, setitimer, getitimer, timer_create, timer_settime,
// timer_gettime, timer_getoverrun, timer_delete (on the clocks above: an
// expiry sends its signal between two instructions); waiting - ppoll,
// pselect6 (the real descriptors, waited on; with none, a sleep),
// rt_sigsuspend, and read on an empty pipe or socket: a timer's signal
// that acts before the wait ends interrupts it; the process - getpid,
// getppid, gettid, getuid, geteuid, getgid, getegid, prlimit64, getrlimit,
// setrlimit, getrandom, sysinfo, uname, sched_yield; signals (the delivery
// itself in sim/signal.cpp) - rt_sigaction, rt_sigprocmask, rt_sigpending,
// rt_sigsuspend, rt_sigtimedwait, rt_sigreturn, sigaltstack, kill, tkill,
// tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo (to itself): a signal sent,
// by these, a timer or a fault, is dropped when ignored, pending while
// blocked, ends the program by its default action (status 128 + N; a
// fault without a handler is tksim's guest fault instead, status 102), or
// enters the program's handler, with the frame Linux builds; a wait it
// interrupts answers -EINTR after the handler (or, with SA_RESTART, read
// is made again), with what Linux leaves (nanosleep's time left);
// set_tid_address, set_robust_list and rseq (-ENOSYS), futex (a single
// thread: nothing to wait for), riscv_flush_icache, exit, exit_group.  Any
// other call is reported on stderr once ("tksim: unsupported system call N
// (name)") and answered -ENOSYS: glibc tries newer calls and falls back on
// ENOSYS, as it must on older kernels.
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

// A protection other than readable and writable (what tksim keeps of one:
// the bits that matter are PROT_READ and PROT_WRITE)
bool restricted(int prot)
{
    return !(prot & PROT_READ) || !(prot & PROT_WRITE);
}

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
        if (!allows(p, false)) return false;
    return true;
}

bool Machine::range_held(uint64_t addr, uint64_t len) const
{
    if (len == 0) return true;
    if (addr >= SPACE || len > SPACE - addr) return false;
    for (uint64_t p = addr / PAGE; p <= (addr + len - 1) / PAGE; p++)
        if (!held(p)) return false;
    return true;
}

uint64_t Machine::find_free(uint64_t from, uint64_t len) const
{
    const uint64_t limit = STACK_TOP - STACK_SIZE; // (the stack's reservation is below its top)
    uint64_t need = len / PAGE, run = 0, start = from / PAGE;
    for (uint64_t p = from / PAGE; p < limit / PAGE;) {
        if (run >= need) break;
        if (p % 64 == 0 && p + 64 <= limit / PAGE && held_[p / 64] == 0) {
            run += 64; // a whole free word
            p += 64;
        } else if (held(p)) {
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
        if (held(p)) return false;
    return true;
}

void Machine::unmap(uint64_t addr, uint64_t len)
{
    uint64_t lo = addr & ~(PAGE - 1), hi = (addr + len + PAGE - 1) & ~(PAGE - 1);
    if (hi <= lo) return;
    // a fresh inaccessible reservation in place: the contents go
    mmap(base_ + lo, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
         -1, 0);
    for (uint64_t p = lo / PAGE; p < hi / PAGE; p++) {
        uint64_t bit = ~(1ull << (p % 64));
        held_[p / 64] &= bit;
        perm_[p / 64 * 2] &= bit;
        perm_[p / 64 * 2 + 1] &= bit;
    }
    clear_prot(lo / PAGE, hi / PAGE);
    if (!file_maps_.empty()) forget_file_maps(lo, hi);
    flush_decoded();
}

namespace
{
// A guest access to a shared file mapping past the file's end that tksim
// did not see coming (the file was made shorter by another process since
// the program's last system call: the pages past its end are withheld
// from the program at each one, check_file_sizes()): the host's SIGBUS,
// which ends the run as the program's would by default.  Installed with
// the first file mapping.
uint8_t *guest_base;
void on_sigbus(int sig, siginfo_t *si, void *)
{
    auto *a = static_cast<uint8_t *>(si->si_addr);
    if (a < guest_base || a >= guest_base + Machine::SPACE) {
        signal(sig, SIG_DFL); // tksim's own: the fault again, now fatal
        return;
    }
    static const char msg[] =
        "tksim: the program touched a shared file mapping past the file's end, the file made "
        "shorter outside the program: tksim cannot deliver this SIGBUS; the program ends as by "
        "SIGBUS (exit status 135)\n";
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
    file_maps_[at] = FileMap{at + len, own, off, host_flags, at + len};
    check_file_sizes();
    return 0;
}

void Machine::check_file_sizes()
{
    for (auto &[start, f] : file_maps_) {
        struct stat st;
        if (fstat(f.fd, &st) != 0) continue;
        uint64_t size = static_cast<uint64_t>(st.st_size);
        uint64_t reach = size > f.off ? (size - f.off + PAGE - 1) & ~(PAGE - 1) : 0;
        uint64_t filled = start + std::min(reach, f.end - start);
        if (filled == f.filled) continue;
        uint64_t lo = std::min(filled, f.filled), hi = std::max(filled, f.filled);
        f.filled = filled;
        set_perm(lo / PAGE, hi / PAGE);
    }
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
        if (below)
            file_maps_[start] = FileMap{lo, f.fd, f.off, f.host_flags, std::min(f.filled, lo)};
        if (above) {
            int fd = below ? fcntl(f.fd, F_DUPFD_CLOEXEC, 3) : f.fd;
            it = file_maps_
                     .emplace(hi, FileMap{f.end, fd, f.off + (hi - start), f.host_flags,
                                          std::max(f.filled, hi)})
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
    if (restricted(prot)) set_prot(at / PAGE, (at + len) / PAGE, prot);
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
    if (old_len == 0 || !range_held(old, old_len)) return err(EFAULT);
    int prot = prot_of(old / PAGE); // (the new pages' too)
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
        if (restricted(prot)) set_prot((old + old_len) / PAGE, (old + len) / PAGE, prot);
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
    if (restricted(prot)) set_prot(at / PAGE, (at + len) / PAGE, prot);
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
            uint64_t req = n == 101 ? a0 : a2, flags = n == 101 ? 0 : a1, rem = n == 101 ? a1 : a3;
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
            if (clock == 2) { // (CPU time does not pass while asleep)
                rearm();
                return 0;
            }
            // a timer's signal that acts before the end cuts the sleep short:
            // -EINTR after its handler, with the time left
            uint64_t t0 = slept_ns_;
            if (wait_for_signal(want)) {
                uint64_t left = want - (slept_ns_ - t0);
                if (rem && !(flags & 1)) {
                    int64_t r[2] = {static_cast<int64_t>(left / NS),
                                    static_cast<int64_t>(left % NS)};
                    memcpy(user(rem, 16), r, 16);
                }
                return err(ERESTART_RESTARTBLOCK);
            }
            slept_ns_ += want;
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
        case 131: { // tgkill: to itself only
            uint64_t target = n == 131 ? a1 : a0, sig = n == 131 ? a2 : a1;
            if (n == 131 && a0 != PID) return err(ESRCH);
            if (target != PID && !(n == 129 && (target == 0 || static_cast<int64_t>(target) == -1)))
                return err(ESRCH);
            if (sig > 64) return err(EINVAL);
            if (sig == 0) return 0;
            send(static_cast<int>(sig),
                 siginfo(static_cast<int>(sig), n == 129 ? SI_USER : SI_TKILL,
                         PID)); // (si_pid; si_uid 0)
            return 0;
        }
        case 138:   // rt_sigqueueinfo(pid, sig, info)
        case 240: { // rt_tgsigqueueinfo(tgid, tid, sig, info): to itself only
            uint64_t sig = n == 138 ? a1 : a2, at = n == 138 ? a2 : a3;
            if (a0 != PID || (n == 240 && a1 != PID)) return err(ESRCH);
            if (sig < 1 || sig > 64) return err(EINVAL);
            SigInfo si;
            memcpy(si.b, user(at, sizeof si.b), sizeof si.b);
            int32_t signo = static_cast<int32_t>(sig);
            memcpy(si.b, &signo, 4); // (the kernel's si_signo is the call's)
            send(signo, si);
            return 0;
        }
        case 132: // sigaltstack
            return neg(set_altstack(a0, a1, regs_[2]));
        case 134: { // rt_sigaction
            if (a3 != 8 || a0 < 1 || a0 > 64) return err(EINVAL);
            if (a1 && (a0 == 9 || a0 == 19)) return err(EINVAL); // SIGKILL, SIGSTOP
            uint64_t old[3] = {sigactions_[a0][0], sigactions_[a0][1], sigactions_[a0][2]};
            if (a1) {
                memcpy(sigactions_[a0], user(a1, 24), 24);
                int sig = static_cast<int>(a0);
                if (ignores(sig)) { // (what is pending of it goes, as on Linux)
                    queued_[sig].clear();
                    pending_ &= ~(1ull << (sig - 1));
                }
            }
            if (a2) memcpy(user(a2, 24), old, 24);
            return 0;
        }
        case 135: { // rt_sigprocmask (a signal pending and now unblocked acts at the call's end)
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
                sigmask_ &= ~UNBLOCKABLE;
            }
            if (a2) memcpy(user(a2, 8), &old, 8);
            return 0;
        }
        case 136: { // rt_sigpending
            if (a1 > 8) return err(EINVAL);
            memcpy(user(a0, a1), &pending_, a1);
            return 0;
        }
        case 133: { // rt_sigsuspend(mask, size): until a signal acts (a timer's, the clocks run on)
            if (a1 != 8) return err(EINVAL);
            uint64_t old = sigmask_, mask;
            memcpy(&mask, user(a0, 8), 8);
            sigmask_ = mask & ~UNBLOCKABLE;
            while (!exited_ && !(pending_ & ~sigmask_))
                if (!wait_for_signal()) {
                    sigmask_ = old;
                    return unsupported(n); // (nothing would end the wait)
                }
            // -EINTR after the handler, which runs with this mask; the old
            // one comes back with its return
            saved_mask_ = old;
            restore_mask_ = true;
            return err(ERESTARTNOHAND);
        }
        case 137: { // rt_sigtimedwait(set, info, timeout, size): a signal of set (a timer's: the
                    // clocks run on)
            if (a3 != 8) return err(EINVAL);
            uint64_t set;
            memcpy(&set, user(a0, 8), 8);
            set &= ~UNBLOCKABLE;
            uint64_t timeout = ~0ull;
            if (a2) {
                int64_t ts[2];
                memcpy(ts, user(a2, 16), 16);
                if (ts[0] < 0 || ts[1] < 0 || ts[1] >= NS) return err(EINVAL);
                timeout = static_cast<uint64_t>(ts[0]) * NS + static_cast<uint64_t>(ts[1]);
            }
            // (the signals waited for count as blocked meanwhile: they are
            // taken, not acted on; any other signal that acts ends the wait
            // with -EINTR, as on Linux)
            uint64_t old = sigmask_;
            sigmask_ |= set;
            int got = 0;
            bool interrupted = false;
            SigInfo info;
            for (;;) {
                if (pending_ & set) {
                    got = next_signal(pending_ & set);
                    info = dequeue(got);
                    break;
                }
                if (exited_ || (pending_ & ~sigmask_)) {
                    interrupted = true;
                    break;
                }
                // the next expiry of a wall-clock timer raising one of them, or
                // a signal that acts
                uint64_t wake = next_wake();
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
            }
            sigmask_ = old;
            rearm();
            if (interrupted) return exited_ ? 0 : err(EINTR);
            if (!got) return err(EAGAIN);
            if (a1) memcpy(user(a1, sizeof info.b), info.b, sizeof info.b);
            return static_cast<uint64_t>(got);
        }
        case 139: // rt_sigreturn
            return sigreturn();
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
            return range_held(a0 & ~(PAGE - 1), a1 + (a0 & (PAGE - 1))) ? 0 : err(ENOMEM);
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
    case 226: { // mprotect: a load needs PROT_READ, PROT_WRITE or PROT_EXEC, a store PROT_WRITE
        if ((a0 & (PAGE - 1)) || (a2 & ~(7ull | PROT_GROWSDOWN | PROT_GROWSUP))) return err(EINVAL);
        uint64_t len = (a1 + PAGE - 1) & ~(PAGE - 1);
        if (!range_held(a0, len)) return err(ENOMEM);
        // a shared mapping of a file open read-only may not become writable
        if ((a2 & PROT_WRITE) && !file_maps_.empty() && len)
            for (uint64_t p = a0; p < a0 + len; p += PAGE) {
                const auto *fm = file_map_at(p);
                if (fm && fm->second.host_flags == MAP_PRIVATE) return err(EACCES);
            }
        set_prot(a0 / PAGE, (a0 + len) / PAGE, static_cast<int>(a2 & 7));
        return 0;
    }
    case 227: { // msync(addr, len, flags): the host's, on the same pages
        if ((a0 & (PAGE - 1)) || (a2 & ~7ull) || ((a2 & MS_ASYNC) && (a2 & MS_SYNC)))
            return err(EINVAL);
        uint64_t len = (a1 + PAGE - 1) & ~(PAGE - 1);
        if (!range_held(a0, len)) return err(ENOMEM);
        return len ? ret(msync(base_ + a0, len, static_cast<int>(a2))) : 0;
    }
    case 233: { // madvise: what drops pages zeroes them; the rest are hints
        if (a0 & (PAGE - 1)) return err(EINVAL);
        bool known = a2 <= 4 || (a2 >= 8 && a2 <= 23) || a2 == 100 || a2 == 101;
        if (!known) return err(EINVAL);
        uint64_t len = (a1 + PAGE - 1) & ~(PAGE - 1);
        if (!range_held(a0, len)) return err(ENOMEM);
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
        uint64_t mask = sigmask_; // (the signals blocked while it waits)
        if (a3) {
            if (a4 != 8) return err(EINVAL);
            memcpy(&mask, user(a3, 8), 8);
        }
        uint64_t want =
            a2 ? static_cast<uint64_t>(t.tv_sec) * NS + static_cast<uint64_t>(t.tv_nsec) : 0;
        if (std::all_of(guest_fd.begin(), guest_fd.end(), [](int g) { return g < 0; }))
            return idle(n, a2, want, mask); // (pause() is ppoll with nothing to wait for)
        // a descriptor that is not open answers POLLNVAL at once
        int64_t nval = 0;
        for (struct pollfd &q : p)
            if (q.fd == -2) {
                q.fd = -1; // (the host passes it over)
                nval++;
            }
        struct timespec zero = {0, 0};
        int64_t r = ::ppoll(p.data(), p.size(), &zero, nullptr);
        if (r == 0 && !nval && (!a2 || want) && wait_interrupted(a2 ? want : ~0ull, mask))
            return err(ERESTARTNOHAND);
        if (r == 0 && !nval) r = ::ppoll(p.data(), p.size(), tp, nullptr);
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
        struct timespec zero = {0, 0};
        int64_t r = ::ppoll(p.data(), p.size(), &zero, nullptr);
        if (r == 0 && (!a4 || want) && wait_interrupted(a4 ? want : ~0ull, mask))
            return err(ERESTARTNOHAND);
        if (r == 0) r = ::ppoll(p.data(), p.size(), a4 ? &t : nullptr, nullptr);
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
        // an empty pipe or socket waits: a timer's signal that acts meanwhile
        // interrupts it (-EINTR, or the read again after the handler with
        // SA_RESTART)
        if (n == 63 && would_block(fd) && interrupted_wait(~0ull)) {
            rearm();
            return err(ERESTARTSYS);
        }
        return n == 63 ? ret(read(fd, user(a1, a2), a2)) : piped(ret(write(fd, user(a1, a2), a2)));
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
        return n == 65 ? ret(readv(fd, iov.data(), cnt)) : piped(ret(writev(fd, iov.data(), cnt)));
    }
    case 67: // pread64
    case 68: // pwrite64
        if (fd < 0) return err(EBADF);
        return n == 67 ? ret(pread(fd, user(a1, a2), a2, static_cast<off_t>(a3)))
                       : piped(ret(pwrite(fd, user(a1, a2), a2, static_cast<off_t>(a3))));
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
    for (size_t k = 0; k < timers_.size() && !exited_; k++) {
        Timer &t = timers_[k];
        if (!t.used || !t.value || !t.sig) continue;
        uint64_t now = clock_ns(t.clock);
        if (now < t.value) continue;
        uint64_t missed = 0;
        if (t.interval) { // the next expiry after now; the ones missed are overruns
            missed = (now - t.value) / t.interval;
            t.value += (missed + 1) * t.interval;
            t.overrun = static_cast<int>(std::min<uint64_t>(missed, INT32_MAX));
        } else {
            t.value = 0;
            t.overrun = 0;
        }
        if (k < 3) { // setitimer's: the kernel's own signal
            send(t.sig, siginfo(t.sig, SI_KERNEL));
            continue;
        }
        // a POSIX timer's: its one siginfo, which counts the expiries while
        // it is pending (si_overrun)
        uint32_t id = static_cast<uint32_t>(k - 3);
        bool queued = false;
        for (SigInfo &q : queued_[t.sig]) {
            int32_t code;
            uint32_t qid, over;
            memcpy(&code, q.b + 8, 4);
            memcpy(&qid, q.b + 16, 4);
            memcpy(&over, q.b + 20, 4);
            if (code == SI_TIMER && qid == id) {
                over = static_cast<uint32_t>(std::min<uint64_t>(over + 1 + missed, INT32_MAX));
                memcpy(q.b + 20, &over, 4);
                queued = true;
            }
        }
        if (!queued)
            send(t.sig, siginfo(t.sig, SI_TIMER,
                                id | static_cast<uint64_t>(static_cast<uint32_t>(t.overrun)) << 32,
                                t.sigval));
    }
}

bool Machine::at_stop()
{
    fire_due();
    bool trap = interrupted_; // (a trap to a handler already, its step to come)
    if (interrupted_) {
        pc_ = resume_pc_;
        interrupted_ = false;
    }
    if (!exited_ && (pending_ & ~sigmask_)) {
        uint64_t at = pc_;
        act_on_signals();
        if (!trap && pc_ != at) {
            trap = true;
            trap_pc_ = at;
        }
    }
    if (trap && !exited_ && instret_ < max_insns_) { // (the next step: the trap to the handler)
        resume_pc_ = pc_;
        pc_ = INTERRUPTED;
        interrupted_ = true;
    }
    rearm();
    return exited_ || instret_ >= max_insns_;
}

uint64_t Machine::next_wake() const
{
    uint64_t wake = ~0ull;
    for (const Timer &t : timers_) {
        if (!t.used || !t.value || !t.sig || t.clock == 2 || t.clock == 3) continue;
        if (ignores(t.sig) || (sigmask_ >> (t.sig - 1) & 1)) continue;
        wake = std::min(wake, time_left(t));
    }
    return wake;
}

bool Machine::wait_for_signal(uint64_t limit)
{
    uint64_t wake = next_wake();
    if (wake == ~0ull || wake >= limit) return false;
    slept_ns_ += wake;
    fire_due(); // (a handler's signal now pending, or the program's end)
    rearm();
    return true;
}

bool Machine::interrupted_wait(uint64_t timeout)
{
    if (pending_ & ~sigmask_) return true; // (one the call's mask lets through)
    return wait_for_signal(timeout);
}

uint64_t Machine::piped(uint64_t r)
{
    // (tksim ignores its own SIGPIPE: the program's is sent instead)
    if (r == err(EPIPE)) send(SIGPIPE, siginfo(SIGPIPE, SI_USER, PID));
    return r;
}

bool Machine::wait_interrupted(uint64_t timeout, uint64_t mask)
{
    uint64_t old = sigmask_;
    sigmask_ = mask & ~UNBLOCKABLE;
    if (interrupted_wait(timeout)) {
        rearm();
        saved_mask_ = old; // (the mask stays for the handler; the old one comes back after)
        restore_mask_ = true;
        return true;
    }
    sigmask_ = old;
    return false;
}

bool Machine::would_block(int fd) const
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return false;
    int fl = fcntl(fd, F_GETFL);
    struct pollfd p = {fd, POLLIN, 0};
    return fl >= 0 && !(fl & O_NONBLOCK) && ::poll(&p, 1, 0) == 0;
}

uint64_t Machine::idle(uint64_t n, uint64_t ts_at, uint64_t want, uint64_t mask)
{
    uint64_t old = sigmask_, t0 = slept_ns_;
    sigmask_ = mask & ~UNBLOCKABLE;
    if (interrupted_wait(ts_at ? want : ~0ull)) {
        rearm();
        if (ts_at) { // (the time left)
            uint64_t left = want - (slept_ns_ - t0);
            struct timespec ts = {static_cast<time_t>(left / NS), static_cast<long>(left % NS)};
            memcpy(user(ts_at, sizeof ts), &ts, sizeof ts);
        }
        saved_mask_ = old; // (the mask stays for the handler; the old one comes back after)
        restore_mask_ = true;
        return err(ERESTARTNOHAND);
    }
    sigmask_ = old;
    if (!ts_at) return unsupported(n); // (it would wait for ever)
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
        static const int sig[3] = {14, 26, 27}; // SIGALRM, SIGVTALRM, SIGPROF
        if (a2) put_setting(a2, true, t);
        t = Timer{true, a0 == 0 ? 0 : 2, sig[a0], 0, 0, 0, 0};
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
        Timer t{true, static_cast<int>(clock), 14, 0, 0, 0, 0};
        if (a1) { // struct sigevent: value, signo, notify, thread id
            int32_t ev[4];
            memcpy(&t.sigval, user(a1, 8), 8);
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
        if (!a1) t.sigval = static_cast<uint32_t>(id); // (si_value's sival_int: the id, as Linux)
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
