/*
 * run_args.c — the option table of `tpbench run` and `tpbench matrix`
 * (see run_args.h).
 *
 * --axis may repeat, which the shared parser (cli.h) does not do for an
 * option: the assignments are taken out of argv first, in order, and the
 * rest is parsed by the table, where --axis is still listed for --help.
 */
#include "bench/cli/run_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  MAX_ASSIGNMENTS = 64,
  N_MATRIX_OPTIONS = 3,
  N_RUN_OWN = 7,
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

typedef struct assignments {
  const char *items[MAX_ASSIGNMENTS];
  int count;
} assignments;

/* Moves every "--axis A" / "--axis=A" out of argv (up to a "--") into out;
 * *kept receives the rest in order, argv[0] first. */
static tp_rc take_axes(const char *cmd, int argc, char **argv, char **kept, int *n_kept,
                       assignments *out) {
  int n = 0, done = 0;
  for (int i = 0; i < argc; ++i) {
    const char *arg = argv[i];
    const char *value = NULL;
    if (i > 0 && !done && strcmp(arg, "--") == 0) done = 1;
    if (i > 0 && !done && strcmp(arg, "--axis") == 0) {
      if (i + 1 >= argc) return usage(cmd, "--axis needs a value: NAME=V1,V2");
      value = argv[++i];
    } else if (i > 0 && !done && strncmp(arg, "--axis=", 7) == 0) {
      value = arg + 7;
    } else {
      kept[n++] = argv[i];
      continue;
    }
    if (out->count == MAX_ASSIGNMENTS) return usage(cmd, "too many --axis options");
    out->items[out->count++] = value;
  }
  *n_kept = n;
  return TP_OK;
}

static void matrix_options(tp_run_args *a, const char **axis_help, tp_option *o) {
  const tp_option table[N_MATRIX_OPTIONS] = {
      {"preset", TP_OPT_STRING, &a->preset, "P",
       "matrix preset to start from (default quick, or the matrix file's)", 0, 0, "quick|full"},
      {"matrix", TP_OPT_STRING, &a->matrix_file, "FILE",
       "JSON matrix file: {\"preset\": P, \"axes\": {NAME: [values]}}", 0, 0, NULL},
      {"axis", TP_OPT_STRING, axis_help, "NAME=LIST",
       "replace one axis's values, e.g. seqlen=2048,4096 (repeatable; axes: model, layer, "
       "backend, schedule, chunks, tp, batch, seqlen, dtype, sp, pass, graph, save_gathered)",
       0, 0, NULL},
  };
  memcpy(o, table, sizeof table);
}

static void run_options(tp_run_args *a, tp_option *o) {
  const tp_option table[N_RUN_OWN] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "SQLite database to write", 0, 0, NULL},
      {"gpus", TP_OPT_INT, &a->gpus, "N", "workers to start, one per GPU (0: every visible GPU)", 0,
       64, NULL},
      {"warmup", TP_OPT_INT, &a->warmup, "N",
       "warm-up iterations per configuration (graph=on: as many replays again)", 0, 100000, NULL},
      {"iters", TP_OPT_INT, &a->iters, "N", "measured iterations per configuration", 1, 100000,
       NULL},
      {"timeout", TP_OPT_INT, &a->timeout_s, "S", "seconds before a window counts as hung", 1,
       86400, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "table format printed at the end", 0, 0,
       "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &a->quiet, NULL, "no progress lines on stderr", 0, 0, NULL},
  };
  memcpy(o, table, sizeof table);
  tp_tracing_options(&a->trace, &a->trace_iters, o + N_RUN_OWN);
  tp_rounds_options(&a->rounds, o + N_RUN_OWN + TP_TRACING_N_OPTIONS);
}

/* The spec: preset or file, then the assignments; checked by expanding once. */
static tp_rc build_spec(const char *cmd, tp_run_args *args, const assignments *as) {
  char msg[1024];
  tp_rc rc = args->matrix_file
                 ? tp_layer_spec_load(args->matrix_file, args->preset, &args->spec)
                 : tp_layer_spec_preset(args->preset ? args->preset : "quick", &args->spec);
  for (int i = 0; rc == TP_OK && i < as->count; ++i)
    rc = tp_layer_spec_assign(&args->spec, as->items[i]);
  tp_layer_matrix matrix;
  if (rc == TP_OK) rc = tp_layer_expand(&args->spec, TP_RUN_MATRIX_DEFAULT_TP, &matrix);
  if (rc != TP_OK) {
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return usage(cmd, msg);
  }
  tp_layer_matrix_free(&matrix);
  return TP_OK;
}

tp_rc tp_run_args_parse(const char *cmd, int argc, char **argv, tp_run_args *args,
                        int *help_shown) {
  const int is_run = strcmp(cmd, "run") == 0;
  char **kept = calloc((size_t)argc + 1, sizeof *kept);
  assignments as;
  memset(&as, 0, sizeof as);
  if (!kept) return TP_FAIL(TP_EOOM, "no memory for the command line");
  int n_kept = 0;
  tp_rc rc = take_axes(cmd, argc, argv, kept, &n_kept, &as);
  const char *axis_help = NULL;
  tp_option options[N_MATRIX_OPTIONS + N_RUN_OPTIONS];
  matrix_options(args, &axis_help, options);
  if (is_run) run_options(args, options + N_MATRIX_OPTIONS);
  tp_command command = {
      .name = cmd,
      .usage = is_run ? "tpbench run [--preset P] [--matrix FILE] [--axis NAME=LIST]... [options]"
                      : "tpbench matrix [--preset P] [--matrix FILE] [--axis NAME=LIST]...",
      .summary = is_run
                     ? "Runs the layers of the matrix (attention, FFN, transformer block), stock "
                       "against dist_gemm,\nwith the GEMMs alone and the collectives alone as "
                       "the bound, on this host's GPUs;\nstores every configuration and prints "
                       "the throughput table."
                     : "Prints the configurations of `tpbench run` for the matrix, with every "
                       "rejection and its\nreason. Needs no GPU.",
      .options = options,
      .n_options = N_MATRIX_OPTIONS + (is_run ? N_RUN_OPTIONS : 0),
  };
  if (rc == TP_OK) rc = tp_cli_parse(&command, n_kept, kept, NULL, 0, NULL, help_shown);
  free(kept);
  if (rc != TP_OK || *help_shown) return rc;
  return build_spec(cmd, args, &as);
}
