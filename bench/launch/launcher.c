/*
 * launcher.c — starts and supervises one worker process per GPU, or joins an
 * external launcher (contract in launcher.h).
 *
 * The parent blocks SIGCHLD, SIGINT and SIGTERM before forking and then
 * waits for them with sigtimedwait(), so no signal handler and no race with a
 * child that exits before the parent waits: every exit and every interrupt
 * is picked up by the supervision loop, which reaps workers with
 * waitpid(WNOHANG) and escalates from SIGTERM to SIGKILL on a deadline.
 */
#include "bench/launch/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/cli/cli.h"
#include "bench/launch/hostlist.h"
#include "bench/launch/rendezvous.h"
#include "common/tp_log.h"

enum { POLL_MS = 200 };

/* ---- environment ---------------------------------------------------------- */

void tp_launch_disable_multicast(void) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
}

static tp_rc env_int(const char *name, long long min, long long max, int *out) {
  long long value = 0;
  TP_TRY(tp_parse_int(name, getenv(name), min, max, &value));
  *out = (int)value;
  return TP_OK;
}

/* The variables that say who this process is, per launcher, in the order of
 * precedence (launcher.h says why). */
typedef struct launcher_vars {
  const char *name;
  const char *rank, *world, *local_rank, *local_size;
} launcher_vars;

static const launcher_vars LAUNCHERS[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL},
};
enum {
  N_LAUNCHERS = sizeof LAUNCHERS / sizeof LAUNCHERS[0],
  TORCHRUN = 0,
  OPEN_MPI = 1,
  SLURM = 2
};

/* The node lists srun sets, most specific first. */
static const char *const SLURM_NODELISTS[] = {"SLURM_STEP_NODELIST", "SLURM_NODELIST",
                                              "SLURM_JOB_NODELIST"};

static int is_set(const char *name) { return name && getenv(name) != NULL; }

/* Another launcher whose rank and size are both set (the one a hand-set
 * RANK/WORLD_SIZE hides), or NULL. */
static const launcher_vars *other_complete(int chosen) {
  for (int i = 0; i < N_LAUNCHERS; i++)
    if (i != chosen && is_set(LAUNCHERS[i].rank) && is_set(LAUNCHERS[i].world))
      return &LAUNCHERS[i];
  return NULL;
}

/* The GPU index on this host. torchrun always sets LOCAL_RANK; without it
 * RANK is an index on this host only when every rank is here. */
static tp_rc read_local_rank(int which, tp_launch_env *env) {
  const launcher_vars *v = &LAUNCHERS[which];
  int local_size = 0;
  if (v->local_size && getenv(v->local_size))
    TP_TRY(env_int(v->local_size, 1, env->world, &local_size));
  if (getenv(v->local_rank)) {
    TP_TRY(env_int(v->local_rank, 0, (local_size ? local_size : env->world) - 1, &env->local_rank));
    return TP_OK;
  }
  if (which == TORCHRUN && (env->world == 1 || local_size == env->world)) {
    env->local_rank = env->rank;
    return TP_OK;
  }
  const launcher_vars *other = which == TORCHRUN ? other_complete(which) : NULL;
  if (other)
    return TP_FAIL(TP_EUSAGE,
                   "RANK and WORLD_SIZE are set but LOCAL_RANK is not, inside a %s job (%s, %s "
                   "set): RANK/WORLD_SIZE exported by hand reach every task alike; unset them to "
                   "let tpbench read %s's variables, or set LOCAL_RANK too",
                   other->name, other->rank, other->world, other->name);
  return TP_FAIL(TP_EUSAGE,
                 "%s is not set: with %s %d the ranks may span hosts, and %s %d is no GPU index on "
                 "a second host; set %s (the GPU this rank uses on its host)%s",
                 v->local_rank, v->world, env->world, v->rank, env->rank, v->local_rank,
                 which == TORCHRUN ? ", or LOCAL_WORLD_SIZE equal to WORLD_SIZE for one host" : "");
}

