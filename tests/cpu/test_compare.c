/*
 * test_compare.c — CPU tests of report/'s regression tracking: the
 * Mann–Whitney U test against values worked out by hand (and by an
 * independent implementation), compare's verdicts on synthetic samples whose
 * answer is known, how a commit with several runs is read, the outputs and
 * refusals, history and trends; compare on the real H200 run against a
 * synthesised copy of it (fixture_db.h); and on examples/' sample database
 * of real runs at two commits, every verdict checked against the rule.
 *
 * The synthetic database (runs at commits aaaa…, bbbb…, cccc…): per
 * configuration 30 iterations on two ranks, rank 1 always 1% faster, so the
 * slowest rank is rank 0 and its times are exactly what the test wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>

#include "fixture_db.h"
#include "report/tp_compare.h"
#include "report/tp_history.h"

#define COMMIT_A "aaaa000011112222333344445555666677778888"
#define COMMIT_B "bbbb000011112222333344445555666677778888"
#define COMMIT_C "cccc000011112222333344445555666677778888"
#define ITERS 30

typedef struct {
  fx_dir dir;
  char db[512];
} fixture;

/* ---- building the synthetic database --------------------------------------- */

static tp_config_axes axes_for(const char *proj, int64_t tokens) {
  return (tp_config_axes){.kind = "op",
                          .model = "llama3-8b",
                          .layer = "ag_linear",
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
  tp_samples sets[2] = {{0, ITERS, r0}, {1, ITERS, r1}};
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
 *   never       failed in both                            -> unchanged, with the reason
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

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_compare") != 0) return -1;
  fx_path(&f->dir, "compare.db", f->db, sizeof f->db);
  tp_store *s = NULL;
  if (tp_store_open(f->db, 1, &s) != TP_OK) return -1;
  build(s);
  tp_store_close(s);
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

static void test_mann_whitney_by_hand(void **state) {
  (void)state;
  tp_mann_whitney mw;
  /* No value of a beats any of b: U = 0, mean 4.5, sigma^2 = 3*3*7/12. */
  double a[] = {1, 2, 3}, b[] = {4, 5, 6};
  assert_int_equal(tp_mann_whitney_test(a, 3, b, 3, &mw), TP_OK);
  assert_near(mw.u, 0, 0);
  assert_near(mw.mean, 4.5, 0);
  assert_near(mw.sigma, sqrt(5.25), 1e-15);
  assert_near(mw.z, -4.0 / sqrt(5.25), 1e-15); /* continuity: |0 - 4.5| - 0.5 */
  assert_near(mw.p, 0.080855598370052295, 1e-12);
  /* The other way round: U' = n_a n_b - U, the same p. */
  assert_int_equal(tp_mann_whitney_test(b, 3, a, 3, &mw), TP_OK);
  assert_near(mw.u, 9, 0);
  assert_near(mw.p, 0.080855598370052295, 1e-12);
  /* Ties count one half and shrink sigma: 2 vs 2 (x2) and 3 vs 3 (x2) give
   * U = 1 + 1 + 1 = 3; tie groups {2,2,2}, {3,3,3}: sum t^3 - t = 48. */
  double c[] = {1, 2, 2, 3}, d[] = {2, 3, 3, 4};
  assert_int_equal(tp_mann_whitney_test(c, 4, d, 4, &mw), TP_OK);
  assert_near(mw.u, 3, 0);
  assert_near(mw.sigma, sqrt(16.0 / 12.0 * (9 - 48.0 / 56.0)), 1e-14);
  assert_near(mw.p, 0.17203370892182296, 1e-12);
  /* Unequal sizes, ties across samples. */
  double e[] = {10, 11, 12, 13, 14, 15, 16, 17}, g[] = {9, 12, 12, 18, 19, 20};
  assert_int_equal(tp_mann_whitney_test(e, 8, g, 6, &mw), TP_OK);
  assert_near(mw.u, 19, 0);
  assert_near(mw.p, 0.5595445903888846, 1e-12);
}

static void test_mann_whitney_edges(void **state) {
  (void)state;
  tp_mann_whitney mw;
  double same[] = {5, 5, 5, 5};
  assert_int_equal(tp_mann_whitney_test(same, 4, same, 4, &mw), TP_OK);
  assert_near(mw.sigma, 0, 0);
  assert_near(mw.p, 1, 0);
  double one[] = {1}, two[] = {2};
  assert_int_equal(tp_mann_whitney_test(one, 1, two, 1, &mw), TP_OK);
  assert_true(mw.p > 0.3); /* one sample each proves nothing */
  assert_int_equal(tp_mann_whitney_test(one, 0, two, 1, &mw), TP_EUSAGE);
  double nan_sample[] = {1, NAN};
  assert_int_equal(tp_mann_whitney_test(nan_sample, 2, two, 1, &mw), TP_EUSAGE);
  /* Complete separation of 30 against 30: p is tiny but representable. */
  double lo[30], hi[30];
  for (int i = 0; i < 30; i++) {
    lo[i] = 100 + i;
    hi[i] = 200 + i;
  }
  assert_int_equal(tp_mann_whitney_test(hi, 30, lo, 30, &mw), TP_OK);
  assert_near(mw.u, 900, 0);
  assert_true(mw.z > 6 && mw.p < 1e-9 && mw.p > 0);
}

/* ---- compare ---------------------------------------------------------------------- */

static char *capture_compare(const fixture *f, const char *base, const char *head,
                             const tp_compare_options *opt, tp_report_format fmt,
                             tp_compare_summary *sum, tp_rc expected) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_rc rc = tp_report_compare(s, base, head, opt, fmt, mem, sum);
  fclose(mem);
  tp_store_close(s);
  if (rc != expected) fail_msg("rc %d (%s), expected %d", rc, tp_last_error(), expected);
  return text;
}

/* The verdict of the row whose key has proj=P. */
static const char *verdict_of(json_t *rows, const char *proj, json_t **row_out) {
  char needle[64];
  snprintf(needle, sizeof needle, ";proj=%s;", proj);
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    if (strstr(json_string_value(json_object_get(row, "config_key")), needle)) {
      if (row_out) *row_out = row;
      return json_string_value(json_object_get(row, "verdict"));
    }
  }
  fail_msg("no row for %s", proj);
  return NULL;
}

