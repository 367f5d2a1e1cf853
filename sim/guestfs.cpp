// sim/guestfs.cpp - the guest's descriptors and paths (sim/guestfs.hpp).
#include "guestfs.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace tksim
{

namespace
{

// the host path of a descriptor, as /proc/self/fd tells it
bool fd_path(int fd, std::string *out)
{
    char link[64], buf[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, sizeof buf);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof buf)) return false;
    out->assign(buf, static_cast<size_t>(n));
    return true;
}

int neg_errno()
{
    return -errno;
}

} // namespace

namespace
{
unsigned std_closed; // the standard descriptors reserve_std() found closed (bit fd)
} // namespace

void GuestFs::reserve_std()
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        std_closed |= 1u << fd;
        int h = ::open("/dev/null", O_RDWR); // (the lowest free number: fd)
        if (h >= 0 && h != fd) ::close(h);
    }
}

GuestFs::GuestFs()
{
    for (int fd = 0; fd < 3; fd++) {
        int h = std_closed >> fd & 1 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 3);
        fds_.push_back(Fd{h, false}); // -1 where tksim's own is closed: closed for the guest too
    }
    cwd_fd_ = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

GuestFs::~GuestFs()
{
    for (Fd &f : fds_)
        if (f.host >= 0) ::close(f.host);
    if (cwd_fd_ >= 0) ::close(cwd_fd_);
    if (root_fd_ >= 0) ::close(root_fd_);
}

bool GuestFs::set_root(const std::string &dir, std::string *err)
{
    char *real = realpath(dir.c_str(), nullptr);
    int fd = real ? ::open(real, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd < 0) {
        *err = "--fs-root " + dir + ": " + strerror(errno);
        free(real);
        return false;
    }
    root_path_ = strcmp(real, "/") == 0 ? "" : real;
    free(real);
    root_fd_ = fd;
    int cwd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (cwd < 0) {
        *err = std::string("--fs-root: ") + strerror(errno);
        return false;
    }
    if (cwd_fd_ >= 0) ::close(cwd_fd_);
    cwd_fd_ = cwd;
    return true;
}

// ---- descriptors ----

int GuestFs::host(int64_t gfd) const
{
    if (gfd < 0 || static_cast<uint64_t>(gfd) >= fds_.size()) return -1;
    return fds_[static_cast<size_t>(gfd)].host;
}

int64_t GuestFs::add(int hfd, int64_t min, bool cloexec)
{
    uint64_t g = static_cast<uint64_t>(min);
    while (g < fds_.size() && fds_[g].host >= 0) g++;
    if (g >= max_fds) {
        ::close(hfd);
        return -EMFILE;
    }
    if (g >= fds_.size()) fds_.resize(g + 1);
    fds_[g] = Fd{hfd, cloexec};
    return static_cast<int64_t>(g);
}

int64_t GuestFs::close(int64_t gfd)
{
    int h = host(gfd);
    if (h < 0) return -EBADF;
    fds_[static_cast<size_t>(gfd)] = Fd{};
    ::close(h);
    return 0;
}

int64_t GuestFs::dup3(int64_t oldfd, int64_t newfd, bool cloexec)
{
    int h = host(oldfd);
    if (h < 0 || newfd < 0 || static_cast<uint64_t>(newfd) >= max_fds) return -EBADF;
    int d = fcntl(h, F_DUPFD_CLOEXEC, 3);
    if (d < 0) return neg_errno();
    if (host(newfd) >= 0) ::close(host(newfd));
    if (static_cast<uint64_t>(newfd) >= fds_.size()) fds_.resize(static_cast<size_t>(newfd) + 1);
    fds_[static_cast<size_t>(newfd)] = Fd{d, cloexec};
    return newfd;
}

int64_t GuestFs::get_cloexec(int64_t gfd) const
{
    if (host(gfd) < 0) return -EBADF;
    return fds_[static_cast<size_t>(gfd)].cloexec;
}

int64_t GuestFs::set_cloexec(int64_t gfd, bool on)
{
    if (host(gfd) < 0) return -EBADF;
    fds_[static_cast<size_t>(gfd)].cloexec = on;
    return 0;
}

// ---- paths ----

int GuestFs::dir_host(int64_t dirfd) const
{
    return dirfd == CWD ? cwd_fd_ : host(dirfd);
}

int64_t GuestFs::guest_dir(int hfd, std::string *out) const
{
    std::string p;
    if (!fd_path(hfd, &p) || p.empty() || p[0] != '/') return -ENOTDIR; // a pipe, a socket...
    if (p.compare(0, root_path_.size(), root_path_) != 0 ||
        (p.size() > root_path_.size() && p[root_path_.size()] != '/'))
        return -ENOENT; // moved out of the root behind the guest's back
    *out = p.size() == root_path_.size() ? "/" : p.substr(root_path_.size());
    return 0;
}

int GuestFs::open(int64_t dirfd, const std::string &path, int flags, unsigned mode)
{
    if (path.empty()) return -ENOENT;
    flags |= O_CLOEXEC;
    if (!(flags & O_CREAT) && (flags & O_TMPFILE) != O_TMPFILE) mode = 0; // openat2 wants 0
    if (root_fd_ < 0) {
        int base = AT_FDCWD;
        if (path[0] != '/' && (base = dir_host(dirfd)) < 0) return -EBADF;
        int fd = openat(base, path.c_str(), flags, mode);
        return fd < 0 ? neg_errno() : fd;
    }
    std::string full = path;
    if (path[0] != '/') {
        int base = dir_host(dirfd);
        if (base < 0) return -EBADF;
        std::string dir;
        if (int64_t e = guest_dir(base, &dir)) return static_cast<int>(e);
        full = dir + "/" + path;
    }
    open_how how{};
    how.flags = static_cast<uint64_t>(flags);
    how.mode = mode;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, root_fd_, full.c_str(), &how, sizeof how);
    return fd < 0 ? neg_errno() : static_cast<int>(fd);
}

int GuestFs::parent(int64_t dirfd, const std::string &path, std::string *last)
{
    if (path.empty()) return -ENOENT;
    size_t end = path.find_last_not_of('/');
    if (end == std::string::npos) { // "/", "//": the root, which nothing holds
        *last = "/";
        return open(dirfd, "/", O_PATH | O_DIRECTORY, 0);
    }
    size_t slash = path.rfind('/', end);
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    *last = path.substr(slash == std::string::npos ? 0 : slash + 1);
    return open(dirfd, dir, O_PATH | O_DIRECTORY, 0);
}

int64_t GuestFs::chdir(int hfd)
{
    struct stat st;
    if (fstat(hfd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ::close(hfd);
        return -ENOTDIR;
    }
    if (syscall(SYS_faccessat2, hfd, "", X_OK, AT_EMPTY_PATH) != 0) {
        int e = errno;
        ::close(hfd);
        return -e;
    }
    if (cwd_fd_ >= 0) ::close(cwd_fd_);
    cwd_fd_ = hfd;
    return 0;
}

int64_t GuestFs::getcwd(std::string *out) const
{
    struct stat st;
    if (cwd_fd_ < 0 || fstat(cwd_fd_, &st) != 0 || st.st_nlink == 0) return -ENOENT; // removed
    if (root_fd_ >= 0) return guest_dir(cwd_fd_, out);
    return fd_path(cwd_fd_, out) ? 0 : -ENOENT;
}

} // namespace tksim
