/*
 * tp_history.c — a configuration's medians across commits (`tpbench
 * history`) and the trends of every configuration for the dashboard (see
 * tp_history.h).
 *
 * History loads the key's rows in time order, derives the changes against
 * the first and the previous successful row, and renders markdown, CSV or
 * JSON. Trends group runs into commits, then walk every successful
 * configuration ordered by key and recency, keeping per key and commit the
 * first (latest) one: the same choice `compare` makes, so a trend point and
 * a comparison agree on which run speaks for a commit.
 */
#include "report/tp_history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "report/tp_report_util.h"

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "history: out of memory"); }

static tp_rc sql_error(tp_store *store, const char *what) {
  return TP_FAIL(TP_ESQLITE, "%s: %s: %s", tp_store_path(store), what,
                 sqlite3_errmsg(tp_store_db(store)));
}

static tp_rc prepare(tp_store *store, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, st, NULL) == SQLITE_OK) return TP_OK;
  *st = NULL;
  return sql_error(store, "preparing a history query");
}

static char *dup_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? strdup((const char *)t) : NULL;
}

static double real_or_nan(sqlite3_stmt *st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

static const char *or_empty(const char *s) { return s ? s : ""; }

/* ---- history: loading --------------------------------------------------------- */

typedef struct {
  int64_t config_id, run_id, gpu_count, n_samples;
  char *commit, *started_at, *host, *gpu_name, *status, *reason;
  int dirty, ok;
  double median_us, p10_us, p90_us, cv;
  double vs_first, vs_previous; /* median / first ok median - 1; NaN where none */
} history_row;

typedef struct {
  char *key;
  char label[256];
  history_row *rows;
  size_t n_rows;
} history;

static void free_history(history *h) {
  for (size_t i = 0; i < h->n_rows; i++) {
    history_row *r = &h->rows[i];
    char *texts[] = {r->commit, r->started_at, r->host, r->gpu_name, r->status, r->reason};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) free(texts[k]);
  }
  free(h->rows);
  free(h->key);
}

/* The key of config_id, or the key as given after checking it exists. */
static tp_rc resolve_key(tp_store *store, const tp_history_query *q, history *h) {
  int64_t id = 0;
  TP_TRY(tp_store_find_config(store, q->config_id, q->key, 0, 0, &id));
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, "SELECT c.config_key, " TP_LABEL_COLUMNS " FROM configs c WHERE c.id = ?",
                 &st));
  tp_rc rc = TP_OK;
  if (sqlite3_bind_int64(st, 1, id) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
    rc = sql_error(store, "reading the configuration");
  } else {
    h->key = dup_text(st, 0);
    tp_config_axes axes;
    tp_axes_from_row(st, 1, &axes);
    tp_config_label(h->label, sizeof h->label, &axes);
    if (!h->key) rc = out_of_memory();
  }
  sqlite3_finalize(st);
  return rc;
}

static void fill_row(sqlite3_stmt *st, history_row *r) {
  r->config_id = sqlite3_column_int64(st, 0);
  r->run_id = sqlite3_column_int64(st, 1);
  r->commit = dup_text(st, 2);
  r->dirty = sqlite3_column_int(st, 3);
  r->started_at = dup_text(st, 4);
  r->host = dup_text(st, 5);
  r->gpu_name = dup_text(st, 6);
  r->gpu_count = sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 7);
  r->status = dup_text(st, 8);
  r->reason = dup_text(st, 9);
  r->n_samples = sqlite3_column_int64(st, 10);
  r->median_us = real_or_nan(st, 11);
  r->p10_us = real_or_nan(st, 12);
  r->p90_us = real_or_nan(st, 13);
  r->cv = real_or_nan(st, 14);
  r->ok = r->status && !strcmp(r->status, "ok") && isfinite(r->median_us);
}

