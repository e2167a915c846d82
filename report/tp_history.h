/*
 * tp_history.h — one configuration across commits (`tpbench history`), and
 * every configuration across commits (the trends the dashboard draws).
 *
 * Both read the results table: median, p10, p90 and coefficient of
 * variation of the slowest rank's per-iteration times, as the benchmark
 * stored them. Configurations are matched across runs by their canonical
 * config key (tp_config_key).
 */
#ifndef TP_HISTORY_H
#define TP_HISTORY_H

#include <stdint.h>
#include <stdio.h>

#include "report/tp_report.h"
#include "store/tp_store.h"

/* Which configuration: config_id > 0 stands for its key; otherwise key. */
typedef struct tp_history_query {
  int64_t config_id;
  const char *key;
} tp_history_query;

/*
 * Writes every measurement of one configuration key, oldest first (by the
 * run's start time): one row per run that has the key, so a commit run twice
 * shows twice (how far apart the two are is the run-to-run noise), with run
 * id, commit, dirty flag, start time, host and GPUs, status (and reason when
 * it did not run), iterations, median, p10, p90, cv, and the median's change
 * against the first and the previous successful row.
 *
 * Markdown: a title with the configuration's label and key, then the table.
 * CSV: one line per row. JSON: {"config_key", "label", "rows": [...]}. The
 * same units in each: times in ms (median_ms, p10_ms, p90_ms), cv and the
 * changes in percent (cv_pct, vs_first_pct, vs_previous_pct).
 * TP_EUSAGE when the configuration id or the key does not exist.
 */
TP_MUST_CHECK tp_rc tp_report_history(tp_store *store, const tp_history_query *query,
                                      tp_report_format fmt, FILE *out);

/*
 * Writes, as JSON, the median of every configuration key at every commit,
 * for trend charts:
 *   {"commits": [{"label", "commit", "started_at", "runs": [ids]}, ...],
 *    "series": [{"key", "label", "kind", "backend", "model", "layer", "proj",
 *                "tokens", "dtype", "pass", "schedule",
 *                "points": [{"commit": i, "config_id", "run_id", "median_us",
 *                            "p10_us", "p90_us"}, ...]}, ...]}
 * Commits are ordered by their first run's start time, oldest first; a run
 * without a commit is a commit of its own, labelled "run N". A point is the
 * commit's latest run that ran the key successfully (as `compare` picks);
 * "commit" is its index into "commits". Series are ordered by key.
 */
TP_MUST_CHECK tp_rc tp_report_trends(tp_store *store, FILE *out);

#endif /* TP_HISTORY_H */
