/*
 * cmd_report.c — `tpbench report`: prints the throughput table of an
 * existing database (report/tp_report.h does the work). Needs no GPU.
 * A `tpbench drift` run's report is its drift table (report/tp_drift.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "bench/matrix/presets.h"
#include "report/tp_drift.h"
#include "report/tp_openmetrics.h"
#include "report/tp_profile.h"
#include "report/tp_report.h"

typedef struct report_args {
  const char *db;
  const char *format;
  long long run;
  const char *commit;
  const char *model;
  const char *layer;
  const char *pass;
  const char *dtype;
  const char *columns;
} report_args;

static tp_rc parse_args(int argc, char **argv, report_args *a, int *help) {
  char dtype_help[256]; /* the dtypes from their one list (common/tp_vocab.h) */
  snprintf(dtype_help, sizeof dtype_help, "only this data type (%s)",
           TP_VOCAB_COMMA_SPACES(TP_DTYPE_LIST));
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "output format", 0, 0,
       "md|csv|json|openmetrics"},
      {"run", TP_OPT_INT64, &a->run, "ID", "run to show; 0 = the latest (of --commit)", 0,
       INT64_MAX, NULL},
      {"commit", TP_OPT_STRING, &a->commit, "SHA", "runs of this commit (a prefix will do)", 0, 0,
       NULL},
      {"model", TP_OPT_STRING, &a->model, "NAME", "only this model (8b, llama3-8b, ...)", 0, 0,
       NULL},
      {"layer", TP_OPT_STRING, &a->layer, "NAME", "only this op or layer (ag_linear, ...)", 0, 0,
       NULL},
      {"pass", TP_OPT_STRING, &a->pass, "NAME", "only this pass (fwd, bwd, fwd+bwd)", 0, 0, NULL},
      {"dtype", TP_OPT_STRING, &a->dtype, "NAME", dtype_help, 0, 0, NULL},
      {"columns", TP_OPT_STRING, &a->columns, "LIST",
       "columns to show, comma-separated, or all (default: md the compact table; csv and json "
       "every column). A drift run's or link probe's table has fixed columns: all shows them "
       "all, names are refused",
       0, 0, NULL},
  };
  const tp_command cmd = {
      .name = "report",
      .usage = "tpbench report [options]",
      .summary = "Prints the throughput table of a run: stock vs dist_gemm time, speedup with its\n"
                 "95% interval, dist/bound (bound: the GEMM alone or the collective alone, the\n"
                 "slower), the schedule that ran; each row's configuration id and short key.\n"
                 "Markdown shows a compact table; CSV and JSON every column. Times in ms, shares\n"
                 "in %. A link probe's run shows its transfers as nccl-tests does. The headline\n"
                 "geometric mean leaves toy models (debug) out; each model has its own line.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help);
}

/* The run a reader means, 0 when none can be found (the table says why). */
static int64_t latest_run(tp_store *store, const report_args *a) {
  int64_t run = 0;
  if (tp_store_find_run(store, a->run, a->commit, &run) != TP_OK) return 0;
  return run;
}

/* 1 when the run the reader means is a `tpbench profile` run (its
 * configuration in *config_id). */
static int profile_run(tp_store *store, const report_args *a, int64_t *config_id) {
  int64_t run = latest_run(store, a);
  return run > 0 && tp_profile_config_of_run(store, run, config_id) == TP_OK;
}

/* 1 when the run the reader means is a `tpbench drift` run (every configuration of kind drift). */
static int drift_run(tp_store *store, const report_args *a) {
  int64_t run = latest_run(store, a);
  int is_drift = 0;
  return run > 0 && tp_drift_is_drift_run(store, run, &is_drift) == TP_OK && is_drift;
}

/* 1 when --columns names columns; "all" asks for every column of whatever table the run has,
 * which a drift run's or link probe's fixed table honours as it is. */
static int names_columns(const char *columns) { return columns && strcmp(columns, "all") != 0; }

/* The first option given that selects rows or columns of a throughput table, NULL when none. */
static const char *table_option(const report_args *a) {
  const struct {
    const char *value, *name;
  } table_options[] = {{a->model, "--model"},
                       {a->layer, "--layer"},
                       {a->pass, "--pass"},
                       {a->dtype, "--dtype"},
                       {names_columns(a->columns) ? a->columns : NULL, "--columns"}};
  for (size_t i = 0; i < sizeof table_options / sizeof table_options[0]; i++)
    if (table_options[i].value) return table_options[i].name;
  return NULL;
}

/* A drift run's report is its drift table (report/tp_drift.h): markdown or CSV, one shape per
 * run, fixed columns. An option the table cannot honour is refused, not ignored. */
static tp_rc print_drift(tp_store *store, const report_args *a, tp_report_format fmt) {
  const int64_t run_id = latest_run(store, a);
  if (fmt == TP_FMT_JSON)
    return TP_FAIL(TP_EUSAGE,
                   "%s: run %lld is a drift run: its table is markdown or CSV (--format md|csv), "
                   "no JSON",
                   tp_store_path(store), (long long)run_id);
  if (table_option(a))
    return TP_FAIL(TP_EUSAGE,
                   "%s: run %lld is a drift run: its table has one shape and fixed columns; %s "
                   "applies to op and layer runs",
                   tp_store_path(store), (long long)run_id, table_option(a));
  tp_drift_run run;
  tp_rc rc = tp_drift_load(store, run_id, &run);
  if (rc == TP_OK) rc = tp_drift_print(&run, fmt, stdout);
  tp_drift_run_free(&run);
  return rc;
}

static tp_rc print_report(const report_args *a) {
  tp_report_format fmt = TP_FMT_MARKDOWN;
  int openmetrics = !strcmp(a->format, "openmetrics"); /* the run's export, not the table */
  tp_rc rc = openmetrics ? TP_OK : tp_report_format_parse(a->format, &fmt);
  /* --columns was ignored there without a word; the families are fixed */
  if (rc == TP_OK && openmetrics && a->columns)
    rc = TP_FAIL(TP_EUSAGE, "--columns applies to md, csv and json; --format openmetrics writes "
                            "fixed families (tpbench_median_seconds, ...)");
  if (rc != TP_OK) {
    tp_print_error("report");
    return rc;
  }
  tp_store *store = NULL;
  TP_TRY(tp_open_for_reading("report", a->db, &store));
  int64_t profile_config = 0; /* a `tpbench profile` run has its own report */
  if (!openmetrics && profile_run(store, a, &profile_config) && profile_config > 0) {
    rc = tp_profile_report(store, latest_run(store, a), stdout);
    if (rc != TP_OK) tp_print_error("report");
    tp_store_close(store);
    return rc;
  }
  if (!openmetrics && drift_run(store, a)) {
    rc = print_drift(store, a, fmt);
    if (rc != TP_OK) tp_print_error("report");
    tp_store_close(store);
    return rc;
  }
  tp_report_filter filter = {.run_id = a->run,
                             .commit = a->commit,
                             .model = tp_model_filter_name(a->model),
                             .layer = a->layer,
                             .pass = a->pass,
                             .dtype = a->dtype,
                             .columns = a->columns};
  rc = openmetrics ? tp_report_openmetrics(store, &filter, stdout)
                   : tp_report_throughput(store, &filter, fmt, stdout);
  if (rc != TP_OK) tp_print_error("report");
  tp_store_close(store);
  return rc;
}

int tp_cmd_report(int argc, char **argv) {
  report_args args = {.db = "tpbench.db", .format = "md"};
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  return tp_exit_for(print_report(&args));
}
