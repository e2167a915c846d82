/*
 * cmd_matrix.c — `tpbench matrix`: the configurations `tpbench run` (or, with
 * --for ops, `tpbench ops`) would run for the same matrix options — a preset,
 * a matrix file, --axis assignments and the convenience flags — each rejected
 * one with its reason. Pure CPU: it works in every build and on any machine;
 * rules only a GPU host can decide are named at the end of the listing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/commands.h"
#include "bench/cli/ops_args.h"
#include "bench/cli/run_args.h"

/* Takes every "--for X" / "--for=X" (up to a "--") out of argv into *target
 * (the last one counts); kept receives the rest. TP_EUSAGE, printed, for a
 * missing or unknown value. */
static tp_rc take_for(int argc, char **argv, char **kept, int *n_kept, const char **target) {
  int n = 0, done = 0;
  for (int i = 0; i < argc; ++i) {
    const char *value = NULL;
    if (i > 0 && !done && strcmp(argv[i], "--") == 0) done = 1;
    if (i > 0 && !done && strcmp(argv[i], "--for") == 0) {
      value = i + 1 < argc ? argv[++i] : "";
    } else if (i > 0 && !done && strncmp(argv[i], "--for=", 6) == 0) {
      value = argv[i] + 6;
    } else {
      kept[n++] = argv[i];
      continue;
    }
    if (strcmp(value, "run") != 0 && strcmp(value, "ops") != 0) {
      fprintf(stderr,
              "tpbench matrix: --for: '%s' is not one of run|ops\nTry 'tpbench matrix --help'.\n",
              value);
      return TP_FAIL(TP_EUSAGE, "--for: '%s' is not one of run|ops", value);
    }
    *target = value;
  }
  *n_kept = n;
  return TP_OK;
}

static int print_run_plan(int argc, char **argv, const tp_option *for_option) {
  tp_run_args args;
  tp_run_args_defaults(&args);
  int help = 0;
  tp_rc rc = tp_run_args_parse_for("matrix", argc, argv, for_option, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  tp_layer_matrix matrix;
  /* The options were checked by expanding them once: a failure here is not the input's. */
  rc = tp_layer_expand(&args.spec, TP_RUN_MATRIX_DEFAULT_TP, &matrix);
  if (rc != TP_OK) {
    fprintf(stderr, "tpbench matrix: %s\n", tp_last_message());
    return tp_exit_for(rc);
  }
  tp_layer_matrix_print(&matrix, stdout);
  tp_layer_matrix_free(&matrix);
  return tp_exit_for(TP_OK);
}

static int print_ops_plan(int argc, char **argv, const tp_option *for_option) {
  tp_ops_args *args = malloc(sizeof *args);
  if (!args) return tp_exit_for(TP_FAIL(TP_EOOM, "no memory for the options"));
  tp_ops_args_defaults(args);
  int help = 0;
  tp_rc rc = tp_ops_matrix_args_parse("matrix", argc, argv, for_option, args, &help);
  tp_ops_matrix matrix;
  memset(&matrix, 0, sizeof matrix);
  if (rc == TP_OK && !help) {
    tp_ops_spec spec = tp_ops_args_spec(args, TP_OPS_LIST_DEFAULT_TP);
    rc = tp_ops_expand(&spec, &matrix);
    if (rc != TP_OK) fprintf(stderr, "tpbench matrix: %s\n", tp_last_message());
    else tp_ops_matrix_print(&matrix, stdout);
  }
  tp_ops_matrix_free(&matrix);
  free(args);
  return tp_exit_for(rc);
}

int tp_cmd_matrix(int argc, char **argv) {
  char **kept = calloc((size_t)argc + 1, sizeof *kept);
  if (!kept) return tp_exit_for(TP_FAIL(TP_EOOM, "no memory for the command line"));
  const char *target = "run", *for_shown = "run";
  const tp_option for_option = {"for",
                                TP_OPT_STRING,
                                &for_shown,
                                "CMD",
                                "whose configurations to print: run's layers or ops' projections",
                                0,
                                0,
                                "run|ops"};
  int n_kept = 0, status = 0;
  tp_rc rc = take_for(argc, argv, kept, &n_kept, &target);
  if (rc != TP_OK) status = tp_exit_for(rc);
  else if (strcmp(target, "ops") == 0) status = print_ops_plan(n_kept, kept, &for_option);
  else status = print_run_plan(n_kept, kept, &for_option);
  free(kept);
  return status;
}