static tp_rc set_master_addr(tp_launch_env *env, const char *addr, const char *from) {
  if (strlen(addr) >= sizeof env->master_addr)
    return TP_FAIL(TP_EUSAGE, "%s '%s' is longer than %zu characters", from, addr,
                   sizeof env->master_addr - 1);
  snprintf(env->master_addr, sizeof env->master_addr, "%s", addr);
  return TP_OK;
}

/* MASTER_ADDR; else Slurm's first host of the node list, or loopback for an
 * Open MPI job on one host. */
static tp_rc read_master_addr(int which, tp_launch_env *env) {
  const char *addr = getenv("MASTER_ADDR");
  if (addr && addr[0]) return set_master_addr(env, addr, "MASTER_ADDR");
  if (which == SLURM) {
    for (size_t i = 0; i < sizeof SLURM_NODELISTS / sizeof SLURM_NODELISTS[0]; i++) {
      const char *list = getenv(SLURM_NODELISTS[i]);
      if (!list || !list[0]) continue;
      char first[TP_HOSTLIST_NAME_MAX];
      TP_TRY(tp_hostlist_first(list, first, sizeof first));
      return set_master_addr(env, first, SLURM_NODELISTS[i]);
    }
    return TP_FAIL(TP_EUSAGE, "neither MASTER_ADDR nor SLURM_NODELIST is set: run tpbench through "
                              "srun, or set MASTER_ADDR to rank 0's host");
  }
  if (which == OPEN_MPI) {
    int local_size = 0;
    if (getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
      TP_TRY(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, env->world, &local_size));
    if (local_size == env->world) return set_master_addr(env, "127.0.0.1", "the loopback address");
    return TP_FAIL(TP_EUSAGE, "MASTER_ADDR is not set: an Open MPI job over several hosts must "
                              "name rank 0's host, e.g. mpirun -x MASTER_ADDR=$(hostname) ...");
  }
  return TP_FAIL(TP_EUSAGE, "MASTER_ADDR is not set: the external launcher must set it "
                            "(with MASTER_PORT) next to RANK and WORLD_SIZE");
}

/* MASTER_PORT; else under Slurm one derived from the job id (array tasks
 * sharing a host differ), under Open MPI torch's default. */
static tp_rc read_master_port(int which, tp_launch_env *env) {
  if (getenv("MASTER_PORT")) return env_int("MASTER_PORT", 1, 65535, &env->master_port);
  if (which == SLURM && getenv("SLURM_JOB_ID")) {
    int job = 0;
    TP_TRY(env_int("SLURM_JOB_ID", 0, 0x7fffffff, &job));
    env->master_port = TP_LAUNCH_SLURM_PORT_BASE + job % TP_LAUNCH_SLURM_PORT_SPAN;
    return TP_OK;
  }
  if (which == OPEN_MPI) {
    env->master_port = TP_LAUNCH_DEFAULT_PORT;
    return TP_OK;
  }
  return TP_FAIL(TP_EUSAGE, "MASTER_PORT is not set: the external launcher must set it%s",
                 which == SLURM ? " (or SLURM_JOB_ID, from which it is derived)" : "");
}

/* srun sets SLURM_STEP_ID in the tasks of a job step; a batch script (or
 * an salloc shell) has SLURM_PROCID and SLURM_NTASKS of its own but no step,
 * and is no rank of a job: tpbench starts its own workers there. */
static int in_slurm_step(void) { return is_set("SLURM_STEP_ID") || is_set("SLURM_STEPID"); }

/* The first launcher in precedence order with its rank or size set: 0..2,
 * or -1 for none. */
static int chosen_launcher(void) {
  for (int i = 0; i < N_LAUNCHERS; i++) {
    if (i == SLURM && !in_slurm_step()) continue;
    if (is_set(LAUNCHERS[i].rank) || is_set(LAUNCHERS[i].world)) return i;
  }
  return -1;
}

