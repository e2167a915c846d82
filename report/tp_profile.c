/*
 * tp_profile.c — `tpbench profile`'s runs in the store: the import of one
 * process's event file as a run with one traced configuration of kind
 * "profile", and what `tpbench report` prints for such a run (the overlap
 * over the process window and the kernel summary, like nsys stats' GPU
 * kernel summary).
 */
#include "report/tp_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "collectors/tp_collector.h"
#include "collectors/tp_profile_file.h"

/* ---- import ------------------------------------------------------------------ */

/* The store's trace events for the file's events (names borrowed). */
static tp_rc to_trace_events(const tp_profile_data *d, tp_trace_event **out) {
  *out = NULL;
  if (d->n_events == 0) return TP_OK;
  tp_trace_event *t = calloc(d->n_events, sizeof *t);
  if (!t) return TP_FAIL(TP_EOOM, "profile import: out of memory");
  for (size_t i = 0; i < d->n_events; ++i) {
    const tp_event *e = &d->events[i];
    t[i] = (tp_trace_event){.name = e->name,
                            .kind = tp_event_type_name(e->type),
                            .category = tp_category_name(e->category),
                            .copy_kind = tp_copy_kind_name(e->copy_kind),
                            .start_ns = e->start_ns,
                            .end_ns = e->end_ns,
                            .bytes = e->bytes,
                            .rank = e->rank,
                            .device = e->device,
                            .stream = e->stream,
                            .correlation = e->correlation,
                            .peer_device = e->peer_device};
  }
  *out = t;
  return TP_OK;
}

/* The process window: the collector's, widened to every event it kept. */
static void process_window(const tp_profile_data *d, uint64_t *start, uint64_t *end) {
  *start = d->meta.start_ns;
  *end = d->meta.end_ns > d->meta.start_ns ? d->meta.end_ns : d->meta.start_ns;
  for (size_t i = 0; i < d->n_events; ++i) {
    if (d->events[i].start_ns < *start) *start = d->events[i].start_ns;
    if (d->events[i].end_ns > *end) *end = d->events[i].end_ns;
  }
}

static tp_rc overlap_row(const tp_profile_data *d, tp_trace_overlap *row) {
  uint64_t start = 0, end = 0;
  process_window(d, &start, &end);
  tp_overlap o;
  TP_TRY(tp_overlap_compute(d->events, d->n_events, d->meta.rank, start, end, &o));
  *row = (tp_trace_overlap){.rank = d->meta.rank,
                            .window = 0,
                            .window_start_ns = start,
                            .window_end_ns = end,
                            .comm_ns = o.comm_ns,
                            .compute_ns = o.compute_ns,
                            .overlap_ns = o.overlap_ns,
                            .exposed_ns = o.exposed_comm_ns,
                            .overlap_pct = o.comm_ns ? o.overlap_pct : NAN,
                            .sync_ns = o.sync_ns};
  return TP_OK;
}

/* Why a profile with events is incomplete, or NULL when it is not. */
static const char *incomplete_reason(const tp_profile_import_args *a, const tp_profile_data *d,
                                     char *buf, size_t cap) {
  if (a->exit_status != 0)
    snprintf(buf, cap, "the command exited with status %d: what was collected is kept (incomplete)",
             a->exit_status);
  else if (d->truncated || !d->meta.complete)
    snprintf(buf, cap, "the event file was not written at a normal exit (a signal, or cut short)");
  else if (d->meta.dropped > 0)
    snprintf(buf, cap, "CUPTI dropped %llu records", (unsigned long long)d->meta.dropped);
  else return NULL;
  return buf;
}

static tp_rc store_config(tp_store *store, int64_t run_id, const tp_profile_import_args *a,
                          const tp_profile_data *d, tp_profile_import_result *out) {
  tp_config_axes axes = {
      .kind = "profile", .op_or_layer = a->label ? a->label : "process", .tp = 1};
  char why[160];
  tp_config_record rec = {.axes = &axes};
  if (!d) {
    rec.status = TP_STATUS_REJECTED;
    if (a->exit_status != 0)
      snprintf(why, sizeof why,
               "the program never initialised CUDA (it exited with status %d): nothing was "
               "profiled (empty)",
               a->exit_status);
    else
      snprintf(why, sizeof why, "the program never initialised CUDA: nothing was profiled (empty)");
    rec.reason = why;
    out->empty = 1;
    out->incomplete = a->exit_status != 0;
    return tp_store_put_config(store, run_id, &rec, &out->config_id);
  }
  tp_trace_event *events = NULL;
  TP_TRY(to_trace_events(d, &events));
  tp_trace_overlap row = {0};
  tp_rc rc = overlap_row(d, &row);
  const char *reason = incomplete_reason(a, d, why, sizeof why);
  double window_us = (double)(row.window_end_ns - row.window_start_ns) / 1e3;
  tp_result result = {.n_samples = 1,
                      .median_us = window_us,
                      .p10_us = window_us,
                      .p90_us = window_us,
                      .mean_us = window_us,
                      .min_us = window_us,
                      .max_us = window_us,
                      .tokens_per_s = NAN,
                      .tflops = NAN,
                      .flops = NAN,
                      .bytes_moved = NAN,
                      .max_abs_err = NAN,
                      .rel_err = NAN};
  tp_trace_record trace = {.events = events,
                           .n_events = d->n_events,
                           .overlap = &row,
                           .n_overlap = 1,
                           .traced_iters = 1,
                           .traced_median_us = NAN,
                           .untraced_median_us = NAN,
                           .evidence = "not checked",
                           .evidence_message = "a profiled program records no schedule to check",
                           .dropped_records = d->meta.dropped,
                           .clock_offset_ns = d->meta.clock_offset_ns};
  rec.status = reason ? TP_STATUS_FAILED : TP_STATUS_OK;
  rec.reason = reason;
  rec.result = reason ? NULL : &result;
  rec.trace = &trace;
  if (rc == TP_OK) rc = tp_store_put_config(store, run_id, &rec, &out->config_id);
  free(events);
  out->n_events = d->n_events;
  out->incomplete = reason != NULL;
  return rc;
}

