/*
 * tp_dashboard.c — the dashboard generator (see tp_dashboard.h).
 *
 * It has no figures of its own: every number on the page is what report/
 * prints for the same database (the throughput table's JSON, the trends,
 * the Chrome trace export), captured in memory, parsed back and put
 * together into one JSON document. So the dashboard and the command-line
 * reports cannot disagree. The link probes are the exception: no report
 * prints them as the page wants them, so tp_dashboard_links.c reads them.
 *
 * Traces are not in the document: each is written to a file of its own
 * (tp_dashboard_files.h) as it is exported, and the document lists them
 * (config id, run, label, kind, backend, the file) with the one the page
 * opens first: a fused (dist_gemm) configuration of the latest traced run.
 *
 * The document goes inside <script type="application/json">: every '<' in
 * it is written as \u003c (it can only occur inside JSON strings), so no
 * kernel name or command line can close the script element early.
 */
#include "dashboards/tp_dashboard.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "dashboards/tp_dashboard_assets.h"
#include "dashboards/tp_dashboard_files.h"
#include "dashboards/tp_dashboard_links.h"
#include "dashboards/tp_dashboard_place.h"
#include "report/tp_history.h"
#include "report/tp_output.h"
#include "report/tp_report.h"
#include "report/tp_report_util.h"
#include "report/tp_trace_export.h"

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "dashboard: out of memory"); }

/* ---- capturing report output ------------------------------------------------- */

typedef tp_rc (*report_fn)(tp_store *store, int64_t id, FILE *out);

/* Runs a report into memory: *text (malloc'd, *len bytes; NULL when the report failed, its
 * rc returned). */
static tp_rc capture_text(tp_store *store, report_fn fn, int64_t id, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  FILE *mem = open_memstream(text, len);
  if (!mem) return out_of_memory();
  tp_rc rc = fn(store, id, mem);
  if (fclose(mem) != 0 && rc == TP_OK) rc = out_of_memory();
  if (rc != TP_OK) {
    free(*text);
    *text = NULL;
  }
  return rc;
}

/* JSON text parsed; flags as json_loadb takes them. NULL and TP_EINTERNAL when it is not JSON
 * (a report wrote something else: a bug). */
static tp_rc parse_json(const char *text, size_t len, size_t flags, json_t **value) {
  json_error_t err;
  *value = json_loadb(text, len, flags, &err);
  if (!*value)
    return TP_FAIL(TP_EINTERNAL, "dashboard: report output is not JSON: %s (line %d)", err.text,
                   err.line);
  return TP_OK;
}

/* Runs a report into memory and parses it. *value is NULL when the report
 * failed (its rc returned) and on parse errors (TP_EINTERNAL). */
static tp_rc capture(tp_store *store, report_fn fn, int64_t id, json_t **value) {
  char *text = NULL;
  size_t len = 0;
  *value = NULL;
  tp_rc rc = capture_text(store, fn, id, &text, &len);
  if (rc == TP_OK) rc = parse_json(text, len, 0, value);
  free(text);
  return rc;
}

static tp_rc throughput_json(tp_store *store, int64_t run_id, FILE *out) {
  tp_report_filter filter = {.run_id = run_id};
  return tp_report_throughput(store, &filter, TP_FMT_JSON, out);
}

static tp_rc trends_json(tp_store *store, int64_t unused, FILE *out) {
  (void)unused;
  return tp_report_trends(store, out);
}

/* ---- listing what to show -------------------------------------------------------- */

/* The ids a one-column query returns, in order. */
static tp_rc list_ids(tp_store *store, const char *sql, int64_t **ids, size_t *n) {
  sqlite3_stmt *st = NULL;
  *ids = NULL;
  *n = 0;
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: dashboard: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  size_t cap = 0;
  tp_rc rc = TP_OK;
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *grown = realloc(*ids, cap * sizeof *grown);
      if (!grown) {
        rc = out_of_memory();
        break;
      }
      *ids = grown;
    }
    (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_FAIL(TP_ESQLITE, "%s: dashboard: %s", tp_store_path(store),
                 sqlite3_errmsg(tp_store_db(store)));
  sqlite3_finalize(st);
  if (rc != TP_OK) {
    free(*ids);
    *ids = NULL;
    *n = 0;
  }
  return rc;
}

/* ---- the document ---------------------------------------------------------------------- */

