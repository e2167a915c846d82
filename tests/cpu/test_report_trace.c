/*
 * test_report_trace.c — CPU tests of what report/ makes of traces: the
 * throughput table's trace columns (markdown only with a trace, CSV and
 * JSON always), and the Chrome trace export parsed back with jansson —
 * one process per rank named after its GPU, a track per stream for its
 * kernels and one for its copies, NVTX on its own track, complete events in microseconds from the
 * earliest event, categories and args.
 *
 * The database is a copy of the real H200 run (tests/data) with two
 * synthesised traces (fixture_db.h): one that confirms its schedule, one
 * that contradicts it. They are made up, not measured.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>

#include "report/tp_report.h"
#include "report/tp_trace_export.h"
#include "tests/cpu/fixture_db.h"

typedef struct {
  fx_dir dir;
  char db[512];
  int64_t traced, mismatched, untraced;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_report_trace") != 0) return -1;
  fx_path(&f->dir, "trace.db", f->db, sizeof f->db);
  if (fx_copy(FX_REAL_DB, f->db) != 0) return -1;
  tp_store *s = NULL;
  if (tp_store_open(f->db, 0, &s) != TP_OK) return -1;
  /* Configurations 2 and 4: the auto and sm dist_gemm of the first case. */
  f->traced = 2;
  f->mismatched = 4;
  f->untraced = 3;
  if (fx_put_trace(s, f->traced, 4, 1) != TP_OK || fx_put_trace(s, f->mismatched, 2, 0) != TP_OK)
    return -1;
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

/* Runs fn(store, ...) into a string. */
static char *throughput(const fixture *f, tp_report_format fmt) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_throughput(s, NULL, fmt, mem), TP_OK);
  fclose(mem);
  tp_store_close(s);
  return text;
}

/* The markdown table with the given --columns. */
static char *throughput_columns(const fixture *f, const char *columns) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_report_filter filter = {.columns = columns};
  assert_int_equal(tp_report_throughput(s, &filter, TP_FMT_MARKDOWN, mem), TP_OK);
  fclose(mem);
  tp_store_close(s);
  return text;
}

/* ---- trace columns ------------------------------------------------------------ */

static json_t *row_of(json_t *rows, int64_t dist_id) {
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    if (json_integer_value(json_object_get(row, "dist_config_id")) == dist_id) return row;
  }
  fail_msg("no row for configuration %lld", (long long)dist_id);
  return NULL;
}

static void test_trace_columns_json(void **state) {
  fixture *f = *state;
  char *text = throughput(f, TP_FMT_JSON);
  json_t *root = json_loads(text, 0, NULL);
  free(text);
  json_t *rows = json_object_get(root, "rows");
  json_t *row = row_of(rows, f->traced);
  assert_true(json_is_true(json_object_get(row, "traced")));
  assert_true(json_real_value(json_object_get(row, "overlap_pct")) == 75.0);
  assert_true(fabs(json_real_value(json_object_get(row, "exposed_comm_ms")) - 0.010) < 1e-12);
  assert_true(fabs(json_real_value(json_object_get(row, "trace_overhead_pct")) - 10.0) < 1e-9);
  assert_string_equal(json_string_value(json_object_get(row, "evidence")), "ok");
  row = row_of(rows, f->mismatched);
  assert_non_null(strstr(json_string_value(json_object_get(row, "evidence")), "expected 8 peer"));
  row = row_of(rows, f->untraced);
  assert_true(json_is_false(json_object_get(row, "traced")));
  assert_true(json_is_null(json_object_get(row, "overlap_pct")));
  assert_true(json_is_null(json_object_get(row, "evidence")));
  /* The run header carries its identity. */
  assert_string_equal(json_string_value(json_object_get(json_object_get(root, "run"), "uuid")),
                      "v1:1:@vm:2026-11-30T11:56:16Z");
  json_decref(root);
}

