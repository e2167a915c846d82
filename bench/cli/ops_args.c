/*
 * ops_args.c — the option table of `tpbench ops` (see ops_args.h).
 */
#include "bench/cli/ops_args.h"

#include "bench/cli/matrix_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tp_ops_args_defaults(tp_ops_args *args) {
  memset(args, 0, sizeof *args);
  tp_ops_spec_defaults(&args->spec);
  args->spec.tp.count = 0; /* unset: the job's worker count */
  args->db = "tpbench.db";
  args->warmup = 10;
  args->iters = 50;
  args->timeout_s = 120;
  args->format = "md";
  args->trace_iters = TP_TRACE_ITERS_DEFAULT;
  tp_rounds_args_defaults(&args->rounds);
}

tp_ops_spec tp_ops_args_spec(const tp_ops_args *args, int tp_default) {
  tp_ops_spec spec = args->spec;
  if (spec.tp.count == 0) {
    spec.tp.count = 1;
    spec.tp.items[0] = tp_default;
  }
  return spec;
}

tp_rc tp_ops_check_tokens_divisible(const char *cmd, const tp_ops_spec *spec) {
  if (spec->shapes.count > 0) return TP_OK;
  for (int i = 0; i < spec->tokens.count; ++i)
    for (int j = 0; j < spec->tp.count; ++j)
      if (spec->tp.items[j] > 0 && spec->tokens.items[i] % spec->tp.items[j] != 0) {
        fprintf(stderr, "tpbench %s: --tokens %lld is not divisible by the TP degree %lld\n", cmd,
                spec->tokens.items[i], spec->tp.items[j]);
        return TP_FAIL(TP_EUSAGE, "--tokens %lld is not divisible by the TP degree %lld",
                       spec->tokens.items[i], spec->tp.items[j]);
      }
  return TP_OK;
}

enum {
  N_OWN_BEFORE = 2, /* --db, --gpus: listed before the matrix options */
  N_OWN_AFTER = 7,  /* --warmup ... --list */
  N_MATRIX = TP_MATRIX_N_FLAGS + TP_MATRIX_N_COMMON,
  N_COMMON = N_OWN_BEFORE + N_MATRIX + N_OWN_AFTER + TP_ROUNDS_N_OPTIONS + TP_TRACING_N_OPTIONS
};

#define OPS_AXIS_HELP                                                                              \
  "replace one axis's values, e.g. tokens=4096,8192 (repeatable; axes: model, proj, tokens, "      \
  "dtype, tp, schedule, chunks, pass, save_gathered, shape, stock, symm, comm_dtype)"

/* --matrix, --axis and the convenience flags, in --help order; returns how many rows. */
static int matrix_options(tp_ops_args *a, const char **axis_dummy, tp_option *o) {
  int n = tp_matrix_flag_options("ops", &a->spec, o);
  tp_matrix_common_options(&a->matrix_file, axis_dummy, OPS_AXIS_HELP, o + n);
  return n + TP_MATRIX_N_COMMON;
}

/* Fills o with every option of `ops`; returns how many rows. */
static int common_options(tp_ops_args *a, const char **axis_dummy, tp_option *o) {
  const tp_option before[N_OWN_BEFORE] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "SQLite database to write", 0, 0, NULL},
      {"gpus", TP_OPT_INT, &a->gpus, "N", "workers to start, one per GPU (0: every visible GPU)", 0,
       64, NULL},
  };
  const tp_option after[N_OWN_AFTER] = {
      {"warmup", TP_OPT_INT, &a->warmup, "N", "warm-up iterations per configuration", 0, 100000,
       NULL},
      {"iters", TP_OPT_INT, &a->iters, "N", "measured iterations per configuration", 1, 100000,
       NULL},
      {"timeout", TP_OPT_INT, &a->timeout_s, "S", "seconds before a window counts as hung", 1,
       86400, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "table format printed at the end", 0, 0,
       "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &a->quiet, NULL, "no progress lines on stderr", 0, 0, NULL},
      {"verbose", TP_OPT_FLAG, &a->verbose, NULL,
       "a line per configuration on a terminal too (off a terminal there always is)", 0, 0, NULL},
      {"list", TP_OPT_FLAG, &a->list, NULL, "print the expanded matrix and exit (no GPU needed)", 0,
       0, NULL},
  };
  int n = 0;
  memcpy(o, before, sizeof before);
  n += N_OWN_BEFORE;
  n += matrix_options(a, axis_dummy, o + n);
  memcpy(o + n, after, sizeof after);
  n += N_OWN_AFTER;
  tp_rounds_options(&a->rounds, o + n);
  n += TP_ROUNDS_N_OPTIONS;
  tp_tracing_options(&a->trace, &a->trace_iters, o + n);
  return n + TP_TRACING_N_OPTIONS;
}

