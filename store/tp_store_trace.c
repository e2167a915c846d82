/*
 * tp_store_trace.c — traces in the store (see tp_store.h, "traces"), and the
 * readers that find a configuration and its per-iteration times.
 *
 * A trace is written like a configuration: one transaction per call, so a
 * trace is either whole in the database or absent. Event names go through
 * the strings table; the collector hands the same interned pointer for every
 * launch of one kernel, so a small cache keyed by pointer spares the lookup
 * of a name seen before, and the SQL lookup by text keeps the result right
 * for callers that do not intern.
 *
 * The readers are what report/ and dashboards/ need and would otherwise
 * write as SQL of their own: the trace summary of a configuration (the
 * traces row plus medians over its overlap rows), its events in timeline
 * order, its overlap rows, and the slowest rank's time per iteration that
 * every comparison uses.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/tp_store_internal.h"

/* ---- small helpers ------------------------------------------------------- */

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "store: out of memory"); }

/* Only this file's SQL goes through here, on the trace and configuration
 * tables: SQLite's message names what is missing, the SQL stays out. */
static tp_rc prepare(tp_store *s, const char *sql, sqlite3_stmt **stmt) {
  return tp_store_prepare(s, sql, "a statement on the trace or configuration tables", stmt);
}

static int bind_text_or_null(sqlite3_stmt *stmt, int col, const char *text) {
  return text ? sqlite3_bind_text(stmt, col, text, -1, SQLITE_STATIC)
              : sqlite3_bind_null(stmt, col);
}