static void test_trace_columns_markdown_and_csv(void **state) {
  fixture *f = *state;
  char *md = throughput(f, TP_FMT_MARKDOWN);
  /* the compact table shows overlap; --columns all the other trace columns */
  assert_non_null(strstr(md, "| overlap % | status |"));
  assert_non_null(strstr(md, "| 75.0 | ok |"));
  free(md);
  md = throughput_columns(f, "overlap_pct,sync_ms,exposed_comm_ms,trace_overhead_pct,evidence,"
                             "status");
  assert_non_null(strstr(md, "| overlap % | sync ms | exposed comm ms | trace overhead % | "
                             "evidence | status |"));
  assert_non_null(strstr(md, "| 75.0 | 0.005 | 0.010 | 10.0 | ok | ok |"));
  assert_non_null(
      strstr(md, "| failed: ce: expected 8 peer copies, saw 0 (and 8 SM copy kernels) |"));
  assert_non_null(strstr(md, "Trace columns"));
  /* The run's hardware and windows are printed with the table. */
  assert_non_null(strstr(md, "- **host** vm: NVIDIA H200 × 2, driver for"));
  assert_non_null(strstr(md, "- **iterations** 5 warm-up, 30 measured"));
  free(md);
  char *csv = throughput(f, TP_FMT_CSV);
  const char *eol = strstr(csv, "\r\n");
  assert_non_null(eol);
  char header[2048];
  snprintf(header, sizeof header, "%.*s", (int)(eol - csv), csv);
  assert_non_null(strstr(header, ",overlap_pct,exposed_comm_ms,trace_overhead_pct,evidence,host,"
                                 "gpu_name,gpu_count,driver_version,cuda_version,nccl_version,"
                                 "cublas_version,cupti_version,warmup_iters,measure_iters,"
                                 "strict_bound_ms,dist_over_strict,sync_ms,speedup_lo,speedup_hi,"
                                 "dist_over_bound_lo,dist_over_bound_hi,stock_path"));
  /* ... then the stricter bound, blank here: this database has no link probe, then sync */
  const char *line =
      strstr(csv, ",75.00,0.0100,10.00,ok,vm,NVIDIA H200,2,for,13.0,2.28.3,13.1.0,,5,"
                  "30,,,0.0050,");
  assert_non_null(line);
  /* ... then the intervals: the speedup's holds the row's speedup (1.417), and the
   * row fused (stock_path 0) */
  double s_lo = 0, s_hi = 0, b_lo = 0, b_hi = 0;
  int stock_path = -1;
  assert_int_equal(sscanf(strstr(line, "0.0050,") + 7, "%lf,%lf,%lf,%lf,%d", &s_lo, &s_hi, &b_lo,
                          &b_hi, &stock_path),
                   5);
  assert_true(s_lo <= 1.417 && 1.417 <= s_hi && s_hi - s_lo < 0.1);
  assert_true(b_lo <= b_hi);
  assert_int_equal(stock_path, 0);
  free(csv);
}

/* ---- Chrome trace export ----------------------------------------------------------- */

static json_t *export_trace(const fixture *f, int64_t id, tp_rc expected) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_rc rc = tp_report_chrome_trace(s, id, mem);
  fclose(mem);
  tp_store_close(s);
  if (rc != expected) fail_msg("rc %d (%s)", rc, tp_last_error());
  json_t *root = NULL;
  if (rc == TP_OK) {
    json_error_t err;
    root = json_loads(text, 0, &err);
    if (!root) fail_msg("not JSON: %s (line %d)\n%.400s", err.text, err.line, text);
  }
  free(text);
  return root;
}

/* The metadata event `what` for pid/tid (tid < 0: any), or NULL. */
static json_t *find_meta(json_t *events, const char *what, int pid, int64_t tid) {
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    if (strcmp(json_string_value(json_object_get(e, "ph")), "M") != 0) continue;
    if (strcmp(json_string_value(json_object_get(e, "name")), what) != 0) continue;
    if (json_integer_value(json_object_get(e, "pid")) != pid) continue;
    if (tid >= 0 && json_integer_value(json_object_get(e, "tid")) != tid) continue;
    return e;
  }
  return NULL;
}

