// virt-launcher-monitor: the small native wrapper around the launcher (upstream: virt-launcher-monitor).
//
//   virt-launcher-monitor [--grace-period-seconds N] [--remove-dir DIR [--keep-dir-on-failure]]
//                         [--pid-namespace] [--progress] -- COMMAND [ARG...]
//
// It runs COMMAND (the launcher) as its child and:
// - forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGUSR1 to it;
// - is a child subreaper (PID 1 of a Pod is one anyway), so every process the launcher's tree leaves
//   (QEMU, which libvirtd daemonizes; libvirtd and virtlogd when the launcher dies) becomes its child and is
//   reaped: no zombies, and "ours" is decided by the kernel (our child), never by a pid file;
// - when the launcher has ended, gives QEMU the rest of its grace period (counted from the first
//   SIGTERM/SIGINT/SIGHUP) to power off, then SIGKILLs it; the other leftovers get SIGTERM, then SIGKILL
//   after 5 s;
// - with --remove-dir, removes DIR at the end (not after a failure with --keep-dir-on-failure);
// - with --pid-namespace (root only): runs all of the above as PID 1 of a new PID namespace (with its own
//   /proc in a private mount namespace), as a Pod does. This process stays outside, forwards signals and
//   waits; the kernel ends every process of the namespace when its PID 1 ends, and the PID 1 gets a signal
//   when this process dies (even by SIGKILL), on which it kills the namespace and removes DIR.
// Exit code: the launcher's; 0 if it died by SIGTERM/SIGINT/SIGHUP, 1 by another signal.
// Logs: one JSON object per line on stderr (component virt-launcher-monitor); with --progress, warnings and
// errors as "[virt-launcher] monitor: ..." lines instead (standalone's progress format).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIDS 256
#define DAEMON_GRACE_MS 5000
// sent by the kernel to the namespace's PID 1 when the outer monitor dies (PR_SET_PDEATHSIG)
#define SIG_PARENT_DIED (SIGRTMIN + 1)

static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1};
#define NFORWARDED ((int)(sizeof(forwarded) / sizeof(forwarded[0])))

static int progress_mode = 0;
static long grace_ms = 30000;
static const char *remove_dir = NULL;
static int keep_dir_on_failure = 0;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// one JSON line: {"component":..,"level":..,"timestamp":..,"msg":..,"reason":..}; msg is escaped here
static void logf_(const char *level, const char *reason, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (progress_mode) {
    if (strcmp(level, "info") != 0) dprintf(2, "[virt-launcher] monitor: %s\n", msg);
    return;
  }
  char esc[2 * sizeof msg * 3];
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)msg; *p && o < sizeof esc - 8; p++) {
    if (*p == '"' || *p == '\\') {
      esc[o++] = '\\';
      esc[o++] = (char)*p;
    } else if (*p < 0x20) {
      o += (size_t)snprintf(esc + o, sizeof esc - o, "\\u%04x", *p);
    } else {
      esc[o++] = (char)*p;
    }
  }
  esc[o] = 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char stamp[40];
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  dprintf(2,
          "{\"component\":\"virt-launcher-monitor\",\"level\":\"%s\",\"timestamp\":\"%s.%03ldZ\",\"msg\":\"%s\","
          "\"reason\":\"%s\"}\n",
          level, stamp, ts.tv_nsec / 1000000, esc, reason);
}

static int rm_entry(const char *p, const struct stat *st, int type, struct FTW *f) {
  (void)st;
  (void)f;
  if (remove(p) != 0 && errno != ENOENT) logf_("warn", "RemoveFailed", "cannot remove %s: %s", p, strerror(errno));
  (void)type;
  return 0;
}

static void remove_tree(const char *dir) {
  if (nftw(dir, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0 && errno != ENOENT)
    logf_("warn", "RemoveFailed", "cannot remove %s: %s", dir, strerror(errno));
}

// argv[0] of a process ("" when gone)
static void proc_cmd(pid_t pid, char *buf, size_t n) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/cmdline", (int)pid);
  buf[0] = 0;
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t r = read(fd, buf, n - 1);
  close(fd);
  buf[r > 0 ? r : 0] = 0;
}

