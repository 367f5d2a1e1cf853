// sim/guestfs.hpp - the guest's file descriptors and its view of the file
// system.
//
// Descriptors: the guest's numbers are its own, each mapped to a host
// descriptor tksim holds for it.  0, 1 and 2 start as duplicates of tksim's
// own, so the guest may close, dup3 over or redirect them without touching
// the descriptors tksim reports on.  A new descriptor gets the lowest free
// number, as on Linux, below the guest's RLIMIT_NOFILE.
//
// Paths, two modes:
// - no root (the default): the guest sees the host's file system, read-only.
//   Paths resolve as on the host, from the guest's own working directory;
//   the system calls refuse anything that would change the file system
//   with EROFS, as Linux does on a read-only mount (after the checks Linux
//   makes first: ENOENT for a missing file, EEXIST for one that exists).
// - a root (tksim --fs-root DIR): the guest sees DIR as "/" and may create,
//   write, rename and remove there.  Every path is resolved by the kernel,
//   openat2(RESOLVE_IN_ROOT) from DIR: ".." stops at DIR and symbolic links,
//   absolute or relative, resolve inside it, so no path leads outside.  A
//   relative path is resolved as the guest path of its directory (its host
//   path, read from /proc/self/fd, less DIR's) followed by the path, from
//   DIR.  A call that creates or removes a name resolves the directory that
//   holds it so, and then works on that single name in it.
#ifndef TKSIM_GUESTFS_HPP
#define TKSIM_GUESTFS_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace tksim
{

class GuestFs
{
  public:
    static constexpr int64_t CWD = -100; // AT_FDCWD

    GuestFs(); // the standard descriptors; no root; the host's working directory
    ~GuestFs();
    // Before tksim opens a file of its own: standard descriptors (0-2)
    // closed now are taken by /dev/null, so that no file of tksim's gets
    // their numbers, and stay closed for the guest (as under Linux).
    static void reserve_std();
    GuestFs(const GuestFs &) = delete;
    GuestFs &operator=(const GuestFs &) = delete;

    // Makes dir (which must exist) the guest's "/" and working directory;
    // false with a message in *err.
    bool set_root(const std::string &dir, std::string *err);
    // Whether the guest may change the file system (it has a root).
    bool writable() const { return root_fd_ >= 0; }

    // ---- descriptors ----
    // The host descriptor behind guest descriptor gfd, or -1.
    int host(int64_t gfd) const;
    // Gives host descriptor hfd the lowest free guest number >= min and
    // returns it; -EMFILE (hfd closed) when none is below the limit.
    int64_t add(int hfd, int64_t min, bool cloexec);
    int64_t close(int64_t gfd);
    // dup3: newfd becomes a duplicate of oldfd (closing what it was).
    int64_t dup3(int64_t oldfd, int64_t newfd, bool cloexec);
    // FD_CLOEXEC of a guest descriptor (open, or -EBADF).
    int64_t get_cloexec(int64_t gfd) const;
    int64_t set_cloexec(int64_t gfd, bool on);
    uint64_t max_fds = 1024; // the guest's RLIMIT_NOFILE

    // ---- paths ----
    // Opens path, relative to guest directory descriptor dirfd (CWD: the
    // working directory), with host open flags (O_CLOEXEC is added) and
    // mode; a host descriptor or -errno.
    int open(int64_t dirfd, const std::string &path, int flags, unsigned mode);
    // The directory that holds path's last component, opened O_PATH, and
    // that component in *last (trailing slashes kept; "/" for a path of
    // slashes only); a host descriptor or -errno.
    int parent(int64_t dirfd, const std::string &path, std::string *last);
    // The host descriptor dirfd stands for (CWD: the working directory).
    int dir_host(int64_t dirfd) const;
    // Makes host descriptor hfd (a directory the guest opened) the working
    // directory; takes it over.
    int64_t chdir(int hfd);
    // The working directory as the guest sees it, or -errno.
    int64_t getcwd(std::string *out) const;

  private:
    struct Fd {
        int host = -1;
        bool cloexec = false;
    };
    std::vector<Fd> fds_;
    int root_fd_ = -1, cwd_fd_ = -1;
    std::string root_path_; // the root's host path (canonical), "" for "/"

    // the guest path of a directory descriptor (under the root), or -errno
    int64_t guest_dir(int hfd, std::string *out) const;
};

} // namespace tksim

#endif
