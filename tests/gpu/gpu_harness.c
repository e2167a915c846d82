/*
 * gpu_harness.c — fork-per-rank runner for GPU tests (see gpu_harness.h).
 */
#include "tests/gpu/gpu_harness.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/tp_log.h"

int gpu_device_count(void) {
  const int devices = tp_count_devices_in_child();
  /* shared: every rank on device 0, so the slots are not the devices (gpu_harness.h) */
  if (gpu_share_one_device() && devices >= 1 && devices < GPU_SHARED_RANK_SLOTS)
    return GPU_SHARED_RANK_SLOTS;
  return devices;
}

tp_rc gpu_exchange(void *ctx, const void *send, size_t bytes, void *recv) {
  return tp_rdzv_allgather((tp_rdzv *)ctx, send, bytes, recv);
}

static int worker(int rank, int world, int port, gpu_body_fn body, void *ctx) {
  char tag[32];
  snprintf(tag, sizeof tag, "rank %d", rank);
  tp_log_set_tag(tag);
  tp_rdzv *rdzv = NULL;
  if (tp_rdzv_connect("127.0.0.1", port, rank, world, 60000, &rdzv) != TP_OK) {
    fprintf(stderr, "rank %d: rendezvous: %s\n", rank, tp_last_error());
    return 1;
  }
  ncclUniqueId id;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "rank 0: ncclGetUniqueId failed\n");
    return 1;
  }
  if (tp_rdzv_broadcast(rdzv, 0, &id, sizeof id) != TP_OK) {
    fprintf(stderr, "rank %d: broadcast: %s\n", rank, tp_last_error());
    return 1;
  }
  tp_group *group = NULL;
  const int device = gpu_share_one_device() ? 0 : rank;
  if (tp_group_create(rank, world, device, &id, gpu_exchange, rdzv, &group) != TP_OK) {
    fprintf(stderr, "rank %d: group: %s\n", rank, tp_last_error());
    return 1;
  }
  int rc = body(group, rdzv, ctx);
  tp_group_destroy(group);
  tp_rdzv_close(rdzv);
  return rc;
}

static int free_port(void) {
  int port = 0;
  if (tp_find_free_port(&port) != TP_OK) return 29500 + (int)(getpid() % 1000);
  return port;
}

int gpu_share_one_device(void) {
  const char *v = getenv("TPBENCH_TEST_SHARE_GPU");
  return v && strcmp(v, "1") == 0;
}

int gpu_shared_lacks_windows(const char *what) {
  if (!gpu_share_one_device()) return 0;
  printf("%s: NCCL symmetric windows need the ranks inside one NCCL host, and "
         "TPBENCH_TEST_SHARE_GPU makes each rank a host of its own: skipped\n",
         what);
  return 1;
}

/* A worker sharing device 0: NCCL refuses two ranks of one host on one GPU,
 * so each rank names a host of its own, reached over loopback sockets. */
static void share_device_env(int rank) {
  char host[48];
  snprintf(host, sizeof host, "tpbench-shared-gpu-rank-%d", rank);
  setenv("NCCL_HOSTID", host, 1);
  setenv("NCCL_IB_DISABLE", "1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

/* Signals every started worker but `except` (one that has ended already). */
static void stop_workers(const pid_t *pids, int n, pid_t except) {
  for (int r = 0; r < n; ++r)
    if (pids[r] > 0 && pids[r] != except) kill(pids[r], SIGTERM);
}

static int rank_of(const pid_t *pids, int n, pid_t pid) {
  for (int r = 0; r < n; ++r)
    if (pids[r] == pid) return r;
  return -1;
}

/* Waits for the n workers; the first that fails is named and the others stopped. */
static int wait_workers(const pid_t *pids, int n) {
  int failed = 0;
  for (int done = 0; done < n; ++done) {
    int status = 0;
    const pid_t pid = wait(&status);
    if (pid < 0) break;
    const int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !failed) {
      failed = 1;
      fprintf(stderr, "gpu test: rank %d of %d failed (%s %d); stopping the others\n",
              rank_of(pids, n, pid), n, WIFEXITED(status) ? "exit status" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      stop_workers(pids, n, pid);
    }
  }
  return failed;
}

/* A forked worker's process: its environment, then the body; never returns. */
_Noreturn static void worker_process(int rank, int world, int port, gpu_body_fn body, void *ctx) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* The ranks share one pipe: line buffering makes each line one write, and a write of a line
   * (shorter than PIPE_BUF) is atomic, so one rank's line never cuts another's (block buffering
   * did, and a rank's verdict then read as another's). */
  if (setvbuf(stdout, NULL, _IOLBF, 0) != 0)
    fprintf(stderr, "rank %d: setvbuf(stdout, line buffered) failed\n", rank);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  if (gpu_share_one_device()) share_device_env(rank);
  const int rc = worker(rank, world, port, body, ctx);
  fflush(NULL);
  _exit(rc);
}

int gpu_run_group(int world, gpu_body_fn body, void *ctx) {
  if (world < 1 || world > GPU_MAX_GROUP) {
    fprintf(stderr, "gpu test: a group of %d ranks (1 to %d): not run\n", world, GPU_MAX_GROUP);
    return 1;
  }
  const int port = free_port();
  /* The ranks inherit one fresh job secret, as tpbench's launcher hands it. */
  tp_rdzv_secret secret;
  if (tp_rdzv_secret_generate(&secret) != TP_OK) {
    fprintf(stderr, "job secret: %s\n", tp_last_error());
    return 1;
  }
  tp_rdzv_set_job_secret(&secret);
  pid_t pids[GPU_MAX_GROUP] = {0};
  fflush(NULL);
  for (int r = 0; r < world; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) worker_process(r, world, port, body, ctx);
    if (pids[r] < 0) {
      /* never kill(-1, ...): the workers started so far are stopped by their pids */
      fprintf(stderr, "gpu test: fork of rank %d of %d: %s\n", r, world, strerror(errno));
      pids[r] = 0;
      stop_workers(pids, r, 0);
      (void)wait_workers(pids, r);
      return 1;
    }
  }
  return wait_workers(pids, world);
}