static json_t *compare_json(const fixture *f, const char *base, const char *head,
                            tp_compare_summary *sum) {
  char *text = capture_compare(f, base, head, NULL, TP_FMT_JSON, sum, TP_OK);
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) fail_msg("not JSON: %s\n%s", err.text, text);
  free(text);
  return root;
}

static void test_verdicts(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  /* run:1 against run:2, not the commit B (whose latest run is run 3). */
  json_t *root = compare_json(f, "run:1", "run:2", &sum);
  json_t *rows = json_object_get(root, "rows");
  json_t *row = NULL;
  assert_string_equal(verdict_of(rows, "same", &row), "unchanged");
  assert_near(json_real_value(json_object_get(row, "ratio")), 1.0, 0);
  assert_near(json_real_value(json_object_get(row, "p_value")), 1.0, 1e-12);
  assert_string_equal(verdict_of(rows, "slow_quiet", &row), "regressed");
  assert_near(json_real_value(json_object_get(row, "ratio")), 1.05, 0.005);
  assert_true(json_real_value(json_object_get(row, "p_value")) < 1e-6);
  assert_string_equal(verdict_of(rows, "slow_noisy", &row), "unchanged");
  assert_true(json_real_value(json_object_get(row, "ratio")) > 1.03);
  assert_true(json_real_value(json_object_get(row, "p_value")) > 0.2);
  assert_string_equal(verdict_of(rows, "fast_quiet", NULL), "improved");
  assert_string_equal(verdict_of(rows, "tiny_shift", &row), "unchanged");
  /* Significant, but below the minimum effect. */
  assert_true(json_real_value(json_object_get(row, "p_value")) < 1e-6);
  assert_string_equal(verdict_of(rows, "gone", NULL), "missing");
  assert_string_equal(verdict_of(rows, "born", NULL), "new");
  assert_string_equal(verdict_of(rows, "broke", &row), "missing");
  assert_non_null(strstr(json_string_value(json_object_get(row, "note")), "numerics"));
  assert_string_equal(verdict_of(rows, "never", &row), "unchanged");
  assert_non_null(strstr(json_string_value(json_object_get(row, "note")), "no multicast"));
  assert_int_equal(sum.regressed, 1);
  assert_int_equal(sum.improved, 1);
  assert_int_equal(sum.unchanged, 4);
  assert_int_equal(sum.added, 1);
  assert_int_equal(sum.missing, 2);
  /* Rows come regressed first. */
  assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 0), "verdict")),
                      "regressed");
  json_decref(root);

  /* A wider threshold or a stricter alpha turns the regression away. */
  tp_compare_options loose = {0.06, 0.01};
  free(capture_compare(f, "run:1", "run:2", &loose, TP_FMT_JSON, &sum, TP_OK));
  assert_int_equal(sum.regressed, 0);
  assert_int_equal(sum.improved, 1);
  tp_compare_options tight = {0.005, 0.01};
  free(capture_compare(f, "run:1", "run:2", &tight, TP_FMT_JSON, &sum, TP_OK));
  assert_int_equal(sum.regressed, 2); /* slow_quiet and tiny_shift */
}