static tp_rc usage(const char *cmd, const char *msg) {
  fprintf(stderr, "tpbench %s: %s\nTry 'tpbench %s --help'.\n", cmd, msg, cmd);
  return TP_FAIL(TP_EUSAGE, "%s", msg);
}

static tp_rc axis_hook(void *spec, const char *axis, const char *values) {
  return tp_ops_spec_set_axis(spec, axis, values);
}

/* The spec: the defaults (already in args), the file, then the command line's
 * axis items in order. Names and numbers are then checked by expanding the
 * lists once, so a mistake there is a usage error of the command line like
 * any other. */
static tp_rc build_spec(const char *cmd, tp_ops_args *args, const tp_matrix_items *items) {
  char msg[1024];
  if (args->matrix_file && tp_ops_spec_load(args->matrix_file, &args->spec) != TP_OK) {
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return usage(cmd, msg);
  }
  const tp_matrix_target target = {cmd, "ops", &args->spec, axis_hook, tp_ops_axis_names};
  TP_TRY(tp_matrix_items_apply(items, &target));
  tp_ops_spec spec = tp_ops_args_spec(args, TP_OPS_LIST_DEFAULT_TP);
  tp_ops_matrix matrix;
  if (tp_ops_expand(&spec, &matrix) != TP_OK) {
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return usage(cmd, msg);
  }
  tp_ops_matrix_free(&matrix);
  return TP_OK;
}

/* Parses with the table of `command` after taking the axis items out of argv. */
static tp_rc parse_with(tp_command *command, int argc, char **argv, tp_ops_args *args,
                        int *help_shown) {
  char **kept = calloc((size_t)argc + 1, sizeof *kept);
  tp_matrix_items *items = calloc(1, sizeof *items);
  tp_rc rc = kept && items ? TP_OK : TP_FAIL(TP_EOOM, "no memory for the command line");
  int n_kept = 0;
  if (rc == TP_OK) rc = tp_matrix_items_take(command->name, argc, argv, kept, &n_kept, items);
  if (rc == TP_OK) rc = tp_cli_parse(command, n_kept, kept, NULL, 0, NULL, help_shown);
  if (rc == TP_OK && !*help_shown) rc = build_spec(command->name, args, items);
  free(kept);
  free(items);
  return rc;
}

tp_rc tp_ops_args_parse(int argc, char **argv, const tp_option *extra, int n_extra,
                        tp_ops_args *args, int *help_shown) {
  if (n_extra < 0 || (n_extra > 0 && !extra))
    return TP_FAIL(TP_EINTERNAL, "%d extra options without a table", n_extra);
  tp_option *options = calloc((size_t)N_COMMON + (size_t)n_extra, sizeof *options);
  if (!options) return TP_FAIL(TP_EOOM, "no memory for the option table");
  const char *axis_dummy = NULL;
  int n = common_options(args, &axis_dummy, options);
  if (n_extra > 0) memcpy(options + n, extra, (size_t)n_extra * sizeof *extra);
  tp_command cmd = {
      .name = "ops",
      .usage = "tpbench ops [--matrix FILE] [--axis NAME=LIST]... [options]",
      .summary = "Times the TP projections stock vs dist_gemm, plus the GEMM alone and the "
                 "collective alone\non the same shapes, into the database; prints the table.",
      .options = options,
      .n_options = n + n_extra,
  };
  tp_rc rc = parse_with(&cmd, argc, argv, args, help_shown);
  free(options);
  return rc;
}

tp_rc tp_ops_matrix_args_parse(const char *cmd, int argc, char **argv, const tp_option *extra,
                               int n_extra, tp_ops_args *args, int *help_shown) {
  tp_option options[N_MATRIX + TP_MATRIX_N_EXTRA];
  const char *axis_dummy = NULL;
  int n = matrix_options(args, &axis_dummy, options);
  for (int i = 0; i < n_extra && i < TP_MATRIX_N_EXTRA; ++i) options[n++] = extra[i];
  tp_command command = {
      .name = cmd,
      .usage = "tpbench matrix --for ops [--matrix FILE] [--axis NAME=LIST]... [axis flags]",
      .summary = "Prints the configurations of `tpbench ops` for the matrix, with every "
                 "rejection and its\nreason. Needs no GPU.",
      .options = options,
      .n_options = n,
  };
  return parse_with(&command, argc, argv, args, help_shown);
}
