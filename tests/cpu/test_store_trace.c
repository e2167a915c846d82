/*
 * test_store_trace.c — CPU tests of the store's second migration and what
 * came with it: migrating the real H200 database (tests/data), run uuids,
 * writing and reading traces (interning, atomicity, refusals), finding
 * configurations, the slowest rank per iteration, and merging databases
 * (idempotence, version-1 sources, refusals that leave the target
 * byte-identical, rollback).
 *
 * Second runs and traces are synthesised by fixture_db.h and marked as such.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <sys/stat.h>

#include "schemas/tp_schemas.h"
#include "store/tp_store.h"
#include "tests/cpu/fixture_db.h"

typedef struct {
  fx_dir dir;
  char buf[4][600];
} scratch;

static int setup(void **state) {
  scratch *s = calloc(1, sizeof *s);
  if (!s || fx_mkdir(&s->dir, "tp_store_trace") != 0) return -1;
  *state = s;
  return 0;
}

static int teardown(void **state) {
  scratch *s = *state;
  fx_rmdir(&s->dir);
  free(s);
  return 0;
}

static const char *path(scratch *s, int slot, const char *name) {
  return fx_path(&s->dir, name, s->buf[slot], sizeof s->buf[slot]);
}

static tp_store *open_copy_of_real(scratch *s, const char *name) {
  assert_int_equal(fx_copy(FX_REAL_DB, path(s, 0, name)), 0);
  tp_store *store = NULL;
  if (tp_store_open(path(s, 0, name), 0, &store) != TP_OK) fail_msg("%s", tp_last_error());
  return store;
}

static fx_change same(const char *key, void *ctx) {
  (void)key;
  (void)ctx;
  return (fx_change){1.0, 0.0};
}

/* ---- migration ------------------------------------------------------------ */

static void test_real_database_migrates(void **state) {
  scratch *s = *state;
  int version = 0;
  assert_int_equal(tp_store_probe(FX_REAL_DB, &version), TP_OK);
  assert_int_equal(version, 1);
  tp_store *store = open_copy_of_real(s, "real.db");
  assert_int_equal(tp_store_version(store), tp_store_schema_version());
  assert_int_equal(tp_store_schema_version(), 7);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM configs"), 144);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM samples"), 8640);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM runs WHERE uuid = "
                                 "'v1:1:@vm:2026-11-30T11:56:16Z'"),
                   1);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM traces"), 0);
  tp_store_close(store);
}

static void test_new_runs_get_a_random_uuid(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "uuid.db");
  int64_t a = fx_synthesise_run(store, 1, "c0ffee", same, NULL, 1);
  tp_run_info info = {.commit = "c0ffee", .host = FX_SYNTHETIC_HOST};
  int64_t b = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &b), TP_OK);
  char sql[200];
  for (int64_t run = a; run <= b; run++) {
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM runs WHERE id = %lld AND length(uuid) = 36 AND "
             "substr(uuid, 15, 1) = '4' AND substr(uuid, 20, 1) IN ('8','9','a','b')",
             (long long)run);
    assert_int_equal(fx_int(store, sql), 1);
  }
  assert_int_equal(fx_int(store, "SELECT count(DISTINCT uuid) FROM runs"), 3);
  tp_store_close(store);
}

/* ---- writing traces -------------------------------------------------------- */

static int64_t first_dist_config(tp_store *store) {
  return fx_int(store, "SELECT min(id) FROM configs WHERE backend = 'dist_gemm'");
}

