/*
 * tp_report_internal.h — what the throughput table's files share inside
 * report/ (tp_report.c loads and derives; tp_report_columns.c names and
 * renders the columns; tp_report_link.c shows a link probe): the loaded
 * configurations, the rows derived from them, the run and the summaries.
 * Not for use outside report/.
 */
#ifndef TP_REPORT_INTERNAL_H
#define TP_REPORT_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "report/tp_keys.h"
#include "report/tp_report.h"
#include "report/tp_report_util.h"
#include "store/tp_store.h"

/* ---- what is loaded ----------------------------------------------------- */

/* One configuration as the table needs it; present == 0 when the case has
 * no such configuration. Doubles are NaN where the database holds NULL. */
typedef struct {
  int present;
  int64_t id;
  char *kind, *backend, *model, *layer, *proj, *schedule, *dtype, *pass, *status, *reason;
  char *numerics_ref, *config_key;
  char *ran;                       /* schedules that ran, "ce x4+sm x2"; NULL when none recorded */
  char *ac, *graph_sizes, *rs_sum; /* schema 006's composition axes (NULL: default) */
  char *numerics;                  /* results.numerics: "ok", "failed", ... (NULL: not compared) */
  char *comm_dtype, *symm;         /* schema 007's transport axes (NULL: default) */
  int64_t chunks, tp, batch, seqlen, tokens, m, n, k, n_weights, sp, graph, save_gathered, dp;
  int64_t fsdp_traffic;
  int has_result;
  double median_us, cv, tokens_per_s, tflops, workspace_bytes, rel_err;
  /* device memory in use at the configuration's peak, rank 0 (NaN: not recorded) */
  double peak_mem_bytes;
  /* schema 006 (NaN: not recorded): per rank, what the forward leaves for the backward; rank
   * 0, tpbench's own allocations the configuration holds over its step */
  double activation_bytes, alloc_peak_bytes;
  double traffic_bytes; /* schema 007: the competing FSDP collectives' bytes per rank and step */
  double bytes_moved;   /* bytes one rank sends per iteration (results.bytes_moved) */
  double rank_skew;     /* slowest rank's median / fastest's - 1 (NaN: not recorded) */
  double host_stall;    /* share of iterations a rank's host issued slower than the GPU ran */
  int has_trace;        /* a traces row (schemas/002_trace.sql): trace below is filled */
  tp_trace_info trace;
} config;

/* One row of the table, with everything derived from its configurations.
 * stock and comm are the plain stock op (or layer) and the plain collective
 * alone; stock_window and comm_window their variants on NCCL symmetric
 * windows (schedule "nccl-window"; absent in runs from before it). The
 * speedup is against the faster stock, the bound takes the faster
 * collective. */
typedef struct {
  config dist, stock, gemm, comm, stock_window, comm_window;
  double stock_ms, dist_ms, speedup, gemm_ms, comm_ms, bound_ms, dist_over_bound;
  double stock_window_ms, best_stock_ms, comm_window_ms, best_comm_ms;
  /* tp_report_faster of each pair: the stock the speedup divides and the
   * collective the bound takes; NULL when neither of the pair ran */
  const config *best_stock, *best_comm;
  /* 95 % intervals, rounds paired (common/tp_bootstrap.h): the speedup, and
   * dist/bound against the reference that binds (the slower half); NaN
   * where a side has no samples. */
  double speedup_lo, speedup_hi, bound_lo, bound_hi;
  int stock_path; /* dist_gemm took the stock path for some op (auto's choice): no fusion measured
                   */
  /* The stricter bound: max(GEMM alone, this rank's bytes at the peak copy-engine
   * bandwidth the link probe measured on this host); NaN without a probe. */
  double strict_bound_ms, dist_over_strict;
  double workspace_mib, cv_pct;
  /* From the dist_gemm configuration's trace; NaN where it has none. */
  double overlap_pct, exposed_ms, overhead_pct;
  double sync_ms;      /* median time in barriers, waits and signals per window, beside overlap */
  char evidence[1100]; /* "ok", "failed: ...", "not checked: ...", "not traced"; then
                          "; stock: ..." when the stock op's trace is not ok; "" without a trace */
  int both_ok;         /* stock and dist_gemm both ran: the row counts in the summary */
  const char *status;  /* dist_gemm's status, or "missing" */
  char short_key[TP_SHORT_KEY_LEN + 1]; /* of the row's configuration (case_of) */
  char *note; /* why something is blank or did not run; NULL when nothing to say */
} table_row;

typedef struct {
  int64_t id;
  char *commit, *host, *gpu_name, *driver, *cuda, *nccl, *cublas, *cupti;
  char *command_line, *command, *started_at, *finished_at;
  char *uuid;       /* the run's identity across databases (tpbench import) */
  char *test_knobs; /* test-only knobs in force (runs.test_knobs); NULL: none */
  char *system_md;  /* the header's system block (report/tp_system_report.h); NULL: none */
  int64_t dirty, gpu_count, warmup_iters, measure_iters; /* -1 where unknown */
} run_header;

