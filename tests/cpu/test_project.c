/*
 * test_project.c — `tpbench project` (report/tp_project.h): the model's arithmetic on inputs
 * whose answers were worked out by hand (exact µs), the GEMM rate's interpolation and
 * extrapolation, the link line below, between and above the probe's points, the validation
 * table on a synthetic database, the refusals with their messages, and the command on a copy
 * of the sample database (the validation table has a row per default shape; no error size is
 * asserted: a performance figure is not a unit-test verdict).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tp_chunk_rule.h"
#include "fixture_db.h"
#include "report/tp_project.h"
#include "run_program.h"
#include "store/tp_store.h"

#define tpbench(...) rp_run_exe(TPBENCH_EXE, 60, NULL, __VA_ARGS__)

static const double MIB = 1048576.0;

/* Relative closeness for values computed by hand. */
static void assert_close(double got, double want) {
  if (!(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want))))
    fail_msg("got %.12g, want %.12g", got, want);
}

static tp_project_gemm gemm_row(int64_t id, int64_t m, int64_t n, int64_t k, int64_t nw,
                                double us) {
  tp_project_gemm g = {.config_id = id,
                       .run_id = 1,
                       .m = m,
                       .n = n,
                       .k = k,
                       .n_weights = nw,
                       .dtype = TP_BF16,
                       .median_us = us};
  return g;
}

/* A row of rate tflops: its FLOPs / (tflops · 10⁶ FLOP per µs). */
static tp_project_gemm gemm_at_rate(int64_t id, int64_t m, int64_t n, int64_t k, double tflops) {
  return gemm_row(id, m, n, k, 1, 2.0 * (double)m * (double)n * (double)k / (tflops * 1e6));
}

/* ---- GEMM time ---------------------------------------------------------------- */

static void test_gemm_exact_row(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_row(7, 4096, 3072, 4096, 1, 150.0),
                            gemm_row(9, 4096, 3072, 4096, 1, 134.4), /* later: wins */
                            gemm_row(8, 4096, 3072, 4096, 2, 999.0)};
  tp_project_gemm_est est;
  tp_project_gemm_time(rows, 3, 4096, 3072, 4096, 1, TP_BF16, NAN, &est);
  assert_true(est.exact);
  assert_close(est.us, 134.4);
  assert_close(est.flops, 2.0 * 4096 * 3072 * 4096);
  assert_close(est.tflops, 2.0 * 4096 * 3072 * 4096 / 134.4 / 1e6);
  assert_int_equal(est.lo_id, 9);
  assert_string_equal(est.source, "config 9 (run 1)");
}

static void test_gemm_interpolated_by_flops(void **state) {
  (void)state;
  /* F1 = 2·1024³ at 100 TFLOP/s, 8·F1 at 400: 2·F1 lies a third of the way in log FLOPs, so
   * its rate is 200 TFLOP/s and its time F1 / 10⁸ µs. */
  tp_project_gemm rows[] = {gemm_at_rate(3, 1024, 1024, 1024, 100.0),
                            gemm_at_rate(4, 2048, 2048, 2048, 400.0)};
  tp_project_gemm_est est;
  tp_project_gemm_time(rows, 2, 2048, 1024, 1024, 1, TP_BF16, NAN, &est);
  assert_false(est.exact);
  assert_false(est.extrapolated);
  assert_close(est.tflops, 200.0);
  assert_close(est.us, 2.0 * 1024 * 1024 * 1024 / 1e8);
  assert_int_equal(est.lo_id, 3);
  assert_int_equal(est.hi_id, 4);
  assert_non_null(strstr(est.source, "interpolated by FLOPs"));
  assert_non_null(strstr(est.source, "(config 3)"));
  assert_non_null(strstr(est.source, "(config 4)"));
}

static void test_gemm_extrapolated_and_same_flops(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_at_rate(3, 1024, 1024, 1024, 100.0),
                            gemm_at_rate(5, 1024, 2048, 512, 300.0), /* the same FLOPs */
                            gemm_at_rate(4, 2048, 2048, 2048, 400.0)};
  tp_project_gemm_est est;
  /* below every row: the smallest count's mean rate, held flat */
  tp_project_gemm_time(rows, 3, 512, 512, 512, 1, TP_BF16, NAN, &est);
  assert_true(est.extrapolated);
  assert_close(est.tflops, 200.0);
  assert_close(est.us, 2.0 * 512 * 512 * 512 / 200e6);
  assert_non_null(strstr(est.source, "extrapolated (held flat)"));
  /* above every row */
  tp_project_gemm_time(rows, 3, 4096, 4096, 4096, 1, TP_BF16, NAN, &est);
  assert_true(est.extrapolated);
  assert_close(est.tflops, 400.0);
  /* a shard of the same FLOPs as two rows but neither's shape: their mean */
  tp_project_gemm_time(rows, 3, 512, 2048, 1024, 1, TP_BF16, NAN, &est);
  assert_false(est.exact);
  assert_false(est.extrapolated);
  assert_close(est.tflops, 200.0);
  assert_non_null(strstr(est.source, "same FLOPs"));
}

static void test_gemm_no_rows_of_dtype(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_at_rate(3, 1024, 1024, 1024, 100.0)};
  tp_project_gemm_est est;
  tp_project_gemm_time(rows, 1, 1024, 1024, 1024, 1, TP_FP32, NAN, &est);
  assert_true(isnan(est.us));
  assert_string_equal(est.source, "no GEMM rows of dtype fp32");
}

/* ---- link time ---------------------------------------------------------------- */

static const tp_project_link_point POINTS[] = {
    {11, 8 * 1048576.0, 50.0}, {12, 32 * 1048576.0, 150.0}, {13, 128 * 1048576.0, 500.0}};

static void test_link_line(void **state) {
  (void)state;
  tp_project_link_curve curve = {POINTS, 3};
  tp_project_link_est e;
  /* 16 MiB: a third of the way from 8 to 32 MiB, so 50 + 100/3 µs; the line's bandwidth
   * 24 MiB per 100 µs, its latency 50 − 8 MiB / that */
  tp_project_link_time(&curve, 16 * MIB, 0, &e);
  assert_close(e.us, 50.0 + 100.0 / 3.0);
  assert_close(e.gbps, 24 * MIB / 100.0 / 1e3);
  assert_close(e.latency_us, 50.0 - 100.0 / 3.0);
  assert_non_null(strstr(e.source, "between 8..32 MiB (configs 11, 12)"));
  /* below the probe: the line of the two smallest */
  tp_project_link_time(&curve, 4 * MIB, 0, &e);
  assert_close(e.us, 50.0 - 100.0 / 6.0);
  assert_non_null(strstr(e.source, "below the probe"));
  /* above: the line of the two largest (350 µs per 96 MiB) */
  tp_project_link_time(&curve, 256 * MIB, 0, &e);
  assert_close(e.us, 500.0 + 128.0 * 350.0 / 96.0);
  assert_non_null(strstr(e.source, "above the probe"));
  /* --link-gbps: the bandwidth replaced, the latency kept */
  tp_project_link_time(&curve, 16 * MIB, 100.0, &e);
  assert_close(e.us, 50.0 - 100.0 / 3.0 + 16 * MIB / 1e5);
  assert_close(e.gbps, 100.0);
  assert_non_null(strstr(e.source, "--link-gbps 100"));
}

static void test_link_edges(void **state) {
  (void)state;
  tp_project_link_est e;
  tp_project_link_curve none = {NULL, 0};
  tp_project_link_time(&none, 16 * MIB, 0, &e);
  assert_true(isnan(e.us));
  assert_string_equal(e.source, "no probe points");
  tp_project_link_time(&none, 16 * MIB, 100.0, &e); /* no probe: no latency */
  assert_close(e.us, 16 * MIB / 1e5);
  assert_close(e.latency_us, 0);
  tp_project_link_curve one = {POINTS, 1};
  tp_project_link_time(&one, 16 * MIB, 0, &e); /* one point: its bandwidth */
  assert_close(e.us, 100.0);
  const tp_project_link_point falling[] = {{1, 8 * 1048576.0, 50.0}, {2, 32 * 1048576.0, 40.0}};
  tp_project_link_curve fall = {falling, 2};
  tp_project_link_time(&fall, 16 * MIB, 0, &e); /* a line falling with size: no latency */
  assert_close(e.latency_us, 0);
  assert_close(e.us, 20.0);
}

/* ---- the GEMM time below the measured FLOPs ---------------------------------------- */

static void test_gemm_below_toward_kernel_cost(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_row(3, 1024, 1024, 1024, 1, 100.0)};
  tp_project_gemm_est est;
  /* half the smallest count's FLOPs, k = 10: 10 + (100 − 10) / 2 */
  tp_project_gemm_time(rows, 1, 512, 1024, 1024, 1, TP_BF16, 10.0, &est);
  assert_true(est.extrapolated);
  assert_close(est.us, 55.0);
  assert_close(est.tflops, 2.0 * 512 * 1024 * 1024 / 55.0 / 1e6);
  assert_int_equal(est.lo_id, 3);
  assert_non_null(strstr(est.source, "below the measured FLOPs: line from k = 10.0 us"));
  /* a k not below the smallest time: that count's rate held, as without k */
  tp_project_gemm_time(rows, 1, 512, 1024, 1024, 1, TP_BF16, 120.0, &est);
  assert_close(est.us, 50.0);
  assert_non_null(strstr(est.source, "extrapolated (held flat)"));
  /* above the measured counts k plays no part */
  tp_project_gemm_time(rows, 1, 2048, 1024, 1024, 1, TP_BF16, 10.0, &est);
  assert_close(est.us, 200.0);
}

/* ---- the pipeline's costs (model point 6) ------------------------------------------- */

static void test_costs_from_probe_points(void **state) {
  (void)state;
  const tp_project_link_point ce[] = {{1, 65536.0, 6.0}, {2, 8 * MIB, 20.0}, {3, 32 * MIB, 50.0}};
  const tp_project_link_point sm[] = {{4, 65536.0, 5.0}, {5, 8 * MIB, 24.0}};
  const tp_project_link_point rt[] = {{6, 4.0, 24.0}}, wait[] = {{7, 4.0, 3.5}};
  const tp_project_link_point bar[] = {{8, 0.0, 9.0}};
  const tp_project_link_point local[] = {{9, 8 * MIB, 5.0}, {10, 256 * MIB, 128.0}};
  tp_project_link_curve links[TP_LINK_KINDS] = {{0}};
  links[TP_LINK_CE_PUSH] = (tp_project_link_curve){ce, 3};
  links[TP_LINK_SM_PUSH] = (tp_project_link_curve){sm, 2};
  links[TP_LINK_FLAG_ROUND_TRIP] = (tp_project_link_curve){rt, 1};
  links[TP_LINK_FLAG_WAIT] = (tp_project_link_curve){wait, 1};
  links[TP_LINK_BARRIER] = (tp_project_link_curve){bar, 1};
  links[TP_LINK_LOCAL_COPY] = (tp_project_link_curve){local, 2};
  tp_project_cost c[TP_COST_KINDS];
  tp_project_resolve_costs(links, "NVIDIA H200", c);
  for (int i = 0; i < TP_COST_KINDS; i++)
    if (!c[i].measured) fail_msg("%s not measured: %s", tp_cost_kind_name(i), c[i].source);
  assert_close(c[TP_COST_PUSH_LATENCY].value, 6.0); /* the 64 KiB push, per call */
  assert_int_equal(c[TP_COST_PUSH_LATENCY].config_id, 1);
  assert_close(c[TP_COST_KERNEL].value, 5.0);
  assert_close(c[TP_COST_HANDOFF].value, 12.0); /* half the round trip */
  assert_close(c[TP_COST_WAIT].value, 3.5);
  assert_close(c[TP_COST_BARRIER].value, 9.0);
  /* the largest local copy: 256 MiB read and written in 128 µs */
  assert_close(c[TP_COST_LOCAL_GBPS].value, 2.0 * 256 * MIB / 128.0 / 1e3);
  assert_non_null(strstr(c[TP_COST_HANDOFF].source, "half of flag_round_trip"));
}

