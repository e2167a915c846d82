/*
 * cmd_history.c — `tpbench history`: one configuration's median and spread
 * across commits, oldest first (report/tp_history.h does the work). Needs
 * no GPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "../report/tp_history.h"
#include "cli.h"
#include "commands.h"

typedef struct history_args {
  const char *db;
  const char *format;
  const char *key;
  long long config;
} history_args;

static tp_rc parse_args(int argc, char **argv, history_args *a, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"key", TP_OPT_STRING, &a->key, "KEY", "configuration key (as report --format json shows)", 0,
       0, NULL},
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

static int show_history(const history_args *a, tp_report_format fmt) {
  if (access(a->db, F_OK) != 0) {
    fprintf(stderr, "tpbench history: no database at '%s' (pass --db)\n", a->db);
    return TP_EXIT_FAILURE;
  }
  tp_store *store = NULL;
  if (tp_store_open_readonly(a->db, &store) != TP_OK) {
    fprintf(stderr, "tpbench history: cannot open '%s': %s\n", a->db, tp_cli_last_message());
    return TP_EXIT_FAILURE;
  }
  tp_history_query q = {.config_id = a->config, .key = a->key};
  tp_rc rc = tp_report_history(store, &q, fmt, stdout);
  if (rc != TP_OK) fprintf(stderr, "tpbench history: %s\n", tp_cli_last_message());
  tp_store_close(store);
  if (rc == TP_EUSAGE) return TP_EXIT_USAGE;
  return rc == TP_OK ? TP_EXIT_OK : TP_EXIT_FAILURE;
}

int tp_cmd_history(int argc, char **argv) {
  history_args a = {.db = "tpbench.db", .format = "md"};
  int help = 0;
  if (parse_args(argc, argv, &a, &help) != TP_OK) return TP_EXIT_USAGE;
  if (help) return TP_EXIT_OK;
  if ((a.key != NULL) == (a.config > 0)) {
    fprintf(stderr, "tpbench history: give exactly one of --key and --config\n"
                    "Try 'tpbench history --help'.\n");
    return TP_EXIT_USAGE;
  }
  tp_report_format fmt;
  if (tp_report_format_parse(a.format, &fmt) != TP_OK) {
    fprintf(stderr, "tpbench history: %s\n", tp_cli_last_message());
    return TP_EXIT_USAGE;
  }
  return show_history(&a, fmt);
}