tp_rc tp_launch_env_from_environment(tp_launch_env *env, int *present) {
  *present = 0;
  memset(env, 0, sizeof *env);
  const int which = chosen_launcher();
  if (which < 0) return TP_OK;
  const launcher_vars *v = &LAUNCHERS[which];
  const char *rank = getenv(v->rank), *world = getenv(v->world);
  if (!rank || !world)
    return TP_FAIL(TP_EUSAGE,
                   "%s is set but %s is not: set both to join an external launcher (%s), or "
                   "neither to let tpbench start its own workers",
                   rank ? v->rank : v->world, rank ? v->world : v->rank, v->name);
  env->launcher = v->name;
  TP_TRY(env_int(v->world, 1, 1 << 20, &env->world));
  TP_TRY(env_int(v->rank, 0, env->world - 1, &env->rank));
  TP_TRY(read_local_rank(which, env));
  TP_TRY(read_master_addr(which, env));
  TP_TRY(read_master_port(which, env));
  int have_secret = 0;
  TP_TRY(tp_rdzv_secret_from_environment(&env->secret, &have_secret));
  if (!have_secret)
    return TP_FAIL(TP_EUSAGE,
                   "no job secret: under an external launcher every rank needs the same secret "
                   "so that only the job can join its rendezvous; set TPBENCH_JOB_SECRET to 64 "
                   "hex digits (e.g. from `openssl rand -hex 32`) or TPBENCH_JOB_SECRET_FILE to a "
                   "file holding them that only its owner can read (chmod 600)");
  env->external = 1;
  *present = 1;
  return TP_OK;
}

int tp_launch_opens_database(void) {
  tp_launch_env env;
  int present = 0;
  const int malformed = tp_launch_env_from_environment(&env, &present) != TP_OK;
  explicit_bzero(&env.secret, sizeof env.secret);
  return malformed || !present || env.rank == 0;
}

/* A worker's return value as an exit status: out-of-range values would wrap
 * (256 reads as 0), so they become a plain failure. */
static int exit_status_of(int rc) { return rc >= 0 && rc <= 255 ? rc : 1; }

/* "SIGSEGV", or "signal 64" for one without a name. */
static void signal_name(int sig, char *buf, size_t cap) {
  const char *abbrev = sigabbrev_np(sig);
  if (abbrev) snprintf(buf, cap, "SIG%s", abbrev);
  else snprintf(buf, cap, "signal %d", sig);
}

/* A wait status as the shell reports it: the exit status, or 128 + signal. */
static int shell_status(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 1;
}

static void set_int_env(const char *name, int value) {
  char text[16];
  snprintf(text, sizeof text, "%d", value);
  setenv(name, text, 1);
}

/* ---- the external launcher's process ----------------------------------------- */

static int run_external(const tp_launch_env *env, tp_worker_fn fn, void *ctx) {
  char tag[32];
  snprintf(tag, sizeof tag, "rank %d", env->rank);
  tp_log_set_tag(tag);
  tp_launch_disable_multicast();
  tp_rdzv_set_job_secret(&env->secret);
  TP_LOGI("launch", "joining %s's job: rank %d of %d, local rank %d, master %s:%d", env->launcher,
          env->rank, env->world, env->local_rank, env->master_addr, env->master_port);
  return exit_status_of(fn(env, ctx));
}

/* ---- forked workers ---------------------------------------------------------------- */

typedef struct worker_job {
  tp_worker_fn fn;
  void *ctx;
  int world;
  int port;
  pid_t parent;
  sigset_t child_mask;   /* the caller's signal mask, restored in each child */
  tp_rdzv_secret secret; /* fresh for this job; reaches the children by fork */
} worker_job;

/* Dies with the parent. If the parent died before prctl took effect the
 * child has been re-parented already: getppid() tells. */
static void die_with_parent(pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
}

