/*
 * test_bench_launcher.c — bench/launcher: workers forked with the right
 * environment (ranks, rendezvous, multicast off); the first failure (an exit
 * status or a signal) reported in one line, the others stopped at once and
 * the failing status returned; a worker that ignores SIGTERM killed after
 * the grace period; SIGINT to the parent forwarded; no orphans when the
 * parent is killed; the external launchers' environments (torchrun, Slurm,
 * Open MPI; faked), well-formed and not, their order of precedence, a local
 * rank never guessed across hosts; and tp_run_in_child. The job secret: every forked worker holds
 * the same fresh one (never from the environment), and they rendezvous with it; an external
 * launcher's rank refuses to start without one, or with a secret file others can read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <sys/prctl.h>
#include <sys/stat.h>

#include "bench/launch/launcher.h"
#include "tests/cpu/bench_testutil.h"

enum { WORKERS = 3, MAX_WORKERS = 8 };

/* What workers report back through shared memory. */
typedef struct board {
  int ran[MAX_WORKERS];
  pid_t pid[MAX_WORKERS];
  int env_ok[MAX_WORKERS];
  unsigned char secret[MAX_WORKERS][TP_RDZV_SECRET_GENERATED];
  int joined[MAX_WORKERS]; /* rendezvous and allgather went through */
} board;

static board *shared_board(void) {
  static board *b;
  if (!b) b = tu_shared(sizeof *b);
  assert_non_null(b);
  memset(b, 0, sizeof *b);
  return b;
}

