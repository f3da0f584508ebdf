/* The container-disk helper (upstream's protocol), copied from the virt-launcher image into every
 * containerDisk/kernelBoot container of a launcher Pod by an init container, so it needs no library:
 *   container-disk --no-op            exit 0 (the init container: proves the image runs)
 *   container-disk --copy-path PATH   listen on the unix socket PATH.sock until SIGTERM/SIGINT, then remove it;
 *                                     the socket tells virt-handler the container (and its root
 *                                     filesystem, where the disk is) is alive.
 * Built static by tools/images/build.sh. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static volatile sig_atomic_t stop = 0;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv) {
  const char *copy_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--no-op") == 0) return 0;
    if (strcmp(argv[i], "--copy-path") == 0 && i + 1 < argc) {
      copy_path = argv[++i];
    } else {
      fprintf(stderr, "container-disk: unknown argument %s (usage: --no-op | --copy-path PATH)\n", argv[i]);
      return 2;
    }
  }
  if (!copy_path) {
    fprintf(stderr, "container-disk: --copy-path PATH is required\n");
    return 2;
  }
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (snprintf(addr.sun_path, sizeof addr.sun_path, "%s.sock", copy_path) >= (int)sizeof addr.sun_path) {
    fprintf(stderr, "container-disk: socket path %s.sock is too long\n", copy_path);
    return 2;
  }
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) { perror("container-disk: socket"); return 1; }
  unlink(addr.sun_path);
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 1) < 0) {
    fprintf(stderr, "container-disk: %s: %s\n", addr.sun_path, strerror(errno));
    return 1;
  }
  while (!stop) pause();
  close(fd);
  unlink(addr.sun_path);
  return 0;
}
