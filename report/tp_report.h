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
  const char *model;  /* NULL: any */
  const char *layer;
  const char *pass;
  const char *dtype;
} tp_report_filter;

/* Prints the run's header (hardware, software, windows) and the table.
 *
 * One row per dist_gemm op configuration of the run (several when different
 * schedules or chunks were requested), plus one per case that has a stock op
 * but no dist_gemm configuration. A dist_gemm configuration that did not run
 * keeps its row, with its status and reason. Times are medians; speedup =
 * stock / dist_gemm; bound = max(GEMM alone, collective alone), blank unless
 * both were measured; a blank cell is "-" in markdown, empty in CSV, null in
 * JSON.
 *
 * Trace columns, from the dist_gemm configuration's trace (schemas/
 * 002_trace.sql): overlap % (median over ranks and iteration windows with
 * communication), exposed comm ms (median over ranks and windows), trace
 * overhead % (traced / untraced median - 1) and evidence ("ok", or the
 * mismatch message; a stock trace that contradicts NCCL adds "stock: ...").
 * Markdown shows them, before "status", only when some row has a trace; CSV
 * and JSON always carry them (blank/null without a trace), so their shape
 * does not depend on the data.
 *
 * Markdown: a header block (run, commit, time, host, GPUs, software,
 * iterations, command line), a GitHub table, a summary line (over rows where
 * stock and dist_gemm both ran: geometric-mean speedup, median and worst
 * dist/bound, the row count) and the configurations that did not run.
 * CSV (RFC 4180, CRLF line ends): one header line, then one line per row and
 * nothing else, so any CSV reader takes it as is; each line carries run_id,
 * commit and, in its last columns, the run's host, GPUs, software versions
 * and warm-up/measured iterations instead of a header block. JSON: {"run":
 * {...}, "rows": [...],
 * "rejected": [...], "summary": {...}} with numbers at full precision.
 *
 * filter may be NULL (latest run, everything). TP_EUSAGE when the database
 * has no runs, the run or commit does not exist, or nothing in the run
 * matches the filter; TP_EIO when out cannot be written. */
TP_MUST_CHECK tp_rc tp_report_throughput(tp_store *store, const tp_report_filter *filter,
                                         tp_report_format fmt, FILE *out);

#endif /* TP_REPORT_H */
