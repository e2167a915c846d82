/*
 * test_compare.c — CPU tests of report/'s regression tracking: Student's t,
 * Welch's test and Benjamini–Hochberg against values computed independently
 * (mpmath, 30 digits); compare's false-positive rate and power on runs of a
 * synthetic machine with H200-like noise (fixture_db.h: per-iteration
 * jitter, a drift of up to 10 % of whole runs, one-rank host stalls):
 * identical code, a 5 % slower dist_gemm, a 10 % slower machine, 20 run
 * pairs each; failures as regressions, the latest run deciding, mixed
 * hardware refused, the filters, references as information, stock-path
 * rows, runs from before rounds; the outputs and refusals; history and
 * trends; the real H200 run against a synthesised copy of it; examples/'
 * sample database of real runs, every verdict checked against the rule;
 * on copies of it, nothing compared refused, nothing gated said, link
 * probes outside the hardware check, and hostile stored text escaped.
 *
 * The per-iteration database (runs at commits aaaa…, bbbb…, cccc…, from
 * before rounds): per configuration 30 iterations on two ranks, rank 1
 * always 1% faster, so the slowest rank is rank 0 and its times are exactly
 * what the test wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>

#include "report/tp_compare.h"
#include "report/tp_history.h"
#include "tests/cpu/fixture_db.h"
#include "tests/cpu/raw_markup.h"

#define COMMIT_A "aaaa000011112222333344445555666677778888"
#define COMMIT_B "bbbb000011112222333344445555666677778888"
#define COMMIT_C "cccc000011112222333344445555666677778888"
#define ITERS 30

enum { PAIRS = 20 };

/* The synthetic machine's run pairs (run ids), by scenario. */
typedef struct {
  int64_t base[PAIRS], head[PAIRS];
} run_pairs;

typedef struct {
  fx_dir dir;
  char db[512];        /* per-iteration runs, before rounds (build) */
  char rounds_db[512]; /* runs of the synthetic machine (build_rounds) */
  run_pairs identical, slowed, drifted;
  fx_synth_config configs[FX_SYNTH_MAX_CONFIGS];
  size_t n_configs;
} fixture;

/* ---- building the synthetic database --------------------------------------- */

static tp_config_axes axes_for(const char *proj, int64_t tokens) {
  return (tp_config_axes){.kind = "op",
                          .model = "llama3-8b",
                          .op_or_layer = "ag_linear",
                          .proj = proj,
                          .backend = "dist_gemm",
                          .schedule = "ce",
                          .tp = 2,
                          .tokens = tokens,
                          .m = tokens,
                          .n = 3072,
                          .k = 4096,
                          .n_weights = 1,
                          .dtype = "bf16",
                          .sp = 1,
                          .pass = "fwd"};
}

/* 30 iterations around `level` us: uniform jitter of +-noise (relative). */
static void put_samples(tp_store *s, int64_t run, const char *proj, double level, double noise,
                        uint64_t seed) {
  double r0[ITERS], r1[ITERS];
  uint64_t rng = seed;
  for (int i = 0; i < ITERS; i++) {
    r0[i] = level * (1.0 + noise * (2.0 * fx_uniform(&rng) - 1.0));
    r1[i] = r0[i] * 0.99;
  }
  tp_result res = {0};
  fx_result_from(r0, ITERS, &res);
  res.max_abs_err = res.rel_err = NAN;
  tp_samples sets[2] = {{.rank = 0, .count = ITERS, .time_us = r0},
                        {.rank = 1, .count = ITERS, .time_us = r1}};
  tp_config_axes a = axes_for(proj, 4096);
  tp_config_record rec = {
      .axes = &a, .status = TP_STATUS_OK, .result = &res, .samples = sets, .n_sample_sets = 2};
  if (tp_store_put_config(s, run, &rec, NULL) != TP_OK) fail_msg("%s", tp_last_error());
}

static void put_failed(tp_store *s, int64_t run, const char *proj, const char *reason) {
  tp_config_axes a = axes_for(proj, 4096);
  tp_config_record rec = {.axes = &a, .status = TP_STATUS_FAILED, .reason = reason};
  if (tp_store_put_config(s, run, &rec, NULL) != TP_OK) fail_msg("%s", tp_last_error());
}

static int64_t begin(tp_store *s, const char *commit, const char *started_at) {
  tp_run_info info = {.commit = commit,
                      .host = FX_SYNTHETIC_HOST,
                      .gpu_name = "NVIDIA H200",
                      .gpu_count = 2,
                      .cuda_version = "13.0",
                      .command_line = "synthesised by tests/cpu/test_compare.c",
                      .command = "ops",
                      .warmup_iters = 5,
                      .measure_iters = ITERS};
  int64_t run = 0;
  if (tp_store_begin_run(s, &info, &run) != TP_OK) fail_msg("%s", tp_last_error());
  char sql[160];
  snprintf(sql, sizeof sql, "UPDATE runs SET started_at = '%s' WHERE id = %lld", started_at,
           (long long)run);
  assert_int_equal(fx_exec(s, sql), 0);
  return run;
}

/*
 * Run 1 (A) and run 2 (B), per projection ("proj" stands in for a distinct
 * configuration):
 *   same        identical samples                         -> unchanged
 *   slow_quiet  B 5% slower, noise +-0.5%                 -> regressed
 *   slow_noisy  B 5% slower, noise +-25%                  -> unchanged (the medians
 *               differ by 4.7%, above the threshold, but the test sees noise)
 *   fast_quiet  B 10% faster, noise +-0.5%                -> improved
 *   tiny_shift  B 1% slower, noise +-0.1% (significant)   -> unchanged (below 3%)
 *   gone        only in A                                 -> missing
 *   born        only in B                                 -> new
 *   broke       ok in A, failed in B                      -> missing, with the reason
 *   never       failed in both                            -> not compared, with the reason
 * Run 3 (B again, later): slow_quiet back at A's level; nothing else.
 * Run 4 (C): slow_quiet 5% slower again.
 */
static void build(tp_store *s) {
  int64_t a = begin(s, COMMIT_A, "2026-11-01T10:00:00Z");
  put_samples(s, a, "same", 1000, 0.02, 11);
  put_samples(s, a, "slow_quiet", 1000, 0.005, 12);
  put_samples(s, a, "slow_noisy", 1000, 0.25, 13);
  put_samples(s, a, "fast_quiet", 1000, 0.005, 14);
  put_samples(s, a, "tiny_shift", 1000, 0.001, 15);
  put_samples(s, a, "gone", 1000, 0.01, 16);
  put_samples(s, a, "broke", 1000, 0.01, 17);
  put_failed(s, a, "never", "no multicast");
  int64_t b = begin(s, COMMIT_B, "2026-11-02T10:00:00Z");
  put_samples(s, b, "same", 1000, 0.02, 11);
  put_samples(s, b, "slow_quiet", 1050, 0.005, 22);
  put_samples(s, b, "slow_noisy", 1050, 0.25, 33); /* seed: observed medians 4.7% apart */
  put_samples(s, b, "fast_quiet", 900, 0.005, 24);
  put_samples(s, b, "tiny_shift", 1010, 0.001, 25);
  put_samples(s, b, "born", 1000, 0.01, 26);
  put_failed(s, b, "broke", "numerics: rel err 3e-1 against stock");
  put_failed(s, b, "never", "no multicast");
  int64_t b2 = begin(s, COMMIT_B, "2026-11-03T10:00:00Z");
  put_samples(s, b2, "slow_quiet", 1000, 0.005, 32);
  int64_t c = begin(s, COMMIT_C, "2026-11-04T10:00:00Z");
  put_samples(s, c, "slow_quiet", 1050, 0.005, 42);
}

/* ---- the synthetic machine's runs ---------------------------------------------- */

/* A fused dist_gemm configuration: what a delay inside the fused op slows. */
static int is_fused_dist(const fx_synth_config *c) {
  return !strcmp(c->axes.backend, "dist_gemm") && c->fused == 1;
}

static double fused_dist_slower(const fx_synth_config *c, void *ctx) {
  return is_fused_dist(c) ? *(const double *)ctx : 1.0;
}

/* Per pair: a base and a head run minutes apart, each with its own drift of
 * the whole machine (0-10 %, from the seed) unless head_drift is set. */
static int put_pairs(tp_store *s, const fixture *f, run_pairs *pairs, uint64_t seed,
                     double head_drift, double *slowdown) {
  uint64_t rng = seed;
  for (int p = 0; p < PAIRS; p++) {
    char commit[2][48], when[2][32];
    for (int side = 0; side < 2; side++) {
      snprintf(commit[side], sizeof commit[side], "%c%02d%llx", side ? 'e' : 'b', p,
               (unsigned long long)seed);
      snprintf(when[side], sizeof when[side], "2026-12-%02dT10:%02d:00Z", 1 + p % 28, side * 20);
    }
    double base_drift = 1.0 + 0.10 * fx_uniform(&rng);
    double drift = head_drift > 0 ? head_drift : 1.0 + 0.10 * fx_uniform(&rng);
    if (head_drift > 0) base_drift = 1.0;
    fx_synth_run b = {.commit = commit[0],
                      .started_at = when[0],
                      .drift = base_drift,
                      .seed = seed * 1000 + 2 * (uint64_t)p + 1};
    fx_synth_run h = {.commit = commit[1],
                      .started_at = when[1],
                      .drift = drift,
                      .seed = seed * 1000 + 2 * (uint64_t)p + 2};
    if (slowdown) {
      h.factor = fused_dist_slower;
      h.ctx = slowdown;
      h.test_knobs = "TPBENCH_TEST_DIST_DELAY_US=25 (synthetic)";
    }
    pairs->base[p] = fx_put_synth_run(s, &b, f->configs, f->n_configs);
    pairs->head[p] = fx_put_synth_run(s, &h, f->configs, f->n_configs);
    if (pairs->base[p] < 0 || pairs->head[p] < 0) return -1;
  }
  return 0;
}