static void test_put_trace_writes_everything(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "trace.db");
  int64_t id = first_dist_config(store);
  assert_int_equal(fx_put_trace(store, id, 4, 1), TP_OK);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM events"), 2 * 4 * 3);
  /* Three names, each once, however many events use them. */
  assert_int_equal(fx_int(store, "SELECT count(*) FROM strings"), 3);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM overlap"), 8);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM events WHERE stream IS NULL"), 8);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM events WHERE copy_kind = 'PtoP' AND "
                                 "peer_device IS NOT NULL AND bytes = 8388608"),
                   8);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM events WHERE copy_kind IS NOT NULL"), 8);

  int found = 0;
  tp_trace_info info;
  assert_int_equal(tp_store_trace_info(store, id, &found, &info), TP_OK);
  assert_int_equal(found, 1);
  assert_int_equal(info.traced_iters, 4);
  assert_true(fabs(info.overhead - 0.1) < 1e-12); /* 165 / 150 - 1 */
  assert_int_equal(info.evidence_ok, 1);
  assert_string_equal(info.evidence_message, "");
  assert_int_equal(info.n_events, 24);
  assert_int_equal(info.n_ranks, 2);
  assert_int_equal(info.n_windows, 8);
  assert_true(info.overlap_pct_median == 75.0);
  assert_true(info.exposed_ns_median == 10000.0);
  assert_true(info.comm_ns_median == 40000.0);

  /* A configuration without a trace is found == 0, not an error. */
  assert_int_equal(tp_store_trace_info(store, id + 1, &found, &info), TP_OK);
  assert_int_equal(found, 0);
  tp_store_close(store);
}

typedef struct {
  int n;
  int last_rank;
  uint64_t last_start;
  int ordered;
  int ranges_without_stream;
} walk;

static tp_rc count_event(void *ctx, const tp_trace_event *e) {
  walk *w = ctx;
  if (w->n > 0 &&
      (e->rank < w->last_rank || (e->rank == w->last_rank && e->start_ns < w->last_start)))
    w->ordered = 0;
  if (!strcmp(e->kind, "range") && e->stream == TP_TRACE_NO_STREAM && e->device == -1)
    w->ranges_without_stream++;
  w->last_rank = e->rank;
  w->last_start = e->start_ns;
  w->n++;
  return w->n == 1000 ? TP_EINTERNAL : TP_OK;
}

static tp_rc stop_at_five(void *ctx, const tp_trace_event *e) {
  (void)e;
  return ++*(int *)ctx == 5 ? TP_EIO : TP_OK;
}

static void test_read_events_and_overlap(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "read.db");
  int64_t id = first_dist_config(store);
  assert_int_equal(fx_put_trace(store, id, 3, 1), TP_OK);
  walk w = {.ordered = 1};
  assert_int_equal(tp_store_each_trace_event(store, id, count_event, &w), TP_OK);
  assert_int_equal(w.n, 18);
  assert_true(w.ordered);
  assert_int_equal(w.ranges_without_stream, 6);
  int calls = 0;
  assert_int_equal(tp_store_each_trace_event(store, id, stop_at_five, &calls), TP_EIO);
  assert_int_equal(calls, 5);

  tp_trace_overlap *rows = NULL;
  size_t n = 0;
  assert_int_equal(tp_store_trace_overlap(store, id, &rows, &n), TP_OK);
  assert_int_equal(n, 6);
  assert_int_equal(rows[0].rank, 0);
  assert_int_equal(rows[5].rank, 1);
  assert_int_equal(rows[5].window, 2);
  assert_int_equal(rows[2].exposed_ns, 10000);
  free(rows);
  assert_int_equal(tp_store_trace_overlap(store, 99999, &rows, &n), TP_OK);
  assert_int_equal(n, 0);
  assert_null(rows);
  tp_store_close(store);
}

static void test_put_trace_twice_and_bad_records(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "bad.db");
  int64_t id = first_dist_config(store);
  assert_int_equal(fx_put_trace(store, id, 2, 0), TP_OK);
  assert_int_equal(fx_int(store, "SELECT evidence_ok FROM traces"), 0);
  /* A second trace of one configuration: refused, nothing added. */
  assert_int_equal(fx_put_trace(store, id, 2, 1), TP_ESQLITE);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM events"), 12);
  /* No such configuration: the foreign key says so, nothing written. */
  assert_int_equal(fx_put_trace(store, 123456, 2, 1), TP_ESQLITE);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM traces"), 1);

  tp_trace_event e = {"k", "kernel", "gemm", NULL, 10, 5, 0, 0, 0, 7, 1, -1};
  tp_trace_record rec = {.events = &e,
                         .n_events = 1,
                         .traced_iters = 1,
                         .evidence_ok = 1,
                         .traced_median_us = NAN,
                         .untraced_median_us = 10};
  int64_t other = id + 1;
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_EINTERNAL); /* ends before start */
  e.end_ns = 20;
  e.kind = "kernal";
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_EINTERNAL);
  e.kind = "kernel";
  e.category = "compute";
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_EINTERNAL);
  e.category = "gemm";
  e.name = NULL;
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_EINTERNAL);
  e.name = "k";
  e.start_ns = (uint64_t)INT64_MAX + 1;
  e.end_ns = e.start_ns;
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_EINTERNAL);
  e.start_ns = 10;
  e.end_ns = 20;
  tp_trace_overlap o = {0, 0, 0, 100, 40, 60, 30, 9, 75.0, 0};
  rec.overlap = &o;
  rec.n_overlap = 1;
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_EINTERNAL); /* 9 != 40 - 30 */
  o.exposed_ns = 10;
  rec.evidence_ok = 0;
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_EINTERNAL); /* no message */
  rec.evidence_ok = 1;
  assert_int_equal(fx_int(store, "SELECT count(*) FROM traces"), 1);
  /* Now it is well formed; overhead is NULL without a traced median. */
  assert_int_equal(tp_store_put_trace(store, other, &rec), TP_OK);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT overhead IS NULL FROM traces WHERE config_id = %lld",
           (long long)other);
  assert_int_equal(fx_int(store, sql), 1);
  tp_store_close(store);
}

