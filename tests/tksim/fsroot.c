/* tksim's file system rules (tests/tksim_fs.sh runs this under tksim and
 * compares its output with what the rules say):
 *   fsroot readonly CWD  - no --fs-root: the host's files read, changes
 *                          refused as Linux refuses them on a read-only
 *                          mount (EROFS, or the error Linux checks for
 *                          first); CWD is the working directory tksim
 *                          started in
 *   fsroot escape        - --fs-root ROOT: nothing outside ROOT is reached
 *                          by "..", absolute or relative symbolic links, or
 *                          names made by the program; ROOT holds symlinks
 *                          abs -> /, up -> .., sec -> ../secret and a
 *                          directory d, and ../secret exists outside it
 * Build: riscv64-linux-gnu-gcc -O2 -static -o fsroot fsroot.c */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest.h"

static const char *res(int r)
{
    return r >= 0 ? "ok" : errname(errno);
}
#define SHOW(what, call) printf("%s: %s\n", what, res(call))

static void readonly(const char *cwd)
{
    char buf[64] = {0}, here[4096];
    SHOW("access present R_OK", access("present", R_OK));
    SHOW("access present W_OK", access("present", W_OK));
    SHOW("access dir W_OK", access("dir", W_OK));
    SHOW("access nope F_OK", access("nope", F_OK));
    int fd = open("present", O_RDONLY);
    SHOW("open present read-only", fd);
    printf("read: '%.*s'\n", (int)read(fd, buf, sizeof buf - 1), buf);
    close(fd);
    SHOW("open present write-only", open("present", O_WRONLY));
    SHOW("open present read-write", open("present", O_RDWR));
    SHOW("open present O_TRUNC", open("present", O_RDONLY | O_TRUNC));
    SHOW("open present O_CREAT read-only", open("present", O_CREAT | O_RDONLY, 0644));
    SHOW("open dir O_TRUNC", open("dir", O_RDONLY | O_TRUNC));
    SHOW("open present O_CREAT|O_EXCL", open("present", O_CREAT | O_EXCL | O_WRONLY, 0644));
    SHOW("open new O_CREAT", open("new", O_CREAT | O_WRONLY, 0644));
    SHOW("open nodir/new O_CREAT", open("nodir/new", O_CREAT | O_WRONLY, 0644));
    SHOW("open dir write-only", open("dir", O_WRONLY));
    SHOW("mkdir dir", mkdir("dir", 0755));
    SHOW("mkdir new", mkdir("new", 0755));
    SHOW("unlink present", unlink("present"));
    SHOW("unlink nope", unlink("nope"));
    SHOW("unlink .", unlink("."));
    SHOW("rmdir dir", rmdir("dir"));
    SHOW("rmdir .", rmdir("."));
    SHOW("rename present", rename("present", "moved"));
    SHOW("rename nope", rename("nope", "moved"));
    SHOW("symlink", symlink("present", "link"));
    fd = open("/dev/null", O_WRONLY);
    SHOW("open /dev/null write-only", fd);
    printf("write /dev/null: %zd\n", write(fd, "abcd", 4));
    printf("getcwd is tksim's: %d\n", getcwd(here, sizeof here) && strcmp(here, cwd) == 0);
    SHOW("chdir dir", chdir("dir"));
    SHOW("access ../present", access("../present", R_OK));
}

static void escape(void)
{
    char buf[4096];
    SHOW("open ../secret", open("../secret", O_RDONLY));
    SHOW("open /../secret", open("/../secret", O_RDONLY));
    SHOW("open d/../../secret", open("d/../../secret", O_RDONLY));
    SHOW("open up/secret", open("up/secret", O_RDONLY));
    SHOW("open sec", open("sec", O_RDONLY));
    SHOW("open abs/secret", open("abs/secret", O_RDONLY));
    SHOW("open abs/../../secret", open("abs/../../secret", O_RDONLY));
    SHOW("stat up/secret", stat("up/secret", &(struct stat){0}));
    SHOW("access sec", access("sec", F_OK));
    SHOW("open /proc/self/cwd/../secret", open("/proc/self/cwd/../secret", O_RDONLY));
    printf("getcwd: %s\n", getcwd(buf, sizeof buf));
    SHOW("chdir ..", chdir(".."));
    printf("getcwd: %s\n", getcwd(buf, sizeof buf));
    SHOW("chdir up/d", chdir("up/d"));
    printf("getcwd: %s\n", getcwd(buf, sizeof buf));
    SHOW("open ../../../made O_CREAT", open("../../../made", O_CREAT | O_WRONLY, 0644));
    SHOW("chdir /", chdir("/"));
    SHOW("mkdir up/newdir", mkdir("up/newdir", 0755));
    SHOW("symlink mine -> /", symlink("/", "mine"));
    SHOW("open mine/../secret", open("mine/../secret", O_RDONLY));
    SHOW("open mine/made", open("mine/made", O_RDONLY));
    SHOW("rename made -> ../../moved", rename("made", "../../moved"));
    SHOW("unlink ../secret", unlink("../secret"));
    SHOW("unlink sec (the link)", unlink("sec"));
    SHOW("open up/d/../../escaped O_CREAT", open("up/d/../../escaped", O_CREAT | O_WRONLY, 0644));
    ssize_t n = readlink("abs", buf, sizeof buf);
    printf("readlink abs: '%.*s'\n", (int)(n < 0 ? 0 : n), buf);
    n = readlink("/proc/self/exe", buf, sizeof buf);
    printf("readlink /proc/self/exe ends in /fsroot: %d\n",
           n > 7 && memcmp(buf + n - 7, "/fsroot", 7) == 0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "readonly") == 0)
        readonly(argv[2]);
    else if (argc == 2 && strcmp(argv[1], "escape") == 0)
        escape();
    else {
        fprintf(stderr, "usage: fsroot readonly CWD | fsroot escape\n");
        return 2;
    }
    return 0;
}
