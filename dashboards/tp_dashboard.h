/*
 * tp_dashboard.h — `tpbench dashboard`: a static HTML site of a database
 * that works offline (no CDN, no server, nothing fetched).
 *
 * The site is DIR/index.html and DIR/traces/. index.html holds the
 * template, CSS and JavaScript of dashboards/assets/ inlined and the
 * database's figures embedded as JSON, read through report/: per run the
 * throughput table (tp_report_throughput, JSON), the trends across commits
 * (tp_report_trends), the `tpbench link` probes (tp_dashboard_links.h) and
 * an index of the traced configurations. Each traced configuration's Chrome
 * trace (tp_report_chrome_trace) is a compressed file of its own in
 * DIR/traces/ (tp_dashboard_files.h) that the page loads when its timeline
 * is shown, so the page stays small however many traces the database
 * holds. The page's JavaScript draws the summary, the speedup and bound
 * charts, the table, a compare view of two runs, the timeline of one
 * traced configuration (lanes per rank and stream, coloured by category,
 * hover details), the trends and the link probes, all as inline SVG.
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
  int runs;           /* runs with a throughput table */
  int traces;         /* traced configurations (a file each in DIR/traces/) */
  int series;         /* configuration keys in the trends */
  int link_runs;      /* runs of `tpbench link` */
  size_t bytes;       /* size of index.html */
  size_t trace_bytes; /* the trace files' sizes together */
} tp_dashboard_stats;

/* Writes a generation of the site — traces/<config-id>-<crc32>.js per
 * traced configuration, then index.html — into a fresh folder beside
 * out_dir and puts it in place whole (tp_dashboard_place.h): out_dir is the
 * old generation or the new one, never a mix, whenever the process stops.
 * Runs without op or layer configurations are left out of the tables. opt
 * and stats may be NULL. TP_EUSAGE when the database holds no runs, out_dir
 * is empty, not a directory or holds a file a dashboard did not write,
 * out_dir/traces exists and is not a directory, index.html exists and is
 * not a regular file or is the database, or the folder that holds out_dir
 * cannot take the new one; TP_EIO when a file cannot be written. Those are
 * checked before the database is read (nothing created when refused). */
tp_rc tp_dashboard_write(tp_store *store, const char *out_dir, const tp_dashboard_options *opt,
                         tp_dashboard_stats *stats);

#endif /* TP_DASHBOARD_H */