static const char *meta_name(json_t *e) {
  return e ? json_string_value(json_object_get(json_object_get(e, "args"), "name")) : "(none)";
}

static void test_chrome_trace_structure(void **state) {
  fixture *f = *state;
  json_t *root = export_trace(f, f->traced, TP_OK);
  json_t *events = json_object_get(root, "traceEvents");
  assert_true(json_is_array(events));
  /* A process per rank, named after the GPU. */
  assert_string_equal(meta_name(find_meta(events, "process_name", 0, -1)), "rank 0 (NVIDIA H200)");
  assert_string_equal(meta_name(find_meta(events, "process_name", 1, -1)), "rank 1 (NVIDIA H200)");
  assert_null(find_meta(events, "process_name", 2, -1));
  /* A stream's kernels on tid = stream id, NVTX above them (largest stream + 1), copies on a
   * track of their own per stream (largest stream + 3 onwards). */
  int64_t copies_tid = -1;
  for (int rank = 0; rank < 2; rank++) {
    assert_string_equal(meta_name(find_meta(events, "thread_name", rank, 7)), "stream 7");
    assert_null(find_meta(events, "thread_name", rank, 13)); /* stream 13 runs no kernel */
    assert_string_equal(meta_name(find_meta(events, "thread_name", rank, 14)), "NVTX");
    for (int64_t tid = 16; tid < 24; tid++)
      if (!strcmp(meta_name(find_meta(events, "thread_name", rank, tid)), "stream 13 copies"))
        copies_tid = tid;
    assert_true(copies_tid >= 16);
  }
  size_t complete = 0, ranges = 0;
  double min_ts = 1e300;
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
    complete++;
    double ts = json_real_value(json_object_get(e, "ts"));
    if (ts < min_ts) min_ts = ts;
    const char *cat = json_string_value(json_object_get(e, "cat"));
    const char *name = json_string_value(json_object_get(e, "name"));
    json_t *args = json_object_get(e, "args");
    int64_t tid = json_integer_value(json_object_get(e, "tid"));
    if (!strcmp(cat, "range_gpu")) { /* the projections: tests/cpu/test_trace_nesting.c */
      complete--;
      continue;
    }
    assert_string_equal(json_string_value(json_object_get(args, "schedule")), "ce x2");
    assert_true(json_is_integer(json_object_get(args, "correlation")));
    if (!strcmp(cat, "range")) {
      ranges++;
      assert_int_equal(tid, 14);
      assert_string_equal(name, "iteration");
      assert_true(json_real_value(json_object_get(e, "dur")) == 150.0);
    } else if (!strcmp(cat, "comm")) {
      assert_int_equal(tid, copies_tid);
      assert_int_equal(json_integer_value(json_object_get(args, "bytes")), 8388608);
      assert_string_equal(json_string_value(json_object_get(args, "copy_kind")), "PtoP");
      assert_string_equal(json_string_value(json_object_get(args, "kind")), "memcpy");
      assert_true(json_real_value(json_object_get(e, "dur")) == 40.0);
    } else {
      assert_string_equal(cat, "gemm");
      assert_int_equal(tid, 7);
      assert_true(json_is_null(json_object_get(args, "copy_kind")));
      assert_true(json_real_value(json_object_get(e, "dur")) == 100.0);
    }
  }
  assert_int_equal(complete, 2 * 4 * 3);
  assert_int_equal(ranges, 8);
  assert_true(min_ts == 0.0); /* relative to the earliest event */
  json_t *other = json_object_get(root, "otherData");
  assert_int_equal(json_integer_value(json_object_get(other, "config_id")), f->traced);
  assert_string_equal(json_string_value(json_object_get(other, "label")),
                      "llama3-8b ag_linear qkv T=4096 bf16 fwd tp=2 dist_gemm auto");
  assert_int_equal(json_integer_value(json_object_get(other, "traced_iters")), 4);
  assert_true(json_is_true(json_object_get(other, "evidence_ok")));
  json_decref(root);
}