// our children (after the launcher ended: what its tree left, re-parented to us); split QEMU / others
static void own_children(pid_t *qemu, int *nq, pid_t *other, int *no) {
  *nq = *no = 0;
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *e;
  pid_t self = getpid();
  while ((e = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == self) continue;
    char p[64], st[512];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t r = read(fd, st, sizeof st - 1);
    close(fd);
    if (r <= 0) continue;
    st[r] = 0;
    char *rp = strrchr(st, ')'); // comm may hold spaces and parens: fields follow the last ')'
    char state;
    int ppid;
    if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2 || ppid != self || state == 'Z') continue;
    char cmd[256];
    proc_cmd((pid_t)pid, cmd, sizeof cmd);
    if ((strstr(cmd, "qemu-system") || strstr(cmd, "qemu-kvm")) && *nq < MAX_PIDS)
      qemu[(*nq)++] = (pid_t)pid;
    else if (*no < MAX_PIDS)
      other[(*no)++] = (pid_t)pid;
  }
  closedir(d);
}

static void reap_all(pid_t launcher, int *launcher_status, int *launcher_done) {
  int status;
  pid_t p;
  while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
    if (p == launcher && !*launcher_done) {
      *launcher_status = status;
      *launcher_done = 1;
    }
  }
}

// every pid is our child: reaped here (or earlier: ECHILD) means gone, and its entry becomes 0, so a pid
// the kernel hands out again is never signalled (a child's pid is not reused before we reap it)
static int all_gone(pid_t *pids, int n) {
  int gone = 1;
  for (int i = 0; i < n; i++) {
    if (pids[i] <= 0) continue;
    pid_t r = waitpid(pids[i], NULL, WNOHANG);
    if (r == pids[i] || (r < 0 && errno == ECHILD))
      pids[i] = 0;
    else
      gone = 0;
  }
  return gone;
}

// waits (reaping) until every pid is gone or ms passed; returns 1 when all are gone
static int wait_gone(sigset_t *set, pid_t *pids, int n, long long ms) {
  long long deadline = now_ms() + ms;
  int dummy_status = 0, dummy_done = 1;
  for (;;) {
    int done = all_gone(pids, n);
    reap_all(-1, &dummy_status, &dummy_done); // other orphans
    if (done) return 1;
    long long left = deadline - now_ms();
    if (left <= 0) return 0;
    if (left > 200) left = 200;
    struct timespec ts = {left / 1000, (left % 1000) * 1000000};
    sigtimedwait(set, NULL, &ts); // SIGCHLD wakes us early; other signals are ignored now
  }
}

static void kill_all(const pid_t *pids, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) kill(pids[i], sig);
}

static void block_signals(sigset_t *set) {
  sigemptyset(set);
  for (int i = 0; i < NFORWARDED; i++) sigaddset(set, forwarded[i]);
  sigaddset(set, SIGCHLD);
  sigaddset(set, SIG_PARENT_DIED);
  sigprocmask(SIG_BLOCK, set, NULL);
}

static void unblock_signals(const sigset_t *set) {
  sigprocmask(SIG_UNBLOCK, set, NULL);
}