static double real_or_nan(sqlite3_stmt *stmt, int col) {
  return sqlite3_column_type(stmt, col) == SQLITE_NULL ? NAN : sqlite3_column_double(stmt, col);
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorted in place); NaN for n == 0. */
static double median_of(double *v, size_t n) {
  if (n == 0) return NAN;
  qsort(v, n, sizeof *v, compare_doubles);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- checking a trace record -------------------------------------------- */

static int is_one_of(const char *word, const char *const *names, size_t n) {
  for (size_t i = 0; word && i < n; i++)
    if (strcmp(word, names[i]) == 0) return 1;
  return 0;
}

static const char *const event_kinds[] = {"kernel", "memcpy", "memset", "sync", "range"};
static const char *const categories[] = {"comm",        "sync",  "gemm", "attention",
                                         "elementwise", "other", "range"};
static const char *const evidence_words[] = {"ok", "failed", "not checked"};
enum {
  N_KINDS = sizeof event_kinds / sizeof *event_kinds,
  N_CATS = sizeof categories / sizeof *categories,
  N_EVIDENCE = sizeof evidence_words / sizeof *evidence_words
};

static tp_rc check_event(const tp_trace_event *e, size_t i) {
  if (!e->name) return TP_FAIL(TP_EINTERNAL, "trace event %zu has no name", i);
  if (!is_one_of(e->kind, event_kinds, N_KINDS))
    return TP_FAIL(TP_EINTERNAL,
                   "trace event %zu (%s): kind \"%s\" is not one of kernel, memcpy, "
                   "memset, sync, range",
                   i, e->name, e->kind ? e->kind : "(null)");
  if (!is_one_of(e->category, categories, N_CATS))
    return TP_FAIL(TP_EINTERNAL,
                   "trace event %zu (%s): category \"%s\" is not one of comm, sync, gemm, "
                   "attention, elementwise, other, range",
                   i, e->name, e->category ? e->category : "(null)");
  if (e->start_ns > (uint64_t)INT64_MAX || e->end_ns > (uint64_t)INT64_MAX ||
      e->bytes > (uint64_t)INT64_MAX)
    return TP_FAIL(TP_EINTERNAL, "trace event %zu (%s): a time or size at or past 2^63", i,
                   e->name);
  if (e->end_ns < e->start_ns)
    return TP_FAIL(TP_EINTERNAL, "trace event %zu (%s) ends before it starts", i, e->name);
  return TP_OK;
}

static tp_rc check_overlap(const tp_trace_overlap *o, size_t i) {
  if (o->overlap_ns > o->comm_ns || o->exposed_ns != o->comm_ns - o->overlap_ns)
    return TP_FAIL(TP_EINTERNAL,
                   "overlap row %zu (rank %d, window %d): exposed %llu != comm %llu - overlap "
                   "%llu",
                   i, o->rank, o->window, (unsigned long long)o->exposed_ns,
                   (unsigned long long)o->comm_ns, (unsigned long long)o->overlap_ns);
  uint64_t values[] = {o->window_start_ns, o->window_end_ns, o->comm_ns, o->compute_ns, o->sync_ns};
  for (size_t k = 0; k < sizeof values / sizeof *values; k++)
    if (values[k] > (uint64_t)INT64_MAX)
      return TP_FAIL(TP_EINTERNAL, "overlap row %zu: a time at or past 2^63", i);
  return TP_OK;
}

/* The record's evidence in the store's words: its three-state word, or the
 * two states of evidence_ok for writers that do not set it. */
static const char *evidence_word(const tp_trace_record *rec) {
  if (rec->evidence) return rec->evidence;
  return rec->evidence_ok ? "ok" : "failed";
}

static int is_ok(const char *word) { return strcmp(word, "ok") == 0; }

static tp_rc check_evidence(const tp_trace_record *rec) {
  const char *word = evidence_word(rec);
  if (!is_one_of(word, evidence_words, N_EVIDENCE))
    return TP_FAIL(TP_EINTERNAL,
                   "trace record: evidence \"%s\" is not one of ok, failed, not checked", word);
  if (!is_ok(word) && (!rec->evidence_message || !*rec->evidence_message))
    return TP_FAIL(TP_EINTERNAL, "trace record: evidence \"%s\" needs its message", word);
  if (rec->n_op_evidence > 0 && !rec->op_evidence)
    return TP_FAIL(TP_EINTERNAL, "trace record: op evidence count without its array");
  for (size_t i = 0; i < rec->n_op_evidence; i++) {
    const tp_trace_op_evidence *op = &rec->op_evidence[i];
    if (op->seq < 0 || !is_one_of(op->evidence, evidence_words, N_EVIDENCE))
      return TP_FAIL(TP_EINTERNAL, "trace record: op evidence %zu (seq %d): evidence \"%s\"", i,
                     op->seq, op->evidence ? op->evidence : "(null)");
    if (!is_ok(op->evidence) && (!op->message || !*op->message))
      return TP_FAIL(TP_EINTERNAL,
                     "trace record: op evidence %zu (seq %d) \"%s\" needs its message", i, op->seq,
                     op->evidence);
  }
  return TP_OK;
}

tp_rc tp_store_check_trace(const tp_trace_record *rec) {
  if (!rec) return TP_FAIL(TP_EINTERNAL, "tp_store_put_trace: NULL record");
  if ((rec->n_events > 0 && !rec->events) || (rec->n_overlap > 0 && !rec->overlap))
    return TP_FAIL(TP_EINTERNAL, "trace record: counts without arrays");
  if (rec->traced_iters < 0)
    return TP_FAIL(TP_EINTERNAL, "trace record: %d traced iterations", rec->traced_iters);
  TP_TRY(check_evidence(rec));
  if (rec->dropped_records > (uint64_t)INT64_MAX)
    return TP_FAIL(TP_EINTERNAL, "trace record: dropped record count out of range");
  for (size_t i = 0; i < rec->n_events; i++) TP_TRY(check_event(&rec->events[i], i));
  for (size_t i = 0; i < rec->n_overlap; i++) TP_TRY(check_overlap(&rec->overlap[i], i));
  return TP_OK;
}

/* ---- interning names ------------------------------------------------------ */

/* Open-addressing map from a name's address to its strings.id. */
typedef struct {
  const char **keys;
  int64_t *ids;
  size_t cap, used;
} name_cache;

static size_t pointer_slot(const char *p, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;
  return (size_t)(h >> 17) & (cap - 1);
}

static tp_rc cache_grow(name_cache *c) {
  size_t cap = c->cap ? 2 * c->cap : 256;
  const char **keys = calloc(cap, sizeof *keys);
  int64_t *ids = calloc(cap, sizeof *ids);
  if (!keys || !ids) {
    free(keys);
    free(ids);
    return out_of_memory();
  }
  for (size_t i = 0; i < c->cap; i++) {
    if (!c->keys[i]) continue;
    size_t slot = pointer_slot(c->keys[i], cap);
    while (keys[slot]) slot = (slot + 1) & (cap - 1);
    keys[slot] = c->keys[i];
    ids[slot] = c->ids[i];
  }
  free(c->keys);
  free(c->ids);
  c->keys = keys;
  c->ids = ids;
  c->cap = cap;
  return TP_OK;
}

/* The slot of name: where it is, or the empty slot where it would go. */
static size_t cache_find(const name_cache *c, const char *name) {
  size_t slot = pointer_slot(name, c->cap);
  while (c->keys[slot] && c->keys[slot] != name) slot = (slot + 1) & (c->cap - 1);
  return slot;
}

static void cache_free(name_cache *c) {
  free(c->keys);
  free(c->ids);
}

typedef struct {
  tp_store *store;
  sqlite3_stmt *find, *insert;
  name_cache cache;
} interner;

/* The id of text in the strings table, adding it when new. */
static tp_rc lookup_or_add(interner *in, const char *text, int64_t *id) {
  tp_store *s = in->store;
  int rc = sqlite3_bind_text(in->find, 1, text, -1, SQLITE_STATIC);
  int step = rc == SQLITE_OK ? sqlite3_step(in->find) : rc;
  if (step == SQLITE_ROW) *id = sqlite3_column_int64(in->find, 0);
  sqlite3_reset(in->find);
  if (step == SQLITE_ROW) return TP_OK;
  if (step != SQLITE_DONE) return TP_STORE_SQL_FAIL(s, "looking up the name \"%.60s\"", text);
  TP_TRY(tp_store_step_done(s, in->insert,
                            sqlite3_bind_text(in->insert, 1, text, -1, SQLITE_STATIC),
                            "adding a name to strings"));
  *id = sqlite3_last_insert_rowid(tp_store_db(s));
  return TP_OK;
}

static tp_rc intern(interner *in, const char *name, int64_t *id) {
  name_cache *c = &in->cache;
  if (2 * (c->used + 1) > c->cap) TP_TRY(cache_grow(c));
  size_t slot = cache_find(c, name);
  if (c->keys[slot]) {
    *id = c->ids[slot];
    return TP_OK;
  }
  TP_TRY(lookup_or_add(in, name, id));
  c->keys[slot] = name;
  c->ids[slot] = *id;
  c->used++;
  return TP_OK;
}

/* ---- writing a trace ------------------------------------------------------ */

static tp_rc insert_events(tp_store *s, int64_t config_id, const tp_trace_record *rec) {
  interner in = {.store = s};
  sqlite3_stmt *ev = NULL;
  tp_rc rc = prepare(s, "SELECT id FROM strings WHERE text = ?", &in.find);
  if (rc == TP_OK) rc = prepare(s, "INSERT INTO strings (text) VALUES (?)", &in.insert);
  if (rc == TP_OK)
    rc = prepare(s,
                 "INSERT INTO events (config_id, rank, device, stream, kind, category, name_id, "
                 "start_ns, end_ns, bytes, correlation, copy_kind, peer_device) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 &ev);
  for (size_t i = 0; rc == TP_OK && i < rec->n_events; i++) {
    const tp_trace_event *e = &rec->events[i];
    int64_t name_id = 0;
    rc = intern(&in, e->name, &name_id);
    if (rc != TP_OK) break;
    int is_copy = e->copy_kind && strcmp(e->copy_kind, "none") != 0;
    int b = sqlite3_bind_int64(ev, 1, config_id);
    b = b ? b : sqlite3_bind_int(ev, 2, e->rank);
    b = b ? b : sqlite3_bind_int(ev, 3, e->device);
    b = b ? b
          : (e->stream == TP_TRACE_NO_STREAM ? sqlite3_bind_null(ev, 4)
                                             : sqlite3_bind_int64(ev, 4, e->stream));
    b = b ? b : sqlite3_bind_text(ev, 5, e->kind, -1, SQLITE_STATIC);
    b = b ? b : sqlite3_bind_text(ev, 6, e->category, -1, SQLITE_STATIC);
    b = b ? b : sqlite3_bind_int64(ev, 7, name_id);
    b = b ? b : sqlite3_bind_int64(ev, 8, (int64_t)e->start_ns);
    b = b ? b : sqlite3_bind_int64(ev, 9, (int64_t)e->end_ns);
    b = b ? b : sqlite3_bind_int64(ev, 10, (int64_t)e->bytes);
    b = b ? b : sqlite3_bind_int64(ev, 11, e->correlation);
    b = b ? b : bind_text_or_null(ev, 12, is_copy ? e->copy_kind : NULL);
    b = b ? b
          : (e->peer_device < 0 ? sqlite3_bind_null(ev, 13)
                                : sqlite3_bind_int(ev, 13, e->peer_device));
    rc = tp_store_step_done(s, ev, b, "inserting into events");
  }
  sqlite3_finalize(ev);
  sqlite3_finalize(in.find);
  sqlite3_finalize(in.insert);
  cache_free(&in.cache);
  return rc;
}

static tp_rc insert_overlap(tp_store *s, int64_t config_id, const tp_trace_record *rec) {
  if (rec->n_overlap == 0) return TP_OK;
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(s,
                 "INSERT INTO overlap (config_id, rank, window, window_start_ns, window_end_ns, "
                 "comm_ns, compute_ns, overlap_ns, exposed_ns, overlap_pct, sync_ns) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 &st));
  tp_rc rc = TP_OK;
  for (size_t i = 0; rc == TP_OK && i < rec->n_overlap; i++) {
    const tp_trace_overlap *o = &rec->overlap[i];
    int b = sqlite3_bind_int64(st, 1, config_id);
    b = b ? b : sqlite3_bind_int(st, 2, o->rank);
    b = b ? b : sqlite3_bind_int(st, 3, o->window);
    b = b ? b : sqlite3_bind_int64(st, 4, (int64_t)o->window_start_ns);
    b = b ? b : sqlite3_bind_int64(st, 5, (int64_t)o->window_end_ns);
    b = b ? b : sqlite3_bind_int64(st, 6, (int64_t)o->comm_ns);
    b = b ? b : sqlite3_bind_int64(st, 7, (int64_t)o->compute_ns);
    b = b ? b : sqlite3_bind_int64(st, 8, (int64_t)o->overlap_ns);
    b = b ? b : sqlite3_bind_int64(st, 9, (int64_t)o->exposed_ns);
    /* A percentage of nothing is no percentage: NULL, not 0. */
    b = b ? b : tp_store_bind_real_or_null(st, 10, o->comm_ns > 0 ? o->overlap_pct : NAN);
    b = b ? b : sqlite3_bind_int64(st, 11, (int64_t)o->sync_ns);
    rc = tp_store_step_done(s, st, b, "inserting into overlap");
  }
  sqlite3_finalize(st);
  return rc;
}

static tp_rc insert_trace_row(tp_store *s, int64_t config_id, const tp_trace_record *rec) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(s,
                 "INSERT INTO traces (config_id, traced_iters, traced_median_us, "
                 "untraced_median_us, overhead, evidence_ok, evidence_message, dropped_records, "
                 "clock_offset_ns, evidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 &st));
  double traced = rec->traced_median_us, untraced = rec->untraced_median_us;
  double overhead =
      (isfinite(traced) && isfinite(untraced) && untraced > 0) ? traced / untraced - 1.0 : NAN;
  int b = sqlite3_bind_int64(st, 1, config_id);
  b = b ? b : sqlite3_bind_int(st, 2, rec->traced_iters);
  b = b ? b : tp_store_bind_real_or_null(st, 3, traced);
  b = b ? b : tp_store_bind_real_or_null(st, 4, untraced);
  b = b ? b : tp_store_bind_real_or_null(st, 5, overhead);
  const char *word = evidence_word(rec);
  /* evidence_ok, for readers of version 2: 1 only for "ok" */
  b = b ? b : sqlite3_bind_int(st, 6, is_ok(word));
  b = b ? b
        : bind_text_or_null(st, 7,
                            rec->evidence_message && *rec->evidence_message ? rec->evidence_message
                                                                            : NULL);
  b = b ? b : sqlite3_bind_int64(st, 8, (int64_t)rec->dropped_records);
  b = b ? b : sqlite3_bind_int64(st, 9, rec->clock_offset_ns);
  b = b ? b : sqlite3_bind_text(st, 10, word, -1, SQLITE_STATIC);
  tp_rc rc = tp_store_step_done(s, st, b, "inserting into traces");
  sqlite3_finalize(st);
  return rc;
}

/* Each op's verdict into the configuration's schedules row of that op. */
static tp_rc update_schedules(tp_store *s, int64_t config_id, const tp_trace_record *rec) {
  if (rec->n_op_evidence == 0) return TP_OK;
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(s,
                 "UPDATE schedules SET evidence = ?, evidence_message = ? "
                 "WHERE config_id = ? AND seq = ?",
                 &st));
  tp_rc rc = TP_OK;
  for (size_t i = 0; rc == TP_OK && i < rec->n_op_evidence; i++) {
    const tp_trace_op_evidence *op = &rec->op_evidence[i];
    int b = sqlite3_bind_text(st, 1, op->evidence, -1, SQLITE_STATIC);
    b = b ? b : bind_text_or_null(st, 2, op->message && *op->message ? op->message : NULL);
    b = b ? b : sqlite3_bind_int64(st, 3, config_id);
    b = b ? b : sqlite3_bind_int(st, 4, op->seq);
    rc = tp_store_step_done(s, st, b, "recording an op's evidence in schedules");
    if (rc == TP_OK && sqlite3_changes(tp_store_db(s)) != 1)
      rc = TP_FAIL(TP_EINTERNAL,
                   "trace record: evidence for op %d, but configuration %lld has no schedules row "
                   "%d",
                   op->seq, (long long)config_id, op->seq);
  }
  sqlite3_finalize(st);
  return rc;
}

tp_rc tp_store_write_trace(tp_store *store, int64_t config_id, const tp_trace_record *rec) {
  /* The traces row goes first: a second trace of one configuration fails on
   * its primary key before thousands of events are written for nothing. */
  TP_TRY(insert_trace_row(store, config_id, rec));
  TP_TRY(update_schedules(store, config_id, rec));
  TP_TRY(insert_events(store, config_id, rec));
  return insert_overlap(store, config_id, rec);
}

tp_rc tp_store_put_trace(tp_store *store, int64_t config_id, const tp_trace_record *rec) {
  if (!store) return TP_FAIL(TP_EINTERNAL, "tp_store_put_trace: NULL store");
  TP_TRY(tp_store_check_trace(rec));
  TP_TRY(tp_store_exec(store, "BEGIN IMMEDIATE",
                       "starting to write a trace (is another tpbench writing?)"));
  tp_rc rc = tp_store_write_trace(store, config_id, rec);
  if (rc == TP_OK) rc = tp_store_exec(store, "COMMIT", "committing a trace");
  if (rc != TP_OK) {
    tp_store_rollback(store);
    rc = TP_STORE_CONTEXT(rc, "trace of configuration %lld not written", (long long)config_id);
  }
  return rc;
}

/* ---- reading traces ------------------------------------------------------ */

static void copy_text(char *dst, size_t cap, const unsigned char *text) {
  snprintf(dst, cap, "%s", text ? (const char *)text : "");
}

static tp_rc read_trace_row(tp_store *s, int64_t config_id, int *found, tp_trace_info *out) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(s,
                 "SELECT traced_iters, traced_median_us, untraced_median_us, overhead, "
                 "evidence_ok, evidence_message, dropped_records, coalesce(clock_offset_ns, 0), "
                 "(SELECT count(*) FROM events e WHERE e.config_id = t.config_id), "
                 "(SELECT count(DISTINCT rank) FROM events e WHERE e.config_id = t.config_id), "
                 "coalesce(evidence, CASE evidence_ok WHEN 1 THEN 'ok' ELSE 'failed' END) "
                 "FROM traces t WHERE config_id = ?",
                 &st));
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, config_id);
  step = step == SQLITE_OK ? sqlite3_step(st) : step;
  if (step == SQLITE_ROW) {
    *found = 1;
    out->config_id = config_id;
    out->traced_iters = sqlite3_column_int(st, 0);
    out->traced_median_us = real_or_nan(st, 1);
    out->untraced_median_us = real_or_nan(st, 2);
    out->overhead = real_or_nan(st, 3);
    out->evidence_ok = sqlite3_column_int(st, 4) != 0;
    copy_text(out->evidence_message, sizeof out->evidence_message, sqlite3_column_text(st, 5));
    out->dropped_records = (uint64_t)sqlite3_column_int64(st, 6);
    out->clock_offset_ns = sqlite3_column_int64(st, 7);
    out->n_events = sqlite3_column_int64(st, 8);
    out->n_ranks = sqlite3_column_int(st, 9);
    copy_text(out->evidence, sizeof out->evidence, sqlite3_column_text(st, 10));
  } else if (step != SQLITE_DONE) {
    rc = TP_STORE_SQL_FAIL(s, "reading the trace of configuration %lld", (long long)config_id);
  }
  sqlite3_finalize(st);
  return rc;
}

