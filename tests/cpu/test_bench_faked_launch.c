/*
 * test_bench_faked_launch.c — the tpbench binary under faked Slurm and Open
 * MPI environments, as srun and mpirun start it: two ranks at once, each
 * reaching the point where it needs a GPU and naming its rank, world,
 * launcher and local rank there (a build without CUDA says so right after
 * reading the environment; a CUDA build on a machine without a GPU meets
 * its peer at the rendezvous first, on the node list's first host). A
 * malformed environment is a usage error (exit 2) before anything starts.
 * On a machine with a GPU a CUDA build would really run: skipped there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/launch/rendezvous.h"
#include "tests/cpu/run_program.h"

static const char SECRET[] = "0123456789abcdef0123456789abcdef";

typedef struct rank_run {
  pid_t pid;
  char err_path[64];
} rank_run;

/* Starts `tpbench ops` with exactly the environment given (NULL-terminated)
 * plus PATH, stderr into a file. */
static void start_rank(rank_run *r, char *const extra_env[], const char *db) {
  snprintf(r->err_path, sizeof r->err_path, "/tmp/tp_faked_launch_XXXXXX");
  int fd = mkstemp(r->err_path);
  assert_true(fd >= 0);
  char *env[32];
  int n = 0;
  static char path_var[] = "PATH=/usr/bin:/bin";
  env[n++] = path_var;
  for (int i = 0; extra_env[i] && n < 31; i++) env[n++] = extra_env[i];
  env[n] = NULL;
  char *argv[] = {
      (char *)TPBENCH_EXE, "ops", "--db",     (char *)db, "--models", "debug", "--tokens", "256",
      "--iters",           "2",   "--warmup", "1",        NULL};
  fflush(NULL);
  r->pid = fork();
  assert_true(r->pid >= 0);
  if (r->pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(argv[0], argv, env);
    _exit(127);
  }
  close(fd);
}