static void clear_external_env(void) {
  static const char *const names[] = {"RANK",
                                      "WORLD_SIZE",
                                      "LOCAL_RANK",
                                      "LOCAL_WORLD_SIZE",
                                      "MASTER_ADDR",
                                      "MASTER_PORT",
                                      "TPBENCH_JOB_SECRET",
                                      "TPBENCH_JOB_SECRET_FILE",
                                      "OMPI_COMM_WORLD_RANK",
                                      "OMPI_COMM_WORLD_SIZE",
                                      "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "OMPI_COMM_WORLD_LOCAL_SIZE",
                                      "SLURM_PROCID",
                                      "SLURM_NTASKS",
                                      "SLURM_LOCALID",
                                      "SLURM_NODELIST",
                                      "SLURM_STEP_NODELIST",
                                      "SLURM_JOB_NODELIST",
                                      "SLURM_JOB_ID"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unsetenv(names[i]);
}

static const char ENV_SECRET_HEX[] =
    "0101010101010101010101010101010101010101010101010101010101010101";

static int env_is(const char *name, const char *value) {
  const char *v = getenv(name);
  return v && strcmp(v, value) == 0;
}

static int env_int_is(const char *name, int value) {
  char text[16];
  snprintf(text, sizeof text, "%d", value);
  return env_is(name, text);
}

static int secret_ok(const tp_launch_env *env);

/* The bytes of ENV_SECRET_HEX: all 0x01. */
static int is_env_secret(const tp_rdzv_secret *s) {
  for (size_t i = 0; i < s->len; i++)
    if (s->bytes[i] != 1) return 0;
  return 1;
}

/* Checks the environment a forked worker must see. */
static int worker_env_ok(const tp_launch_env *env) {
  return env->world == WORKERS && !env->external && env->local_rank == env->rank &&
         env_int_is("RANK", env->rank) && env_int_is("WORLD_SIZE", WORKERS) &&
         env_int_is("LOCAL_RANK", env->rank) && env_is("MASTER_ADDR", "127.0.0.1") &&
         strcmp(env->master_addr, "127.0.0.1") == 0 && env->master_port > 0 &&
         env_int_is("MASTER_PORT", env->master_port) && env_is("NCCL_NVLS_ENABLE", "0") &&
         env_is("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1") && env_is("NVSHMEM_DISABLE_NVLS", "1") &&
         secret_ok(env);
}

/* The worker holds the job's secret: installed, generated, never in the
 * environment, and the rendezvous bound to loopback whatever it says. */
static int secret_ok(const tp_launch_env *env) {
  const tp_rdzv_secret *installed = tp_rdzv_job_secret();
  return installed && installed->len == TP_RDZV_SECRET_GENERATED &&
         env->secret.len == installed->len &&
         memcmp(env->secret.bytes, installed->bytes, installed->len) == 0 &&
         !getenv("TPBENCH_JOB_SECRET") && !getenv("TPBENCH_RDZV_BIND") && !is_env_secret(installed);
}

static int record(const tp_launch_env *env, board *b) {
  b->ran[env->rank] = 1;
  b->pid[env->rank] = getpid();
  b->env_ok[env->rank] = worker_env_ok(env);
  memcpy(b->secret[env->rank], env->secret.bytes, TP_RDZV_SECRET_GENERATED);
  return 0;
}

static int all_succeed(const tp_launch_env *env, void *ctx) { return record(env, ctx); }

static void test_all_succeed(void **state) {
  (void)state;
  clear_external_env();
  unsetenv("NCCL_NVLS_ENABLE");
  /* Neither reaches the workers of a job tpbench starts itself. */
  setenv("TPBENCH_JOB_SECRET", ENV_SECRET_HEX, 1);
  setenv("TPBENCH_RDZV_BIND", "0.0.0.0", 1);
  board *b = shared_board();
  assert_int_equal(tp_launch(WORKERS, all_succeed, b), 0);
  for (int r = 0; r < WORKERS; r++) {
    assert_true(b->ran[r]);
    assert_true(b->env_ok[r]);
    assert_int_not_equal(b->pid[r], getpid()); /* each in its own process */
    assert_memory_equal(b->secret[r], b->secret[0], TP_RDZV_SECRET_GENERATED);
  }
  assert_int_not_equal(b->pid[0], b->pid[1]);
  /* The parent's environment is left alone. */
  assert_null(getenv("RANK"));
  assert_null(getenv("NCCL_NVLS_ENABLE"));
  assert_non_null(getenv("TPBENCH_RDZV_BIND"));
  unsetenv("TPBENCH_RDZV_BIND");
  unsetenv("TPBENCH_JOB_SECRET");
  /* Each job makes its own secret. */
  unsigned char first[TP_RDZV_SECRET_GENERATED];
  memcpy(first, b->secret[0], sizeof first);
  b = shared_board();
  assert_int_equal(tp_launch(WORKERS, all_succeed, b), 0);
  assert_memory_not_equal(b->secret[0], first, sizeof first);
}

/* The workers find each other through the authenticated rendezvous. */
static int rendezvous_worker(const tp_launch_env *env, void *ctx) {
  board *b = ctx;
  tp_rdzv *z = NULL;
  if (tp_rdzv_connect(env->master_addr, env->master_port, env->rank, env->world, 10000, &z) !=
      TP_OK) {
    fprintf(stderr, "rank %d: %s\n", env->rank, tp_last_error());
    return 1;
  }
  int mine = 100 + env->rank, all[WORKERS] = {0};
  tp_rc rc = tp_rdzv_allgather(z, &mine, sizeof mine, all);
  tp_rdzv_close(z);
  b->joined[env->rank] = rc == TP_OK && all[0] == 100 && all[WORKERS - 1] == 99 + WORKERS;
  return rc == TP_OK ? 0 : 1;
}

static void test_workers_rendezvous_with_the_secret(void **state) {
  (void)state;
  clear_external_env();
  board *b = shared_board();
  assert_int_equal(tp_launch(WORKERS, rendezvous_worker, b), 0);
  for (int r = 0; r < WORKERS; r++) assert_true(b->joined[r]);
}

/* Runs tp_launch(n_workers, fn, ctx) with stderr captured: it must return
 * status and say needle on stderr. Returns how long it took, in ms. */
static int64_t expect_launch(int n_workers, tp_worker_fn fn, void *ctx, int status,
                             const char *needle) {
  tu_capture cap;
  int64_t start = tu_now_ms();
  tu_capture_begin(&cap);
  int got = tp_launch(n_workers, fn, ctx);
  char *err = tu_capture_end(&cap);
  int64_t took = tu_now_ms() - start;
  assert_int_equal(got, status);
  assert_non_null(err);
  if (!strstr(err, needle)) fail_msg("'%s' not in stderr: %s", needle, err);
  free(err);
  return took;
}

/* Rank 1 fails at once; the others would sleep for 30 s. */
static int one_fails(const tp_launch_env *env, void *ctx) {
  record(env, ctx);
  if (env->rank == 1) return 3;
  tu_sleep_ms(30000);
  return 0;
}

static void test_one_fails(void **state) {
  (void)state;
  clear_external_env();
  board *b = shared_board();
  int64_t took = expect_launch(WORKERS, one_fails, b, 3, "tpbench: rank 1 failed: exit status 3\n");
  /* The sleepers were stopped, not waited for. */
  if (took > 5000) fail_msg("the launcher took %lld ms", (long long)took);
  /* Reaped: gone, not zombies (a rank stopped before it recorded its pid left 0). */
  for (int r = 0; r < WORKERS; r++)
    if (b->pid[r] > 0) assert_int_equal(kill(b->pid[r], 0), -1);
}

static int one_killed(const tp_launch_env *env, void *ctx) {
  record(env, ctx);
  if (env->rank == 2) kill(getpid(), SIGKILL);
  tu_sleep_ms(30000);
  return 0;
}

static void test_one_killed(void **state) {
  (void)state;
  clear_external_env();
  expect_launch(WORKERS, one_killed, shared_board(), 128 + SIGKILL,
                "tpbench: rank 2 failed: killed by signal SIGKILL");
}

/* Rank 0 fails; rank 1 ignores SIGTERM and must be killed after the grace. */
static int stubborn(const tp_launch_env *env, void *ctx) {
  record(env, ctx);
  if (env->rank == 0) {
    tu_sleep_ms(200); /* let rank 1 install its SIG_IGN first */
    return 1;
  }
  signal(SIGTERM, SIG_IGN);
  tu_sleep_ms(60000);
  return 0;
}

static void test_stubborn_worker_killed(void **state) {
  (void)state;
  clear_external_env();
  int64_t took = expect_launch(2, stubborn, shared_board(), 1, "rank 1 did not stop");
  assert_true(took >= TP_LAUNCH_KILL_GRACE_MS);
  assert_true(took < TP_LAUNCH_KILL_GRACE_MS + 4000);
}

static int sleeper(const tp_launch_env *env, void *ctx) {
  record(env, ctx);
  tu_sleep_ms(30000);
  return 0;
}

/* Runs tp_launch(2, sleeper) in a child of the test, so that the test
 * process is not the one signalled; returns that child's pid once both
 * workers are up. ignore_sigint: the launcher starts with SIGINT ignored. */
static pid_t start_launcher(board *b, int ignore_sigint) {
  pid_t launcher = fork();
  assert_true(launcher >= 0);
  if (launcher == 0) {
    if (ignore_sigint) signal(SIGINT, SIG_IGN);
    FILE *quiet = freopen("/dev/null", "w", stderr);
    (void)quiet;
    _exit(tp_launch(2, sleeper, b));
  }
  int64_t deadline = tu_now_ms() + 10000;
  while (!(b->ran[0] && b->ran[1]) && tu_now_ms() < deadline) tu_sleep_ms(10);
  assert_true(b->ran[0] && b->ran[1]);
  return launcher;
}

static void test_sigint_forwarded(void **state) {
  (void)state;
  clear_external_env();
  board *b = shared_board();
  pid_t launcher = start_launcher(b, 0);
  int64_t start = tu_now_ms();
  kill(launcher, SIGINT);
  int status = tu_wait_child(launcher, 10000);
  assert_int_not_equal(status, -1);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 128 + SIGINT);
  assert_true(tu_now_ms() - start < 3000);
  /* Reaped by the launcher: gone, not zombies. */
  for (int r = 0; r < 2; r++) assert_int_equal(kill(b->pid[r], 0), -1);
}