/* A failure in the middle (a trigger refuses the fifth event) leaves no
 * trace row, no event and no overlap row behind. */
static void test_put_trace_is_atomic(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "atomic.db");
  assert_int_equal(fx_exec(store, "CREATE TEMP TRIGGER boom BEFORE INSERT ON events "
                                  "WHEN (SELECT count(*) FROM events) >= 4 "
                                  "BEGIN SELECT RAISE(ABORT, 'boom'); END"),
                   0);
  assert_int_equal(fx_put_trace(store, first_dist_config(store), 3, 1), TP_ESQLITE);
  assert_non_null(strstr(tp_last_error(), "boom"));
  assert_int_equal(fx_int(store, "SELECT count(*) FROM events"), 0);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM traces"), 0);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM overlap"), 0);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM strings"), 0);
  tp_store_close(store);
}

/* A new run of commit c0ffee on the synthetic host. */
static int64_t begin_c0ffee_run(tp_store *store) {
  tp_run_info info = {.commit = "c0ffee", .host = FX_SYNTHETIC_HOST};
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &run), TP_OK);
  return run;
}

/* A configuration and its trace in one transaction: both or neither. */
static void test_put_config_with_trace(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "together.db");
  int64_t run = begin_c0ffee_run(store);
  tp_config_axes axes = {.kind = "op",
                         .model = "m",
                         .op_or_layer = "ag_linear",
                         .backend = "dist_gemm",
                         .tp = 2,
                         .tokens = 8,
                         .m = 8,
                         .n = 8,
                         .k = 8,
                         .dtype = "bf16"};
  tp_result result = {.n_samples = 1, .median_us = 10, .max_abs_err = NAN, .rel_err = NAN};
  tp_trace_event ev[2] = {{"gemm_kernel", "kernel", "gemm", NULL, 100, 200, 0, 0, 0, 7, 1, -1},
                          {"memcpy PtoP", "memcpy", "comm", "PtoP", 150, 250, 64, 0, 0, 13, 2, 1}};
  tp_trace_overlap ov = {0, 0, 100, 250, 100, 100, 50, 50, 50.0, 0};
  tp_trace_record trace = {.events = ev,
                           .n_events = 2,
                           .overlap = &ov,
                           .n_overlap = 1,
                           .traced_iters = 1,
                           .traced_median_us = 11,
                           .untraced_median_us = 10,
                           .evidence_ok = 1};
  tp_config_record rec = {
      .axes = &axes, .status = TP_STATUS_OK, .result = &result, .trace = &trace};
  int64_t id = 0;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_OK);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE config_id = %lld", (long long)id);
  assert_int_equal(fx_int(store, sql), 2);
  snprintf(sql, sizeof sql, "SELECT round(overhead, 6) * 10 FROM traces WHERE config_id = %lld",
           (long long)id);
  assert_true(fabs(fx_real(store, sql) - 1.0) < 1e-9);

  /* A malformed trace refuses the whole configuration ... */
  int64_t configs = fx_int(store, "SELECT count(*) FROM configs");
  ev[1].category = "network";
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_EINTERNAL);
  ev[1].category = "comm";
  /* ... and a failure while writing the trace rolls the configuration back. */
  assert_int_equal(fx_exec(store, "CREATE TEMP TRIGGER boom BEFORE INSERT ON overlap "
                                  "BEGIN SELECT RAISE(ABORT, 'boom'); END"),
                   0);
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_ESQLITE);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM configs"), configs);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM events"), 2);
  tp_store_close(store);
}