typedef struct {
  int rows;               /* rows where stock and dist_gemm both ran and dist_gemm fused */
  double geomean_speedup; /* over those rows */
  int same_rows;          /* of those, rows whose speedup interval holds 1 */
  int stock_path_rows;    /* rows where dist_gemm took the stock path: counted apart */
  double stock_path_geomean;
  int failed_rows, other_rows;    /* dist_gemm failed (failed, oom, timeout); rejected or missing */
  double worst_skew, worst_stall; /* over the stock and dist_gemm configurations of the rows */
  int bound_rows;                 /* of those, rows with a bound */
  double median_dist_bound;       /* median of dist/bound over bound_rows */
  double worst_dist_bound;        /* largest dist/bound */
  int strict_rows;                /* rows with a strict bound */
  double median_dist_strict, worst_dist_strict;
} summary;

/* The summary of one model's rows; toy models (tp_report_filter) are kept
 * out of the headline and listed apart. */
typedef struct {
  const char *model; /* points into a row */
  int toy;
  summary sum;
} model_summary;

typedef struct {
  const tp_report_filter *filter;
  run_header run;
  table_row *rows;
  size_t n_rows, rows_cap;
  config *skipped; /* configurations of the run that did not run, with reasons */
  size_t n_skipped, skipped_cap;
  summary sum;           /* the headline: every row of a model that is not a toy */
  int headline_toy_only; /* no row of a real model: the headline covers the toys */
  model_summary *models; /* per model, in the order the rows name them */
  size_t n_models;
  int any_trace;  /* a row has a trace: markdown shows the trace columns */
  int any_window; /* a row has a stock or collective-alone configuration on NCCL windows */
  double
      peer_peak_gbps; /* peak copy-engine push of `tpbench link` on the run's host; NaN if none */
} report;

/* ---- shared by the report's files --------------------------------------- */

/* A configuration that ran and has a result. */
int tp_report_ran_ok(const config *c);

/* The configuration that names the row: dist_gemm's, else the stock one. */
const config *tp_report_case_of(const table_row *row);

/* The faster of a plain configuration and its nccl-window variant, by
 * median: the one that ran when only one did, plain on a tie; NULL when
 * neither ran. Where both ran and only one failed its numerics or schedule
 * evidence, the other (a variant that computed something else, or not on
 * windows, is no baseline; compare's faster reference likewise). A database
 * without window rows thus reads as before. */
const config *tp_report_faster(const config *plain, const config *window);

/* The configuration's axes, pointing into it (for tp_config_label). */
tp_config_axes tp_report_axes_of(const config *c);

/* The markdown header block of the run (run, commit, time, host, software,
 * iterations, command, filter). */
void tp_report_md_header(FILE *out, const report *rep, const char *title);

/* The run as the JSON documents' "run" object; NULL when out of memory. */
json_t *tp_report_json_run(tp_json_builder *jb, const run_header *h);

/* ---- columns (tp_report_columns.c) ---------------------------------------- */

enum { TP_REPORT_MAX_COLUMNS = 128 };

/* The columns a table shows, in order: indexes into the registry. */
typedef struct {
  int index[TP_REPORT_MAX_COLUMNS];
  int count;
  int explicit_choice; /* --columns was given: markdown shows exactly these */
} column_set;

/* The columns of spec for fmt: NULL is the default (markdown: the compact
 * set, with tp, dtype and options when they vary among the rows and overlap
 * when some row was traced; CSV and JSON: every column, JSON leaving out the
 * run's fields it holds in "run"); "all" every column; otherwise a comma
 * list of names. TP_EUSAGE naming the unknown name and listing the valid
 * ones. */
TP_MUST_CHECK tp_rc tp_report_columns_pick(const char *spec, tp_report_format fmt,
                                           const report *rep, column_set *out);

/* The table of rows in markdown: header line, alignment line, one line per row. */
void tp_report_md_rows(FILE *out, const report *rep, const column_set *cols);

/* The CSV: header line, then one line per row (CRLF). */
void tp_report_csv_rows(FILE *out, const report *rep, const column_set *cols);

/* One row as a JSON object of the chosen columns; NULL when out of memory. */
json_t *tp_report_json_row(tp_json_builder *jb, const report *rep, const table_row *row,
                           const column_set *cols);

/* Whether the row's model is a toy (the headline keeps its rows apart). */
int tp_report_row_is_toy(const report *rep, const table_row *row);

/* ---- link probes (tp_report_link.c) --------------------------------------- */

/* Whether run_id is a link probe's run (configurations of kind link, one at
 * least, and none of kind op or layer; kinds tpbench does not know aside). */
TP_MUST_CHECK tp_rc tp_report_is_link_run(tp_store *store, int64_t run_id, int *is_link);

/* The link probe's table, as nccl-tests prints its columns, per transfer
 * kind (see tp_report.h). */
TP_MUST_CHECK tp_rc tp_report_link(tp_store *store, const report *rep, tp_report_format fmt,
                                   FILE *out);

#endif /* TP_REPORT_INTERNAL_H */
