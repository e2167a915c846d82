/*
 * test_report.c — CPU tests of report/: the throughput table in markdown,
 * CSV and JSON, built from a synthetic database whose expected numbers are
 * known (speedups, geometric mean, dist/bound), plus filters and errors.
 *
 * The database (in a mkdtemp directory, removed afterwards) holds two runs.
 * Run 2 has six table rows, in the order the cases were written:
 *   A-ce, A-sm  ag_linear qkv: stock 2000 us, dist 1600 / 1800, GEMM 1200, comm 1500
 *   B           linear_rs wo:  stock 1000, dist 800 (two ops ran), GEMM 700, comm 600
 *   C           ag_linear_multi w13: stock 3000, dist rejected (reason with , " |)
 *   D           llama3-70b linear_rs w2 fp32: stock 5000, dist 4000, GEMM failed
 *   E           ag_linear qkv at 4096 tokens: stock only
 * Run 1 (another commit) has one case: stock 3000, dist 2000.
 * window.db holds a run with the stock variant on NCCL windows (schedule
 * nccl-window) beside plain stock in every case, the faster of the two
 * differing from case to case; the speedup and the bound must take the
 * faster stock and the faster collective alone.
 * A third database (hostile.db) stores what an attacker would (formulas,
 * newlines, table pipes, <script>) in every text field: markdown, CSV and
 * JSON of the table and of history must keep it inert.
 * TP_TEST_KEEP=1 keeps the directory to look at the database by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "report/tp_history.h"
#include "report/tp_keys.h"
#include "report/tp_report.h"
#include "report/tp_report_util.h"
#include "report/tp_runs.h"
#include "store/tp_store.h"
#include "tests/cpu/raw_markup.h"

#define COMMIT_1 "aaaa111122223333444455556666777788889999"
#define COMMIT_2 "bbbb111122223333444455556666777788889999"
#define REJECT_REASON "multicast unavailable, \"NVLS\" disabled | see docs"
#define GEMM_FAILURE "cuBLASLt: no algorithm for this shape"

typedef struct {
  char dir[256];
  char db[512];
} fixture;

/* ---- building the synthetic database ------------------------------------ */

static tp_config_axes case_axes(const char *model, const char *layer, const char *proj,
                                int64_t tokens, const char *dtype) {
  tp_config_axes a = {.kind = "op",
                      .model = model,
                      .op_or_layer = layer,
                      .proj = proj,
                      .tp = 8,
                      .batch = 2,
                      .seqlen = (int)(tokens / 2),
                      .tokens = tokens,
                      .m = tokens,
                      .n = 1024,
                      .k = 4096,
                      .n_weights = 1,
                      .dtype = dtype,
                      .sp = 1,
                      .pass = "fwd"};
  return a;
}

/* One configuration of the case: kind/backend/schedule vary, the case stays. */
static void put(tp_store *store, int64_t run, tp_config_axes axes, const char *kind,
                const char *backend, const char *schedule, int chunks, double median_us,
                tp_config_status status, const char *reason, const tp_schedule_choice *ran,
                int n_ran, double rel_err) {
  axes.kind = kind;
  axes.backend = backend;
  axes.schedule = schedule;
  axes.chunks = chunks;
  tp_result r = {.n_samples = 3,
                 .median_us = median_us,
                 .p10_us = median_us * 0.98,
                 .p90_us = median_us * 1.02,
                 .mean_us = median_us,
                 .min_us = median_us * 0.97,
                 .max_us = median_us * 1.05,
                 .cv = 0.015,
                 .tokens_per_s = (double)axes.tokens / (median_us * 1e-6),
                 .tflops = 123.4,
                 .flops = 1e12,
                 .bytes_moved = 1e8,
                 .workspace_bytes = 48LL << 20,
                 .peak_mem_bytes = 1LL << 32,
                 .max_abs_err = 0.01,
                 .rel_err = rel_err,
                 .numerics_ref = "stock"};
  double times[3] = {median_us * 0.99, median_us, median_us * 1.01};
  tp_samples samples = {0, 3, times, NULL, NULL};
  tp_config_record rec = {.axes = &axes,
                          .status = status,
                          .reason = reason,
                          .result = status == TP_STATUS_OK ? &r : NULL,
                          .samples = status == TP_STATUS_OK ? &samples : NULL,
                          .n_sample_sets = status == TP_STATUS_OK,
                          .schedules = ran,
                          .n_schedules = n_ran};
  if (tp_store_put_config(store, run, &rec, NULL) != TP_OK) fail_msg("%s", tp_last_error());
}

static int64_t begin(tp_store *store, const char *commit) {
  tp_run_info info = {.commit = commit,
                      .dirty = 1,
                      .host = "h200-node-3",
                      .gpu_name = "NVIDIA H200",
                      .gpu_count = 8,
                      .driver_version = "550.54.15",
                      .cuda_version = "12.4",
                      .nccl_version = "2.21.5",
                      .cublas_version = "12.4.5",
                      .cupti_version = "2024.1.1",
                      .command_line = "tpbench ops --model `llama3-8b`",
                      .command = "ops",
                      .warmup_iters = 10,
                      .measure_iters = 50};
  int64_t id = 0;
  if (tp_store_begin_run(store, &info, &id) != TP_OK) fail_msg("%s", tp_last_error());
  return id;
}

static void build_run_1(tp_store *store) {
  int64_t run = begin(store, COMMIT_1);
  tp_config_axes a = case_axes("llama3-8b", "ag_linear", "qkv", 8192, "bf16");
  tp_schedule_choice ce = {"ag_linear", "ce", "copy-engine", 4, "default"};
  put(store, run, a, "op", "stock", NULL, 0, 3000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, a, "op", "dist_gemm", "ce", 4, 2000, TP_STATUS_OK, NULL, &ce, 1, 1e-3);
  assert_int_equal(tp_store_finish_run(store, run), TP_OK);
}

static void build_run_2(tp_store *store) {
  int64_t run = begin(store, COMMIT_2);
  tp_config_axes a = case_axes("llama3-8b", "ag_linear", "qkv", 8192, "bf16");
  tp_schedule_choice ce4 = {"ag_linear", "ce", "copy-engine", 4, "large M"};
  tp_schedule_choice sm2 = {"ag_linear", "sm", "sm-kernel", 2, "requested"};
  put(store, run, a, "op", "stock", NULL, 0, 2000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, a, "op", "dist_gemm", "ce", 4, 1600, TP_STATUS_OK, NULL, &ce4, 1, 2.5e-3);
  put(store, run, a, "op", "dist_gemm", "sm", 2, 1800, TP_STATUS_OK, NULL, &sm2, 1, 2.5e-3);
  put(store, run, a, "gemm", "cublaslt", NULL, 0, 1200, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, a, "comm", "nccl", NULL, 0, 1500, TP_STATUS_OK, NULL, NULL, 0, NAN);

  tp_config_axes b = case_axes("llama3-8b", "linear_rs", "wo", 8192, "bf16");
  tp_schedule_choice two[2] = {{"linear_rs", "ce", "copy-engine", 2, "auto"},
                               {"linear_rs.reduce", "sm", "sm-kernel", 0, "auto"}};
  put(store, run, b, "op", "stock", NULL, 0, 1000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, b, "op", "dist_gemm", "auto", 0, 800, TP_STATUS_OK, NULL, two, 2, NAN);
  put(store, run, b, "gemm", "cublaslt", NULL, 0, 700, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, b, "comm", "nccl", NULL, 0, 600, TP_STATUS_OK, NULL, NULL, 0, NAN);

  tp_config_axes c = case_axes("llama3-8b", "ag_linear_multi", "w13", 8192, "bf16");
  c.n_weights = 2;
  put(store, run, c, "op", "stock", NULL, 0, 3000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, c, "op", "dist_gemm", "multimem", 0, 0, TP_STATUS_REJECTED, REJECT_REASON, NULL,
      0, NAN);

  tp_config_axes d = case_axes("llama3-70b", "linear_rs", "w2", 8192, "fp32");
  tp_schedule_choice ce1 = {"linear_rs", "ce", "copy-engine", 1, "auto"};
  put(store, run, d, "op", "stock", NULL, 0, 5000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, d, "op", "dist_gemm", "ce", 1, 4000, TP_STATUS_OK, NULL, &ce1, 1, 1e-6);
  put(store, run, d, "gemm", "cublaslt", NULL, 0, 0, TP_STATUS_FAILED, GEMM_FAILURE, NULL, 0, NAN);
  put(store, run, d, "comm", "nccl", NULL, 0, 2000, TP_STATUS_OK, NULL, NULL, 0, NAN);

  tp_config_axes e = case_axes("llama3-8b", "ag_linear", "qkv", 4096, "bf16");
  put(store, run, e, "op", "stock", NULL, 0, 900, TP_STATUS_OK, NULL, NULL, 0, NAN);
  assert_int_equal(tp_store_finish_run(store, run), TP_OK);
}

static int make_fixture(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof f->dir, "%s/tp_report_test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->db, sizeof f->db, "%s/report.db", f->dir);
  tp_store *store = NULL;
  if (tp_store_open(f->db, 1, &store) != TP_OK) return -1;
  build_run_1(store);
  build_run_2(store);
  tp_store_close(store);
  *state = f;
  return 0;
}

static int remove_fixture(void **state) {
  fixture *f = *state;
  if (getenv("TP_TEST_KEEP")) { /* to look at the database by hand */
    fprintf(stderr, "kept %s\n", f->dir);
    free(f);
    return 0;
  }
  char path[600];
  const char *names[] = {"report.db",      "report.db-wal", "report.db-shm", "empty.db",
                         "empty.db-wal",   "empty.db-shm",  "hostile.db",    "hostile.db-wal",
                         "hostile.db-shm", "window.db",     "window.db-wal", "window.db-shm",
                         "gaps.db",        "gaps.db-wal",   "gaps.db-shm"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", f->dir, names[i]);
    unlink(path);
  }
  if (rmdir(f->dir) != 0) fprintf(stderr, "could not remove %s\n", f->dir);
  free(f);
  return 0;
}

/* ---- running the report ------------------------------------------------- */

/* The report as text (malloc'd) or NULL, with its return code. */
static tp_rc run_report(const fixture *f, const tp_report_filter *filter, tp_report_format fmt,
                        char **text) {
  tp_store *store = NULL;
  tp_rc rc = tp_store_open(f->db, 0, &store);
  if (rc != TP_OK) fail_msg("%s", tp_last_error());
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  assert_non_null(out);
  rc = tp_report_throughput(store, filter, fmt, out);
  fclose(out);
  tp_store_close(store);
  *text = buf;
  return rc;
}

static char *report_ok(const fixture *f, const tp_report_filter *filter, tp_report_format fmt) {
  char *text = NULL;
  if (run_report(f, filter, fmt, &text) != TP_OK) fail_msg("report: %s", tp_last_error());
  return text;
}