/* Median synchronisation over the overlap rows that recorded it (NULL before
 * schemas/003, when barriers and waits counted as communication). */
static tp_rc summarise_sync(tp_store *s, int64_t config_id, tp_trace_info *out) {
  sqlite3_stmt *st = NULL;
  TP_TRY(
      prepare(s, "SELECT sync_ns FROM overlap WHERE config_id = ? AND sync_ns IS NOT NULL", &st));
  double *values = NULL;
  size_t n = 0, cap = 0;
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, config_id);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    double *grown = tp_grow_array(values, &cap, n, sizeof *values);
    if (!grown) {
      rc = out_of_memory();
      break;
    }
    values = grown;
    values[n++] = (double)sqlite3_column_int64(st, 0);
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_STORE_SQL_FAIL(s, "reading the synchronisation of configuration %lld",
                           (long long)config_id);
  sqlite3_finalize(st);
  out->sync_ns_median = rc == TP_OK ? median_of(values, n) : NAN;
  free(values);
  return rc;
}

/* Medians of the overlap rows: overlap % over rows that had communication,
 * exposed and total communication over all rows. */
static tp_rc summarise_overlap(tp_store *s, int64_t config_id, tp_trace_info *out) {
  tp_trace_overlap *rows = NULL;
  size_t n = 0;
  TP_TRY(tp_store_trace_overlap(s, config_id, &rows, &n));
  out->n_windows = (int)n;
  out->overlap_pct_median = out->exposed_ns_median = out->comm_ns_median = NAN;
  double *values = malloc((n ? n : 1) * sizeof *values);
  if (!values) {
    free(rows);
    return out_of_memory();
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (rows[i].comm_ns > 0 && isfinite(rows[i].overlap_pct)) values[k++] = rows[i].overlap_pct;
  out->overlap_pct_median = median_of(values, k);
  for (size_t i = 0; i < n; i++) values[i] = (double)rows[i].exposed_ns;
  out->exposed_ns_median = median_of(values, n);
  for (size_t i = 0; i < n; i++) values[i] = (double)rows[i].comm_ns;
  out->comm_ns_median = median_of(values, n);
  free(values);
  free(rows);
  return summarise_sync(s, config_id, out);
}

tp_rc tp_store_trace_info(tp_store *store, int64_t config_id, int *found, tp_trace_info *out) {
  if (!store || !found || !out) return TP_FAIL(TP_EINTERNAL, "tp_store_trace_info: NULL argument");
  memset(out, 0, sizeof *out);
  *found = 0;
  TP_TRY(read_trace_row(store, config_id, found, out));
  if (!*found) return TP_OK;
  return summarise_overlap(store, config_id, out);
}

tp_rc tp_store_trace_absence(tp_store *store, int64_t config_id, tp_trace_absence *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_store_trace_absence: NULL argument");
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = NULL;
  TP_TRY(
      prepare(store,
              "SELECT c.run_id, instr(' ' || coalesce(r.command_line, '') || ' ', ' --trace ') "
              "> 0, (SELECT count(*) FROM traces t JOIN configs o ON o.id = t.config_id WHERE "
              "o.run_id = c.run_id) FROM configs c JOIN runs r ON r.id = c.run_id WHERE c.id = ?",
              &st));
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, config_id);
  step = step == SQLITE_OK ? sqlite3_step(st) : step;
  if (step == SQLITE_ROW) {
    out->run_id = sqlite3_column_int64(st, 0);
    out->run_asked_trace = sqlite3_column_int(st, 1) != 0;
    out->traced_in_run = sqlite3_column_int64(st, 2);
  } else if (step == SQLITE_DONE) {
    rc = TP_FAIL(TP_EUSAGE, "%s: there is no configuration %lld", tp_store_path(store),
                 (long long)config_id);
  } else {
    rc = TP_STORE_SQL_FAIL(store, "reading the run of configuration %lld", (long long)config_id);
  }
  sqlite3_finalize(st);
  return rc;
}