static void test_costs_fallbacks(void **state) {
  (void)state;
  /* the sample's kind of probe: 8 and 32 MiB points of the transports, nothing else */
  const tp_project_link_point ce[] = {{2, 8 * MIB, 20.0}, {3, 32 * MIB, 50.0}};
  const tp_project_link_point sm[] = {{5, 8 * MIB, 24.0}, {6, 32 * MIB, 60.0}};
  tp_project_link_curve links[TP_LINK_KINDS] = {{0}};
  links[TP_LINK_CE_PUSH] = (tp_project_link_curve){ce, 2};
  links[TP_LINK_SM_PUSH] = (tp_project_link_curve){sm, 2};
  tp_project_cost c[TP_COST_KINDS];
  tp_project_resolve_costs(links, "NVIDIA H100 80GB HBM3", c);
  for (int i = 0; i < TP_COST_KINDS; i++)
    if (c[i].measured) fail_msg("%s measured: %s", tp_cost_kind_name(i), c[i].source);
  /* L: the ce line's latency, 20 − 8 MiB at 24 MiB per 30 µs; k: the sm line's, 24 − 12 */
  assert_close(c[TP_COST_PUSH_LATENCY].value, 10.0);
  assert_close(c[TP_COST_KERNEL].value, 12.0);
  assert_close(c[TP_COST_HANDOFF].value, 10.0);
  assert_close(c[TP_COST_WAIT].value, 10.0);
  assert_close(c[TP_COST_BARRIER].value, 20.0);
  assert_close(c[TP_COST_LOCAL_GBPS].value, 3350.0);
  assert_non_null(strstr(c[TP_COST_BARRIER].source, "fallback: b = 2·h"));
  assert_non_null(strstr(c[TP_COST_LOCAL_GBPS].source, "H100 SXM"));
  tp_project_resolve_costs(links, "NVIDIA H100 PCIe", c);
  assert_close(c[TP_COST_LOCAL_GBPS].value, 2000.0);
  tp_project_resolve_costs(links, "NVIDIA H200", c);
  assert_close(c[TP_COST_LOCAL_GBPS].value, 4800.0);
  tp_project_resolve_costs(links, "Some GPU", c);
  assert_true(isnan(c[TP_COST_LOCAL_GBPS].value));
  assert_non_null(strstr(c[TP_COST_LOCAL_GBPS].source, "left out"));
  /* no sm_push points at all: k unknown */
  links[TP_LINK_SM_PUSH].n = 0;
  tp_project_resolve_costs(links, NULL, c);
  assert_true(isnan(c[TP_COST_KERNEL].value));
  assert_string_equal(c[TP_COST_KERNEL].source, "no sm_push points");
}

/* ---- auto's chunk rule (common/tp_chunk_rule.h) ------------------------------------- */

static void test_chunk_rule(void **state) {
  (void)state;
  /* gather side, 8B qkv at TP 2, 4096 tokens: pushes 47.9 µs fit in 0.75 of the local
   * shard's 79.3 µs GEMM (the model's rates): one chunk */
  tp_chunk_choice c = tp_auto_chunks(1, 2, 2048, 8192, 6144, 4096, 1, TP_BF16);
  assert_int_equal(c.chunks, 1);
  assert_close(c.push_us, 2048.0 * 8192 / 350e9 * 1e6);
  assert_close(c.local_gemm_us, 2.0 * 2048 * 3072 * 4096 / 650e12 * 1e6);
  /* pushes far longer than the GEMM: the most chunks that keep 512 rows */
  assert_int_equal(tp_auto_chunks(1, 4, 2048, 16384, 1024, 8192, 1, TP_BF16).chunks, 4);
  assert_int_equal(tp_auto_chunks(1, 4, 1024, 16384, 1024, 8192, 1, TP_BF16).chunks, 2);
  assert_int_equal(tp_auto_chunks(1, 8, 512, 8192, 6144, 4096, 1, TP_BF16).chunks, 1);
  /* reduce-scatter side: two chunks of at least 512 rows, else one */
  assert_int_equal(tp_auto_chunks(0, 2, 2048, 8192, 4096, 4096, 1, TP_BF16).chunks, 2);
  assert_int_equal(tp_auto_chunks(0, 8, 1000, 8192, 4096, 4096, 1, TP_BF16).chunks, 1);
  assert_int_equal(tp_auto_chunks(0, 8, 1025, 8192, 4096, 4096, 1, TP_BF16).chunks, 1);
  assert_true(tp_auto_fuses(512, 8192)); /* 4 MiB exactly: fused */
  assert_false(tp_auto_fuses(511, 8192));
}

/* ---- the fused pipeline, by hand ------------------------------------------------------ */

/* The all-gather collective and the push, each two points around 16 and 32 MiB. */
static const tp_project_link_point AG[] = {{21, 8 * 1048576.0, 40.0}, {22, 32 * 1048576.0, 100.0}};
static const tp_project_link_point RS[] = {{31, 8 * 1048576.0, 44.0}, {32, 32 * 1048576.0, 140.0}};
static const tp_project_link_point CE[] = {{41, 8 * 1048576.0, 20.0}, {42, 32 * 1048576.0, 50.0}};

/* Costs set by hand: b 8, h 10, w 3, k unknown; local traffic 8 MiB per 8 µs. */
static tp_project_inputs hand_inputs(const tp_project_gemm *rows, size_t n) {
  tp_project_inputs in = {.gemms = rows, .n_gemms = n};
  in.links[TP_LINK_NCCL_ALL_GATHER] = (tp_project_link_curve){AG, 2};
  in.links[TP_LINK_NCCL_REDUCE_SCATTER] = (tp_project_link_curve){RS, 2};
  in.links[TP_LINK_CE_PUSH] = (tp_project_link_curve){CE, 2};
  const double values[TP_COST_KINDS] = {10.0, NAN, 8.0, 10.0, 3.0, 8 * MIB / 8.0 / 1e3};
  for (int i = 0; i < TP_COST_KINDS; i++) in.costs[i].value = values[i];
  return in;
}

static tp_project_shape shape_of(const char *proj, tp_op op, int64_t tokens, int64_t n, int64_t k) {
  tp_project_shape s = {
      .op = op, .dtype = TP_BF16, .tokens = tokens, .n = n, .k = k, .n_weights = 1};
  snprintf(s.model, sizeof s.model, "m");
  snprintf(s.proj, sizeof s.proj, "%s", proj);
  return s;
}

static void test_pipeline_gather_by_hand(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_row(1, 2048, 3072, 4096, 1, 50.0),
                            gemm_row(2, 1024, 1536, 4096, 1, 30.0),
                            gemm_row(3, 512, 1536, 4096, 1, 16.0)};
  tp_project_inputs in = hand_inputs(rows, 3);
  tp_project_shape qkv = shape_of("qkv", TP_OP_AG_LINEAR, 4096, 6144, 4096);
  tp_project_pipeline p;
  /* TP 2, auto: one chunk of 2048 rows (16 MiB, push 30). Copy stream: b 8, push lands at 38.
   * Main: local shard 50, then max(50 + w, 38 + h) = 53, + 50 = 103. */
  tp_project_dist_pipeline(&in, &qkv, 2, 0, &p);
  assert_int_equal(p.chunks, 1);
  assert_int_equal(p.chunk_rows, 2048);
  assert_close(p.push.us, 30.0);
  assert_close(p.total_us, 103.0);
  assert_close(p.gemm_sum_us, 100.0);
  assert_close(p.stall_us, 3.0);
  assert_close(p.drain_us, 65.0);
  assert_int_equal(p.gemms, 2);
  assert_int_equal(p.pushes, 1);
  /* a slower handoff makes the peer chunk wait: max(53, 38 + 30) + 50 */
  in.costs[TP_COST_HANDOFF].value = 30.0;
  tp_project_dist_pipeline(&in, &qkv, 2, 0, &p);
  assert_close(p.total_us, 118.0);
  in.costs[TP_COST_HANDOFF].value = 10.0;
  /* TP 4, two chunks: local shard 1024 rows (30), six chunks of 512 rows (16) pushed at 15
   * each (4 MiB: below the probe, 20 − 4·30/24). Pushes land at 23, 38, 53, 68, 83, 98; each
   * chunk GEMM starts at max(previous end + 3, landing + 10): 33, 52, 71, 90, 109, 128 → 144 */
  tp_project_dist_pipeline(&in, &qkv, 4, 2, &p);
  assert_int_equal(p.chunk_rows, 512);
  assert_close(p.push.us, 15.0);
  assert_close(p.total_us, 144.0);
  assert_close(p.gemm_sum_us, 30.0 + 6 * 16.0);
  assert_close(p.stall_us, 6 * 3.0);
  assert_close(p.drain_us, 144.0 - 98.0);
  assert_int_equal(p.gemms, 7);
  assert_int_equal(p.pushes, 6);
  assert_int_equal(p.waits, 6);
}

static void test_pipeline_scatter_by_hand(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_row(1, 1024, 4096, 4096, 1, 25.0),
                            gemm_row(2, 1024, 4096, 2048, 1, 14.0)};
  tp_project_inputs in = hand_inputs(rows, 2);
  tp_project_shape wo = shape_of("wo", TP_OP_LINEAR_RS, 4096, 4096, 8192);
  tp_project_pipeline p;
  /* TP 2, auto: two chunks of 1024 rows (8 MiB pushes, 20 µs; C read 8 µs).
   * Partial 0 ends 25, its push runs max(8, 25 + 3) .. 48; partial 1 ends 50, its push
   * max(48, 53) .. 73; local 0 starts max(50 + 3, 48 + 10) = 58, ends 58 + 8 + 25 = 91;
   * local 1 starts max(94, 83) = 94, ends 127. */
  tp_project_dist_pipeline(&in, &wo, 2, 0, &p);
  assert_int_equal(p.chunks, 2);
  assert_close(p.local_us, 8.0);
  assert_close(p.total_us, 127.0);
  assert_close(p.gemm_sum_us, 100.0);
  assert_close(p.stall_us, 127.0 - 100.0 - 16.0);
  assert_close(p.drain_us, 127.0 - 50.0); /* after the last partial */
  assert_int_equal(p.gemms, 4);
  /* TP 4, one chunk: three partials of 14 (ends 14, 28, 42), pushes end 37, 57, 77; the local
   * GEMM waits max(42 + 3·3, 77 + 10) = 87, then the reduce pass and C read (8 MiB × 5: 40)
   * and its GEMM: 141 */
  tp_project_dist_pipeline(&in, &wo, 4, 1, &p);
  assert_close(p.local_us, 40.0);
  assert_close(p.total_us, 141.0);
  assert_close(p.stall_us, 141.0 - 56.0 - 40.0);
  assert_close(p.drain_us, 99.0);
  assert_int_equal(p.gemms, 4);
  assert_int_equal(p.pushes, 3);
  /* no local rate: the traffic left out */
  in.costs[TP_COST_LOCAL_GBPS].value = NAN;
  tp_project_dist_pipeline(&in, &wo, 4, 1, &p);
  assert_close(p.total_us, 101.0);
}