static tp_rc load_history(tp_store *store, history *h) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(
      store,
      "SELECT c.id, r.id, r.commit_sha, r.dirty, r.started_at, r.host, r.gpu_name, "
      "r.gpu_count, c.status, c.reason, coalesce(res.n_samples, 0), res.median_us, "
      "res.p10_us, res.p90_us, res.cv FROM configs c JOIN runs r ON r.id = c.run_id "
      "LEFT JOIN results res ON res.config_id = c.id WHERE c.config_key = ? "
      "ORDER BY r.started_at, r.id, c.id", /* TP_STORE_OLDEST_FIRST, then the configuration */
      &st));
  tp_rc rc = TP_OK;
  size_t cap = 0;
  int step = sqlite3_bind_text(st, 1, h->key, -1, SQLITE_STATIC);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    history_row *grown = tp_grow_array(h->rows, &cap, h->n_rows, sizeof *h->rows);
    if (!grown) {
      rc = out_of_memory();
      break;
    }
    h->rows = grown;
    history_row *r = &h->rows[h->n_rows++];
    memset(r, 0, sizeof *r);
    fill_row(st, r);
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "reading the history");
  sqlite3_finalize(st);
  return rc;
}

static void derive_changes(history *h) {
  double first = NAN, previous = NAN;
  for (size_t i = 0; i < h->n_rows; i++) {
    history_row *r = &h->rows[i];
    r->vs_first = r->vs_previous = NAN;
    if (!r->ok) continue;
    if (isfinite(first)) {
      r->vs_first = r->median_us / first - 1.0;
      r->vs_previous = r->median_us / previous - 1.0;
    } else {
      first = r->median_us;
    }
    previous = r->median_us;
  }
}

/* ---- history: rendering ---------------------------------------------------------- */

static void md_pct(FILE *out, double fraction) {
  char buf[32];
  if (isfinite(fraction)) snprintf(buf, sizeof buf, "%+.1f%%", fraction * 100.0);
  else snprintf(buf, sizeof buf, "-");
  tp_md_cell(out, buf);
}

static void md_history(FILE *out, const history *h) {
  fputs("## tpbench history: ", out);
  tp_md_text(out, h->label);
  fputs("\n\n", out);
  tp_md_code(out, h->key);
  fputs("\n\nMedian, p10, p90 and cv of the slowest rank's per-iteration times, oldest run first."
        "\n\n| run | commit | started (UTC) | host | GPUs | status | iterations | median ms | "
        "p10 ms | p90 ms | cv % | vs first | vs previous |\n"
        "|---:|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        out);
  for (size_t i = 0; i < h->n_rows; i++) {
    const history_row *r = &h->rows[i];
    char buf[512];
    snprintf(buf, sizeof buf, "%lld", (long long)r->run_id);
    tp_md_cell(out, buf);
    snprintf(buf, sizeof buf, "%.12s%s", r->commit ? r->commit : "unknown",
             r->dirty ? " (dirty)" : "");
    tp_md_cell(out, buf);
    tp_md_cell(out, r->started_at);
    tp_md_cell(out, r->host);
    snprintf(buf, sizeof buf, "%s × %lld", r->gpu_name ? r->gpu_name : "?",
             (long long)r->gpu_count);
    tp_md_cell(out, buf);
    if (r->ok) snprintf(buf, sizeof buf, "ok");
    else snprintf(buf, sizeof buf, "%s: %s", or_empty(r->status), or_empty(r->reason));
    tp_md_cell(out, buf);
    snprintf(buf, sizeof buf, "%lld", (long long)r->n_samples);
    tp_md_cell(out, buf);
    tp_md_num(out, r->median_us / 1000.0, 3);
    tp_md_num(out, r->p10_us / 1000.0, 3);
    tp_md_num(out, r->p90_us / 1000.0, 3);
    tp_md_num(out, r->cv * 100.0, 1);
    md_pct(out, r->vs_first);
    md_pct(out, r->vs_previous);
    fputs("|\n", out);
  }
}

static void csv_history(FILE *out, const history *h) {
  static const char *const columns[] = {
      "config_key", "config_id", "run_id",    "commit", "dirty",        "started_at",
      "host",       "gpu_name",  "gpu_count", "status", "reason",       "n_samples",
      "median_ms",  "p10_ms",    "p90_ms",    "cv_pct", "vs_first_pct", "vs_previous_pct"};
  for (size_t i = 0; i < sizeof columns / sizeof *columns; i++)
    tp_csv_field(out, columns[i], i == 0);
  tp_csv_end_line(out);
  for (size_t i = 0; i < h->n_rows; i++) {
    const history_row *r = &h->rows[i];
    tp_csv_field(out, h->key, 1);
    tp_csv_int(out, r->config_id);
    tp_csv_int(out, r->run_id);
    tp_csv_field(out, r->commit, 0);
    tp_csv_int(out, r->dirty);
    tp_csv_field(out, r->started_at, 0);
    tp_csv_field(out, r->host, 0);
    tp_csv_field(out, r->gpu_name, 0);
    tp_csv_int(out, r->gpu_count);
    tp_csv_field(out, r->status, 0);
    tp_csv_field(out, r->reason, 0);
    tp_csv_int(out, r->n_samples);
    tp_csv_num(out, r->median_us / 1000.0, 4);
    tp_csv_num(out, r->p10_us / 1000.0, 4);
    tp_csv_num(out, r->p90_us / 1000.0, 4);
    tp_csv_num(out, r->cv * 100.0, 3);
    tp_csv_num(out, r->vs_first * 100.0, 2);
    tp_csv_num(out, r->vs_previous * 100.0, 2);
    tp_csv_end_line(out);
  }
}

static json_t *json_history_row(tp_json_builder *jb, const history_row *r) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "config_id", json_integer(r->config_id));
  tp_json_set(jb, o, "run_id", json_integer(r->run_id));
  tp_json_set(jb, o, "commit", tp_json_str(r->commit));
  tp_json_set(jb, o, "dirty", json_boolean(r->dirty));
  tp_json_set(jb, o, "started_at", tp_json_str(r->started_at));
  tp_json_set(jb, o, "host", tp_json_str(r->host));
  tp_json_set(jb, o, "gpu_name", tp_json_str(r->gpu_name));
  tp_json_set(jb, o, "gpu_count", r->gpu_count < 0 ? json_null() : json_integer(r->gpu_count));
  tp_json_set(jb, o, "status", tp_json_str(r->status));
  tp_json_set(jb, o, "reason", tp_json_str(r->reason));
  tp_json_set(jb, o, "n_samples", json_integer(r->n_samples));
  /* the units of the markdown table and of report: ms and percent */
  tp_json_set(jb, o, "median_ms", tp_json_real(r->median_us / 1000.0));
  tp_json_set(jb, o, "p10_ms", tp_json_real(r->p10_us / 1000.0));
  tp_json_set(jb, o, "p90_ms", tp_json_real(r->p90_us / 1000.0));
  tp_json_set(jb, o, "cv_pct", tp_json_real(r->cv * 100.0));
  tp_json_set(jb, o, "vs_first_pct", tp_json_real(r->vs_first * 100.0));
  tp_json_set(jb, o, "vs_previous_pct", tp_json_real(r->vs_previous * 100.0));
  return o;
}

