/*
 * tp_profile.c — `tpbench profile`'s runs in the store: the import of the
 * processes' event files as a run with one traced configuration of kind
 * "profile" plus its analysis (collectors/tp_profile_analysis.h: windows,
 * breakdowns, transports, kernel summary), and what `tpbench report`
 * prints for such a run.
 */
#include "report/tp_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "collectors/tp_collector.h"
#include "collectors/tp_profile_analysis.h"
#include "collectors/tp_profile_file.h"
#include "report/tp_compare.h"
#include "report/tp_kernel_names.h"
#include "report/tp_report_util.h"
#include "store/tp_store_profile.h"

/* ---- small helpers -------------------------------------------------------------- */

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile (0..1) of sorted v[0..n), linear between neighbours. */
static double quantile(const double *v, size_t n, double q) {
  if (n == 0) return NAN;
  double pos = q * (double)(n - 1);
  size_t lo = (size_t)pos;
  if (lo + 1 >= n) return v[n - 1];
  return v[lo] + (pos - (double)lo) * (v[lo + 1] - v[lo]);
}

static int distinct_ranks(const tp_profile_window *w, size_t n) {
  int count = 0;
  for (size_t i = 0; i < n; ++i)
    if (i == 0 || w[i].rank != w[i - 1].rank) ++count; /* windows are sorted by rank */
  return count;
}

/* A window's step number and value. */
typedef struct step_value {
  int64_t step;
  double value;
} step_value;

static int by_step(const void *a, const void *b) {
  const step_value *x = a, *y = b;
  return (x->step > y->step) - (x->step < y->step);
}

/* Per step number, the longest of its ranks' values (val[i] of window i),
 * into a malloc'd sorted array. A step of the whole process is one step.
 * Sorted by step, not searched per window: a profile has tens of thousands. */
static tp_rc per_step_max(const tp_profile_window *w, const double *val, size_t n, double **out,
                          size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  if (n == 0) return TP_OK;
  double *steps = malloc(n * sizeof *steps);
  step_value *sv = malloc(n * sizeof *sv);
  if (!steps || !sv) {
    free(steps);
    free(sv);
    return TP_FAIL(TP_EOOM, "profile: out of memory");
  }
  for (size_t i = 0; i < n; ++i) sv[i] = (step_value){w[i].step, val[i]};
  qsort(sv, n, sizeof *sv, by_step);
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || sv[i].step != sv[i - 1].step) steps[m++] = sv[i].value;
    else if (sv[i].value > steps[m - 1]) steps[m - 1] = sv[i].value;
  }
  free(sv);
  qsort(steps, m, sizeof *steps, by_double);
  *out = steps;
  *n_out = m;
  return TP_OK;
}

/* ---- the analysis of the events --------------------------------------------------- */

/* Everything computed from the events before anything is stored. */
typedef struct analysis {
  tp_profile_window *windows;
  size_t n_windows;
  tp_profile_breakdown *breakdowns;
  tp_profile_schedule *schedules;
  size_t n_schedules;
  tp_profile_kernel *kernels;
  size_t n_kernels;
  tp_rc select_rc; /* TP_EUSAGE: the selector found nothing (message in select_msg) */
  char select_msg[512];
} analysis;

static void analysis_free(analysis *a) {
  free(a->windows);
  free(a->breakdowns);
  free(a->schedules);
  free(a->kernels);
  memset(a, 0, sizeof *a);
}

static tp_rc analyse(const tp_profile_data *d, const tp_profile_selector *sel, analysis *a) {
  memset(a, 0, sizeof *a);
  tp_profile_selector whole = {.mode = TP_SELECT_PROCESS};
  a->select_rc =
      tp_profile_windows(d->events, d->n_events, sel ? sel : &whole, &a->windows, &a->n_windows);
  if (a->select_rc == TP_EUSAGE) {
    snprintf(a->select_msg, sizeof a->select_msg, "%s", tp_last_error());
    return TP_OK; /* stored as the configuration's reason; the events are kept */
  }
  TP_TRY(a->select_rc);
  if (a->n_windows) {
    a->breakdowns = calloc(a->n_windows, sizeof *a->breakdowns);
    if (!a->breakdowns) return TP_FAIL(TP_EOOM, "profile: out of memory");
  }
  TP_TRY(tp_profile_breakdowns(d->events, d->n_events, a->windows, a->n_windows, a->breakdowns));
  TP_TRY(tp_profile_schedules(d->events, d->n_events, a->windows, a->n_windows, &a->schedules,
                              &a->n_schedules));
  return tp_profile_kernel_summary_of(d->events, d->n_events, a->windows, a->n_windows, &a->kernels,
                                      &a->n_kernels);
}

