/*
 * cmd_dashboard.c — `tpbench dashboard`: writes the static, offline HTML
 * dashboard of a database (dashboards/tp_dashboard.h does the work). Needs
 * no GPU.
 */
#include <stdint.h>
#include <stdio.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "dashboards/tp_dashboard.h"

typedef struct dashboard_args {
  const char *db;
  const char *out;
  long long max_events;
} dashboard_args;

static tp_rc parse_args(int argc, char **argv, dashboard_args *a, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"out", TP_OPT_STRING, &a->out, "DIR",
       "directory for index.html and traces/ (created if missing)", 0, 0, NULL},
      {"max-events", TP_OPT_INT64, &a->max_events, "N", "events per timeline the page carries", 1,
       10000000, NULL},
  };
  const tp_command cmd = {
      .name = "dashboard",
      .usage = "tpbench dashboard --out DIR [options]",
      .summary = "Writes DIR/index.html, a page that works offline: per run the throughput\n"
                 "table with speedup and bound charts, a compare view of two runs, a timeline\n"
                 "per traced configuration (lanes per rank and stream, hover for details),\n"
                 "trends across commits and the link probes. Traces are compressed files in\n"
                 "DIR/traces/, loaded when shown; keep them beside index.html. Open it in a\n"
                 "browser; nothing off the machine is fetched. DIR is replaced whole, so one\n"
                 "holding anything a dashboard did not write (an index.html of your own too)\n"
                 "is refused, and left as it was.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help);
}

static tp_rc write_dashboard(const dashboard_args *a) {
  tp_store *store = NULL;
  TP_TRY(tp_open_for_reading("dashboard", a->db, &store));
  tp_dashboard_options opt = {.max_trace_events = (size_t)a->max_events};
  tp_dashboard_stats st;
  tp_rc rc = tp_dashboard_write(store, a->out, &opt, &st);
  tp_store_close(store);
  if (rc != TP_OK) {
    tp_print_error("dashboard");
    return rc;
  }
  printf("%s/index.html: %d run%s, %d trace%s, %d configurations in the trends, %d link probe "
         "run%s (%zu bytes; %zu more in %s/traces/, loaded on demand)\n",
         a->out, st.runs, st.runs == 1 ? "" : "s", st.traces, st.traces == 1 ? "" : "s", st.series,
         st.link_runs, st.link_runs == 1 ? "" : "s", st.bytes, st.trace_bytes, a->out);
  return TP_OK;
}

int tp_cmd_dashboard(int argc, char **argv) {
  dashboard_args a = {.db = "tpbench.db", .max_events = TP_DASHBOARD_MAX_EVENTS};
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &a, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  if (!a.out) {
    fprintf(stderr, "tpbench dashboard: --out DIR is required\nTry 'tpbench dashboard --help'.\n");
    return tp_exit_for(TP_EUSAGE);
  }
  return tp_exit_for(write_dashboard(&a));
}
