// sim/sysnames.cpp - the names of riscv64 Linux system calls, by number
// (asm-generic's table as Linux 6.1's headers give it, with riscv_flush_icache
// at 259 and the calls added up to Linux 6.10), for tksim's messages.
#include <cstdint>

namespace tksim
{

const char *syscall_name(uint64_t n)
{
    // clang-format off
    static const char *const names[] = {
        /*   0 */ "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "setxattr",
        /*   6 */ "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
        /*  12 */ "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
        /*  17 */ "getcwd", "lookup_dcookie", "eventfd2", "epoll_create1", "epoll_ctl",
        /*  22 */ "epoll_pwait", "dup", "dup3", "fcntl", "inotify_init1", "inotify_add_watch",
        /*  28 */ "inotify_rm_watch", "ioctl", "ioprio_set", "ioprio_get", "flock", "mknodat",
        /*  34 */ "mkdirat", "unlinkat", "symlinkat", "linkat", nullptr, "umount2", "mount",
        /*  41 */ "pivot_root", "nfsservctl", "statfs", "fstatfs", "truncate", "ftruncate",
        /*  47 */ "fallocate", "faccessat", "chdir", "fchdir", "chroot", "fchmod", "fchmodat",
        /*  54 */ "fchownat", "fchown", "openat", "close", "vhangup", "pipe2", "quotactl",
        /*  61 */ "getdents64", "lseek", "read", "write", "readv", "writev", "pread64", "pwrite64",
        /*  69 */ "preadv", "pwritev", "sendfile", "pselect6", "ppoll", "signalfd4", "vmsplice",
        /*  76 */ "splice", "tee", "readlinkat", "newfstatat", "fstat", "sync", "fsync",
        /*  83 */ "fdatasync", "sync_file_range", "timerfd_create", "timerfd_settime",
        /*  87 */ "timerfd_gettime", "utimensat", "acct", "capget", "capset", "personality", "exit",
        /*  94 */ "exit_group", "waitid", "set_tid_address", "unshare", "futex", "set_robust_list",
        /* 100 */ "get_robust_list", "nanosleep", "getitimer", "setitimer", "kexec_load",
        /* 105 */ "init_module", "delete_module", "timer_create", "timer_gettime",
        /* 109 */ "timer_getoverrun", "timer_settime", "timer_delete", "clock_settime",
        /* 113 */ "clock_gettime", "clock_getres", "clock_nanosleep", "syslog", "ptrace",
        /* 118 */ "sched_setparam", "sched_setscheduler", "sched_getscheduler", "sched_getparam",
        /* 122 */ "sched_setaffinity", "sched_getaffinity", "sched_yield", "sched_get_priority_max",
        /* 126 */ "sched_get_priority_min", "sched_rr_get_interval", "restart_syscall", "kill",
        /* 130 */ "tkill", "tgkill", "sigaltstack", "rt_sigsuspend", "rt_sigaction",
        /* 135 */ "rt_sigprocmask", "rt_sigpending", "rt_sigtimedwait", "rt_sigqueueinfo",
        /* 139 */ "rt_sigreturn", "setpriority", "getpriority", "reboot", "setregid", "setgid",
        /* 145 */ "setreuid", "setuid", "setresuid", "getresuid", "setresgid", "getresgid",
        /* 151 */ "setfsuid", "setfsgid", "times", "setpgid", "getpgid", "getsid", "setsid",
        /* 158 */ "getgroups", "setgroups", "uname", "sethostname", "setdomainname", "getrlimit",
        /* 164 */ "setrlimit", "getrusage", "umask", "prctl", "getcpu", "gettimeofday",
        /* 170 */ "settimeofday", "adjtimex", "getpid", "getppid", "getuid", "geteuid", "getgid",
        /* 177 */ "getegid", "gettid", "sysinfo", "mq_open", "mq_unlink", "mq_timedsend",
        /* 183 */ "mq_timedreceive", "mq_notify", "mq_getsetattr", "msgget", "msgctl", "msgrcv",
        /* 189 */ "msgsnd", "semget", "semctl", "semtimedop", "semop", "shmget", "shmctl", "shmat",
        /* 197 */ "shmdt", "socket", "socketpair", "bind", "listen", "accept", "connect",
        /* 204 */ "getsockname", "getpeername", "sendto", "recvfrom", "setsockopt", "getsockopt",
        /* 210 */ "shutdown", "sendmsg", "recvmsg", "readahead", "brk", "munmap", "mremap",
        /* 217 */ "add_key", "request_key", "keyctl", "clone", "execve", "mmap", "fadvise64",
        /* 224 */ "swapon", "swapoff", "mprotect", "msync", "mlock", "munlock", "mlockall",
        /* 231 */ "munlockall", "mincore", "madvise", "remap_file_pages", "mbind", "get_mempolicy",
        /* 237 */ "set_mempolicy", "migrate_pages", "move_pages", "rt_tgsigqueueinfo",
        /* 241 */ "perf_event_open", "accept4", "recvmmsg", nullptr, nullptr, nullptr, nullptr,
        /* 248 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 257 */ nullptr, "riscv_hwprobe", "riscv_flush_icache", "wait4", "prlimit64",
        /* 262 */ "fanotify_init", "fanotify_mark", "name_to_handle_at", "open_by_handle_at",
        /* 266 */ "clock_adjtime", "syncfs", "setns", "sendmmsg", "process_vm_readv",
        /* 271 */ "process_vm_writev", "kcmp", "finit_module", "sched_setattr", "sched_getattr",
        /* 276 */ "renameat2", "seccomp", "getrandom", "memfd_create", "bpf", "execveat",
        /* 282 */ "userfaultfd", "membarrier", "mlock2", "copy_file_range", "preadv2", "pwritev2",
        /* 288 */ "pkey_mprotect", "pkey_alloc", "pkey_free", "statx", "io_pgetevents", "rseq",
        /* 294 */ "kexec_file_load", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 302 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 311 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 320 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 329 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 338 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 347 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 356 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 365 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 374 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 383 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 392 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 401 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 410 */ nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
        /* 419 */ nullptr, nullptr, nullptr, nullptr, nullptr, "pidfd_send_signal",
        /* 425 */ "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree",
        /* 429 */ "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "pidfd_open", "clone3",
        /* 436 */ "close_range", "openat2", "pidfd_getfd", "faccessat2", "process_madvise",
        /* 441 */ "epoll_pwait2", "mount_setattr", "quotactl_fd", "landlock_create_ruleset",
        /* 445 */ "landlock_add_rule", "landlock_restrict_self", "memfd_secret", "process_mrelease",
        /* 449 */ "futex_waitv", "set_mempolicy_home_node", "cachestat", "fchmodat2",
        /* 453 */ "map_shadow_stack", "futex_wake", "futex_wait", "futex_requeue", "statmount",
        /* 458 */ "listmount", "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules",
        /* 462 */ "mseal",
    };
    // clang-format on
    const char *s = n < sizeof names / sizeof names[0] ? names[n] : nullptr;
    return s ? s : "unknown";
}

} // namespace tksim
