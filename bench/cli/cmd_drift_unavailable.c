/*
 * cmd_drift_unavailable.c — `tpbench drift` in a build without CUDA: the
 * same options as the real command (drift_args.h), so usage errors and
 * --help behave alike, and --show prints a stored table; training says that
 * this build cannot use a GPU.
 */
#include <stdio.h>

#include "bench/cli/commands.h"
#include "bench/cli/drift_args.h"

int tp_cmd_drift(int argc, char **argv) {
  tp_drift_args args;
  tp_drift_args_defaults(&args);
  int help = 0;
  tp_rc rc = tp_drift_args_parse(argc, argv, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  if (args.show) return tp_drift_show(&args);
  fprintf(stderr, "tpbench drift: this build has no CUDA support (configured with "
                  "TPBENCH_WITH_CUDA=OFF or without nvcc), so no GPU can be used; --show RUN "
                  "prints a stored drift table\n");
  return tp_exit_for(TP_ENODEV);
}
