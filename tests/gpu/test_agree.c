/*
 * test_agree.c — the reliability hazards of the 2026-12-02 review, on real
 * GPUs (docs/dev/NOTES.md):
 *
 * At TP 1 (one GPU):
 * - the ledger counts a window's bytes: tp_window_alloc adopts NCCL's
 *   memory for the current owner (its live bytes rise by the window's size,
 *   a ledger free of it is refused, tp_window_free gives it back) and the
 *   window scratch is the group's with the asker's claim. Where NCCL has no
 *   symmetric memory at one rank (up to 2.28.3), the refusal is asserted
 *   instead: TP_EREJECT with NCCL's reason, nothing adopted, nothing claimed,
 *   no window kept — the test cannot pass without looking at one or the other;
 * - a group split from the world group (an FSDP mesh's TP group) makes
 *   windows alike: its planted failure is off (the knob names world ranks)
 *   and it agrees through its own exchange;
 * - the planted workspace failure (TPBENCH_TEST_FAIL_ALLOC=0:8 MiB):
 *   tp_symm_reserve below the threshold grows, above it fails as out of
 *   memory naming rank 0, the size and the planted knob, leaves the
 *   workspace empty and its memory freed in the ledger, and a later
 *   reserve grows it again;
 * - `tpbench drift` with TPBENCH_TEST_HANG_STEP=2 --timeout 5: the run
 *   ends non-zero within the timeout and a margin, says why, and has stored
 *   the hung configuration as timed out with steps 0 and 1 (and the knob in
 *   runs.test_knobs); `drift --show` names the stored steps.
 *
 * At TP 2, 4 and 8 (cases planted_failure/tpN and drift_peer_hangs/tpN,
 * gpu_harness.h; a degree above the rank slots reported skipped), the last
 * rank's planted failure (TPBENCH_TEST_FAIL_ALLOC=N-1:16 MiB):
 * - tp_window_alloc and tp_symm_reserve above the threshold fail on every
 *   rank within seconds, all naming rank N-1 and the size; rank 0 keeps no
 *   window and no memory; a window and a workspace below the threshold then
 *   work on every rank (the group is not wedged). With TPBENCH_TEST_SHARE_GPU
 *   (every rank an NCCL host of its own) NCCL gives no windows: the window
 *   half is said and left out, the workspace's runs;
 * - `tpbench ops` (8b wo, 4096 tokens, ce, --stock plain,window; plain alone
 *   on a shared GPU) with every window and workspace allocation of rank N-1
 *   failing: the run ends (no watchdog), every window and dist_gemm
 *   configuration is stored as oom with the reason naming rank N-1 of N,
 *   plain stock is ok, the knob is in runs.test_knobs;
 * - `tpbench drift` (the debug model up to TP 4, llama3-1b's heads at 8;
 *   --timeout 5 s at TP 2, 20 s beyond) with rank N-1 hung at step 2
 *   (TPBENCH_TEST_HANG_STEP=2:N-1): rank 0's watchdog records the two
 *   finished steps and the run ends non-zero.
 *
 * Runs the tpbench binary of this build. Exits 77 (skipped) without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "kernels/tp_agree.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_window.h"
#include "tests/cpu/run_program.h"
#include "tests/gpu/gpu_harness.h"

static char tpbench_exe[] = TP_BUILD_DIR "/tpbench";
#define MIB ((size_t)1024 * 1024)
/* NCCL with symmetric memory in a communicator of one rank (test_stock_window.c says why) */
enum { NCCL_ONE_RANK_WINDOWS = 22807, HANG_TIMEOUT_S = 5, HANG_MARGIN_S = 90 };

static const tp_alloc_owner TEST_OWNER = {TP_ALLOC_TEST, 7};
static const tp_alloc_owner GROUP_OWNER = {TP_ALLOC_GROUP, 0};

/* ---- checks inside the GPU workers (forked: no cmocka there) -------------------------- */