/* ---- import ------------------------------------------------------------------------ */

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

/* One overlap row per window, numbered in order per rank. */
static tp_rc overlap_rows(const analysis *a, tp_trace_overlap **out) {
  *out = NULL;
  if (a->n_windows == 0) return TP_OK;
  tp_trace_overlap *rows = calloc(a->n_windows, sizeof *rows);
  if (!rows) return TP_FAIL(TP_EOOM, "profile import: out of memory");
  int order = 0;
  for (size_t i = 0; i < a->n_windows; ++i) {
    const tp_profile_window *w = &a->windows[i];
    const tp_profile_breakdown *b = &a->breakdowns[i];
    order = i > 0 && a->windows[i - 1].rank == w->rank ? order + 1 : 0;
    rows[i] = (tp_trace_overlap){.rank = w->rank,
                                 .window = order,
                                 .window_start_ns = w->start_ns,
                                 .window_end_ns = w->end_ns,
                                 .comm_ns = b->comm_ns,
                                 .compute_ns = b->compute_ns,
                                 .overlap_ns = b->overlap_ns,
                                 .exposed_ns = b->exposed_comm_ns,
                                 .overlap_pct = b->comm_ns ? b->overlap_pct : NAN,
                                 .sync_ns = b->sync_ns};
  }
  *out = rows;
  return TP_OK;
}

/* Why a profile with events is not ok, or NULL when it is. */
static const char *failure_reason(const tp_profile_import_args *args, const tp_profile_data *d,
                                  const analysis *a, char *buf, size_t cap) {
  if (args->exit_status != 0)
    snprintf(buf, cap, "the command exited with status %d: what was collected is kept (incomplete)",
             args->exit_status);
  else if (d->truncated || !d->meta.complete)
    snprintf(buf, cap, "the event file was not written at a normal exit (a signal, or cut short)");
  else if (d->meta.dropped > 0)
    snprintf(buf, cap, "CUPTI dropped %llu records", (unsigned long long)d->meta.dropped);
  else if (a->select_rc != TP_OK) snprintf(buf, cap, "%s", a->select_msg);
  else return NULL;
  return buf;
}

/* The samples and statistics of the steps: per rank its windows' device
 * times; the result over steps, each step as long as its slowest rank. */
typedef struct step_stats {
  tp_samples *sets;
  double *times; /* storage of every set's time_us */
  int n_sets;
  tp_result result;
  double host_median_us;
} step_stats;

static void step_stats_free(step_stats *s) {
  free(s->sets);
  free(s->times);
  memset(s, 0, sizeof *s);
}

static tp_rc result_over_steps(const analysis *a, step_stats *s) {
  double *dev = malloc(a->n_windows * sizeof *dev), *host = malloc(a->n_windows * sizeof *host);
  if (!dev || !host) {
    free(dev);
    free(host);
    return TP_FAIL(TP_EOOM, "profile import: out of memory");
  }
  for (size_t i = 0; i < a->n_windows; ++i) {
    dev[i] = (double)a->breakdowns[i].step_ns / 1e3;
    host[i] = (double)a->breakdowns[i].host_ns / 1e3;
  }
  double *steps = NULL, *host_steps = NULL;
  size_t n = 0, n_host = 0;
  tp_rc rc = per_step_max(a->windows, dev, a->n_windows, &steps, &n);
  if (rc == TP_OK) rc = per_step_max(a->windows, host, a->n_windows, &host_steps, &n_host);
  if (rc == TP_OK && n > 0) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += steps[i];
    s->result = (tp_result){.n_samples = (int)n,
                            .median_us = quantile(steps, n, 0.5),
                            .p10_us = quantile(steps, n, 0.1),
                            .p90_us = quantile(steps, n, 0.9),
                            .mean_us = sum / (double)n,
                            .min_us = steps[0],
                            .max_us = steps[n - 1],
                            .tokens_per_s = NAN,
                            .tflops = NAN,
                            .flops = NAN,
                            .bytes_moved = NAN,
                            .max_abs_err = NAN,
                            .rel_err = NAN};
    s->host_median_us = quantile(host_steps, n_host, 0.5);
  }
  free(steps);
  free(host_steps);
  s->times = dev; /* per window, in window order: the sets point into it */
  free(host);
  return rc;
}