tp_rc tp_store_each_trace_event(tp_store *store, int64_t config_id, tp_trace_event_fn fn,
                                void *ctx) {
  if (!store || !fn) return TP_FAIL(TP_EINTERNAL, "tp_store_each_trace_event: NULL argument");
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT s.text, e.kind, e.category, e.copy_kind, e.start_ns, e.end_ns, e.bytes, "
                 "e.rank, e.device, e.stream, coalesce(e.correlation, 0), "
                 "coalesce(e.peer_device, -1) FROM events e JOIN strings s ON s.id = e.name_id "
                 "WHERE e.config_id = ? ORDER BY e.rank, e.start_ns, e.id",
                 &st));
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, config_id);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    tp_trace_event e = {
        .name = (const char *)sqlite3_column_text(st, 0),
        .kind = (const char *)sqlite3_column_text(st, 1),
        .category = (const char *)sqlite3_column_text(st, 2),
        .copy_kind = (const char *)sqlite3_column_text(st, 3),
        .start_ns = (uint64_t)sqlite3_column_int64(st, 4),
        .end_ns = (uint64_t)sqlite3_column_int64(st, 5),
        .bytes = (uint64_t)sqlite3_column_int64(st, 6),
        .rank = sqlite3_column_int(st, 7),
        .device = sqlite3_column_int(st, 8),
        .stream = sqlite3_column_type(st, 9) == SQLITE_NULL ? TP_TRACE_NO_STREAM
                                                            : (uint32_t)sqlite3_column_int64(st, 9),
        .correlation = (uint32_t)sqlite3_column_int64(st, 10),
        .peer_device = sqlite3_column_int(st, 11),
    };
    rc = fn(ctx, &e);
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_STORE_SQL_FAIL(store, "reading the events of configuration %lld", (long long)config_id);
  sqlite3_finalize(st);
  return rc;
}