/* Evidence in three states, per op into the schedules rows, and sync beside overlap. */
static void test_put_trace_evidence_per_op(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "evidence.db");
  int64_t run = begin_c0ffee_run(store);
  tp_config_axes axes = {.kind = "layer",
                         .model = "m",
                         .op_or_layer = "attention",
                         .backend = "dist_gemm",
                         .tp = 2,
                         .tokens = 8,
                         .dtype = "bf16"};
  tp_result result = {.n_samples = 1, .median_us = 10, .max_abs_err = NAN, .rel_err = NAN};
  tp_schedule_choice ops[2] = {{"qkv", "ce", "copy-engine", 2, "forced"},
                               {"wo", "nccl", "nccl", 1, "auto: the stock path"}};
  tp_trace_event ev[2] = {{"barrier_kernel", "kernel", "sync", NULL, 100, 125, 0, 0, 0, 7, 1, -1},
                          {"memcpy PtoP", "memcpy", "comm", "PtoP", 150, 250, 64, 0, 0, 13, 2, 1}};
  tp_trace_overlap ov = {0, 0, 100, 250, 100, 0, 0, 100, NAN, 25};
  tp_trace_op_evidence verdicts[2] = {
      {0, "ok", "qkv (ce): 2 ranges, 4 peer-to-peer copies"},
      {1, "not checked", "wo: no NVTX range \"linear_rs....nccl x1\" in the traced window"}};
  tp_trace_record trace = {.events = ev,
                           .n_events = 2,
                           .overlap = &ov,
                           .n_overlap = 1,
                           .traced_iters = 1,
                           .traced_median_us = 11,
                           .untraced_median_us = 10,
                           .evidence_ok = 1, /* ignored: evidence decides */
                           .evidence = "not checked",
                           .evidence_message = "rank 0: wo: no NVTX range",
                           .op_evidence = verdicts,
                           .n_op_evidence = 2};
  tp_config_record rec = {.axes = &axes,
                          .status = TP_STATUS_OK,
                          .result = &result,
                          .schedules = ops,
                          .n_schedules = 2,
                          .trace = &trace};
  int64_t id = 0;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_OK);
  char sql[320];
  snprintf(sql, sizeof sql,
           "SELECT evidence = 'not checked' AND evidence_ok = 0 FROM traces "
           "WHERE config_id = %lld",
           (long long)id);
  assert_int_equal(fx_int(store, sql), 1);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM schedules WHERE config_id = %lld AND ((seq = 0 "
           "AND evidence = 'ok') OR (seq = 1 AND evidence = 'not checked' AND "
           "evidence_message LIKE 'wo: no NVTX%%'))",
           (long long)id);
  assert_int_equal(fx_int(store, sql), 2);
  snprintf(sql, sizeof sql, "SELECT sync_ns FROM overlap WHERE config_id = %lld", (long long)id);
  assert_int_equal(fx_int(store, sql), 25);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM events WHERE category = 'sync' AND config_id = "
           "%lld",
           (long long)id);
  assert_int_equal(fx_int(store, sql), 1);
  int found = 0;
  tp_trace_info ti;
  assert_int_equal(tp_store_trace_info(store, id, &found, &ti), TP_OK);
  assert_int_equal(found, 1);
  assert_string_equal(ti.evidence, "not checked");
  assert_int_equal(ti.evidence_ok, 0);
  assert_true(fabs(ti.sync_ns_median - 25.0) < 1e-9);

  /* refused, writing nothing: a verdict other than ok without its message, an
   * unknown word, evidence for an op the configuration does not have */
  int64_t configs = fx_int(store, "SELECT count(*) FROM configs");
  verdicts[1].message = "";
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_EINTERNAL);
  verdicts[1].message = "why";
  trace.evidence = "probably";
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_EINTERNAL);
  trace.evidence = "failed";
  trace.evidence_message = NULL;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_EINTERNAL);
  trace.evidence_message = "rank 1: qkv failed";
  verdicts[1].seq = 5;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_EINTERNAL);
  assert_non_null(strstr(tp_last_error(), "no schedules row 5"));
  assert_int_equal(fx_int(store, "SELECT count(*) FROM configs"), configs);
  /* a record of a version-2 writer (no evidence word) keeps its two states */
  verdicts[1].seq = 1;
  trace.evidence = NULL;
  trace.n_op_evidence = 0;
  trace.evidence_ok = 0;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_OK);
  snprintf(sql, sizeof sql, "SELECT evidence = 'failed' FROM traces WHERE config_id = %lld",
           (long long)id);
  assert_int_equal(fx_int(store, sql), 1);
  tp_store_close(store);
}

