/*
 * test_link.c — GPU test of `tpbench link` (bench/gpu/cmd_link.c): at TP 1 it runs only the GEMMs
 * between gaps (bench/gpu/link_pacing.h) and stores each shape back to back and after every gap
 * asked, and no transfer; at TP 2, 4 and 8 (ranks sharing the GPU under
 * TPBENCH_TEST_SHARE_GPU=1) every transfer and latency point as well, the GEMMs last, each rank
 * counted. Nothing is timed against a figure: the points must exist, be whole and be read back by
 * `tpbench report` as GEMMs, not transfers. Runs the tpbench binary of this build. Exits 77
 * (skipped) without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/cpu/run_program.h"
#include "tests/gpu/gpu_harness.h"

static char tpbench_exe[] = TP_BUILD_DIR "/tpbench";

/* `tpbench link` at `world` ranks, small and short (the points' presence is what is checked). */
static void run_link(int world, char *db, size_t cap) {
  char dir[] = "/tmp/tpbench-link-XXXXXX";
  assert_non_null(mkdtemp(dir));
  snprintf(db, cap, "%s/link.db", dir);
  char gpus[16];
  snprintf(gpus, sizeof gpus, "%d", world);
  char *argv[] = {tpbench_exe,   "link", "--gpus",      gpus,     "--sizes",     "8",
                  "--iters",     "3",    "--warmup",    "1",      "--small-kib", "64",
                  "--settle-ms", "20",   "--gemm-gaps", "50,100", "--db",        db,
                  NULL};
  rp_result r = rp_run(argv, 600);
  printf("link --gpus %d: exit %d\n%.3000s\nstderr:\n%.2000s\n", world, r.status,
         r.out ? r.out : "", r.err ? r.err : "");
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out ? r.out : "", "GEMMs between gaps"));
  rp_free(&r);
}

/* The GEMMs between gaps of the run: 3 shapes, back to back and after 50 and 100 %, at world. */
static void expect_gemm_points(const char *db, int world) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM configs c JOIN results r ON r.config_id = c.id WHERE c.kind = "
           "'link' AND c.status = 'ok' AND c.layer GLOB 'gemm_gap_*' AND c.tp = %d AND c.m > 0 "
           "AND c.n > 0 AND c.k > 0 AND r.median_us > 0 AND r.n_samples >= 3",
           world);
  assert_int_equal(gpu_query_int(db, sql), 9);
  assert_int_equal(gpu_query_int(db, "SELECT count(DISTINCT layer) FROM configs WHERE layer IN "
                                     "('gemm_gap_0', 'gemm_gap_50', 'gemm_gap_100')"),
                   3);
  /* every sample of every point stored (one set: the slowest rank's) */
  assert_int_equal(
      gpu_query_int(db, "SELECT count(*) FROM configs c WHERE c.layer GLOB 'gemm_gap_*' "
                        "AND (SELECT count(*) FROM samples s WHERE s.config_id = c.id) < 3"),
      0);
  /* `report` shows them as GEMMs, in a table of their own */
  rp_result r = rp_run_exe(tpbench_exe, 60, NULL, "report", "--run", "1", "--db", db, NULL);
  rp_expect(&r, 0, "### GEMMs between gaps", NULL);
  assert_non_null(strstr(r.out ? r.out : "", "| 4096×4096×4096 | 0 |"));
  assert_null(strstr(r.out ? r.out : "", "### gemm_gap"));
  rp_free(&r);
}

static void test_gemm_gaps_alone(void **state) {
  const int world = gpu_case_degree(state);
  char db[256];
  run_link(world, db, sizeof db);
  expect_gemm_points(db, world);
  /* one GPU: nothing but the GEMMs */
  assert_int_equal(
      gpu_query_int(db, "SELECT count(*) FROM configs WHERE layer NOT GLOB 'gemm_gap_*'"), 0);
}

static void test_probe_then_gemm_gaps(void **state) {
  const int world = gpu_case_degree(state);
  char db[256];
  run_link(world, db, sizeof db);
  expect_gemm_points(db, world);
  /* five transports at 64 KiB and 8 MiB, three latencies, every one at this degree */
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM configs WHERE kind = 'link' AND status = 'ok' AND tp = %d AND "
           "layer NOT GLOB 'gemm_gap_*'",
           world);
  assert_int_equal(gpu_query_int(db, sql), 5 * 2 + 3);
}

int main(int argc, char **argv) {
  const gpu_tp_test tests[] = {
      {"gemm_gaps_alone", test_gemm_gaps_alone, 1, 1},
      {"probe_then_gemm_gaps", test_probe_then_gemm_gaps, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_link", tests, sizeof tests / sizeof tests[0], argc, argv);
}