static json_t *report_json(const fixture *f, const tp_report_filter *filter) {
  char *text = report_ok(f, filter, TP_FMT_JSON);
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) fail_msg("invalid JSON at line %d: %s\n%s", err.line, err.text, text);
  free(text);
  return root;
}

static double jnum(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  if (!json_is_number(v)) fail_msg("%s is not a number", key);
  return json_number_value(v);
}

static void assert_close(double actual, double expected) {
  if (fabs(actual - expected) > 1e-12 * fabs(expected))
    fail_msg("%.17g != %.17g", actual, expected);
}

static int count_char(const char *s, char c) {
  int n = 0;
  for (; *s; s++) n += *s == c;
  return n;
}

/* ---- JSON ----------------------------------------------------------------- */

static void test_json_rows_and_speedups(void **state) {
  json_t *root = report_json(*state, NULL);
  json_t *run = json_object_get(root, "run");
  assert_int_equal(json_integer_value(json_object_get(run, "id")), 2);
  assert_string_equal(json_string_value(json_object_get(run, "commit")), COMMIT_2);
  assert_true(json_is_true(json_object_get(run, "dirty")));
  assert_int_equal(json_integer_value(json_object_get(run, "gpu_count")), 8);
  assert_int_equal(json_integer_value(json_object_get(run, "measure_iters")), 50);
  assert_non_null(json_string_value(json_object_get(run, "finished_at")));

  json_t *rows = json_object_get(root, "rows");
  assert_int_equal(json_array_size(rows), 6);
  /* The speedup is stock / dist_gemm of what was written. */
  const double stock_us[] = {2000, 2000, 1000, 3000, 5000, 900};
  const double dist_us[] = {1600, 1800, 800, NAN, 4000, NAN};
  const char *ran[] = {"ce x4", "sm x2", "ce x2+sm", NULL, "ce x1", NULL};
  for (size_t i = 0; i < 6; i++) {
    json_t *row = json_array_get(rows, i);
    assert_close(jnum(row, "stock_ms"), stock_us[i] / 1000);
    if (isnan(dist_us[i])) {
      assert_true(json_is_null(json_object_get(row, "speedup")));
      assert_true(json_is_null(json_object_get(row, "dist_ms")));
    } else {
      assert_close(jnum(row, "speedup"), stock_us[i] / dist_us[i]);
      assert_close(jnum(row, "dist_ms"), dist_us[i] / 1000);
    }
    const char *schedule = json_string_value(json_object_get(row, "schedule"));
    if (ran[i]) assert_string_equal(schedule, ran[i]);
    else assert_null(schedule);
  }
  /* bound = max(GEMM, comm); dist/bound against it. */
  json_t *a_ce = json_array_get(rows, 0);
  assert_close(jnum(a_ce, "bound_ms"), 1.5);
  assert_close(jnum(a_ce, "dist_over_bound"), 1600.0 / 1500.0);
  assert_close(jnum(json_array_get(rows, 2), "bound_ms"), 0.7);
  assert_close(jnum(a_ce, "workspace_mib"), 48.0);
  assert_close(jnum(a_ce, "rel_err"), 2.5e-3);
  assert_close(jnum(a_ce, "dist_tokens_per_s"), 8192 / 1.6e-3);
  /* NaN written, null read. */
  assert_true(json_is_null(json_object_get(json_array_get(rows, 2), "rel_err")));
  /* A failed GEMM-alone leaves the bound unknown, not half-known. */
  json_t *d = json_array_get(rows, 4);
  assert_string_equal(json_string_value(json_object_get(d, "model")), "llama3-70b");
  assert_true(json_is_null(json_object_get(d, "gemm_ms")));
  assert_true(json_is_null(json_object_get(d, "bound_ms")));
  assert_close(jnum(d, "comm_ms"), 2.0);
  json_decref(root);
}

static void test_json_rejected_case_shows_reason(void **state) {
  json_t *root = report_json(*state, NULL);
  json_t *c = json_array_get(json_object_get(root, "rows"), 3);
  assert_string_equal(json_string_value(json_object_get(c, "layer")), "ag_linear_multi");
  assert_string_equal(json_string_value(json_object_get(c, "status")), "rejected");
  assert_string_equal(json_string_value(json_object_get(c, "reason")), REJECT_REASON);
  assert_string_equal(json_string_value(json_object_get(c, "schedule_requested")), "multimem");
  json_t *e = json_array_get(json_object_get(root, "rows"), 5);
  assert_string_equal(json_string_value(json_object_get(e, "status")), "missing");
  assert_true(json_is_null(json_object_get(e, "dist_config_id")));

  json_t *rejected = json_object_get(root, "rejected");
  assert_int_equal(json_array_size(rejected), 2);
  json_t *first = json_array_get(rejected, 0);
  assert_string_equal(json_string_value(json_object_get(first, "backend")), "dist_gemm");
  assert_string_equal(json_string_value(json_object_get(first, "reason")), REJECT_REASON);
  json_t *second = json_array_get(rejected, 1);
  assert_string_equal(json_string_value(json_object_get(second, "kind")), "gemm");
  assert_string_equal(json_string_value(json_object_get(second, "status")), "failed");
  assert_string_equal(json_string_value(json_object_get(second, "reason")), GEMM_FAILURE);
  json_decref(root);
}

/* Runs `sql` on the fixture's database (a store opened read-write). */
static void exec_on(const fixture *f, const char *sql) {
  tp_store *store = NULL;
  if (tp_store_open(f->db, 0, &store) != TP_OK) fail_msg("%s", tp_last_error());
  char *err = NULL;
  if (sqlite3_exec(tp_store_db(store), sql, NULL, NULL, &err) != SQLITE_OK) fail_msg("%s", err);
  tp_store_close(store);
}

/* Rank skew and host stalls recorded for a configuration reach the summary
 * (markdown) and the rows (JSON). */
static void test_rank_skew_and_host_stalls_shown(void **state) {
  const fixture *f = *state;
  static const char pick[] = "(SELECT min(c.id) FROM configs c JOIN results r ON r.config_id = "
                             "c.id WHERE c.backend = 'dist_gemm' AND c.status = 'ok' AND "
                             "c.run_id = (SELECT max(id) FROM runs))";
  char sql[512];
  snprintf(sql, sizeof sql,
           "UPDATE results SET rank_skew = 0.125, host_stall_frac = 0.05 WHERE config_id = %s",
           pick);
  exec_on(f, sql);
  char *md = report_ok(f, NULL, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "by up to 12.5 %"));
  assert_non_null(strstr(md, "in up to 5.0 % of a configuration's iterations"));
  free(md);
  json_t *root = report_json(f, NULL);
  assert_close(jnum(json_object_get(root, "summary"), "worst_rank_skew_pct"), 12.5);
  /* the row's too, in percent as in CSV */
  int skewed = 0;
  json_t *rows = json_object_get(root, "rows");
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *v = json_object_get(json_array_get(rows, i), "dist_rank_skew_pct");
    if (json_is_number(v)) skewed += fabs(json_number_value(v) - 12.5) < 1e-9;
  }
  assert_int_equal(skewed, 1);
  json_decref(root);
  snprintf(sql, sizeof sql,
           "UPDATE results SET rank_skew = NULL, host_stall_frac = NULL WHERE config_id = %s",
           pick);
  exec_on(f, sql);
  md = report_ok(f, NULL, TP_FMT_MARKDOWN);
  assert_null(strstr(md, "Ranks and hosts"));
  free(md);
}

static void test_json_summary(void **state) {
  json_t *root = report_json(*state, NULL);
  json_t *sum = json_object_get(root, "summary");
  /* Rows with both ok: A-ce 1.25, A-sm 10/9, B 1.25, D 1.25. */
  double speedups[] = {2000.0 / 1600, 2000.0 / 1800, 1000.0 / 800, 5000.0 / 4000};
  double log_sum = 0;
  for (int i = 0; i < 4; i++) log_sum += log(speedups[i]);
  assert_int_equal(json_integer_value(json_object_get(sum, "rows")), 4);
  assert_close(jnum(sum, "geomean_speedup"), exp(log_sum / 4));
  /* dist/bound where both references ran: 16/15, 18/15, 8/7 (D has none). */
  assert_int_equal(json_integer_value(json_object_get(sum, "bound_rows")), 3);
  assert_close(jnum(sum, "median_dist_over_bound"), 800.0 / 700.0);
  assert_close(jnum(sum, "worst_dist_over_bound"), 1800.0 / 1500.0);
  json_decref(root);
}

/* ---- markdown ------------------------------------------------------------- */

/* A copy of the markdown table from its header line to the first blank line.
 * Not inlined: GCC's -Wdangling-pointer misreads the cut when it is. */
static __attribute__((noinline)) char *markdown_table(const char *md) {
  const char *start = strstr(md, "\n| id |");
  assert_non_null(start);
  const char *end = strstr(start + 1, "\n\n");
  return strndup(start + 1, end ? (size_t)(end - (start + 1)) : strlen(start + 1));
}