static void test_predict_by_hand(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_row(1, 4096, 3072, 4096, 1, 100.0),
                            gemm_row(2, 2048, 3072, 4096, 1, 50.0)};
  tp_project_inputs in = hand_inputs(rows, 2);
  tp_project_shape qkv = shape_of("qkv", TP_OP_AG_LINEAR, 4096, 6144, 4096);
  tp_project_row r;
  /* TP 2: V = 4096·4096·2 / 2 = 16 MiB; collective 40 + 60/3 = 60; stock 100 + 60; dist_gemm
   * the pipeline above, 103 */
  tp_project_predict(&in, &qkv, 2, &r);
  assert_int_equal(r.n, 3072);
  assert_close(tp_project_volume_bytes(&qkv, 2), 16 * MIB);
  /* an fp8 recipe gathers one byte an element (comm_dtype=fp8) and reduce-scatters bf16 */
  tp_project_shape fp8_qkv = qkv, fp8_wo = shape_of("wo", TP_OP_LINEAR_RS, 4096, 4096, 4096);
  fp8_qkv.dtype = TP_FP8_ROW;
  assert_close(tp_project_volume_bytes(&fp8_qkv, 2), 8 * MIB);
  fp8_wo.dtype = TP_FP8;
  assert_close(tp_project_volume_bytes(&fp8_wo, 2), 16 * MIB);
  assert_close(r.coll.us, 60.0);
  assert_close(r.stock_us, 160.0);
  assert_close(r.dist_us, 103.0);
  assert_close(r.speedup, 160.0 / 103.0);
  assert_string_equal(r.note, "");
  assert_close(tp_project_stock_us(90.0, 1.0, 76.0), 166.0);
  assert_close(tp_project_stock_us(90.0, 0.9, 76.0), 157.0);
  /* 512 tokens: 256 rows of 8 KiB per rank, under 4 MiB: auto's stock path */
  tp_project_shape small = shape_of("qkv", TP_OP_AG_LINEAR, 512, 6144, 4096);
  tp_project_predict(&in, &small, 2, &r);
  assert_true(r.pipe.stock_path);
  assert_close(r.dist_us, r.stock_us);
  assert_non_null(strstr(r.note, "auto takes the stock path"));
}

static void test_predict_refusals(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_row(1, 4096, 3072, 4096, 1, 100.0)};
  tp_project_inputs in = hand_inputs(rows, 1);
  tp_project_row r;
  tp_project_shape odd_n = shape_of("qkv", TP_OP_AG_LINEAR, 4096, 6000, 4096);
  tp_project_predict(&in, &odd_n, 7, &r);
  assert_true(isnan(r.stock_us));
  assert_string_equal(r.note, "TP 7 does not divide N = 6000");
  tp_project_shape qkv = shape_of("qkv", TP_OP_AG_LINEAR, 4096, 6144, 4096);
  tp_project_predict(&in, &qkv, 3, &r);
  assert_string_equal(r.note, "TP 3 does not divide the tokens (4096)");
  /* the GEMM extrapolated: said in the note */
  tp_project_predict(&in, &qkv, 8, &r);
  assert_true(isfinite(r.dist_us));
  assert_string_equal(r.note, "GEMM rate extrapolated beyond the measured FLOPs");
  /* a transport the probe lacks */
  in.links[TP_LINK_NCCL_ALL_GATHER].n = 0;
  tp_project_predict(&in, &qkv, 2, &r);
  assert_true(isnan(r.stock_us));
  assert_string_equal(r.note, "no link probe points of nccl_all_gather");
}

/* ---- the error summary ------------------------------------------------------------------ */

/* Two probed shapes: 100 GFLOP (back to back 100 µs; gaps 50 %: 96, 100 %: 94) and 1000 GFLOP
 * (1000 µs; 100 %: 900, 200 %: 880); a third, 10 GFLOP, lacks its gap-0 point. */
static const tp_project_pace_point PACE[] = {
    {1, 1e10, 100.0, 50.0}, {2, 1e11, 0.0, 100.0},   {3, 1e11, 50.0, 96.0},  {4, 1e11, 100.0, 94.0},
    {5, 1e12, 0.0, 1000.0}, {6, 1e12, 100.0, 900.0}, {7, 1e12, 200.0, 880.0}};

static void test_pace_factor(void **state) {
  (void)state;
  const tp_project_pacing pacing = {PACE, sizeof PACE / sizeof PACE[0]};
  tp_project_pace_est est;
  /* at a probed shape and gap: that point over its back-to-back one */
  tp_project_pace(&pacing, 1e11, 100.0, 50.0, &est);
  assert_close(est.gap_pct, 50.0);
  assert_close(est.factor, 0.96);
  assert_int_equal(est.lo_id, 3); /* the point read, not the next gap's */
  assert_non_null(strstr(est.source, ": config 3; configs 5+6"));
  /* between the gaps (75 %): 0.95 at 100 GFLOP, 0.925 at 1000; halfway in log FLOPs */
  tp_project_pace(&pacing, sqrt(1e11 * 1e12), 200.0, 150.0, &est);
  assert_close(est.factor, 0.9375);
  assert_int_equal(est.lo_id, 4);
  assert_int_equal(est.hi_id, 6);
  /* both gaps read of each shape are named */
  assert_non_null(strstr(est.source, "configs 3+4; configs 5+6"));
  /* above the largest gap it is held; above the largest shape too (the source says so) */
  tp_project_pace(&pacing, 1e11, 100.0, 500.0, &est);
  assert_close(est.factor, 0.94);
  tp_project_pace(&pacing, 1e13, 1000.0, 1000.0, &est);
  assert_close(est.factor, 0.9);
  assert_non_null(strstr(est.source, "held"));
  /* below the smallest usable shape (the 10 GFLOP one has no gap 0): 100 GFLOP's held */
  tp_project_pace(&pacing, 1e9, 100.0, 100.0, &est);
  assert_close(est.factor, 0.94);
  /* a small gap keeps a decimal in the source (not "gap 0 %", which reads as back to back) */
  tp_project_pace(&pacing, 1e11, 1000.0, 3.0, &est);
  assert_non_null(strstr(est.source, "gap 0.3 %: configs 2+3"));
  /* back to back (no gap) and no probe: 1 */
  tp_project_pace(&pacing, 1e11, 100.0, 0.0, &est);
  assert_close(est.factor, 1.0);
  /* a shape of 0 FLOPs (a row with M, N or K 0) has no log: skipped, not a NaN p */
  const tp_project_pace_point zero[] = {{11, 0.0, 0.0, 10.0},
                                        {12, 0.0, 100.0, 5.0},
                                        {13, 1e12, 0.0, 1000.0},
                                        {14, 1e12, 100.0, 900.0}};
  const tp_project_pacing with_zero = {zero, sizeof zero / sizeof zero[0]};
  tp_project_pace(&with_zero, 1e11, 100.0, 100.0, &est);
  assert_close(est.factor, 0.9);
  assert_int_equal(est.lo_id, 14);
  const tp_project_pace_point negative[] = {{15, -1e11, 0.0, 10.0}, {16, -1e11, 100.0, 5.0}};
  const tp_project_pacing with_negative = {negative, 2};
  tp_project_pace(&with_negative, 1e11, 100.0, 100.0, &est);
  assert_close(est.factor, 1.0);
  assert_non_null(strstr(est.source, "no probed shape timed back to back"));
  /* a probe, but no gap to read it at (the collective's time unknown): said, not "no probe" */
  tp_project_pace(&pacing, 1e11, 100.0, NAN, &est);
  assert_close(est.factor, 1.0);
  assert_null(strstr(est.source, "no GEMMs-between-gaps probe"));
  assert_non_null(strstr(est.source, "unknown"));
  const tp_project_pacing none = {NULL, 0};
  tp_project_pace(&none, 1e11, 100.0, 50.0, &est);
  assert_close(est.factor, 1.0);
  assert_int_equal(est.lo_id, 0);
  assert_non_null(strstr(est.source, "no GEMMs-between-gaps probe"));
}

static void test_error_summary(void **state) {
  (void)state;
  /* a NaN (no pair) and a row measured under 0.1 ms are left out */
  const double errors[] = {-10.0, 5.0, NAN, 30.0, 2.0};
  const double measured[] = {200.0, 150.0, 300.0, 50.0, 1000.0};
  tp_project_error_summary e;
  assert_int_equal(tp_project_summarise_errors(errors, measured, 5, &e), TP_OK);
  assert_int_equal(e.rows, 3);
  assert_close(e.median_pct, 2.0);
  assert_close(e.worst_abs_pct, 10.0);
  assert_close(e.worst_pct, -10.0);
  assert_int_equal((int)e.worst_index, 0);
  assert_close(e.median_abs_pct, 5.0);
  assert_int_equal(tp_project_summarise_errors(errors, measured, 0, &e), TP_OK);
  assert_int_equal(e.rows, 0);
  assert_true(isnan(e.median_pct));
}

/* ---- the synthetic database ---------------------------------------------------- */

static void put(tp_store *s, int64_t run, const tp_config_axes *axes, double median_us,
                tp_fused fused) {
  tp_result res = {.n_samples = 10, .median_us = median_us, .fused = fused};
  res.p10_us = res.p90_us = res.mean_us = res.min_us = res.max_us = median_us;
  res.cv = res.tokens_per_s = res.tflops = res.flops = res.bytes_moved = NAN;
  res.max_abs_err = res.rel_err = res.ci_lo_us = res.ci_hi_us = NAN;
  res.rank_skew = res.host_stall_frac = NAN;
  tp_config_record rec = {.axes = axes, .status = TP_STATUS_OK, .result = &res};
  int64_t id = 0;
  if (tp_store_put_config(s, run, &rec, &id) != TP_OK) fail_msg("%s", tp_last_error());
}

static int64_t begin_on(tp_store *s, const char *command, const char *gpu) {
  tp_run_info info = {.commit = "0123456789abcdef",
                      .host = "synthetic",
                      .gpu_name = gpu,
                      .gpu_count = 2,
                      .command = command};
  int64_t run = 0;
  if (tp_store_begin_run(s, &info, &run) != TP_OK) fail_msg("%s", tp_last_error());
  return run;
}

static int64_t begin(tp_store *s, const char *command) { return begin_on(s, command, "GPU"); }

static void put_link(tp_store *s, int64_t run, const char *kind, const tp_project_link_point *p,
                     int n) {
  for (int i = 0; i < n; i++) {
    tp_config_axes a = {.kind = "link",
                        .op_or_layer = kind,
                        .backend = "probe",
                        .tp = 2,
                        .m = (int64_t)p[i].bytes,
                        .dtype = "bf16",
                        .sp = 1,
                        .pass = "fwd"};
    put(s, run, &a, p[i].time_us, TP_FUSED_NA);
  }
}

/* The synthetic model's qkv (ag_linear, K 4096, bf16, one weight, SP, forward) at degree tp:
 * M = tokens rows, N out features per rank. */
static tp_config_axes synth_axes(const char *kind, const char *backend, int tp, int64_t tokens,
                                 int64_t n) {
  return (tp_config_axes){.kind = kind,
                          .model = "m",
                          .op_or_layer = "ag_linear",
                          .proj = "qkv",
                          .backend = backend,
                          .tp = tp,
                          .tokens = tokens,
                          .m = tokens,
                          .n = n,
                          .k = 4096,
                          .dtype = "bf16",
                          .n_weights = 1,
                          .sp = 1,
                          .pass = "fwd"};
}

/* One ag_linear shape at TP 2 of `tokens`: its GEMM alone and measured stock, dist_gemm (auto)
 * and rows the validation must not read (the sm schedule, symm=nccl, comm_dtype fp8). */
static void put_shape(tp_store *s, int64_t run, int64_t tokens, double gemm, double stock,
                      double dist) {
  tp_config_axes a = synth_axes("gemm", "cublaslt", 2, tokens, 3072);
  put(s, run, &a, gemm, TP_FUSED_NA);
  a.kind = "op";
  a.backend = "stock";
  put(s, run, &a, stock, TP_FUSED_NA);
  a.backend = "dist_gemm";
  a.schedule = "auto";
  put(s, run, &a, dist, TP_FUSED_ALL);
  a.schedule = "sm";
  put(s, run, &a, 1.0, TP_FUSED_ALL);
  /* later rows the model does not describe, which the validation must not read either:
   * dist_gemm over NCCL windows (the probe pushes over the IPC heap) and a stock row whose
   * gathered operand travelled in fp8 (the model counts the stored dtype's bytes; a stand-in
   * for an fp8 dtype's comm_dtype=fp8 row) */
  a.schedule = "auto";
  a.symm = "nccl";
  put(s, run, &a, 1.0, TP_FUSED_ALL);
  a.symm = NULL;
  a.backend = "stock";
  a.schedule = NULL;
  a.comm_dtype = "fp8";
  put(s, run, &a, 1.0, TP_FUSED_NA);
}

