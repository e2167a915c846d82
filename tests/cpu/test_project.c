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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  tp_project_gemm_time(rows, 3, 4096, 3072, 4096, 1, TP_BF16, &est);
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
  tp_project_gemm_time(rows, 2, 2048, 1024, 1024, 1, TP_BF16, &est);
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
  tp_project_gemm_time(rows, 3, 512, 512, 512, 1, TP_BF16, &est);
  assert_true(est.extrapolated);
  assert_close(est.tflops, 200.0);
  assert_close(est.us, 2.0 * 512 * 512 * 512 / 200e6);
  assert_non_null(strstr(est.source, "extrapolated (held flat)"));
  /* above every row */
  tp_project_gemm_time(rows, 3, 4096, 4096, 4096, 1, TP_BF16, &est);
  assert_true(est.extrapolated);
  assert_close(est.tflops, 400.0);
  /* a shard of the same FLOPs as two rows but neither's shape: their mean */
  tp_project_gemm_time(rows, 3, 512, 2048, 1024, 1, TP_BF16, &est);
  assert_false(est.exact);
  assert_false(est.extrapolated);
  assert_close(est.tflops, 200.0);
  assert_non_null(strstr(est.source, "same FLOPs"));
}

static void test_gemm_no_rows_of_dtype(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_at_rate(3, 1024, 1024, 1024, 100.0)};
  tp_project_gemm_est est;
  tp_project_gemm_time(rows, 1, 1024, 1024, 1024, 1, TP_FP32, &est);
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

/* ---- a whole prediction --------------------------------------------------------- */

/* The all-gather collective and the push, each two points around 16 and 32 MiB. */
static const tp_project_link_point AG[] = {{21, 8 * 1048576.0, 40.0}, {22, 32 * 1048576.0, 100.0}};
static const tp_project_link_point RS[] = {{31, 8 * 1048576.0, 44.0}, {32, 32 * 1048576.0, 140.0}};
static const tp_project_link_point CE[] = {{41, 8 * 1048576.0, 20.0}, {42, 32 * 1048576.0, 50.0}};

static tp_project_inputs hand_inputs(const tp_project_gemm *rows, size_t n) {
  tp_project_inputs in = {.gemms = rows, .n_gemms = n};
  in.links[TP_LINK_NCCL_ALL_GATHER] = (tp_project_link_curve){AG, 2};
  in.links[TP_LINK_NCCL_REDUCE_SCATTER] = (tp_project_link_curve){RS, 2};
  in.links[TP_LINK_CE_PUSH] = (tp_project_link_curve){CE, 2};
  return in;
}

static tp_project_shape shape_of(const char *proj, tp_op op, int64_t tokens, int64_t n, int64_t k) {
  tp_project_shape s = {
      .op = op, .dtype = TP_BF16, .tokens = tokens, .n = n, .k = k, .n_weights = 1};
  snprintf(s.model, sizeof s.model, "m");
  snprintf(s.proj, sizeof s.proj, "%s", proj);
  return s;
}