uint16_t gpu_float_to_bf16(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)((bits + rounding) >> 16);
}

float gpu_bf16_to_float(uint16_t v) {
  uint32_t bits = (uint32_t)v << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

void gpu_fill_host(tp_dtype dt, void *buf, size_t count, uint64_t seed, float scale) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    float u = (float)(state >> 40) / 16777216.0f;
    float v = (2.0f * u - 1.0f) * scale;
    if (dt == TP_BF16) ((uint16_t *)buf)[i] = gpu_float_to_bf16(v);
    else ((float *)buf)[i] = v;
  }
}

double gpu_host_value(tp_dtype dt, const void *buf, size_t index) {
  if (dt == TP_BF16) return gpu_bf16_to_float(((const uint16_t *)buf)[index]);
  return ((const float *)buf)[index];
}

/* ---- device memory, read in a child ------------------------------------------------------ */

int gpu_device_memory(size_t *free_bytes, size_t *total_bytes) {
  *free_bytes = *total_bytes = 0;
  int fds[2];
  if (pipe(fds) != 0) return 1;
  fflush(NULL);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return 1;
  }
  if (pid == 0) {
    /* the child meets CUDA so that the caller, which forks the workers later, never does */
    close(fds[0]);
    size_t both[2] = {0, 0};
    const int ok =
        cudaSetDevice(0) == cudaSuccess && cudaMemGetInfo(&both[0], &both[1]) == cudaSuccess;
    const int sent = ok && write(fds[1], both, sizeof both) == (ssize_t)sizeof both;
    _exit(sent ? 0 : 1);
  }
  close(fds[1]);
  size_t both[2] = {0, 0};
  const int got = read(fds[0], both, sizeof both) == (ssize_t)sizeof both;
  close(fds[0]);
  int status = 0;
  const int exited =
      waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!got || !exited) return 1;
  *free_bytes = both[0];
  *total_bytes = both[1];
  return 0;
}

/* ---- cases per TP degree ------------------------------------------------------------------- */

/* One case: a test function at one degree (the case's cmocka state). */
typedef struct gpu_case {
  int degree; /* first: gpu_case_degree reads it through the state */
  gpu_case_fn fn;
  char name[96];
} gpu_case;

static int rank_slots;    /* gpu_device_count(), once */
static int cases_skipped; /* cases skipped for want of rank slots */

int gpu_case_degree(void *const *state) { return ((const gpu_case *)*state)->degree; }

void gpu_skip_case(void *const *state, const char *why) {
  printf("%s: %s: skipped\n", ((const gpu_case *)*state)->name, why);
  fflush(stdout);
  cases_skipped++;
  skip();
}

static int is_degree(long d) { return d == 1 || d == 2 || d == 4 || d == GPU_MAX_DEGREE; }

/* "2,4,8" into selected[]; 0, or GPU_TEST_USAGE with the reason (an empty list too). */
static int parse_degree_list(const char *list, int selected[GPU_MAX_DEGREE + 1]) {
  const char *at = list;
  if (!*at) {
    fprintf(stderr, "--tp '': no TP degree given (1, 2, 4 or %d)\n", GPU_MAX_DEGREE);
    return GPU_TEST_USAGE;
  }
  while (*at) {
    char *end = NULL;
    const long d = strtol(at, &end, 10);
    if (end == at || !is_degree(d) || (*end != ',' && *end != '\0')) {
      fprintf(stderr, "--tp %s: a comma-separated list of TP degrees, each 1, 2, 4 or %d\n", list,
              GPU_MAX_DEGREE);
      return GPU_TEST_USAGE;
    }
    selected[d] = 1;
    at = *end == ',' ? end + 1 : end;
  }
  return 0;
}