static void test_ignored_sigint_stays_ignored(void **state) {
  (void)state;
  clear_external_env();
  board *b = shared_board();
  pid_t launcher = start_launcher(b, 1);
  kill(launcher, SIGINT);
  tu_sleep_ms(500);
  int status = 0;
  assert_int_equal(waitpid(launcher, &status, WNOHANG), 0); /* still running */
  for (int r = 0; r < 2; r++) assert_int_equal(kill(b->pid[r], 0), 0);
  int64_t start = tu_now_ms();
  kill(launcher, SIGTERM);
  status = tu_wait_child(launcher, 10000);
  assert_int_not_equal(status, -1);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 128 + SIGTERM);
  assert_true(tu_now_ms() - start < 3000);
}

static void test_no_orphans(void **state) {
  (void)state;
  clear_external_env();
  /* Orphans come to this process instead of init, so it can watch them die. */
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  board *b = shared_board();
  pid_t launcher = start_launcher(b, 0);
  kill(launcher, SIGKILL);
  assert_int_not_equal(tu_wait_child(launcher, 5000), -1);
  for (int r = 0; r < 2; r++) {
    int status = tu_wait_child(b->pid[r], 5000);
    assert_int_not_equal(status, -1); /* died without being killed by the test */
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

typedef struct external_seen {
  pid_t pid;
  tp_launch_env env;
  int calls;
} external_seen;

static int external_worker(const tp_launch_env *env, void *ctx) {
  external_seen *seen = ctx;
  seen->pid = getpid();
  seen->env = *env;
  seen->calls++;
  return 7;
}

/* An external launcher's environment: the given variables set (NULL: unset),
 * and LOCAL_RANK 0 with both RANK and WORLD_SIZE, as torchrun sets it;
 * nothing else of the job's. */
static void set_external_env(const char *rank, const char *world, const char *addr,
                             const char *port) {
  clear_external_env();
  if (rank) setenv("RANK", rank, 1);
  if (world) setenv("WORLD_SIZE", world, 1);
  if (rank && world) setenv("LOCAL_RANK", "0", 1);
  if (addr) setenv("MASTER_ADDR", addr, 1);
  if (port) setenv("MASTER_PORT", port, 1);
}

static void test_external_launcher(void **state) {
  (void)state;
  set_external_env("1", "4", "node17", "29500");
  /* Without LOCAL_RANK, RANK is the GPU index only when every rank is on this host. */
  unsetenv("LOCAL_RANK");
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  setenv("TPBENCH_JOB_SECRET", ENV_SECRET_HEX, 1);
  unsetenv("NCCL_NVLS_ENABLE");
  external_seen seen = {0};
  /* n_workers is ignored: the job's size comes from WORLD_SIZE. */
  assert_int_equal(tp_launch(2, external_worker, &seen), 7);
  assert_int_equal(seen.calls, 1);
  assert_int_equal(seen.pid, getpid()); /* in this process, nothing forked */
  assert_int_equal(seen.env.rank, 1);
  assert_int_equal(seen.env.world, 4);
  assert_int_equal(seen.env.local_rank, 1); /* one host: LOCAL_RANK defaults to RANK */
  assert_string_equal(seen.env.launcher, "torchrun");
  assert_string_equal(seen.env.master_addr, "node17");
  assert_int_equal(seen.env.master_port, 29500);
  assert_int_equal(seen.env.external, 1);
  assert_true(env_is("NCCL_NVLS_ENABLE", "0"));
  /* The secret from the environment is the one the rendezvous uses. */
  assert_int_equal(seen.env.secret.len, 32);
  assert_int_equal(seen.env.secret.bytes[31], 0x01);
  assert_non_null(tp_rdzv_job_secret());
  assert_memory_equal(tp_rdzv_job_secret()->bytes, seen.env.secret.bytes, 32);
  setenv("LOCAL_RANK", "0", 1);
  assert_int_equal(tp_launch(2, external_worker, &seen), 7);
  assert_int_equal(seen.env.local_rank, 0);
  clear_external_env();
}

/* A malformed external environment: usage status 2, fn never runs. */
static void expect_bad_env(const char *rank, const char *world, const char *addr, const char *port,
                           const char *needle) {
  set_external_env(rank, world, addr, port);
  external_seen seen = {0};
  expect_launch(2, external_worker, &seen, TP_LAUNCH_USAGE_STATUS, needle);
  assert_int_equal(seen.calls, 0);
  clear_external_env();
}

static void test_external_malformed(void **state) {
  (void)state;
  expect_bad_env("1", NULL, "h", "1", "RANK is set but WORLD_SIZE is not");
  expect_bad_env(NULL, "2", "h", "1", "WORLD_SIZE is set but RANK is not");
  expect_bad_env("2", "2", "h", "1", "RANK: 2 is out of range [0, 1]");
  expect_bad_env("x", "2", "h", "1", "RANK: 'x' is not a whole number");
  expect_bad_env("0", "0", "h", "1", "WORLD_SIZE: 0 is out of range");
  expect_bad_env("0", "2", NULL, "1", "MASTER_ADDR is not set");
  expect_bad_env("0", "2", "h", NULL, "MASTER_PORT is not set");
  expect_bad_env("0", "2", "h", "70000", "MASTER_PORT: 70000 is out of range");
}

/* An external launcher's rank without the job's secret, or with a secret
 * file others can read, refuses to start and says how to set one. */
static void test_external_needs_secret(void **state) {
  (void)state;
  expect_bad_env("0", "2", "h", "29500", "set TPBENCH_JOB_SECRET to 64 hex digits");
  char path[] = "/tmp/tp_secret_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, ENV_SECRET_HEX, strlen(ENV_SECRET_HEX)),
                   (ssize_t)strlen(ENV_SECRET_HEX));
  close(fd);
  assert_int_equal(chmod(path, 0644), 0);
  set_external_env("0", "2", "h", "29500");
  setenv("TPBENCH_JOB_SECRET_FILE", path, 1);
  external_seen seen = {0};
  expect_launch(2, external_worker, &seen, TP_LAUNCH_USAGE_STATUS, "chmod 600");
  assert_int_equal(seen.calls, 0);
  /* Owner-only: accepted. */
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(tp_launch(2, external_worker, &seen), 7);
  assert_int_equal(seen.env.secret.len, 32);
  clear_external_env();
  unlink(path);
}

/* Launches once with the environment as set; fn must run once (status 7)
 * and *seen then holds what it was given. */
static void expect_joined(external_seen *seen) {
  memset(seen, 0, sizeof *seen);
  setenv("TPBENCH_JOB_SECRET", ENV_SECRET_HEX, 1);
  assert_int_equal(tp_launch(2, external_worker, seen), 7);
  assert_int_equal(seen->calls, 1);
  assert_int_equal(seen->pid, getpid());
  assert_int_equal(seen->env.external, 1);
}

/* Launches with the environment as set (a secret added): usage status 2,
 * needle on stderr, fn never run. */
static void expect_refused(const char *needle) {
  setenv("TPBENCH_JOB_SECRET", ENV_SECRET_HEX, 1);
  external_seen seen = {0};
  expect_launch(2, external_worker, &seen, TP_LAUNCH_USAGE_STATUS, needle);
  assert_int_equal(seen.calls, 0);
}

/* A faked srun task: rank, size and local id, the job's node list and id,
 * and the step srun made. */
static void set_slurm_env(const char *procid, const char *ntasks, const char *localid,
                          const char *nodelist, const char *job_id) {
  clear_external_env();
  setenv("SLURM_STEP_ID", "0", 1);
  if (procid) setenv("SLURM_PROCID", procid, 1);
  if (ntasks) setenv("SLURM_NTASKS", ntasks, 1);
  if (localid) setenv("SLURM_LOCALID", localid, 1);
  if (nodelist) setenv("SLURM_NODELIST", nodelist, 1);
  if (job_id) setenv("SLURM_JOB_ID", job_id, 1);
}

/* Task 5 of 8 on the second node of node[03-04]: the master is the first
 * host of the node list, the port derived from the job id. */
static void test_slurm_launch(void **state) {
  (void)state;
  external_seen seen;
  set_slurm_env("5", "8", "1", "node[03-04]", "123456");
  expect_joined(&seen);
  assert_string_equal(seen.env.launcher, "Slurm");
  assert_int_equal(seen.env.rank, 5);
  assert_int_equal(seen.env.world, 8);
  assert_int_equal(seen.env.local_rank, 1);
  assert_string_equal(seen.env.master_addr, "node03");
  assert_int_equal(seen.env.master_port, TP_LAUNCH_SLURM_PORT_BASE + 3456);
  /* The step's node list before the job's; MASTER_ADDR and MASTER_PORT before both. */
  setenv("SLURM_STEP_NODELIST", "a1,b[2-3]", 1);
  expect_joined(&seen);
  assert_string_equal(seen.env.master_addr, "a1");
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "29400", 1);
  expect_joined(&seen);
  assert_string_equal(seen.env.master_addr, "10.0.0.7");
  assert_int_equal(seen.env.master_port, 29400);
  clear_external_env();
}

