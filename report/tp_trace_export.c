/*
 * tp_trace_export.c — Chrome trace JSON of one configuration's trace (see
 * tp_trace_export.h for the layout).
 *
 * Two passes over the stored events: the first learns what the metadata
 * needs (the earliest start, which ranks, devices and streams occur, the
 * largest stream id, which ranks have NVTX ranges), the second writes one
 * complete event per stored event. The document's frame is written by hand
 * and every value inside it by jansson, so strings are always escaped and
 * numbers always valid JSON.
 */
#include "report/tp_trace_export.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "report/tp_report_util.h"

/* Microseconds with nanosecond resolution print cleanly at 15 digits. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

enum { MAX_TRACKS = 4096 };

/* What pass one learns. */
typedef struct {
  uint64_t t0;
  int any;
  int64_t max_stream; /* -1 when no event has a stream */
  struct {
    int rank, device;
    uint32_t stream; /* TP_TRACE_NO_STREAM for ranges and stream-less activity */
    int range;
  } tracks[MAX_TRACKS];
  int n_tracks;
} layout;

/* What the document says about the configuration. */
typedef struct {
  int64_t config_id, run_id;
  char *key, *commit, *gpu_name, *schedule;
  char label[256];
  tp_trace_info info;
} trace_meta;

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "trace export: out of memory"); }

/* ---- pass one: the layout ----------------------------------------------------- */

static void add_track(layout *l, const tp_trace_event *e) {
  int range = !strcmp(e->kind, "range");
  uint32_t stream = range ? TP_TRACE_NO_STREAM : e->stream;
  for (int i = 0; i < l->n_tracks; i++) {
    if (l->tracks[i].rank == e->rank && l->tracks[i].stream == stream &&
        l->tracks[i].range == range) {
      if (l->tracks[i].device < e->device) l->tracks[i].device = e->device;
      return;
    }
  }
  if (l->n_tracks == MAX_TRACKS) return; /* unnamed past this: still shown, just not named */
  l->tracks[l->n_tracks].rank = e->rank;
  l->tracks[l->n_tracks].device = e->device;
  l->tracks[l->n_tracks].stream = stream;
  l->tracks[l->n_tracks++].range = range;
}

static tp_rc learn_layout(void *ctx, const tp_trace_event *e) {
  layout *l = ctx;
  if (!l->any || e->start_ns < l->t0) l->t0 = e->start_ns;
  l->any = 1;
  if (e->stream != TP_TRACE_NO_STREAM && (int64_t)e->stream > l->max_stream)
    l->max_stream = e->stream;
  add_track(l, e);
  return TP_OK;
}

static int64_t tid_of(const layout *l, const tp_trace_event *e) {
  if (!strcmp(e->kind, "range")) return l->max_stream + 1;
  if (e->stream == TP_TRACE_NO_STREAM) return l->max_stream + 2;
  return e->stream;
}

/* ---- the configuration ---------------------------------------------------------- */

static char *dup_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? strdup((const char *)t) : NULL;
}

static tp_rc load_meta(tp_store *store, int64_t config_id, trace_meta *m) {
  sqlite3_stmt *st = NULL;
  const char *sql =
      "SELECT c.run_id, c.config_key, r.commit_sha, r.gpu_name, "
      "(SELECT group_concat(label, '+') FROM (SELECT schedule || CASE WHEN chunks > 0 THEN ' x' "
      "|| chunks ELSE '' END AS label FROM schedules WHERE config_id = c.id ORDER BY "
      "seq)), " TP_LABEL_COLUMNS " FROM configs c JOIN runs r ON r.id = c.run_id WHERE c.id = ?";
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: trace export: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, config_id);
  step = step == SQLITE_OK ? sqlite3_step(st) : step;
  if (step == SQLITE_ROW) {
    m->config_id = config_id;
    m->run_id = sqlite3_column_int64(st, 0);
    m->key = dup_text(st, 1);
    m->commit = dup_text(st, 2);
    m->gpu_name = dup_text(st, 3);
    m->schedule = dup_text(st, 4);
    tp_config_axes axes;
    tp_axes_from_row(st, 5, &axes);
    tp_config_label(m->label, sizeof m->label, &axes);
    if (!m->key) rc = out_of_memory();
  } else if (step == SQLITE_DONE) {
    rc = TP_FAIL(TP_EUSAGE, "%s: there is no configuration %lld", tp_store_path(store),
                 (long long)config_id);
  } else {
    rc = TP_FAIL(TP_ESQLITE, "%s: trace export: %s", tp_store_path(store),
                 sqlite3_errmsg(tp_store_db(store)));
  }
  sqlite3_finalize(st);
  return rc;
}