static tp_rc dump_json(FILE *out, json_t *root, tp_json_builder *jb, const char *what) {
  tp_rc rc = TP_OK;
  if (jb->failed || !root) rc = TP_FAIL(TP_EOOM, "%s: building the JSON document failed", what);
  else if (json_dumpf(root, out, JSON_INDENT(2)) != 0 || fputc('\n', out) == EOF)
    rc = TP_FAIL(TP_EIO, "%s: writing the JSON document failed", what);
  json_decref(root);
  return rc;
}

static tp_rc json_history(FILE *out, const history *h) {
  tp_json_builder jb = {0};
  json_t *root = json_object(), *rows = json_array();
  for (size_t i = 0; rows && i < h->n_rows; i++)
    tp_json_append(&jb, rows, json_history_row(&jb, &h->rows[i]));
  if (root) {
    tp_json_set(&jb, root, "config_key", tp_json_str(h->key));
    tp_json_set(&jb, root, "label", tp_json_str(h->label));
    tp_json_set(&jb, root, "rows", rows);
  } else {
    json_decref(rows);
  }
  return dump_json(out, root, &jb, "history");
}

static tp_rc flush_output(FILE *out, const char *what) {
  if (fflush(out) != 0 || ferror(out))
    return TP_FAIL(TP_EIO, "%s: writing the output failed", what);
  return TP_OK;
}