typedef struct {
  tp_store *store;
  const char *out_dir;
  size_t max_events;
  tp_dashboard_stats *stats;
  tp_json_builder jb;
  char (*files)[TP_DASHBOARD_TRACE_NAME_MAX]; /* the trace files' names, as the document lists */
  size_t n_files;
} builder;

/* TP_EUSAGE when the database holds no run: refused before any folder is made. */
static tp_rc check_has_runs(tp_store *store) {
  int64_t *ids = NULL;
  size_t n = 0;
  TP_TRY(list_ids(store, "SELECT id FROM runs LIMIT 1", &ids, &n));
  free(ids);
  if (n == 0) return TP_FAIL(TP_EUSAGE, "%s: the database holds no runs yet", tp_store_path(store));
  return TP_OK;
}

/* One table per run, oldest first; a run without op configurations (a
 * GEMM-only run, say) has no table and is left out. */
static tp_rc add_runs(builder *b, json_t *list) {
  int64_t *ids = NULL;
  size_t n = 0;
  TP_TRY(list_ids(b->store, "SELECT id FROM runs ORDER BY " TP_STORE_OLDEST_FIRST, &ids, &n));
  if (n == 0) {
    free(ids);
    return TP_FAIL(TP_EUSAGE, "%s: the database holds no runs yet", tp_store_path(b->store));
  }
  tp_rc rc = TP_OK;
  for (size_t i = 0; rc == TP_OK && i < n; i++) {
    json_t *table = NULL;
    rc = capture(b->store, throughput_json, ids[i], &table);
    if (rc == TP_EUSAGE) { /* nothing to tabulate in this run */
      tp_clear_error();
      rc = TP_OK;
      continue;
    }
    if (rc == TP_OK) {
      tp_json_append(&b->jb, list, table);
      b->stats->runs++;
    }
  }
  free(ids);
  return rc;
}

/* Keeps the metadata and the first max complete events of a trace. */
static int truncate_events(json_t *trace, size_t max, size_t *shown) {
  json_t *events = json_object_get(trace, "traceEvents");
  size_t complete = 0, i = 0;
  while (i < json_array_size(events)) {
    json_t *ph = json_object_get(json_array_get(events, i), "ph");
    int is_complete = json_is_string(ph) && !strcmp(json_string_value(ph), "X");
    if (is_complete && complete == max) {
      json_array_remove(events, i);
      continue;
    }
    complete += is_complete;
    i++;
  }
  *shown = complete;
  return complete == max;
}

/* The configuration's kind, backend and whether every op fused (results.fused:
 * true, false, or null when not recorded), for the page's trace picker. */