static _Noreturn void worker_main(const worker_job *job, int rank) {
  die_with_parent(job->parent);
  sigprocmask(SIG_SETMASK, &job->child_mask, NULL);
  tp_launch_env env = {.rank = rank,
                       .world = job->world,
                       .launcher = "tpbench",
                       .local_rank = rank,
                       .master_port = job->port,
                       .secret = job->secret};
  snprintf(env.master_addr, sizeof env.master_addr, "127.0.0.1");
  /* A single-node job: the rendezvous stays on loopback, keyed by this
   * job's own secret whatever the environment says. */
  unsetenv("TPBENCH_RDZV_BIND");
  unsetenv("TPBENCH_JOB_SECRET");
  unsetenv("TPBENCH_JOB_SECRET_FILE");
  tp_rdzv_set_job_secret(&job->secret);
  set_int_env("RANK", rank);
  set_int_env("WORLD_SIZE", job->world);
  set_int_env("LOCAL_RANK", rank);
  setenv("MASTER_ADDR", env.master_addr, 1);
  set_int_env("MASTER_PORT", job->port);
  tp_launch_disable_multicast();
  char tag[32];
  snprintf(tag, sizeof tag, "rank %d", rank);
  tp_log_set_tag(tag);
  int status = exit_status_of(job->fn(&env, job->ctx));
  fflush(stdout);
  fflush(stderr);
  _exit(status);
}

typedef struct supervisor {
  pid_t *pids; /* 0 once reaped */
  int n;
  int alive;
  int failed_rank; /* first failure, -1 if none */
  int failed_status;
  int interrupted_by; /* SIGINT or SIGTERM received by the parent, 0 if none */
  int64_t kill_at_ms; /* when survivors get SIGKILL; 0 while not stopping */
  int killed;         /* SIGKILL sent */
} supervisor;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void signal_all(const supervisor *sv, int sig) {
  for (int r = 0; r < sv->n; r++)
    if (sv->pids[r] > 0) kill(sv->pids[r], sig);
}

/* Stops the workers still running: SIGTERM now, SIGKILL after the grace. */
static void stop_all(supervisor *sv, int sig) {
  signal_all(sv, sig);
  if (sv->kill_at_ms == 0) sv->kill_at_ms = now_ms() + TP_LAUNCH_KILL_GRACE_MS;
}

static int stopping(const supervisor *sv) { return sv->kill_at_ms != 0; }

static void report_failure(int rank, int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    char name[32];
    signal_name(WTERMSIG(wstatus), name, sizeof name);
    fprintf(stderr, "tpbench: rank %d failed: killed by signal %s\n", rank, name);
  } else {
    fprintf(stderr, "tpbench: rank %d failed: exit status %d\n", rank, shell_status(wstatus));
  }
}

/* Reaps every worker that has ended; the first failure stops the rest. */
static void reap_exited(supervisor *sv) {
  for (int r = 0; r < sv->n; r++) {
    if (sv->pids[r] <= 0) continue;
    int wstatus = 0;
    pid_t got = waitpid(sv->pids[r], &wstatus, WNOHANG);
    if (got == 0 || (got < 0 && errno == EINTR)) continue;
    if (got < 0) wstatus = 1 << 8; /* lost (ECHILD): count it as exit status 1 */
    sv->pids[r] = 0;
    sv->alive--;
    int failed = !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0;
    TP_LOGD("launch", "rank %d ended: status %d", r, shell_status(wstatus));
    /* Once stopping, deaths are the ones we caused. */
    if (!failed || stopping(sv)) continue;
    report_failure(r, wstatus);
    sv->failed_rank = r;
    sv->failed_status = shell_status(wstatus);
    stop_all(sv, SIGTERM);
  }
}

/* Handles a signal taken from the pending set. */
static void on_signal(supervisor *sv, int sig) {
  if (sig != SIGINT && sig != SIGTERM) return; /* SIGCHLD: reaping follows */
  if (!sv->interrupted_by) {
    char name[32];
    signal_name(sig, name, sizeof name);
    fprintf(stderr, "tpbench: interrupted by %s; stopping %d worker(s)\n", name, sv->alive);
    sv->interrupted_by = sig;
  }
  stop_all(sv, sig);
}

