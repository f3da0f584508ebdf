/* virt-handler's mount helper (upstream's virt-chroot, reduced to what the handler needs), at
 * /usr/bin/kvts-hostmount in the virt-handler image. It enters the mount namespace of process NSPID (the host's:
 * the handler runs with hostPID and names PID 1, or a host process when PID 1's namespaces are not accessible)
 * and works there, so the mounts land on kubelet's shared pod dir and propagate into the launcher Pods:
 *   kvts-hostmount NSPID bind-ro SRC DST   bind-mount SRC on DST read-only (nosuid, nodev); SRC, DST host paths
 *   kvts-hostmount NSPID umount DST        detach the mount on DST
 * Paths come as separate arguments (never through a shell). Both paths are opened with openat2
 * RESOLVE_NO_SYMLINKS and the mount works on those file descriptors (/proc/self/fd/N), so a symlink planted in
 * the Pod's emptyDir (writable by the launcher) or in an image cannot redirect the mount to another host path.
 * Built static by tools/images/build.sh. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char *what, const char *path) {
  fprintf(stderr, "kvts-hostmount: %s %s: %s\n", what, path, strerror(errno));
  return 1;
}

/* an O_PATH descriptor of PATH, refusing any symlink on the way */
static int open_nofollow(const char *path) {
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
}

int main(int argc, char **argv) {
  if (argc < 2 || strspn(argv[1], "0123456789") != strlen(argv[1]) || !argv[1][0]) {
    fprintf(stderr, "usage: kvts-hostmount NSPID bind-ro SRC DST | NSPID umount DST\n");
    return 2;
  }
  char ns_path[64];
  snprintf(ns_path, sizeof ns_path, "/proc/%s/ns/mnt", argv[1]);
  argc--;
  argv++;
  int bind = argc == 4 && strcmp(argv[1], "bind-ro") == 0;
  int um = argc == 3 && strcmp(argv[1], "umount") == 0;
  if (!bind && !um) {
    fprintf(stderr, "usage: kvts-hostmount NSPID bind-ro SRC DST | NSPID umount DST\n");
    return 2;
  }
  for (int i = 2; i < argc; i++)
    if (argv[i][0] != '/') {
      fprintf(stderr, "kvts-hostmount: %s: not an absolute path\n", argv[i]);
      return 2;
    }
  int ns = open(ns_path, O_RDONLY | O_CLOEXEC);
  if (ns < 0) return fail("open", ns_path);
  if (setns(ns, CLONE_NEWNS) != 0) return fail("setns", ns_path);
  close(ns);
  int dst = open_nofollow(argv[argc - 1]);
  if (dst < 0) return fail("open (no symlinks)", argv[argc - 1]);
  char dst_fd[64];
  snprintf(dst_fd, sizeof dst_fd, "/proc/self/fd/%d", dst);
  if (um) {
    /* the descriptor keeps the mount busy only for a lazy (detached) unmount, which is what is asked */
    if (umount2(dst_fd, MNT_DETACH) != 0 && errno != EINVAL) return fail("umount", argv[2]);
    return 0;
  }
  int src = open_nofollow(argv[2]);
  if (src < 0) return fail("open (no symlinks)", argv[2]);
  char src_fd[64];
  snprintf(src_fd, sizeof src_fd, "/proc/self/fd/%d", src);
  if (mount(src_fd, dst_fd, NULL, MS_BIND, NULL) != 0) return fail("bind mount onto", argv[3]);
  /* the new mount sits on top of the old descriptor's file: remount through the path, now a mount point */
  int top = open_nofollow(argv[3]);
  if (top < 0) return fail("open (no symlinks)", argv[3]);
  char top_fd[64];
  snprintf(top_fd, sizeof top_fd, "/proc/self/fd/%d", top);
  if (mount(NULL, top_fd, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) {
    int e = errno;
    umount2(top_fd, MNT_DETACH);
    errno = e;
    return fail("read-only remount of", argv[3]);
  }
  return 0;
}
