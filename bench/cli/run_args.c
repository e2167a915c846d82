/*
 * run_args.c — the option table of `tpbench run` and `tpbench matrix`
 * (see run_args.h).
 *
 * --axis and the convenience flags may repeat and apply in order, which the
 * shared parser (cli.h) does not do for an option: they are taken out of argv
 * first (matrix_args.h), and the rest is parsed by the table, where they are
 * still listed for --help.
 */
#include "bench/cli/run_args.h"

#include "bench/cli/matrix_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  N_PRESET_OPTIONS = 1,
  N_MATRIX_OPTIONS = N_PRESET_OPTIONS + TP_MATRIX_N_COMMON + TP_MATRIX_N_FLAGS + TP_MATRIX_N_EXTRA,
  N_RUN_OWN = 8,
  N_RUN_OPTIONS = N_RUN_OWN + TP_TRACING_N_OPTIONS + TP_ROUNDS_N_OPTIONS
};

void tp_run_args_defaults(tp_run_args *args) {
  memset(args, 0, sizeof *args);
  args->db = "tpbench.db";
  args->warmup = 10;
  args->iters = 50;
  args->timeout_s = 120;
  args->format = "md";
  args->trace_iters = TP_TRACE_ITERS_DEFAULT;
  tp_rounds_args_defaults(&args->rounds);
}

static tp_rc usage(const char *cmd, const char *msg) {
  fprintf(stderr, "tpbench %s: %s\nTry 'tpbench %s --help'.\n", cmd, msg, cmd);
  return TP_FAIL(TP_EUSAGE, "%s", msg);
}

#define RUN_AXIS_HELP                                                                              \
  "replace one axis's values, e.g. seqlen=2048,4096 (repeatable; axes: model, layer, "             \
  "backend, schedule, chunks, tp, batch, seqlen, dtype, sp, pass, graph, save_gathered, dp, ac, "  \
  "stock, symm, fsdp_traffic, comm_dtype)"

/* --preset, --matrix, --axis and the convenience flags of run's axes (their
 * defaults shown from display, the quick preset); returns how many rows. */
static int matrix_options(tp_run_args *a, const char **axis_help, tp_layer_spec *display,
                          const tp_option *extra, int n_extra, tp_option *o) {
  o[0] = (tp_option){"preset",
                     TP_OPT_STRING,
                     &a->preset,
                     "P",
                     "matrix preset to start from (default quick, or the matrix file's)",
                     0,
                     0,
                     "quick|full"};
  tp_matrix_common_options(&a->matrix_file, axis_help, RUN_AXIS_HELP, o + N_PRESET_OPTIONS);
  int n = N_PRESET_OPTIONS + TP_MATRIX_N_COMMON;
  n += tp_matrix_flag_options("run", display, o + n);
  for (int i = 0; i < n_extra && i < TP_MATRIX_N_EXTRA; ++i) o[n++] = extra[i];
  return n;
}

static void run_options(tp_run_args *a, tp_option *o) {
  const tp_option table[N_RUN_OWN] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "SQLite database to write", 0, 0, NULL},
      {"gpus", TP_OPT_INT, &a->gpus, "N", "workers to start, one per GPU (0: every visible GPU)", 0,
       64, NULL},
      {"warmup", TP_OPT_INT, &a->warmup, "N",
       "warm-up iterations per configuration (graphs: as many replays again, and at least one "
       "eager step before capture)",
       0, 100000, NULL},
      {"iters", TP_OPT_INT, &a->iters, "N", "measured iterations per configuration", 1, 100000,
       NULL},
      {"timeout", TP_OPT_INT, &a->timeout_s, "S", "seconds before a window counts as hung", 1,
       86400, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "table format printed at the end", 0, 0,
       "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &a->quiet, NULL, "no progress lines on stderr", 0, 0, NULL},
      {"verbose", TP_OPT_FLAG, &a->verbose, NULL,
       "a line per configuration on a terminal too (off a terminal there always is)", 0, 0, NULL},
  };
  memcpy(o, table, sizeof table);
  tp_tracing_options(&a->trace, &a->trace_iters, o + N_RUN_OWN);
  tp_rounds_options(&a->rounds, o + N_RUN_OWN + TP_TRACING_N_OPTIONS);
}