static void escalate_if_due(supervisor *sv) {
  if (!stopping(sv) || sv->killed || now_ms() < sv->kill_at_ms) return;
  for (int r = 0; r < sv->n; r++)
    if (sv->pids[r] > 0)
      fprintf(stderr, "tpbench: rank %d did not stop within %d ms; killing it\n", r,
              TP_LAUNCH_KILL_GRACE_MS);
  signal_all(sv, SIGKILL);
  sv->killed = 1;
}

static int supervise(supervisor *sv, const sigset_t *watched) {
  const struct timespec no_wait = {0, 0};
  const struct timespec tick = {0, POLL_MS * 1000000L};
  while (sv->alive > 0) {
    /* Take pending interrupts before reaping: a Ctrl-C reaches the workers
     * too, and their deaths are then not failures. */
    int sig;
    while ((sig = sigtimedwait(watched, NULL, &no_wait)) > 0) on_signal(sv, sig);
    reap_exited(sv);
    escalate_if_due(sv);
    if (sv->alive == 0) break;
    sig = sigtimedwait(watched, NULL, &tick);
    if (sig > 0) on_signal(sv, sig);
  }
  if (sv->failed_rank >= 0) return sv->failed_status ? sv->failed_status : 1;
  if (sv->interrupted_by) return 128 + sv->interrupted_by;
  return 0;
}

/* Forks the workers; on failure kills those already started. */
static tp_rc fork_workers(const worker_job *job, supervisor *sv) {
  fflush(NULL); /* or buffered output would be written by every child too */
  for (int r = 0; r < sv->n; r++) {
    pid_t pid = fork();
    if (pid == 0) worker_main(job, r);
    if (pid < 0) {
      tp_rc rc = TP_FAIL(TP_EIO, "cannot start worker %d: fork: %s", r, strerror(errno));
      signal_all(sv, SIGKILL);
      for (int i = 0; i < r; i++) waitpid(sv->pids[i], NULL, 0);
      return rc;
    }
    sv->pids[r] = pid;
    sv->alive++;
  }
  return TP_OK;
}

static int is_ignored(int sig) {
  struct sigaction current;
  return sigaction(sig, NULL, &current) == 0 && current.sa_handler == SIG_IGN;
}

static int run_workers(int n_workers, tp_worker_fn fn, void *ctx) {
  if (n_workers < 1) {
    fprintf(stderr, "tpbench: %d workers asked for; at least 1 is needed\n", n_workers);
    return TP_LAUNCH_USAGE_STATUS;
  }
  worker_job job = {.fn = fn, .ctx = ctx, .world = n_workers, .parent = getpid()};
  if (tp_find_free_port(&job.port) != TP_OK || tp_rdzv_secret_generate(&job.secret) != TP_OK) {
    fprintf(stderr, "tpbench: %s\n", tp_cli_last_message());
    return 1;
  }
  supervisor sv = {.n = n_workers, .failed_rank = -1};
  sv.pids = calloc((size_t)n_workers, sizeof *sv.pids);
  if (!sv.pids) {
    fprintf(stderr, "tpbench: no memory for %d workers\n", n_workers);
    explicit_bzero(&job.secret, sizeof job.secret);
    return 1;
  }
  /* Children must be reapable (not auto-reaped by SIG_IGN), and the watched
   * signals pending rather than delivered. */
  struct sigaction dfl = {.sa_handler = SIG_DFL}, old_chld;
  sigaction(SIGCHLD, &dfl, &old_chld);
  sigset_t watched;
  sigemptyset(&watched);
  sigaddset(&watched, SIGCHLD);
  /* An ignored interrupt stays ignored (a shell's background job ignores
   * SIGINT, and so do the workers, which inherit that). */
  if (!is_ignored(SIGINT)) sigaddset(&watched, SIGINT);
  if (!is_ignored(SIGTERM)) sigaddset(&watched, SIGTERM);
  sigprocmask(SIG_BLOCK, &watched, &job.child_mask);

  int status = 1;
  TP_LOGI("launch", "starting %d workers, rendezvous on 127.0.0.1:%d", n_workers, job.port);
  if (fork_workers(&job, &sv) == TP_OK) status = supervise(&sv, &watched);
  else fprintf(stderr, "tpbench: %s\n", tp_cli_last_message());

  sigprocmask(SIG_SETMASK, &job.child_mask, NULL);
  sigaction(SIGCHLD, &old_chld, NULL);
  free(sv.pids);
  explicit_bzero(&job.secret, sizeof job.secret);
  return status;
}

