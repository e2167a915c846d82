/*
 * tp_trace_export.c — Chrome trace JSON of one configuration's trace (see
 * tp_trace_export.h for the layout).
 *
 * The trace is read whole and laid out by tp_trace_model (tracks that nest,
 * NVTX projections, launches); this file writes the tracks' metadata, one
 * complete event per slice and the flows. The document's frame is written by hand
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
#include "report/tp_trace_model.h"

/* Microseconds with nanosecond resolution print cleanly at 15 digits. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* What the document says about the configuration. */
typedef struct {
  int64_t config_id, run_id;
  char *key, *commit, *gpu_name, *schedule;
  char label[256];
  tp_trace_info info;
} trace_meta;

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "trace export: out of memory"); }

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

static void write_metadata(tp_trace_writer *w, const tp_trace_model *m, const trace_meta *meta) {
  for (size_t i = 0; i < m->n_tracks; i++) {
    const tp_trace_track *t = &m->tracks[i];
    if (i == 0 || m->tracks[i - 1].rank != t->rank) {
      char name[300];
      snprintf(name, sizeof name, "rank %d (%s)", t->rank, meta->gpu_name ? meta->gpu_name : "GPU");
      tp_trace_emit(w, tp_trace_metadata("process_name", t->rank, 0, "name", tp_json_str(name)));
      tp_trace_emit(w, tp_trace_metadata("process_sort_index", t->rank, 0, "sort_index",
                                         json_integer(t->rank)));
    }
    tp_trace_emit(w,
                  tp_trace_metadata("thread_name", t->rank, t->tid, "name", json_string(t->name)));
    tp_trace_emit(w, tp_trace_metadata("thread_sort_index", t->rank, t->tid, "sort_index",
                                       json_integer(t->sort)));
  }
}

static json_t *event_args(tp_json_builder *jb, const tp_trace_slice *s, const tp_trace_model *m,
                          const trace_meta *meta) {
  const tp_trace_event *e = &s->ev;
  json_t *args = json_object();
  if (!args) return NULL;
  if (s->projected) {
    const tp_trace_event *cpu = &m->slices[s->range].ev;
    tp_json_set(jb, args, "kind", json_string("range (GPU projection)"));
    tp_json_set(jb, args, "cpu_ts", json_real(tp_trace_us(m, cpu->start_ns)));
    tp_json_set(jb, args, "cpu_dur", json_real((double)(cpu->end_ns - cpu->start_ns) / 1000.0));
    tp_json_set(jb, args, "device", json_integer(e->device));
    return args;
  }
  tp_json_set(jb, args, "kind", tp_json_str(e->kind));
  tp_json_set(jb, args, "bytes", json_integer((json_int_t)e->bytes));
  tp_json_set(jb, args, "copy_kind", e->copy_kind ? tp_json_str(e->copy_kind) : json_null());
  tp_json_set(jb, args, "correlation", json_integer(e->correlation));
  tp_json_set(jb, args, "device", json_integer(e->device));
  tp_json_set(jb, args, "peer_device",
              e->peer_device >= 0 ? json_integer(e->peer_device) : json_null());
  tp_json_set(jb, args, "schedule", tp_json_str(meta->schedule));
  if (s->range >= 0) tp_json_set(jb, args, "nvtx_range", tp_json_str(m->slices[s->range].ev.name));
  return args;
}

static const char *category_of(const tp_trace_slice *s) {
  if (s->projected) return "range_gpu";
  /* CUPTI's synchronisation records are "sync" even where a trace written
   * before schemas/003 stored them as "other" */
  return strcmp(s->ev.kind, "sync") == 0 ? "sync" : s->ev.category;
}