static tp_rc build_step_stats(const analysis *a, step_stats *s) {
  memset(s, 0, sizeof *s);
  s->host_median_us = NAN;
  if (a->n_windows == 0) return TP_OK;
  TP_TRY(result_over_steps(a, s));
  s->sets = calloc(a->n_windows, sizeof *s->sets);
  if (!s->sets) return TP_FAIL(TP_EOOM, "profile import: out of memory");
  for (size_t i = 0; i < a->n_windows; ++i) {
    if (i == 0 || a->windows[i].rank != a->windows[i - 1].rank)
      s->sets[s->n_sets++] = (tp_samples){.rank = a->windows[i].rank, .time_us = &s->times[i]};
    s->sets[s->n_sets - 1].count++;
  }
  return TP_OK;
}

/* The analysis as the store's profile rows (names copied, cut to their fields). */
static tp_rc profile_rows(const analysis *a, tp_profile_record *r) {
  if (a->n_windows && !(r->steps = calloc(a->n_windows, sizeof *r->steps)))
    return TP_FAIL(TP_EOOM, "profile import: out of memory");
  if (a->n_schedules && !(r->schedules = calloc(a->n_schedules, sizeof *r->schedules)))
    return TP_FAIL(TP_EOOM, "profile import: out of memory");
  if (a->n_kernels && !(r->kernels = calloc(a->n_kernels, sizeof *r->kernels)))
    return TP_FAIL(TP_EOOM, "profile import: out of memory");
  for (size_t i = 0; i < a->n_windows; ++i) {
    const tp_profile_window *w = &a->windows[i];
    const tp_profile_breakdown *b = &a->breakdowns[i];
    tp_profile_step_row *p = &r->steps[r->n_steps++];
    *p = (tp_profile_step_row){.rank = w->rank,
                               .step = w->step,
                               .host_start_ns = w->host_start_ns,
                               .host_end_ns = w->host_end_ns,
                               .start_ns = w->start_ns,
                               .end_ns = w->end_ns,
                               .comm_ns = b->comm_ns,
                               .compute_ns = b->compute_ns,
                               .sync_ns = b->sync_ns,
                               .other_ns = b->other_ns,
                               .idle_ns = b->idle_ns,
                               .overlap_ns = b->overlap_ns,
                               .exposed_ns = b->exposed_comm_ns,
                               .kernels = (int64_t)b->kernels,
                               .empty = w->empty};
    snprintf(p->name, sizeof p->name, "%s", w->name ? w->name : "process");
  }
  for (size_t i = 0; i < a->n_schedules; ++i) {
    const tp_profile_schedule *s = &a->schedules[i];
    tp_profile_schedule_row *p = &r->schedules[r->n_schedules++];
    *p = (tp_profile_schedule_row){.rank = s->rank,
                                   .ranges = (int64_t)s->ranges,
                                   .nccl_kernels = (int64_t)s->nccl_kernels,
                                   .ce_copies = (int64_t)s->peer_copies,
                                   .sm_copy_kernels = (int64_t)s->sm_copy_kernels,
                                   .multicast_kernels = (int64_t)s->multicast_kernels,
                                   .comm_ns = s->comm_ns,
                                   .gemm_ns = s->gemm_ns};
    snprintf(p->range_name, sizeof p->range_name, "%s", s->name);
    snprintf(p->transport, sizeof p->transport, "%s", s->verdict);
  }
  for (size_t i = 0; i < a->n_kernels; ++i) {
    const tp_profile_kernel *k = &a->kernels[i];
    tp_profile_kernel_row *p = &r->kernels[r->n_kernels++];
    snprintf(p->name, sizeof p->name, "%s", k->name);
    snprintf(p->category, sizeof p->category, "%s", tp_category_name(k->category));
    p->count = (int64_t)k->count;
    p->total_ns = k->total_ns;
  }
  return TP_OK;
}

/* Rows cut to the same name would collide in the store's keys: keep the first. */
static void drop_duplicate_kernels(tp_profile_record *r) {
  size_t kept = 0;
  for (size_t i = 0; i < r->n_kernels; ++i) {
    int seen = 0;
    for (size_t j = 0; j < kept && !seen; ++j)
      seen = !strcmp(r->kernels[j].name, r->kernels[i].name);
    if (!seen) r->kernels[kept++] = r->kernels[i];
  }
  r->n_kernels = kept;
}