int tp_launch(int n_workers, tp_worker_fn fn, void *ctx) {
  tp_launch_env env;
  int present = 0;
  if (tp_launch_env_from_environment(&env, &present) != TP_OK) {
    fprintf(stderr, "tpbench: %s\n", tp_cli_last_message());
    return TP_LAUNCH_USAGE_STATUS;
  }
  if (present) {
    int status = run_external(&env, fn, ctx);
    explicit_bzero(&env.secret, sizeof env.secret);
    return status;
  }
  return run_workers(n_workers, fn, ctx);
}

/* ---- one-off children ------------------------------------------------------------ */

static tp_rc write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return TP_EIO;
    p += n;
    len -= (size_t)n;
  }
  return TP_OK;
}

/* Reads until end of file; keeps the first cap bytes. */
static size_t read_all(int fd, void *buf, size_t cap) {
  char *p = buf;
  size_t got = 0;
  char discard[256];
  for (;;) {
    int room = got < cap;
    ssize_t n = read(fd, room ? p + got : discard, room ? cap - got : sizeof discard);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got;
    if (room) got += (size_t)n;
  }
}

static _Noreturn void child_main(int (*fn)(void *, void *, size_t, size_t *), void *ctx, void *out,
                                 size_t out_cap, int pipe_fd, pid_t parent) {
  die_with_parent(parent);
  size_t len = 0;
  int status = exit_status_of(fn(ctx, out, out_cap, &len));
  if (len > out_cap) len = out_cap;
  if (len > 0 && write_all(pipe_fd, out, len) != TP_OK) status = status ? status : 1;
  fflush(stdout);
  fflush(stderr);
  _exit(status);
}

tp_rc tp_run_in_child_output(int (*fn)(void *ctx, void *out, size_t out_cap, size_t *out_len),
                             void *ctx, void *out, size_t out_cap, size_t *out_len,
                             int *child_status) {
  int fds[2];
  if (out_len) *out_len = 0;
  if (pipe2(fds, O_CLOEXEC) != 0) return TP_FAIL(TP_EIO, "pipe: %s", strerror(errno));
  pid_t parent = getpid();
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child_main(fn, ctx, out, out_cap, fds[1], parent);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return TP_FAIL(TP_EIO, "fork: %s", strerror(errno));
  }
  size_t got = read_all(fds[0], out, out ? out_cap : 0);
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0)
    if (errno != EINTR) return TP_FAIL(TP_EIO, "waitpid: %s", strerror(errno));
  *child_status = shell_status(wstatus);
  if (out_len) *out_len = WIFEXITED(wstatus) ? got : 0;
  return TP_OK;
}

typedef struct plain_child {
  int (*fn)(void *ctx);
  void *ctx;
} plain_child;

static int run_plain(void *ctx, void *out, size_t out_cap, size_t *out_len) {
  (void)out;
  (void)out_cap;
  *out_len = 0;
  const plain_child *c = ctx;
  return c->fn(c->ctx);
}

tp_rc tp_run_in_child(int (*fn)(void *ctx), void *ctx, int *child_status) {
  plain_child c = {fn, ctx};
  return tp_run_in_child_output(run_plain, &c, NULL, 0, NULL, child_status);
}