/* The synthetic link probe: NCCL's all-gather and reduce-scatter and the copy engine's push. */
static void add_link_probe(tp_store *s, const char *gpu) {
  int64_t link = begin_on(s, "link", gpu);
  put_link(s, link, "nccl_all_gather", AG, 2);
  put_link(s, link, "nccl_reduce_scatter", RS, 2);
  put_link(s, link, "ce_push", CE, 2);
}

typedef struct {
  fx_dir dir;
  char db[600];
} synth_db;

/* Two shapes whose predictions are worked out by hand. The probe has no flag, barrier or
 * sm_push points: L = h = w = 10 (the ce line's latency), b = 20, k unknown.
 *   T = 4096: V 16 MiB, G 100, collective 60: stock 160; one chunk of 2048 rows (G 50, held
 *             flat below the rows), push 30: dist_gemm max(50 + 10, 20 + 30 + 10) + 50 = 110;
 *   T = 8192: V 32 MiB, G 200, collective 100: stock 300; one chunk of 4096 rows (G 100),
 *             push 50: dist_gemm max(100 + 10, 20 + 50 + 10) + 100 = 210.
 * Measured: stock 200 and 250 (−20 %, +20 %), dist_gemm 80 and 250 (+37.5 %, −16 %). */
static void make_synth(synth_db *d, int with_link) {
  assert_int_equal(fx_mkdir(&d->dir, "tp_project"), 0);
  fx_path(&d->dir, "synth.db", d->db, sizeof d->db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(d->db, 1, &s), TP_OK);
  int64_t ops = begin(s, "ops");
  put_shape(s, ops, 4096, 100.0, 200.0, 80.0);
  put_shape(s, ops, 8192, 200.0, 250.0, 250.0);
  /* a single-GPU GEMM of the first shape's whole weight: the rate --gemm-tp 1 reads */
  tp_config_axes one = synth_axes("gemm", "cublaslt", 1, 4096, 6144);
  put(s, ops, &one, 150.0, TP_FUSED_NA);
  if (with_link) add_link_probe(s, "GPU");
  tp_store_close(s);
}

/* A link probe run on gpu, written into db after its other runs. */
static void put_link_run_on(const char *db, const char *gpu) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  add_link_probe(s, gpu);
  tp_store_close(s);
}

static char *project_to_text(const char *db, const tp_project_request *req, tp_report_format fmt,
                             tp_rc *rc) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(db, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_non_null(mem);
  *rc = tp_project_report(s, req, fmt, mem);
  fclose(mem);
  tp_store_close(s);
  return text;
}

/* An edit no store call makes (a database changed by hand: an infinity, a foreign dtype, a run
 * gone), run on db with plain SQLite; the rows it changed. */
static int edit_by_hand(const char *db_path, const char *sql) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
  const int changed = sqlite3_changes(db);
  sqlite3_close(db);
  return changed;
}

/* project's JSON output of req on db, parsed (the run must succeed). */
static json_t *project_json(const char *db, const tp_project_request *req) {
  tp_rc rc;
  char *text = project_to_text(db, req, TP_FMT_JSON, &rc);
  assert_int_equal(rc, TP_OK);
  json_error_t jerr;
  json_t *root = json_loads(text, 0, &jerr);
  if (!root) fail_msg("not JSON: %s\n%s", jerr.text, text);
  free(text);
  return root;
}

static void test_validation_on_synthetic_db(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  const int tps[] = {2, 4};
  tp_project_request req = {.tps = tps, .n_tps = 2};
  json_t *root = project_json(d.db, &req);
  json_t *rows = json_object_get(root, "rows");
  assert_int_equal(json_array_size(rows), 4); /* two shapes × two degrees */
  json_t *first = json_array_get(rows, 0), *m = json_object_get(first, "measured");
  assert_string_equal(json_string_value(json_object_get(root, "result")), "prediction");
  assert_string_equal(json_string_value(json_object_get(first, "result")), "predicted");
  assert_close(json_real_value(json_object_get(first, "stock_us")), 160.0);
  assert_close(json_real_value(json_object_get(first, "dist_us")), 110.0);
  assert_close(json_real_value(json_object_get(m, "stock_error_pct")), -20.0);
  assert_close(json_real_value(json_object_get(m, "dist_error_pct")), 37.5);
  assert_close(json_real_value(json_object_get(m, "dist_us")), 80.0); /* auto, not sm */
  assert_true(json_is_null(json_object_get(json_array_get(rows, 1), "measured"))); /* TP 4 */
  json_t *checks = json_object_get(root, "validation");
  assert_int_equal(json_array_size(checks), 1);
  json_t *c = json_array_get(checks, 0);
  assert_int_equal(json_integer_value(json_object_get(c, "tp")), 2);
  json_t *cs = json_object_get(c, "stock"), *cd = json_object_get(c, "dist_gemm");
  assert_int_equal(json_integer_value(json_object_get(cs, "shapes")), 2);
  assert_close(json_real_value(json_object_get(cs, "median_error_pct")), 0.0);
  assert_close(json_real_value(json_object_get(cs, "worst_abs_error_pct")), 20.0);
  assert_close(json_real_value(json_object_get(cs, "median_abs_error_pct")), 20.0);
  /* dist_gemm's first row, measured at 80 µs (under 0.1 ms), is listed but not summarised */
  assert_int_equal(json_integer_value(json_object_get(cd, "shapes")), 1);
  assert_close(json_real_value(json_object_get(cd, "median_error_pct")), -16.0);
  assert_close(json_real_value(json_object_get(cd, "worst_error_pct")), -16.0);
  assert_close(json_real_value(json_object_get(cd, "median_abs_error_pct")), 16.0);
  json_decref(root);
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "### Validation at TP 2: predicted against measured"));
  assert_null(strstr(text, "### Validation at TP 4"));
  assert_non_null(strstr(text, "**A prediction, not a measurement**"));
  assert_non_null(strstr(text, "| predicted | m | qkv |"));
  assert_non_null(strstr(text, "stock signed median 0.0 %, worst |error| 20.0 % (config "));
  assert_non_null(strstr(text, "dist_gemm signed median -16.0 %, worst |error| 16.0 % (config "));
  assert_non_null(strstr(text, "| b barrier | 20.00 | us | fallback |"));
  free(text);
  /* --gemm-tp 1: the TP 2 shard's time from the single-GPU rate (half its FLOPs at the one
   * row's rate, held flat): 75 µs, so stock 75 + 60 */
  req.gemm_tp = 1;
  req.n_tps = 1;
  text = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(
      strstr(text, "\npredicted,m,qkv,ag_linear,4096,bf16,2,4096,3072,4096,103.079,75.000,"));
  assert_non_null(strstr(text, ",135.000,"));
  /* the summary lines: the signed medians and the worst |errors| in the error columns */
  assert_non_null(strstr(text, "\nerror_median,,,,,,2,"));
  assert_non_null(strstr(text, "\nerror_worst_abs,,,,,,2,"));
  /* after the (quoted) note: stock_measured_us and stock_config empty, then stock_error_pct;
   * dist_measured_us and dist_config empty, then dist_error_pct and an empty dist_stock_path */
  const char *median = strstr(text, "\nerror_median,");
  const char *after_note = median ? strstr(median, "or more\",,,") : NULL;
  assert_non_null(after_note);
  char *end = NULL;
  const double stock_med = strtod(after_note + strlen("or more\",,,"), &end);
  assert_memory_equal(end, ",,,", 3);
  const double dist_med = strtod(end + 3, &end);
  assert_memory_equal(end, ",\r\n", 3); /* CRLF: RFC 4180, as every CSV of tpbench */
  assert_true(isfinite(stock_med) && isfinite(dist_med));
  free(text);
  fx_rmdir(&d.dir);
}

/* --shapes-run: the op shapes of one run only (a job's ops beside the bare GEMM shapes it
 * measured for the rates); a run of no op shape and a run that does not exist are refused. */
static void test_shapes_run(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(d.db, 0, &s), TP_OK);
  int64_t bare = begin(s, "ops"); /* run 3: a bare GEMM shape at TP 1 */
  tp_config_axes g = synth_axes("gemm", "cublaslt", 1, 2048, 1536);
  g.model = "shape";
  g.proj = "1536x4096";
  put(s, bare, &g, 25.0, TP_FUSED_NA);
  tp_store_close(s);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1};
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "Shapes: the 3 the database measured."));
  assert_non_null(strstr(text, "| 1536x4096 |"));
  free(text);
  req.shapes_run = 1;
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "Shapes: the 2 run 1 measured."));
  assert_null(strstr(text, "1536x4096"));
  free(text);
  req.shapes_run = 2; /* the link probe */
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "run 2 of"));
  assert_non_null(strstr(tp_last_error(), "measured no op shape"));
  free(text);
  req.shapes_run = 99;
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "no run 99"));
  free(text);
  /* the command: a run id, the database's shapes, and not another run than --run's (whose
   * shapes --run already keeps: run 1 measured op shapes, run 3 one bare GEMM shape) */
  rp_result r = tpbench("project", "--db", d.db, "--shapes-run", "-1", "--link-gbps", "100", NULL);
  rp_expect(&r, 2, NULL, "--shapes-run: -1 is not a run id");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--shapes-run", "1", "--models", "8b", NULL);
  rp_expect(&r, 2, NULL, "--shapes-run picks the database's shapes");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--shapes-run", "1", "--run", "3", "--link-gbps", "100",
              NULL);
  rp_expect(&r, 2, NULL, "--shapes-run 1 and --run 3: --run reads the shapes of run 3 only");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--shapes-run", "1", "--link-gbps", "100", "--format",
              "json", NULL);
  rp_expect(&r, 0, "\"shapes_run\": 1", NULL);
  free(r.out);
  free(r.err);
  fx_rmdir(&d.dir);
}

/* make_synth's database and a later ops run on gpu holding a TP 1 GEMM of another shape (30 µs
 * for 8192 × 6144 × 4096); its run id. */
static int64_t put_other_gpu_gemm(const char *db, const char *gpu) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  int64_t run = begin_on(s, "ops", gpu);
  tp_config_axes g = synth_axes("gemm", "cublaslt", 1, 8192, 6144);
  put(s, run, &g, 30.0, TP_FUSED_NA);
  tp_store_close(s);
  return run;
}

/* GEMM rates of one card only: a later run on another GPU holds a TP 1 GEMM of another shape.
 * By default its GPU (the latest row's) is read alone, the first GPU's row counted and named;
 * --gemm-gpu picks the first (the one row of 4096 × 6144 × 4096: stock 135 at TP 2, as in
 * test_validation_on_synthetic_db); a GPU without rows is refused naming those with some. Mixed,
 * both rows would be read (2 shard shapes) whichever GPU was asked for. */