/* The transport of two ranges' communication together (verdict_of's rule
 * over the summed counts): one kind, "none", or "mixed". */
static const char *joint_transport(const char *a, const char *b) {
  if (!strcmp(a, b) || !strcmp(b, "none")) return a;
  return strcmp(a, "none") == 0 ? b : "mixed";
}

/* Range names cut to the same text on one rank would collide in the store's
 * key: one row, their counts summed. Rows are in (rank, full name) order, so
 * names sharing the kept prefix are neighbours. */
static void merge_cut_schedules(tp_profile_record *r) {
  size_t kept = 0;
  for (size_t i = 0; i < r->n_schedules; ++i) {
    tp_profile_schedule_row *s = &r->schedules[i], *last = kept ? &r->schedules[kept - 1] : NULL;
    if (!last || last->rank != s->rank || strcmp(last->range_name, s->range_name) != 0) {
      r->schedules[kept++] = *s;
      continue;
    }
    last->ranges += s->ranges;
    last->nccl_kernels += s->nccl_kernels;
    last->ce_copies += s->ce_copies;
    last->sm_copy_kernels += s->sm_copy_kernels;
    last->multicast_kernels += s->multicast_kernels;
    last->comm_ns += s->comm_ns;
    last->gemm_ns += s->gemm_ns;
    char joint[sizeof last->transport];
    snprintf(joint, sizeof joint, "%s", joint_transport(last->transport, s->transport));
    memcpy(last->transport, joint, sizeof joint);
  }
  r->n_schedules = kept;
}

static void fill_profile_header(const tp_profile_import_args *args, const tp_profile_data *d,
                                size_t n_files, const analysis *a, const step_stats *st,
                                tp_profile_record *r, tp_profile_import_result *out) {
  const tp_profile_selector *sel = args->selector;
  if (!sel || sel->mode == TP_SELECT_PROCESS)
    snprintf(r->selector, sizeof r->selector, "whole process");
  else if (strncmp(sel->text, "--", 2) == 0)
    snprintf(r->selector, sizeof r->selector, "%s", sel->text);
  else
    snprintf(r->selector, sizeof r->selector, "%s %s",
             sel->mode == TP_SELECT_STEPS ? "--steps" : "--range", sel->text);
  r->processes = (int64_t)n_files;
  r->ranks = distinct_ranks(a->windows, a->n_windows);
  r->exit_status = args->exit_status;
  snprintf(r->gpu_name, sizeof r->gpu_name, "%s", d ? d->meta.gpu_name : "");
  snprintf(r->baseline_method, sizeof r->baseline_method, "%s",
           args->baseline_method ? args->baseline_method : "");
  r->baseline_step_us = args->baseline_step_us;
  r->profiled_step_us = st->host_median_us;
  r->overhead_pct =
      isfinite(args->baseline_step_us) && args->baseline_step_us > 0 && isfinite(st->host_median_us)
          ? 100.0 * (st->host_median_us / args->baseline_step_us - 1.0)
          : NAN;
  out->overhead_pct = r->overhead_pct;
  out->n_ranks = (size_t)r->ranks;
  out->n_windows = a->n_windows;
}