static void free_meta(trace_meta *m) {
  free(m->key);
  free(m->commit);
  free(m->gpu_name);
  free(m->schedule);
}

/* ---- writing ----------------------------------------------------------------------- */

typedef struct {
  FILE *out;
  const layout *l;
  const trace_meta *m;
  int first; /* no comma before the first event */
  int failed;
} writer;

/* Dumps one value (taking the reference), with a comma before all but the first. */
static void emit(writer *w, json_t *value) {
  if (!value) {
    w->failed = 1;
    return;
  }
  if (!w->first) fputc(',', w->out);
  fputc('\n', w->out);
  w->first = 0;
  if (json_dumpf(value, w->out, DUMP_FLAGS) != 0) w->failed = 1;
  json_decref(value);
}

/* {"name": what, "ph": "M", "pid", "tid", "args": {arg_key: arg}} */
static json_t *metadata(const char *what, int pid, int64_t tid, const char *arg_key, json_t *arg) {
  json_t *o = json_object(), *args = json_object();
  tp_json_builder jb = {0};
  if (!o || !args) jb.failed = 1;
  if (args) tp_json_set(&jb, args, arg_key, arg);
  else json_decref(arg);
  if (o) {
    tp_json_set(&jb, o, "name", json_string(what));
    tp_json_set(&jb, o, "ph", json_string("M"));
    tp_json_set(&jb, o, "pid", json_integer(pid));
    tp_json_set(&jb, o, "tid", json_integer(tid));
    tp_json_set(&jb, o, "args", args);
  } else {
    json_decref(args);
  }
  if (jb.failed) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static void write_rank_metadata(writer *w, int rank) {
  char name[300];
  snprintf(name, sizeof name, "rank %d (%s)", rank, w->m->gpu_name ? w->m->gpu_name : "GPU");
  emit(w, metadata("process_name", rank, 0, "name", tp_json_str(name)));
  emit(w, metadata("process_sort_index", rank, 0, "sort_index", json_integer(rank)));
}

static void write_track_metadata(writer *w, int i) {
  const layout *l = w->l;
  int rank = l->tracks[i].rank;
  char name[64];
  int64_t tid, sort;
  if (l->tracks[i].range) {
    snprintf(name, sizeof name, "NVTX");
    tid = l->max_stream + 1;
    sort = -1; /* above the streams */
  } else if (l->tracks[i].stream == TP_TRACE_NO_STREAM) {
    snprintf(name, sizeof name, "no stream");
    tid = l->max_stream + 2;
    sort = tid;
  } else {
    snprintf(name, sizeof name, "stream %" PRIu32, l->tracks[i].stream);
    tid = sort = l->tracks[i].stream;
  }
  emit(w, metadata("thread_name", rank, tid, "name", json_string(name)));
  emit(w, metadata("thread_sort_index", rank, tid, "sort_index", json_integer(sort)));
}

static void write_metadata(writer *w) {
  const layout *l = w->l;
  for (int i = 0; i < l->n_tracks; i++) {
    int seen = 0;
    for (int k = 0; k < i; k++) seen |= l->tracks[k].rank == l->tracks[i].rank;
    if (!seen) write_rank_metadata(w, l->tracks[i].rank);
  }
  for (int i = 0; i < l->n_tracks; i++) write_track_metadata(w, i);
}

static json_t *event_args(tp_json_builder *jb, const tp_trace_event *e, const trace_meta *m) {
  json_t *args = json_object();
  if (!args) return NULL;
  tp_json_set(jb, args, "kind", tp_json_str(e->kind));
  tp_json_set(jb, args, "bytes", json_integer((json_int_t)e->bytes));
  tp_json_set(jb, args, "copy_kind", e->copy_kind ? tp_json_str(e->copy_kind) : json_null());
  tp_json_set(jb, args, "correlation", json_integer(e->correlation));
  tp_json_set(jb, args, "device", json_integer(e->device));
  tp_json_set(jb, args, "peer_device",
              e->peer_device >= 0 ? json_integer(e->peer_device) : json_null());
  tp_json_set(jb, args, "schedule", tp_json_str(m->schedule));
  return args;
}

static tp_rc write_event(void *ctx, const tp_trace_event *e) {
  writer *w = ctx;
  tp_json_builder jb = {0};
  json_t *o = json_object();
  if (!o) return out_of_memory();
  tp_json_set(&jb, o, "name", tp_json_str(e->name));
  /* CUPTI's synchronisation records are "sync" even where a trace written
   * before schemas/003 stored them as "other" */
  tp_json_set(&jb, o, "cat", tp_json_str(strcmp(e->kind, "sync") == 0 ? "sync" : e->category));
  tp_json_set(&jb, o, "ph", json_string("X"));
  tp_json_set(&jb, o, "pid", json_integer(e->rank));
  tp_json_set(&jb, o, "tid", json_integer(tid_of(w->l, e)));
  tp_json_set(&jb, o, "ts", json_real((double)(e->start_ns - w->l->t0) / 1000.0));
  tp_json_set(&jb, o, "dur", json_real((double)(e->end_ns - e->start_ns) / 1000.0));
  tp_json_set(&jb, o, "args", event_args(&jb, e, w->m));
  if (jb.failed) {
    json_decref(o);
    return out_of_memory();
  }
  emit(w, o);
  return w->failed ? TP_FAIL(TP_EIO, "trace export: writing an event failed") : TP_OK;
}

/* t0: the tracer-clock time that ts 0 stands for. */
static json_t *other_data(tp_json_builder *jb, const trace_meta *m, uint64_t t0) {
  const tp_trace_info *t = &m->info;
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "tool", json_string("tpbench"));
  tp_json_set(jb, o, "config_id", json_integer(m->config_id));
  tp_json_set(jb, o, "config_key", tp_json_str(m->key));
  tp_json_set(jb, o, "label", tp_json_str(m->label));
  tp_json_set(jb, o, "run_id", json_integer(m->run_id));
  tp_json_set(jb, o, "commit", tp_json_str(m->commit));
  tp_json_set(jb, o, "schedule", tp_json_str(m->schedule));
  tp_json_set(jb, o, "traced_iters", json_integer(t->traced_iters));
  tp_json_set(jb, o, "trace_overhead", tp_json_real(t->overhead));
  tp_json_set(jb, o, "evidence_ok", json_boolean(t->evidence_ok));
  tp_json_set(jb, o, "evidence_message",
              t->evidence_message[0] ? tp_json_str(t->evidence_message) : json_null());
  tp_json_set(jb, o, "dropped_records", json_integer((json_int_t)t->dropped_records));
  tp_json_set(jb, o, "overlap_pct_median", tp_json_real(t->overlap_pct_median));
  tp_json_set(jb, o, "exposed_comm_us_median", tp_json_real(t->exposed_ns_median / 1000.0));
  tp_json_set(jb, o, "comm_us_median", tp_json_real(t->comm_ns_median / 1000.0));
  tp_json_set(jb, o, "time_origin_ns", json_integer((json_int_t)t0));
  return o;
}

