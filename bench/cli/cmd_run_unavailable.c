/*
 * cmd_run_unavailable.c — `tpbench run` in a build without CUDA: the same
 * options as the real command (run_args.h), so usage errors and --help
 * behave alike; a run itself says that this build cannot use a GPU and
 * points at `tpbench matrix`, which prints the plan without one.
 */
#include <stdio.h>

#include "bench/cli/commands.h"
#include "bench/cli/run_args.h"

int tp_cmd_run(int argc, char **argv) {
  tp_run_args args;
  tp_run_args_defaults(&args);
  int help = 0;
  tp_rc rc = tp_run_args_parse("run", argc, argv, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  fprintf(stderr, "tpbench run: this build has no CUDA support (configured with "
                  "TPBENCH_WITH_CUDA=OFF or without nvcc), so no GPU can be used; `tpbench matrix` "
                  "with the same options prints the plan\n");
  return tp_exit_for(TP_ENODEV);
}