static int build_rounds(fixture *f) {
  tp_store *s = NULL;
  if (tp_store_open(f->rounds_db, 1, &s) != TP_OK) return -1;
  f->n_configs = fx_synth_standard_cases(f->configs);
  double slower = 1.05;
  int rc = put_pairs(s, f, &f->identical, 11, 0, NULL);
  if (rc == 0) rc = put_pairs(s, f, &f->slowed, 12, 0, &slower);
  if (rc == 0) rc = put_pairs(s, f, &f->drifted, 13, 1.10, NULL);
  tp_store_close(s);
  return rc;
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_compare") != 0) return -1;
  fx_path(&f->dir, "compare.db", f->db, sizeof f->db);
  fx_path(&f->dir, "rounds.db", f->rounds_db, sizeof f->rounds_db);
  tp_store *s = NULL;
  if (tp_store_open(f->db, 1, &s) != TP_OK) return -1;
  build(s);
  tp_store_close(s);
  if (build_rounds(f) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* ---- the test itself ---------------------------------------------------------- */

static void assert_near(double actual, double expected, double eps) {
  if (!(fabs(actual - expected) <= eps)) fail_msg("%.17g, expected %.17g", actual, expected);
}

/* ---- the statistics --------------------------------------------------------------- */

/* Reference values from mpmath (30 digits): the regularized incomplete beta
 * function for the t distribution, findroot for its quantiles. */
static void test_student_t(void **state) {
  (void)state;
  assert_near(tp_student_t_cdf(0, 3), 0.5, 1e-15);
  assert_near(tp_student_t_cdf(1.5, 3), 0.884708067377588473859, 1e-12);
  assert_near(tp_student_t_cdf(-0.7, 2.5), 0.271702471594774027352, 1e-12);
  assert_near(tp_student_t_cdf(2.77644510519779435780, 4), 0.975, 1e-12);
  assert_near(tp_student_t_cdf(12.7062047361747046460, 1), 0.975, 1e-12);
  assert_near(tp_student_t_cdf(-12.7062047361747046460, 1), 0.025, 1e-12);
  /* Far tails stay accurate, not 0 or 1 by cancellation. */
  assert_near(2 * tp_student_t_cdf(-10, 3), 0.00212839905841415016140, 1e-15);
  assert_near(2 * tp_student_t_cdf(-40, 30) / 1.37260451944064173203e-27, 1.0, 1e-9);
  /* Many degrees of freedom: the normal. */
  assert_near(tp_student_t_cdf(1.95996398454005423552, 1e7), 0.975, 1e-6);
  assert_true(isnan(tp_student_t_cdf(1, 0)));
}

static void test_welch_by_hand(void **state) {
  (void)state;
  tp_welch w;
  /* means 2.5 and 5, variances 5/3 and 5/2. */
  double a[] = {1, 2, 3, 4}, b[] = {3, 4, 5, 6, 7};
  assert_int_equal(tp_welch_test(a, 4, b, 5, &w), TP_OK);
  assert_near(w.diff, 2.5, 1e-15);
  assert_near(w.se, 0.957427107756338109975, 1e-14);
  assert_near(w.df, 6.98076923076923076923, 1e-12);
  assert_near(w.t, 2.61116483933546757266, 1e-13);
  assert_near(w.p, 0.0349387823599639969779, 1e-12);
  assert_near(w.ci_lo, 0.234779718246473845666, 1e-9);
  assert_near(w.ci_hi, 4.76522028175352615433, 1e-9);
  /* The other way round: the same p, the difference negated. */
  assert_int_equal(tp_welch_test(b, 5, a, 4, &w), TP_OK);
  assert_near(w.diff, -2.5, 1e-15);
  assert_near(w.p, 0.0349387823599639969779, 1e-12);
}

static void test_welch_edges(void **state) {
  (void)state;
  tp_welch w;
  double same[] = {5, 5, 5}, other[] = {6, 6}, one[] = {1};
  assert_int_equal(tp_welch_test(same, 3, same, 3, &w), TP_OK);
  assert_near(w.p, 1, 0);
  assert_near(w.ci_lo, 0, 0);
  assert_int_equal(tp_welch_test(same, 3, other, 2, &w), TP_OK);
  assert_near(w.p, 0, 0); /* no spread anywhere: the difference is exact */
  assert_near(w.diff, 1, 0);
  /* One value has no variance: not a test. */
  assert_int_equal(tp_welch_test(one, 1, other, 2, &w), TP_EUSAGE);
  double with_nan[] = {1, NAN};
  assert_int_equal(tp_welch_test(with_nan, 2, other, 2, &w), TP_EUSAGE);
  double with_inf[] = {1, INFINITY};
  assert_int_equal(tp_welch_test(other, 2, with_inf, 2, &w), TP_EUSAGE);
}

/* Copies of one value on both sides, two against ten (one run pooled twice and ten times): the
 * same measurement, so no difference and p = 1. Summed as they come, ten copies of this x average
 * to its neighbour; the spread that left (1e-33) made p 0.015, and compare --threshold 0 flagged
 * identical runs. Distinct values without spread stay exact (p = 0, test_welch_edges). */
static void test_welch_copies_of_one_value(void **state) {
  (void)state;
  const double x = 0.09531017980432493; /* log 1.1 */
  double two[] = {x, x}, ten[10], sum = 0;
  for (size_t i = 0; i < 10; i++) ten[i] = x;
  for (size_t i = 0; i < 10; i++) sum += ten[i];
  assert_true(sum / 10 != x); /* the case this test is about */
  tp_welch w;
  assert_int_equal(tp_welch_test(two, 2, ten, 10, &w), TP_OK);
  assert_true(w.diff == 0);
  assert_true(w.se == 0);
  assert_true(w.p == 1);
  assert_int_equal(tp_welch_test(ten, 10, two, 2, &w), TP_OK);
  assert_true(w.diff == 0);
  assert_true(w.p == 1);
  assert_int_equal(tp_welch_test(ten, 10, ten, 7, &w), TP_OK);
  assert_true(w.p == 1);
}

static void test_benjamini_hochberg(void **state) {
  (void)state;
  double p[] = {0.01, 0.04, 0.03, 0.005}, adj[4];
  assert_int_equal(tp_bh_adjust(p, 4, adj), TP_OK);
  /* sorted 0.005, 0.01, 0.03, 0.04 -> x4/1, x4/2, x4/3, x4/4 = 0.02, 0.02, 0.04, 0.04 */
  double expected[] = {0.02, 0.04, 0.04, 0.02};
  for (int i = 0; i < 4; i++) assert_near(adj[i], expected[i], 1e-15);
  /* Step-up: a larger p can lift a smaller one's adjustment down. */
  double q[] = {0.04, 0.01}, qa[2];
  assert_int_equal(tp_bh_adjust(q, 2, qa), TP_OK);
  assert_near(qa[0], 0.04, 1e-15);
  assert_near(qa[1], 0.02, 1e-15);
  double r[] = {0.5, 0.9, 1.0}, ra[3];
  assert_int_equal(tp_bh_adjust(r, 3, ra), TP_OK);
  for (int i = 0; i < 3; i++) assert_true(ra[i] <= 1.0 && ra[i] >= r[i]);
  assert_int_equal(tp_bh_adjust(NULL, 0, NULL), TP_OK);
}

/* ---- compare ---------------------------------------------------------------------- */

static char *capture_on(const char *db, const char *base, const char *head,
                        const tp_compare_options *opt, tp_compare_format fmt,
                        tp_compare_summary *sum, tp_rc expected) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_rc rc = tp_report_compare(s, base, head, opt, fmt, mem, sum);
  fclose(mem);
  tp_store_close(s);
  if (rc != expected) fail_msg("rc %d (%s), expected %d", rc, tp_last_error(), expected);
  return text;
}

static char *capture_compare(const fixture *f, const char *base, const char *head,
                             const tp_compare_options *opt, tp_compare_format fmt,
                             tp_compare_summary *sum, tp_rc expected) {
  return capture_on(f->db, base, head, opt, fmt, sum, expected);
}

static json_t *parse(char *text) {
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) fail_msg("not JSON: %s\n%s", err.text, text);
  free(text);
  return root;
}

static json_t *compare_json(const fixture *f, const char *base, const char *head,
                            tp_compare_summary *sum) {
  return parse(capture_compare(f, base, head, NULL, TP_COMPARE_JSON, sum, TP_OK));
}

static const char *str(json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

static json_t *measure_of(json_t *row, const char *name) {
  return json_object_get(json_object_get(row, "measures"), name);
}

/* The row whose key holds every needle (";proj=qkv;", ...), or a failure. */
static json_t *row_with(json_t *rows, const char *n1, const char *n2, const char *n3) {
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    const char *key = str(row, "config_key");
    if (strstr(key, n1) && (!n2 || strstr(key, n2)) && (!n3 || strstr(key, n3))) return row;
  }
  fail_msg("no row with %s %s %s", n1, n2 ? n2 : "", n3 ? n3 : "");
  return NULL;
}

/* The verdict of the row whose key has proj=P (the per-iteration database). */
static const char *verdict_of(json_t *rows, const char *proj, json_t **row_out) {
  char needle[64];
  snprintf(needle, sizeof needle, ";proj=%s;", proj);
  json_t *row = row_with(rows, needle, NULL, NULL);
  if (row_out) *row_out = row;
  return str(row, "verdict");
}

static void spec_of(char *buf, size_t cap, int64_t run) {
  snprintf(buf, cap, "run:%lld", (long long)run);
}

static json_t *compare_runs_json(const fixture *f, int64_t base, int64_t head,
                                 const tp_compare_options *opt, tp_compare_summary *sum) {
  char b[32], h[32];
  spec_of(b, sizeof b, base);
  spec_of(h, sizeof h, head);
  return parse(capture_on(f->rounds_db, b, h, opt, TP_COMPARE_JSON, sum, TP_OK));
}

/* ---- false positives and power on the synthetic machine ------------------------------- */

/* Identical code, two runs minutes apart, each drifted 0-10 %: clean in at
 * least 19 of 20 pairs (the issue's target: at most 1 in 10 on the H200s). */
static void test_identical_runs_are_clean(void **state) {
  fixture *f = *state;
  int clean = 0, tests = 0;
  double largest = 0, smallest_p = 1;
  for (int p = 0; p < PAIRS; p++) {
    tp_compare_summary sum;
    json_t *root = compare_runs_json(f, f->identical.base[p], f->identical.head[p], NULL, &sum);
    json_t *rows = json_object_get(root, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++)
      for (int m = 0; m < 2; m++) {
        json_t *x = measure_of(json_array_get(rows, i), m ? "vs_bound" : "vs_stock");
        if (!json_is_true(json_object_get(x, "gated"))) continue;
        largest = fmax(largest, fabs(json_real_value(json_object_get(x, "change"))));
        smallest_p = fmin(smallest_p, json_real_value(json_object_get(x, "p_adjusted")));
      }
    json_decref(root);
    clean += sum.regressed == 0;
    tests = sum.tests;
    assert_int_equal(sum.failed, 0);
  }
  print_message("identical code: %d of %d pairs clean, %d gated tests each; largest ratio "
                "change %.2f%%, smallest adjusted p %.3g\n",
                clean, PAIRS, tests, 100 * largest, smallest_p);
  assert_int_equal(tests, 2 * 15); /* dist/stock and dist/bound of 15 dist_gemm rows */
  assert_true(clean >= 19);
}