// the whole job of the monitor; returns the exit code
static int supervise(char **cmd, int ns_init) {
  sigset_t set;
  block_signals(&set);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t launcher = fork();
  if (launcher < 0) {
    logf_("error", "SpawnFailed", "cannot start the launcher: %s", strerror(errno));
    return 127;
  }
  if (launcher == 0) {
    unblock_signals(&set);
    signal(SIGPIPE, SIG_DFL);
    execvp(cmd[0], cmd);
    dprintf(2, "virt-launcher-monitor: cannot run %s: %s\n", cmd[0], strerror(errno));
    _exit(127);
  }
  logf_("info", "LauncherStarted", "launcher started (pid %d)", (int)launcher);

  long long term_at = -1;
  int status = 0, done = 0, parent_died = 0;
  while (!done) {
    siginfo_t info;
    int sig = sigwaitinfo(&set, &info);
    if (sig < 0) continue;
    if (sig == SIGCHLD) {
      reap_all(launcher, &status, &done);
    } else if (sig == SIG_PARENT_DIED && ns_init) {
      parent_died = 1;
      break;
    } else {
      if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && term_at < 0) term_at = now_ms();
      logf_("info", "SignalForwarded", "forwarding SIG%s to the launcher (pid %d)", sigabbrev_np(sig), (int)launcher);
      kill(launcher, sig);
    }
  }

  if (parent_died) {
    // the outer monitor is gone (killed): nobody waits for a shutdown; end the namespace now
    logf_("warn", "MonitorDied", "the monitor outside the PID namespace died: killing every process of the run");
    kill(-1, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
    }
    if (remove_dir) remove_tree(remove_dir);
    return 1;
  }

  int crashed = WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
  if (WIFSIGNALED(status))
    logf_(crashed ? "warn" : "info", crashed ? "LauncherFailed" : "LauncherExited", "launcher exited (SIG%s)", sigabbrev_np(WTERMSIG(status)));
  else
    logf_(crashed ? "warn" : "info", crashed ? "LauncherFailed" : "LauncherExited", "launcher exited (code %d)", WEXITSTATUS(status));

  pid_t qemu[MAX_PIDS], other[MAX_PIDS];
  int nq, no;
  own_children(qemu, &nq, other, &no);
  if (nq > 0) {
    long long elapsed = term_at >= 0 ? now_ms() - term_at : 0;
    long long remaining = grace_ms - elapsed;
    if (remaining < 0) remaining = 0;
    logf_("warn", "QemuLeftBehind", "QEMU still running after the launcher ended; waiting up to %llds", (remaining + 500) / 1000);
    if (!wait_gone(&set, qemu, nq, remaining)) {
      kill_all(qemu, nq, SIGKILL);
      logf_("warn", "GracePeriodExpired", "killed QEMU after the grace period");
      wait_gone(&set, qemu, nq, DAEMON_GRACE_MS);
    }
  }
  own_children(qemu, &nq, other, &no); // the daemons, and anything that appeared meanwhile
  if (nq + no > 0) {
    kill_all(qemu, nq, SIGKILL);
    kill_all(other, no, SIGTERM);
    kill_all(other, no, SIGCONT); // a stopped daemon would not act on SIGTERM
    if (!wait_gone(&set, other, no, DAEMON_GRACE_MS)) {
      kill_all(other, no, SIGKILL);
      logf_("warn", "Leftover", "killed %d leftover process(es) that did not stop on SIGTERM", no);
    }
    wait_gone(&set, qemu, nq, DAEMON_GRACE_MS);
  }
  if (ns_init) kill(-1, SIGKILL); // anything else of the run (the kernel would do it when we exit)
  int d2 = 1, s2 = 0;
  reap_all(-1, &s2, &d2);

  int code = WIFSIGNALED(status)
                 ? ((WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGHUP) ? 0 : 1)
                 : WEXITSTATUS(status);
  if (remove_dir && !(keep_dir_on_failure && code != 0)) remove_tree(remove_dir);
  return code;
}

