/*
 * cmd_history.c — `tpbench history`: one configuration's median and spread
 * across commits, oldest first (report/tp_history.h does the work). Needs
 * no GPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "report/tp_history.h"
#include "report/tp_keys.h"

typedef struct history_args {
  const char *db;
  const char *format;
  const char *key;
  long long config;
} history_args;

static tp_rc parse_args(int argc, char **argv, history_args *a, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"key", TP_OPT_STRING, &a->key, "KEY",
       "configuration key, or a unique prefix of its short key (as report shows)", 0, 0, NULL},
      {"config", TP_OPT_INT64, &a->config, "ID", "a configuration id standing for its key", 0,
       INT64_MAX, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "output format", 0, 0, "md|csv|json"},
  };
  const tp_command cmd = {
      .name = "history",
      .usage = "tpbench history (--key KEY | --config ID) [options]",
      .summary = "Shows one configuration across runs, oldest first: commit, median, p10, p90\n"
                 "and cv of the slowest rank's per-iteration times, and the change against the\n"
                 "first and the previous run. A commit run twice shows twice.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help);
}

static tp_rc show_history(const history_args *a, tp_report_format fmt) {
  tp_store *store = NULL;
  TP_TRY(tp_open_for_reading("history", a->db, &store));
  char *key = NULL;
  tp_rc rc = a->key ? tp_config_key_resolve(store, a->key, &key) : TP_OK;
  tp_history_query q = {.config_id = a->config, .key = key};
  if (rc == TP_OK) rc = tp_report_history(store, &q, fmt, stdout);
  free(key);
  if (rc != TP_OK) tp_print_error("history");
  tp_store_close(store);
  return rc;
}

int tp_cmd_history(int argc, char **argv) {
  history_args a = {.db = "tpbench.db", .format = "md"};
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &a, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  if ((a.key != NULL) == (a.config > 0)) {
    fprintf(stderr, "tpbench history: give exactly one of --key and --config\n"
                    "Try 'tpbench history --help'.\n");
    return tp_exit_for(TP_EUSAGE);
  }
  tp_report_format fmt;
  rc = tp_report_format_parse(a.format, &fmt);
  if (rc != TP_OK) {
    tp_print_error("history");
    return tp_exit_for(rc);
  }
  return tp_exit_for(show_history(&a, fmt));
}