/* Fused dist_gemm 5 % slower in head, nothing else: flagged in at least 19
 * of 20 pairs, and exactly the slowed configurations are named. */
static void test_slowdown_is_flagged(void **state) {
  fixture *f = *state;
  int flagged = 0, exact = 0;
  double largest_p = 0;
  for (int p = 0; p < PAIRS; p++) {
    tp_compare_summary sum;
    json_t *root = compare_runs_json(f, f->slowed.base[p], f->slowed.head[p], NULL, &sum);
    json_t *rows = json_object_get(root, "rows");
    int named = 0, wrong = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
      json_t *row = json_array_get(rows, i);
      int slowed = strstr(str(row, "config_key"), "backend=dist_gemm") &&
                   json_is_false(json_object_get(row, "stock_path"));
      int regressed = !strcmp(str(row, "verdict"), "regressed");
      named += slowed && regressed;
      wrong += regressed && !slowed;
      if (regressed) {
        json_t *m = measure_of(row, "vs_stock");
        assert_near(json_real_value(json_object_get(m, "change")), 0.05, 0.02);
        largest_p = fmax(largest_p, json_real_value(json_object_get(m, "p_adjusted")));
      }
    }
    flagged += sum.regressed > 0;
    exact += named == 14 && wrong == 0;
    json_decref(root);
  }
  print_message("5%% slower dist_gemm: flagged in %d of %d pairs, exactly the 14 slowed "
                "configurations named in %d; largest adjusted p of a flagged dist/stock %.3g\n",
                flagged, PAIRS, exact, largest_p);
  assert_true(flagged >= 19);
  assert_true(exact >= 19);
}

/* The whole machine 10 % slower in head: never flagged, because every ratio
 * cancels it (raw times are information with one run per side). */
static void test_machine_drift_is_never_flagged(void **state) {
  fixture *f = *state;
  for (int p = 0; p < PAIRS; p++) {
    tp_compare_summary sum;
    json_t *root = compare_runs_json(f, f->drifted.base[p], f->drifted.head[p], NULL, &sum);
    assert_int_equal(sum.regressed, 0);
    assert_int_equal(sum.improved, 0);
    /* The raw time did move ~10 %, shown as information. */
    json_t *row =
        row_with(json_object_get(root, "rows"), "kind=gemm;", "model=llama3-8b;", ";proj=w13;");
    assert_string_equal(str(row, "verdict"), "information");
    assert_near(json_real_value(json_object_get(measure_of(row, "time"), "change")), 0.10, 0.03);
    assert_false(json_is_true(json_object_get(measure_of(row, "time"), "gated")));
    json_decref(root);
  }
}

/* The slowed pair in markdown: each slowed configuration named in the
 * regressed table with its measure, change, interval and adjusted p. */
static void test_markdown_names_regressions(void **state) {
  fixture *f = *state;
  char b[32], h[32];
  spec_of(b, sizeof b, f->slowed.base[0]);
  spec_of(h, sizeof h, f->slowed.head[0]);
  tp_compare_summary sum;
  char *md = capture_on(f->rounds_db, b, h, NULL, TP_COMPARE_MD, &sum, TP_OK);
  assert_non_null(strstr(md, "**Regression**: 14 regressed (0 failed in head)"));
  assert_non_null(strstr(md, "Welch's t test on the log ratios"));
  assert_non_null(strstr(md, "Benjamini–Hochberg over the 30 gated tests"));
  assert_non_null(strstr(md, "| configuration | measure | base | head | change | 95% interval | "
                             "adjusted p | samples |"));
  assert_non_null(strstr(md, "| llama3-70b ag_linear w13 T=8192 bf16 fwd tp=2 dist_gemm ce | "
                             "dist/stock |"));
  assert_non_null(strstr(md, "| llama3-8b ffn T=8192 bf16 fwd+bwd tp=2 dist_gemm auto | "
                             "dist/bound |"));
  assert_non_null(strstr(md, "| +5."));
  assert_non_null(strstr(md, " … +"));
  assert_non_null(strstr(md, "| 3 / 3 |"));
  assert_non_null(strstr(md, "ran with test knobs on (TPBENCH_TEST_DIST_DELAY_US=25 (synthetic))"));
  assert_non_null(strstr(md, "(3 rounds)"));
  /* the stock-path row: gated, labelled, not slowed */
  assert_non_null(strstr(md, "dist_gemm auto (stock path) |"));
  assert_true(strstr(md, "### Regressed") < strstr(md, "<details><summary>Unchanged"));
  assert_non_null(strstr(md, "<details><summary>Information only (not gated) (24)</summary>"));
  free(md);

  char *csv = capture_on(f->rounds_db, b, h, NULL, TP_COMPARE_CSV, &sum, TP_OK);
  assert_memory_equal(csv,
                      "verdict,config_key,label,role,stock_path,base_config_id,"
                      "head_config_id,vs_stock_base,vs_stock_head,vs_stock_change_pct,",
                      112);
  int lines = 0;
  for (const char *p = csv; (p = strstr(p, "\r\n")); p += 2) lines++;
  assert_int_equal(lines, 1 + (int)f->n_configs);
  assert_non_null(strstr(csv, "\r\nregressed,kind=op;"));
  free(csv);
}

/* Stock-path rows are gated like the others and say so. */
static void test_stock_path_rows(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  json_t *root = compare_runs_json(f, f->slowed.base[1], f->slowed.head[1], NULL, &sum);
  json_t *row = row_with(json_object_get(root, "rows"), "schedule=auto;", ";proj=qkv;", NULL);
  assert_true(json_is_true(json_object_get(row, "stock_path")));
  assert_true(json_is_true(json_object_get(measure_of(row, "vs_stock"), "gated")));
  assert_true(json_is_real(json_object_get(measure_of(row, "vs_stock"), "p_adjusted")));
  assert_string_equal(str(row, "verdict"), "unchanged"); /* the knob slows fused ops only */
  assert_non_null(strstr(str(row, "note"), "stock path"));
  /* stock over stock: the ratio sits near 1 */
  assert_near(json_real_value(json_object_get(measure_of(row, "vs_stock"), "head")), 1.0, 0.03);
  json_decref(root);
}

/* ---- failures, several runs, hardware ----------------------------------------------------- */

/* A fresh database with a base and a head run of the synthetic machine
 * (identical code); ids in *base and *head. */
static void two_runs(const fixture *f, const char *name, char *db, size_t cap, int64_t *base,
                     int64_t *head) {
  fx_path(&f->dir, name, db, cap);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  fx_synth_run b = {.commit = "1111aaaa", .started_at = "2026-12-02T10:00:00Z", .seed = 501};
  fx_synth_run h = {.commit = "2222bbbb", .started_at = "2026-12-02T11:00:00Z", .seed = 502};
  *base = fx_put_synth_run(s, &b, f->configs, f->n_configs);
  *head = fx_put_synth_run(s, &h, f->configs, f->n_configs);
  assert_true(*base > 0 && *head > 0);
  tp_store_close(s);
}

static void exec_on(const char *db, const char *sql) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  if (fx_exec(s, sql) != 0) fail_msg("%s: %s", sql, sqlite3_errmsg(tp_store_db(s)));
  tp_store_close(s);
}

static void test_failure_in_head_regresses(void **state) {
  fixture *f = *state;
  char db[600], sql[512];
  int64_t base = 0, head = 0;
  two_runs(f, "failures.db", db, sizeof db, &base, &head);
  /* head: one dist_gemm times out, one fails its numerics (status still
   * ok), one's evidence fails, a GEMM alone runs out of memory, one is
   * rejected. */
  snprintf(sql, sizeof sql,
           "UPDATE configs SET status = 'timeout', reason = 'window timed out after 60 s' WHERE "
           "run_id = %lld AND config_key LIKE 'kind=op;model=llama3-8b;layer=ag_linear;proj=w13;"
           "backend=dist_gemm;schedule=ce;%%'",
           (long long)head);
  exec_on(db, sql);
  snprintf(sql, sizeof sql,
           "UPDATE results SET numerics = 'failed', numerics_reason = 'y: 12 elements NaN' WHERE "
           "config_id = (SELECT id FROM configs WHERE run_id = %lld AND config_key LIKE "
           "'kind=op;model=llama3-70b;layer=linear_rs;proj=w2;backend=dist_gemm;schedule=sm;%%')",
           (long long)head);
  exec_on(db, sql);
  snprintf(sql, sizeof sql,
           "INSERT INTO traces (config_id, traced_iters, evidence_ok, evidence, evidence_message) "
           "SELECT id, 5, 0, 'failed', 'ce: NCCL kernel inside a fused op' FROM configs WHERE "
           "run_id = %lld AND config_key LIKE 'kind=layer;model=llama3-70b;%%backend=dist_gemm;%%'",
           (long long)head);
  exec_on(db, sql);
  snprintf(sql, sizeof sql,
           "UPDATE configs SET status = 'oom', reason = 'out of memory' WHERE run_id = %lld AND "
           "config_key LIKE 'kind=gemm;model=llama3-70b;layer=ffn;%%'",
           (long long)head);
  exec_on(db, sql);
  snprintf(sql, sizeof sql,
           "UPDATE configs SET status = 'rejected', reason = 'sm: needs 16 blocks' WHERE run_id = "
           "%lld AND config_key LIKE 'kind=op;model=llama3-8b;layer=ag_linear;proj=qkv;"
           "backend=dist_gemm;schedule=sm;%%'",
           (long long)head);
  exec_on(db, sql);

  tp_compare_summary sum;
  char b[32], h[32];
  spec_of(b, sizeof b, base);
  spec_of(h, sizeof h, head);
  json_t *root = parse(capture_on(db, b, h, NULL, TP_COMPARE_JSON, &sum, TP_OK));
  json_t *rows = json_object_get(root, "rows");
  json_t *row = row_with(rows, "model=llama3-8b;", ";proj=w13;", "schedule=ce;");
  assert_string_equal(str(row, "verdict"), "regressed");
  assert_true(json_is_true(json_object_get(row, "failed_in_head")));
  assert_non_null(strstr(str(row, "note"), "timeout: window timed out after 60 s"));
  row = row_with(rows, "model=llama3-70b;", ";proj=w2;", "schedule=sm;");
  assert_string_equal(str(row, "verdict"), "regressed");
  assert_non_null(strstr(str(row, "note"), "numerics failed: y: 12 elements NaN"));
  row = row_with(rows, "kind=layer;model=llama3-70b;", "backend=dist_gemm;", NULL);
  assert_string_equal(str(row, "verdict"), "regressed");
  assert_non_null(strstr(str(row, "note"), "schedule evidence failed"));
  /* A reference that stops running is a regression too (its dist rows lose
   * their bound). */
  row = row_with(rows, "kind=gemm;model=llama3-70b;layer=ffn;", NULL, NULL);
  assert_string_equal(str(row, "verdict"), "regressed");
  row = row_with(rows, "model=llama3-8b;", ";proj=qkv;", "schedule=sm;");
  assert_string_equal(str(row, "verdict"), "missing");
  assert_non_null(strstr(str(row, "note"), "rejected: sm: needs 16 blocks"));
  assert_int_equal(sum.failed, 4);
  assert_int_equal(sum.regressed, 4);
  assert_int_equal(sum.missing, 1);
  /* failures come first */
  assert_true(json_is_true(json_object_get(json_array_get(rows, 0), "failed_in_head")));
  json_decref(root);

  char *md = capture_on(db, b, h, NULL, TP_COMPARE_MD, &sum, TP_OK);
  assert_non_null(strstr(md, "**Regression**: 4 regressed (4 failed in head)"));
  assert_non_null(strstr(md, " — ok in base, in head timeout: window timed out after 60 s | "
                             "status | ok | failed |"));
  free(md);
  /* Failed or rejected on both sides is no change, and not "unchanged" either: not compared,
   * by why head did not run it. */
  free(capture_on(db, h, h, NULL, TP_COMPARE_JSON, &sum, TP_OK));
  assert_int_equal(sum.regressed, 0);
  assert_int_equal(sum.not_compared, 5);
  assert_int_equal(sum.not_compared_rejected, 1);
  assert_int_equal(sum.not_compared_failed, 4);
  tp_compare_summary ok_only;
  free(capture_on(db, b, b, NULL, TP_COMPARE_JSON, &ok_only, TP_OK));
  assert_int_equal(sum.unchanged + sum.information + 5, ok_only.unchanged + ok_only.information);
  md = capture_on(db, h, h, NULL, TP_COMPARE_MD, &sum, TP_OK);
  assert_non_null(strstr(md, "; not compared (ran on neither side): rejected 1, failed 4.\n"));
  free(md);
}

