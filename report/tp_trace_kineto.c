/*
 * tp_trace_kineto.c — one rank's trace in Kineto's JSON layout (see
 * tp_trace_kineto.h for what is written and tp_trace_model.h for the
 * tracks, projections and launches it shares with the Chrome export).
 *
 * The header is written by hand, in the order and spacing Kineto uses, so
 * that "distributedInfo" comes first and its rank reads `"rank": N`; every
 * value inside is made by jansson. Kernel names are demangled with
 * libiberty's cplus_demangle, as Kineto demangles them: readers recognise
 * NCCL's kernels by their demangled names ("ncclDevKernel_...").
 */
#include "report/tp_trace_kineto.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libiberty/demangle.h>
#include <sqlite3.h>

#include "report/tp_report_util.h"
#include "report/tp_trace_model.h"

/* The host process of rank r: apart from every device ordinal. */
enum { HOST_PID_BASE = 100000 };

#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "trace export: out of memory"); }

/* What the header says about the configuration. */
typedef struct {
  int64_t run_id;
  int tp;
  char key[512], gpu_name[256];
} kineto_meta;

static void copy_text(sqlite3_stmt *st, int col, char *buf, size_t cap) {
  const unsigned char *t = sqlite3_column_text(st, col);
  snprintf(buf, cap, "%s", t ? (const char *)t : "");
}

