/* src/os/linux/uffd.h - userfaultfd, PAGEMAP_SCAN and madvise constants.
 *
 * Debian 12's linux-libc-dev is 6.1, older than the kernels trapkit runs on.
 * What it lacks is defined here, each with the kernel release that added it;
 * whether the running kernel has it is always probed at run time (probe.c),
 * never inferred from these definitions or from the kernel version.
 */
#ifndef TK_OS_LINUX_UFFD_H
#define TK_OS_LINUX_UFFD_H

#include <linux/userfaultfd.h>
#include <linux/fs.h>
#include <linux/types.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

/* userfaultfd features (UFFDIO_API.features) */
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13) /* Linux 6.4 */
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14) /* Linux 6.6 */
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15) /* Linux 6.7 */
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16) /* Linux 6.8 */
#endif

/* UFFDIO_MOVE (Linux 6.8) */
#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)
struct uffdio_move {
    __u64 dst;
    __u64 src;
    __u64 len;
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#define UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES ((__u64)1 << 1)
    __u64 mode;
    __s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

/* UFFDIO_POISON (Linux 6.6) */
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
#endif

/* PAGEMAP_SCAN on /proc/<pid>/pagemap (Linux 6.7) */
#ifndef PAGEMAP_SCAN
#define PAGE_IS_WPALLOWED (1 << 0)
#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_FILE (1 << 2)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGE_IS_HUGE (1 << 6)
#define PAGE_IS_SOFT_DIRTY (1 << 7) /* Linux 6.7 as well */

struct page_region {
    __u64 start;
    __u64 end;
    __u64 categories;
};

#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)

struct pm_scan_arg {
    __u64 size;
    __u64 flags;
    __u64 start;
    __u64 end;
    __u64 walk_end;
    __u64 vec;
    __u64 vec_len;
    __u64 max_pages;
    __u64 category_inverted;
    __u64 category_mask;
    __u64 category_anyof_mask;
    __u64 return_mask;
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

/* madvise guard regions (Linux 6.13) */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103
#endif

/* pkeys: glibc 2.36 declares pkey_alloc() and friends in <sys/mman.h>. */

#endif