/* A side with several runs: the latest run of each configuration decides
 * its status; an earlier ok never hides a later failure. */
static void test_latest_run_decides(void **state) {
  fixture *f = *state;
  char db[600], sql[512];
  int64_t base = 0, head = 0;
  two_runs(f, "latest.db", db, sizeof db, &base, &head);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  /* the head commit again, later: this time one configuration fails */
  fx_synth_run again = {.commit = "2222bbbb", .started_at = "2026-12-02T12:00:00Z", .seed = 503};
  int64_t later = fx_put_synth_run(s, &again, f->configs, f->n_configs);
  assert_true(later > 0);
  tp_store_close(s);
  snprintf(sql, sizeof sql,
           "UPDATE configs SET status = 'failed', reason = 'numerics: dx rel err 3e-1' WHERE "
           "run_id = %lld AND config_key LIKE 'kind=op;model=llama3-8b;layer=linear_rs;proj=w2;"
           "backend=dist_gemm;schedule=ce;%%'",
           (long long)later);
  exec_on(db, sql);
  tp_compare_summary sum;
  json_t *root = parse(capture_on(db, "1111", "2222", NULL, TP_COMPARE_JSON, &sum, TP_OK));
  json_t *row =
      row_with(json_object_get(root, "rows"), "model=llama3-8b;", ";proj=w2;", "schedule=ce;");
  assert_string_equal(str(row, "verdict"), "regressed");
  assert_non_null(strstr(str(row, "note"), "dx rel err"));
  assert_int_equal(sum.regressed, 1);
  /* Both head runs describe the side; rounds of both are samples. */
  json_t *runs = json_object_get(json_object_get(root, "head"), "runs");
  assert_int_equal(json_array_size(runs), 2);
  row = row_with(json_object_get(root, "rows"), "model=llama3-8b;", ";proj=w2;", "schedule=sm;");
  assert_int_equal(json_integer_value(json_object_get(measure_of(row, "vs_stock"), "n_head")), 6);
  assert_int_equal(json_integer_value(json_object_get(measure_of(row, "vs_stock"), "n_base")), 3);
  json_decref(root);

  /* The reverse order: failed first, ok later: the later ok decides. */
  snprintf(sql, sizeof sql, "UPDATE runs SET started_at = '2026-12-02T10:30:00Z' WHERE id = %lld",
           (long long)later);
  exec_on(db, sql);
  free(capture_on(db, "1111", "2222", NULL, TP_COMPARE_JSON, &sum, TP_OK));
  assert_int_equal(sum.regressed, 0);
  /* Runs named one by one, comma-separated, are a side too. */
  char h[64];
  snprintf(h, sizeof h, "run:%lld,run:%lld", (long long)head, (long long)later);
  free(capture_on(db, "1111", h, NULL, TP_COMPARE_JSON, &sum, TP_OK));
  assert_int_equal(sum.regressed, 0);
  snprintf(h, sizeof h, "run:%lld", (long long)later);
  free(capture_on(db, "1111", h, NULL, TP_COMPARE_JSON, &sum, TP_OK));
  assert_int_equal(sum.regressed, 1);
}

/* A side's runs pooled from a tree with uncommitted changes are said, whichever of its runs it
 * was: the head commit ran twice, the earlier run dirty; the later (clean) one describes the
 * side, and its samples and the dirty run's are pooled alike. */
static void test_dirty_run_of_a_side_is_said(void **state) {
  fixture *f = *state;
  char db[600], sql[256];
  int64_t base = 0, head = 0;
  two_runs(f, "dirty.db", db, sizeof db, &base, &head);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  fx_synth_run again = {.commit = "2222bbbb", .started_at = "2026-12-02T12:00:00Z", .seed = 504};
  assert_true(fx_put_synth_run(s, &again, f->configs, f->n_configs) > 0);
  tp_store_close(s);
  snprintf(sql, sizeof sql, "UPDATE runs SET dirty = 1 WHERE id = %lld", (long long)head);
  exec_on(db, sql);
  tp_compare_summary sum;
  char *md = capture_on(db, "1111", "2222", NULL, TP_COMPARE_MD, &sum, TP_OK);
  if (!strstr(md, "> **Note**: a side was built from a tree with uncommitted changes"))
    fail_msg("no dirty-tree note:\n%s", md);
  assert_non_null(strstr(md, " (3 rounds, dirty tree),")); /* which run, in the head's list */
  free(md);
  char *xml = capture_on(db, "1111", "2222", NULL, TP_COMPARE_JUNIT, &sum, TP_OK);
  if (!strstr(xml, "<property name=\"head.dirty\" value=\"true\"/>"))
    fail_msg("head.dirty is not true:\n%.2000s", xml);
  assert_non_null(strstr(xml, "<property name=\"base.dirty\" value=\"false\"/>"));
  free(xml);
}