static tp_rc axis_hook(void *spec, const char *axis, const char *values) {
  return tp_layer_spec_set_axis(spec, axis, values);
}

/* The spec: preset or file, then the axis items in order; checked by expanding once. */
static tp_rc build_spec(const char *cmd, tp_run_args *args, const tp_matrix_items *items) {
  char msg[1024];
  tp_rc rc = args->matrix_file
                 ? tp_layer_spec_load(args->matrix_file, args->preset, &args->spec)
                 : tp_layer_spec_preset(args->preset ? args->preset : "quick", &args->spec);
  if (rc != TP_OK) {
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return usage(cmd, msg);
  }
  const tp_matrix_target target = {cmd, "run", &args->spec, axis_hook, tp_layer_axis_names};
  TP_TRY(tp_matrix_items_apply(items, &target));
  tp_layer_matrix matrix;
  if (tp_layer_expand(&args->spec, TP_RUN_MATRIX_DEFAULT_TP, &matrix) != TP_OK) {
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return usage(cmd, msg);
  }
  tp_layer_matrix_free(&matrix);
  return TP_OK;
}

tp_rc tp_run_args_parse(const char *cmd, int argc, char **argv, tp_run_args *args,
                        int *help_shown) {
  return tp_run_args_parse_for(cmd, argc, argv, NULL, 0, args, help_shown);
}

tp_rc tp_run_args_parse_for(const char *cmd, int argc, char **argv, const tp_option *extra,
                            int n_extra, tp_run_args *args, int *help_shown) {
  const int is_run = strcmp(cmd, "run") == 0;
  char **kept = calloc((size_t)argc + 1, sizeof *kept);
  tp_matrix_items *items = calloc(1, sizeof *items);
  tp_layer_spec *display = calloc(1, sizeof *display);
  if (!kept || !items || !display) {
    free(kept);
    free(items);
    free(display);
    return TP_FAIL(TP_EOOM, "no memory for the command line");
  }
  /* The quick preset is a literal: this cannot fail. */
  TP_EXPECT_OK(tp_layer_spec_preset("quick", display));
  int n_kept = 0;
  tp_rc rc = tp_matrix_items_take(cmd, argc, argv, kept, &n_kept, items);
  const char *axis_help = NULL;
  tp_option options[N_MATRIX_OPTIONS + N_RUN_OPTIONS];
  int n = matrix_options(args, &axis_help, display, extra, n_extra, options);
  if (is_run) run_options(args, options + n);
  tp_command command = {
      .name = cmd,
      .usage = is_run ? "tpbench run [--preset P] [--matrix FILE] [--axis NAME=LIST]... [options]"
                      : "tpbench matrix [--for run|ops] [--preset P] [--matrix FILE] "
                        "[--axis NAME=LIST]... [axis flags]",
      .summary = is_run
                     ? "Runs the layers of the matrix (attention, FFN, transformer block), stock "
                       "against dist_gemm,\nwith the GEMMs alone and the collectives alone as "
                       "the bound, on this host's GPUs;\nstores every configuration and prints "
                       "the throughput table."
                     : "Prints the configurations of `tpbench run` (or, with --for ops, of "
                       "`tpbench ops`) for the\nmatrix, with every rejection and its reason. "
                       "Needs no GPU.",
      .options = options,
      .n_options = n + (is_run ? N_RUN_OPTIONS : 0),
  };
  if (rc == TP_OK) rc = tp_cli_parse(&command, n_kept, kept, NULL, 0, NULL, help_shown);
  free(kept);
  free(display);
  if (rc == TP_OK && !*help_shown) rc = build_spec(cmd, args, items);
  free(items);
  return rc;
}