static int failures;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf(" ... %s\n", ok ? "ok" : "FAIL");
  if (!ok) failures++;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static tp_alloc_stats stats_of(tp_alloc_owner o) {
  tp_alloc_stats s;
  tp_device_stats(o, &s);
  return s;
}

/* Whether NCCL gives this group symmetric windows: never to ranks made NCCL hosts of their
 * own (TPBENCH_TEST_SHARE_GPU); at TP > 1 otherwise; at TP 1 from 2.28.7 on. */
static int windows_expected(const tp_group *g) {
  int version = 0;
  if (g->world > 1 && gpu_share_one_device()) return 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 0;
  return g->world > 1 || version >= NCCL_ONE_RANK_WINDOWS;
}

/* ---- TP 1: the ledger counts windows, or NCCL's refusal ---------------------------------- */

static void window_counted(tp_group *g, const tp_alloc_stats *before) {
  void *w = NULL;
  tp_rc rc = tp_window_alloc(g, 3 * MIB + 5, &w);
  check(rc == TP_OK, "rank %d: a window of 3 MiB + 5 bytes: %s", g->rank,
        rc == TP_OK ? "made" : tp_last_error());
  if (rc != TP_OK) return;
  const size_t bytes = g->windows[g->n_windows - 1].bytes;
  const tp_alloc_stats s = stats_of(TEST_OWNER);
  check(bytes >= 3 * MIB + 5 && s.live_bytes - before->live_bytes == (int64_t)bytes &&
            s.live_count == before->live_count + 1,
        "rank %d: the owner's live bytes rose by the window's %zu bytes (%lld)", g->rank, bytes,
        (long long)(s.live_bytes - before->live_bytes));
  check(tp_device_free(w) == TP_EINTERNAL && strstr(tp_last_message(), "another allocator"),
        "rank %d: the ledger refuses to cudaFree NCCL's memory", g->rank);
  tp_window_free(g, w);
  check(stats_of(TEST_OWNER).live_bytes == before->live_bytes,
        "rank %d: tp_window_free gave the window's bytes back", g->rank);
  const int64_t group_before = stats_of(GROUP_OWNER).live_bytes;
  void *scratch = NULL;
  rc = tp_window_scratch(g, 4 * MIB, &scratch);
  check(rc == TP_OK && stats_of(TEST_OWNER).claimed_bytes >= (int64_t)(4 * MIB) &&
            stats_of(GROUP_OWNER).live_bytes - group_before >= (int64_t)(4 * MIB),
        "rank %d: the window scratch is the group's, the asker claims 4 MiB of it", g->rank);
}

static void window_refused(tp_group *g, const tp_alloc_stats *before) {
  int64_t live_before = 0, count_before = 0, live = 0, count = 0;
  tp_alloc_totals(tp_device_ledger(), &live_before, &count_before);
  const int n_windows = g->n_windows;
  void *w = NULL;
  tp_rc rc = tp_window_alloc(g, 3 * MIB, &w);
  check(rc == TP_EREJECT && strstr(tp_last_message(), "does not support symmetric memory"),
        "rank %d: NCCL refuses windows at one rank: %s", g->rank, tp_last_message());
  void *scratch = NULL;
  rc = tp_window_scratch(g, 4 * MIB, &scratch);
  check(rc == TP_EREJECT, "rank %d: the window scratch is refused alike", g->rank);
  tp_alloc_totals(tp_device_ledger(), &live, &count);
  const tp_alloc_stats s = stats_of(TEST_OWNER);
  check(live == live_before && count == count_before && s.live_bytes == before->live_bytes &&
            s.claimed_bytes == before->claimed_bytes && g->n_windows == n_windows && !w,
        "rank %d: nothing adopted, claimed or kept after the refusal", g->rank);
}