static void test_markdown(void **state) {
  char *md = report_ok(*state, NULL, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "run 2"));
  assert_non_null(strstr(md, COMMIT_2));
  assert_non_null(strstr(md, "(dirty tree)"));
  assert_non_null(strstr(md, "NVIDIA H200 × 8"));
  assert_non_null(strstr(md, "driver 550.54.15"));
  assert_non_null(strstr(md, "CUDA 12.4, NCCL 2.21.5, cuBLAS 12.4.5"));
  assert_non_null(strstr(md, "10 warm-up, 50 measured"));
  /* Backticks inside the command line get a longer fence. */
  assert_non_null(strstr(md, "`` tpbench ops --model `llama3-8b` ``"));

  /* Every line of the throughput table has the same number of cell
   * separators (escaped '|' inside a reason does not count), and there is
   * one line per row. */
  int table_lines = 0, separators = -1;
  char *copy = markdown_table(md);
  for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
    table_lines++;
    int n = count_char(line, '|');
    for (char *p = strstr(line, "\\|"); p; p = strstr(p + 2, "\\|")) n--;
    if (separators < 0) separators = n;
    if (n != separators) fail_msg("ragged table line: %s", line);
  }
  free(copy);
  assert_int_equal(table_lines, 2 + 6);
  /* the compact table; dtype varies (fp32 in D), tp and options do not */
  assert_non_null(strstr(md, "| id | key | model | op | shape | dtype | pass | schedule | stock ms "
                             "| dist_gemm ms | speedup (95% CI) | dist/bound (95% CI) | status |\n"
                             "|---:|---|---|---|---|---|---|---|---:|---:|---:|---:|---|\n"));
  assert_int_equal(separators, 14);

  /* id and short key, op and shape, the speedup with its interval (samples at
   * 0.99, 1 and 1.01 of the median: about ±2 %), dist/bound with its own */
  char key[TP_SHORT_KEY_LEN + 1], expect[400];
  tp_short_key("kind=op;model=llama3-8b;layer=ag_linear;proj=qkv;backend=dist_gemm;schedule=ce;"
               "chunks=4;tp=8;batch=2;seqlen=4096;tokens=8192;m=8192;n=1024;k=4096;n_weights=1;"
               "dtype=bf16;sp=1;pass=fwd;graph=0;save_gathered=0",
               key, sizeof key);
  snprintf(expect, sizeof expect,
           "| 4 | %s | llama3-8b | ag_linear qkv | T=8192 8192×1024×4096 | bf16 | fwd | ce x4 | "
           "2.000 | 1.600 | 1.25 (1.23–1.28) | 1.07 (1.05–1.09) | ok |",
           key);
  if (!strstr(md, expect)) fail_msg("no line\n%s\nin\n%s", expect, md);
  assert_non_null(strstr(md, "| sm x2 | 2.000 | 1.800 | 1.11 (1.09–1.13) | 1.20 (1.18–1.22) |"));
  assert_non_null(strstr(md, "| multimem (requested) | 3.000 | - | - | - |"));
  assert_non_null(
      strstr(md, "| rejected: multicast unavailable, \"NVLS\" disabled \\| see docs |"));
  assert_non_null(strstr(md, "| missing: no dist_gemm configuration for this case |"));
  /* the wide columns wait for --columns */
  assert_null(strstr(md, "GEMM ms"));
  assert_null(strstr(md, "workspace MiB"));
  /* Rows keep the order the matrix ran. */
  assert_true(strstr(md, "| ce x4 |") < strstr(md, "| sm x2 |"));
  assert_true(strstr(md, "| sm x2 |") < strstr(md, "| ce x2+sm |"));

  double geomean = pow(1.25 * (2000.0 / 1800) * 1.25 * 1.25, 0.25);
  snprintf(expect, sizeof expect, "geometric-mean speedup %.3f; dist/bound median 1.14, worst 1.20",
           geomean);
  assert_non_null(strstr(md, expect));
  assert_non_null(strstr(md, "(over 4 rows with stock and dist_gemm results)"));
  /* one line per model */
  assert_non_null(strstr(md, "| llama3-8b | 3 | 1.202 | 0 | 1.14 | 1.20 | 0 | 2 |"));
  assert_non_null(strstr(md, "| llama3-70b | 1 | 1.250 | 0 | - | - | 0 | 0 |"));
  assert_non_null(strstr(md, "**Not run** (2 configurations;"));
  assert_non_null(strstr(md, "failed: " GEMM_FAILURE));
  /* a skipped configuration by id, short key and a label naming its batch */
  assert_non_null(strstr(md, "- config 16, key "));
  assert_non_null(strstr(md, "(llama3-70b linear_rs w2 T=8192 B=2 fp32 fwd tp=8 GEMM alone)"));
  free(md);
}

/* ---- CSV ------------------------------------------------------------------ */

/* Splits one RFC 4180 record starting at *p; returns its field count and
 * moves *p past the CRLF. Copies field number want (0-based) into field. */
static int csv_record(const char **p, int want, char *field, size_t cap) {
  int n = 0;
  size_t len = 0;
  const char *s = *p;
  for (;;) {
    int quoted = *s == '"';
    if (quoted) s++;
    for (;;) {
      if (quoted && s[0] == '"' && s[1] == '"') {
        if (n == want && len + 1 < cap) field[len++] = '"';
        s += 2;
      } else if (quoted && s[0] == '"') {
        s++;
        break;
      } else if (!quoted && (*s == ',' || *s == '\r' || *s == '\n' || !*s)) {
        break;
      } else {
        if (!*s) fail_msg("unterminated quoted field");
        if (n == want && len + 1 < cap) field[len++] = *s;
        s++;
      }
    }
    if (n == want) field[len] = '\0';
    n++;
    if (*s == ',') {
      s++;
      continue;
    }
    if (s[0] != '\r' || s[1] != '\n') fail_msg("record does not end in CRLF");
    *p = s + 2;
    return n;
  }
}

/* The index of a column, found by name in the header record. */
static int csv_column(const char *csv, const char *name) {
  char field[64];
  for (int i = 0;; i++) {
    const char *p = csv;
    if (i >= csv_record(&p, i, field, sizeof field)) fail_msg("no column %s", name);
    if (!strcmp(field, name)) return i;
  }
}

static void test_csv(void **state) {
  char *csv = report_ok(*state, NULL, TP_FMT_CSV);
  /* No header block: the first line is the column header itself. */
  assert_memory_equal(csv, "run_id,commit,model,", 20);
  const char *p = csv;
  char field[128];
  int header_fields = csv_record(&p, 0, field, sizeof field);
  assert_true(header_fields > 30);
  int speedup = csv_column(csv, "speedup"), status = csv_column(csv, "status");
  int reason = csv_column(csv, "reason"), schedule = csv_column(csv, "schedule");
  char speedups[6][32], statuses[6][32], reasons[6][128], schedules[6][32];
  int records = 0;
  while (*p) {
    assert_true(records < 6);
    const char *start = p;
    /* Every record has as many fields as the header, quoted commas or not. */
    assert_int_equal(csv_record(&p, speedup, speedups[records], sizeof speedups[0]), header_fields);
    const char *q = start;
    csv_record(&q, status, statuses[records], sizeof statuses[0]);
    q = start;
    csv_record(&q, reason, reasons[records], sizeof reasons[0]);
    q = start;
    csv_record(&q, schedule, schedules[records], sizeof schedules[0]);
    records++;
  }
  assert_int_equal(records, 6);
  assert_string_equal(speedups[0], "1.250");
  assert_string_equal(speedups[1], "1.111");
  assert_string_equal(schedules[2], "ce x2+sm");
  assert_string_equal(speedups[3], "");
  assert_string_equal(statuses[3], "rejected");
  assert_string_equal(reasons[3], REJECT_REASON);
  assert_string_equal(statuses[5], "missing");
  assert_non_null(strstr(csv, "\"multicast unavailable, \"\"NVLS\"\" disabled | see docs\""));
  free(csv);
}

/* One column: an empty value is the field "", never a blank line (a CSV reader sees no field
 * there, and the records after it shift up a row). */
static void test_csv_one_column(void **state) {
  tp_report_filter filter = {.columns = "speedup"};
  char *csv = report_ok(*state, &filter, TP_FMT_CSV);
  assert_null(strstr(csv, "\r\n\r\n"));
  const char *p = csv;
  char field[32];
  assert_int_equal(csv_record(&p, 0, field, sizeof field), 1);
  assert_string_equal(field, "speedup");
  int records = 0, empty = 0;
  while (*p) {
    assert_int_equal(csv_record(&p, 0, field, sizeof field), 1);
    empty += field[0] == '\0';
    records++;
  }
  assert_int_equal(records, 6);
  assert_int_equal(empty, 2); /* the rejected and the missing configuration's */
  free(csv);
}

/* ---- filters and errors --------------------------------------------------- */

static int json_rows(const fixture *f, const tp_report_filter *filter) {
  json_t *root = report_json(f, filter);
  int n = (int)json_array_size(json_object_get(root, "rows"));
  json_decref(root);
  return n;
}

static void test_filters(void **state) {
  fixture *f = *state;
  tp_report_filter filter = {.model = "llama3-70b"};
  assert_int_equal(json_rows(f, &filter), 1);
  filter = (tp_report_filter){.layer = "linear_rs"};
  assert_int_equal(json_rows(f, &filter), 2);
  filter = (tp_report_filter){.dtype = "fp32"};
  assert_int_equal(json_rows(f, &filter), 1);
  filter = (tp_report_filter){.model = "llama3-8b", .layer = "ag_linear", .pass = "fwd"};
  assert_int_equal(json_rows(f, &filter), 3);

  filter = (tp_report_filter){.run_id = 1};
  json_t *root = report_json(f, &filter);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  assert_int_equal(json_array_size(json_object_get(root, "rows")), 1);
  assert_close(jnum(row, "speedup"), 1.5);
  assert_true(json_is_null(json_object_get(row, "bound_ms")));
  json_decref(root);

  filter = (tp_report_filter){.commit = "AAAA1111"};
  root = report_json(f, &filter);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "run"), "id")), 1);
  json_decref(root);
  filter = (tp_report_filter){.commit = "bbbb"};
  root = report_json(f, &filter);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "run"), "id")), 2);
  json_decref(root);
}

static void expect_usage_error(const fixture *f, const tp_report_filter *filter,
                               const char *in_message) {
  char *text = NULL;
  assert_int_equal(run_report(f, filter, TP_FMT_MARKDOWN, &text), TP_EUSAGE);
  if (!strstr(tp_last_error(), in_message))
    fail_msg("message lacks \"%s\": %s", in_message, tp_last_error());
  assert_string_equal(text, ""); /* nothing half-written */
  free(text);
}

static void test_errors(void **state) {
  fixture *f = *state;
  tp_report_filter filter = {.run_id = 99};
  expect_usage_error(f, &filter, "no run 99");
  filter = (tp_report_filter){.commit = "cccc"};
  expect_usage_error(f, &filter, "cccc");
  filter = (tp_report_filter){.run_id = 1, .commit = "bbbb"};
  expect_usage_error(f, &filter, "not bbbb");
  filter = (tp_report_filter){.pass = "bwd"};
  expect_usage_error(f, &filter, "pass=bwd");

  /* An empty database is an error, not an empty table. */
  fixture empty = *f;
  snprintf(empty.db, sizeof empty.db, "%s/empty.db", f->dir);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(empty.db, 1, &store), TP_OK);
  tp_store_close(store);
  expect_usage_error(&empty, NULL, "no runs");
  /* So is a run that recorded nothing. */
  assert_int_equal(tp_store_open(empty.db, 0, &store), TP_OK);
  tp_run_info info = {.commit = "dddd"};
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &run), TP_OK);
  tp_store_close(store);
  expect_usage_error(&empty, NULL, "no op configurations");
}

static void test_write_failure(void **state) {
  fixture *f = *state;
  FILE *full = fopen("/dev/full", "w");
  if (!full) skip();
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &store), TP_OK);
  assert_int_equal(tp_report_throughput(store, NULL, TP_FMT_MARKDOWN, full), TP_EIO);
  assert_int_equal(tp_report_throughput(store, NULL, TP_FMT_JSON, full), TP_EIO);
  tp_store_close(store);
  fclose(full);
}

static void test_format_parse(void **state) {
  (void)state;
  tp_report_format fmt = TP_FMT_JSON;
  assert_int_equal(tp_report_format_parse("md", &fmt), TP_OK);
  assert_int_equal(fmt, TP_FMT_MARKDOWN);
  assert_int_equal(tp_report_format_parse("Markdown", &fmt), TP_OK);
  assert_int_equal(fmt, TP_FMT_MARKDOWN);
  assert_int_equal(tp_report_format_parse("csv", &fmt), TP_OK);
  assert_int_equal(fmt, TP_FMT_CSV);
  assert_int_equal(tp_report_format_parse("json", &fmt), TP_OK);
  assert_int_equal(fmt, TP_FMT_JSON);
  assert_int_equal(tp_report_format_parse("xml", &fmt), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "xml"));
}

