/*
 * tp_dashboard.h — `tpbench dashboard`: a static HTML site of a database
 * that works offline (no CDN, no server, nothing fetched).
 *
 * The site is one file, DIR/index.html: the template, CSS and JavaScript of
 * dashboards/assets/ inlined, and the database's figures embedded as JSON,
 * all read through report/: per run the throughput table
 * (tp_report_throughput, JSON), the trends across commits
 * (tp_report_trends), and per traced configuration its Chrome trace
 * (tp_report_chrome_trace). The page's JavaScript draws the summary, the
 * speedup and bound charts, the table, a timeline per traced configuration
 * (lanes per rank and stream, coloured by category, hover details) and the
 * trends, all as inline SVG.
 */
#ifndef TP_DASHBOARD_H
#define TP_DASHBOARD_H

#include <stddef.h>

#include "store/tp_store.h"

typedef struct tp_dashboard_options {
  /* Events per trace the page carries (a timeline of more is unreadable
   * and slow to draw); later events are left out and the page says so.
   * 0: the default, TP_DASHBOARD_MAX_EVENTS. */
  size_t max_trace_events;
} tp_dashboard_options;

#define TP_DASHBOARD_MAX_EVENTS 20000

/* What went into the page. */
typedef struct tp_dashboard_stats {
  int runs;     /* runs with a throughput table */
  int traces;   /* traced configurations */
  int series;   /* configuration keys in the trends */
  size_t bytes; /* size of index.html */
} tp_dashboard_stats;

/* Writes out_dir/index.html (creating out_dir, one level, if missing; an
 * existing index.html is replaced only once the new one is complete, by a
 * rename: report/tp_output.h). Runs without op configurations are left out
 * of the tables. opt and stats may be NULL. TP_EUSAGE when the database
 * holds no runs, out_dir is empty or not a directory, or index.html exists
 * and is not a regular file or is the database; TP_EIO when it cannot be
 * written. out_dir and index.html are checked before the database is read
 * (nothing created when refused) and again before the rename. */
tp_rc tp_dashboard_write(tp_store *store, const char *out_dir, const tp_dashboard_options *opt,
                         tp_dashboard_stats *stats);

#endif /* TP_DASHBOARD_H */