static void test_gemm_gpu(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  put_other_gpu_gemm(d.db, "OTHER GPU");
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .gemm_tp = 1};
  json_t *root = project_json(d.db, &req);
  json_t *in = json_object_get(root, "inputs");
  assert_string_equal(json_string_value(json_object_get(in, "gemm_gpu")), "OTHER GPU");
  assert_string_equal(json_string_value(json_object_get(in, "link_gpu_name")), "GPU");
  assert_true(json_is_false(json_object_get(in, "gemm_gpu_is_link_gpu")));
  /* the TP 2 rows were measured on GPU: not compared with OTHER GPU's prediction (stock and
   * dist_gemm of the two shapes) */
  assert_int_equal(json_integer_value(json_object_get(in, "measured_rows_other_gpus")), 4);
  assert_int_equal(json_array_size(json_object_get(root, "validation")), 0);
  assert_int_equal(json_integer_value(json_object_get(in, "gemm_shard_shapes")), 1);
  assert_int_equal(json_integer_value(json_object_get(in, "gemm_rows_other_gpus")), 1);
  assert_string_equal(json_string_value(json_object_get(in, "gemm_other_gpus")), "GPU (1 row)");
  json_decref(root);
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "measured at TP 1 on OTHER GPU (not read: the rows of other GPUs, "
                               "GPU (1 row); `--gemm-gpu` picks the card), 1 shard shapes;"));
  assert_non_null(strstr(text, "**The GEMM rates and the link probe are of different GPUs** "
                               "(GEMMs: OTHER GPU; link probe: GPU)"));
  assert_non_null(strstr(text, "Not compared: 4 measured rows at a projected degree on another "
                               "GPU than OTHER GPU (the GEMM rows'): a prediction is judged on "
                               "its own card only."));
  free(text);
  /* CSV says it too, a summary line of its own at the degree (none with GPU's GEMMs below) */
  text = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "\nnot_compared,"));
  assert_non_null(strstr(text, "\"4 measured rows at TP 2 on another GPU than OTHER GPU (the "
                               "GEMM rows'), not compared"));
  free(text);
  req.gemm_gpu = "GPU";
  root = project_json(d.db, &req);
  in = json_object_get(root, "inputs");
  assert_string_equal(json_string_value(json_object_get(in, "gemm_gpu")), "GPU");
  assert_true(json_is_true(json_object_get(in, "gemm_gpu_is_link_gpu")));
  assert_int_equal(json_integer_value(json_object_get(in, "measured_rows_other_gpus")), 0);
  assert_int_equal(json_array_size(json_object_get(root, "validation")), 1);
  char *csv = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
  assert_int_equal(rc, TP_OK);
  assert_null(strstr(csv, "not_compared"));
  free(csv);
  assert_int_equal(json_integer_value(json_object_get(in, "gemm_shard_shapes")), 1);
  assert_close(json_real_value(
                   json_object_get(json_array_get(json_object_get(root, "rows"), 0), "stock_us")),
               135.0);
  json_decref(root);
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_null(strstr(text, "of different GPUs"));
  free(text);
  rp_result r = tpbench("project", "--db", d.db, "--tp", "2", "--gemm-tp", "1", "--gemm-gpu",
                        "NO SUCH GPU", NULL);
  rp_expect(&r, 2, NULL, "no GEMM rows at TP 1 on GPU 'NO SUCH GPU' in ");
  assert_non_null(
      strstr(r.err, "the GEMM rows at TP 1 there are of: OTHER GPU (1 row), GPU (1 row)"));
  free(r.out);
  free(r.err);
  /* --run of the first GPU's run and --gemm-gpu of the other: refused in the run's scope (the
   * database holds OTHER GPU's rows, the run none) */
  r = tpbench("project", "--db", d.db, "--tp", "2", "--run", "1", "--gemm-gpu", "OTHER GPU", NULL);
  rp_expect(&r, 2, NULL, "no GEMM rows of run 1 on GPU 'OTHER GPU' in ");
  assert_non_null(strstr(r.err, "the GEMM rows of run 1 there are of: GPU (3 rows)"));
  free(r.out);
  free(r.err);
  fx_rmdir(&d.dir);
}

/* The rows not compared are those the validation would have read on their own card: per shape,
 * degree, backend and GPU the one it takes. A repeat of GPU's TP 2 rows in a later run and a
 * dist_gemm ce row beside auto (neither ever compared: the latest auto row is) count nothing
 * (the count was 11: every row); a third GPU's stock and dist_gemm of one shape count 2. */
static void test_not_compared_counts_the_rows_read(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(d.db, 0, &s), TP_OK);
  int64_t again = begin(s, "ops");
  put_shape(s, again, 4096, 100.0, 200.0, 80.0);
  put_shape(s, again, 8192, 200.0, 250.0, 250.0);
  tp_config_axes ce = synth_axes("op", "dist_gemm", 2, 4096, 3072);
  ce.schedule = "ce";
  put(s, again, &ce, 90.0, TP_FUSED_ALL);
  put_shape(s, begin_on(s, "ops", "THIRD GPU"), 4096, 100.0, 200.0, 80.0);
  tp_store_close(s);
  put_other_gpu_gemm(d.db, "OTHER GPU");
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .gemm_tp = 1};
  json_t *root = project_json(d.db, &req);
  json_t *in = json_object_get(root, "inputs");
  assert_string_equal(json_string_value(json_object_get(in, "gemm_gpu")), "OTHER GPU");
  assert_int_equal(json_integer_value(json_object_get(in, "measured_rows_other_gpus")), 6);
  json_decref(root);
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "Not compared: 6 measured rows at a projected degree"));
  free(text);
  /* on GPU: its 2 shapes compared, THIRD GPU's 2 rows not */
  req.gemm_gpu = "GPU";
  root = project_json(d.db, &req);
  in = json_object_get(root, "inputs");
  assert_int_equal(json_integer_value(json_object_get(in, "measured_rows_other_gpus")), 2);
  assert_int_equal(json_array_size(json_object_get(root, "validation")), 1);
  json_decref(root);
  fx_rmdir(&d.dir);
}

/* One row of another card is "1 measured row" in the CSV's not_compared line, as in markdown's
 * "Not compared" (it said "1 measured rows"). */
static void test_csv_not_compared_one_row(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(d.db, 0, &s), TP_OK);
  tp_config_axes stock = synth_axes("op", "stock", 2, 4096, 3072);
  put(s, begin_on(s, "ops", "OTHER GPU"), &stock, 200.0, TP_FUSED_NA);
  tp_store_close(s);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .gemm_gpu = "GPU", .columns = "result,tp,note"};
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "\nnot_compared,2,\"1 measured row at TP 2 on another GPU than GPU "
                               "(the GEMM rows'), not compared: a prediction is judged on its own "
                               "card only\"\r\n"));
  free(text);
  fx_rmdir(&d.dir);
}

/* A GPU name longer than the copy project keeps (127 bytes) still picks its own rows: the
 * latest row's GPU is read by default and --gemm-gpu of the whole name finds it (both once
 * compared the cut copy with the stored name, matched nothing and refused: "no GEMM rows"). */
static void test_gemm_gpu_long_name(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  char gpu[201];
  memset(gpu, 'x', sizeof gpu - 1);
  memcpy(gpu, "NVIDIA LONG ", 12);
  gpu[sizeof gpu - 1] = '\0';
  put_other_gpu_gemm(d.db, gpu);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .gemm_tp = 1};
  for (int asked = 0; asked < 2; asked++) {
    req.gemm_gpu = asked ? gpu : NULL;
    json_t *root = project_json(d.db, &req);
    json_t *in = json_object_get(root, "inputs");
    assert_int_equal(json_integer_value(json_object_get(in, "gemm_shard_shapes")), 1);
    assert_int_equal(strncmp(json_string_value(json_object_get(in, "gemm_gpu")), gpu, 127), 0);
    assert_string_equal(json_string_value(json_object_get(in, "gemm_other_gpus")), "GPU (1 row)");
    json_decref(root);
  }
  fx_rmdir(&d.dir);
}

/* A GEMM row of a dtype this binary does not know is never read, so it does not pick the GPU
 * either: a later run whose only GEMM row is of such a dtype leaves the first GPU's rows read
 * (it once picked that run's GPU, read nothing and refused: "no GEMM rows"), and is not counted
 * among the other GPUs' rows. */
static void test_gemm_gpu_unknown_dtype(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  put_other_gpu_gemm(d.db, "NEWER GPU");
  assert_int_equal(edit_by_hand(d.db, "UPDATE configs SET dtype = 'fp4-future' WHERE run_id = "
                                      "(SELECT id FROM runs WHERE gpu_name = 'NEWER GPU')"),
                   1);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .gemm_tp = 1};
  json_t *root = project_json(d.db, &req);
  json_t *in = json_object_get(root, "inputs");
  assert_string_equal(json_string_value(json_object_get(in, "gemm_gpu")), "GPU");
  assert_true(json_is_true(json_object_get(in, "gemm_gpu_is_link_gpu")));
  assert_int_equal(json_integer_value(json_object_get(in, "measured_rows_other_gpus")), 0);
  assert_int_equal(json_array_size(json_object_get(root, "validation")), 1);
  assert_int_equal(json_integer_value(json_object_get(in, "gemm_shard_shapes")), 1);
  assert_int_equal(json_integer_value(json_object_get(in, "gemm_rows_other_gpus")), 0);
  assert_true(json_is_null(json_object_get(in, "gemm_other_gpus")));
  json_decref(root);
  fx_rmdir(&d.dir);
}

/* Many other GPUs: the names list keeps whole entries, latest first, and counts the rest
 * (", and N more GPUs (M rows)") rather than ending inside a name (or inside a character: a
 * cut "é" came out as U+FFFD) with no word of the GPUs left out. */
static void test_gemm_gpu_many_others(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  enum { N_OTHERS = 12 };
  for (int i = 0; i < N_OTHERS; i++) {
    char gpu[64];
    snprintf(gpu, sizeof gpu, "NVIDIA H100 80GB HBM3 ééééé #%02d", i);
    put_other_gpu_gemm(d.db, gpu);
  }
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .gemm_tp = 1, .gemm_gpu = "GPU"};
  json_t *root = project_json(d.db, &req);
  json_t *in = json_object_get(root, "inputs");
  assert_int_equal(json_integer_value(json_object_get(in, "gemm_rows_other_gpus")), N_OTHERS);
  const char *names = json_string_value(json_object_get(in, "gemm_other_gpus"));
  assert_non_null(names);
  assert_null(strstr(names, "\xef\xbf\xbd")); /* no U+FFFD */
  /* every entry listed is whole, and the count of the rest closes the list */
  int listed = 0;
  for (const char *p = names; (p = strstr(p, " (1 row")) != NULL; p++) listed++;
  assert_true(listed >= 2 && listed < N_OTHERS);
  char tail[64];
  const int more = N_OTHERS - listed;
  snprintf(tail, sizeof tail, ", and %d more GPUs (%d rows)", more, more);
  assert_non_null(strstr(names, tail));
  assert_int_equal(strlen(strstr(names, tail)), strlen(tail));
  assert_non_null(strstr(names, "NVIDIA H100 80GB HBM3 ééééé #11 (1 row), "));
  json_decref(root);
  fx_rmdir(&d.dir);
}

/* --gemms: every GEMM the predictions read, by role, with the rows of its own shape marked
 * exact. The synthetic shapes at TP 2 (one chunk a rank): T = 4096 reads G(4096) (a row),
 * G(2048) twice (shard and chunk: no row, estimated); T = 8192 reads G(8192) and G(4096) twice,
 * all rows. The markdown header counts them. */
