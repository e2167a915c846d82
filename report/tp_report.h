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

#include "../store/tp_store.h"

typedef enum { TP_FMT_MARKDOWN = 0, TP_FMT_CSV, TP_FMT_JSON } tp_report_format;

/* Parses "md"/"markdown", "csv", "json". */
tp_rc tp_report_format_parse(const char *name, tp_report_format *out);

typedef struct tp_report_filter {
  int64_t run_id;      /* 0: the latest run (or the run of commit, if given) */
  const char *commit;  /* prefix of a commit sha, or NULL */
  const char *model;   /* NULL: any */
  const char *layer;
  const char *pass;
  const char *dtype;
} tp_report_filter;

/* Prints the run's header (hardware, software, windows) and the table. */
tp_rc tp_report_throughput(tp_store *store, const tp_report_filter *filter, tp_report_format fmt,
                           FILE *out);

#endif /* TP_REPORT_H */