static tp_rc grow_overlap(tp_trace_overlap **rows, size_t *cap, size_t n) {
  tp_trace_overlap *grown = tp_grow_array(*rows, cap, n, sizeof **rows);
  if (!grown) return out_of_memory();
  *rows = grown;
  return TP_OK;
}

tp_rc tp_store_trace_overlap(tp_store *store, int64_t config_id, tp_trace_overlap **rows,
                             size_t *n) {
  if (!store || !rows || !n) return TP_FAIL(TP_EINTERNAL, "tp_store_trace_overlap: NULL argument");
  *rows = NULL;
  *n = 0;
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT rank, window, coalesce(window_start_ns, 0), coalesce(window_end_ns, 0), "
                 "comm_ns, compute_ns, overlap_ns, exposed_ns, overlap_pct, "
                 "coalesce(sync_ns, 0) FROM overlap WHERE config_id = ? ORDER BY rank, window",
                 &st));
  tp_rc rc = TP_OK;
  size_t cap = 0;
  int step = sqlite3_bind_int64(st, 1, config_id);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    rc = grow_overlap(rows, &cap, *n);
    if (rc != TP_OK) break;
    tp_trace_overlap *o = &(*rows)[(*n)++];
    o->rank = sqlite3_column_int(st, 0);
    o->window = sqlite3_column_int(st, 1);
    o->window_start_ns = (uint64_t)sqlite3_column_int64(st, 2);
    o->window_end_ns = (uint64_t)sqlite3_column_int64(st, 3);
    o->comm_ns = (uint64_t)sqlite3_column_int64(st, 4);
    o->compute_ns = (uint64_t)sqlite3_column_int64(st, 5);
    o->overlap_ns = (uint64_t)sqlite3_column_int64(st, 6);
    o->exposed_ns = (uint64_t)sqlite3_column_int64(st, 7);
    o->overlap_pct = real_or_nan(st, 8);
    o->sync_ns = (uint64_t)sqlite3_column_int64(st, 9);
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc =
        TP_STORE_SQL_FAIL(store, "reading the overlap of configuration %lld", (long long)config_id);
  sqlite3_finalize(st);
  if (rc != TP_OK) {
    free(*rows);
    *rows = NULL;
    *n = 0;
  }
  return rc;
}