/* The configuration with events: its trace, samples and result, then its profile rows. */
static tp_rc store_profiled(tp_store *store, int64_t run_id, const tp_profile_import_args *args,
                            const tp_profile_data *d, size_t n_files, const analysis *a,
                            tp_profile_import_result *out) {
  tp_config_axes axes = {
      .kind = "profile", .op_or_layer = args->label ? args->label : "process", .tp = 1};
  tp_trace_event *events = NULL;
  tp_trace_overlap *rows = NULL;
  step_stats st;
  tp_profile_record prof = {0};
  tp_rc rc = build_step_stats(a, &st);
  if (rc == TP_OK) rc = to_trace_events(d, &events);
  if (rc == TP_OK) rc = overlap_rows(a, &rows);
  if (rc == TP_OK) rc = profile_rows(a, &prof);
  if (rc == TP_OK) {
    const char *reason = failure_reason(args, d, a, out->reason, sizeof out->reason);
    int have_result = st.result.n_samples > 0;
    tp_trace_record trace = {.events = events,
                             .n_events = d->n_events,
                             .overlap = rows,
                             .n_overlap = a->n_windows,
                             .traced_iters = have_result ? st.result.n_samples : 1,
                             .traced_median_us = NAN,
                             .untraced_median_us = NAN,
                             .evidence = "not checked",
                             .evidence_message =
                                 "a profiled program records no schedule to check; the "
                                 "transports its ranges used are in the profile report",
                             .dropped_records = d->meta.dropped,
                             .clock_offset_ns = d->meta.clock_offset_ns};
    tp_config_record rec = {.axes = &axes,
                            .status = reason || !have_result ? TP_STATUS_FAILED : TP_STATUS_OK,
                            .reason = reason ? reason : (have_result ? NULL : "no step was timed"),
                            .result = reason || !have_result ? NULL : &st.result,
                            .samples = st.sets,
                            .n_sample_sets = st.n_sets,
                            .trace = &trace};
    out->incomplete = reason != NULL;
    out->no_windows = a->select_rc != TP_OK;
    rc = tp_store_put_config(store, run_id, &rec, &out->config_id);
  }
  if (rc == TP_OK) {
    fill_profile_header(args, d, n_files, a, &st, &prof, out);
    drop_duplicate_kernels(&prof);
    merge_cut_schedules(&prof);
    rc = tp_store_put_profile(store, out->config_id, &prof);
  }
  out->n_events = d->n_events;
  free(prof.steps);
  free(prof.schedules);
  free(prof.kernels);
  free(events);
  free(rows);
  step_stats_free(&st);
  return rc;
}

/* The configuration without events: the program never used CUDA, or no
 * process's collector could start (busy_reason). */
static tp_rc store_unprofiled(tp_store *store, int64_t run_id, const tp_profile_import_args *args,
                              const char *busy_reason, tp_profile_import_result *out) {
  tp_config_axes axes = {
      .kind = "profile", .op_or_layer = args->label ? args->label : "process", .tp = 1};
  if (busy_reason) {
    snprintf(out->reason, sizeof out->reason, "not profiled: %s", busy_reason);
    out->busy = 1;
  } else if (args->exit_status == 127) {
    snprintf(out->reason, sizeof out->reason,
             "the command could not be run (or exited with status 127): nothing was profiled "
             "(empty)");
  } else if (args->exit_status > 128 && args->exit_status < 128 + 65) {
    /* a process killed by SIGKILL writes no file: "never initialised" may be untrue */
    snprintf(out->reason, sizeof out->reason,
             "the command ended with status %d (killed by signal %d?) and no process left its "
             "events: it never initialised CUDA, or a process killed by SIGKILL lost what it "
             "recorded; nothing was profiled (empty)",
             args->exit_status, args->exit_status - 128);
  } else if (args->exit_status != 0) {
    snprintf(out->reason, sizeof out->reason,
             "the program never initialised CUDA (it exited with status %d): nothing was "
             "profiled (empty)",
             args->exit_status);
  } else {
    snprintf(out->reason, sizeof out->reason,
             "the program never initialised CUDA: nothing was profiled (empty)");
  }
  out->empty = !busy_reason;
  out->incomplete = args->exit_status != 0 || busy_reason;
  tp_config_record rec = {.axes = &axes, .status = TP_STATUS_REJECTED, .reason = out->reason};
  TP_TRY(tp_store_put_config(store, run_id, &rec, &out->config_id));
  analysis none = {0};
  step_stats st = {.host_median_us = NAN};
  tp_profile_record prof = {0};
  fill_profile_header(args, NULL, 0, &none, &st, &prof, out);
  return tp_store_put_profile(store, out->config_id, &prof);
}