static int ledger_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  failures = 0;
  const tp_alloc_owner outer = tp_device_enter(TEST_OWNER);
  const tp_alloc_stats before = stats_of(TEST_OWNER);
  int version = 0;
  (void)ncclGetVersion(&version);
  printf("rank %d: NCCL %d, TP %d: windows %s\n", g->rank, version, g->world,
         windows_expected(g) ? "expected" : "refused by NCCL at one rank (up to 2.28.3)");
  if (windows_expected(g)) window_counted(g, &before);
  else window_refused(g, &before);
  tp_device_leave(outer);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* A group split from the world group (an FSDP mesh's TP group: bench/gpu/layer_worker.c) makes
 * windows as the world group does: its ranks agree through the group's own exchange, and
 * the planted failure, whose knob names world ranks, is off there (a split group that kept
 * a zeroed knob failed every window of its rank 0 as "planted", then found no exchange). */
static int split_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  failures = 0;
  tp_group *split = NULL;
  tp_rc rc = tp_group_split(g, g->rank, 0, &split);
  check(rc == TP_OK, "rank %d: split a group of one: %s", g->rank,
        rc == TP_OK ? "made" : tp_last_error());
  if (rc != TP_OK) return 1;
  check(split->test_fail_alloc.rank == -1,
        "rank %d: the split group's planted failure is off (rank %d)", g->rank,
        split->test_fail_alloc.rank);
  check(split->exchange != NULL, "rank %d: the split group has an exchange to agree with", g->rank);
  const tp_alloc_owner outer = tp_device_enter(TEST_OWNER);
  const tp_alloc_stats before = stats_of(TEST_OWNER);
  if (windows_expected(split)) window_counted(split, &before);
  else window_refused(split, &before);
  tp_device_leave(outer);
  tp_group_destroy(split);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* ---- the planted allocation failure --------------------------------------------------- */

typedef struct planted {
  int failing_rank;
  size_t below, above; /* sizes under and over the knob's threshold */
} planted;

static void workspace_fails(tp_group *g, const planted *p) {
  const int64_t group_before = stats_of(GROUP_OWNER).live_bytes;
  const size_t had = tp_symm_size(g->symm);
  const double start = now_s();
  tp_rc rc = tp_symm_reserve(g->symm, p->above);
  const double took = now_s() - start;
  char says[64];
  snprintf(says, sizeof says, "failed on rank %d of %d", p->failing_rank, g->world);
  check(rc == TP_EOOM && strstr(tp_last_message(), "symmetric workspace") &&
            strstr(tp_last_message(), says) && strstr(tp_last_message(), "planted failure"),
        "rank %d: the workspace's growth to %zu bytes failed on every rank: %s", g->rank, p->above,
        tp_last_message());
  check(took < 10, "rank %d: ... within %.2f s (< 10)", g->rank, took);
  check(tp_symm_size(g->symm) == 0 &&
            stats_of(GROUP_OWNER).live_bytes == group_before - (int64_t)had,
        "rank %d: the workspace is empty and its memory freed in the ledger", g->rank);
  rc = tp_symm_reserve(g->symm, p->below);
  check(rc == TP_OK && tp_symm_size(g->symm) >= p->below,
        "rank %d: a growth to %zu bytes (below the threshold) works afterwards", g->rank, p->below);
}

static void window_fails(tp_group *g, const planted *p) {
  const tp_alloc_stats before = stats_of(TEST_OWNER);
  const int n_windows = g->n_windows;
  void *w = NULL;
  const double start = now_s();
  tp_rc rc = tp_window_alloc(g, p->above, &w);
  const double took = now_s() - start;
  char says[64];
  snprintf(says, sizeof says, "failed on rank %d of %d", p->failing_rank, g->world);
  check(rc == TP_EOOM && strstr(tp_last_message(), "ncclMemAlloc") &&
            strstr(tp_last_message(), says),
        "rank %d: a window of %zu bytes failed on every rank: %s", g->rank, p->above,
        tp_last_message());
  check(took < 10, "rank %d: ... within %.2f s (< 10)", g->rank, took);
  check(!w && g->n_windows == n_windows && stats_of(TEST_OWNER).live_bytes == before.live_bytes,
        "rank %d: no window kept, nothing left in the ledger", g->rank);
  rc = tp_window_alloc(g, p->below, &w);
  check(rc == TP_OK, "rank %d: a window of %zu bytes (below the threshold) works afterwards: %s",
        g->rank, p->below, rc == TP_OK ? "made" : tp_last_error());
  tp_window_free(g, w);
}

static int planted_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  failures = 0;
  const planted *p = ctx;
  const tp_alloc_owner outer = tp_device_enter(TEST_OWNER);
  check(g->test_fail_alloc.rank == p->failing_rank, "rank %d: the group read the knob", g->rank);
  check(tp_symm_reserve(g->symm, p->below) == TP_OK, "rank %d: a workspace below the threshold",
        g->rank);
  workspace_fails(g, p);
  if (windows_expected(g)) window_fails(g, p);
  else if (g->rank == 0)
    printf("rank 0: TP %d: no NCCL windows for ranks that are NCCL hosts of their own "
           "(TPBENCH_TEST_SHARE_GPU): the planted window failure not tried\n",
           g->world);
  tp_device_leave(outer);
  fflush(stdout);
  return failures ? 1 : 0;
}