/* ---- finding configurations and their samples ------------------------------ */

static void test_find_config(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "find.db");
  int64_t run2 = fx_synthesise_run(store, 1, "c0ffee", same, NULL, 7);
  assert_true(run2 > 1);
  int64_t id = 0;
  assert_int_equal(tp_store_find_config(store, 3, NULL, 0, 0, &id), TP_OK);
  assert_int_equal(id, 3);
  assert_int_equal(tp_store_find_config(store, 100000, NULL, 0, 0, &id), TP_EUSAGE);
  assert_int_equal(tp_store_find_config(store, 0, NULL, 0, 0, &id), TP_EUSAGE);
  assert_int_equal(tp_store_find_config(store, 0, "kind=op;nonsense", 0, 0, &id), TP_EUSAGE);

  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(tp_store_db(store),
                                      "SELECT config_key FROM configs WHERE id = 3", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  char *key = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  /* The latest run's configuration of that key ... */
  assert_int_equal(tp_store_find_config(store, 0, key, 0, 0, &id), TP_OK);
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT run_id FROM configs WHERE id = %lld", (long long)id);
  assert_int_equal(fx_int(store, sql), run2);
  /* ... or the one of run 1, when asked; or the traced one, when preferred. */
  assert_int_equal(tp_store_find_config(store, 0, key, 1, 0, &id), TP_OK);
  assert_int_equal(id, 3);
  assert_int_equal(fx_put_trace(store, 3, 2, 1), TP_OK);
  assert_int_equal(tp_store_find_config(store, 0, key, 0, 1, &id), TP_OK);
  assert_int_equal(id, 3);
  assert_int_equal(tp_store_find_config(store, 0, key, 999, 0, &id), TP_EUSAGE);
  free(key);
  tp_store_close(store);
}

static void test_iteration_times_take_the_slowest_rank(void **state) {
  scratch *s = *state;
  tp_store *store = open_copy_of_real(s, "iters.db");
  double *t = NULL;
  size_t n = 0;
  assert_int_equal(tp_store_iteration_times(store, 2, &t, &n), TP_OK);
  assert_int_equal(n, 30);
  for (size_t i = 0; i < n; i++) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT max(time_us) FROM samples WHERE config_id = 2 AND iter = %zu",
             i);
    assert_true(t[i] == fx_real(store, sql));
  }
  free(t);
  assert_int_equal(tp_store_iteration_times(store, 999999, &t, &n), TP_OK);
  assert_int_equal(n, 0);
  assert_null(t);
  tp_store_close(store);
}

/* ---- import ----------------------------------------------------------------- */

static tp_store *open_new(scratch *s, const char *name) {
  tp_store *store = NULL;
  if (tp_store_open(path(s, 1, name), 1, &store) != TP_OK) fail_msg("%s", tp_last_error());
  return store;
}

/* Source: the real run, a synthetic run with a trace on one configuration. */
static void make_source(scratch *s, const char *name) {
  tp_store *src = open_copy_of_real(s, name);
  int64_t run2 = fx_synthesise_run(src, 1, "c0ffee", same, NULL, 3);
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT min(id) FROM configs WHERE run_id = %lld AND backend = 'dist_gemm'",
           (long long)run2);
  assert_int_equal(fx_put_trace(src, fx_int(src, sql), 3, 1), TP_OK);
  tp_store_close(src);
}