/* ---- injection: stored text is outside input ------------------------------------------ */

/* A reason that tries to end its cell, add rows and a heading, open a code
 * span and a link, and bring a script into a pull-request comment. */
#define HOSTILE_REASON                                                                             \
  "bad\n| x | y |\n## Owned <script>alert(1)</script> `code` [link](http://x) &amp; \\| \x01"      \
  "end"

/* Labels read from a row through TP_LABEL_COLUMNS: the op, GEMM-alone and
 * collective-alone wording, chunks shown only when set, every axis away from
 * its default named (B=batch, no-sp, graph, save-gathered), the GEMM shape
 * where no model implies it, a link probe's size, NULL columns left out, and
 * a label cut at the buffer's size. Columns: kind, backend, model, layer,
 * proj, tokens, dtype, pass, tp, schedule, chunks, batch, seqlen, m, n, k,
 * n_weights, sp, graph, save_gathered. */
static void test_config_label(void **state) {
  (void)state;
  static const struct {
    const char *row, *label;
  } cases[] = {
      {"'op', 'dist_gemm', 'llama3-8b', 'ag_linear', 'qkv', 4096, 'bf16', 'fwd', 2, 'ce', 2, 0, 0, "
       "4096, 2048, 4096, 1, 1, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "llama3-8b ag_linear qkv T=4096 bf16 fwd tp=2 dist_gemm ce x2"},
      {"'layer', 'stock', 'llama3-70b', 'ffn', NULL, 8192, 'fp32', 'fwd+bwd', 4, NULL, 0, 1, 8192, "
       "0, 0, 0, 0, 1, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "llama3-70b ffn T=8192 fp32 fwd+bwd tp=4 stock"},
      {"'gemm', 'cublaslt', 'llama3-8b', 'linear_rs', 'wo', 4096, 'bf16', 'bwd', 2, NULL, 0, 0, 0, "
       "4096, 4096, 2048, 1, 1, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "llama3-8b linear_rs wo T=4096 bf16 bwd tp=2 GEMM alone"},
      {"'comm', 'nccl', 'llama3-8b', 'linear_rs', 'wo', 4096, 'bf16', 'fwd', 8, 'ring', 0, 0, 0, "
       "4096, 4096, 512, 1, 1, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "llama3-8b linear_rs wo T=4096 bf16 fwd tp=8 collective alone ring"},
      /* every switch away from its default, and a batch of two */
      {"'layer', 'dist_gemm', 'debug', 'attention', NULL, 4096, 'bf16', 'fwd', 2, 'auto', 0, 2, "
       "2048, 0, 0, 0, 0, 0, 1, 1, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "debug attention T=4096 B=2 bf16 fwd tp=2 dist_gemm auto no-sp graph save-gathered"},
      /* a bare projection: no model, so its shape is said */
      {"'op', 'stock', '', 'linear_rs', NULL, 4096, 'bf16', 'fwd', 2, NULL, 0, 0, 0, 4096, 1024, "
       "8192, 1, 1, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "linear_rs T=4096 4096×1024×8192 bf16 fwd tp=2 stock"},
      {"'op', 'dist_gemm', 'shape', 'ag_linear', NULL, 4096, 'bf16', 'fwd', 2, 'ce', 0, 0, 0, "
       "4096, 1024, 8192, 1, 1, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "shape ag_linear T=4096 4096×1024×8192 bf16 fwd tp=2 dist_gemm ce"},
      /* a link probe: its size per rank; sequence parallelism means nothing there */
      {"'link', 'copy-engine', '', 'ce_push', '', 0, 'bf16', 'fwd', 2, '', 0, 0, 0, 8388608, 0, 0, "
       "0, 0, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "ce_push 8 MiB bf16 fwd tp=2 copy-engine"},
      /* a link probe's GEMM between gaps: the GEMM's M×N×K, not a size in bytes */
      {"'link', 'cublaslt', '', 'gemm_gap_25', '', 0, 'bf16', 'fwd', 1, '', 0, 0, 0, 8192, 8192, "
       "4096, 0, 0, 0, 0, 1, 'none', NULL, NULL, NULL, 0, NULL",
       "gemm_gap_25 8192×8192×4096 bf16 fwd tp=1 cublaslt"},
      /* schema 006's composition axes away from their defaults */
      {"'layer', 'dist_gemm', 'llama3-8b', 'block', NULL, 4096, 'bf16', 'fwd+bwd', 2, 'ce', 0, 2, "
       "2048, 0, 0, 0, 0, 1, 1, 0, 2, 'full', '2048,4096', 'nccl', NULL, 0, "
       "NULL",
       "llama3-8b block T=4096 B=2 bf16 fwd+bwd tp=2 dist_gemm ce graph dp2 ac-full rs-nccl among "
       "2048,4096"},
      /* schema 007's transport axes away from their defaults */
      {"'op', 'dist_gemm', 'llama3-8b', 'ag_linear', 'qkv', 4096, 'fp8-row', 'fwd', 2, 'ce', 0, 0, "
       "0, 4096, 2048, 4096, 1, 1, 0, 0, 1, 'none', NULL, NULL, 'fp8', 1, 'nccl'",
       "llama3-8b ag_linear qkv T=4096 fp8-row fwd tp=2 dist_gemm ce comm-fp8 fsdp-traffic "
       "symm-nccl"},
      {"NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
       "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
       ""},
  };
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char sql[1024];
    snprintf(
        sql, sizeof sql,
        "WITH c(kind, backend, model, layer, proj, tokens, dtype, pass, tp, schedule, "
        "chunks, batch, seqlen, m, n, k, n_weights, sp, graph, save_gathered, dp, ac, graph_sizes, "
        "rs_sum, comm_dtype, fsdp_traffic, symm) AS (SELECT %s) "
        "SELECT 'first', " TP_LABEL_COLUMNS ", 'after' FROM c",
        cases[i].row);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) fail_msg("%s", sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    /* callers index the columns after the label's eleven */
    assert_int_equal(sqlite3_column_count(st), 1 + 11 + 1);
    assert_string_equal((const char *)sqlite3_column_text(st, 12), "after");
    tp_config_axes axes;
    tp_axes_from_row(st, 1, &axes);
    char label[128];
    tp_config_label(label, sizeof label, &axes);
    assert_string_equal(label, cases[i].label);
    tp_config_label(label, 12, &axes); /* cut, still terminated */
    size_t cut = strlen(cases[i].label) < 11 ? strlen(cases[i].label) : 11;
    assert_int_equal(strlen(label), cut);
    assert_memory_equal(label, cases[i].label, cut);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
}

/* The escaping helpers on their own: formulas quoted with a leading "'",
 * numbers (negative ones too) left as they are; markdown text that cannot
 * leave its cell. */
static void test_escape_helpers(void **state) {
  (void)state;
  static const struct {
    const char *in, *out;
  } csv[] = {
      {"=1+1", "\"'=1+1\""},
      {"@SUM(A1)", "\"'@SUM(A1)\""},
      {"-2+3", "\"'-2+3\""},
      {"+cmd", "\"'+cmd\""},
      {"-", "\"'-\""},
      {"\tx", "\"'\tx\""},
      {"\rx", "\"'\rx\""},
      {"=a,\"b\"", "\"'=a,\"\"b\"\"\""},
      {"-1.5", "-1.5"},
      {"+3", "+3"},
      {"-2.50e-03", "-2.50e-03"},
      {"1e-05", "1e-05"},
      {"-.5", "-.5"},
      {"a=1", "a=1"},
      {"-1.5x", "\"'-1.5x\""},
      {"-1e", "\"'-1e\""},
  };
  for (size_t i = 0; i < sizeof csv / sizeof csv[0]; i++) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    tp_csv_field(out, csv[i].in, 1);
    fclose(out);
    if (strcmp(buf, csv[i].out) != 0)
      fail_msg("csv %s -> %s, expected %s", csv[i].in, buf, csv[i].out);
    free(buf);
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  tp_csv_num(out, -1.5, 3);
  tp_md_text(out, "a|b\nc<d>&`e`[f]\\&amp;\x1b[31m\xc2\x9b\xff");
  tp_md_code(out, "x\ny>z");
  tp_md_code(out, "x\ny<z>");
  fclose(out);
  /* backslashes, never entities (a terminal shows an entity as it is); a lone '>' and an '&'
   * that starts no entity stay; ESC, a C1 control and an ill-formed byte are U+FFFD; a code
   * span that would hold a '<' is written as text */
  assert_string_equal(buf, ",-1.500a\\|b c\\<d>&\\`e\\`\\[f\\]\\\\\\&amp;\xef\xbf\xbd\\[31m"
                           "\xef\xbf\xbd\xef\xbf\xbd`x y>z`x y\\<z>");
  free(buf);
}

/* Pipes not preceded by an odd number of backslashes: the cell borders. */
static int cell_borders(const char *line, size_t len) {
  int n = 0;
  for (size_t i = 0; i < len; i++) {
    if (line[i] != '|') continue;
    size_t slashes = 0;
    while (slashes < i && line[i - 1 - slashes] == '\\') slashes++;
    n += slashes % 2 == 0;
  }
  return n;
}

/* No table line has more or fewer cells than the header, no heading or
 * list item comes from stored text, no raw tag. */
static void expect_contained_markdown(const char *md, int table_lines, int list_lines) {
  assert_null(raw_tag(md, "<script"));
  assert_null(raw_tag(md, "<br"));
  assert_non_null(strstr(md, "\\<script>"));
  int tables = 0, lists = 0, borders = -1;
  for (const char *line = md; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (len >= 2 && !strncmp(line, "##", 2) && memmem(line, len, "Owned", 5))
      fail_msg("injected heading");
    if (len >= 1 && line[0] == '|') {
      int n = cell_borders(line, len);
      if (borders >= 0 && n != borders) fail_msg("ragged table line: %.*s", (int)len, line);
      borders = n;
      tables++;
    } else {
      borders = -1; /* the next table may have other columns */
    }
    if (len >= 9 && !strncmp(line, "- config ", 9)) lists++;
    line = end ? end + 1 : line + len;
  }
  assert_int_equal(tables, table_lines);
  assert_int_equal(lists, list_lines);
}

/* Every CSV field that starts like a formula is a plain number. */
static void expect_no_formulas(const char *csv, int records) {
  const char *p = csv;
  int n = 0;
  while (*p) {
    char field[512];
    const char *start = p;
    int fields = csv_record(&p, 0, field, sizeof field);
    for (int i = 0; i < fields; i++) {
      const char *q = start;
      csv_record(&q, i, field, sizeof field);
      if (tp_csv_is_formula(field)) fail_msg("field %d of record %d is a formula: %s", i, n, field);
    }
    n++;
  }
  assert_int_equal(n, records);
}

static char *text_of(tp_store *store, const tp_history_query *history, tp_report_format fmt) {
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  assert_non_null(out);
  tp_rc rc = history ? tp_report_history(store, history, fmt, out)
                     : tp_report_throughput(store, NULL, fmt, out);
  fclose(out);
  if (rc != TP_OK) fail_msg("%s", tp_last_error());
  return buf;
}

/* Host, GPU, driver, command line, model, layer, projection and reason
 * hold what an attacker would store; no output format lets it out. */
static void test_injection(void **state) {
  fixture *f = *state;
  char db[600];
  snprintf(db, sizeof db, "%s/hostile.db", f->dir);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(db, 1, &store), TP_OK);
  tp_run_info info = {.commit = "=HYPERLINK(\"http://x\")",
                      .host = "=cmd|' /C calc'!A0",
                      .gpu_name = "<script>alert(1)</script>",
                      .gpu_count = 2,
                      .driver_version = "550\n## Owned driver",
                      .command_line = "tpbench ops\n| a | b |",
                      .command = "ops"};
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &run), TP_OK);
  tp_config_axes a = case_axes("=1+1", "@SUM(A1)", "-2+3", 8192, "bf16");
  put(store, run, a, "op", "stock", NULL, 0, 2000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, a, "op", "dist_gemm", "ce", 2, 0, TP_STATUS_REJECTED, HOSTILE_REASON, NULL, 0,
      NAN);
  put(store, run, a, "gemm", "cublaslt", NULL, 0, 0, TP_STATUS_FAILED, "+" HOSTILE_REASON, NULL, 0,
      NAN);
  assert_int_equal(tp_store_finish_run(store, run), TP_OK);

  char *md = text_of(store, NULL, TP_FMT_MARKDOWN);
  /* the table (head, rule, one row), then the per-model summary (the same) */
  expect_contained_markdown(md, 2 * (2 + 1), 2);
  free(md);
  char *csv = text_of(store, NULL, TP_FMT_CSV);
  expect_no_formulas(csv, 1 + 1);
  assert_non_null(strstr(csv, ",\"'=1+1\",\"'@SUM(A1)\",\"'-2+3\","));
  free(csv);
  char *json = text_of(store, NULL, TP_FMT_JSON);
  json_error_t err;
  json_t *root = json_loads(json, 0, &err);
  if (!root) fail_msg("invalid JSON: %s", err.text);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  assert_string_equal(json_string_value(json_object_get(row, "reason")), HOSTILE_REASON);
  json_decref(root);
  free(json);

  /* history of the rejected configuration (id 2): title, cells, CSV */
  tp_history_query q = {.config_id = 2};
  md = text_of(store, &q, TP_FMT_MARKDOWN);
  expect_contained_markdown(md, 2 + 1, 0);
  free(md);
  csv = text_of(store, &q, TP_FMT_CSV);
  expect_no_formulas(csv, 1 + 1);
  free(csv);
  tp_store_close(store);
}

/* The sample database holds a link probe of the same host: its op rows get a
 * stricter bound, max(GEMM alone, bytes at the probe's copy-engine peak),
 * which is never below the GEMM alone. */
static void test_strict_bound_from_link_probe(void **state) {
  (void)state;
  const char *sample = TP_TEST_DATA_DIR "/../../examples/tpbench-h200-sample.db";
  if (access(sample, R_OK) != 0) skip();
  char dir[] = "/tmp/tp_report_strict_XXXXXX", path[256];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/sample.db", dir);
  FILE *in = fopen(sample, "rb"), *out = fopen(path, "wb");
  assert_non_null(in);
  assert_non_null(out);
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
    assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  assert_int_equal(fclose(out), 0);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 0, &store), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_report_filter filter = {0};
  filter.run_id = 2;
  assert_int_equal(tp_report_throughput(store, &filter, TP_FMT_JSON, mem), TP_OK);
  fclose(mem);
  tp_store_close(store);
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  assert_non_null(root);
  json_t *rows = json_object_get(root, "rows");
  int strict = 0;
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    json_t *sb = json_object_get(row, "strict_bound_ms");
    if (!json_is_real(sb)) continue;
    strict++;
    assert_true(json_real_value(sb) + 1e-9 >= json_real_value(json_object_get(row, "gemm_ms")));
  }
  assert_true(strict >= 20);
  assert_true(
      json_is_real(json_object_get(json_object_get(root, "summary"), "median_dist_over_strict")));
  json_decref(root);
  free(text);
  const char *suffixes[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char f[300];
    snprintf(f, sizeof f, "%s%s", path, suffixes[i]);
    (void)unlink(f);
  }
  assert_int_equal(rmdir(dir), 0);
}

/* ---- columns, ids and keys, toy models -------------------------------------- */

static char *report_text(const fixture *f, const tp_report_filter *filter, tp_report_format fmt) {
  return report_ok(f, filter, fmt);
}

/* f's dir/name into buf. */
static const char *fx_path_of(const fixture *f, const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", f->dir, name);
  return buf;
}

/* The stock configuration's own columns, named on request (the bf16-vs-fp8
 * table at TP 1, where only stock runs): tokens/s, peak memory and workspace
 * apart, and its worst check error (empty: the bf16 reference has none). */
static void test_stock_columns(void **state) {
  fixture *f = *state;
  tp_report_filter filter = {
      .columns = "stock_tokens_per_s,stock_peak_mib,dist_peak_mib,stock_workspace_mib,"
                 "stock_rel_err"};
  char *csv = report_text(f, &filter, TP_FMT_CSV);
  const char *want = "stock_tokens_per_s,stock_peak_mib,dist_peak_mib,stock_workspace_mib,"
                     "stock_rel_err\r\n4096000,4096.0,4096.0,48.00,\r\n";
  assert_memory_equal(csv, want, strlen(want));
  /* a row whose dist_gemm did not run has no dist peak */
  assert_non_null(strstr(csv, "\r\n2730667,4096.0,,48.00,\r\n"));
  free(csv);
}

/* What stock loses beyond GEMM alone + collective alone, and dist_gemm over
 * its GEMM alone: the first row's figures from its own columns. */
static void test_unaccounted_columns(void **state) {
  fixture *f = *state;
  tp_report_filter filter = {.columns = "stock_ms,gemm_ms,comm_ms,dist_ms,stock_unaccounted_ms,"
                                        "stock_unaccounted_of_comm,dist_over_gemm"};
  json_t *root = report_json(f, &filter);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  double stock = jnum(row, "stock_ms"), gemm = jnum(row, "gemm_ms"), comm = jnum(row, "comm_ms");
  double dist = jnum(row, "dist_ms");
  assert_true(gemm > 0 && comm > 0 && dist > 0);
  assert_close(jnum(row, "stock_unaccounted_ms"), stock - gemm - comm);
  assert_close(jnum(row, "stock_unaccounted_of_comm"), (stock - gemm - comm) / comm);
  assert_close(jnum(row, "dist_over_gemm"), dist / gemm);
  json_decref(root);
}

/* --columns picks the same columns in every format; all is every one; an
 * unknown name is a usage error that lists the valid ones. CSV keeps every
 * column by default. */
static void test_columns(void **state) {
  fixture *f = *state;
  tp_report_filter filter = {.columns = "config_id,short_key,speedup"};
  char *csv = report_text(f, &filter, TP_FMT_CSV);
  assert_memory_equal(csv, "config_id,short_key,speedup\r\n4,", 31);
  free(csv);
  json_t *root = report_json(f, &filter);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  assert_int_equal(json_object_size(row), 3);
  assert_close(jnum(row, "speedup"), 1.25);
  json_decref(root);
  char *md = report_text(f, &filter, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "| id | key | speedup (95% CI) |\n|---:|---|---:|\n| 4 | "));
  free(md);

  filter.columns = "all";
  md = report_text(f, &filter, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "| GEMM ms | comm ms | bound ms |"));
  assert_non_null(strstr(md, "| configuration | op | shape | options |"));
  free(md);

  /* the default CSV and JSON are complete: the wide columns and the ids */
  csv = report_text(f, NULL, TP_FMT_CSV);
  const char *names[] = {"gemm_ms",        "workspace_mib",      "config_id",          "short_key",
                         "dist_config_id", "dist_rank_skew_pct", "dist_host_stall_pct"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) (void)csv_column(csv, names[i]);
  free(csv);

  filter.columns = "speedup,nope";
  char *text = NULL;
  assert_int_equal(run_report(f, &filter, TP_FMT_CSV, &text), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "unknown column \"nope\""));
  assert_non_null(strstr(tp_last_error(), "short_key"));
  assert_string_equal(text, "");
  free(text);

  /* a column twice, or all in a list, is refused with what is wrong (before,
   * CSV repeated the header, JSON kept one key; "all" read as unknown) */
  filter.columns = "speedup,config_id,speedup";
  assert_int_equal(run_report(f, &filter, TP_FMT_CSV, &text), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "column \"speedup\" is listed twice"));
  free(text);
  filter.columns = "model,all";
  assert_int_equal(run_report(f, &filter, TP_FMT_JSON, &text), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "all stands alone"));
  free(text);
}