static void test_gemm_list(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .gemms = 1};
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc); /* CSV whatever the format */
  assert_int_equal(rc, TP_OK);
  static const char *const want[] = {
      "model,proj,tokens,tp,role,dtype,m,n,k,op,weights,gflop,exact,us,source",
      "m,qkv,4096,2,stock,bf16,4096,3072,4096,ag_linear,1,103.079,1,100.000,config ",
      "m,qkv,4096,2,shard,bf16,2048,3072,4096,ag_linear,1,51.540,0,50.000,",
      "m,qkv,4096,2,chunk,bf16,2048,3072,4096,ag_linear,1,51.540,0,50.000,",
      "m,qkv,8192,2,stock,bf16,8192,3072,4096,ag_linear,1,206.158,1,200.000,config ",
      "m,qkv,8192,2,shard,bf16,4096,3072,4096,ag_linear,1,103.079,1,100.000,config ",
      "m,qkv,8192,2,chunk,bf16,4096,3072,4096,ag_linear,1,103.079,1,100.000,config "};
  const char *line = text;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (strncmp(line, want[i], strlen(want[i])) != 0)
      fail_msg("line %zu: want '%s...', got:\n%s", i, want[i], line);
    line = strchr(line, '\n');
    assert_non_null(line);
    line++;
  }
  assert_string_equal(line, "");
  free(text);
  req.gemms = 0;
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "of the 6 GEMMs the predictions read, 4 are rows of their exact "
                               "shape, 2 estimated from FLOPs (`--gemms` lists each)"));
  free(text);
  json_t *root = project_json(d.db, &req);
  json_t *inputs = json_object_get(root, "inputs");
  assert_int_equal(json_integer_value(json_object_get(inputs, "gemms_read")), 6);
  assert_int_equal(json_integer_value(json_object_get(inputs, "gemms_exact")), 4);
  json_decref(root);
  fx_rmdir(&d.dir);
}

/* A shape whose dtype has no GEMM row (an fp8 copy of the synthetic shape) reads three GEMMs
 * without a time: listed with us empty, and counted apart from the estimated ones. */
static void test_gemm_list_untimed(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  const int tps[] = {2};
  tp_project_shape shapes[2] = {{.model = "m",
                                 .proj = "qkv",
                                 .op = TP_OP_AG_LINEAR,
                                 .dtype = TP_BF16,
                                 .tokens = 4096,
                                 .n = 6144,
                                 .k = 4096,
                                 .n_weights = 1}};
  shapes[1] = shapes[0];
  shapes[1].dtype = TP_FP8;
  tp_project_request req = {.tps = tps, .n_tps = 1, .shapes = shapes, .n_shapes = 2, .gemms = 1};
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "\nm,qkv,4096,2,chunk,fp8,2048,3072,4096,ag_linear,1,51.540,0,,no "
                               "GEMM rows of dtype fp8\r\n"));
  free(text);
  req.gemms = 0;
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  if (!strstr(text, "of the 6 GEMMs the predictions read, 1 are rows of their exact shape, 2 "
                    "estimated from FLOPs, 3 without a time (no GEMM row of their dtype)"))
    fail_msg("the header's counts:\n%.1500s", text);
  free(text);
  json_t *root = project_json(d.db, &req);
  json_t *inputs = json_object_get(root, "inputs");
  assert_int_equal(json_integer_value(json_object_get(inputs, "gemms_read")), 6);
  assert_int_equal(json_integer_value(json_object_get(inputs, "gemms_exact")), 1);
  assert_int_equal(json_integer_value(json_object_get(inputs, "gemms_untimed")), 3);
  json_decref(root);
  fx_rmdir(&d.dir);
}

/* One probed shape on gpu: back to back 100 µs, after a gap of its time 80 µs. */
/* A run of GEMMs between gaps on gpu: the 4096³ GEMM's points of layers[i] taking us[i]. */
static void put_pacing_points(const char *db, const char *gpu, const char *const *layers,
                              const double *us, int n) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  int64_t run = begin_on(s, "link --gpus 1", gpu);
  for (int i = 0; i < n; i++) {
    tp_config_axes a = {.kind = "link",
                        .op_or_layer = layers[i],
                        .backend = "cublaslt",
                        .tp = 1,
                        .m = 4096,
                        .n = 4096,
                        .k = 4096,
                        .dtype = "bf16",
                        .pass = "fwd"};
    put(s, run, &a, us[i], TP_FUSED_NA);
  }
  tp_store_close(s);
}

static void put_pacing(const char *db, const char *gpu) {
  const char *const layers[] = {"gemm_gap_0", "gemm_gap_100"};
  const double us[] = {100.0, 80.0};
  put_pacing_points(db, gpu, layers, us, 2);
}

/* The synthetic shapes (make_synth) with GEMMs between gaps on the GEMM rows' GPU: stock's
 * GEMM paced (T = 4096: gap 60 %, p = 0.88, stock 148; T = 8192: gap 50 %, p = 0.9, stock 280);
 * the same probe on another GPU is not read, and the output says so. */
static void test_pace_on_synthetic_db(void **state) {
  (void)state;
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1};
  for (int other_gpu = 0; other_gpu < 2; other_gpu++) {
    synth_db d;
    make_synth(&d, 1);
    put_pacing(d.db, other_gpu ? "OTHER GPU" : "GPU");
    json_t *root = project_json(d.db, &req);
    json_t *rows = json_object_get(root, "rows"), *inputs = json_object_get(root, "inputs");
    json_t *first = json_array_get(rows, 0), *second = json_array_get(rows, 1);
    assert_close(json_real_value(json_object_get(first, "stock_us")), other_gpu ? 160.0 : 148.0);
    assert_close(json_real_value(json_object_get(second, "stock_us")), other_gpu ? 300.0 : 280.0);
    assert_close(json_real_value(json_object_get(json_object_get(first, "pace"), "factor")),
                 other_gpu ? 1.0 : 0.88);
    assert_int_equal(json_is_null(json_object_get(inputs, "pace_run")), other_gpu);
    assert_int_equal(json_is_null(json_object_get(inputs, "pace_not_read")), !other_gpu);
    json_decref(root);
    tp_rc rc;
    char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
    assert_int_equal(rc, TP_OK);
    assert_non_null(strstr(text, other_gpu ? "not read: run 3 on OTHER GPU, not the GEMM rows'"
                                           : "### GEMMs between gaps (run 3)"));
    /* the model line states the stock the rows price: the GEMM paced */
    assert_non_null(strstr(text, "stock = G·p + c"));
    assert_null(strstr(text, "stock = G + "));
    free(text);
    fx_rmdir(&d.dir);
  }
}

/* The first row's pace factor, stock and pace source of a JSON projection (TP 2). */
static void first_row_pace(const char *db, const tp_project_request *req, double *factor,
                           double *stock, char *source, size_t cap, char *not_read, size_t nr_cap) {
  json_t *root = project_json(db, req);
  json_t *first = json_array_get(json_object_get(root, "rows"), 0);
  json_t *pace = json_object_get(first, "pace");
  *factor = json_real_value(json_object_get(pace, "factor"));
  *stock = json_real_value(json_object_get(first, "stock_us"));
  const char *src = json_string_value(json_object_get(pace, "source"));
  snprintf(source, cap, "%s", src ? src : "");
  const char *nr =
      json_string_value(json_object_get(json_object_get(root, "inputs"), "pace_not_read"));
  snprintf(not_read, nr_cap, "%s", nr ? nr : "");
  json_decref(root);
}

/* Broken points never pace stock: an infinite back-to-back time (SQL's "> 0" lets it through)
 * leaves the shape without a gap-0 point; a ratio no clock gives (a gap point of 1e-300 or
 * 1e300 µs) is refused by name. Stock stays G + c = 160 µs, never 0·G + c or 1e297·G + c. */
static void test_pace_broken_points(void **state) {
  (void)state;
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1};
  const char *const layers[] = {"gemm_gap_0", "gemm_gap_100"};
  const double cases[][2] = {{100.0, 80.0}, {100.0, 1e-300}, {100.0, 1e300}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    synth_db d;
    make_synth(&d, 1);
    put_pacing_points(d.db, "GPU", layers, cases[i], 2);
    if (i == 0) /* the store writes no infinity: a database edited by hand does */
      assert_int_equal(edit_by_hand(d.db, "UPDATE results SET median_us = 9e999 WHERE config_id "
                                          "IN (SELECT id FROM configs WHERE layer = 'gemm_gap_0')"),
                       1);
    double factor = 0, stock = 0;
    char source[256], not_read[256];
    first_row_pace(d.db, &req, &factor, &stock, source, sizeof source, not_read, sizeof not_read);
    assert_close(factor, 1.0);
    assert_close(stock, 160.0);
    /* the run of an infinite gap-0 time is no probe at all */
    assert_non_null(
        strstr(source, i == 0 ? "no GEMMs-between-gaps probe" : "outside 0.5..1.5, not read"));
    fx_rmdir(&d.dir);
  }
}

/* p scales the GEMM rows' time, so it is their card's: a probe on the GEMMs' GPU is read with
 * --link-gbps (no link probe) and beside a link probe of another card; a probe on any other
 * GPU, the link probe's included, is named and not read. */
#define LONG_GPU_NAME                                                                              \
  "A CARD OF A VENDOR WHOSE NAMES RUN LONG, WITH A MEMORY SIZE AND A FORM FACTOR, OTHER GPU"

static void test_pace_follows_gemm_gpu(void **state) {
  (void)state;
  const int tps[] = {2};
  for (int with_link = 0; with_link < 2; with_link++)
    for (int on_gemm_gpu = 0; on_gemm_gpu < 2; on_gemm_gpu++) {
      tp_project_request req = {.tps = tps, .n_tps = 1, .link_gbps = with_link ? 0.0 : 100.0};
      synth_db d;
      make_synth(&d, 0);
      if (with_link) put_link_run_on(d.db, "OTHER GPU");
      /* The other card's name is longer than 80 bytes: the note names it whole. */
      put_pacing(d.db, on_gemm_gpu ? "GPU" : LONG_GPU_NAME);
      double factor = 0, stock = 0;
      char source[256], not_read[256];
      first_row_pace(d.db, &req, &factor, &stock, source, sizeof source, not_read, sizeof not_read);
      if (on_gemm_gpu) {
        assert_true(factor < 1.0);
        assert_string_equal(not_read, "");
      } else {
        assert_close(factor, 1.0);
        assert_non_null(strstr(not_read, "on " LONG_GPU_NAME ", not the GEMM rows' GPU"));
      }
      fx_rmdir(&d.dir);
    }
}

/* A name as long as a driver gives (cudaDeviceProp.name: up to 255 bytes), its last character
 * a two-byte one: the "not read" note names it whole, never cut at 127 bytes (mid-character). */
static void test_pace_not_read_names_a_long_gpu_whole(void **state) {
  (void)state;
  char name[256];
  memset(name, 'X', 253);
  memcpy(name + 253, "\xc3\xa9", 3); /* "é" and the terminator: 255 bytes */
  char want[400];
  snprintf(want, sizeof want, "on %s, not the GEMM rows' GPU", name);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1, .link_gbps = 100.0};
  synth_db d;
  make_synth(&d, 0);
  put_pacing(d.db, name);
  double factor = 0, stock = 0;
  char source[256], not_read[512];
  first_row_pace(d.db, &req, &factor, &stock, source, sizeof source, not_read, sizeof not_read);
  assert_close(factor, 1.0);
  if (!strstr(not_read, want)) fail_msg("not read: %s", not_read);
  fx_rmdir(&d.dir);
}

/* A GPU of no recorded name is one card on both sides, as the GEMM rows and the validation read
 * it (GPU_OF_CONFIG): GEMM rows whose run is gone (a database edited by hand) are of "", and a
 * probe run of no name paces them (p 0.88, stock 148; the probe was refused, "run 3 on , not
 * the GEMM rows' GPU"). A probe of no name beside named GEMMs is named "a GPU of no name". */
static void test_pace_gpu_of_no_name(void **state) {
  (void)state;
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1};
  for (int gemms_named = 0; gemms_named < 2; gemms_named++) {
    synth_db d;
    make_synth(&d, 1);
    put_pacing(d.db, NULL); /* run 3 */
    if (!gemms_named) edit_by_hand(d.db, "UPDATE configs SET run_id = 99 WHERE kind = 'gemm'");
    double factor = 0, stock = 0;
    char source[256], not_read[256];
    first_row_pace(d.db, &req, &factor, &stock, source, sizeof source, not_read, sizeof not_read);
    assert_close(factor, gemms_named ? 1.0 : 0.88);
    assert_close(stock, gemms_named ? 160.0 : 148.0);
    assert_string_equal(not_read,
                        gemms_named ? "run 3 on a GPU of no name, not the GEMM rows' GPU" : "");
    tp_rc rc;
    char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
    assert_int_equal(rc, TP_OK);
    if (!gemms_named)
      assert_non_null(strstr(text, "(stock's pace factor p): run 3 (a GPU of no name)."));
    free(text);
    fx_rmdir(&d.dir);
  }
}