// --pid-namespace: this process stays outside; its child is PID 1 of the new namespace and supervises
static int run_in_pid_namespace(char **cmd) {
  if (unshare(CLONE_NEWPID) != 0) {
    logf_("error", "PidNamespaceFailed", "cannot create a PID namespace: %s", strerror(errno));
    return 1;
  }
  sigset_t set;
  block_signals(&set);
  // the init learns from this pipe whether we died before its PR_SET_PDEATHSIG took effect (its getppid()
  // is 0: we are outside its namespace)
  int alive_pipe[2];
  if (pipe2(alive_pipe, O_CLOEXEC) != 0) {
    logf_("error", "PidNamespaceFailed", "pipe: %s", strerror(errno));
    return 1;
  }
  pid_t init = fork();
  if (init < 0) {
    logf_("error", "PidNamespaceFailed", "cannot start the PID namespace: %s", strerror(errno));
    return 1;
  }
  if (init == 0) {
    // PID 1 of the namespace: told when the outer monitor dies, whatever the way
    prctl(PR_SET_PDEATHSIG, SIG_PARENT_DIED);
    close(alive_pipe[1]);
    struct pollfd pfd = {alive_pipe[0], POLLIN, 0};
    if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLIN))) _exit(1); // it died before the line above
    close(alive_pipe[0]);
    // /proc of this namespace, in a private mount namespace (libvirt reads /proc/<QEMU pid>)
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
      logf_("error", "PidNamespaceFailed", "cannot mount /proc for the PID namespace: %s", strerror(errno));
      _exit(1);
    }
    _exit(supervise(cmd, 1));
  }
  close(alive_pipe[0]); // alive_pipe[1] stays open as long as this process lives
  // outside: forward signals to the namespace's PID 1 (which forwards them to the launcher); wait
  // the PID 1 removes --remove-dir; this process does it only when the PID 1 was killed
  int status = 0;
  for (;;) {
    int sig = sigwaitinfo(&set, NULL);
    if (sig < 0) continue;
    if (sig == SIGCHLD) {
      pid_t p = waitpid(init, &status, WNOHANG);
      if (p == init) break;
    } else if (sig != SIG_PARENT_DIED) {
      kill(init, sig);
    }
  }
  int code = WIFSIGNALED(status) ? 1 : WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    logf_("warn", "NamespaceInitDied", "the PID namespace's init died (SIG%s): the kernel ended every process of the run",
          sigabbrev_np(WTERMSIG(status)));
    if (remove_dir && !keep_dir_on_failure) remove_tree(remove_dir);
  }
  return code;
}

static void usage(void) {
  dprintf(2,
          "usage: virt-launcher-monitor [--grace-period-seconds N] [--remove-dir DIR [--keep-dir-on-failure]]\n"
          "                             [--pid-namespace] [--progress] -- COMMAND [ARG...]\n");
}

int main(int argc, char **argv) {
  int pidns = 0, i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--grace-period-seconds") == 0 && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 0 || v > 86400 * 365) {
        dprintf(2, "virt-launcher-monitor: --grace-period-seconds: not a number of seconds: %s\n", argv[i]);
        return 2;
      }
      grace_ms = v * 1000;
    } else if (strcmp(a, "--remove-dir") == 0 && i + 1 < argc) {
      remove_dir = argv[++i];
      if (remove_dir[0] != '/' || strcmp(remove_dir, "/") == 0) {
        dprintf(2, "virt-launcher-monitor: --remove-dir: must be an absolute path other than /: %s\n", remove_dir);
        return 2;
      }
    } else if (strcmp(a, "--keep-dir-on-failure") == 0) {
      keep_dir_on_failure = 1;
    } else if (strcmp(a, "--pid-namespace") == 0) {
      pidns = 1;
    } else if (strcmp(a, "--progress") == 0) {
      progress_mode = 1;
    } else {
      dprintf(2, "virt-launcher-monitor: unknown or incomplete flag %s\n", a);
      usage();
      return 2;
    }
  }
  if (i >= argc) {
    dprintf(2, "virt-launcher-monitor: no launcher command\n");
    usage();
    return 2;
  }
  // a broken stdout/stderr (EPIPE) must never kill the monitor: write errors are ignored
  signal(SIGPIPE, SIG_IGN);
  if (pidns) {
    if (geteuid() != 0) {
      dprintf(2, "virt-launcher-monitor: --pid-namespace needs root\n");
      return 2;
    }
    return run_in_pid_namespace(argv + i);
  }
  return supervise(argv + i, 0);
}