/* Every row carries its configuration's id and short key, the first ten hex
 * digits of the SHA-256 of its canonical key, in every format. */
static void test_ids_and_short_keys(void **state) {
  fixture *f = *state;
  char known[TP_SHORT_KEY_LEN + 1];
  tp_short_key("abc", known, sizeof known); /* FIPS 180-2's example: ba7816bf... */
  assert_string_equal(known, "ba7816bf8f");
  json_t *root = report_json(f, NULL);
  json_t *rows = json_object_get(root, "rows");
  char *csv = report_text(f, NULL, TP_FMT_CSV);
  char *md = report_text(f, NULL, TP_FMT_MARKDOWN);
  int key_col = csv_column(csv, "short_key");
  const char *p = csv;
  char field[128];
  csv_record(&p, 0, field, sizeof field); /* the header */
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    char key[TP_SHORT_KEY_LEN + 1];
    tp_short_key(json_string_value(json_object_get(row, "config_key")), key, sizeof key);
    assert_string_equal(json_string_value(json_object_get(row, "short_key")), key);
    assert_true(json_integer_value(json_object_get(row, "config_id")) > 0);
    const char *start = p;
    csv_record(&p, key_col, field, sizeof field);
    (void)start;
    assert_string_equal(field, key);
    char cell[64];
    snprintf(cell, sizeof cell, "| %lld | %s |",
             (long long)json_integer_value(json_object_get(row, "config_id")), key);
    assert_non_null(strstr(md, cell));
  }
  /* rejected configurations too */
  json_t *first = json_array_get(json_object_get(root, "rejected"), 0);
  char key[TP_SHORT_KEY_LEN + 1];
  tp_short_key(json_string_value(json_object_get(first, "config_key")), key, sizeof key);
  assert_string_equal(json_string_value(json_object_get(first, "short_key")), key);
  free(md);
  free(csv);
  json_decref(root);
}

/* A unique prefix of a short key finds its configuration key; too short,
 * unknown or shared prefixes are usage errors. */