/* Different GPU model, count or driver: refused unless allowed. */
static void test_mixed_hardware_refused(void **state) {
  fixture *f = *state;
  char db[600];
  fx_path(&f->dir, "hardware.db", db, sizeof db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  fx_synth_run h200 = {.commit = "3333", .seed = 601};
  fx_synth_run h100 = {.commit = "4444", .gpu_name = "NVIDIA H100 80GB HBM3", .seed = 602};
  fx_synth_run four = {.commit = "5555", .gpu_count = 4, .seed = 603};
  fx_synth_run driver = {.commit = "6666", .driver = "570.86.15", .seed = 604};
  assert_true(fx_put_synth_run(s, &h200, f->configs, f->n_configs) > 0);
  assert_true(fx_put_synth_run(s, &h100, f->configs, f->n_configs) > 0);
  assert_true(fx_put_synth_run(s, &four, f->configs, f->n_configs) > 0);
  assert_true(fx_put_synth_run(s, &driver, f->configs, f->n_configs) > 0);
  tp_store_close(s);
  tp_compare_summary sum;
  const char *others[] = {"4444", "5555", "6666"};
  for (int i = 0; i < 3; i++) {
    free(capture_on(db, "3333", others[i], NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
    assert_non_null(strstr(tp_last_error(), "different hardware"));
    assert_non_null(strstr(tp_last_error(), "--allow-mixed-hardware"));
  }
  assert_non_null(strstr(tp_last_error(), "driver 570.86.15"));
  /* within one side too */
  free(capture_on(db, "3333", "4444,3333", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  tp_compare_options allow = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                              .alpha = TP_COMPARE_DEFAULT_ALPHA,
                              .allow_mixed_hardware = 1};
  char *md = capture_on(db, "3333", "4444", &allow, TP_COMPARE_MD, &sum, TP_OK);
  assert_non_null(strstr(md, "**Warning**: the runs ran on different GPUs or drivers"));
  free(md);
}

/* ---- filters and references -------------------------------------------------------------- */

static void test_filters(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  tp_compare_options opt = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                            .alpha = TP_COMPARE_DEFAULT_ALPHA};
  const struct {
    tp_compare_filter filter;
    int rows, tests;
  } cases[] = {
      {{.model = "llama3-70b"}, 19, 14},
      {{.layer = "ffn"}, 8, 4},
      {{.pass = "fwd+bwd"}, 8, 4},
      {{.backend = "dist_gemm"}, 15, 30}, /* ratios still find their references */
      {{.kind = "gemm"}, 8, 0},           /* references: information */
      {{.model = "llama3-8b", .layer = "linear_rs", .backend = "dist_gemm"}, 2, 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    opt.filter = cases[i].filter;
    json_t *root = compare_runs_json(f, f->slowed.base[2], f->slowed.head[2], &opt, &sum);
    json_t *rows = json_object_get(root, "rows");
    if ((int)json_array_size(rows) != cases[i].rows || sum.tests != cases[i].tests)
      fail_msg("filter %zu: %zu rows, %d tests; expected %d, %d", i, json_array_size(rows),
               sum.tests, cases[i].rows, cases[i].tests);
    const tp_compare_filter *fl = &cases[i].filter;
    for (size_t r = 0; r < json_array_size(rows); r++) {
      const char *key = str(json_array_get(rows, r), "config_key");
      char needle[64];
      if (fl->model) snprintf(needle, sizeof needle, ";model=%s;", fl->model);
      else if (fl->kind) snprintf(needle, sizeof needle, "kind=%s;", fl->kind);
      else continue;
      assert_non_null(strstr(key, needle));
    }
    json_decref(root);
  }
  /* A filter that matches nothing compares nothing: refused, not a pass. */
  opt.filter = (tp_compare_filter){.dtype = "fp32"};
  char b[32], h[32];
  spec_of(b, sizeof b, f->slowed.base[2]);
  spec_of(h, sizeof h, f->slowed.head[2]);
  free(capture_on(f->rounds_db, b, h, &opt, TP_COMPARE_JSON, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "nothing compared: the filters match no configuration"));
}

static double stock_slower(const fx_synth_config *c, void *ctx) {
  return !strcmp(c->axes.backend, "stock") ? *(const double *)ctx : 1.0;
}

/* References are information; --gate-references gates their times, which
 * needs two runs a side (between-run variance), and a stock row's
 * stock/bound round by round, which one run a side has. */
static void test_references_gate_only_when_asked(void **state) {
  fixture *f = *state;
  char db[600];
  fx_path(&f->dir, "references.db", db, sizeof db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  /* the stock configurations 10 % slower at head; three runs a side, each
   * drifted by up to +-2 % */
  static const double slower = 1.10;
  uint64_t rng = 77;
  for (int side = 0; side < 2; side++)
    for (int r = 0; r < 3; r++) {
      char when[32];
      snprintf(when, sizeof when, "2026-12-03T%02d:00:00Z", 10 + side * 3 + r);
      fx_synth_run run = {.commit = side ? "8888" : "7777",
                          .started_at = when,
                          .drift = 1.0 + 0.02 * fx_signed(&rng),
                          .seed = 700 + (uint64_t)(side * 3 + r)};
      if (side) {
        run.factor = stock_slower;
        run.ctx = (void *)&slower;
      }
      assert_true(fx_put_synth_run(s, &run, f->configs, f->n_configs) > 0);
    }
  tp_store_close(s);
  tp_compare_summary sum;
  tp_compare_options opt = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                            .alpha = TP_COMPARE_DEFAULT_ALPHA};
  json_t *root = parse(capture_on(db, "7777", "8888", &opt, TP_COMPARE_JSON, &sum, TP_OK));
  json_t *rows = json_object_get(root, "rows");
  /* three runs a side: the stock time is tested, but only information */
  json_t *row = row_with(rows, "kind=op;model=llama3-8b;", ";proj=qkv;", "backend=stock;");
  assert_string_equal(str(row, "verdict"), "information");
  assert_true(json_is_true(json_object_get(measure_of(row, "time"), "tested")));
  assert_false(json_is_true(json_object_get(measure_of(row, "time"), "gated")));
  assert_near(json_real_value(json_object_get(measure_of(row, "time"), "change")), 0.10, 0.02);
  /* dist_gemm against a slower stock: dist/stock fell, nothing regressed */
  row = row_with(rows, "model=llama3-8b;", ";proj=w13;", "schedule=ce;");
  assert_string_equal(str(row, "verdict"), "improved");
  assert_string_equal(str(measure_of(row, "vs_stock"), "verdict"), "improved");
  assert_string_equal(str(measure_of(row, "vs_bound"), "verdict"), "unchanged");
  assert_true(json_is_true(json_object_get(measure_of(row, "time"), "gated")));
  assert_int_equal(json_integer_value(json_object_get(measure_of(row, "time"), "n_base")), 3);
  assert_int_equal(json_integer_value(json_object_get(measure_of(row, "vs_stock"), "n_base")), 9);
  assert_int_equal(sum.regressed, 0);
  assert_int_equal(sum.tests, 3 * 15); /* two ratios and the time of 15 dist_gemm rows */
  json_decref(root);

  /* gated references: the slower stock rows regressed on their time and on stock/bound */
  opt.gate_references = 1;
  root = parse(capture_on(db, "7777", "8888", &opt, TP_COMPARE_JSON, &sum, TP_OK));
  row = row_with(json_object_get(root, "rows"), "kind=op;model=llama3-8b;", ";proj=qkv;",
                 "backend=stock;");
  assert_string_equal(str(row, "verdict"), "regressed");
  assert_string_equal(str(measure_of(row, "time"), "verdict"), "regressed");
  assert_string_equal(str(measure_of(row, "vs_bound"), "verdict"), "regressed");
  assert_false(json_is_true(json_object_get(measure_of(row, "vs_stock"), "tested")));
  assert_int_equal(sum.tests, 3 * 15 + 24 + 8); /* and the 8 stock rows' stock/bound */
  assert_int_equal(sum.regressed, 8);           /* the stock op and layer rows, nothing else */
  json_decref(root);

  /* one run a side: no time is tested, but stock/bound is, round by round */
  root = parse(capture_on(db, "run:1", "run:4", &opt, TP_COMPARE_JSON, &sum, TP_OK));
  row = row_with(json_object_get(root, "rows"), "kind=op;model=llama3-8b;", ";proj=qkv;",
                 "backend=stock;");
  assert_string_equal(str(row, "verdict"), "regressed");
  assert_false(json_is_true(json_object_get(measure_of(row, "time"), "tested")));
  row = row_with(json_object_get(root, "rows"), "kind=gemm;model=llama3-8b;", ";proj=qkv;",
                 "backend=cublaslt;");
  assert_string_equal(str(row, "verdict"), "information");
  assert_int_equal(sum.tests, 30 + 8);
  assert_int_equal(sum.regressed, 8);
  json_decref(root);
}

/* What one GPU can gate: at TP 1 nothing fuses and no collective is timed, so a run holds
 * stock and the GEMM alone. With --gate-references, stock over its bound (the GEMM alone
 * there) is gated round by round: identical code with the machine drifted compares clean,
 * stock 10 % slower (TPBENCH_TEST_DIST_DELAY_US's TP 1 slowdown) regresses; without the flag
 * nothing is gated, and the verdict says how to gate. */
static void test_tp1_gates_stock_over_its_gemm(void **state) {
  fixture *f = *state;
  char db[600];
  fx_path(&f->dir, "tp1.db", db, sizeof db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  fx_synth_config tp1[8];
  static const char *const projs[] = {"qkv", "w2"};
  size_t n = 0;
  for (int p = 0; p < 2; p++) {
    const char *layer = p ? "linear_rs" : "ag_linear";
    fx_synth_axes(&tp1[n], "op", "llama3-8b", layer, projs[p], "stock", NULL, "fwd");
    tp1[n].axes.tp = 1;
    tp1[n].level_us = 300.0 * (p + 1) + 8.0; /* the GEMM and a one-rank copy */
    tp1[n++].fused = -1;
    fx_synth_axes(&tp1[n], "gemm", "llama3-8b", layer, projs[p], "cublaslt", NULL, "fwd");
    tp1[n].axes.tp = 1;
    tp1[n].level_us = 300.0 * (p + 1);
    tp1[n++].fused = -1;
  }
  static const double slower = 1.10;
  fx_synth_run a = {.commit = "aaaa0001",
                    .started_at = "2026-12-04T10:00:00Z",
                    .gpu_count = 1,
                    .rounds = 5,
                    .seed = 901};
  fx_synth_run b = {.commit = "aaaa0001",
                    .started_at = "2026-12-04T10:05:00Z",
                    .gpu_count = 1,
                    .rounds = 5,
                    .drift = 1.04,
                    .seed = 902};
  fx_synth_run c = {.commit = "aaaa0001",
                    .started_at = "2026-12-04T10:10:00Z",
                    .gpu_count = 1,
                    .rounds = 5,
                    .seed = 903,
                    .test_knobs = "TPBENCH_TEST_DIST_DELAY_US=60",
                    .factor = stock_slower,
                    .ctx = (void *)&slower};
  assert_true(fx_put_synth_run(s, &a, tp1, n) == 1);
  assert_true(fx_put_synth_run(s, &b, tp1, n) == 2);
  assert_true(fx_put_synth_run(s, &c, tp1, n) == 3);
  tp_store_close(s);
  tp_compare_summary sum;
  tp_compare_options opt = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                            .alpha = TP_COMPARE_DEFAULT_ALPHA};
  char *md = capture_on(db, "run:1", "run:3", &opt, TP_COMPARE_MD, &sum, TP_OK);
  assert_int_equal(sum.tests, 0);
  assert_non_null(strstr(md, "--gate-references gates stock over its bound"));
  free(md);
  opt.gate_references = 1;
  free(capture_on(db, "run:1", "run:2", &opt, TP_COMPARE_MD, &sum, TP_OK));
  assert_int_equal(sum.tests, 2);
  assert_int_equal(sum.regressed, 0);
  assert_int_equal(sum.improved, 0);
  md = capture_on(db, "run:1", "run:3", &opt, TP_COMPARE_MD, &sum, TP_OK);
  assert_int_equal(sum.regressed, 2);
  assert_non_null(strstr(md, "| stock/bound |"));
  free(md);
}

/* ---- the faster stock: plain or on NCCL symmetric windows ----------------------------- */

/* One case with stock and the collective alone in both variants, at the
 * levels given (us): plain stock, window stock, dist_gemm, GEMM, comm,
 * comm on windows. */
static size_t window_case(fx_synth_config *c, double stock, double stock_window, double dist,
                          double gemm, double comm, double comm_window) {
  fx_synth_axes(&c[0], "op", "llama3-8b", "ag_linear", "qkv", "stock", NULL, "fwd");
  fx_synth_axes(&c[1], "op", "llama3-8b", "ag_linear", "qkv", "stock", "nccl-window", "fwd");
  fx_synth_axes(&c[2], "op", "llama3-8b", "ag_linear", "qkv", "dist_gemm", "ce", "fwd");
  fx_synth_axes(&c[3], "gemm", "llama3-8b", "ag_linear", "qkv", "cublaslt", NULL, "fwd");
  fx_synth_axes(&c[4], "comm", "llama3-8b", "ag_linear", "qkv", "nccl", NULL, "fwd");
  fx_synth_axes(&c[5], "comm", "llama3-8b", "ag_linear", "qkv", "nccl", "nccl-window", "fwd");
  const double levels[6] = {stock, stock_window, dist, gemm, comm, comm_window};
  for (int i = 0; i < 6; i++) {
    c[i].level_us = levels[i];
    c[i].fused = i == 2 ? 1 : -1;
  }
  return 6;
}

/* A base run of the case c and a head run of head (the same case at other
 * levels), compared: the dist_gemm row's JSON (root in *root_out). */
static json_t *window_compare(const fixture *f, const char *name, const fx_synth_config *c,
                              const fx_synth_config *head, size_t n, json_t **root_out) {
  char db[600];
  fx_path(&f->dir, name, db, sizeof db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  fx_synth_run b = {.commit = "5555", .started_at = "2026-12-04T10:00:00Z", .seed = 901};
  fx_synth_run h = {.commit = "6666", .started_at = "2026-12-04T10:20:00Z", .seed = 902};
  assert_true(fx_put_synth_run(s, &b, c, n) > 0);
  assert_true(fx_put_synth_run(s, &h, head, n) > 0);
  tp_store_close(s);
  tp_compare_summary sum;
  tp_compare_options opt = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                            .alpha = TP_COMPARE_DEFAULT_ALPHA};
  json_t *root = parse(capture_on(db, "5555", "6666", &opt, TP_COMPARE_JSON, &sum, TP_OK));
  *root_out = root;
  return row_with(json_object_get(root, "rows"), "backend=dist_gemm;", ";proj=qkv;", NULL);
}

/* dist/stock divides by the faster stock and dist/bound takes the faster
 * collective alone, as the throughput table does: plain stock and plain
 * collective 25-30 % slower at head, the window variants (faster in both
 * runs) unchanged, leave dist_gemm's ratios unchanged; a window variant that
 * becomes the faster at head moves dist/stock, and the row says why. */
static void test_faster_stock_is_the_reference(void **state) {
  fixture *f = *state;
  fx_synth_config c[6], h[6];
  size_t n = window_case(c, 1000, 900, 800, 600, 700, 500);
  /* plain stock 25 % slower at head, plain collective 30 % slower: no change to either ratio */
  memcpy(h, c, sizeof h);
  h[0].level_us *= 1.25;
  h[4].level_us *= 1.30;
  json_t *root = NULL;
  json_t *row = window_compare(f, "window-a.db", c, h, n, &root);
  json_t *vs_stock = measure_of(row, "vs_stock"), *vs_bound = measure_of(row, "vs_bound");
  assert_string_equal(str(vs_stock, "verdict"), "unchanged"); /* plain: "improved", -20 % */
  assert_near(json_real_value(json_object_get(vs_stock, "change")), 0.0, 0.02);
  assert_string_equal(str(vs_bound, "verdict"), "unchanged"); /* plain: improved, -14 % */
  assert_near(json_real_value(json_object_get(vs_bound, "change")), 0.0, 0.02);
  assert_null(strstr(str(row, "note") ? str(row, "note") : "", "faster stock"));
  json_decref(root);
  /* window stock slower than plain in base (1100 against 1000), 20 % faster at head (880):
   * head's faster stock is the window variant, and dist/stock rises 1000 / 880 - 1 */
  n = window_case(c, 1000, 1100, 800, 600, 500, 700);
  memcpy(h, c, sizeof h);
  h[1].level_us *= 0.8;
  row = window_compare(f, "window-b.db", c, h, n, &root);
  vs_stock = measure_of(row, "vs_stock");
  assert_string_equal(str(vs_stock, "verdict"), "regressed"); /* plain: unchanged */
  assert_near(json_real_value(json_object_get(vs_stock, "change")), 1000.0 / 880.0 - 1.0, 0.03);
  assert_non_null(strstr(str(row, "note"), "faster stock: plain in base, nccl-window in head"));
  json_decref(root);
}

/* ---- runs from before rounds ----------------------------------------------------------- */

/* The per-iteration database: no rounds, no stock references. Each run is
 * one sample, so nothing can be tested between single runs; failures still
 * count. */
static void test_runs_before_rounds(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  json_t *root = compare_json(f, "run:1", "run:2", &sum);
  json_t *rows = json_object_get(root, "rows");
  json_t *row = NULL;
  assert_string_equal(verdict_of(rows, "slow_quiet", &row), "information");
  assert_near(json_real_value(json_object_get(measure_of(row, "time"), "change")), 0.05, 0.01);
  assert_non_null(strstr(str(row, "note"), "no ratio"));
  assert_string_equal(verdict_of(rows, "gone", NULL), "missing");
  assert_string_equal(verdict_of(rows, "born", NULL), "new");
  assert_string_equal(verdict_of(rows, "broke", &row), "regressed");
  assert_non_null(strstr(str(row, "note"), "numerics: rel err 3e-1"));
  /* failed on both sides: not compared, counted apart (it was counted unchanged) */
  assert_string_equal(verdict_of(rows, "never", &row), "not_compared");
  assert_non_null(strstr(str(row, "note"), "no multicast"));
  assert_int_equal(sum.not_compared, 1);
  assert_int_equal(sum.not_compared_rejected, 0);
  assert_int_equal(sum.not_compared_failed, 1);
  assert_int_equal(sum.unchanged, 0);
  assert_int_equal(sum.regressed, 1);
  assert_int_equal(sum.failed, 1);
  assert_int_equal(sum.tests, 0);
  json_t *runs = json_object_get(json_object_get(root, "base"), "runs");
  assert_true(json_is_null(json_object_get(json_array_get(runs, 0), "rounds")));
  json_decref(root);
  char *md = capture_compare(f, "run:1", "run:2", NULL, TP_COMPARE_MD, &sum, TP_OK);
  assert_non_null(strstr(md, "run 1 (before rounds: one sample)"));
  assert_non_null(strstr(md, "; not compared (ran on neither side): rejected 0, failed 1.\n"));
  assert_non_null(strstr(md, "<summary>Not compared (ran on neither side) (1)</summary>"));
  free(md);
  /* Commit B has two runs; only slow_quiet ran in both: its time is tested
   * against... one run of A: still not. */
  root = compare_json(f, "aaaa", "bbbb", &sum);
  assert_string_equal(verdict_of(json_object_get(root, "rows"), "slow_quiet", &row), "information");
  assert_int_equal(json_integer_value(json_object_get(measure_of(row, "time"), "n_head")), 2);
  assert_false(json_is_true(json_object_get(measure_of(row, "time"), "tested")));
  json_decref(root);
}

static void test_bad_sides_and_options(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  free(capture_compare(f, "dddd", "run:1", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "no run of a commit starting with 'dddd'"));
  free(capture_compare(f, "run:1", "run:99", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  free(capture_compare(f, "run:x", "run:1", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  free(capture_compare(f, "run:0", "run:1", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  free(capture_compare(f, "", "run:1", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  free(capture_compare(f, "run:1,", "run:1", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  free(capture_compare(f, "run:1,dddd", "run:1", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  tp_compare_options bad = {.threshold = 1.5, .alpha = 0.05};
  free(capture_compare(f, "run:1", "run:2", &bad, TP_COMPARE_MD, &sum, TP_EUSAGE));
  bad = (tp_compare_options){.threshold = 0.02, .alpha = 0};
  free(capture_compare(f, "run:1", "run:2", &bad, TP_COMPARE_MD, &sum, TP_EUSAGE));

  /* Two commits sharing a prefix. */
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  begin(s, "aaaa999911112222333344445555666677778888", "2026-11-05T10:00:00Z");
  tp_store_close(s);
  free(capture_compare(f, "aaaa", "run:1", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "ambiguous"));
  free(capture_compare(f, "aaaa0", "run:1", NULL, TP_COMPARE_MD, &sum, TP_OK));
}

/* ---- history and trends --------------------------------------------------------------- */

static void test_history(void **state) {
  fixture *f = *state;
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  char key[512];
  tp_config_axes a = axes_for("slow_quiet", 4096);
  tp_config_key(&a, key, sizeof key);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_history_query q = {.key = key};
  assert_int_equal(tp_report_history(s, &q, TP_FMT_JSON, mem), TP_OK);
  fclose(mem);
  json_t *root = json_loads(text, 0, NULL);
  free(text);
  assert_string_equal(json_string_value(json_object_get(root, "label")),
                      "llama3-8b ag_linear slow_quiet T=4096 bf16 fwd tp=2 dist_gemm ce");
  json_t *rows = json_object_get(root, "rows");
  assert_int_equal(json_array_size(rows), 4); /* A, B, B again, C: oldest first */
  const char *commits[] = {COMMIT_A, COMMIT_B, COMMIT_B, COMMIT_C};
  for (int i = 0; i < 4; i++)
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(rows, (size_t)i), "commit")), commits[i]);
  assert_true(json_is_null(json_object_get(json_array_get(rows, 0), "vs_first_pct")));
  assert_near(json_real_value(json_object_get(json_array_get(rows, 1), "vs_first_pct")), 5.0, 0.5);
  assert_near(json_real_value(json_object_get(json_array_get(rows, 2), "vs_previous_pct")),
              100.0 * (1.0 / 1.05 - 1), 0.5);
  json_decref(root);

  /* By id, in markdown, and a failed row keeps its reason. */
  tp_config_axes broke = axes_for("broke", 4096);
  tp_config_key(&broke, key, sizeof key);
  mem = open_memstream(&text, &len);
  q = (tp_history_query){.key = key};
  assert_int_equal(tp_report_history(s, &q, TP_FMT_MARKDOWN, mem), TP_OK);
  fclose(mem);
  assert_non_null(strstr(text, "## tpbench history: llama3-8b ag_linear broke"));
  assert_non_null(strstr(text, "| failed: numerics: rel err 3e-1 against stock |"));
  free(text);
  mem = open_memstream(&text, &len);
  q = (tp_history_query){.key = "kind=op;nothing"};
  assert_int_equal(tp_report_history(s, &q, TP_FMT_MARKDOWN, mem), TP_EUSAGE);
  q = (tp_history_query){.config_id = 1};
  assert_int_equal(tp_report_history(s, &q, TP_FMT_CSV, mem), TP_OK);
  fclose(mem);
  assert_memory_equal(text, "config_key,config_id,run_id,commit,", 35);
  free(text);
  tp_store_close(s);
}

static void test_trends(void **state) {
  fixture *f = *state;
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_trends(s, mem), TP_OK);
  fclose(mem);
  tp_store_close(s);
  json_t *root = json_loads(text, 0, NULL);
  free(text);
  json_t *commits = json_object_get(root, "commits");
  assert_true(json_array_size(commits) >= 3); /* A, B (two runs), C, maybe the ambiguous one */
  json_t *b = json_array_get(commits, 1);
  assert_string_equal(json_string_value(json_object_get(b, "commit")), COMMIT_B);
  assert_int_equal(json_array_size(json_object_get(b, "runs")), 2);
  json_t *series = json_object_get(root, "series");
  int found = 0;
  for (size_t i = 0; i < json_array_size(series); i++) {
    json_t *one = json_array_get(series, i);
    if (!strstr(json_string_value(json_object_get(one, "key")), ";proj=slow_quiet;")) continue;
    found = 1;
    assert_string_equal(json_string_value(json_object_get(one, "label")),
                        "llama3-8b ag_linear slow_quiet T=4096 bf16 fwd tp=2 dist_gemm ce");
    static const char *const fields[][2] = {{"kind", "op"},         {"backend", "dist_gemm"},
                                            {"model", "llama3-8b"}, {"layer", "ag_linear"},
                                            {"proj", "slow_quiet"}, {"dtype", "bf16"},
                                            {"pass", "fwd"},        {"schedule", "ce"}};
    for (size_t k = 0; k < sizeof fields / sizeof *fields; k++)
      assert_string_equal(json_string_value(json_object_get(one, fields[k][0])), fields[k][1]);
    assert_int_equal(json_integer_value(json_object_get(one, "tokens")), 4096);
    json_t *points = json_object_get(one, "points");
    assert_int_equal(json_array_size(points), 3); /* one per commit */
    /* B's point is its latest run (3), back at A's level. */
    json_t *pb = json_array_get(points, 1);
    assert_int_equal(json_integer_value(json_object_get(pb, "run_id")), 3);
    assert_near(json_real_value(json_object_get(pb, "median_us")), 1000, 10);
  }
  assert_true(found);
  json_decref(root);
}

/* ---- the real run against a synthesised copy ------------------------------------------- */

static fx_change scaled(const char *key, void *ctx) {
  (void)key;
  return *(fx_change *)ctx;
}

static void test_real_run_against_synthetic(void **state) {
  (void)state;
  fx_dir d;
  assert_int_equal(fx_mkdir(&d, "tp_compare_real"), 0);
  char db[512];
  fx_path(&d, "real.db", db, sizeof db);
  assert_int_equal(fx_copy(FX_REAL_DB, db), 0);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  fx_change same = {1.0, 0.0}, slower = {1.10, 0.002};
  int64_t copy = fx_synthesise_run(s, 1, "feed0001", scaled, &same, 5);
  int64_t slow = fx_synthesise_run(s, 1, "feed0002", scaled, &slower, 6);
  assert_true(copy > 0 && slow > 0);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_compare_summary sum;
  /* The real run recorded its driver, the synthesised copies say
   * "synthetic": not the same hardware. */
  assert_int_equal(tp_report_compare(s, "run:1", "feed0001", NULL, TP_COMPARE_MD, mem, &sum),
                   TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "different hardware"));
  tp_compare_options allow = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                              .alpha = TP_COMPARE_DEFAULT_ALPHA,
                              .allow_mixed_hardware = 1};
  assert_int_equal(tp_report_compare(s, "run:1", "feed0001", &allow, TP_COMPARE_MD, mem, &sum),
                   TP_OK);
  /* Runs from before rounds are one sample each: nothing can be tested. */
  assert_int_equal(sum.information, 144);
  assert_int_equal(sum.tests, 0);
  assert_int_equal(sum.regressed + sum.improved + sum.added + sum.missing, 0);
  /* Everything 10% slower is the machine, not the code: no regression. */
  assert_int_equal(tp_report_compare(s, "feed0001", "feed0002", NULL, TP_COMPARE_MD, mem, &sum),
                   TP_OK);
  assert_int_equal(sum.regressed, 0);
  fclose(mem);
  free(text);
  tp_store_close(s);
  fx_rmdir(&d);
}

/* ---- the sample database of real runs (examples/) ------------------------------- */

/* Whatever the figures, every verdict must follow the rule, and the head
 * must be described by the runs that supplied its compared configurations. */
static void test_sample_database(void **state) {
  (void)state;
  if (access(FX_SAMPLE_DB, R_OK) != 0) skip();
  fx_dir d;
  assert_int_equal(fx_mkdir(&d, "tp_compare_sample"), 0);
  fixture f;
  fx_path(&d, "sample.db", f.db, sizeof f.db);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, f.db), 0);
  /* the commits of the sample's first and last run, whatever they are */
  char base[48] = "", head[48] = "";
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(f.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT (SELECT commit_sha FROM runs ORDER BY id LIMIT 1), "
                                      "(SELECT commit_sha FROM runs ORDER BY id DESC LIMIT 1)",
                                      -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  snprintf(base, sizeof base, "%s", (const char *)sqlite3_column_text(st, 0));
  snprintf(head, sizeof head, "%s", (const char *)sqlite3_column_text(st, 1));
  sqlite3_finalize(st);
  sqlite3_close(db);
  assert_true(strlen(base) >= 7 && strlen(head) >= 7 && strcmp(base, head) != 0);
  tp_compare_summary sum;
  json_t *root = compare_json(&f, base, head, &sum);
  json_t *rows = json_object_get(root, "rows");
  int counted[6] = {0};
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    const char *v = str(row, "verdict");
    int gated = 0, slower = 0, faster = 0;
    for (int m = 0; m < 3; m++) {
      static const char *const names[] = {"vs_stock", "vs_bound", "time"};
      json_t *x = measure_of(row, names[m]);
      if (!json_is_true(json_object_get(x, "gated"))) continue;
      gated = 1;
      double change = json_real_value(json_object_get(x, "change"));
      int significant =
          json_real_value(json_object_get(x, "p_adjusted")) < TP_COMPARE_DEFAULT_ALPHA;
      slower |= significant && change >= TP_COMPARE_DEFAULT_THRESHOLD;
      faster |= significant && change <= -TP_COMPARE_DEFAULT_THRESHOLD;
    }
    if (!strcmp(v, "regressed")) {
      assert_true(slower || json_is_true(json_object_get(row, "failed_in_head")));
      counted[0]++;
    } else if (!strcmp(v, "improved")) {
      assert_true(faster && !slower);
      counted[1]++;
    } else if (!strcmp(v, "unchanged")) {
      assert_false(slower || faster);
      counted[2]++;
    } else if (!strcmp(v, "information")) {
      assert_false(gated);
      counted[5]++;
    } else if (!strcmp(v, "new")) {
      assert_true(json_is_null(json_object_get(row, "base_config_id")) ||
                  json_is_string(json_object_get(row, "note")));
      counted[3]++;
    } else {
      assert_string_equal(v, "missing");
      counted[4]++;
    }
  }
  assert_int_equal(counted[0], sum.regressed);
  assert_int_equal(counted[1], sum.improved);
  assert_int_equal(counted[2], sum.unchanged);
  assert_int_equal(counted[3], sum.added);
  assert_int_equal(counted[4], sum.missing);
  assert_int_equal(counted[5], sum.information);
  assert_true(sum.regressed + sum.improved + sum.unchanged + sum.information > 100);
  /* The commit's `tpbench link` run has no key in common with the base, and
   * neither has its `tpbench run` (layers, measured only at the head): they
   * do not describe the head; its `ops` runs do. */
  json_t *head_runs = json_object_get(json_object_get(root, "head"), "runs");
  int ops_runs = 0;
  for (size_t i = 0; i < json_array_size(head_runs); i++) {
    json_t *run = json_array_get(head_runs, i);
    tp_store *s = NULL;
    assert_int_equal(tp_store_open(f.db, 0, &s), TP_OK);
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT command = 'ops' FROM runs WHERE id = %lld",
             (long long)json_integer_value(json_object_get(run, "id")));
    int is_ops = (int)fx_int(s, sql);
    tp_store_close(s);
    assert_int_equal(json_is_true(json_object_get(run, "used")), is_ops);
    ops_runs += is_ops;
  }
  assert_true(ops_runs >= 1);
  json_decref(root);
  fx_rmdir(&d);
}

/* ---- nothing compared, nothing gated, link probes, hostile text ----------------------- */

/* A copy of examples/' sample database at name in d; skips without it. Its
 * runs (before rounds): 1 ops at commit e92c4c5, and at a06011f 2 and 3 ops
 * (96 configurations each, both in common with run 1, none with each
 * other), 4 link probes (stored with driver 'cuda 13.0' by an older link
 * command), 5 run (layers). */
static void sample_copy(fx_dir *d, const char *name, char *db, size_t cap) {
  if (access(FX_SAMPLE_DB, R_OK) != 0) skip();
  assert_int_equal(fx_mkdir(d, name), 0);
  fx_path(d, "sample.db", db, cap);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, db), 0);
}

/* A gate that compared nothing must not pass: sides without a configuration
 * in common, and filters that match none, are refused with why (the README's
 * old example run:2 run:3 printed "No regression" and exited 0). */
static void test_nothing_compared_is_refused(void **state) {
  (void)state;
  fx_dir d;
  char db[600];
  sample_copy(&d, "tp_compare_nothing", db, sizeof db);
  tp_compare_summary sum = {0};
  free(capture_on(db, "run:2", "run:3", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "nothing compared: run:2 and run:3 have no "
                                          "configuration in common (96 only in run:2, 96 only "
                                          "in run:3)"));
  free(capture_on(db, "run:2", "run:3", NULL, TP_COMPARE_JSON, &sum, TP_EUSAGE));
  tp_compare_options opt = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                            .alpha = TP_COMPARE_DEFAULT_ALPHA,
                            .filter = {.model = "bogus"}};
  free(capture_on(db, "run:1", "run:2", &opt, TP_COMPARE_MD, &sum, TP_EUSAGE));
  assert_non_null(
      strstr(tp_last_error(), "nothing compared: the filters match no configuration of run:1"));
  /* rows shown, none on both sides: the filters are named in the reason */
  opt.filter = (tp_compare_filter){.kind = "link"};
  free(capture_on(db, "run:1", "run:4", &opt, TP_COMPARE_CSV, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "no configuration in common that the filters select"));
  /* a run of no configuration at all */
  exec_on(db, "DELETE FROM configs WHERE run_id = 5");
  free(capture_on(db, "run:5", "run:5", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "recorded no configuration"));
  /* something in common: compared */
  free(capture_on(db, "run:1", "run:2", NULL, TP_COMPARE_MD, &sum, TP_OK));
  assert_int_equal(sum.compared, 96);
  /* in common, but every one failed or was rejected on both sides: nothing ran to compare */
  exec_on(db, "UPDATE configs SET status = 'failed', reason = 'planted' WHERE run_id IN (1, 2) "
              "AND config_key LIKE '%backend=dist_gemm;%'");
  tp_compare_options dist = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                             .alpha = TP_COMPARE_DEFAULT_ALPHA,
                             .filter = {.backend = "dist_gemm"}};
  free(capture_on(db, "run:1", "run:2", &dist, TP_COMPARE_MD, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "nothing compared: every one of the"));
  assert_non_null(strstr(tp_last_error(), "ran on neither side (in run:2: rejected 0, failed"));
  fx_rmdir(&d);
}

/* Compared but nothing gated (all information only) passes, exit 0 as
 * documented, but the verdict line says that nothing was gated, and why. */
static void test_nothing_gated_says_so(void **state) {
  fixture *f = *state;
  fx_dir d;
  char db[600];
  sample_copy(&d, "tp_compare_ungated", db, sizeof db);
  tp_compare_summary sum = {0};
  /* one run a side from before rounds: one sample per ratio, none tested */
  char *md = capture_on(db, "run:1", "run:2", NULL, TP_COMPARE_MD, &sum, TP_OK);
  assert_int_equal(sum.tests, 0);
  assert_int_equal(sum.regressed, 0);
  assert_non_null(strstr(md, "\n**No regression (nothing gated: no dist_gemm ratio had two "
                             "samples a side; a run without rounds is one)**: 0 regressed"));
  assert_null(strstr(md, "\n**No regression**"));
  free(md);
  json_t *root = parse(capture_on(db, "run:1", "run:2", NULL, TP_COMPARE_JSON, &sum, TP_OK));
  json_t *summary = json_object_get(root, "summary");
  assert_int_equal(json_integer_value(json_object_get(summary, "tests")), 0);
  assert_int_equal(json_integer_value(json_object_get(summary, "compared")), 96);
  json_decref(root);
  fx_rmdir(&d);
  /* rounds, but only references compared */
  tp_compare_options opt = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                            .alpha = TP_COMPARE_DEFAULT_ALPHA,
                            .filter = {.kind = "gemm"}};
  char b[32], h[32];
  spec_of(b, sizeof b, f->slowed.base[2]);
  spec_of(h, sizeof h, f->slowed.head[2]);
  md = capture_on(f->rounds_db, b, h, &opt, TP_COMPARE_MD, &sum, TP_OK);
  assert_non_null(strstr(md, "**No regression (nothing gated: no dist_gemm configuration ran "
                             "on both sides; the rest is information (at TP 1, where nothing "
                             "fuses, --gate-references gates stock over its bound))**"));
  free(md);
  /* a gated pass keeps the plain verdict */
  opt.filter = (tp_compare_filter){0};
  md = capture_on(f->rounds_db, b, h, &opt, TP_COMPARE_MD, &sum, TP_OK);
  assert_true(sum.tests > 0);
  assert_null(strstr(md, "nothing gated"));
  free(md);
}

/* A commit against itself on the sample: its link-probe run stored the
 * CUDA version as its driver (an old bug), but link probes supply no
 * compared configuration (never gated, even with --gate-references), so
 * the hardware check leaves that run out; the ops runs still count. */
static void test_link_probes_leave_the_hardware_check(void **state) {
  (void)state;
  fx_dir d;
  char db[600];
  sample_copy(&d, "tp_compare_link", db, sizeof db);
  tp_compare_summary sum = {0};
  tp_compare_options opt = {.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                            .alpha = TP_COMPARE_DEFAULT_ALPHA,
                            .gate_references = 1};
  json_t *root = parse(capture_on(db, "a06011f", "a06011f", &opt, TP_COMPARE_JSON, &sum, TP_OK));
  assert_false(json_is_true(json_object_get(json_object_get(root, "options"), "mixed_hardware")));
  json_t *runs = json_object_get(json_object_get(root, "head"), "runs");
  assert_int_equal(json_array_size(runs), 4);
  for (size_t i = 0; i < json_array_size(runs); i++) {
    json_t *run = json_array_get(runs, i);
    int is_link = !strcmp(str(run, "command"), "link");
    assert_int_equal(json_is_true(json_object_get(run, "used")), !is_link);
  }
  json_t *rows = json_object_get(root, "rows");
  int links = 0;
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    if (strncmp(str(row, "config_key"), "kind=link;", 10) != 0) continue;
    links++;
    assert_string_equal(str(row, "verdict"), "information");
    assert_false(json_is_true(json_object_get(measure_of(row, "time"), "gated")));
  }
  assert_int_equal(links, 16);
  json_decref(root);
  /* an ops run on another driver is still refused */
  exec_on(db, "UPDATE runs SET driver_version = '570.86.15' WHERE id = 3");
  free(capture_on(db, "a06011f", "a06011f", NULL, TP_COMPARE_MD, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "different hardware"));
  assert_non_null(strstr(tp_last_error(), "driver 570.86.15"));
  assert_null(strstr(tp_last_error(), "cuda 13.0"));
  fx_rmdir(&d);
}

/* Lines of text that start with prefix. */
static int lines_starting(const char *text, const char *prefix) {
  int n = 0;
  size_t len = strlen(prefix);
  for (const char *line = text; line; line = strchr(line, '\n')) {
    if (*line == '\n') line++;
    n += strncmp(line, prefix, len) == 0;
  }
  return n;
}

/* The first line of text (after the first) that starts with prefix,
 * without its line break. */
static char *line_starting(const char *text, const char *prefix) {
  char needle[64];
  snprintf(needle, sizeof needle, "\n%s", prefix);
  const char *at = strstr(text, needle);
  if (!at) {
    fail_msg("no line starting with '%s' in:\n%s", prefix, text);
    return NULL;
  }
  return strndup(at + 1, strcspn(at + 1, "\n"));
}

/* Runs' stored text (host, GPU, driver, versions, start time, test knobs)
 * reaches compare's markdown, made for pull-request comments, through
 * tp_md_text: no line break, table row, verdict line, heading or HTML of
 * its own. The head's host also differs from the base's, so the "different
 * hosts" note prints it too. */
static void test_markdown_escapes_stored_text(void **state) {
  (void)state;
  fx_dir d;
  char db[600];
  sample_copy(&d, "tp_compare_escape", db, sizeof db);
  tp_compare_summary sum = {0};
  char *clean = capture_on(db, "run:1", "run:3", NULL, TP_COMPARE_MD, &sum, TP_OK);
  /* the same hostile GPU and driver on both runs keep the hardware alike */
  exec_on(db, "UPDATE runs SET gpu_name = 'H200' || char(10) || '| gpu | row |', "
              "driver_version = '580' || char(10) || '<script>alert(3)</script>', "
              "nccl_version = '2.28' || char(10) || '**No regression**: nccl', "
              "cublas_version = '13.1' || char(13) || char(10) || '| cublas | row |', "
              "started_at = started_at || char(10) || '# started heading' WHERE id IN (1, 3)");
  exec_on(db, "UPDATE runs SET host = 'vm' || char(10) || char(10) || '**No regression**: all "
              "clear' || char(10) || char(10) || '| x | injected row |' || char(10) || "
              "'<img src=x onerror=alert(1)>', cuda_version = '13.0 <script>alert(2)</script>', "
              "test_knobs = 'TPBENCH_TEST_DIST_DELAY_US=0' || char(10) || '# injected heading' || "
              "char(10) || '| knob | row |' WHERE id = 3");
  char *md = capture_on(db, "run:1", "run:3", NULL, TP_COMPARE_MD, &sum, TP_OK);
  assert_int_equal(lines_starting(md, "|"), lines_starting(clean, "|"));
  assert_int_equal(lines_starting(md, "**"), 1);
  assert_int_equal(lines_starting(md, "#"), lines_starting(clean, "#"));
  assert_int_equal(lines_starting(md, "<"), lines_starting(clean, "<"));
  assert_null(raw_tag(md, "<img"));
  assert_null(raw_tag(md, "<script"));
  char *verdict = line_starting(md, "**No regression"), *was = line_starting(clean, "**No");
  assert_string_equal(verdict, was);
  free(verdict);
  free(was);
  /* the text is there, escaped, on the side line, the knobs note and the
   * hosts note */
  assert_non_null(strstr(md, "vm  **No regression**: all clear  \\| x \\| injected row \\| "
                             "\\<img src=x onerror=alert(1)>"));
  assert_non_null(strstr(md, "CUDA 13.0 \\<script>alert(2)\\</script>"));
  assert_non_null(strstr(md, "(TPBENCH_TEST_DIST_DELAY_US=0 # injected heading \\| knob \\| "
                             "row \\|): a deliberate slowdown"));
  assert_non_null(strstr(md, "> **Note**: different hosts (vm vs vm  **No regression**"));
  free(md);
  /* the shared-GPU knob is said for what it is: ranks sharing one GPU, timings that mean
   * nothing; not a deliberate slowdown (only the delay knob is) */
  exec_on(db, "UPDATE runs SET test_knobs = 'TPBENCH_TEST_SHARE_GPU=1 (8 ranks on device 0, "
              "9000 MiB each, NCCL over loopback sockets: the timings mean nothing)' WHERE id = 3");
  md = capture_on(db, "run:1", "run:3", NULL, TP_COMPARE_MD, &sum, TP_OK);
  assert_non_null(strstr(md, "the timings mean nothing)): ranks sharing one GPU, so its timings "
                             "mean nothing. Not the code as shipped.\n"));
  assert_null(strstr(md, "deliberate slowdown"));
  free(md);
  /* a run on both sides is noted once; two knobs of one effect say it once */
  exec_on(db, "UPDATE runs SET test_knobs = 'TPBENCH_TEST_WITHHOLD=1 TPBENCH_TEST_HANG_STEP=2' "
              "WHERE id = 3");
  md = capture_on(db, "run:3", "run:3", NULL, TP_COMPARE_MD, &sum, TP_OK);
  const char *note = strstr(md, "> **Note**: run 3 ran with test knobs on");
  assert_non_null(note);
  assert_null(strstr(note + 1, "> **Note**: run 3 ran with test knobs on"));
  assert_non_null(strstr(note, "): a planted hang. Not the code as shipped.\n"));
  free(md);
  free(clean);
  fx_rmdir(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_student_t),
      cmocka_unit_test(test_welch_by_hand),
      cmocka_unit_test(test_welch_edges),
      cmocka_unit_test(test_welch_copies_of_one_value),
      cmocka_unit_test(test_benjamini_hochberg),
      cmocka_unit_test(test_identical_runs_are_clean),
      cmocka_unit_test(test_slowdown_is_flagged),
      cmocka_unit_test(test_machine_drift_is_never_flagged),
      cmocka_unit_test(test_markdown_names_regressions),
      cmocka_unit_test(test_stock_path_rows),
      cmocka_unit_test(test_failure_in_head_regresses),
      cmocka_unit_test(test_latest_run_decides),
      cmocka_unit_test(test_dirty_run_of_a_side_is_said),
      cmocka_unit_test(test_mixed_hardware_refused),
      cmocka_unit_test(test_filters),
      cmocka_unit_test(test_references_gate_only_when_asked),
      cmocka_unit_test(test_faster_stock_is_the_reference),
      cmocka_unit_test(test_runs_before_rounds),
      cmocka_unit_test(test_history),
      cmocka_unit_test(test_trends),
      cmocka_unit_test(test_bad_sides_and_options),
      cmocka_unit_test(test_real_run_against_synthetic),
      cmocka_unit_test(test_sample_database),
      cmocka_unit_test(test_nothing_compared_is_refused),
      cmocka_unit_test(test_nothing_gated_says_so),
      cmocka_unit_test(test_tp1_gates_stock_over_its_gemm),
      cmocka_unit_test(test_link_probes_leave_the_hardware_check),
      cmocka_unit_test(test_markdown_escapes_stored_text),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
