/*
 * tp_runs.c — `tpbench runs` (see tp_runs.h): one query over runs and the
 * counts of their configurations, then one writer per format.
 */
#include "report/tp_runs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "report/tp_report_util.h"

/* One run as listed. */
typedef struct {
  int64_t id, gpu_count; /* gpu_count -1: unknown */
  int dirty;
  char *uuid, *commit, *started_at, *finished_at, *host, *gpu_name, *command, *kinds;
  int64_t ok, failed, rejected;
} run_line;

typedef struct {
  run_line *items;
  size_t n, cap;
} run_list;

/* Kinds in the order a run makes them: ops and layers, then references,
 * then link points. */
static const char runs_sql[] =
    "SELECT r.id, r.uuid, r.commit_sha, r.dirty, r.started_at, r.finished_at, r.host, "
    "r.gpu_name, r.gpu_count, r.command, "
    "(SELECT group_concat(kind, ',') FROM (SELECT DISTINCT kind FROM configs WHERE run_id = r.id "
    "ORDER BY CASE kind WHEN 'op' THEN 0 WHEN 'layer' THEN 1 WHEN 'gemm' THEN 2 WHEN 'comm' THEN 3 "
    "WHEN 'link' THEN 4 ELSE 5 END, kind)), "
    "(SELECT count(*) FROM configs WHERE run_id = r.id AND status = 'ok'), "
    "(SELECT count(*) FROM configs WHERE run_id = r.id AND status IN ('failed', 'oom', "
    "'timeout')), "
    "(SELECT count(*) FROM configs WHERE run_id = r.id AND status = 'rejected') "
    "FROM runs r ORDER BY r." TP_STORE_OLDEST_FIRST;

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "runs: out of memory"); }

static tp_rc dup_text(sqlite3_stmt *st, int col, char **out) {
  const unsigned char *text = sqlite3_column_text(st, col);
  *out = text ? strdup((const char *)text) : NULL;
  return !text || *out ? TP_OK : out_of_memory();
}

static void free_line(run_line *l) {
  char *texts[] = {l->uuid, l->commit,   l->started_at, l->finished_at,
                   l->host, l->gpu_name, l->command,    l->kinds};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) free(texts[i]);
}

static void free_list(run_list *list) {
  for (size_t i = 0; i < list->n; i++) free_line(&list->items[i]);
  free(list->items);
}

static tp_rc take_line(sqlite3_stmt *st, run_list *list) {
  run_line *grown = tp_grow_array(list->items, &list->cap, list->n, sizeof *list->items);
  if (!grown) return out_of_memory();
  list->items = grown;
  run_line *l = &list->items[list->n++];
  memset(l, 0, sizeof *l);
  l->id = sqlite3_column_int64(st, 0);
  l->dirty = sqlite3_column_int(st, 3);
  l->gpu_count = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 8);
  l->ok = sqlite3_column_int64(st, 11);
  l->failed = sqlite3_column_int64(st, 12);
  l->rejected = sqlite3_column_int64(st, 13);
  struct {
    int col;
    char **dst;
  } texts[] = {{1, &l->uuid}, {2, &l->commit},   {4, &l->started_at}, {5, &l->finished_at},
               {6, &l->host}, {7, &l->gpu_name}, {9, &l->command},    {10, &l->kinds}};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    TP_TRY(dup_text(st, texts[i].col, texts[i].dst));
  return TP_OK;
}