static void test_key_prefix_resolve(void **state) {
  fixture *f = *state;
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(f->db, &store), TP_OK);
  json_t *root = report_json(f, NULL);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  const char *full = json_string_value(json_object_get(row, "config_key"));
  const char *short_key = json_string_value(json_object_get(row, "short_key"));
  char *key = NULL;
  assert_int_equal(tp_config_key_resolve(store, full, &key), TP_OK); /* a whole key */
  assert_string_equal(key, full);
  free(key);
  assert_int_equal(tp_config_key_resolve(store, short_key, &key), TP_OK);
  assert_string_equal(key, full);
  free(key);
  char upper[16];
  snprintf(upper, sizeof upper, "%.6s", short_key);
  for (char *c = upper; *c; c++) *c = (char)toupper((unsigned char)*c);
  assert_int_equal(tp_config_key_resolve(store, upper, &key), TP_OK); /* any case */
  assert_string_equal(key, full);
  free(key);
  assert_int_equal(tp_config_key_resolve(store, "abc", &key), TP_EUSAGE); /* too short */
  assert_null(key);
  assert_int_equal(tp_config_key_resolve(store, "kind=op;nothing", &key), TP_EUSAGE);
  /* a prefix no key has: one hex digit after the first's */
  char none[TP_KEY_DIGEST_HEX + 1];
  snprintf(none, sizeof none, "%s", short_key);
  none[TP_SHORT_KEY_LEN - 1] = none[TP_SHORT_KEY_LEN - 1] == '0' ? '1' : '0';
  if (tp_config_key_resolve(store, none, &key) == TP_OK) free(key); /* (could exist, rarely) */
  else assert_non_null(strstr(tp_last_error(), "no configuration's short key starts with"));
  json_decref(root);
  tp_store_close(store);
}

/* Two keys whose digests share their first four hex digits, among the
 * sample database's: the prefix is ambiguous and says so. */
static void test_key_prefix_ambiguous(void **state) {
  (void)state;
  const char *sample = TP_TEST_DATA_DIR "/../../examples/tpbench-h200-sample.db";
  if (access(sample, R_OK) != 0) skip();
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(sample, &store), TP_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(tp_store_db(store), "SELECT DISTINCT config_key FROM configs",
                                      -1, &st, NULL),
                   SQLITE_OK);
  static char seen[65536];
  memset(seen, 0, sizeof seen);
  char shared[8] = "";
  while (!shared[0] && sqlite3_step(st) == SQLITE_ROW) {
    char key[TP_SHORT_KEY_LEN + 1];
    tp_short_key((const char *)sqlite3_column_text(st, 0), key, sizeof key);
    unsigned prefix = (unsigned)strtoul((char[]){key[0], key[1], key[2], key[3], 0}, NULL, 16);
    if (seen[prefix]) snprintf(shared, sizeof shared, "%.4s", key);
    seen[prefix] = 1;
  }
  sqlite3_finalize(st);
  if (!shared[0]) {
    tp_store_close(store);
    skip(); /* no two keys of the sample share four digits */
  }
  char *key = NULL;
  assert_int_equal(tp_config_key_resolve(store, shared, &key), TP_EUSAGE);
  assert_null(key);
  assert_non_null(strstr(tp_last_error(), "is ambiguous"));
  tp_store_close(store);
}

/* Over every configuration of the sample database (448 compare rows, the
 * dashboard's pickers, the trace titles are all among them), distinct keys
 * get distinct labels: no two labels are the same. */
static void test_sample_labels_unique(void **state) {
  (void)state;
  const char *sample = TP_TEST_DATA_DIR "/../../examples/tpbench-h200-sample.db";
  if (access(sample, R_OK) != 0) skip();
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(sample, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(
          db, "SELECT c.config_key, " TP_LABEL_COLUMNS " FROM configs c GROUP BY c.config_key", -1,
          &st, NULL) != SQLITE_OK)
    fail_msg("%s", sqlite3_errmsg(db));
  size_t n = 0, cap = 0;
  char(*labels)[256] = NULL;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? 2 * cap : 256;
      labels = realloc(labels, cap * sizeof *labels);
      assert_non_null(labels);
    }
    tp_config_axes axes;
    tp_axes_from_row(st, 1, &axes);
    tp_config_label(labels[n++], sizeof labels[0], &axes);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (n < 400 || !labels) {
    fail_msg("%zu labels read from the sample, expected 400 or more", n);
    return;
  }
  qsort(labels, n, sizeof *labels, (int (*)(const void *, const void *))strcmp);
  int duplicates = 0;
  for (size_t i = 1; i < n; i++)
    if (!strcmp(labels[i], labels[i - 1])) {
      fprintf(stderr, "shared label: %s\n", labels[i]);
      duplicates++;
    }
  free(labels);
  assert_int_equal(duplicates, 0);
}

/* Toy models stay out of the headline and are listed apart; each model has
 * its own summary. */
static void test_toy_models_apart(void **state) {
  fixture *f = *state;
  const char *toys[] = {"llama3-70b"};
  tp_report_filter filter = {.toy_models = toys, .n_toy_models = 1};
  json_t *root = report_json(f, &filter);
  json_t *sum = json_object_get(root, "summary");
  /* the headline over llama3-8b alone: A-ce 1.25, A-sm 10/9, B 1.25 */
  assert_int_equal(json_integer_value(json_object_get(sum, "rows")), 3);
  assert_close(jnum(sum, "geomean_speedup"), pow(1.25 * (2000.0 / 1800) * 1.25, 1.0 / 3));
  assert_true(json_is_false(json_object_get(sum, "toy_only")));
  json_t *models = json_object_get(sum, "models");
  assert_int_equal(json_array_size(models), 2);
  json_t *toy = json_array_get(models, 1);
  assert_string_equal(json_string_value(json_object_get(toy, "model")), "llama3-70b");
  assert_true(json_is_true(json_object_get(toy, "toy")));
  assert_close(jnum(toy, "geomean_speedup"), 1.25);
  json_decref(root);
  char *md = report_text(f, &filter, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "(over 3 rows with stock and dist_gemm results)"));
  assert_non_null(strstr(md, "| llama3-70b (toy) | 1 | 1.250 |"));
  assert_non_null(strstr(md, "Toy models, kept out of the headline: llama3-70b."));
  free(md);
  /* a run of toys alone is summarised over them, and says so */
  const char *all[] = {"llama3-8b", "llama3-70b"};
  filter = (tp_report_filter){.toy_models = all, .n_toy_models = 2};
  md = report_text(f, &filter, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "**Summary** (toy models only: over 4 rows"));
  free(md);
}

/* ---- the faster stock: plain or on NCCL symmetric windows ----------------------------- */

#define WINDOW_REFUSAL                                                                             \
  "nccl-window: no NCCL symmetric windows on this communicator of 1 rank(s): ncclDevCommCreate "   \
  "failed: invalid usage: Communicator does not support symmetric memory!"

/* window.db: per case stock in both variants, the faster differing:
 *   W1 qkv: stock 2000, stock window 1600, dist 1500, GEMM 1000, comm 1400, comm window 1100
 *   W2 wo:  stock 1000, stock window 1200, dist 800,  GEMM 700,  comm 500,  comm window 900
 *   W3 w2:  stock 900, stock window rejected (NCCL's refusal), dist 600
 *   W4 qkv at 4096 tokens (stock only): stock 900, stock window 850 */
static void build_window_db(const fixture *f, fixture *w) {
  *w = *f;
  snprintf(w->db, sizeof w->db, "%s/window.db", f->dir);
  tp_store *store = NULL;
  if (tp_store_open(w->db, 1, &store) != TP_OK) fail_msg("%s", tp_last_error());
  int64_t run = begin(store, COMMIT_2);
  tp_schedule_choice ce = {"ag_linear", "ce", "copy-engine", 2, "auto"};
  tp_config_axes a = case_axes("llama3-8b", "ag_linear", "qkv", 8192, "bf16");
  put(store, run, a, "op", "stock", NULL, 0, 2000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, a, "op", "stock", "nccl-window", 0, 1600, TP_STATUS_OK, NULL, NULL, 0, 0.0);
  put(store, run, a, "op", "dist_gemm", "auto", 0, 1500, TP_STATUS_OK, NULL, &ce, 1, 1e-3);
  put(store, run, a, "gemm", "cublaslt", NULL, 0, 1000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, a, "comm", "nccl", NULL, 0, 1400, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, a, "comm", "nccl", "nccl-window", 0, 1100, TP_STATUS_OK, NULL, NULL, 0, NAN);
  tp_config_axes b = case_axes("llama3-8b", "linear_rs", "wo", 8192, "bf16");
  put(store, run, b, "op", "stock", NULL, 0, 1000, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, b, "op", "stock", "nccl-window", 0, 1200, TP_STATUS_OK, NULL, NULL, 0, 0.0);
  put(store, run, b, "op", "dist_gemm", "auto", 0, 800, TP_STATUS_OK, NULL, &ce, 1, 1e-3);
  put(store, run, b, "gemm", "cublaslt", NULL, 0, 700, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, b, "comm", "nccl", NULL, 0, 500, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, b, "comm", "nccl", "nccl-window", 0, 900, TP_STATUS_OK, NULL, NULL, 0, NAN);
  tp_config_axes c = case_axes("llama3-8b", "linear_rs", "w2", 8192, "bf16");
  put(store, run, c, "op", "stock", NULL, 0, 900, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, c, "op", "stock", "nccl-window", 0, 0, TP_STATUS_REJECTED, WINDOW_REFUSAL, NULL,
      0, NAN);
  put(store, run, c, "op", "dist_gemm", "auto", 0, 600, TP_STATUS_OK, NULL, &ce, 1, 1e-3);
  tp_config_axes d = case_axes("llama3-8b", "ag_linear", "qkv", 4096, "bf16");
  put(store, run, d, "op", "stock", NULL, 0, 900, TP_STATUS_OK, NULL, NULL, 0, NAN);
  put(store, run, d, "op", "stock", "nccl-window", 0, 850, TP_STATUS_OK, NULL, NULL, 0, 0.0);
  assert_int_equal(tp_store_finish_run(store, run), TP_OK);
  tp_store_close(store);
}

/* The speedup divides the faster stock, the bound takes the faster collective
 * alone, both per row; the two stock times are shown; a rejected window
 * variant leaves plain stock as the faster. Each figure below is one that
 * the slower stock (or collective) would make different. */