static void test_predict_by_hand(void **state) {
  (void)state;
  tp_project_gemm rows[] = {gemm_row(1, 4096, 3072, 4096, 1, 100.0),
                            gemm_row(2, 4096, 1536, 4096, 1, 60.0),
                            gemm_row(3, 4096, 4096, 4096, 1, 90.0)};
  tp_project_inputs in = hand_inputs(rows, 3);
  tp_project_shape qkv = shape_of("qkv", TP_OP_AG_LINEAR, 4096, 6144, 4096);
  tp_project_row r;
  /* TP 2: V = 4096·4096·2 / 2 = 16 MiB; collective 40 + 60/3 = 60; push of 16 MiB 20 + 30/3 =
   * 30; stock 100 + 60; dist_gemm 50 + max(50, 30) */
  tp_project_predict(&in, &qkv, 2, &r);
  assert_int_equal(r.n, 3072);
  assert_close(tp_project_volume_bytes(&qkv, 2), 16 * MIB);
  assert_close(r.coll.us, 60.0);
  assert_close(r.chunk.us, 30.0);
  assert_close(r.stock_us, 160.0);
  assert_close(r.dist_us, 100.0);
  assert_close(r.speedup, 1.6);
  assert_string_equal(r.note, "");
  /* TP 4: V = 24 MiB (collective 40 + 60·16/24 = 80), chunks of 8 MiB (20 µs), g = 15:
   * stock 60 + 80, dist_gemm 15 + 3·max(15, 20) */
  tp_project_predict(&in, &qkv, 4, &r);
  assert_int_equal(r.n, 1536);
  assert_close(r.coll.us, 80.0);
  assert_close(r.chunk.us, 20.0);
  assert_close(r.stock_us, 140.0);
  assert_close(r.dist_us, 75.0);
  /* linear_rs at TP 2: shard K 4096, V = 4096·4096·2 / 2 = 16 MiB over the reduce-scatter
   * line (44 + 96/3 = 76); dist_gemm 45 + max(45, 30) */
  tp_project_shape wo = shape_of("wo", TP_OP_LINEAR_RS, 4096, 4096, 8192);
  tp_project_predict(&in, &wo, 2, &r);
  assert_int_equal(r.k, 4096);
  assert_close(r.coll.us, 76.0);
  assert_close(r.stock_us, 166.0);
  assert_close(r.dist_us, 90.0);
  assert_close(tp_project_dist_us(2, 90.0, 60.0), 105.0); /* comm-bound: 45 + 60 */
  assert_true(isnan(tp_project_dist_us(1, 90.0, 60.0)));
  assert_close(tp_project_stock_us(90.0, 76.0), 166.0);
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
  /* the GEMM interpolated: said in the note */
  tp_project_predict(&in, &qkv, 8, &r);
  assert_true(isfinite(r.dist_us));
  assert_string_equal(r.note, "GEMM rate extrapolated beyond the measured FLOPs");
  /* a transport the probe lacks */
  in.links[TP_LINK_NCCL_ALL_GATHER].n = 0;
  tp_project_predict(&in, &qkv, 2, &r);
  assert_true(isnan(r.stock_us));
  assert_string_equal(r.note, "no link probe points of nccl_all_gather");
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

static int64_t begin(tp_store *s, const char *command) {
  tp_run_info info = {.commit = "0123456789abcdef",
                      .host = "synthetic",
                      .gpu_name = "GPU",
                      .gpu_count = 2,
                      .command = command};
  int64_t run = 0;
  if (tp_store_begin_run(s, &info, &run) != TP_OK) fail_msg("%s", tp_last_error());
  return run;
}

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

/* One ag_linear shape at TP 2 of `tokens`: its GEMM alone and measured stock, dist_gemm (auto)
 * and rows the validation must not read (the sm schedule, symm=nccl, comm_dtype fp8). */
static void put_shape(tp_store *s, int64_t run, int64_t tokens, double gemm, double stock,
                      double dist) {
  tp_config_axes a = {.kind = "gemm",
                      .model = "m",
                      .op_or_layer = "ag_linear",
                      .proj = "qkv",
                      .backend = "cublaslt",
                      .tp = 2,
                      .tokens = tokens,
                      .m = tokens,
                      .n = 3072,
                      .k = 4096,
                      .dtype = "bf16",
                      .n_weights = 1,
                      .sp = 1,
                      .pass = "fwd"};
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

typedef struct {
  fx_dir dir;
  char db[600];
} synth_db;

/* Two shapes whose predictions are worked out by hand:
 *   T = 4096: V 16 MiB, G 100, collective 60, push 30: stock 160, dist_gemm 100;
 *   T = 8192: V 32 MiB, G 200, collective 100, push 50: stock 300, dist_gemm 200.
 * Measured: stock 200 and 250 (−20 %, +20 %), dist_gemm 80 and 250 (+25 %, −20 %). */
static void make_synth(synth_db *d, int with_link) {
  assert_int_equal(fx_mkdir(&d->dir, "tp_project"), 0);
  fx_path(&d->dir, "synth.db", d->db, sizeof d->db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(d->db, 1, &s), TP_OK);
  int64_t ops = begin(s, "ops");
  put_shape(s, ops, 4096, 100.0, 200.0, 80.0);
  put_shape(s, ops, 8192, 200.0, 250.0, 250.0);
  /* a single-GPU GEMM of the first shape's whole weight: the rate --gemm-tp 1 reads */
  tp_config_axes one = {.kind = "gemm",
                        .model = "m",
                        .op_or_layer = "ag_linear",
                        .proj = "qkv",
                        .backend = "cublaslt",
                        .tp = 1,
                        .tokens = 4096,
                        .m = 4096,
                        .n = 6144,
                        .k = 4096,
                        .dtype = "bf16",
                        .n_weights = 1,
                        .sp = 1,
                        .pass = "fwd"};
  put(s, ops, &one, 150.0, TP_FUSED_NA);
  if (with_link) {
    int64_t link = begin(s, "link");
    put_link(s, link, "nccl_all_gather", AG, 2);
    put_link(s, link, "nccl_reduce_scatter", RS, 2);
    put_link(s, link, "ce_push", CE, 2);
  }
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

static void test_validation_on_synthetic_db(void **state) {
  (void)state;
  synth_db d;
  make_synth(&d, 1);
  const int tps[] = {2, 4};
  tp_project_request req = {.tps = tps, .n_tps = 2};
  tp_rc rc;
  char *text = project_to_text(d.db, &req, TP_FMT_JSON, &rc);
  assert_int_equal(rc, TP_OK);
  json_error_t jerr;
  json_t *root = json_loads(text, 0, &jerr);
  if (!root) fail_msg("not JSON: %s\n%s", jerr.text, text);
  json_t *rows = json_object_get(root, "rows");
  assert_int_equal(json_array_size(rows), 4); /* two shapes × two degrees */
  json_t *first = json_array_get(rows, 0), *m = json_object_get(first, "measured");
  assert_close(json_real_value(json_object_get(first, "stock_us")), 160.0);
  assert_close(json_real_value(json_object_get(first, "dist_us")), 100.0);
  assert_close(json_real_value(json_object_get(m, "stock_error_pct")), -20.0);
  assert_close(json_real_value(json_object_get(m, "dist_error_pct")), 25.0);
  assert_close(json_real_value(json_object_get(m, "dist_us")), 80.0); /* auto, not sm */
  assert_true(json_is_null(json_object_get(json_array_get(rows, 1), "measured"))); /* TP 4 */
  json_t *checks = json_object_get(root, "validation");
  assert_int_equal(json_array_size(checks), 1);
  json_t *c = json_array_get(checks, 0);
  assert_int_equal(json_integer_value(json_object_get(c, "tp")), 2);
  assert_int_equal(json_integer_value(json_object_get(c, "stock_shapes")), 2);
  assert_close(json_real_value(json_object_get(c, "stock_median_abs_error_pct")), 20.0);
  assert_close(json_real_value(json_object_get(c, "dist_median_abs_error_pct")), 22.5);
  json_decref(root);
  free(text);
  text = project_to_text(d.db, &req, TP_FMT_MARKDOWN, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "### Validation at TP 2: predicted against measured"));
  assert_null(strstr(text, "### Validation at TP 4"));
  assert_non_null(strstr(text, "Median |error| at TP 2: stock 20.0 % over 2 shapes, dist_gemm "
                               "22.5 % over 2 shapes."));
  free(text);
  /* --gemm-tp 1: the TP 2 shard's time from the single-GPU rate (half its FLOPs at the one
   * row's rate, held flat): 75 µs, so stock 75 + 60 */
  req.gemm_tp = 1;
  req.n_tps = 1;
  text = project_to_text(d.db, &req, TP_FMT_CSV, &rc);
  assert_int_equal(rc, TP_OK);
  assert_non_null(strstr(text, "\nm,qkv,ag_linear,4096,bf16,2,4096,3072,4096,103.079,75.000,"));
  assert_non_null(strstr(text, ",135.000,"));
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
static int table_rows_after(const char *text, const char *heading) {
  const char *at = strstr(text, heading);
  if (!at) return -1;
  const char *line = strstr(at, "\n|---");
  if (!line) return -1;
  int rows = 0;
  for (line = strchr(line + 1, '\n'); line && line[1] == '|'; line = strchr(line + 1, '\n')) rows++;
  return rows;
}

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
  assert_non_null(strstr(r.out, "Median |error| at TP 2: stock "));
  free(r.out);
  free(r.err);
  unsigned char *after = fx_read_all(db, &after_len);
  assert_int_equal(before_len, after_len); /* the command only reads */
  assert_memory_equal(before, after, before_len);
  free(before);
  free(after);
  fx_rmdir(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_exact_row),
      cmocka_unit_test(test_gemm_interpolated_by_flops),
      cmocka_unit_test(test_gemm_extrapolated_and_same_flops),
      cmocka_unit_test(test_gemm_no_rows_of_dtype),
      cmocka_unit_test(test_link_line),
      cmocka_unit_test(test_link_edges),
      cmocka_unit_test(test_predict_by_hand),
      cmocka_unit_test(test_predict_refusals),
      cmocka_unit_test(test_validation_on_synthetic_db),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_sample_db_validation_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