static void run_planted(int world, int failing_rank, size_t threshold) {
  char knob[64];
  snprintf(knob, sizeof knob, "%d:%zu", failing_rank, threshold);
  assert_int_equal(setenv(TP_FAIL_ALLOC_ENV, knob, 1), 0);
  planted p = {failing_rank, threshold / 4, 2 * threshold};
  const int rc = gpu_run_group(world, planted_body, &p);
  unsetenv(TP_FAIL_ALLOC_ENV);
  assert_int_equal(rc, 0);
}

/* ---- the database ---------------------------------------------------------------------- */

/* The first column of the first row of sql (one integer); -1 when none. */
static void fresh_db(char *path, size_t cap, const char *name) {
  char dir[] = "/tmp/tpbench-agree-XXXXXX";
  assert_non_null(mkdtemp(dir));
  snprintf(path, cap, "%s/%s", dir, name);
}

/* ---- drift: a hung step --------------------------------------------------------------- */

/* The model drift trains at `gpus` ranks: the debug model's 4 KV heads split up to TP 4;
 * at 8, llama3-1b's (8 KV heads) at the same small sequence. */
static const char *drift_model(int gpus) { return gpus <= 4 ? "debug" : "1b"; }

/* drift's --timeout: up to 2 ranks the debug block's steps take milliseconds; more ranks
 * time-sharing one GPU (TPBENCH_TEST_SHARE_GPU) or a larger model set up slower. */
static int hang_timeout_s(int gpus) { return gpus <= 2 ? HANG_TIMEOUT_S : 4 * HANG_TIMEOUT_S; }

