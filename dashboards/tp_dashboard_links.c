/*
 * tp_dashboard_links.c — the link probes of a database as JSON for the
 * dashboard (see tp_dashboard_links.h): one query over every stored transfer
 * point (the per-call latencies of flags and barriers move no bytes to
 * chart), grouped by run as the rows come.
 */
#include "dashboards/tp_dashboard_links.h"

#include <math.h>
#include <string.h>

#include <sqlite3.h>

#include "report/tp_report_util.h"

static const char POINTS_SQL[] =
    "SELECT r.id, r.commit_sha, r.started_at, r.host, r.gpu_name, r.gpu_count, r.command_line, "
    "c.id, c.layer, c.backend, c.tp, c.m, c.dtype, x.median_us, x.p10_us, x.p90_us "
    "FROM configs c JOIN runs r ON r.id = c.run_id JOIN results x ON x.config_id = c.id "
    "WHERE c.kind = 'link' AND c.status = 'ok' "
    "AND c.layer NOT IN ('barrier', 'flag_round_trip', 'flag_wait') " /* latencies, no bytes */
    "AND c.layer NOT GLOB 'gemm_gap_*' " /* GEMMs between gaps: no bytes either */
    "ORDER BY r.started_at, r.id, c.layer, c.m, c.id";

static const char *text(sqlite3_stmt *st, int col) {
  return (const char *)sqlite3_column_text(st, col);
}

static double real_or_nan(sqlite3_stmt *st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

static json_t *run_of(tp_json_builder *jb, sqlite3_stmt *st) {
  json_t *run = json_object();
  tp_json_set(jb, run, "id", json_integer(sqlite3_column_int64(st, 0)));
  tp_json_set(jb, run, "commit", tp_json_str(text(st, 1)));
  tp_json_set(jb, run, "started_at", tp_json_str(text(st, 2)));
  tp_json_set(jb, run, "host", tp_json_str(text(st, 3)));
  tp_json_set(jb, run, "gpu_name", tp_json_str(text(st, 4)));
  tp_json_set(jb, run, "gpu_count", json_integer(sqlite3_column_int64(st, 5)));
  tp_json_set(jb, run, "command_line", tp_json_str(text(st, 6)));
  return run;
}

/* Whether the transfer is one of NCCL's collectives (engine "nccl"). */
static int is_collective(const char *engine) { return engine && !strcmp(engine, "nccl"); }

static json_t *point_of(tp_json_builder *jb, sqlite3_stmt *st) {
  const char *engine = text(st, 9);
  int64_t tp = sqlite3_column_int64(st, 10), bytes = sqlite3_column_int64(st, 11);
  double median_us = real_or_nan(st, 13);
  int collective = is_collective(engine) && tp > 0;
  double size = collective ? (double)tp * (double)bytes : (double)bytes;
  double algbw = median_us > 0 ? size / (median_us * 1e-6) / 1e9 : NAN;
  double busbw = collective ? algbw * (double)(tp - 1) / (double)tp : algbw;
  json_t *p = json_object();
  tp_json_set(jb, p, "config_id", json_integer(sqlite3_column_int64(st, 7)));
  tp_json_set(jb, p, "transfer", tp_json_str(text(st, 8)));
  tp_json_set(jb, p, "engine", tp_json_str(engine));
  tp_json_set(jb, p, "tp", json_integer(tp));
  tp_json_set(jb, p, "bytes", json_integer(bytes));
  tp_json_set(jb, p, "size", json_integer((json_int_t)size));
  tp_json_set(jb, p, "count", json_integer((json_int_t)(size / 2))); /* bf16 elements */
  tp_json_set(jb, p, "dtype", tp_json_str(text(st, 12)));
  tp_json_set(jb, p, "median_us", tp_json_real(median_us));
  tp_json_set(jb, p, "p10_us", tp_json_real(real_or_nan(st, 14)));
  tp_json_set(jb, p, "p90_us", tp_json_real(real_or_nan(st, 15)));
  tp_json_set(jb, p, "algbw_gbps", tp_json_real(algbw));
  tp_json_set(jb, p, "busbw_gbps", tp_json_real(busbw));
  return p;
}

static tp_rc sql_failed(tp_store *store) {
  return TP_FAIL(TP_ESQLITE, "%s: dashboard: link probes: %s", tp_store_path(store),
                 sqlite3_errmsg(tp_store_db(store)));
}

tp_rc tp_dashboard_links(tp_store *store, json_t **out) {
  *out = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(tp_store_db(store), POINTS_SQL, -1, &st, NULL) != SQLITE_OK)
    return sql_failed(store);
  tp_json_builder jb = {0};
  json_t *list = json_array(), *points = NULL;
  int64_t current = -1;
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t run_id = sqlite3_column_int64(st, 0);
    if (run_id != current) {
      json_t *entry = json_object();
      points = json_array();
      tp_json_set(&jb, entry, "run", run_of(&jb, st));
      tp_json_set(&jb, entry, "points", json_incref(points));
      tp_json_append(&jb, list, entry);
      json_decref(points); /* the entry holds it */
      current = run_id;
    }
    tp_json_append(&jb, points, point_of(&jb, st));
  }
  tp_rc rc = step == SQLITE_DONE ? TP_OK : sql_failed(store);
  sqlite3_finalize(st);
  if (rc == TP_OK && (jb.failed || !list)) rc = TP_FAIL(TP_EOOM, "dashboard: out of memory");
  if (rc != TP_OK) {
    json_decref(list);
    return rc;
  }
  *out = list;
  return TP_OK;
}