static void test_import_is_idempotent(void **state) {
  scratch *s = *state;
  make_source(s, "src.db");
  char src[600];
  snprintf(src, sizeof src, "%s", path(s, 0, "src.db"));
  tp_store *dst = open_new(s, "dst.db");
  /* Strings already there get other ids than in the source: names must be
   * matched by text. */
  assert_int_equal(fx_exec(dst, "INSERT INTO strings (text) VALUES ('a'), ('b'), ('memcpy PtoP')"),
                   0);
  tp_import_stats st;
  assert_int_equal(tp_store_import(dst, src, &st), TP_OK);
  assert_int_equal(st.runs_seen, 2);
  assert_int_equal(st.runs_imported, 2);
  assert_int_equal(st.runs_present, 0);
  assert_int_equal(st.configs, 288);
  assert_int_equal(st.samples, 2 * 8640);
  assert_int_equal(st.events, 18);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM results"), 288);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM schedules"), 288);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM strings"), 5);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM events e JOIN strings s ON s.id = e.name_id "
                               "WHERE s.text = 'memcpy PtoP' AND e.kind = 'memcpy'"),
                   6);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM overlap"), 6);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM traces"), 1);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM runs WHERE uuid LIKE 'v1:1:%'"), 1);
  /* The same numbers come back out. */
  tp_store *again = NULL;
  assert_int_equal(tp_store_open(src, 0, &again), TP_OK);
  double sum_src = fx_real(again, "SELECT sum(time_us) FROM samples");
  tp_store_close(again);
  assert_true(fx_real(dst, "SELECT sum(time_us) FROM samples") == sum_src);
  tp_store_close(dst);

  /* Again: nothing changes, to the byte. */
  size_t len_before = 0, len_after = 0;
  unsigned char *before = fx_read_all(path(s, 1, "dst.db"), &len_before);
  dst = open_new(s, "dst.db");
  assert_int_equal(tp_store_import(dst, src, &st), TP_OK);
  assert_int_equal(st.runs_seen, 2);
  assert_int_equal(st.runs_imported, 0);
  assert_int_equal(st.runs_present, 2);
  assert_int_equal(st.configs, 0);
  tp_store_close(dst);
  unsigned char *after = fx_read_all(path(s, 1, "dst.db"), &len_after);
  assert_int_equal(len_before, len_after);
  assert_memory_equal(before, after, len_before);
  free(before);
  free(after);
}

/* A source still at version 1 (the file in tests/data, read in place and not
 * migrated) is identified as migration 002 would: importing the migrated
 * copy afterwards finds the run present. */
static void test_import_version_1_source(void **state) {
  scratch *s = *state;
  size_t len0 = 0, len1 = 0;
  unsigned char *original = fx_read_all(FX_REAL_DB, &len0);
  tp_store *dst = open_new(s, "v1dst.db");
  tp_import_stats st;
  assert_int_equal(tp_store_import(dst, FX_REAL_DB, &st), TP_OK);
  assert_int_equal(st.runs_imported, 1);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM samples"), 8640);
  tp_store *migrated = open_copy_of_real(s, "v1migrated.db");
  tp_store_close(migrated);
  assert_int_equal(tp_store_import(dst, path(s, 0, "v1migrated.db"), &st), TP_OK);
  assert_int_equal(st.runs_present, 1);
  assert_int_equal(st.runs_imported, 0);
  tp_store_close(dst);
  unsigned char *after = fx_read_all(FX_REAL_DB, &len1);
  assert_int_equal(len0, len1);
  assert_memory_equal(original, after, len0);
  free(original);
  free(after);
}