static void drift_hangs(int gpus, const char *knob) {
  char db[256], gpus_text[16], timeout[16];
  fresh_db(db, sizeof db, "drift.db");
  const int timeout_s = hang_timeout_s(gpus);
  snprintf(gpus_text, sizeof gpus_text, "%d", gpus);
  snprintf(timeout, sizeof timeout, "%d", timeout_s);
  char model[16];
  snprintf(model, sizeof model, "%s", drift_model(gpus));
  char *argv[] = {tpbench_exe, "drift",    "--gpus",    gpus_text, "--model", model,     "--layer",
                  "block",     "--seqlen", "256",       "--batch", "2",       "--steps", "5",
                  "--repeat",  "1",        "--timeout", timeout,   "--db",    db,        NULL};
  assert_int_equal(setenv("TPBENCH_TEST_HANG_STEP", knob, 1), 0);
  printf("drift --gpus %d --model %s --timeout %d with TPBENCH_TEST_HANG_STEP=%s\n", gpus, model,
         timeout_s, knob);
  fflush(stdout);
  const double start = now_s();
  rp_result r = rp_run(argv, timeout_s + 10 + HANG_MARGIN_S);
  const double took = now_s() - start;
  unsetenv("TPBENCH_TEST_HANG_STEP");
  printf("drift with TPBENCH_TEST_HANG_STEP=%s: exit %d after %.1f s\nstderr:\n%.4000s\n", knob,
         r.status, took, r.err ? r.err : "");
  assert_true(r.status > 0);                          /* not 0, and not killed by us (-1) */
  assert_true(took < timeout_s + 10 + HANG_MARGIN_S); /* the watchdog ended it */
  const char *err = r.err ? r.err : "";
  assert_non_null(strstr(err, "did not finish within"));
  assert_non_null(strstr(err, "recorded as timed out with its 2 finished step(s)"));
  assert_null(strstr(err, "killed by signal")); /* the watchdog's exit, not a crash */
  rp_free(&r);
  assert_int_equal(gpu_query_int(db,
                                 "SELECT count(*) FROM configs WHERE kind = 'drift' AND status = "
                                 "'timeout' AND reason LIKE '%after 2 of 5 steps%'"),
                   1);
  assert_int_equal(gpu_query_int(db,
                                 "SELECT count(*) FROM drift_steps d JOIN configs c ON c.id = "
                                 "d.config_id WHERE c.status = 'timeout' AND d.step IN (0, 1) AND "
                                 "d.loss IS NOT NULL"),
                   2);
  assert_int_equal(gpu_query_int(db, "SELECT count(*) FROM drift_steps"), 2);
  assert_int_equal(
      gpu_query_int(db,
                    "SELECT count(*) FROM runs WHERE test_knobs LIKE '%TPBENCH_TEST_HANG_STEP=%'"),
      1);
  r = rp_run_exe(tpbench_exe, 60, NULL, "drift", "--show", "latest", "--db", db, NULL);
  rp_expect(&r, 1, "2 steps stored before it stopped", NULL);
  rp_free(&r);
}

/* ---- ops at TP > 1: the planted failure per configuration -------------------------------- */

/* Every rank of the run names the GPU it ran on: one GPU for ranks sharing device 0 (each
 * once read the device of its local rank, which does not exist there: "GPU ?, PCI ?"), a GPU
 * each otherwise. */
static void ranks_name_their_gpus(const char *db, int world) {
  assert_int_equal(gpu_query_int(db, "SELECT count(*) FROM run_ranks WHERE gpu_uuid IS NOT NULL "
                                     "AND pci_bus_id IS NOT NULL"),
                   world);
  assert_int_equal(gpu_query_int(db, "SELECT count(DISTINCT gpu_uuid) FROM run_ranks"),
                   gpu_share_one_device() ? 1 : world);
}

/* `tpbench ops` at TP `world` with every window and workspace allocation of the last rank
 * failing (windows only where NCCL gives them: not to ranks made hosts of their own). */