/* Waits for the rank (60 s at most) and returns its exit status and stderr. */
static int finish_rank(rank_run *r, char **err) {
  int status = -1;
  for (int waited = 0; waited < 600; waited++) {
    if (waitpid(r->pid, &status, WNOHANG) == r->pid) break;
    usleep(100000);
    status = -1;
  }
  if (status == -1) {
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
  }
  FILE *f = fopen(r->err_path, "r");
  if (f) fseek(f, 0, SEEK_END); /* rp_slurp reads up to the position */
  *err = f ? rp_slurp(f) : NULL;
  unlink(r->err_path);
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int gpu_present(void) { return access("/dev/nvidiactl", F_OK) == 0; }

/* Both ranks of one faked job at once: each exits 1 at the GPU, its stderr
 * naming "rank R of 2 (LAUNCHER" and its local rank. */
static void run_two_ranks(char *const env0[], char *const env1[], const char *launcher) {
  char dir[] = "/tmp/tp_faked_launch_dbXXXXXX";
  assert_non_null(mkdtemp(dir));
  char db[96];
  snprintf(db, sizeof db, "%s/job.db", dir);
  rank_run r[2];
  start_rank(&r[0], env0, db);
  start_rank(&r[1], env1, db);
  for (int k = 0; k < 2; k++) {
    char *err = NULL;
    int status = finish_rank(&r[k], &err);
    assert_non_null(err);
    char want[64];
    snprintf(want, sizeof want, "rank %d of 2 (%s", k, launcher);
    if (status != 1 || !strstr(err, want) || !strstr(err, k ? "local rank 1" : "local rank 0"))
      fail_msg("rank %d: exit %d, stderr: %s", k, status, err);
    printf("rank %d: exit %d: %s", k, status, err);
    free(err);
  }
  /* Only rank 0 may open the database; here it never got that far. */
  unlink(db);
  rmdir(dir);
}

/* The rendezvous' variables every faked task of one job shares: a free port and the secret. */
typedef struct job_vars {
  char port[32], secret[80];
} job_vars;

static void make_job_vars(job_vars *v) {
  int port = 0;
  assert_int_equal(tp_find_free_port(&port), TP_OK);
  snprintf(v->port, sizeof v->port, "MASTER_PORT=%d", port);
  snprintf(v->secret, sizeof v->secret, "TPBENCH_JOB_SECRET=%s", SECRET);
}

static void test_faked_slurm(void **state) {
  (void)state;
  if (TP_TEST_CUDA_BUILD && gpu_present()) skip();
  job_vars v;
  make_job_vars(&v);
  char *port_var = v.port, *secret_var = v.secret;
  char *env0[] = {"SLURM_STEP_ID=0",
                  "SLURM_PROCID=0",
                  "SLURM_NTASKS=2",
                  "SLURM_LOCALID=0",
                  "SLURM_NODELIST=localhost,nodeb[01-02]",
                  "SLURM_JOB_ID=4242",
                  port_var,
                  secret_var,
                  NULL};
  char *env1[] = {"SLURM_STEP_ID=0",
                  "SLURM_PROCID=1",
                  "SLURM_NTASKS=2",
                  "SLURM_LOCALID=1",
                  "SLURM_NODELIST=localhost,nodeb[01-02]",
                  "SLURM_JOB_ID=4242",
                  port_var,
                  secret_var,
                  NULL};
  run_two_ranks(env0, env1, "Slurm");
}

static void test_faked_open_mpi(void **state) {
  (void)state;
  if (TP_TEST_CUDA_BUILD && gpu_present()) skip();
  job_vars v;
  make_job_vars(&v);
  char *port_var = v.port, *secret_var = v.secret;
  char *env0[] = {"OMPI_COMM_WORLD_RANK=0",
                  "OMPI_COMM_WORLD_SIZE=2",
                  "OMPI_COMM_WORLD_LOCAL_RANK=0",
                  "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                  port_var,
                  secret_var,
                  NULL};
  char *env1[] = {"OMPI_COMM_WORLD_RANK=1",
                  "OMPI_COMM_WORLD_SIZE=2",
                  "OMPI_COMM_WORLD_LOCAL_RANK=1",
                  "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                  port_var,
                  secret_var,
                  NULL};
  run_two_ranks(env0, env1, "Open MPI");
}

/* A task without its local id: exit 2 with the reason, nothing started. */
static void test_faked_slurm_malformed(void **state) {
  (void)state;
  char secret_var[80];
  snprintf(secret_var, sizeof secret_var, "TPBENCH_JOB_SECRET=%s", SECRET);
  char *env[] = {"SLURM_STEP_ID=0",
                 "SLURM_PROCID=1",
                 "SLURM_NTASKS=2",
                 "SLURM_NODELIST=n[1-2]",
                 "SLURM_JOB_ID=1",
                 secret_var,
                 NULL};
  rank_run r;
  char never[64]; /* this process's own: two build trees' tests may run at once */
  snprintf(never, sizeof never, "/tmp/tp_faked_launch_never-%ld.db", (long)getpid());
  start_rank(&r, env, never);
  char *err = NULL;
  int status = finish_rank(&r, &err);
  if (!err) fail_msg("exit %d and no stderr", status);
  else if (status != 2 || !strstr(err, "SLURM_LOCALID is not set"))
    fail_msg("exit %d, stderr: %s", status, err);
  free(err);
  assert_int_equal(access(never, F_OK), -1);
}

/* A job of more than 16 workers cannot form its group (a tpbench group holds at most 16 ranks:
 * kernels/tp_device.h): each rank refuses it at once (exit 2, the reason), before the
 * rendezvous where it would otherwise wait for its peers; nothing is started or written. */
static void test_faked_world_beyond_group_ranks(void **state) {
  (void)state;
  if (!TP_TEST_CUDA_BUILD) skip(); /* the build without CUDA says so instead */
  job_vars v;
  make_job_vars(&v);
  char *port_var = v.port, *secret_var = v.secret;
  char *env[] = {"SLURM_STEP_ID=0",
                 "SLURM_PROCID=0",
                 "SLURM_NTASKS=32",
                 "SLURM_LOCALID=0",
                 "SLURM_NODELIST=localhost",
                 "SLURM_JOB_ID=4243",
                 port_var,
                 secret_var,
                 NULL};
  rank_run r;
  char never[64];
  snprintf(never, sizeof never, "/tmp/tp_faked_launch_wide-%ld.db", (long)getpid());
  start_rank(&r, env, never);
  char *err = NULL;
  int status = finish_rank(&r, &err);
  if (!err) fail_msg("exit %d and no stderr", status);
  else if (status != 2 || !strstr(err, "a job of 32 workers: a tpbench group holds at most 16"))
    fail_msg("exit %d, stderr: %s", status, err);
  free(err);
  assert_int_equal(access(never, F_OK), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_faked_slurm),
      cmocka_unit_test(test_faked_open_mpi),
      cmocka_unit_test(test_faked_slurm_malformed),
      cmocka_unit_test(test_faked_world_beyond_group_ranks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