int gpu_parse_degrees(int argc, char **argv, int selected[GPU_MAX_DEGREE + 1], int *tp_given) {
  *tp_given = 0;
  for (int d = 0; d <= GPU_MAX_DEGREE; ++d) selected[d] = is_degree(d);
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--tp") != 0) continue;
    if (i + 1 >= argc) {
      fprintf(stderr, "--tp needs a list of TP degrees (e.g. --tp 4 or --tp 2,4,8)\n");
      return GPU_TEST_USAGE;
    }
    if (!*tp_given) memset(selected, 0, sizeof(int) * (GPU_MAX_DEGREE + 1));
    *tp_given = 1;
    const int rc = parse_degree_list(argv[++i], selected);
    if (rc) return rc;
  }
  return 0;
}

/* With TPBENCH_TEST_SHARE_GPU=1: device 0's memory now, and each rank's share of it. */
static void print_shared_memory(const char *name, int degree) {
  size_t free_bytes = 0, total_bytes = 0;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (gpu_device_memory(&free_bytes, &total_bytes) != 0) {
    printf("%s: %d rank(s) on device 0 (shared): its memory could not be read\n", name, degree);
    return;
  }
  printf("%s: %d rank(s) on device 0 (shared): %.1f GiB free of %.1f GiB, %.1f GiB per rank\n",
         name, degree, (double)free_bytes / gib, (double)total_bytes / gib,
         (double)free_bytes / gib / degree);
}

/* Every case's test function: the degree against the rank slots, then the test. */
static void run_case(void **state) {
  const gpu_case *c = *state;
  if (c->degree > rank_slots) {
    printf("%s: TP %d needs %d rank slots, %d here (%s): skipped\n", c->name, c->degree, c->degree,
           rank_slots,
           gpu_share_one_device() ? "shared device 0"
                                  : "one per GPU; TPBENCH_TEST_SHARE_GPU=1 puts "
                                    "every rank on device 0");
    fflush(stdout);
    cases_skipped++;
    skip();
    return; /* skip() does not return; this tells the analyser so */
  }
  if (gpu_share_one_device()) print_shared_memory(c->name, c->degree);
  else printf("%s: %d rank(s), one per GPU (%d visible)\n", c->name, c->degree, rank_slots);
  fflush(stdout);
  c->fn(state);
}

/* The cases of tests at the selected degrees, in test order, then degree order. */
static size_t build_cases(const gpu_tp_test *tests, size_t n_tests,
                          const int selected[GPU_MAX_DEGREE + 1], gpu_case *cases,
                          struct CMUnitTest *units) {
  size_t n = 0;
  for (size_t t = 0; t < n_tests; ++t)
    for (int d = tests[t].min_degree; d <= tests[t].max_degree && d <= GPU_MAX_DEGREE; ++d) {
      if (d < 1 || !selected[d]) continue;
      gpu_case *c = &cases[n];
      c->degree = d;
      c->fn = tests[t].fn;
      snprintf(c->name, sizeof c->name, "%s/tp%d", tests[t].name, d);
      units[n] = (struct CMUnitTest){c->name, run_case, NULL, NULL, c};
      n++;
    }
  return n;
}

static void print_slots(const int selected[GPU_MAX_DEGREE + 1]) {
  printf("rank slots: %d (%s); degrees selected:", rank_slots,
         gpu_share_one_device()
             ? "TPBENCH_TEST_SHARE_GPU=1: every rank on device 0, an NCCL host of its own"
             : "one rank per GPU");
  for (int d = 1; d <= GPU_MAX_DEGREE; ++d)
    if (selected[d]) printf(" %d", d);
  printf("\n");
}

int gpu_run_tp_tests(const char *group, const gpu_tp_test *tests, size_t n_tests, int argc,
                     char **argv) {
  int selected[GPU_MAX_DEGREE + 1], tp_given = 0;
  const int usage = gpu_parse_degrees(argc, argv, selected, &tp_given);
  if (usage) return usage;
  rank_slots = gpu_device_count();
  if (rank_slots == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  print_slots(selected);
  const size_t most = n_tests * GPU_MAX_DEGREE;
  gpu_case *cases = calloc(most ? most : 1, sizeof *cases);
  struct CMUnitTest *units = calloc(most ? most : 1, sizeof *units);
  if (!cases || !units) {
    free(cases);
    free(units);
    fprintf(stderr, "no host memory for %zu cases\n", most);
    return 1;
  }
  const size_t n = build_cases(tests, n_tests, selected, cases, units);
  cases_skipped = 0;
  const int failed = n ? _cmocka_run_group_tests(group, units, n, NULL, NULL) : 0;
  const int all_skipped = failed == 0 && (size_t)cases_skipped == n;
  if (all_skipped)
    printf("%s: none of its %zu case(s) could run here (%d rank slot(s)): skipped\n", group, n,
           rank_slots);
  free(cases);
  free(units);
  return all_skipped ? GPU_TEST_SKIP : failed;
}

int64_t gpu_query_int(const char *db_path, const char *sql) {
  sqlite3 *db = NULL;
  int64_t v = -1;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    else printf("query %s: %s\n", sql, sqlite3_errmsg(db));
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return v;
}