static void test_faster_stock_per_row(void **state) {
  fixture w;
  build_window_db(*state, &w);
  json_t *root = report_json(&w, NULL);
  json_t *rows = json_object_get(root, "rows");
  assert_int_equal(json_array_size(rows), 4);
  json_t *w1 = json_array_get(rows, 0), *w2 = json_array_get(rows, 1);
  json_t *w3 = json_array_get(rows, 2), *w4 = json_array_get(rows, 3);
  /* W1: the window variant is faster, stock and collective */
  assert_close(jnum(w1, "stock_ms"), 2.0);
  assert_close(jnum(w1, "stock_window_ms"), 1.6);
  assert_close(jnum(w1, "best_stock_ms"), 1.6);
  assert_string_equal(json_string_value(json_object_get(w1, "best_stock")), "window");
  assert_close(jnum(w1, "speedup"), 1600.0 / 1500.0); /* not 2000 / 1500 */
  assert_close(jnum(w1, "comm_ms"), 1.4);
  assert_close(jnum(w1, "comm_window_ms"), 1.1);
  assert_string_equal(json_string_value(json_object_get(w1, "best_comm")), "window");
  assert_close(jnum(w1, "bound_ms"), 1.1); /* max(1.0, 1.1), not max(1.0, 1.4) */
  assert_close(jnum(w1, "dist_over_bound"), 1500.0 / 1100.0);
  /* the intervals are of the same ratios: against 1.6 ms, and the window collective */
  assert_true(jnum(w1, "speedup_lo") <= 1600.0 / 1500.0 && jnum(w1, "speedup_hi") < 1.2);
  assert_true(jnum(w1, "dist_over_bound_lo") > 1.25);
  /* W2: plain is faster, stock and collective */
  assert_close(jnum(w2, "stock_window_ms"), 1.2);
  assert_string_equal(json_string_value(json_object_get(w2, "best_stock")), "plain");
  assert_close(jnum(w2, "speedup"), 1000.0 / 800.0); /* not 1200 / 800 */
  assert_string_equal(json_string_value(json_object_get(w2, "best_comm")), "plain");
  assert_close(jnum(w2, "bound_ms"), 0.7); /* max(0.7, 0.5), not max(0.7, 0.9) */
  /* W3: the window stock was refused: plain is the one, the refusal listed */
  assert_true(json_is_null(json_object_get(w3, "stock_window_ms")));
  assert_string_equal(json_string_value(json_object_get(w3, "best_stock")), "plain");
  assert_close(jnum(w3, "speedup"), 1.5);
  assert_true(json_is_number(json_object_get(w3, "stock_window_config_id")));
  /* W4: stock alone (TP 1 style): both variants shown, no speedup */
  assert_close(jnum(w4, "stock_ms"), 0.9);
  assert_close(jnum(w4, "stock_window_ms"), 0.85);
  assert_string_equal(json_string_value(json_object_get(w4, "best_stock")), "window");
  assert_true(json_is_null(json_object_get(w4, "speedup")));
  /* the headline: over W1, W2, W3 with their own faster stocks */
  json_t *sum = json_object_get(root, "summary");
  assert_int_equal(json_integer_value(json_object_get(sum, "rows")), 3);
  assert_close(jnum(sum, "geomean_speedup"), pow((1600.0 / 1500) * 1.25 * 1.5, 1.0 / 3));
  int refusal_listed = 0;
  json_t *rejected = json_object_get(root, "rejected");
  for (size_t i = 0; i < json_array_size(rejected); i++) {
    const char *why = json_string_value(json_object_get(json_array_get(rejected, i), "reason"));
    refusal_listed += why && strstr(why, "does not support symmetric memory") != NULL;
  }
  assert_int_equal(refusal_listed, 1);
  json_decref(root);
  /* what stock loses: the faster stock against its own variant's collective alone */
  tp_report_filter lost = {.columns = "best_stock,stock_unaccounted_ms,stock_unaccounted_of_comm"};
  root = report_json(&w, &lost);
  w1 = json_array_get(json_object_get(root, "rows"), 0);
  w2 = json_array_get(json_object_get(root, "rows"), 1);
  assert_close(jnum(w1, "stock_unaccounted_ms"), 1.6 - 1.0 - 1.1);
  assert_close(jnum(w1, "stock_unaccounted_of_comm"), (1.6 - 1.0 - 1.1) / 1.1);
  assert_close(jnum(w2, "stock_unaccounted_ms"), 1.0 - 0.7 - 0.5);
  json_decref(root);
  /* markdown shows both stock times and which one the speedup used, and says so */
  char *md = report_text(&w, NULL, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "| stock ms | stock window ms | best stock |"));
  assert_non_null(strstr(md, "against the faster of the two per row"));
  free(md);
  char path[600];
  const char *names[] = {"window.db", "window.db-wal", "window.db-shm"};
  for (size_t i = 0; i < 3; i++) unlink(fx_path_of(&w, names[i], path, sizeof path));
}

/* A faster variant whose numerics failed (it computed something else than
 * plain stock) or whose trace contradicts its schedule is no baseline while
 * the other variant passed, as compare's faster reference refuses it: W1's
 * window stock (1600 against plain 2000) failed its numerics, W2's plain
 * collective alone (500 against 900) its evidence; W4's window stock stays
 * the faster (nothing failed there). */
static void test_faster_stock_passed_its_checks(void **state) {
  fixture w;
  build_window_db(*state, &w);
  tp_store *store = NULL;
  if (tp_store_open(w.db, 1, &store) != TP_OK) fail_msg("%s", tp_last_error());
  sqlite3 *db = tp_store_db(store);
  assert_int_equal(
      sqlite3_exec(db,
                   "UPDATE results SET numerics = 'failed', numerics_reason = 'y: 12 elements "
                   "differ from plain stock' WHERE config_id = (SELECT id FROM configs WHERE "
                   "proj = 'qkv' AND tokens = 8192 AND kind = 'op' AND schedule = 'nccl-window');"
                   "INSERT INTO traces (config_id, traced_iters, evidence_ok, evidence_message, "
                   "evidence) SELECT id, 5, 0, 'no NCCL kernel in the collective''s range', "
                   "'failed' FROM configs WHERE proj = 'wo' AND kind = 'comm' AND schedule IS NULL",
                   NULL, NULL, NULL),
      SQLITE_OK);
  tp_store_close(store);
  json_t *root = report_json(&w, NULL);
  json_t *rows = json_object_get(root, "rows");
  json_t *w1 = json_array_get(rows, 0), *w2 = json_array_get(rows, 1),
         *w4 = json_array_get(rows, 3);
  assert_string_equal(json_string_value(json_object_get(w1, "best_stock")), "plain");
  assert_close(jnum(w1, "best_stock_ms"), 2.0);
  assert_close(jnum(w1, "speedup"), 2000.0 / 1500.0); /* not 1600 / 1500 */
  assert_string_equal(json_string_value(json_object_get(w1, "best_comm")), "window");
  assert_string_equal(json_string_value(json_object_get(w2, "best_comm")), "window");
  assert_close(jnum(w2, "bound_ms"), 0.9); /* max(0.7, 0.9): the plain collective failed */
  assert_string_equal(json_string_value(json_object_get(w2, "best_stock")), "plain");
  assert_string_equal(json_string_value(json_object_get(w4, "best_stock")), "window");
  json_decref(root);
  char path[600];
  const char *names[] = {"window.db", "window.db-wal", "window.db-shm"};
  for (size_t i = 0; i < 3; i++) unlink(fx_path_of(&w, names[i], path, sizeof path));
}

/* A database without window rows reads as before: no window columns in the
 * compact table, no word of them, the speedup against plain stock. */
static void test_old_runs_read_as_before(void **state) {
  fixture *f = *state;
  char *md = report_text(f, NULL, TP_FMT_MARKDOWN);
  assert_null(strstr(md, "stock window ms"));
  assert_null(strstr(md, "best stock"));
  assert_null(strstr(md, "faster of the two"));
  free(md);
  json_t *root = report_json(f, NULL);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  assert_true(json_is_null(json_object_get(row, "stock_window_ms")));
  assert_string_equal(json_string_value(json_object_get(row, "best_stock")), "plain");
  assert_close(jnum(row, "best_stock_ms"), jnum(row, "stock_ms"));
  assert_close(jnum(row, "speedup"), 2000.0 / 1600.0);
  json_decref(root);
}

/* A link probe's run: per transfer kind, nccl-tests' size, count, time,
 * algbw and busbw (the sample's run 4: 2 ranks, 8 MiB per rank). */
static void test_link_run_table(void **state) {
  (void)state;
  const char *sample = TP_TEST_DATA_DIR "/../../examples/tpbench-h200-sample.db";
  if (access(sample, R_OK) != 0) skip();
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(sample, &store), TP_OK);
  tp_report_filter filter = {.run_id = 4};
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_throughput(store, &filter, TP_FMT_JSON, mem), TP_OK);
  fclose(mem);
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  free(text);
  assert_non_null(root);
  json_t *points = json_object_get(root, "link");
  assert_int_equal(json_array_size(points), 16);
  int kinds_seen = 0;
  for (size_t i = 0; i < json_array_size(points); i++) {
    json_t *p = json_array_get(points, i);
    const char *kind = json_string_value(json_object_get(p, "kind"));
    double size = jnum(p, "size_bytes"), t = jnum(p, "time_us");
    double algbw = jnum(p, "algbw_gbps"), busbw = jnum(p, "busbw_gbps");
    assert_close(algbw, size / t / 1e3);
    assert_close(jnum(p, "count"), size / 2); /* bf16 */
    if (!strncmp(kind, "nccl_", 5)) {
      assert_close(busbw, algbw / 2);                /* (2 - 1) / 2 */
      assert_true(fmod(size, 2.0 * (1 << 20)) == 0); /* the two ranks' shares */
    } else {
      assert_close(busbw, algbw);
    }
    if (i == 0 || strcmp(kind, json_string_value(
                                   json_object_get(json_array_get(points, i - 1), "kind"))) != 0)
      kinds_seen++;
  }
  assert_int_equal(kinds_seen, 4);
  json_decref(root);
  mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_throughput(store, &filter, TP_FMT_MARKDOWN, mem), TP_OK);
  fclose(mem);
  assert_non_null(strstr(text, "## tpbench link probe: run 4"));
  assert_non_null(strstr(text, "| size (B) | count (elements) | type | time (us) | algbw (GB/s) | "
                               "busbw (GB/s) | id | key |"));
  /* cmd_link.c's own table printed 306 GB/s for this point */
  assert_non_null(strstr(text, "| 8388608 | 4194304 | bf16 | 27.46 | 305.53 | 305.53 | 433 |"));
  assert_non_null(strstr(text, "### nccl_all_gather"));
  free(text);
  filter.columns = "speedup";
  mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_throughput(store, &filter, TP_FMT_CSV, mem), TP_EUSAGE);
  fclose(mem);
  free(text);
  /* columns all: every column the probe's table has, as without it (it was refused) */
  for (int k = TP_FMT_MARKDOWN; k <= TP_FMT_JSON; k++) {
    const tp_report_format fmt = (tp_report_format)k;
    char *plain = NULL, *all = NULL;
    filter.columns = NULL;
    mem = open_memstream(&plain, &len);
    assert_int_equal(tp_report_throughput(store, &filter, fmt, mem), TP_OK);
    fclose(mem);
    filter.columns = "all";
    mem = open_memstream(&all, &len);
    assert_int_equal(tp_report_throughput(store, &filter, fmt, mem), TP_OK);
    fclose(mem);
    assert_string_equal(all, plain);
    free(plain);
    free(all);
  }
  tp_store_close(store);
}