static tp_rc load_runs(tp_store *store, run_list *list) {
  sqlite3 *db = tp_store_db(store);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, runs_sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: preparing the run list: %s", tp_store_path(store),
                   sqlite3_errmsg(db));
  tp_rc rc = TP_OK;
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) rc = take_line(st, list);
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_FAIL(TP_ESQLITE, "%s: reading the runs: %s", tp_store_path(store), sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

static const char *status_of(const run_line *l) {
  return l->finished_at ? "finished" : "not finished";
}

/* ---- markdown ----------------------------------------------------------- */

static void md_int_cell(FILE *out, int64_t value) {
  char buf[32];
  if (value < 0) snprintf(buf, sizeof buf, "?");
  else snprintf(buf, sizeof buf, "%lld", (long long)value);
  tp_md_cell(out, buf);
}

static void md_line(FILE *out, const run_line *l) {
  char buf[256];
  md_int_cell(out, l->id);
  snprintf(buf, sizeof buf, "%.10s%s", l->commit ? l->commit : "?", l->dirty ? " (dirty)" : "");
  tp_md_cell(out, buf);
  tp_md_cell(out, l->started_at);
  tp_md_cell(out, l->host ? l->host : "?");
  if (l->gpu_count >= 0)
    snprintf(buf, sizeof buf, "%s × %lld", l->gpu_name ? l->gpu_name : "?",
             (long long)l->gpu_count);
  else snprintf(buf, sizeof buf, "%s × ?", l->gpu_name ? l->gpu_name : "?");
  tp_md_cell(out, buf);
  tp_md_cell(out, l->command ? l->command : "?");
  tp_md_cell(out, l->kinds ? l->kinds : "-");
  md_int_cell(out, l->ok);
  md_int_cell(out, l->failed);
  md_int_cell(out, l->rejected);
  tp_md_cell(out, status_of(l));
  fputs("|\n", out);
}

static void write_markdown(FILE *out, const run_list *list) {
  fputs("| run | commit | started (UTC) | host | GPUs | command | kinds | ok | failed | rejected "
        "| status |\n|---:|---|---|---|---|---|---|---:|---:|---:|---|\n",
        out);
  for (size_t i = 0; i < list->n; i++) md_line(out, &list->items[i]);
  if (list->n == 0) fputs("\n(no runs)\n", out);
  else
    fputs("\nConfigurations per run: ok, failed (failed, oom, timeout), rejected (could not run "
          "on its shapes). `tpbench report --run ID` shows one.\n",
          out);
}

/* ---- CSV ------------------------------------------------------------------ */

static const char *const csv_columns[] = {
    "run_id",    "uuid",    "commit", "dirty", "started_at", "finished_at", "host",  "gpu_name",
    "gpu_count", "command", "kinds",  "ok",    "failed",     "rejected",    "status"};

static void write_csv(FILE *out, const run_list *list) {
  for (size_t i = 0; i < sizeof csv_columns / sizeof csv_columns[0]; i++)
    tp_csv_field(out, csv_columns[i], i == 0);
  tp_csv_end_line(out);
  for (size_t i = 0; i < list->n; i++) {
    const run_line *l = &list->items[i];
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)l->id);
    tp_csv_field(out, buf, 1);
    tp_csv_field(out, l->uuid, 0);
    tp_csv_field(out, l->commit, 0);
    tp_csv_int(out, l->dirty);
    tp_csv_field(out, l->started_at, 0);
    tp_csv_field(out, l->finished_at, 0);
    tp_csv_field(out, l->host, 0);
    tp_csv_field(out, l->gpu_name, 0);
    if (l->gpu_count >= 0) tp_csv_int(out, l->gpu_count);
    else tp_csv_field(out, "", 0);
    tp_csv_field(out, l->command, 0);
    tp_csv_field(out, l->kinds, 0);
    tp_csv_int(out, l->ok);
    tp_csv_int(out, l->failed);
    tp_csv_int(out, l->rejected);
    tp_csv_field(out, status_of(l), 0);
    tp_csv_end_line(out);
  }
}

/* ---- JSON ----------------------------------------------------------------- */

static json_t *json_line(tp_json_builder *jb, const run_line *l) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "id", json_integer(l->id));
  tp_json_set(jb, o, "uuid", tp_json_str(l->uuid));
  tp_json_set(jb, o, "commit", tp_json_str(l->commit));
  tp_json_set(jb, o, "dirty", json_boolean(l->dirty));
  tp_json_set(jb, o, "started_at", tp_json_str(l->started_at));
  tp_json_set(jb, o, "finished_at", tp_json_str(l->finished_at));
  tp_json_set(jb, o, "host", tp_json_str(l->host));
  tp_json_set(jb, o, "gpu_name", tp_json_str(l->gpu_name));
  tp_json_set(jb, o, "gpu_count", l->gpu_count < 0 ? json_null() : json_integer(l->gpu_count));
  tp_json_set(jb, o, "command", tp_json_str(l->command));
  tp_json_set(jb, o, "kinds", tp_json_str(l->kinds));
  tp_json_set(jb, o, "ok", json_integer(l->ok));
  tp_json_set(jb, o, "failed", json_integer(l->failed));
  tp_json_set(jb, o, "rejected", json_integer(l->rejected));
  tp_json_set(jb, o, "status", tp_json_str(status_of(l)));
  return o;
}

static tp_rc write_json(FILE *out, const run_list *list) {
  tp_json_builder jb = {0};
  json_t *root = json_object(), *runs = json_array();
  if (!root || !runs) jb.failed = 1;
  for (size_t i = 0; runs && i < list->n; i++)
    tp_json_append(&jb, runs, json_line(&jb, &list->items[i]));
  if (root) tp_json_set(&jb, root, "runs", runs);
  else json_decref(runs);
  return tp_json_write_document(out, root, &jb, "runs");
}

tp_rc tp_report_runs(tp_store *store, tp_report_format fmt, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_runs: NULL argument");
  run_list list = {0};
  tp_rc rc = load_runs(store, &list);
  if (rc == TP_OK) {
    switch (fmt) {
    case TP_FMT_MARKDOWN: write_markdown(out, &list); break;
    case TP_FMT_CSV: write_csv(out, &list); break;
    case TP_FMT_JSON: rc = write_json(out, &list); break;
    default: rc = TP_FAIL(TP_EUSAGE, "runs: unknown format %d", (int)fmt);
    }
  }
  if (rc == TP_OK && (fflush(out) != 0 || ferror(out)))
    rc = TP_FAIL(TP_EIO, "runs: writing the output failed");
  free_list(&list);
  return rc;
}