tp_rc tp_profile_import(tp_store *store, const tp_profile_import_args *args,
                        tp_profile_import_result *out) {
  if (!store || !args || !out) return TP_FAIL(TP_EUSAGE, "tp_profile_import: NULL argument");
  memset(out, 0, sizeof *out);
  tp_profile_data data;
  size_t n_files = 0;
  TP_TRY(tp_profile_folder_read(args->profile_dir, &data, &n_files));
  int have_file = n_files > 0;
  out->n_processes = n_files;
  tp_run_info info = {.commit = args->commit,
                      .dirty = args->dirty,
                      .host = args->host,
                      .gpu_count = 1,
                      .command_line = args->command_line,
                      .command = "profile"};
  tp_rc rc = tp_store_begin_run(store, &info, &out->run_id);
  if (rc == TP_OK) rc = store_config(store, out->run_id, args, have_file ? &data : NULL, out);
  if (rc == TP_OK) rc = tp_store_finish_run(store, out->run_id);
  if (have_file) tp_profile_data_free(&data);
  return rc;
}

/* ---- kernel summary ---------------------------------------------------------- */

typedef struct summary_acc {
  tp_kernel_row *rows;
  size_t n, cap;
} summary_acc;

static tp_rc add_kernel(void *ctx, const tp_trace_event *ev) {
  summary_acc *acc = ctx;
  if (strcmp(ev->kind, "kernel") != 0) return TP_OK;
  size_t i = 0;
  while (i < acc->n && strncmp(acc->rows[i].name, ev->name, sizeof acc->rows[i].name - 1) != 0)
    ++i; /* linear: a process runs a few hundred distinct kernels at most */
  if (i == acc->n) {
    if (acc->n == acc->cap) {
      size_t cap = acc->cap ? acc->cap * 2 : 64;
      tp_kernel_row *rows = realloc(acc->rows, cap * sizeof *rows);
      if (!rows) return TP_FAIL(TP_EOOM, "kernel summary: out of memory");
      acc->rows = rows;
      acc->cap = cap;
    }
    memset(&acc->rows[i], 0, sizeof acc->rows[i]);
    snprintf(acc->rows[i].name, sizeof acc->rows[i].name, "%s", ev->name);
    snprintf(acc->rows[i].category, sizeof acc->rows[i].category, "%s", ev->category);
    ++acc->n;
  }
  acc->rows[i].count++;
  acc->rows[i].total_us += (double)(ev->end_ns - ev->start_ns) / 1e3;
  return TP_OK;
}

static int by_total_desc(const void *a, const void *b) {
  const tp_kernel_row *x = a, *y = b;
  if (x->total_us != y->total_us) return x->total_us > y->total_us ? -1 : 1;
  return strcmp(x->name, y->name);
}

tp_rc tp_profile_kernel_summary(tp_store *store, int64_t config_id, tp_kernel_row **rows,
                                size_t *n) {
  if (!store || !rows || !n) return TP_FAIL(TP_EUSAGE, "tp_profile_kernel_summary: NULL argument");
  *rows = NULL;
  *n = 0;
  summary_acc acc = {0};
  tp_rc rc = tp_store_each_trace_event(store, config_id, add_kernel, &acc);
  if (rc != TP_OK) {
    free(acc.rows);
    return rc;
  }
  double total = 0;
  for (size_t i = 0; i < acc.n; ++i) total += acc.rows[i].total_us;
  for (size_t i = 0; i < acc.n; ++i) {
    tp_kernel_row *r = &acc.rows[i];
    r->mean_us = r->total_us / (double)r->count;
    r->share_pct = total > 0 ? 100.0 * r->total_us / total : 0;
  }
  if (acc.n > 1) qsort(acc.rows, acc.n, sizeof *acc.rows, by_total_desc);
  *rows = acc.rows;
  *n = acc.n;
  return TP_OK;
}

/* ---- the report of a profile run ------------------------------------------------ */