/* ---- finding configurations ---------------------------------------------- */

static tp_rc config_exists(tp_store *s, int64_t config_id, int64_t *out) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(s, "SELECT 1 FROM configs WHERE id = ?", &st));
  int step = sqlite3_bind_int64(st, 1, config_id);
  step = step == SQLITE_OK ? sqlite3_step(st) : step;
  sqlite3_finalize(st);
  if (step == SQLITE_ROW) {
    *out = config_id;
    return TP_OK;
  }
  if (step == SQLITE_DONE)
    return TP_FAIL(TP_EUSAGE, "%s: there is no configuration %lld", tp_store_path(s),
                   (long long)config_id);
  return TP_STORE_SQL_FAIL(s, "looking up configuration %lld", (long long)config_id);
}

/* "Latest" is by when the run started, not by id: imported runs get new,
 * higher ids whatever their age. */
static tp_rc config_by_key(tp_store *s, const char *key, int64_t run_id, int prefer_traced,
                           int64_t *out) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(s,
                 "SELECT c.id FROM configs c JOIN runs r ON r.id = c.run_id "
                 "WHERE c.config_key = ?1 AND (?2 = 0 OR c.run_id = ?2) "
                 "ORDER BY (?3 AND EXISTS (SELECT 1 FROM traces t WHERE t.config_id = c.id)) DESC, "
                 "r.started_at DESC, c.id DESC LIMIT 1",
                 &st));
  int step = sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  step = step ? step : sqlite3_bind_int64(st, 2, run_id);
  step = step ? step : sqlite3_bind_int(st, 3, prefer_traced != 0);
  step = step == SQLITE_OK ? sqlite3_step(st) : step;
  tp_rc rc = TP_OK;
  if (step == SQLITE_ROW) *out = sqlite3_column_int64(st, 0);
  else if (step == SQLITE_DONE && run_id > 0)
    rc = TP_FAIL(TP_EUSAGE, "%s: run %lld has no configuration with key %s", tp_store_path(s),
                 (long long)run_id, key);
  else if (step == SQLITE_DONE)
    rc = TP_FAIL(TP_EUSAGE, "%s: no configuration has key %s", tp_store_path(s), key);
  else rc = TP_STORE_SQL_FAIL(s, "looking up the configuration key");
  sqlite3_finalize(st);
  return rc;
}