/* A commit run twice: each configuration comes from its latest run. */
static void test_commit_with_two_runs(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  json_t *root = compare_json(f, "aaaa", "BBBB0000", &sum);
  json_t *rows = json_object_get(root, "rows"), *row = NULL;
  /* slow_quiet: run 3 (later, back at A's level) stands for B. */
  assert_string_equal(verdict_of(rows, "slow_quiet", &row), "unchanged");
  assert_int_equal(json_integer_value(json_object_get(row, "head_config_id")), 17);
  /* Everything else of B is only in run 2, and still found. */
  assert_string_equal(verdict_of(rows, "fast_quiet", NULL), "improved");
  json_t *runs = json_object_get(json_object_get(root, "head"), "runs");
  assert_int_equal(json_array_size(runs), 2);
  assert_int_equal(sum.regressed, 0);
  json_decref(root);
  /* B to C: slow_quiet regressed against run 3. */
  free(capture_compare(f, COMMIT_B, "cccc", NULL, TP_FMT_MARKDOWN, &sum, TP_OK));
  assert_int_equal(sum.regressed, 1);
}

static void test_markdown_and_csv(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  char *md = capture_compare(f, "run:1", "run:2", NULL, TP_FMT_MARKDOWN, &sum, TP_OK);
  assert_non_null(strstr(md, "## tpbench compare: `run:1` → `run:2`"));
  assert_non_null(strstr(md, "**Regression**: 1 regressed, 1 improved, 4 unchanged, 1 new, "
                             "2 missing."));
  assert_non_null(strstr(md, "### Regressed (1)"));
  assert_non_null(strstr(md, "### Improved (1)"));
  assert_non_null(strstr(md, "### New (in head only) (1)"));
  assert_non_null(strstr(md, "<details><summary>Unchanged (4)</summary>"));
  assert_non_null(strstr(md, "llama3-8b ag_linear slow_quiet T=4096 bf16 fwd tp=2 dist_gemm ce"));
  assert_non_null(strstr(md, "| +5."));
  assert_true(strstr(md, "### Regressed") < strstr(md, "### Improved"));
  free(md);

  char *csv = capture_compare(f, "run:1", "run:2", NULL, TP_FMT_CSV, &sum, TP_OK);
  assert_memory_equal(csv, "verdict,config_key,label,", 25);
  int lines = 0;
  for (const char *p = csv; (p = strstr(p, "\r\n")); p += 2) lines++;
  assert_int_equal(lines, 1 + 9);
  assert_non_null(strstr(csv, "\r\nregressed,kind=op;"));
  free(csv);
}

