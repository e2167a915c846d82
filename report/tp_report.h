/*
 * tp_report.h — the throughput table read back from a tpbench database, in
 * markdown, CSV or JSON. Works on any machine: it needs the store only.
 *
 * Rows pair up by "case": every configuration axis except backend, kind,
 * schedule and chunks. For each case the table shows the stock op, each
 * dist_gemm configuration, and the GEMM-alone and collective-alone references
 * measured in the same run, with speedup = stock / dist_gemm and
 * bound = max(GEMM alone, collective alone).
 */
#ifndef TP_REPORT_H
#define TP_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "store/tp_store.h"

typedef enum { TP_FMT_MARKDOWN = 0, TP_FMT_CSV, TP_FMT_JSON } tp_report_format;

/* Parses "md"/"markdown", "csv", "json" (any case); TP_EUSAGE otherwise. */
TP_MUST_CHECK tp_rc tp_report_format_parse(const char *name, tp_report_format *out);

typedef struct tp_report_filter {
  int64_t run_id;     /* 0: the latest run (or the run of commit, if given) */
  const char *commit; /* prefix of a commit sha, or NULL */
  const char *model;  /* NULL: any; a model's name in any case (model names match so) */
  const char *layer;
  const char *pass;
  const char *dtype;
  /* The columns to show (tp_report_throughput): NULL the format's default,
   * "all", or a comma list of names. */
  const char *columns;
  /* Models whose rows stay out of the headline summary, listed apart: NULL
   * for tpbench's toy shapes (tp_model_is_toy, common/tp_vocab.h), which
   * every command uses; a test may name others. */
  const char *const *toy_models;
  int n_toy_models;
} tp_report_filter;

/* Prints the run's header (hardware, software, windows) and the table.
 *
 * One row per dist_gemm op configuration of the run (several when different
 * schedules or chunks were requested), plus one per case that has a stock op
 * but no dist_gemm configuration. A dist_gemm configuration that did not run
 * keeps its row, with its status and reason. Every row carries its
 * configuration's id (dist_gemm's, else stock's) and short key
 * (report/tp_keys.h), which `history --key` and `trace --key` take. Times
 * are medians; speedup = stock / dist_gemm; bound = max(GEMM alone,
 * collective alone), blank unless both were measured; a blank cell is "-" in
 * markdown, empty in CSV, null in JSON.
 *
 * Units, the same in every format and named in each header (markdown "stock
 * ms", CSV and JSON "stock_ms"): times in milliseconds, shares (cv, overlap,
 * rank skew, host stalls, tracing overhead) in percent, workspace in MiB,
 * bandwidth in GB/s (10^9 bytes per second); a link probe's transfer times in
 * microseconds, as nccl-tests prints them.
 *
 * Columns: markdown shows a compact set by default (id, key, model, op,
 * shape, pass, schedule, stock ms, dist_gemm ms, speedup with its 95 %
 * interval, dist/bound, status; tp, dtype and options when they vary among
 * the rows; overlap % when a row was traced); CSV and JSON carry every column
 * (JSON leaves the run's fields to its "run" object). filter->columns picks
 * others in any format ("all", or names; an unknown name is TP_EUSAGE listing
 * the valid ones).
 *
 * Trace columns, from the dist_gemm configuration's trace (schemas/
 * 002_trace.sql): overlap % (median over ranks and iteration windows with
 * communication), exposed comm ms (median over ranks and windows), trace
 * overhead % (traced / untraced median - 1) and evidence ("ok", or the
 * mismatch message; a stock trace that contradicts NCCL adds "stock: ...").
 *
 * Markdown: a header block (run, commit, time, host, GPUs, software,
 * iterations, command line), a GitHub table, a summary (the headline over
 * rows of models that are not toys, where stock and dist_gemm both ran:
 * geometric-mean speedup, median and worst dist/bound, the row count; then
 * one line per model, toy models apart) and the configurations that did not
 * run. CSV (RFC 4180, CRLF line ends): one header line, then one line per row
 * and nothing else, so any CSV reader takes it as is; each line carries
 * run_id, commit and the run's host, GPUs, software versions and
 * warm-up/measured iterations instead of a header block. JSON: {"run":
 * {...}, "rows": [...], "rejected": [...], "summary": {..., "models":
 * [...]}} with numbers at full precision.
 *
 * A run of `tpbench link` (all its configurations of kind link) shows the
 * probe instead, per transfer kind as nccl-tests prints it: size (bytes),
 * count (elements), time (us), algbw and busbw (GB/s). size is what one
 * collective moves in all (all-gather's output, reduce-scatter's input: the
 * ranks' share times the ranks), or one rank's push; algbw = size / time;
 * busbw = algbw · (ranks - 1) / ranks for the collectives, algbw for a push.
 * The model, layer, pass and dtype filters and named columns do not apply to
 * it (TP_EUSAGE); columns "all" is its fixed table, every column it has.
 *
 * filter may be NULL (latest run, everything). TP_EUSAGE when the database
 * has no runs, the run or commit does not exist, nothing in the run matches
 * the filter or a column is unknown; TP_EIO when out cannot be written. */
TP_MUST_CHECK tp_rc tp_report_throughput(tp_store *store, const tp_report_filter *filter,
                                         tp_report_format fmt, FILE *out);

/* ---- the headline ------------------------------------------------------------------- */

/* The figures of one headline scope. */
typedef struct tp_headline_figures {
  int rows;                      /* rows where stock and dist_gemm both ran and dist_gemm fused */
  double geomean_speedup;        /* geometric mean of best stock / dist_gemm over them; NaN: none */
  int bound_rows;                /* of them, rows with a bound */
  double median_dist_over_bound; /* median (not mean) of dist_gemm / bound; NaN: none */
} tp_headline_figures;

enum { TP_HEADLINE_MAX_TOYS = 8, TP_HEADLINE_MODEL_MAX = 64 };

/* A run's headline by the one rule every reader shows it with: the summary of `report` (every
 * format), the dashboard's cards, `compare`'s lines per run and the OpenMetrics headline
 * gauges. Its rows are those of the run's op or layer table where stock and dist_gemm both ran
 * and dist_gemm fused (a row where auto took the stock path measures noise, and is left out
 * as report's summary says), of models that are not toys (tp_model_is_toy: the debug preset);
 * a run of toy models alone is summarised over them, toy_only set. Each toy model's own
 * figures are in toys[], shown apart. */
typedef struct tp_headline {
  int64_t run_id;
  tp_headline_figures figures;
  int toy_only;
  int n_toys;
  struct {
    char model[TP_HEADLINE_MODEL_MAX];
    tp_headline_figures figures;
  } toys[TP_HEADLINE_MAX_TOYS];
} tp_headline;

/* Fills *out for run_id (0: the latest run). TP_EUSAGE when the run does not exist or has no
 * op or layer table (a link probe, a drift run, a profile run); TP_ESQLITE, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_report_headline(tp_store *store, int64_t run_id, tp_headline *out);

/* "1.067x geometric-mean speedup over 24 rows, median dist/bound 1.18 over 24" and, when the
 * run has toy models, "; toy models apart: debug 0.622x, 1.91": the headline in one line of
 * plain text (no markup), for every reader that prints it. */
void tp_headline_line(const tp_headline *h, char *buf, size_t cap);

#endif /* TP_REPORT_H */