tp_rc tp_profile_import(tp_store *store, const tp_profile_import_args *args,
                        tp_profile_import_result *out) {
  if (!store || !args || !out) return TP_FAIL(TP_EUSAGE, "tp_profile_import: NULL argument");
  memset(out, 0, sizeof *out);
  out->overhead_pct = NAN;
  char busy[400];
  size_t n_busy = 0, n_files = 0;
  TP_TRY(tp_profile_folder_errors(args->profile_dir, busy, sizeof busy, &n_busy));
  tp_profile_data data;
  TP_TRY(tp_profile_folder_read(args->profile_dir, &data, &n_files));
  analysis a = {0};
  tp_rc rc = n_files ? analyse(&data, args->selector, &a) : TP_OK;
  out->n_processes = n_files;
  out->busy = n_busy > 0;
  tp_run_info info = {.commit = args->commit,
                      .dirty = args->dirty,
                      .host = args->host,
                      .gpu_name = n_files && data.meta.gpu_name[0] ? data.meta.gpu_name : NULL,
                      .gpu_count = n_files ? distinct_ranks(a.windows, a.n_windows) : 0,
                      .command_line = args->command_line,
                      .command = "profile"};
  if (info.gpu_count == 0 && n_files) info.gpu_count = 1;
  if (rc == TP_OK) rc = tp_store_begin_run(store, &info, &out->run_id);
  if (rc == TP_OK)
    rc = n_files ? store_profiled(store, out->run_id, args, &data, n_files, &a, out)
                 : store_unprofiled(store, out->run_id, args, n_busy ? busy : NULL, out);
  if (rc == TP_OK && n_busy && n_files) {
    /* some processes were profiled, others not: say so beside the stored reason */
    snprintf(out->reason, sizeof out->reason, "%zu process(es) not profiled: %s", n_busy, busy);
    out->incomplete = 1;
  }
  if (rc == TP_OK) rc = tp_store_finish_run(store, out->run_id);
  analysis_free(&a);
  if (n_files) tp_profile_data_free(&data);
  return rc;
}

tp_rc tp_profile_host_step_median(const char *folder, const tp_profile_selector *selector,
                                  double *median_us, size_t *n_steps) {
  if (!folder || !median_us || !n_steps)
    return TP_FAIL(TP_EUSAGE, "tp_profile_host_step_median: NULL argument");
  *median_us = NAN;
  *n_steps = 0;
  tp_profile_data d;
  size_t n_files = 0;
  TP_TRY(tp_profile_folder_read(folder, &d, &n_files));
  if (n_files == 0) return TP_OK;
  tp_profile_selector whole = {.mode = TP_SELECT_PROCESS};
  tp_profile_window *w = NULL;
  size_t n = 0;
  tp_rc rc = tp_profile_windows(d.events, d.n_events, selector ? selector : &whole, &w, &n);
  double *host = rc == TP_OK && n ? malloc(n * sizeof *host) : NULL;
  if (rc == TP_OK && n && !host) rc = TP_FAIL(TP_EOOM, "profile: out of memory");
  for (size_t i = 0; rc == TP_OK && i < n; ++i)
    host[i] = (double)(w[i].host_end_ns - w[i].host_start_ns) / 1e3;
  double *steps = NULL;
  if (rc == TP_OK) rc = per_step_max(w, host, n, &steps, n_steps);
  if (rc == TP_OK) *median_us = quantile(steps, *n_steps, 0.5);
  free(steps);
  free(host);
  free(w);
  tp_profile_data_free(&d);
  return rc;
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
    /* the command line and the reason hold the program's text: escaped */
    fprintf(out, "# profile run %lld, configuration %lld\n\ncommand: ", (long long)run_id,
            (long long)config_id);
    tp_md_text(out, cmd ? (const char *)cmd : "(not recorded)");
    fprintf(out, "\nstatus: %s%s", status ? (const char *)status : "?", reason ? ": " : "");
    tp_md_text(out, (const char *)reason);
    fputc('\n', out);
  }
  sqlite3_finalize(st);
  return rc;
}

static void print_summary(const tp_profile_record *r, FILE *out) {
  fprintf(out, "processes: %lld, ranks: %lld, GPU: ", (long long)r->processes, (long long)r->ranks);
  tp_md_text(out, r->gpu_name[0] ? r->gpu_name : "unknown");
  fprintf(out, ", windows: ");
  tp_md_text(out, r->selector);
  fprintf(out, " (%zu)\n", r->n_steps);
  if (isfinite(r->overhead_pct))
    fprintf(out,
            "overhead: %+.1f %% (median step %.3f ms profiled, %.3f ms without device "
            "recording: %s)\n",
            r->overhead_pct, r->profiled_step_us / 1e3, r->baseline_step_us / 1e3,
            r->baseline_method);
  else
    fprintf(out, "overhead: not measured (tpbench profile --overhead with --steps or --range)\n");
}

static double ms(uint64_t ns) { return (double)ns / 1e6; }

/* Names are the program's: no row, markup or HTML of their own. */
static void print_cell_text(const char *text, FILE *out) { tp_md_text(out, text); }