static void write_text(const char *p, const char *text) {
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void expect_refused(scratch *s, const char *src, tp_rc expected, const char *needle) {
  tp_store *dst = open_new(s, "target.db");
  tp_store_close(dst);
  size_t len_before = 0, len_after = 0;
  unsigned char *before = fx_read_all(path(s, 1, "target.db"), &len_before);
  dst = open_new(s, "target.db");
  tp_import_stats st = {.runs_seen = 99};
  assert_int_equal(tp_store_import(dst, src, &st), expected);
  if (!strstr(tp_last_error(), needle)) fail_msg("'%s' not in: %s", needle, tp_last_error());
  assert_int_equal(st.runs_seen, 0);
  tp_store_close(dst);
  unsigned char *after = fx_read_all(path(s, 1, "target.db"), &len_after);
  assert_int_equal(len_before, len_after);
  assert_memory_equal(before, after, len_before);
  free(before);
  free(after);
}

/* A source at schema 3 keeps what migration 003 added: the run's rounds and
 * knobs, each sample's round and host time, the result's interval and
 * verdicts, the round windows and the numerics checks. */
static void test_import_keeps_schema_3(void **state) {
  scratch *s = *state;
  tp_store *src = open_new(s, "v3src.db");
  tp_run_info info = {.commit = "c0ffee",
                      .host = FX_SYNTHETIC_HOST,
                      .rounds = 2,
                      .order_policy = "shuffle",
                      .order_seed = 7,
                      .test_knobs = "TPBENCH_TEST_DIST_DELAY_US=20"};
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(src, &info, &run), TP_OK);
  tp_config_axes axes = {.kind = "op",
                         .model = "m",
                         .op_or_layer = "ag_linear",
                         .backend = "dist_gemm",
                         .tp = 2,
                         .tokens = 8,
                         .m = 8,
                         .n = 8,
                         .k = 8,
                         .dtype = "bf16"};
  tp_result result = {.n_samples = 4,
                      .median_us = 10,
                      .max_abs_err = NAN,
                      .rel_err = NAN,
                      .n_rounds = 2,
                      .ci_lo_us = 9.5,
                      .ci_hi_us = 10.5,
                      .rank_skew = 0.01,
                      .host_stall_frac = 0.25,
                      .numerics = "ok",
                      .fused = TP_FUSED_ALL};
  double t[4] = {9.8, 10.0, 10.1, 10.3}, host[4] = {1, 2, 3, 40};
  int rounds[4] = {0, 0, 1, 1};
  tp_samples set = {0, 4, t, rounds, host};
  tp_window windows[2] = {{0, 1, 9.9}, {1, 0, 10.2}};
  tp_check check = {"y", "exact", "ok", 64, 0, 0, 0.0, 0.0, NAN, NULL};
  tp_config_record rec = {.axes = &axes,
                          .status = TP_STATUS_OK,
                          .result = &result,
                          .samples = &set,
                          .n_sample_sets = 1,
                          .windows = windows,
                          .n_windows = 2,
                          .checks = &check,
                          .n_checks = 1};
  assert_int_equal(tp_store_put_config(src, run, &rec, NULL), TP_OK);
  tp_store_close(src);

  char src_path[600];
  snprintf(src_path, sizeof src_path, "%s", path(s, 1, "v3src.db"));
  tp_store *dst = open_new(s, "v3dst.db");
  tp_import_stats st;
  assert_int_equal(tp_store_import(dst, src_path, &st), TP_OK);
  assert_int_equal(st.runs_imported, 1);
  assert_int_equal(fx_int(dst, "SELECT rounds FROM runs"), 2);
  assert_int_equal(fx_int(dst, "SELECT order_seed FROM runs WHERE order_policy = 'shuffle' "
                               "AND test_knobs = 'TPBENCH_TEST_DIST_DELAY_US=20'"),
                   7);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM samples WHERE round = 1"), 2);
  assert_true(fx_real(dst, "SELECT sum(host_us) FROM samples") == 46.0);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM results WHERE n_rounds = 2 AND "
                               "ci_lo_us = 9.5 AND ci_hi_us = 10.5 AND numerics = 'ok' AND "
                               "fused = 1 AND host_stall_frac = 0.25"),
                   1);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM windows"), 2);
  assert_int_equal(fx_int(dst, "SELECT position FROM windows WHERE round = 0"), 1);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM checks WHERE output = 'y' AND "
                               "rule = 'exact' AND status = 'ok'"),
                   1);
  tp_store_close(dst);
}

/* A source at schema 2 (the real run with migration 002 applied by hand) whose traces say
 * only evidence_ok: import fills in the three-state evidence as migration 003 does for the
 * rows it finds, so a failed trace reads failed whether the source was migrated first or
 * not (compare's failure, report's evidence column). */