static void ops_fail_per_configuration(int world) {
  char db[256], gpus[16], knob[16], says[64], knob_row[128];
  fresh_db(db, sizeof db, "ops.db");
  const int failing = world - 1;
  snprintf(gpus, sizeof gpus, "%d", world);
  snprintf(knob, sizeof knob, "%d", failing);
  snprintf(says, sizeof says, "failed on rank %d of %d", failing, world);
  char stock[16];
  snprintf(stock, sizeof stock, "%s", gpu_share_one_device() ? "plain" : "plain,window");
  /* ce, not auto: auto may take the stock path on a shape, which needs no workspace */
  char *argv[] = {tpbench_exe, "ops", "--gpus",   gpus,   "--tp",    gpus,  "--models",   "8b",
                  "--projs",   "wo",  "--tokens", "4096", "--pass",  "fwd", "--schedule", "ce",
                  "--stock",   stock, "--warmup", "1",    "--iters", "3",   "--rounds",   "1",
                  "--timeout", "30",  "--quiet",  "--db", db,        NULL};
  assert_int_equal(setenv(TP_FAIL_ALLOC_ENV, knob, 1), 0); /* every window and workspace */
  printf("ops --gpus %d --tp %d --stock %s with TPBENCH_TEST_FAIL_ALLOC=%s\n", world, world, stock,
         knob);
  fflush(stdout);
  const double start = now_s();
  rp_result r = rp_run(argv, 300);
  const double took = now_s() - start;
  unsetenv(TP_FAIL_ALLOC_ENV);
  printf("ops with TPBENCH_TEST_FAIL_ALLOC=%s: exit %d after %.1f s\nstderr:\n%.4000s\n", knob,
         r.status, took, r.err ? r.err : "");
  assert_true(r.status == 0 || r.status == 1); /* finished, not ended by the watchdog (124) */
  assert_null(strstr(r.err ? r.err : "", "did not finish within"));
  rp_free(&r);
  const int64_t windows = gpu_query_int(db, "SELECT count(*) FROM configs WHERE (schedule = "
                                            "'nccl-window' OR backend = 'dist_gemm') AND status <> "
                                            "'rejected'");
  char sql[320];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM configs WHERE (schedule = 'nccl-window' OR backend = "
           "'dist_gemm') AND status = 'oom' AND reason LIKE '%%%s%%'",
           says);
  const int64_t oom = gpu_query_int(db, sql);
  printf("window and dist_gemm configurations: %lld, oom naming \"%s\": %lld\n", (long long)windows,
         says, (long long)oom);
  assert_true(windows > 0);
  assert_int_equal(oom, windows);
  assert_true(gpu_query_int(db,
                            "SELECT count(*) FROM configs WHERE backend = 'stock' AND schedule IS "
                            "NULL AND status = 'ok'") > 0);
  snprintf(knob_row, sizeof knob_row,
           "SELECT count(*) FROM runs WHERE test_knobs LIKE '%%TPBENCH_TEST_FAIL_ALLOC=%d:0%%'",
           failing);
  assert_int_equal(gpu_query_int(db, knob_row), 1);
  ranks_name_their_gpus(db, world);
}

/* ---- the tests, one case per TP degree ---------------------------------------------------- */

static void test_tp1_ledger_counts_windows(void **state) {
  assert_int_equal(gpu_run_group(gpu_case_degree(state), ledger_body, NULL), 0);
}

static void test_tp1_split_group_windows(void **state) {
  assert_int_equal(gpu_run_group(gpu_case_degree(state), split_body, NULL), 0);
}

static void test_tp1_planted_workspace_failure(void **state) {
  run_planted(gpu_case_degree(state), 0, 8 * MIB);
}

static void test_tp1_drift_hung_step(void **state) { drift_hangs(gpu_case_degree(state), "2"); }

/* The last rank's planted allocation failure at TP N: windows (where NCCL gives them: never to
 * ranks sharing one GPU, which is said) and the workspace fail on every rank, naming it; then
 * `tpbench ops` stores every window and dist_gemm configuration as oom. */
static void test_planted_failure(void **state) {
  const int world = gpu_case_degree(state);
  if (!gpu_share_one_device()) assert_int_equal(gpu_run_group(world, ledger_body, NULL), 0);
  else
    printf("TP %d: the windows' ledger needs NCCL windows, which ranks made NCCL hosts of their "
           "own never have (TPBENCH_TEST_SHARE_GPU): not tried; the workspace's is\n",
           world);
  run_planted(world, world - 1, 16 * MIB);
  ops_fail_per_configuration(world);
}

/* drift at TP N with its last rank hung at step 2: rank 0's watchdog ends the run. */
static void test_drift_peer_hangs(void **state) {
  const int world = gpu_case_degree(state);
  char knob[16];
  snprintf(knob, sizeof knob, "2:%d", world - 1);
  drift_hangs(world, knob);
}

int main(int argc, char **argv) {
  const gpu_tp_test tests[] = {
      {"ledger_counts_windows", test_tp1_ledger_counts_windows, 1, 1},
      {"split_group_windows", test_tp1_split_group_windows, 1, 1},
      {"planted_workspace_failure", test_tp1_planted_workspace_failure, 1, 1},
      {"drift_hung_step", test_tp1_drift_hung_step, 1, 1},
      {"planted_failure", test_planted_failure, 2, GPU_MAX_DEGREE},
      {"drift_peer_hangs", test_drift_peer_hangs, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_agree", tests, sizeof tests / sizeof tests[0], argc, argv);
}