/* A batch script's own variables (no step: srun was not used) are no job's
 * ranks: tpbench starts its own workers, whatever SLURM_PROCID says. */
static void test_slurm_batch_script_is_not_a_rank(void **state) {
  (void)state;
  set_slurm_env("0", "8", "0", "node[1-2]", "77");
  unsetenv("SLURM_STEP_ID");
  setenv("TPBENCH_JOB_SECRET", ENV_SECRET_HEX, 1);
  tp_launch_env env;
  int present = 1;
  assert_int_equal(tp_launch_env_from_environment(&env, &present), TP_OK);
  assert_int_equal(present, 0);
  setenv("SLURM_STEPID", "3", 1); /* the older name of the step id counts too */
  assert_int_equal(tp_launch_env_from_environment(&env, &present), TP_OK);
  assert_int_equal(present, 1);
  assert_string_equal(env.launcher, "Slurm");
  clear_external_env();
}

static void test_slurm_malformed(void **state) {
  (void)state;
  set_slurm_env("0", NULL, "0", "n1", "1");
  expect_refused("SLURM_PROCID is set but SLURM_NTASKS is not");
  set_slurm_env(NULL, "2", "0", "n1", "1");
  expect_refused("SLURM_NTASKS is set but SLURM_PROCID is not");
  set_slurm_env("1", "2", NULL, "n1", "1");
  expect_refused("SLURM_LOCALID is not set: with SLURM_NTASKS 2 the ranks may span hosts");
  set_slurm_env("1", "2", "2", "n1", "1");
  expect_refused("SLURM_LOCALID: 2 is out of range [0, 1]");
  set_slurm_env("2", "2", "0", "n1", "1");
  expect_refused("SLURM_PROCID: 2 is out of range [0, 1]");
  set_slurm_env("0", "2", "0", "node[1-2", "1");
  expect_refused("host list 'node[1-2': a '[' without its ']'");
  set_slurm_env("0", "2", "0", NULL, "1");
  expect_refused("neither MASTER_ADDR nor SLURM_NODELIST is set");
  set_slurm_env("0", "2", "0", "n1", NULL);
  expect_refused("MASTER_PORT is not set: the external launcher must set it (or SLURM_JOB_ID");
  clear_external_env();
}