static void print_steps(const tp_profile_record *r, FILE *out) {
  fprintf(out, "\n## windows\n\n");
  if (r->n_steps == 0) {
    fprintf(out, "no window was selected\n");
    return;
  }
  fprintf(out, "| rank | step | range | step ms | host ms | comm ms | compute ms | sync ms | "
               "other ms | idle ms | overlap %% | exposed ms | kernels |\n"
               "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < r->n_steps; ++i) {
    const tp_profile_step_row *s = &r->steps[i];
    fprintf(out, "| %d | %lld | ", s->rank, (long long)s->step);
    print_cell_text(s->name, out);
    fprintf(out, "%s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | ",
            s->empty ? " (empty)" : "", ms(s->end_ns - s->start_ns),
            ms(s->host_end_ns - s->host_start_ns), ms(s->comm_ns), ms(s->compute_ns),
            ms(s->sync_ns), ms(s->other_ns), ms(s->idle_ns));
    if (s->comm_ns) fprintf(out, "%.1f", 100.0 * (double)s->overlap_ns / (double)s->comm_ns);
    else fprintf(out, "-");
    fprintf(out, " | %.3f | %lld |\n", ms(s->exposed_ns), (long long)s->kernels);
  }
}

static void print_schedules(const tp_profile_record *r, FILE *out) {
  fprintf(out, "\n## transports (communication launched inside the program's NVTX ranges)\n\n");
  if (r->n_schedules == 0) {
    fprintf(out, "no NVTX range of the program launched device work in the windows\n");
    return;
  }
  fprintf(out, "| rank | range | ranges | transport | NCCL kernels | CE peer copies | SM copy "
               "kernels | multicast kernels | comm ms | GEMM ms |\n"
               "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < r->n_schedules; ++i) {
    const tp_profile_schedule_row *s = &r->schedules[i];
    fprintf(out, "| %d | ", s->rank);
    print_cell_text(s->range_name, out);
    fprintf(out, " | %lld | %s | %lld | %lld | %lld | %lld | %.3f | %.3f |\n", (long long)s->ranges,
            s->transport, (long long)s->nccl_kernels, (long long)s->ce_copies,
            (long long)s->sm_copy_kernels, (long long)s->multicast_kernels, ms(s->comm_ns),
            ms(s->gemm_ns));
  }
}

static void print_kernels(const tp_profile_record *r, FILE *out) {
  fprintf(out, "\n## kernels (of the windows, every rank)\n\n");
  if (r->n_kernels == 0) {
    fprintf(out, "no kernels were recorded\n");
    return;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < r->n_kernels; ++i) total += r->kernels[i].total_ns;
  fprintf(out, "| name | category | count | total µs | mean µs | share %% |\n"
               "|---|---|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < r->n_kernels; ++i) {
    const tp_profile_kernel_row *k = &r->kernels[i];
    char shown[512];
    fprintf(out, "| ");
    print_cell_text(tp_kernel_display_name(k->name, shown, sizeof shown), out);
    fprintf(out, " | %s | %lld | %.1f | %.2f | %.1f |\n", k->category, (long long)k->count,
            (double)k->total_ns / 1e3, (double)k->total_ns / 1e3 / (double)k->count,
            total ? 100.0 * (double)k->total_ns / (double)total : 0.0);
  }
}

tp_rc tp_profile_report(tp_store *store, int64_t run_id, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EUSAGE, "tp_profile_report: NULL argument");
  int64_t config_id = 0;
  TP_TRY(tp_profile_config_of_run(store, run_id, &config_id));
  if (config_id == 0) return TP_FAIL(TP_EUSAGE, "run %lld is not a profile run", (long long)run_id);
  TP_TRY(print_header(store, run_id, config_id, out));
  tp_profile_record r;
  int found = 0;
  TP_TRY(tp_store_get_profile(store, config_id, &r, &found));
  if (!found) {
    fprintf(out, "(no analysis stored: a profile recorded before schema 005)\n");
  } else {
    print_summary(&r, out);
    print_steps(&r, out);
    print_schedules(&r, out);
    print_kernels(&r, out);
  }
  tp_profile_record_free(&r);
  if (ferror(out)) return TP_FAIL(TP_EIO, "writing the profile report failed");
  return TP_OK;
}

/* ---- two profiles side by side (compare) ---------------------------------------- */

/* Per step, the slowest rank's value of one field of the windows (µs), sorted. */
typedef uint64_t (*step_field)(const tp_profile_step_row *s);