static void write_slice(tp_trace_writer *w, const tp_trace_model *m, const trace_meta *meta,
                        const tp_trace_slice *s) {
  const tp_trace_event *e = &s->ev;
  tp_json_builder jb = {0};
  json_t *o = json_object();
  if (!o) {
    w->failed = 1;
    return;
  }
  tp_json_set(&jb, o, "name", tp_json_str(e->name));
  tp_json_set(&jb, o, "cat", tp_json_str(category_of(s)));
  tp_json_set(&jb, o, "ph", json_string("X"));
  tp_json_set(&jb, o, "pid", json_integer(e->rank));
  tp_json_set(&jb, o, "tid", json_integer(m->tracks[s->track].tid));
  tp_json_set(&jb, o, "ts", json_real(tp_trace_us(m, e->start_ns)));
  tp_json_set(&jb, o, "dur", json_real((double)(e->end_ns - e->start_ns) / 1000.0));
  tp_json_set(&jb, o, "args", event_args(&jb, s, m, meta));
  if (jb.failed) {
    json_decref(o);
    o = NULL;
  }
  tp_trace_emit(w, o);
}

/* An arrow from the NVTX range a device event's launch was given to (its
 * start, where the range is the innermost slice) to the event. */
static void write_flow(tp_trace_writer *w, const tp_trace_model *m, const tp_trace_slice *s,
                       int64_t id) {
  const tp_trace_slice *r = &m->slices[s->range];
  tp_trace_emit(w, tp_trace_flow('s', id, r->ev.rank, m->tracks[r->track].tid,
                                 tp_trace_us(m, r->ev.start_ns), "launch"));
  tp_trace_emit(w, tp_trace_flow('f', id, s->ev.rank, m->tracks[s->track].tid,
                                 tp_trace_us(m, s->ev.start_ns), "launch"));
}

/* t0: the tracer-clock time that ts 0 stands for. */
static json_t *other_data(tp_json_builder *jb, const trace_meta *m, const tp_trace_model *model) {
  const tp_trace_info *t = &m->info;
  uint64_t t0 = model->t0;
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
  tp_json_set(jb, o, "overflow_slices", json_integer((json_int_t)model->n_overflow));
  tp_json_set(jb, o, "launches_placed", json_integer((json_int_t)model->n_launched));
  return o;
}

static tp_rc write_document(FILE *out, const tp_trace_model *m, const trace_meta *meta) {
  tp_json_builder jb = {0};
  json_t *other = other_data(&jb, meta, m);
  if (!other || jb.failed) {
    json_decref(other);
    return out_of_memory();
  }
  fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":", out);
  int bad = json_dumpf(other, out, DUMP_FLAGS) != 0;
  json_decref(other);
  fputs(",\"traceEvents\":[", out);
  tp_trace_writer w = {out, 1, bad};
  write_metadata(&w, m, meta);
  for (size_t i = 0; i < m->n_slices && !w.failed; i++) write_slice(&w, m, meta, &m->slices[i]);
  int64_t flow = 0;
  for (size_t i = 0; i < m->n_events && !w.failed; i++)
    if (m->slices[i].range >= 0 && tp_trace_is_device_work(&m->slices[i].ev))
      write_flow(&w, m, &m->slices[i], ++flow);
  fputs("\n]}\n", out);
  if (w.failed) return TP_FAIL(TP_EIO, "trace export: writing an event failed");
  if (fflush(out) != 0 || ferror(out))
    return TP_FAIL(TP_EIO, "trace export: writing the output failed");
  return TP_OK;
}

tp_rc tp_report_chrome_trace(tp_store *store, int64_t config_id, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_chrome_trace: NULL argument");
  trace_meta meta = {0};
  tp_trace_model m = {0};
  int found = 0;
  tp_rc rc = load_meta(store, config_id, &meta);
  if (rc == TP_OK) rc = tp_store_trace_info(store, config_id, &found, &meta.info);
  if (rc == TP_OK && !found)
    rc = TP_FAIL(TP_EUSAGE, "%s: configuration %lld has no trace", tp_store_path(store),
                 (long long)config_id);
  if (rc == TP_OK) rc = tp_trace_model_load(store, config_id, &m);
  if (rc == TP_OK) rc = write_document(out, &m, &meta);
  tp_trace_model_free(&m);
  free_meta(&meta);
  return rc;
}