static void set_ompi_env(const char *rank, const char *size, const char *local_rank,
                         const char *local_size) {
  clear_external_env();
  if (rank) setenv("OMPI_COMM_WORLD_RANK", rank, 1);
  if (size) setenv("OMPI_COMM_WORLD_SIZE", size, 1);
  if (local_rank) setenv("OMPI_COMM_WORLD_LOCAL_RANK", local_rank, 1);
  if (local_size) setenv("OMPI_COMM_WORLD_LOCAL_SIZE", local_size, 1);
}

static void test_open_mpi_launch(void **state) {
  (void)state;
  external_seen seen;
  /* Two hosts of two ranks: MASTER_ADDR names rank 0's host. */
  set_ompi_env("3", "4", "1", "2");
  setenv("MASTER_ADDR", "gpu-a", 1);
  expect_joined(&seen);
  assert_string_equal(seen.env.launcher, "Open MPI");
  assert_int_equal(seen.env.rank, 3);
  assert_int_equal(seen.env.world, 4);
  assert_int_equal(seen.env.local_rank, 1);
  assert_string_equal(seen.env.master_addr, "gpu-a");
  assert_int_equal(seen.env.master_port, TP_LAUNCH_DEFAULT_PORT);
  /* Every rank on one host: loopback without MASTER_ADDR. */
  set_ompi_env("2", "4", "2", "4");
  expect_joined(&seen);
  assert_string_equal(seen.env.master_addr, "127.0.0.1");
  clear_external_env();
}