/* ---- the list of runs --------------------------------------------------------- */

static char *runs_text(const char *db, tp_report_format fmt) {
  tp_store *store = NULL;
  if (tp_store_open_readonly(db, &store) != TP_OK) fail_msg("%s", tp_last_error());
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_runs(store, fmt, mem), TP_OK);
  fclose(mem);
  tp_store_close(store);
  return text;
}

static void test_runs(void **state) {
  fixture *f = *state;
  char *md = runs_text(f->db, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md,
                         "| run | commit | started (UTC) | host | GPUs | command | kinds | ok | "
                         "failed | rejected | status |"));
  /* run 2: 14 configurations ok, the GEMM alone failed, a dist_gemm rejected */
  assert_non_null(strstr(md, "| 1 | aaaa111122 (dirty) | "));
  assert_non_null(
      strstr(md, "| h200-node-3 | NVIDIA H200 × 8 | ops | op | 2 | 0 | 0 | finished |"));
  assert_non_null(strstr(md, "| ops | op,gemm,comm | 14 | 1 | 1 | finished |"));
  assert_true(strstr(md, "| 1 | aaaa") < strstr(md, "| 2 | bbbb")); /* oldest first */
  free(md);
  char *csv = runs_text(f->db, TP_FMT_CSV);
  assert_memory_equal(csv,
                      "run_id,uuid,commit,dirty,started_at,finished_at,host,gpu_name,"
                      "gpu_count,command,kinds,ok,failed,rejected,status\r\n1,",
                      97);
  assert_non_null(strstr(csv, ",ops,\"op,gemm,comm\",14,1,1,finished\r\n"));
  free(csv);
  json_t *root = NULL;
  char *json = runs_text(f->db, TP_FMT_JSON);
  json_error_t err;
  root = json_loads(json, 0, &err);
  free(json);
  assert_non_null(root);
  json_t *runs = json_object_get(root, "runs");
  assert_int_equal(json_array_size(runs), 2);
  json_t *second = json_array_get(runs, 1);
  assert_int_equal(json_integer_value(json_object_get(second, "id")), 2);
  assert_string_equal(json_string_value(json_object_get(second, "commit")), COMMIT_2);
  assert_int_equal(json_integer_value(json_object_get(second, "ok")), 14);
  assert_int_equal(json_integer_value(json_object_get(second, "failed")), 1);
  assert_int_equal(json_integer_value(json_object_get(second, "rejected")), 1);
  assert_string_equal(json_string_value(json_object_get(second, "status")), "finished");
  json_decref(root);

  /* a run that never finished says so; an empty database lists none */
  char path[600];
  snprintf(path, sizeof path, "%s/empty.db", f->dir);
  unlink(path);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 1, &store), TP_OK);
  tp_store_close(store);
  md = runs_text(path, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "(no runs)"));
  free(md);
  assert_int_equal(tp_store_open(path, 0, &store), TP_OK);
  tp_run_info info = {.commit = "dddd", .command = "run"};
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &run), TP_OK);
  tp_store_close(store);
  md = runs_text(path, TP_FMT_MARKDOWN);
  assert_non_null(strstr(md, "| run | - | 0 | 0 | 0 | not finished |"));
  free(md);
}

/* One predicate names the layers of GEMMs between gaps for report and project: the probe's own
 * spelling only (a whole percent, no sign, letters or leading zero). */
static void test_gemm_gap_layer_names(void **state) {
  (void)state;
  const char *const yes[] = {"gemm_gap_0", "gemm_gap_25", "gemm_gap_1000", "gemm_gap_999999"};
  const char *const no[] = {
      "gemm_gap_",   "gemm_gap_abc",     "gemm_gap_-7", "gemm_gap_00", "gemm_gap_1e1",
      "gemm_gap_5x", "gemm_gap_1000000", "gemm_gaps_5", "ce_push",     NULL};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    if (!tp_link_is_gemm_gap(yes[i])) fail_msg("%s is a gap layer", yes[i]);
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    if (tp_link_is_gemm_gap(no[i])) fail_msg("%s is no gap layer", no[i] ? no[i] : "NULL");
}

/* A number too long for its buffer in fixed notation comes out whole in exponent notation,
 * never as its first digits. */
static void test_fmt_num_never_cuts(void **state) {
  (void)state;
  char buf[64];
  assert_string_equal(tp_fmt_num(buf, sizeof buf, 1.5e300, 4), "1.5e+300");
  assert_string_equal(tp_fmt_num(buf, sizeof buf, -2e70, 1), "-2e+70");
  assert_string_equal(tp_fmt_num(buf, sizeof buf, 0.9413, 4), "0.9413");
  assert_string_equal(tp_fmt_num(buf, sizeof buf, NAN, 4), "");
}

/* A link run's GEMMs between gaps (bench/gpu/link_pacing.h) are GEMMs: a table of their own
 * (shape, gap, time over back to back), never a transfer row with a size and a bandwidth. */
static void test_link_run_gemm_gaps(void **state) {
  const fixture *f = *state;
  char path[600];
  snprintf(path, sizeof path, "%s/gaps.db", f->dir);
  unlink(path);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 1, &store), TP_OK);
  tp_run_info info = {.commit = "eeee", .command = "link", .gpu_name = "NVIDIA H200"};
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &run), TP_OK);
  const struct {
    const char *layer;
    int64_t m, n, k;
    double us;
  } points[] = {{"ce_push", 8388608, 0, 0, 27.5},
                {"gemm_gap_100", 4096, 4096, 4096, 80.0},
                {"gemm_gap_0", 4096, 4096, 4096, 100.0},
                {"gemm_gap_50", 8192, 8192, 8192, 700.0}}; /* no back to back of its own */
  for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
    tp_config_axes a = {.kind = "link",
                        .op_or_layer = points[i].layer,
                        .backend = "x",
                        .tp = 1,
                        .m = points[i].m,
                        .n = points[i].n,
                        .k = points[i].k,
                        .dtype = "bf16",
                        .pass = "fwd"};
    tp_result r = {.n_samples = 1, .median_us = points[i].us};
    r.p10_us = r.p90_us = r.mean_us = r.min_us = r.max_us = points[i].us;
    r.cv = r.tokens_per_s = r.tflops = r.flops = r.bytes_moved = r.max_abs_err = r.rel_err = NAN;
    tp_config_record rec = {.axes = &a, .status = TP_STATUS_OK, .result = &r};
    assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_OK);
  }
  tp_store_close(store);
  assert_int_equal(tp_store_open_readonly(path, &store), TP_OK);
  tp_report_filter filter = {.run_id = run};
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_throughput(store, &filter, TP_FMT_MARKDOWN, mem), TP_OK);
  fclose(mem);
  assert_non_null(strstr(text, "### ce_push"));
  assert_non_null(strstr(text, "### GEMMs between gaps"));
  assert_non_null(strstr(text, "back-to-back time, 1 rank\n")); /* one GPU: "rank" */
  /* back to back first, then the gap: 80 over 100 */
  const char *first = strstr(text, "| 4096×4096×4096 | 0 | 100.00 | 1.000 |");
  const char *second = strstr(text, "| 4096×4096×4096 | 100 | 80.00 | 0.800 |");
  assert_non_null(first);
  assert_non_null(second);
  assert_true(first < second);
  assert_null(strstr(text, "### gemm_gap"));
  /* a shape without its gap-0 point has no ratio: not one over another shape's time */
  assert_non_null(strstr(text, "| 8192×8192×8192 | 50 | 700.00 | - |"));
  /* a transfer ran: its conventions follow (a run of GEMMs alone has none: docs/projection.md) */
  assert_non_null(strstr(text, "\nAs nccl-tests counts them:"));
  free(text);
  /* CSV: a GEMM's shape in columns of its own (the shapes' points of one gap differ only
   * there), empty for a transfer */
  mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_throughput(store, &filter, TP_FMT_CSV, mem), TP_OK);
  fclose(mem);
  assert_non_null(strstr(text, ",config_id,short_key,gemm_m,gemm_n,gemm_k\r\n"));
  assert_non_null(strstr(text, ",8192,8192,8192\r\n"));
  assert_non_null(strstr(text, ",4096,4096,4096\r\n"));
  assert_non_null(strstr(text, "ce_push,1,8388608,"));
  assert_non_null(strstr(strstr(text, "ce_push,1,8388608,"), ",,,\r\n"));
  free(text);
  mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_throughput(store, &filter, TP_FMT_JSON, mem), TP_OK);
  fclose(mem);
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  free(text);
  assert_non_null(root);
  json_t *list = json_object_get(root, "link");
  assert_int_equal(json_array_size(list), 4);
  json_t *gemm = json_array_get(list, 2);
  assert_string_equal(json_string_value(json_object_get(gemm, "kind")), "gemm_gap_100");
  assert_true(json_is_null(json_object_get(gemm, "size_bytes")));
  assert_true(json_is_null(json_object_get(gemm, "busbw_gbps")));
  assert_int_equal(json_integer_value(json_object_get(gemm, "gemm_k")), 4096);
  json_decref(root);
  tp_store_close(store);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_rows_and_speedups),
      cmocka_unit_test(test_json_rejected_case_shows_reason),
      cmocka_unit_test(test_json_summary),
      cmocka_unit_test(test_rank_skew_and_host_stalls_shown),
      cmocka_unit_test(test_markdown),
      cmocka_unit_test(test_csv),
      cmocka_unit_test(test_csv_one_column),
      cmocka_unit_test(test_filters),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_write_failure),
      cmocka_unit_test(test_strict_bound_from_link_probe),
      cmocka_unit_test(test_format_parse),
      cmocka_unit_test(test_escape_helpers),
      cmocka_unit_test(test_config_label),
      cmocka_unit_test(test_injection),
      cmocka_unit_test(test_columns),
      cmocka_unit_test(test_stock_columns),
      cmocka_unit_test(test_unaccounted_columns),
      cmocka_unit_test(test_ids_and_short_keys),
      cmocka_unit_test(test_key_prefix_resolve),
      cmocka_unit_test(test_key_prefix_ambiguous),
      cmocka_unit_test(test_sample_labels_unique),
      cmocka_unit_test(test_toy_models_apart),
      cmocka_unit_test(test_faster_stock_per_row),
      cmocka_unit_test(test_faster_stock_passed_its_checks),
      cmocka_unit_test(test_old_runs_read_as_before),
      cmocka_unit_test(test_link_run_table),
      cmocka_unit_test_setup_teardown(test_link_run_gemm_gaps, make_fixture, remove_fixture),
      cmocka_unit_test(test_gemm_gap_layer_names),
      cmocka_unit_test(test_fmt_num_never_cuts),
      cmocka_unit_test(test_runs),
  };
  return cmocka_run_group_tests_name("report", tests, make_fixture, remove_fixture);
}
