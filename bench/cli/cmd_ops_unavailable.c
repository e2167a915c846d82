/*
 * cmd_ops_unavailable.c — `tpbench ops` in a build without CUDA: the same
 * options as the real command (ops_args.h, --trace and --trace-iters
 * included), so usage errors and --help behave alike, and --list still
 * prints the expanded matrix; a real run reads the external launcher's
 * environment as a CUDA build does (a malformed one is a usage error), then
 * says that this build cannot use a GPU, naming the rank it would have been.
 * `tpbench link` likewise parses its options (link_args.h) before saying so.
 */
#include <stdio.h>
#include <string.h>

#include "bench/cli/commands.h"
#include "bench/cli/link_args.h"
#include "bench/cli/ops_args.h"
#include "bench/launch/launcher.h"

/* The options were checked by expanding them once: a failure here is not the input's. */
static tp_rc print_plan(const tp_ops_args *args) {
  /* Listed as a job of --gpus N workers would run it, else of TP_OPS_LIST_DEFAULT_TP (as
   * `matrix`): N is the TP of a missing tp axis and the world of the job's own rule. */
  const int gpus = args->gpus > 0 ? args->gpus : TP_OPS_LIST_DEFAULT_TP;
  tp_ops_spec spec = tp_ops_args_spec(args, gpus);
  TP_TRY(tp_ops_check_tokens_divisible("ops", &spec)); /* as the CUDA build's ops refuses it */
  tp_ops_matrix matrix;
  tp_rc rc = tp_ops_expand(&spec, &matrix);
  if (rc != TP_OK) {
    tp_print_error("ops");
    return rc;
  }
  tp_ops_reject_world(&matrix, gpus);
  tp_ops_matrix_print(&matrix, stdout);
  tp_ops_matrix_free(&matrix);
  return TP_OK;
}

int tp_cmd_ops(int argc, char **argv) {
  tp_ops_args args;
  tp_ops_args_defaults(&args);
  int help = 0;
  tp_rc rc = tp_ops_args_parse(argc, argv, NULL, 0, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  if (args.list) return tp_exit_for(print_plan(&args));
  tp_launch_env env;
  int external = 0;
  rc = tp_launch_env_from_environment(&env, &external);
  explicit_bzero(&env.secret, sizeof env.secret);
  if (rc != TP_OK) {
    tp_print_error("ops");
    return tp_exit_for(rc);
  }
  if (external)
    fprintf(stderr, "tpbench ops: rank %d of %d (%s, local rank %d, master %s:%d): ", env.rank,
            env.world, env.launcher, env.local_rank, env.master_addr, env.master_port);
  else fputs("tpbench ops: ", stderr);
  fprintf(stderr, "this build has no CUDA support (configured with "
                  "TPBENCH_WITH_CUDA=OFF or without nvcc), so no GPU can be used; --list "
                  "still prints the plan\n");
  return tp_exit_for(TP_ENODEV);
}

/* Parses first, so --help and a mistake answer as in a CUDA build. */
int tp_cmd_link(int argc, char **argv) {
  tp_link_args args;
  tp_link_args_defaults(&args);
  int help = 0;
  tp_rc rc = tp_link_args_parse(argc, argv, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  fprintf(stderr, "tpbench link: this build has no CUDA support (configured with "
                  "TPBENCH_WITH_CUDA=OFF or without nvcc), so no GPU can be used\n");
  return tp_exit_for(TP_ENODEV);
}