static void test_import_schema_2_trace_evidence(void **state) {
  scratch *s = *state;
  const char *v2 = path(s, 2, "v2src.db");
  assert_int_equal(fx_copy(FX_REAL_DB, v2), 0);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(v2, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, tp_migrations[1].sql, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(
      sqlite3_exec(db,
                   "PRAGMA user_version = 2; INSERT INTO traces (config_id, traced_iters, "
                   "evidence_ok, evidence_message) SELECT id, 3, id % 2, CASE id % 2 WHEN 0 "
                   "THEN 'planted: no fused kernel' END FROM configs WHERE backend = "
                   "'dist_gemm' AND status = 'ok' ORDER BY id LIMIT 2; COMMIT",
                   NULL, NULL, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);

  tp_store *dst = open_new(s, "v2dst.db");
  tp_import_stats st;
  assert_int_equal(tp_store_import(dst, v2, &st), TP_OK);
  assert_int_equal(st.runs_imported, 1);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM traces"), 2);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM traces WHERE evidence_ok = 0 AND "
                               "evidence = 'failed'"),
                   1);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM traces WHERE evidence_ok = 1 AND "
                               "evidence = 'ok'"),
                   1);
  tp_store_close(dst);
}

static void test_import_refusals(void **state) {
  scratch *s = *state;
  write_text(path(s, 2, "notes.txt"), "these are not the results you are looking for\n");
  expect_refused(s, path(s, 2, "notes.txt"), TP_EFOREIGN, "not a tpbench database");

  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path(s, 2, "other.db"), &db), SQLITE_OK);
  assert_int_equal(
      sqlite3_exec(db, "PRAGMA application_id = 42; CREATE TABLE t (x)", NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(db);
  expect_refused(s, path(s, 2, "other.db"), TP_EFOREIGN, "another program");

  tp_store *future = open_copy_of_real(s, "future.db");
  tp_store_close(future);
  assert_int_equal(sqlite3_open(path(s, 2, "future.db"), &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  expect_refused(s, path(s, 2, "future.db"), TP_EFOREIGN, "newer");

  expect_refused(s, path(s, 2, "absent.db"), TP_EUSAGE, "absent.db");
  expect_refused(s, path(s, 1, "target.db"), TP_EUSAGE, "into itself");
}

/* A failure part-way (a trigger in the target refuses a sample) rolls the
 * whole import back: no run, no configuration. */
static void test_import_rolls_back(void **state) {
  scratch *s = *state;
  tp_store *dst = open_new(s, "rollback.db");
  assert_int_equal(fx_exec(dst, "CREATE TRIGGER no_late_samples BEFORE INSERT ON samples "
                                "WHEN NEW.iter = 29 BEGIN SELECT RAISE(ABORT, 'refused'); END"),
                   0);
  tp_import_stats st;
  assert_int_equal(tp_store_import(dst, FX_REAL_DB, &st), TP_ESQLITE);
  assert_non_null(strstr(tp_last_error(), "nothing imported"));
  assert_int_equal(st.runs_imported, 0);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM runs"), 0);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM configs"), 0);
  /* The attachment is gone: a second attempt works once the trigger is. */
  assert_int_equal(fx_exec(dst, "DROP TRIGGER no_late_samples"), 0);
  assert_int_equal(tp_store_import(dst, FX_REAL_DB, &st), TP_OK);
  assert_int_equal(fx_int(dst, "SELECT count(*) FROM configs"), 144);
  tp_store_close(dst);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_database_migrates),
      cmocka_unit_test(test_new_runs_get_a_random_uuid),
      cmocka_unit_test(test_put_trace_writes_everything),
      cmocka_unit_test(test_read_events_and_overlap),
      cmocka_unit_test(test_put_trace_twice_and_bad_records),
      cmocka_unit_test(test_put_trace_is_atomic),
      cmocka_unit_test(test_put_config_with_trace),
      cmocka_unit_test(test_put_trace_evidence_per_op),
      cmocka_unit_test(test_find_config),
      cmocka_unit_test(test_iteration_times_take_the_slowest_rank),
      cmocka_unit_test(test_import_is_idempotent),
      cmocka_unit_test(test_import_version_1_source),
      cmocka_unit_test(test_import_keeps_schema_3),
      cmocka_unit_test(test_import_schema_2_trace_evidence),
      cmocka_unit_test(test_import_refusals),
      cmocka_unit_test(test_import_rolls_back),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
