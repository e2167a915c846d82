/*
 * cmd_runs.c — `tpbench runs`: the runs of a database, one line each
 * (report/tp_runs.h does the work), so a run can be found before `report
 * --run`, `compare run:N` or `trace`. Needs no GPU.
 */
#include <stdio.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "report/tp_runs.h"

typedef struct runs_args {
  const char *db;
  const char *format;
} runs_args;

static tp_rc parse_args(int argc, char **argv, runs_args *a, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "output format", 0, 0, "md|csv|json"},
  };
  const tp_command cmd = {
      .name = "runs",
      .usage = "tpbench runs [--db PATH] [--format md|csv|json]",
      .summary = "Lists the runs of a database, oldest first: id, commit, start time, host and\n"
                 "GPUs, command (ops, run, link), the kinds of its configurations, how many\n"
                 "are ok, failed and rejected, and whether the run finished.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help);
}

static tp_rc list_runs(const runs_args *a) {
  tp_report_format fmt;
  tp_rc rc = tp_report_format_parse(a->format, &fmt);
  if (rc != TP_OK) {
    tp_print_error("runs");
    return rc;
  }
  tp_store *store = NULL;
  TP_TRY(tp_open_for_reading("runs", a->db, &store));
  rc = tp_report_runs(store, fmt, stdout);
  if (rc != TP_OK) tp_print_error("runs");
  tp_store_close(store);
  return rc;
}

int tp_cmd_runs(int argc, char **argv) {
  runs_args args = {.db = "tpbench.db", .format = "md"};
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  return tp_exit_for(list_runs(&args));
}