tp_rc tp_report_history(tp_store *store, const tp_history_query *query, tp_report_format fmt,
                        FILE *out) {
  if (!store || !query || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_history: NULL argument");
  history h = {0};
  tp_rc rc = resolve_key(store, query, &h);
  if (rc == TP_OK) rc = load_history(store, &h);
  if (rc == TP_OK) {
    derive_changes(&h);
    switch (fmt) {
    case TP_FMT_MARKDOWN: md_history(out, &h); break;
    case TP_FMT_CSV: csv_history(out, &h); break;
    case TP_FMT_JSON: rc = json_history(out, &h); break;
    default: rc = TP_FAIL(TP_EUSAGE, "unknown report format %d", (int)fmt);
    }
  }
  if (rc == TP_OK) rc = flush_output(out, "history");
  free_history(&h);
  return rc;
}

/* ---- trends -------------------------------------------------------------------------- */

/* Runs grouped into commits, oldest first. */
typedef struct {
  int64_t *run_ids; /* every run */
  int *group_of;    /* its commit's index */
  size_t n_runs;
  int n_groups;
} commit_groups;

static int group_of_run(const commit_groups *g, int64_t run_id) {
  for (size_t i = 0; i < g->n_runs; i++)
    if (g->run_ids[i] == run_id) return g->group_of[i];
  return -1;
}

/* Adds a commit to the JSON list, or the run to the commit it belongs to. */
static void group_run(tp_json_builder *jb, json_t *commits, commit_groups *g, sqlite3_stmt *st) {
  int64_t run = sqlite3_column_int64(st, 0);
  const char *commit = (const char *)sqlite3_column_text(st, 1);
  int group = -1;
  for (int k = 0; commit && k < g->n_groups; k++) {
    const char *c =
        json_string_value(json_object_get(json_array_get(commits, (size_t)k), "commit"));
    if (c && !strcmp(c, commit)) group = k;
  }
  if (group < 0) {
    json_t *o = json_object();
    char label[64];
    if (commit) snprintf(label, sizeof label, "%.10s", commit);
    else snprintf(label, sizeof label, "run %lld", (long long)run);
    if (o) {
      tp_json_set(jb, o, "label", tp_json_str(label));
      tp_json_set(jb, o, "commit", tp_json_str(commit));
      tp_json_set(jb, o, "started_at", tp_json_str((const char *)sqlite3_column_text(st, 2)));
      tp_json_set(jb, o, "runs", json_array());
    }
    tp_json_append(jb, commits, o);
    group = g->n_groups++;
  }
  json_t *runs = json_object_get(json_array_get(commits, (size_t)group), "runs");
  tp_json_append(jb, runs, json_integer(run));
  g->run_ids[g->n_runs] = run;
  g->group_of[g->n_runs++] = group;
}

static tp_rc load_groups(tp_store *store, tp_json_builder *jb, json_t *commits, commit_groups *g) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, "SELECT count(*) FROM runs", &st));
  size_t n = sqlite3_step(st) == SQLITE_ROW ? (size_t)sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  g->run_ids = malloc((n ? n : 1) * sizeof *g->run_ids);
  g->group_of = malloc((n ? n : 1) * sizeof *g->group_of);
  if (!g->run_ids || !g->group_of) return out_of_memory();
  TP_TRY(prepare(
      store, "SELECT id, commit_sha, started_at FROM runs ORDER BY " TP_STORE_OLDEST_FIRST, &st));
  int step = SQLITE_OK;
  while (g->n_runs < n && (step = sqlite3_step(st)) == SQLITE_ROW) group_run(jb, commits, g, st);
  tp_rc rc = step == SQLITE_DONE || step == SQLITE_ROW || step == SQLITE_OK
                 ? TP_OK
                 : sql_error(store, "reading runs");
  sqlite3_finalize(st);
  return rc;
}

/* One series being built: the key's first (latest) point per commit. */
typedef struct {
  json_t *series;
  json_t **points; /* per commit, NULL until found */
} series_builder;

static json_t *new_series(tp_json_builder *jb, sqlite3_stmt *st) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_config_axes axes;
  tp_axes_from_row(st, 6, &axes);
  char label[256];
  tp_config_label(label, sizeof label, &axes);
  tp_json_set(jb, o, "key", tp_json_str((const char *)sqlite3_column_text(st, 2)));
  tp_json_set(jb, o, "label", tp_json_str(label));
  const struct {
    const char *name, *value;
  } texts[] = {{"kind", axes.kind},         {"backend", axes.backend},  {"model", axes.model},
               {"layer", axes.op_or_layer}, {"proj", axes.proj},        {"dtype", axes.dtype},
               {"pass", axes.pass},         {"schedule", axes.schedule}};
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
    tp_json_set(jb, o, texts[i].name, tp_json_str(texts[i].value));
  tp_json_set(jb, o, "tokens", json_integer(axes.tokens));
  return o;
}