static void test_open_mpi_malformed(void **state) {
  (void)state;
  set_ompi_env("3", "4", "1", "2");
  expect_refused("an Open MPI job over several hosts must name rank 0's host");
  set_ompi_env("3", NULL, "1", "2");
  expect_refused("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
  set_ompi_env("3", "4", NULL, "2");
  setenv("MASTER_ADDR", "gpu-a", 1);
  expect_refused("OMPI_COMM_WORLD_LOCAL_RANK is not set");
  set_ompi_env("3", "4", "2", "2");
  setenv("MASTER_ADDR", "gpu-a", 1);
  expect_refused("OMPI_COMM_WORLD_LOCAL_RANK: 2 is out of range [0, 1]");
  clear_external_env();
}

/* torchrun inside srun, mpirun inside a Slurm allocation: the inner
 * launcher's variables win; a half-set inner launcher is refused, not
 * passed over for the outer one. */
static void test_launcher_precedence(void **state) {
  (void)state;
  external_seen seen;
  set_slurm_env("1", "2", "0", "node[1-2]", "77");
  setenv("RANK", "6", 1);
  setenv("WORLD_SIZE", "16", 1);
  setenv("LOCAL_RANK", "2", 1);
  setenv("MASTER_ADDR", "node1", 1);
  setenv("MASTER_PORT", "29501", 1);
  expect_joined(&seen);
  assert_string_equal(seen.env.launcher, "torchrun");
  assert_int_equal(seen.env.rank, 6);
  assert_int_equal(seen.env.world, 16);
  assert_int_equal(seen.env.local_rank, 2);
  set_slurm_env("0", "1", "0", "node1", "77"); /* the batch script's own variables */
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  expect_joined(&seen);
  assert_string_equal(seen.env.launcher, "Open MPI");
  assert_int_equal(seen.env.rank, 2);
  assert_int_equal(seen.env.world, 4);
  set_slurm_env("1", "2", "0", "node[1-2]", "77");
  setenv("RANK", "1", 1);
  expect_refused("RANK is set but WORLD_SIZE is not");
  clear_external_env();
}

/* LOCAL_RANK is never RANK on a second host: without it and without
 * LOCAL_WORLD_SIZE equal to WORLD_SIZE the rank refuses; RANK/WORLD_SIZE
 * exported by hand inside an srun job (every task gets the same) are named
 * as the conflict they are. */
static void test_local_rank_not_guessed(void **state) {
  (void)state;
  set_external_env("5", "8", "h", "29500");
  unsetenv("LOCAL_RANK");
  expect_refused("LOCAL_RANK is not set: with WORLD_SIZE 8 the ranks may span hosts, and RANK 5 "
                 "is no GPU index on a second host");
  setenv("LOCAL_WORLD_SIZE", "4", 1); /* two hosts of four */
  expect_refused("LOCAL_RANK is not set");
  setenv("LOCAL_RANK", "4", 1);
  expect_refused("LOCAL_RANK: 4 is out of range [0, 3]");
  set_slurm_env("1", "2", "1", "node[1-2]", "77");
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "node1", 1);
  setenv("MASTER_PORT", "29500", 1);
  expect_refused("RANK and WORLD_SIZE are set but LOCAL_RANK is not, inside a Slurm job");
  clear_external_env();
}

