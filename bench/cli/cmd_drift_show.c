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
  int status = TP_EXIT_FAILURE;
  rc = tp_drift_show_table(store, args->show_run, fmt, stdout, stderr, &status);
  if (rc != TP_OK) {
    status = tp_exit_for(rc);
    tp_print_error("drift");
  }
  tp_store_close(store);
  return status;
}