static json_t *new_point(tp_json_builder *jb, sqlite3_stmt *st, int group) {
  json_t *p = json_object();
  if (!p) return NULL;
  tp_json_set(jb, p, "commit", json_integer(group));
  tp_json_set(jb, p, "config_id", json_integer(sqlite3_column_int64(st, 0)));
  tp_json_set(jb, p, "run_id", json_integer(sqlite3_column_int64(st, 1)));
  tp_json_set(jb, p, "median_us", tp_json_real(real_or_nan(st, 3)));
  tp_json_set(jb, p, "p10_us", tp_json_real(real_or_nan(st, 4)));
  tp_json_set(jb, p, "p90_us", tp_json_real(real_or_nan(st, 5)));
  return p;
}

/* Moves the points into the series in commit order and the series into
 * the list. */
static void flush_series(tp_json_builder *jb, json_t *list, series_builder *b, int n_groups) {
  if (!b->series) return;
  json_t *points = json_array();
  for (int k = 0; k < n_groups; k++) {
    if (b->points[k]) tp_json_append(jb, points, b->points[k]);
    b->points[k] = NULL;
  }
  tp_json_set(jb, b->series, "points", points);
  tp_json_append(jb, list, b->series);
  b->series = NULL;
}

/* Every ok configuration's medians across runs; drift configurations (training steps, whose
 * times are no measurement of a layer) are left out. */
static const char trend_sql[] =
    "SELECT c.id, c.run_id, c.config_key, res.median_us, res.p10_us, res.p90_us, " TP_LABEL_COLUMNS
    " FROM configs c JOIN runs r ON r.id = c.run_id "
    "JOIN results res ON res.config_id = c.id WHERE c.status = 'ok' AND c.kind <> 'drift' "
    "ORDER BY c.config_key, r.started_at DESC, c.id DESC";

static tp_rc load_series(tp_store *store, tp_json_builder *jb, json_t *list,
                         const commit_groups *g) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, trend_sql, &st));
  series_builder b = {NULL, calloc((size_t)(g->n_groups ? g->n_groups : 1), sizeof(json_t *))};
  if (!b.points) {
    sqlite3_finalize(st);
    return out_of_memory();
  }
  char *key = NULL;
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *row_key = (const char *)sqlite3_column_text(st, 2);
    if (!key || !row_key || strcmp(key, row_key) != 0) {
      flush_series(jb, list, &b, g->n_groups);
      free(key);
      key = row_key ? strdup(row_key) : NULL;
      b.series = new_series(jb, st);
      if (!b.series) jb->failed = 1;
    }
    int group = group_of_run(g, sqlite3_column_int64(st, 1));
    if (group >= 0 && !b.points[group]) b.points[group] = new_point(jb, st, group);
  }
  flush_series(jb, list, &b, g->n_groups);
  free(key);
  free(b.points);
  sqlite3_finalize(st);
  return step == SQLITE_DONE ? TP_OK : sql_error(store, "reading the trends");
}

tp_rc tp_report_trends(tp_store *store, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_trends: NULL argument");
  tp_json_builder jb = {0};
  json_t *root = json_object(), *commits = json_array(), *series = json_array();
  commit_groups g = {0};
  tp_rc rc = root && commits && series ? TP_OK : out_of_memory();
  if (rc == TP_OK) rc = load_groups(store, &jb, commits, &g);
  if (rc == TP_OK) rc = load_series(store, &jb, series, &g);
  free(g.run_ids);
  free(g.group_of);
  if (rc != TP_OK) {
    json_decref(root);
    json_decref(commits);
    json_decref(series);
    return rc;
  }
  tp_json_set(&jb, root, "commits", commits);
  tp_json_set(&jb, root, "series", series);
  rc = dump_json(out, root, &jb, "trends");
  return rc == TP_OK ? flush_output(out, "trends") : rc;
}