/* Only rank 0 of an external launcher's job opens the database; tpbench's
 * own workers' parent and a malformed environment (reported elsewhere) do. */
static void test_who_opens_the_database(void **state) {
  (void)state;
  clear_external_env();
  assert_true(tp_launch_opens_database());
  set_slurm_env("1", "2", "1", "node[1-2]", "5");
  setenv("TPBENCH_JOB_SECRET", ENV_SECRET_HEX, 1);
  assert_false(tp_launch_opens_database());
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_LOCALID", "0", 1);
  assert_true(tp_launch_opens_database());
  set_ompi_env("3", "4", "1", "2");
  setenv("MASTER_ADDR", "gpu-a", 1);
  setenv("TPBENCH_JOB_SECRET", ENV_SECRET_HEX, 1);
  assert_false(tp_launch_opens_database());
  unsetenv("OMPI_COMM_WORLD_SIZE"); /* malformed: the command says so, exit 2 */
  assert_true(tp_launch_opens_database());
  clear_external_env();
}

static int child_global;

static int child_returns_42(void *ctx) {
  child_global = *(int *)ctx; /* changes the child's copy only */
  return 42;
}

static int child_dies(void *ctx) {
  (void)ctx;
  kill(getpid(), SIGKILL);
  return 0;
}

static int child_reports(void *ctx, void *out, size_t cap, size_t *len) {
  (void)ctx;
  snprintf(out, cap, "4 GPUs");
  *len = strlen(out) + 1;
  return 0;
}