tp_rc tp_profile_config_of_run(tp_store *store, int64_t run_id, int64_t *config_id) {
  if (!store || !config_id) return TP_FAIL(TP_EUSAGE, "tp_profile_config_of_run: NULL argument");
  *config_id = 0;
  sqlite3 *db = tp_store_db(store);
  sqlite3_stmt *st = NULL;
  static const char sql[] = "SELECT c.id FROM configs c JOIN runs r ON r.id = c.run_id "
                            "WHERE r.id = ? AND r.command = 'profile' ORDER BY c.id LIMIT 1";
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: preparing the profile lookup: %s", tp_store_path(store),
                   sqlite3_errmsg(db));
  tp_rc rc = TP_OK;
  int step = SQLITE_DONE;
  if (sqlite3_bind_int64(st, 1, run_id) != SQLITE_OK)
    rc =
        TP_FAIL(TP_ESQLITE, "%s: binding the run id: %s", tp_store_path(store), sqlite3_errmsg(db));
  else if ((step = sqlite3_step(st)) == SQLITE_ROW) *config_id = sqlite3_column_int64(st, 0);
  else if (step != SQLITE_DONE)
    rc = TP_FAIL(TP_ESQLITE, "%s: reading the profile lookup: %s", tp_store_path(store),
                 sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

/* The run's command line and the configuration's status and reason. */
static tp_rc print_header(tp_store *store, int64_t run_id, int64_t config_id, FILE *out) {
  sqlite3 *db = tp_store_db(store);
  sqlite3_stmt *st = NULL;
  static const char sql[] = "SELECT r.command_line, c.status, c.reason FROM configs c "
                            "JOIN runs r ON r.id = c.run_id WHERE c.id = ?";
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: preparing the profile header: %s", tp_store_path(store),
                   sqlite3_errmsg(db));
  tp_rc rc = TP_OK;
  if (sqlite3_bind_int64(st, 1, config_id) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
    rc = TP_FAIL(TP_ESQLITE, "%s: reading the profile header: %s", tp_store_path(store),
                 sqlite3_errmsg(db));
  } else {
    const unsigned char *cmd = sqlite3_column_text(st, 0);
    const unsigned char *status = sqlite3_column_text(st, 1);
    const unsigned char *reason = sqlite3_column_text(st, 2);
    fprintf(out, "# profile run %lld, configuration %lld\n\ncommand: %s\nstatus: %s%s%s\n",
            (long long)run_id, (long long)config_id, cmd ? (const char *)cmd : "(not recorded)",
            status ? (const char *)status : "?", reason ? ": " : "",
            reason ? (const char *)reason : "");
  }
  sqlite3_finalize(st);
  return rc;
}

static tp_rc print_overlap(tp_store *store, int64_t config_id, FILE *out) {
  tp_trace_overlap *rows = NULL;
  size_t n = 0;
  TP_TRY(tp_store_trace_overlap(store, config_id, &rows, &n));
  for (size_t i = 0; i < n; ++i) {
    const tp_trace_overlap *r = &rows[i];
    fprintf(out,
            "rank %d: process window %.3f ms, communication %.3f ms, compute %.3f ms, sync "
            "%.3f ms, overlap ",
            r->rank, (double)(r->window_end_ns - r->window_start_ns) / 1e6,
            (double)r->comm_ns / 1e6, (double)r->compute_ns / 1e6, (double)r->sync_ns / 1e6);
    if (isnan(r->overlap_pct)) fprintf(out, "- (no communication)\n");
    else
      fprintf(out, "%.1f %% (exposed communication %.3f ms)\n", r->overlap_pct,
              (double)r->exposed_ns / 1e6);
  }
  free(rows);
  return TP_OK;
}

static void print_kernels(const tp_kernel_row *rows, size_t n, FILE *out) {
  fprintf(out, "\n## kernels\n\n");
  if (n == 0) {
    fprintf(out, "no kernels were recorded\n");
    return;
  }
  fprintf(out, "| name | category | count | total µs | mean µs | share %% |\n"
               "|---|---|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < n; ++i) {
    fprintf(out, "| ");
    for (const char *p = rows[i].name; *p; ++p) {
      if (*p == '|') fputs("\\|", out); /* a table cell */
      else fputc(*p, out);
    }
    fprintf(out, " | %s | %lld | %.1f | %.2f | %.1f |\n", rows[i].category,
            (long long)rows[i].count, rows[i].total_us, rows[i].mean_us, rows[i].share_pct);
  }
}

tp_rc tp_profile_report(tp_store *store, int64_t run_id, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EUSAGE, "tp_profile_report: NULL argument");
  int64_t config_id = 0;
  TP_TRY(tp_profile_config_of_run(store, run_id, &config_id));
  if (config_id == 0) return TP_FAIL(TP_EUSAGE, "run %lld is not a profile run", (long long)run_id);
  TP_TRY(print_header(store, run_id, config_id, out));
  TP_TRY(print_overlap(store, config_id, out));
  tp_kernel_row *rows = NULL;
  size_t n = 0;
  TP_TRY(tp_profile_kernel_summary(store, config_id, &rows, &n));
  print_kernels(rows, n, out);
  free(rows);
  if (ferror(out)) return TP_FAIL(TP_EIO, "writing the profile report failed");
  return TP_OK;
}
