/*
 * cmd_matrix.c — `tpbench matrix`: the configurations `tpbench run` would
 * run for a preset, a matrix file and --axis assignments, each rejected one
 * with its reason. Pure CPU: it works in every build and on any machine;
 * rules only a GPU host can decide are named at the end of the listing.
 */
#include <stdio.h>

#include "bench/cli/commands.h"
#include "bench/cli/run_args.h"

int tp_cmd_matrix(int argc, char **argv) {
  tp_run_args args;
  tp_run_args_defaults(&args);
  int help = 0;
  tp_rc rc = tp_run_args_parse("matrix", argc, argv, &args, &help);
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