static void test_bad_sides_and_options(void **state) {
  fixture *f = *state;
  tp_compare_summary sum;
  free(capture_compare(f, "dddd", "run:1", NULL, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "no run of a commit starting with 'dddd'"));
  free(capture_compare(f, "run:1", "run:99", NULL, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));
  free(capture_compare(f, "run:x", "run:1", NULL, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));
  free(capture_compare(f, "run:0", "run:1", NULL, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));
  free(capture_compare(f, "", "run:1", NULL, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));
  tp_compare_options bad = {1.5, 0.01};
  free(capture_compare(f, "run:1", "run:2", &bad, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));
  bad = (tp_compare_options){0.03, 0};
  free(capture_compare(f, "run:1", "run:2", &bad, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));

  /* Two commits sharing a prefix. */
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  begin(s, "aaaa999911112222333344445555666677778888", "2026-11-05T10:00:00Z");
  tp_store_close(s);
  free(capture_compare(f, "aaaa", "run:1", NULL, TP_FMT_MARKDOWN, &sum, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "ambiguous"));
  free(capture_compare(f, "aaaa0", "run:1", NULL, TP_FMT_MARKDOWN, &sum, TP_OK));
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
  json_t *rows = json_object_get(root, "rows");
  assert_int_equal(json_array_size(rows), 4); /* A, B, B again, C: oldest first */
  const char *commits[] = {COMMIT_A, COMMIT_B, COMMIT_B, COMMIT_C};
  for (int i = 0; i < 4; i++)
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(rows, (size_t)i), "commit")), commits[i]);
  assert_true(json_is_null(json_object_get(json_array_get(rows, 0), "vs_first")));
  assert_near(json_real_value(json_object_get(json_array_get(rows, 1), "vs_first")), 0.05, 0.005);
  assert_near(json_real_value(json_object_get(json_array_get(rows, 2), "vs_previous")),
              1.0 / 1.05 - 1, 0.005);
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
  assert_int_equal(tp_report_compare(s, "run:1", "feed0001", NULL, TP_FMT_MARKDOWN, mem, &sum),
                   TP_OK);
  assert_int_equal(sum.unchanged, 144);
  assert_int_equal(sum.regressed + sum.improved + sum.added + sum.missing, 0);
  /* 10% slower on top of the real noise: every configuration regressed. */
  assert_int_equal(tp_report_compare(s, "run:1", "feed0002", NULL, TP_FMT_MARKDOWN, mem, &sum),
                   TP_OK);
  assert_int_equal(sum.regressed, 144);
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
  int counted[5] = {0};
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    const char *v = json_string_value(json_object_get(row, "verdict"));
    json_t *p = json_object_get(row, "p_value");
    double ratio = json_real_value(json_object_get(row, "ratio"));
    int significant = json_is_real(p) && json_real_value(p) < TP_COMPARE_DEFAULT_ALPHA;
    if (!strcmp(v, "regressed")) {
      assert_true(significant && ratio >= 1 + TP_COMPARE_DEFAULT_THRESHOLD);
      counted[0]++;
    } else if (!strcmp(v, "improved")) {
      assert_true(significant && ratio <= 1 - TP_COMPARE_DEFAULT_THRESHOLD);
      counted[1]++;
    } else if (!strcmp(v, "unchanged")) {
      assert_false(significant && fabs(ratio - 1) >= TP_COMPARE_DEFAULT_THRESHOLD &&
                   json_real_value(json_object_get(row, "z")) * (ratio - 1) > 0);
      counted[2]++;
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
  assert_true(sum.regressed + sum.improved + sum.unchanged > 100);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mann_whitney_by_hand),
      cmocka_unit_test(test_mann_whitney_edges),
      cmocka_unit_test(test_verdicts),
      cmocka_unit_test(test_commit_with_two_runs),
      cmocka_unit_test(test_markdown_and_csv),
      cmocka_unit_test(test_history),
      cmocka_unit_test(test_trends),
      cmocka_unit_test(test_bad_sides_and_options),
      cmocka_unit_test(test_real_run_against_synthetic),
      cmocka_unit_test(test_sample_database),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