tp_rc tp_store_find_config(tp_store *store, int64_t config_id, const char *key, int64_t run_id,
                           int prefer_traced, int64_t *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_store_find_config: NULL argument");
  if (config_id < 0)
    return TP_FAIL(TP_EUSAGE, "configuration id %lld is not valid", (long long)config_id);
  if (config_id > 0) return config_exists(store, config_id, out);
  if (!key || !*key) return TP_FAIL(TP_EUSAGE, "no configuration given (an id or a key)");
  return config_by_key(store, key, run_id, prefer_traced, out);
}

/* Grows a times array (and its rounds, when asked for) to hold one more. */
static tp_rc grow_series(double **times, int **rounds, size_t n, size_t *cap) {
  size_t times_cap = *cap, rounds_cap = *cap;
  double *grown = tp_grow_array(*times, &times_cap, n, sizeof **times);
  if (!grown) return out_of_memory();
  *times = grown;
  if (rounds) {
    int *grown_rounds = tp_grow_array(*rounds, &rounds_cap, n, sizeof **rounds);
    if (!grown_rounds) return out_of_memory();
    *rounds = grown_rounds;
  }
  *cap = times_cap;
  return TP_OK;
}

tp_rc tp_store_round_times(tp_store *store, int64_t config_id, double **times, int **rounds,
                           size_t *n) {
  if (!store || !times || !n) return TP_FAIL(TP_EINTERNAL, "tp_store_round_times: NULL argument");
  *times = NULL;
  if (rounds) *rounds = NULL;
  *n = 0;
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT max(time_us), min(round) FROM samples WHERE config_id = ? AND time_us IS "
                 "NOT NULL GROUP BY iter ORDER BY iter",
                 &st));
  tp_rc rc = TP_OK;
  size_t cap = 0;
  int step = sqlite3_bind_int64(st, 1, config_id);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    rc = grow_series(times, rounds, *n, &cap);
    if (rc != TP_OK) break;
    (*times)[*n] = sqlite3_column_double(st, 0);
    if (rounds) (*rounds)[*n] = sqlite3_column_int(st, 1);
    (*n)++;
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc =
        TP_STORE_SQL_FAIL(store, "reading the samples of configuration %lld", (long long)config_id);
  sqlite3_finalize(st);
  if (rc != TP_OK) {
    free(*times);
    *times = NULL;
    if (rounds) {
      free(*rounds);
      *rounds = NULL;
    }
    *n = 0;
  }
  return rc;
}

tp_rc tp_store_iteration_times(tp_store *store, int64_t config_id, double **times, size_t *n) {
  return tp_store_round_times(store, config_id, times, NULL, n);
}
