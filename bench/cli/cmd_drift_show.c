/*
 * cmd_drift_show.c — `tpbench drift --show RUN`: the drift table of a stored
 * run, read back (report/tp_drift.h), in every build: it needs no GPU.
 */
#include <stdio.h>

#include "bench/cli/commands.h"
#include "bench/cli/drift_args.h"
#include "report/tp_drift.h"

int tp_drift_show(const tp_drift_args *args) {
  tp_report_format fmt = TP_FMT_MARKDOWN;
  tp_rc rc = tp_report_format_parse(args->format, &fmt);
  tp_store *store = NULL;
  if (rc == TP_OK) rc = tp_open_for_reading("drift", args->db, &store);
  else tp_print_error("drift");
  if (rc != TP_OK) return tp_exit_for(rc);
  tp_drift_run run;
  rc = tp_drift_load(store, args->show_run, &run);
  if (rc == TP_OK) rc = tp_drift_print(&run, fmt, stdout);
  int status = tp_exit_for(rc);
  if (rc == TP_OK) {
    tp_drift_verdict verdict;
    tp_drift_judge(&run, &verdict);
    status = tp_drift_exit_status(&verdict);
    char why[160];
    if (tp_drift_failure(&verdict, why, sizeof why))
      fprintf(stderr, "tpbench drift: run %lld: %s\n", (long long)run.run_id, why);
  } else {
    tp_print_error("drift");
  }
  tp_drift_run_free(&run);
  tp_store_close(store);
  return status;
}