static tp_rc write_document(tp_store *store, FILE *out, const layout *l, const trace_meta *m) {
  tp_json_builder jb = {0};
  json_t *other = other_data(&jb, m, l->t0);
  if (!other || jb.failed) {
    json_decref(other);
    return out_of_memory();
  }
  fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":", out);
  int bad = json_dumpf(other, out, DUMP_FLAGS) != 0;
  json_decref(other);
  fputs(",\"traceEvents\":[", out);
  writer w = {out, l, m, 1, bad};
  write_metadata(&w);
  tp_rc rc = w.failed ? TP_FAIL(TP_EIO, "trace export: writing failed") : TP_OK;
  if (rc == TP_OK) rc = tp_store_each_trace_event(store, m->config_id, write_event, &w);
  fputs("\n]}\n", out);
  if (rc == TP_OK && (fflush(out) != 0 || ferror(out)))
    rc = TP_FAIL(TP_EIO, "trace export: writing the output failed");
  return rc;
}

tp_rc tp_report_chrome_trace(tp_store *store, int64_t config_id, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_chrome_trace: NULL argument");
  trace_meta m = {0};
  layout *l = calloc(1, sizeof *l);
  if (!l) return out_of_memory();
  l->max_stream = -1;
  int found = 0;
  tp_rc rc = load_meta(store, config_id, &m);
  if (rc == TP_OK) rc = tp_store_trace_info(store, config_id, &found, &m.info);
  if (rc == TP_OK && !found)
    rc = TP_FAIL(TP_EUSAGE, "%s: configuration %lld has no trace", tp_store_path(store),
                 (long long)config_id);
  if (rc == TP_OK) rc = tp_store_each_trace_event(store, config_id, learn_layout, l);
  if (rc == TP_OK) rc = write_document(store, out, l, &m);
  free(l);
  free_meta(&m);
  return rc;
}