/* Rank 1 starts 1.5 us after rank 0: sub-microsecond decimals survive. */
static void test_chrome_trace_times(void **state) {
  fixture *f = *state;
  json_t *root = export_trace(f, f->traced, TP_OK);
  json_t *events = json_object_get(root, "traceEvents");
  int seen = 0;
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
    if (json_integer_value(json_object_get(e, "pid")) != 1) continue;
    if (strcmp(json_string_value(json_object_get(e, "cat")), "gemm") != 0) continue;
    double ts = json_real_value(json_object_get(e, "ts"));
    double frac = fmod(ts, 200.0); /* iterations are 200 us apart */
    assert_true(fabs(frac - 11.5) < 1e-9);
    seen++;
  }
  assert_int_equal(seen, 4);
  json_decref(root);
}

static void test_chrome_trace_refusals(void **state) {
  fixture *f = *state;
  assert_null(export_trace(f, f->untraced, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "has no trace"));
  assert_null(export_trace(f, 999999, TP_EUSAGE));
  assert_non_null(strstr(tp_last_error(), "no configuration 999999"));
}

/* Evidence is the dist_gemm configuration's own: with only the stock op
 * traced, an untraced dist_gemm row says "not traced", never ok; a stock op
 * whose evidence was not checked is shown beside; sync records export as
 * "sync". (Runs last: it traces the stock op of the first case.) */
static void test_evidence_is_never_ok_by_proxy(void **state) {
  fixture *f = *state;
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(f->db, 0, &s), TP_OK);
  const uint64_t t0 = 1764503776000000000ULL;
  tp_trace_event ev[2] = {
      {"barrier_kernel", "kernel", "sync", NULL, t0, t0 + 500, 0, 0, 0, 7, 1, -1},
      {"sync stream", "sync", "other", NULL, t0 + 600, t0 + 900, 0, 0, 0, 7, 2, -1}};
  tp_trace_record rec = {.events = ev,
                         .n_events = 2,
                         .traced_iters = 1,
                         .traced_median_us = NAN,
                         .untraced_median_us = NAN,
                         .evidence = "not checked",
                         .evidence_message = "rank 0: linear: no NVTX range"};
  assert_int_equal(tp_store_put_trace(s, 1, &rec), TP_OK); /* configuration 1: the stock op */
  tp_store_close(s);
  char *text = throughput(f, TP_FMT_JSON);
  json_t *root = json_loads(text, 0, NULL);
  free(text);
  json_t *rows = json_object_get(root, "rows");
  const char *untraced = json_string_value(json_object_get(row_of(rows, f->untraced), "evidence"));
  assert_non_null(untraced);
  assert_non_null(strstr(untraced, "not traced; stock: not checked: rank 0: linear"));
  assert_string_equal(json_string_value(json_object_get(row_of(rows, f->traced), "evidence")),
                      "ok; stock: not checked: rank 0: linear: no NVTX range");
  json_decref(root);
  json_t *trace = export_trace(f, 1, TP_OK);
  json_t *events = json_object_get(trace, "traceEvents");
  int syncs = 0;
  for (size_t i = 0; i < json_array_size(events); i++) {
    const char *cat = json_string_value(json_object_get(json_array_get(events, i), "cat"));
    syncs += cat && strcmp(cat, "sync") == 0;
  }
  assert_int_equal(syncs, 2);
  json_decref(trace);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_columns_json),
      cmocka_unit_test(test_trace_columns_markdown_and_csv),
      cmocka_unit_test(test_chrome_trace_structure),
      cmocka_unit_test(test_chrome_trace_times),
      cmocka_unit_test(test_chrome_trace_refusals),
      cmocka_unit_test(test_evidence_is_never_ok_by_proxy),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