/* A later run whose points give no back-to-back time of a shape (no gemm_gap_0; layers the
 * probe never writes: 'gemm_gap_00', 'gemm_gap_1e1'; a gap-0 time of infinity) is no probe
 * to read: the earlier whole run (3) paces stock, not p = 1 under a header naming the later
 * run, nor a ratio over a point misread as gap 0. */
static void test_pace_run_needs_back_to_back(void **state) {
  (void)state;
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1};
  const char *const gap_only[] = {"gemm_gap_100"};
  const char *const misnamed[] = {"gemm_gap_00", "gemm_gap_1e1", "gemm_gap_100"};
  const double us[] = {50.0, 10.0, 50.0};
  for (int later = 0; later < 3; later++) {
    synth_db d;
    make_synth(&d, 1);
    put_pacing(d.db, "GPU"); /* run 3 */
    if (later == 0) put_pacing_points(d.db, "GPU", gap_only, us, 1);
    else if (later == 1) put_pacing_points(d.db, "GPU", misnamed, us, 3);
    else { /* a back-to-back time of infinity (a hand-edited database): no time at all */
      put_pacing(d.db, "GPU");
      assert_int_equal(edit_by_hand(d.db, "UPDATE results SET median_us = 9e999 WHERE config_id = "
                                          "(SELECT max(id) FROM configs WHERE layer = "
                                          "'gemm_gap_0')"),
                       1);
    }
    json_t *root = project_json(d.db, &req);
    json_t *first = json_array_get(json_object_get(root, "rows"), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(root, "inputs"), "pace_run")), 3);
    assert_close(json_real_value(json_object_get(json_object_get(first, "pace"), "factor")), 0.88);
    assert_close(json_real_value(json_object_get(first, "stock_us")), 148.0);
    json_decref(root);
    fx_rmdir(&d.dir);
  }
}

static int table_rows_after(const char *text, const char *heading) {
  const char *at = strstr(text, heading);
  if (!at) return -1;
  const char *line = strstr(at, "\n|---");
  if (!line) return -1;
  int rows = 0;
  for (line = strchr(line + 1, '\n'); line && line[1] == '|'; line = strchr(line + 1, '\n')) rows++;
  return rows;
}

/* A probed shape without FLOPs (M not positive: a damaged row) is no point of the probe: the
 * inputs' points and the markdown's table leave it out, and p is the whole shape's. */
static void test_pace_points_skip_shapes_without_flops(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(d.db, 1, &s), TP_OK);
  int64_t run = begin_on(s, "link --gpus 1", "GPU");
  const int64_t rows[] = {4096, -4096};
  const char *const layers[] = {"gemm_gap_0", "gemm_gap_100"};
  const double us[] = {100.0, 80.0};
  for (int shape = 0; shape < 2; shape++)
    for (int i = 0; i < 2; i++) {
      tp_config_axes a = {.kind = "link",
                          .op_or_layer = layers[i],
                          .backend = "cublaslt",
                          .tp = 1,
                          .m = rows[shape],
                          .n = 4096,
                          .k = 4096,
                          .dtype = "bf16",
                          .pass = "fwd"};
      put(s, run, &a, us[i] * (shape + 1), TP_FUSED_NA);
    }
  tp_store_close(s);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1};
  json_t *root = project_json(d.db, &req);
  assert_int_equal(json_array_size(json_object_get(json_object_get(root, "inputs"), "pace_points")),
                   2);
  json_t *first = json_array_get(json_object_get(root, "rows"), 0);
  assert_close(json_real_value(json_object_get(json_object_get(first, "pace"), "factor")), 0.88);
  json_decref(root);
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_int_equal(table_rows_after(text, "### GEMMs between gaps (run 3)"), 2);
  free(text);
  fx_rmdir(&d.dir);
}

static void test_bad_inputs(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 0);
  const int tps[] = {2};
  tp_project_request req = {.tps = tps, .n_tps = 1};
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "no link probe"));
  assert_non_null(strstr(tp_last_message(), "--link-gbps"));
  assert_true(!text || !*text); /* nothing written */
  free(text);
  req.link_gbps = 100.0; /* an override needs no probe */
  text = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "no probe: no latency; --link-gbps 100"));
  free(text);
  req.run_id = 99;
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "no run 99"));
  free(text);
  /* the command: a database without GEMM rows, an unknown degree, a bad bandwidth */
  char empty[700];
  fx_path(&d.dir, "empty.db", empty, sizeof empty);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(empty, 1, &s), TP_OK);
  tp_store_close(s);
  rp_result r = tpbench("project", "--db", empty, NULL);
  rp_expect(&r, 2, NULL, "no GEMM rows");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--tp", "1", NULL);
  rp_expect(&r, 2, NULL, "--tp: 1 is out of range");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--link-gbps", "-3", NULL);
  rp_expect(&r, 2, NULL, "--link-gbps: '-3' is not a bandwidth");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--tp", "2,2", "--link-gbps", "100", NULL);
  rp_expect(&r, 2, NULL, "--tp: 2 is listed twice");
  free(r.out);
  free(r.err);
  /* repeats of tokens or models (a preset's two names) would count shapes twice */
  r = tpbench("project", "--db", d.db, "--tokens", "4096,4096", "--link-gbps", "100", NULL);
  rp_expect(&r, 2, NULL, "--tokens: 4096 is listed twice");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--models", "8b,llama3-8b", "--link-gbps", "100", NULL);
  rp_expect(&r, 2, NULL, "--models: llama3-8b is listed twice");
  free(r.out);
  free(r.err);
  /* decimal bandwidths in range only */
  r = tpbench("project", "--db", d.db, "--link-gbps", "0x10", NULL);
  rp_expect(&r, 2, NULL, "from 0.001 to 1000000");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--link-gbps", "1e-300", NULL);
  rp_expect(&r, 2, NULL, "--link-gbps: '1e-300' is not a bandwidth");
  free(r.out);
  free(r.err);
  fx_rmdir(&d.dir);
}

/* --models / --tokens: the presets' four projections, predicted (even 405B, which nobody
 * measured), in model, projection, tokens order; an unknown model refused. */
static void test_preset_shapes(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  rp_result r = tpbench("project", "--db", d.db, "--models", "405b", "--tokens", "16384,32768",
                        "--tp", "4,8", "--format", "csv", NULL);
  rp_expect(&r, 0, "\npredicted,llama3-405b,qkv,ag_linear,16384,bf16,4,16384,", NULL);
  int rows = 0;
  for (const char *p = strstr(r.out, "\npredicted,llama3-405b,"); p;
       p = strstr(p + 1, "\npredicted,llama3-405b,"))
    rows++;
  assert_int_equal(rows, 4 * 2 * 2); /* projections × tokens × degrees */
  assert_non_null(strstr(r.out, "\npredicted,llama3-405b,w2,linear_rs,32768,bf16,8,"));
  assert_null(strstr(r.out, "\nerror_median")); /* nothing measured at 4 or 8 */
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--tokens", "4096", "--tp", "8", NULL);
  rp_expect(&r, 0, "Shapes: 12 from the model presets", NULL); /* 8b, 70b, 405b by default */
  assert_non_null(strstr(r.out, "| predicted | llama3-70b | w13 |"));
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--models", "nope", NULL);
  rp_expect(&r, 2, NULL, "unknown model 'nope'");
  free(r.out);
  free(r.err);
  fx_rmdir(&d.dir);
}

/* ---- the sample database --------------------------------------------------------- */

/* The default op set's shapes the sample measured at TP 2, forward. */
static int64_t default_shapes(const char *db) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(db, &s), TP_OK);
  int64_t n = fx_int(s, "SELECT count(*) FROM (SELECT DISTINCT model, proj, tokens FROM configs "
                        "WHERE kind = 'op' AND backend = 'stock' AND status = 'ok' AND pass = "
                        "'fwd' AND tp = 2 AND model IN ('llama3-8b', 'llama3-70b') AND proj IN "
                        "('qkv', 'wo', 'w13', 'w2') AND tokens IN (4096, 8192, 16384))");
  tp_store_close(s);
  return n;
}

/* The rows of the markdown table that follows heading. */
static void test_sample_db_validation_table(void **state) {
  (void)state;
  if (access(FX_SAMPLE_DB, R_OK) != 0) skip();
  fx_dir d;
  char db[600];
  assert_int_equal(fx_mkdir(&d, "tp_project_sample"), 0);
  fx_path(&d, "sample.db", db, sizeof db);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, db), 0);
  size_t before_len = 0, after_len = 0;
  unsigned char *before = fx_read_all(db, &before_len);
  int64_t shapes = default_shapes(db);
  assert_int_equal(shapes, 24);
  rp_result r = tpbench("project", "--db", db, "--tp", "2", NULL);
  rp_expect(&r, 0, "### Validation at TP 2: predicted against measured", NULL);
  assert_int_equal(table_rows_after(r.out, "### Validation at TP 2"), shapes);
  const char *models[] = {"llama3-8b", "llama3-70b"}, *projs[] = {"qkv", "wo", "w13", "w2"};
  const int tokens[] = {4096, 8192, 16384};
  const char *table = strstr(r.out, "### Validation at TP 2");
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++)
      for (int t = 0; t < 3; t++) {
        char cells[96];
        snprintf(cells, sizeof cells, "| %s | %s |", models[i], projs[j]);
        char tok[32];
        snprintf(tok, sizeof tok, "| %d | bf16 | 2 |", tokens[t]);
        int found = 0;
        for (const char *p = strstr(table, cells); p && !found; p = strstr(p + 1, cells)) {
          const char *eol = strchr(p, '\n'), *hit = strstr(p, tok);
          found = hit && eol && hit < eol;
        }
        if (!found) fail_msg("no validation row for %s %s %d", models[i], projs[j], tokens[t]);
      }
  assert_non_null(strstr(r.out, "Error at TP 2, over the rows measured at 0.1 ms or more: stock "
                                "signed median "));
  free(r.out);
  free(r.err);
  unsigned char *after = fx_read_all(db, &after_len);
  assert_int_equal(before_len, after_len); /* the command only reads */
  assert_memory_equal(before, after, before_len);
  free(before);
  free(after);
  fx_rmdir(&d);
}

/* Every predicted stock and dist_gemm time of a JSON output, in row order. */
static double *predictions_of(const char *json, size_t *n) {
  json_error_t jerr;
  json_t *root = json_loads(json, 0, &jerr);
  if (!root) fail_msg("not JSON: %s", jerr.text);
  json_t *rows = json_object_get(root, "rows");
  *n = json_array_size(rows);
  double *v = calloc(2 * *n + 1, sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < *n; i++) {
    json_t *r = json_array_get(rows, i);
    v[2 * i] = json_real_value(json_object_get(r, "stock_us"));
    v[2 * i + 1] = json_real_value(json_object_get(r, "dist_us"));
  }
  json_decref(root);
  return v;
}

/* The model is not fitted to the rows it is judged on: the sample's TP 2 rows predicted from
 * the TP 1 GEMMs stay the same when every measured stock and dist_gemm row of the sample
 * changes (tripled), while the errors follow the measurements. */