static tp_rc load_meta(tp_store *store, int64_t config_id, kineto_meta *m) {
  sqlite3_stmt *st = NULL;
  const char *sql = "SELECT c.run_id, c.tp, c.config_key, r.gpu_name FROM configs c JOIN runs r "
                    "ON r.id = c.run_id WHERE c.id = ?";
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: trace export: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  int step = sqlite3_bind_int64(st, 1, config_id);
  step = step == SQLITE_OK ? sqlite3_step(st) : step;
  tp_rc rc = TP_OK;
  if (step == SQLITE_ROW) {
    m->run_id = sqlite3_column_int64(st, 0);
    m->tp = sqlite3_column_int(st, 1);
    copy_text(st, 2, m->key, sizeof m->key);
    copy_text(st, 3, m->gpu_name, sizeof m->gpu_name);
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

/* The trace of config_id, or TP_EUSAGE when there is none. */
static tp_rc load_traced(tp_store *store, int64_t config_id, kineto_meta *meta, tp_trace_model *m) {
  TP_TRY(load_meta(store, config_id, meta));
  int found = 0;
  tp_trace_info info;
  TP_TRY(tp_store_trace_info(store, config_id, &found, &info));
  if (!found)
    return TP_FAIL(TP_EUSAGE, "%s: configuration %lld has no trace", tp_store_path(store),
                   (long long)config_id);
  return tp_trace_model_load(store, config_id, m);
}

tp_rc tp_report_trace_ranks(tp_store *store, int64_t config_id, int **ranks, size_t *n) {
  if (!store || !ranks || !n) return TP_FAIL(TP_EINTERNAL, "tp_report_trace_ranks: NULL argument");
  *ranks = NULL;
  *n = 0;
  kineto_meta meta;
  tp_trace_model m;
  TP_TRY(load_traced(store, config_id, &meta, &m));
  tp_rc rc = TP_OK;
  if (m.n_ranks_seen > 0) {
    *ranks = malloc((size_t)m.n_ranks_seen * sizeof **ranks);
    if (!*ranks) rc = out_of_memory();
  }
  int *out = *ranks;
  for (size_t i = 0; rc == TP_OK && out && i < m.n_events; i++) /* slices are in rank order */
    if (*n == 0 || out[*n - 1] != m.slices[i].ev.rank) out[(*n)++] = m.slices[i].ev.rank;
  tp_trace_model_free(&m);
  return rc;
}

/* ---- names and places ------------------------------------------------------------- */

static int on_host(const tp_trace_track *t) { return t->cls == TP_TRACK_NVTX_CPU; }

static int64_t pid_of(const tp_trace_track *t) {
  if (on_host(t)) return HOST_PID_BASE + (int64_t)t->rank;
  return t->device >= 0 ? t->device : t->rank;
}

static const char *kineto_category(const tp_trace_slice *s) {
  if (s->projected) return "gpu_user_annotation";
  const char *kind = s->ev.kind;
  if (!strcmp(kind, "range")) return "user_annotation";
  if (!strcmp(kind, "kernel")) return "kernel";
  if (!strcmp(kind, "memcpy")) return "gpu_memcpy";
  if (!strcmp(kind, "memset")) return "gpu_memset";
  return "cuda_sync";
}

static const char *copy_direction(const char *copy_kind) {
  if (!copy_kind) return "";
  if (!strcmp(copy_kind, "DtoD") || !strcmp(copy_kind, "PtoP")) return " (Device -> Device)";
  if (!strcmp(copy_kind, "HtoD")) return " (Host -> Device)";
  if (!strcmp(copy_kind, "DtoH")) return " (Device -> Host)";
  return "";
}

static const char *sync_name(const char *stored) {
  static const char *const names[][2] = {{"sync stream wait event", "Stream Wait Event"},
                                         {"sync stream", "Stream Sync"},
                                         {"sync event", "Event Sync"},
                                         {"sync context", "Context Sync"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(stored, names[i][0])) return names[i][1];
  return stored;
}

/* The event's name as Kineto writes it, as a new JSON string. */
static json_t *kineto_name(const tp_trace_slice *s) {
  const tp_trace_event *e = &s->ev;
  if (s->projected || !strcmp(e->kind, "range")) return tp_json_str(e->name);
  if (!strcmp(e->kind, "kernel")) {
    char *plain = cplus_demangle(e->name, DMGL_PARAMS | DMGL_ANSI);
    json_t *name = tp_json_str(plain ? plain : e->name);
    free(plain);
    return name;
  }
  if (!strcmp(e->kind, "memset")) return json_string("Memset (Device)");
  if (!strcmp(e->kind, "memcpy")) {
    char name[96];
    const char *kind = e->copy_kind ? e->copy_kind : "";
    snprintf(name, sizeof name, "Memcpy %s%s", kind, copy_direction(e->copy_kind));
    return tp_json_str(name);
  }
  return tp_json_str(sync_name(e->name));
}

/* ---- writing ------------------------------------------------------------------------ */

static void write_tracks(tp_trace_writer *w, const tp_trace_model *m, int rank,
                         const kineto_meta *meta) {
  int64_t named[2] = {-1, -1}; /* the pids named so far: the GPU's and the host's */
  for (size_t i = 0; i < m->n_tracks; i++) {
    const tp_trace_track *t = &m->tracks[i];
    if (t->rank != rank) continue;
    int64_t pid = pid_of(t);
    int which = on_host(t);
    if (named[which] != pid) {
      char name[400];
      if (which) snprintf(name, sizeof name, "rank %d (host)", rank);
      else
        snprintf(name, sizeof name, "rank %d GPU %lld (%s)", rank, (long long)pid, meta->gpu_name);
      tp_trace_emit(w, tp_trace_metadata("process_name", pid, 0, "name", tp_json_str(name)));
      tp_trace_emit(w,
                    tp_trace_metadata("process_sort_index", pid, 0, "sort_index",
                                      json_integer(which ? HOST_PID_BASE + (int64_t)rank : pid)));
      named[which] = pid;
    }
    tp_trace_emit(w, tp_trace_metadata("thread_name", pid, t->tid, "name", json_string(t->name)));
    tp_trace_emit(w, tp_trace_metadata("thread_sort_index", pid, t->tid, "sort_index",
                                       json_integer(t->sort)));
  }
}

static json_t *kineto_args(tp_json_builder *jb, const tp_trace_slice *s, const tp_trace_model *m) {
  const tp_trace_event *e = &s->ev;
  json_t *args = json_object();
  if (!args) return NULL;
  if (s->projected || !strcmp(e->kind, "range")) {
    /* no "stream": a reader that takes every event with a stream for GPU work would count
     * an annotation as a kernel */
    if (s->projected) tp_json_set(jb, args, "device", json_integer(e->device));
    else tp_json_set(jb, args, "marker id", json_integer(e->correlation));
    return args;
  }
  tp_json_set(jb, args, "device", json_integer(e->device));
  if (e->stream != TP_TRACE_NO_STREAM) tp_json_set(jb, args, "stream", json_integer(e->stream));
  tp_json_set(jb, args, "correlation", json_integer(e->correlation));
  if (!strcmp(e->kind, "memcpy") || !strcmp(e->kind, "memset"))
    tp_json_set(jb, args, "bytes", json_integer((json_int_t)e->bytes));
  if (e->peer_device >= 0) tp_json_set(jb, args, "peer device", json_integer(e->peer_device));
  tp_json_set(jb, args, "tpbench category", tp_json_str(e->category));
  if (s->range >= 0) tp_json_set(jb, args, "nvtx range", tp_json_str(m->slices[s->range].ev.name));
  return args;
}

static void write_slice(tp_trace_writer *w, const tp_trace_model *m, const tp_trace_slice *s) {
  const tp_trace_track *t = &m->tracks[s->track];
  tp_json_builder jb = {0};
  json_t *o = json_object();
  if (!o) {
    w->failed = 1;
    return;
  }
  tp_json_set(&jb, o, "ph", json_string("X"));
  tp_json_set(&jb, o, "cat", json_string(kineto_category(s)));
  tp_json_set(&jb, o, "name", kineto_name(s));
  tp_json_set(&jb, o, "pid", json_integer(pid_of(t)));
  tp_json_set(&jb, o, "tid", json_integer(t->tid));
  tp_json_set(&jb, o, "ts", json_real(tp_trace_us(m, s->ev.start_ns)));
  tp_json_set(&jb, o, "dur", json_real((double)(s->ev.end_ns - s->ev.start_ns) / 1000.0));
  tp_json_set(&jb, o, "args", kineto_args(&jb, s, m));
  if (jb.failed) {
    json_decref(o);
    o = NULL;
  }
  tp_trace_emit(w, o);
}

static void write_flow(tp_trace_writer *w, const tp_trace_model *m, const tp_trace_slice *s,
                       int64_t id) {
  const tp_trace_slice *r = &m->slices[s->range];
  const tp_trace_track *from = &m->tracks[r->track], *to = &m->tracks[s->track];
  tp_trace_emit(
      w, tp_trace_flow('s', id, pid_of(from), from->tid, tp_trace_us(m, r->ev.start_ns), "ac2g"));
  tp_trace_emit(
      w, tp_trace_flow('f', id, pid_of(to), to->tid, tp_trace_us(m, s->ev.start_ns), "ac2g"));
}

static json_t *device_properties(const tp_trace_model *m, int rank, const kineto_meta *meta) {
  json_t *list = json_array(), *dev = json_object();
  tp_json_builder jb = {0};
  int device = -1;
  for (size_t i = 0; i < m->n_tracks; i++)
    if (m->tracks[i].rank == rank && m->tracks[i].device > device) device = m->tracks[i].device;
  if (dev) {
    tp_json_set(&jb, dev, "id", json_integer(device >= 0 ? device : rank));
    tp_json_set(&jb, dev, "name", tp_json_str(meta->gpu_name));
  }
  if (list) tp_json_append(&jb, list, dev);
  else json_decref(dev);
  if (jb.failed || !list) {
    json_decref(list);
    return NULL;
  }
  return list;
}

static json_t *tpbench_info(int64_t config_id, const kineto_meta *meta, const tp_trace_model *m) {
  json_t *o = json_object();
  tp_json_builder jb = {0};
  if (!o) return NULL;
  tp_json_set(&jb, o, "config_id", json_integer(config_id));
  tp_json_set(&jb, o, "config_key", tp_json_str(meta->key));
  tp_json_set(&jb, o, "run_id", json_integer(meta->run_id));
  tp_json_set(&jb, o, "launches_placed", json_integer((json_int_t)m->n_launched));
  if (jb.failed) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* `"key": value,` on a line of its own; value's reference is taken. */
static int put_field(FILE *out, const char *key, json_t *value) {
  if (!value) return 1;
  fprintf(out, "\n  \"%s\": ", key);
  int bad = json_dumpf(value, out, DUMP_FLAGS | JSON_ENCODE_ANY) != 0;
  fputc(',', out);
  json_decref(value);
  return bad;
}

static int write_header(FILE *out, const tp_trace_model *m, int64_t config_id, int rank,
                        const kineto_meta *meta) {
  int world = meta->tp > m->n_ranks_seen ? meta->tp : m->n_ranks_seen;
  fprintf(out,
          "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": "
          "%d, \"world_size\": %d},",
          rank, world);
  int bad = put_field(out, "deviceProperties", device_properties(m, rank, meta));
  bad |= put_field(out, "displayTimeUnit", json_string("ms"));
  bad |= put_field(out, "baseTimeNanoseconds", json_integer((json_int_t)m->t0));
  char name[128];
  snprintf(name, sizeof name, "tpbench configuration %lld rank %d", (long long)config_id, rank);
  bad |= put_field(out, "traceName", json_string(name));
  bad |= put_field(out, "tpbench", tpbench_info(config_id, meta, m));
  fputs("\n  \"traceEvents\": [", out);
  return bad;
}

static tp_rc write_rank(FILE *out, const tp_trace_model *m, int64_t config_id, int rank,
                        const kineto_meta *meta) {
  tp_trace_writer w = {out, 1, write_header(out, m, config_id, rank, meta)};
  write_tracks(&w, m, rank, meta);
  for (size_t i = 0; i < m->n_slices && !w.failed; i++)
    if (m->slices[i].ev.rank == rank) write_slice(&w, m, &m->slices[i]);
  int64_t flow = 0;
  for (size_t i = 0; i < m->n_events && !w.failed; i++) {
    const tp_trace_slice *s = &m->slices[i];
    if (s->ev.rank == rank && s->range >= 0 && tp_trace_is_device_work(&s->ev))
      write_flow(&w, m, s, ++flow);
  }
  fputs("\n  ]\n}\n", out);
  if (w.failed) return TP_FAIL(TP_EIO, "trace export: writing an event failed");
  if (fflush(out) != 0 || ferror(out))
    return TP_FAIL(TP_EIO, "trace export: writing the output failed");
  return TP_OK;
}

tp_rc tp_report_kineto_trace(tp_store *store, int64_t config_id, int rank, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_kineto_trace: NULL argument");
  kineto_meta meta;
  tp_trace_model m;
  TP_TRY(load_traced(store, config_id, &meta, &m));
  tp_rc rc = write_rank(out, &m, config_id, rank, &meta);
  tp_trace_model_free(&m);
  return rc;
}
