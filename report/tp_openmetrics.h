/*
 * tp_openmetrics.h — one run of the store as OpenMetrics text
 * (`tpbench report --format openmetrics`), for a Prometheus Pushgateway, a
 * textfile collector or any tool that reads the exposition format.
 *
 * Families, in this order: tpbench_run (info: run, commit, host, GPU, GPU
 * count, driver, command, started_at), then one gauge per measure of a
 * configuration — tpbench_median_seconds, tpbench_p10_seconds,
 * tpbench_p90_seconds, tpbench_mean_seconds, tpbench_min_seconds,
 * tpbench_max_seconds, tpbench_cv_ratio, tpbench_tokens_per_second,
 * tpbench_tflops — with one sample per configuration that has a result.
 * Labels: kind, model, op_or_layer, backend, schedule, tokens, tp, dtype,
 * pass and key (the canonical config key, unique within the run; a key
 * measured twice in a run gives its latest ok measurement). Label values
 * are escaped as the format requires (report/tp_escape.h); the text ends
 * with "# EOF".
 */
#ifndef TP_OPENMETRICS_H
#define TP_OPENMETRICS_H

#include <stdio.h>

#include "report/tp_report.h"
#include "store/tp_store.h"

/* Writes the run that filter names (run_id; 0: the latest, of filter->commit
 * when given) with the configurations that model, layer, pass and dtype
 * select (NULL: any). TP_EUSAGE when no run matches; TP_ESQLITE; TP_EIO
 * when out cannot be written. */
TP_MUST_CHECK tp_rc tp_report_openmetrics(tp_store *store, const tp_report_filter *filter,
                                          FILE *out);

#endif /* TP_OPENMETRICS_H */