static void test_prediction_ignores_judged_rows(void **state) {
  (void)state;
  const char *tp1 = TP_TEST_DATA_DIR "/../../examples/tpbench-h200-tp1-gemm.db";
  if (access(FX_SAMPLE_DB, R_OK) != 0 || access(tp1, R_OK) != 0) skip();
  fx_dir d;
  char db[600];
  assert_int_equal(fx_mkdir(&d, "tp_project_judged"), 0);
  fx_path(&d, "judged.db", db, sizeof db);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, db), 0);
  rp_result r = tpbench("import", tp1, "--db", db, NULL);
  rp_expect(&r, 0, NULL, NULL);
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", db, "--tp", "2", "--gemm-tp", "1", "--format", "json", NULL);
  rp_expect(&r, 0, "\"median_error_pct\"", NULL);
  size_t n_before = 0, n_after = 0;
  double *before = predictions_of(r.out, &n_before);
  char *json_before = r.out;
  free(r.err);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  assert_int_equal(fx_exec(s, "UPDATE results SET median_us = 3 * median_us WHERE config_id IN "
                              "(SELECT id FROM configs WHERE kind = 'op' AND tp = 2)"),
                   0);
  tp_store_close(s);
  r = tpbench("project", "--db", db, "--tp", "2", "--gemm-tp", "1", "--format", "json", NULL);
  rp_expect(&r, 0, NULL, NULL);
  double *after = predictions_of(r.out, &n_after);
  assert_int_equal(n_before, 24);
  assert_int_equal(n_after, n_before);
  for (size_t i = 0; i < 2 * n_before; i++) assert_close(after[i], before[i]);
  assert_string_not_equal(json_before, r.out); /* the measured side and the errors moved */
  free(before);
  free(after);
  free(json_before);
  free(r.out);
  free(r.err);
  fx_rmdir(&d);
}

/* The predictions' header lines: markdown's compact default (a terminal's width), its full
 * table under --columns all (every input, as before the compact default), the CSV's every
 * column. */
static const char COMPACT_HEADER[] =
    "\n| result | model | proj | tokens | dtype | tp | stock (µs) | dist_gemm (µs) | speedup | "
    "note |\n|---|---|---|---:|---|---:|---:|---:|---:|---|\n";
static const char FULL_HEADER[] =
    "\n| result | model | proj | op | tokens | dtype | tp | shard M×N×K | GEMM (µs) | GEMM "
    "TFLOP/s | GEMM source | V (MiB) | NCCL GB/s | NCCL latency (µs) | collective (µs) | "
    "collective line | stock GEMM pace p | pace source | chunks C | chunk rows R | chunk GEMM (µs) "
    "| chunk GEMM source | push "
    "(MiB) | push (µs) | push line | GEMMs | pushes | local traffic per chunk (µs) | stall "
    "(µs) | drain (µs) | stock (µs) | dist_gemm (µs) | speedup | note |\n";
static const char CSV_FULL_HEADER[] =
    "result,model,proj,op,tokens,dtype,tp,m,n,k,gemm_gflop,gemm_us,gemm_tflops,gemm_exact,"
    "gemm_source,gemm_lo_config,gemm_hi_config,volume_bytes,nccl_gbps,nccl_latency_us,"
    "collective_us,collective_line,pace_factor,pace_gap_pct,pace_source,chunks,chunk_rows,"
    "chunk_gemm_us,chunk_gemm_source,chunk_bytes,"
    "push_gbps,push_latency_us,push_us,push_line,gemms,pushes,local_us,stall_us,drain_us,"
    "stock_us,dist_us,speedup,note,stock_measured_us,stock_config,stock_error_pct,"
    "dist_measured_us,dist_config,dist_error_pct,dist_stock_path\r\n";

/* The longest line of the predictions table (from its heading to the blank line after it). */
static size_t widest_prediction_line(const char *md) {
  const char *p = strstr(md, "\n### Predictions\n");
  if (!p) p = strstr(md, "\n### Inputs and predictions\n");
  assert_non_null(p);
  const char *end = strstr(strstr(p, "\n|"), "\n\n");
  assert_non_null(end);
  size_t widest = 0;
  for (const char *line = strstr(p, "\n|") + 1; line < end;) {
    const char *nl = strchr(line, '\n');
    if ((size_t)(nl - line) > widest) widest = (size_t)(nl - line);
    line = nl + 1;
  }
  return widest;
}

/* --columns: markdown is compact by default and whole with all; CSV and JSON keep every field
 * unless columns are named; a wrong name is refused with the valid ones. (Before, markdown
 * printed 32 columns, rows of 600-800 characters, and --columns was an unknown option.) */
static void test_columns(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  rp_result r = tpbench("project", "--db", d.db, "--tp", "2,4", NULL);
  rp_expect(&r, 0, COMPACT_HEADER, NULL);
  assert_null(strstr(r.out, FULL_HEADER));
  assert_non_null(strstr(r.out, "**A prediction, not a measurement**"));
  assert_non_null(strstr(r.out, "\n| predicted | m | qkv | 4096 | bf16 | 2 | 160.0 | 110.0 | "));
  assert_non_null(strstr(r.out, "`--columns all`")); /* the way to the inputs */
  assert_non_null(strstr(r.out, "### Validation at TP 2: predicted against measured"));
  assert_true(widest_prediction_line(r.out) < 160);
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--tp", "2,4", "--columns", "all", NULL);
  rp_expect(&r, 0, FULL_HEADER, NULL);
  assert_null(strstr(r.out, COMPACT_HEADER));
  assert_non_null(strstr(r.out, "\n### Inputs and predictions\n\n| result |"));
  free(r.out);
  free(r.err);
  /* the machine formats: every column by default and with all; named ones in their order */
  const char *csv_columns[] = {NULL, "all"};
  for (size_t i = 0; i < 2; i++) {
    r = tpbench("project", "--db", d.db, "--tp", "2", "--format", "csv",
                csv_columns[i] ? "--columns" : NULL, csv_columns[i], NULL);
    rp_expect(&r, 0, NULL, NULL);
    assert_memory_equal(r.out, CSV_FULL_HEADER, strlen(CSV_FULL_HEADER));
    free(r.out);
    free(r.err);
  }
  r = tpbench("project", "--db", d.db, "--tp", "2", "--format", "csv", "--columns",
              "tokens,shard,speedup,result", NULL);
  rp_expect(&r, 0, "tokens,shard,speedup,result\r\n4096,4096×3072×4096,", NULL);
  assert_non_null(strstr(r.out, "\n,,,error_median\r\n")); /* the summary, labelled */
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--tp", "2", "--format", "json", "--columns",
              "tokens,dist_us", NULL);
  rp_expect(&r, 0, NULL, NULL);
  json_error_t jerr;
  json_t *root = json_loads(r.out, 0, &jerr);
  if (!root) fail_msg("not JSON: %s\n%s", jerr.text, r.out);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  assert_int_equal(json_object_size(row), 2);
  assert_int_equal(json_integer_value(json_object_get(row, "tokens")), 4096);
  assert_close(json_real_value(json_object_get(row, "dist_us")), 110.0);
  assert_string_equal(json_string_value(json_object_get(root, "result")), "prediction");
  json_decref(root);
  free(r.out);
  free(r.err);
  /* refusals name the column and, for an unknown one, every valid name */
  r = tpbench("project", "--db", d.db, "--columns", "model,bogus", NULL);
  rp_expect(&r, 2, NULL,
            "--columns: unknown column \"bogus\"; the columns are: all, result, model, proj");
  assert_non_null(strstr(r.err, "dist_stock_path"));
  assert_string_equal(r.out, "");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--columns", "tp,tp", NULL);
  rp_expect(&r, 2, NULL, "--columns: column \"tp\" is listed twice");
  free(r.out);
  free(r.err);
  r = tpbench("project", "--db", d.db, "--columns", "all,tp", NULL);
  rp_expect(&r, 2, NULL, "--columns: all stands alone");
  free(r.out);
  free(r.err);
  /* an empty name is called one; a hostile name reaches the message cut and printable */
  r = tpbench("project", "--db", d.db, "--columns", "model,", NULL);
  rp_expect(&r, 2, NULL, "--columns: an empty name in the list");
  free(r.out);
  free(r.err);
  char hostile[300];
  memset(hostile, 'x', sizeof hostile - 1);
  hostile[sizeof hostile - 1] = '\0';
  hostile[0] = '\x1b';
  r = tpbench("project", "--db", d.db, "--columns", hostile, NULL);
  rp_expect(&r, 2, NULL, "--columns: unknown column \"?xxx");
  assert_null(strchr(r.err, '\x1b'));
  assert_non_null(strstr(r.err, "...\"; the columns are: all, result"));
  free(r.out);
  free(r.err);
  fx_rmdir(&d.dir);
}

/* A CSV of one column writes an empty value as "": a blank line is no field to a CSV reader
 * (Python's csv reads [], pandas skips it), so the predictions of no note or no measurement and
 * the summaries' empty figures would lose their lines (--columns note wrote "note\n\n\n"). */
static void test_csv_one_column_empty_values(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  const int tps[] = {2, 4};
  const char *const columns[] = {"note", "stock_error_pct", "dist_error_pct"};
  for (size_t i = 0; i < sizeof columns / sizeof columns[0]; i++) {
    tp_project_request req = {.tps = tps, .n_tps = 2, .columns = columns[i]};
    tp_rc rc;
    char *text = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
    assert_int_equal(rc, TP_OK);
    /* no blank line, CRLF (RFC 4180) or LF: "\n\n" alone no longer sees one */
    assert_null(strstr(text, "\n\r\n"));
    assert_null(strstr(text, "\n\n"));
    int lines = 0;
    for (const char *at = text; (at = strchr(at, '\n')); at++) lines++;
    assert_int_equal(lines, 5);                  /* the header and the four predictions */
    assert_non_null(strstr(text, "\n\"\"\r\n")); /* TP 4: no note, nothing measured */
    free(text);
  }
  fx_rmdir(&d.dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_exact_row),
      cmocka_unit_test(test_gemm_interpolated_by_flops),
      cmocka_unit_test(test_gemm_extrapolated_and_same_flops),
      cmocka_unit_test(test_gemm_no_rows_of_dtype),
      cmocka_unit_test(test_link_line),
      cmocka_unit_test(test_link_edges),
      cmocka_unit_test(test_gemm_below_toward_kernel_cost),
      cmocka_unit_test(test_costs_from_probe_points),
      cmocka_unit_test(test_costs_fallbacks),
      cmocka_unit_test(test_chunk_rule),
      cmocka_unit_test(test_pipeline_gather_by_hand),
      cmocka_unit_test(test_pipeline_scatter_by_hand),
      cmocka_unit_test(test_predict_by_hand),
      cmocka_unit_test(test_predict_refusals),
      cmocka_unit_test(test_pace_factor),
      cmocka_unit_test(test_gemm_list),
      cmocka_unit_test(test_shapes_run),
      cmocka_unit_test(test_gemm_gpu),
      cmocka_unit_test(test_not_compared_counts_the_rows_read),
      cmocka_unit_test(test_csv_not_compared_one_row),
      cmocka_unit_test(test_gemm_gpu_long_name),
      cmocka_unit_test(test_gemm_gpu_unknown_dtype),
      cmocka_unit_test(test_gemm_gpu_many_others),
      cmocka_unit_test(test_gemm_list_untimed),
      cmocka_unit_test(test_pace_on_synthetic_db),
      cmocka_unit_test(test_pace_run_needs_back_to_back),
      cmocka_unit_test(test_pace_broken_points),
      cmocka_unit_test(test_pace_follows_gemm_gpu),
      cmocka_unit_test(test_pace_not_read_names_a_long_gpu_whole),
      cmocka_unit_test(test_pace_gpu_of_no_name),
      cmocka_unit_test(test_pace_points_skip_shapes_without_flops),
      cmocka_unit_test(test_error_summary),
      cmocka_unit_test(test_validation_on_synthetic_db),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_preset_shapes),
      cmocka_unit_test(test_sample_db_validation_table),
      cmocka_unit_test(test_prediction_ignores_judged_rows),
      cmocka_unit_test(test_columns),
      cmocka_unit_test(test_csv_one_column_empty_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