static tp_rc add_config_facts(builder *b, json_t *entry, int64_t config_id) {
  sqlite3 *db = tp_store_db(b->store);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT c.kind, c.backend, x.fused FROM configs c "
                         "LEFT JOIN results x ON x.config_id = c.id WHERE c.id = ?1",
                         -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: dashboard: %s", tp_store_path(b->store), sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, config_id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    tp_json_set(&b->jb, entry, "kind", tp_json_str((const char *)sqlite3_column_text(st, 0)));
    tp_json_set(&b->jb, entry, "backend", tp_json_str((const char *)sqlite3_column_text(st, 1)));
    tp_json_set(&b->jb, entry, "fused",
                sqlite3_column_type(st, 2) == SQLITE_NULL
                    ? json_null()
                    : json_boolean(sqlite3_column_int(st, 2)));
  }
  tp_rc rc =
      step == SQLITE_ROW || step == SQLITE_DONE
          ? TP_OK
          : TP_FAIL(TP_ESQLITE, "%s: dashboard: %s", tp_store_path(b->store), sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

/* The trace's JSON text in its own file; its name recorded for the document. */
static tp_rc write_trace_file(builder *b, int64_t config_id, const char *text, size_t len,
                              char *name) {
  size_t bytes = 0;
  tp_rc rc = tp_dashboard_trace_file_write(b->out_dir, tp_store_path(b->store), config_id, text,
                                           len, name, &bytes);
  if (rc == TP_OK) b->stats->trace_bytes += bytes;
  return rc;
}

/* Complete events in a Chrome trace's text: every one holds "ph":"X" as the exporter writes
 * it, and no string can hold that (a quote inside a string is escaped). */
static size_t complete_events(const char *text) {
  size_t n = 0;
  for (const char *at = strstr(text, "\"ph\":\"X\""); at; at = strstr(at + 1, "\"ph\":\"X\"")) n++;
  return n;
}

/* The trace's "otherData" (its configuration, run, label): the exporter writes it before the
 * events, so only that object is parsed. */
static tp_rc trace_other_data(const char *text, size_t len, json_t **other) {
  static const char key[] = "\"otherData\":";
  const char *at = strstr(text, key);
  if (!at) return TP_FAIL(TP_EINTERNAL, "dashboard: a trace without otherData");
  at += sizeof key - 1;
  return parse_json(at, len - (size_t)(at - text), JSON_DISABLE_EOF_CHECK, other);
}

/* A trace over max events: parsed, cut to its first max complete events (the metadata kept)
 * and written again; *text replaced by the cut one. */
static tp_rc cut_trace(char **text, size_t *len, size_t max) {
  json_t *trace = NULL;
  TP_TRY(parse_json(*text, *len, 0, &trace));
  size_t shown = 0;
  truncate_events(trace, max, &shown);
  char *cut = json_dumps(trace, JSON_COMPACT | JSON_REAL_PRECISION(17));
  json_decref(trace);
  if (!cut) return out_of_memory();
  free(*text);
  *text = cut;
  *len = strlen(cut);
  return TP_OK;
}

static tp_rc add_trace(builder *b, json_t *list, int64_t config_id) {
  char *text = NULL;
  size_t len = 0;
  json_t *other = NULL;
  TP_TRY(capture_text(b->store, tp_report_chrome_trace, config_id, &text, &len));
  /* most traces go to their file as exported: parsing and writing them again was most of the
   * dashboard's time */
  const size_t events = complete_events(text);
  const int truncated = events > b->max_events;
  tp_rc rc = trace_other_data(text, len, &other);
  if (rc == TP_OK && truncated) rc = cut_trace(&text, &len, b->max_events);
  char *name = b->files[b->n_files];
  if (rc == TP_OK) rc = write_trace_file(b, config_id, text, len, name);
  free(text);
  json_t *entry = rc == TP_OK ? json_object() : NULL;
  if (rc == TP_OK && !entry) rc = out_of_memory();
  if (rc == TP_OK) {
    b->n_files++;
    tp_json_set(&b->jb, entry, "config_id", json_integer(config_id));
    tp_json_set(&b->jb, entry, "run_id", json_deep_copy(json_object_get(other, "run_id")));
    tp_json_set(&b->jb, entry, "label", json_deep_copy(json_object_get(other, "label")));
    tp_json_set(&b->jb, entry, "truncated", json_boolean(truncated));
    tp_json_set(&b->jb, entry, "shown_events",
                json_integer((json_int_t)(truncated ? b->max_events : events)));
    tp_json_set(&b->jb, entry, "file", json_string(name));
    rc = add_config_facts(b, entry, config_id);
    tp_json_append(&b->jb, list, entry);
    b->stats->traces++;
  }
  json_decref(other);
  return rc;
}

/* Newest run first. The page opens the first of this order that is a
 * dist_gemm configuration of the latest traced run, preferring ones that
 * fused (not fused: last), then the most work per iteration (a real model
 * over a toy one): default_trace. */
static const char TRACES_SQL[] =
    "SELECT t.config_id FROM traces t JOIN configs c ON c.id = t.config_id "
    "JOIN runs r ON r.id = c.run_id ORDER BY r.started_at DESC, r.id DESC, t.config_id";
static const char DEFAULT_TRACE_SQL[] =
    "SELECT t.config_id FROM traces t JOIN configs c ON c.id = t.config_id "
    "JOIN runs r ON r.id = c.run_id LEFT JOIN results x ON x.config_id = c.id "
    "WHERE c.run_id = (SELECT c2.run_id FROM traces t2 JOIN configs c2 ON c2.id = t2.config_id "
    "JOIN runs r2 ON r2.id = c2.run_id ORDER BY r2.started_at DESC, r2.id DESC LIMIT 1) "
    "ORDER BY c.backend = 'dist_gemm' DESC, coalesce(x.fused, 1) DESC, "
    "coalesce(x.flops, 0) DESC, t.config_id LIMIT 1";

static tp_rc add_traces(builder *b, json_t *list, json_t *doc) {
  int64_t *ids = NULL, *first = NULL;
  size_t n = 0, n_first = 0;
  TP_TRY(list_ids(b->store, TRACES_SQL, &ids, &n));
  tp_rc rc = list_ids(b->store, DEFAULT_TRACE_SQL, &first, &n_first);
  if (rc == TP_OK && n > 0) {
    b->files = calloc(n, sizeof *b->files);
    if (!b->files) rc = out_of_memory();
  }
  for (size_t i = 0; rc == TP_OK && i < n; i++) rc = add_trace(b, list, ids[i]);
  if (rc == TP_OK)
    tp_json_set(&b->jb, doc, "default_trace", n_first ? json_integer(first[0]) : json_null());
  free(ids);
  free(first);
  return rc;
}

static tp_rc add_links(builder *b, json_t *doc) {
  json_t *links = NULL;
  TP_TRY(tp_dashboard_links(b->store, &links));
  b->stats->link_runs = (int)json_array_size(links);
  tp_json_set(&b->jb, doc, "links", links);
  return TP_OK;
}

static void add_header(builder *b, json_t *doc) {
  char when[32];
  time_t now = time(NULL);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  tp_json_set(&b->jb, doc, "generator", json_string("tpbench dashboard"));
  tp_json_set(&b->jb, doc, "generated_at", json_string(when));
  tp_json_set(&b->jb, doc, "database", tp_json_str(tp_store_path(b->store)));
}

static tp_rc build_document(builder *b, json_t **out) {
  json_t *doc = json_object(), *runs = json_array(), *traces = json_array(), *trends = NULL;
  tp_rc rc = doc && runs && traces ? TP_OK : out_of_memory();
  if (rc == TP_OK) rc = add_runs(b, runs);
  if (rc == TP_OK) rc = add_traces(b, traces, doc);
  if (rc == TP_OK) rc = add_links(b, doc);
  if (rc == TP_OK) rc = capture(b->store, trends_json, 0, &trends);
  if (rc != TP_OK) {
    json_decref(doc);
    json_decref(runs);
    json_decref(traces);
    return rc;
  }
  b->stats->series = (int)json_array_size(json_object_get(trends, "series"));
  add_header(b, doc);
  tp_json_set(&b->jb, doc, "runs", runs);
  tp_json_set(&b->jb, doc, "traces", traces);
  tp_json_set(&b->jb, doc, "trends", trends);
  if (b->jb.failed) {
    json_decref(doc);
    return out_of_memory();
  }
  *out = doc;
  return TP_OK;
}

/* ---- the page ------------------------------------------------------------------------------ */

static const tp_dashboard_asset *asset(const char *name) {
  for (int i = 0; i < tp_n_dashboard_assets; i++)
    if (!strcmp(tp_dashboard_assets[i].name, name)) return &tp_dashboard_assets[i];
  return NULL;
}

/* Writes the JSON with every '<' as \u003c. */
static void write_data(FILE *f, const char *json) {
  for (const char *p = json; *p; p++) {
    if (*p == '<') fputs("\\u003c", f);
    else fputc(*p, f);
  }
}

/* The template with its three markers replaced; the markers must each occur
 * once, in this order. */
static tp_rc write_page(FILE *f, const char *data) {
  const tp_dashboard_asset *page = asset("index.html"), *css = asset("dashboard.css"),
                           *js = asset("dashboard.js");
  if (!page || !css || !js) return TP_FAIL(TP_EINTERNAL, "dashboard: an embedded asset is missing");
  /* without its mark the next dashboard would refuse to replace this page (tp_dashboard_place.h) */
  const char *mark = strstr(page->data, TP_DASHBOARD_PAGE_MARK);
  if (!mark ||
      (size_t)(mark - page->data) + strlen(TP_DASHBOARD_PAGE_MARK) > TP_DASHBOARD_PAGE_MARK_WITHIN)
    return TP_FAIL(TP_EINTERNAL, "dashboard: the template lacks its mark in its first %d bytes",
                   TP_DASHBOARD_PAGE_MARK_WITHIN);
  static const char *const markers[] = {"/*TP_STYLE*/", "/*TP_DATA*/", "/*TP_SCRIPT*/"};
  const char *from = page->data;
  for (int i = 0; i < 3; i++) {
    const char *at = strstr(from, markers[i]);
    if (!at) return TP_FAIL(TP_EINTERNAL, "dashboard: template lacks %s", markers[i]);
    fwrite(from, 1, (size_t)(at - from), f);
    if (i == 0) fwrite(css->data, 1, css->size, f);
    else if (i == 1) write_data(f, data);
    else fwrite(js->data, 1, js->size, f);
    from = at + strlen(markers[i]);
  }
  fputs(from, f);
  return TP_OK;
}

static tp_rc cannot_create(const char *dir, int err) {
  return TP_FAIL(tp_rc_for_path_errno(err), "%s: cannot create the directory: %s", dir,
                 strerror(err));
}

/* The errno mkdir(dir) would fail with because of dir's parent (missing,
 * not a folder, not writable), 0 when it can take a new folder. */
static int parent_refuses(const char *parent) {
  struct stat st;
  if (stat(parent, &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  return access(parent, W_OK | X_OK) != 0 ? errno : 0;
}

/* dir/traces, when it exists, must be a folder (through a link too). */
static tp_rc check_trace_dir(const char *dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/" TP_DASHBOARD_TRACE_DIR, dir) >= (int)sizeof path)
    return TP_FAIL(TP_EUSAGE, "%s: path too long", dir);
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
    return TP_FAIL(TP_EUSAGE, "%s: not a directory (the dashboard's trace files go there)", path);
  return TP_OK;
}

/* What make_dir and write_file would refuse, found before the page is built
 * (seconds on a large database) and without creating anything: dir is not
 * a folder, or is missing and its parent cannot take it; dir/traces is not
 * a folder; index.html is not a file that may be replaced
 * (report/tp_output.h). */
static tp_rc check_out_dir(const char *dir, const char *db) {
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return TP_FAIL(TP_EUSAGE, "%s: not a directory", dir);
  } else if (errno != ENOENT) {
    return cannot_create(dir, errno);
  } else {
    char *copy = strdup(dir); /* dirname may write into its argument */
    if (!copy) return out_of_memory();
    int err = parent_refuses(dirname(copy));
    free(copy);
    if (err) return cannot_create(dir, err);
  }
  TP_TRY(check_trace_dir(dir));
  char path[4096];
  if (snprintf(path, sizeof path, "%s/index.html", dir) >= (int)sizeof path)
    return TP_FAIL(TP_EUSAGE, "%s: path too long", dir);
  TP_TRY(tp_output_check(path, db));
  return tp_dashboard_check_replaceable(dir);
}

/* index.html through a private temporary renamed into place when complete
 * (report/tp_output.h), in the staging folder that is put in place after it. */
static tp_rc write_file(const char *dir, const char *db, const char *data, size_t *bytes) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/index.html", dir) >= (int)sizeof path)
    return TP_FAIL(TP_EUSAGE, "%s: path too long", dir);
  tp_output out;
  TP_TRY(tp_output_open(path, db, &out));
  tp_rc rc = write_page(out.file, data);
  long size = ftell(out.file);
  if (rc != TP_OK) {
    tp_output_abort(&out);
    return rc;
  }
  rc = tp_output_commit(&out, db);
  if (rc == TP_OK) *bytes = size > 0 ? (size_t)size : 0;
  return rc;
}

/* The document and the page, built into the staging folder st->staging. */
static tp_rc write_generation(builder *b, const char *db) {
  json_t *doc = NULL;
  tp_rc rc = build_document(b, &doc);
  char *data = NULL;
  if (rc == TP_OK) {
    data = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(doc);
    if (!data) rc = out_of_memory();
  }
  if (rc == TP_OK) rc = write_file(b->out_dir, db, data, &b->stats->bytes);
  free(data);
  return rc;
}

tp_rc tp_dashboard_write(tp_store *store, const char *out_dir, const tp_dashboard_options *opt,
                         tp_dashboard_stats *stats) {
  if (!store || !out_dir) return TP_FAIL(TP_EINTERNAL, "tp_dashboard_write: NULL argument");
  if (!*out_dir) return TP_FAIL(TP_EUSAGE, "an empty output folder: name one");
  tp_dashboard_stats local = {0};
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  TP_TRY(check_out_dir(out_dir, tp_store_path(store)));
  TP_TRY(check_has_runs(store));
  /* the whole generation goes into a fresh folder beside out_dir, renamed onto it only when
   * complete (tp_dashboard_place.h): a kill leaves the old folder whole, never half */
  tp_dashboard_staging st;
  TP_TRY(tp_dashboard_stage(out_dir, &st));
  builder b = {.store = store,
               .out_dir = st.staging,
               .max_events =
                   opt && opt->max_trace_events ? opt->max_trace_events : TP_DASHBOARD_MAX_EVENTS,
               .stats = stats};
  tp_rc rc = write_generation(&b, tp_store_path(store));
  if (rc == TP_OK) rc = tp_dashboard_put_in_place(&st);
  else tp_dashboard_discard(&st);
  free(b.files);
  return rc;
}