static uint64_t f_step(const tp_profile_step_row *s) { return s->end_ns - s->start_ns; }
static uint64_t f_comm(const tp_profile_step_row *s) { return s->comm_ns; }
static uint64_t f_compute(const tp_profile_step_row *s) { return s->compute_ns; }
static uint64_t f_sync(const tp_profile_step_row *s) { return s->sync_ns; }
static uint64_t f_idle(const tp_profile_step_row *s) { return s->idle_ns; }
static uint64_t f_exposed(const tp_profile_step_row *s) { return s->exposed_ns; }

static tp_rc field_per_step(const tp_profile_record *r, step_field f, double **out, size_t *n) {
  tp_profile_window *w = r->n_steps ? calloc(r->n_steps, sizeof *w) : NULL;
  double *v = r->n_steps ? calloc(r->n_steps, sizeof *v) : NULL;
  if (r->n_steps && (!w || !v)) {
    free(w);
    free(v);
    return TP_FAIL(TP_EOOM, "profile compare: out of memory");
  }
  for (size_t i = 0; i < r->n_steps; ++i) {
    w[i].step = r->steps[i].step;
    w[i].rank = r->steps[i].rank;
    v[i] = (double)f(&r->steps[i]) / 1e3;
  }
  tp_rc rc = per_step_max(w, v, r->n_steps, out, n);
  free(w);
  free(v);
  return rc;
}

static void compare_line(FILE *out, const char *what, const double *b, size_t nb, const double *h,
                         size_t nh, int test) {
  double mb = quantile(b, nb, 0.5), mh = quantile(h, nh, 0.5);
  fprintf(out, "| %s | %.3f | %.3f | ", what, mb / 1e3, mh / 1e3);
  if (mb > 0 && isfinite(mb) && isfinite(mh)) fprintf(out, "%+.1f %% | ", 100.0 * (mh / mb - 1));
  else fprintf(out, "- | ");
  tp_welch welch;
  if (test && nb >= 2 && nh >= 2 && tp_welch_test(b, nb, h, nh, &welch) == TP_OK)
    fprintf(out, "%.4f |\n", welch.p);
  else fprintf(out, "- |\n");
}

tp_rc tp_profile_compare_pair(tp_store *store, int64_t base_config, int64_t head_config,
                              const char *label, FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EUSAGE, "tp_profile_compare_pair: NULL argument");
  tp_profile_record b, h;
  int found_b = 0, found_h = 0;
  TP_TRY(tp_store_get_profile(store, base_config, &b, &found_b));
  tp_rc rc = tp_store_get_profile(store, head_config, &h, &found_h);
  if (rc != TP_OK) {
    tp_profile_record_free(&b);
    return rc;
  }
  fprintf(out, "\n### profile ");
  tp_md_code(out, label ? label : "?");
  fprintf(out, ": configuration %lld → %lld\n\n", (long long)base_config, (long long)head_config);
  if (!found_b || !found_h || !b.n_steps || !h.n_steps) {
    fprintf(out, "no windows on %s side: nothing to compare\n",
            !found_b || !b.n_steps ? "the base" : "the head");
  } else {
    fprintf(out, "windows: ");
    tp_md_text(out, b.selector);
    fprintf(out, " (%zu) → ", b.n_steps);
    tp_md_text(out, h.selector);
    fprintf(out,
            " (%zu). Each value is the median over steps of the slowest rank; p: Welch's t "
            "test over the steps of one run each (step-to-step spread only: rerun both for "
            "run-to-run spread)\n\n"
            "| per step | base ms | head ms | change | p |\n|---|---:|---:|---:|---:|\n",
            h.n_steps);
    static const struct {
      const char *name;
      step_field f;
      int test;
    } fields[] = {{"step time", f_step, 1},  {"communication", f_comm, 0},
                  {"compute", f_compute, 0}, {"sync", f_sync, 0},
                  {"idle", f_idle, 0},       {"exposed communication", f_exposed, 0}};
    for (size_t k = 0; rc == TP_OK && k < sizeof fields / sizeof fields[0]; ++k) {
      double *vb = NULL, *vh = NULL;
      size_t nb = 0, nh = 0;
      rc = field_per_step(&b, fields[k].f, &vb, &nb);
      if (rc == TP_OK) rc = field_per_step(&h, fields[k].f, &vh, &nh);
      if (rc == TP_OK) compare_line(out, fields[k].name, vb, nb, vh, nh, fields[k].test);
      free(vb);
      free(vh);
    }
  }
  tp_profile_record_free(&b);
  tp_profile_record_free(&h);
  if (rc == TP_OK && ferror(out)) rc = TP_FAIL(TP_EIO, "writing the profile comparison failed");
  return rc;
}