static void test_run_in_child(void **state) {
  (void)state;
  int value = 5, status = -1;
  assert_int_equal(tp_run_in_child(child_returns_42, &value, &status), TP_OK);
  assert_int_equal(status, 42);
  assert_int_equal(child_global, 0);
  assert_int_equal(tp_run_in_child(child_dies, NULL, &status), TP_OK);
  assert_int_equal(status, 128 + SIGKILL);
  char out[32] = {0};
  size_t len = 0;
  assert_int_equal(tp_run_in_child_output(child_reports, NULL, out, sizeof out, &len, &status),
                   TP_OK);
  assert_int_equal(status, 0);
  assert_int_equal(len, 7);
  assert_string_equal(out, "4 GPUs");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_succeed),
      cmocka_unit_test(test_one_fails),
      cmocka_unit_test(test_one_killed),
      cmocka_unit_test(test_stubborn_worker_killed),
      cmocka_unit_test(test_sigint_forwarded),
      cmocka_unit_test(test_ignored_sigint_stays_ignored),
      cmocka_unit_test(test_no_orphans),
      cmocka_unit_test(test_external_launcher),
      cmocka_unit_test(test_external_malformed),
      cmocka_unit_test(test_external_needs_secret),
      cmocka_unit_test(test_slurm_launch),
      cmocka_unit_test(test_slurm_malformed),
      cmocka_unit_test(test_slurm_batch_script_is_not_a_rank),
      cmocka_unit_test(test_open_mpi_launch),
      cmocka_unit_test(test_open_mpi_malformed),
      cmocka_unit_test(test_launcher_precedence),
      cmocka_unit_test(test_local_rank_not_guessed),
      cmocka_unit_test(test_who_opens_the_database),
      cmocka_unit_test(test_workers_rendezvous_with_the_secret),
      cmocka_unit_test(test_run_in_child),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
