/*
 * ops_args.c — the option table of `tpbench ops` (see ops_args.h).
 */
#include "bench/cli/ops_args.h"

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

enum { N_OWN = 17, N_COMMON = N_OWN + TP_ROUNDS_N_OPTIONS + TP_TRACING_N_OPTIONS };

static void common_options(tp_ops_args *a, tp_option *o) {
  tp_ops_spec *s = &a->spec;
  const tp_option table[N_OWN] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "SQLite database to write", 0, 0, NULL},
      {"gpus", TP_OPT_INT, &a->gpus, "N", "workers to start, one per GPU (0: every visible GPU)", 0,
       64, NULL},
      {"models", TP_OPT_STR_LIST, &s->models, "LIST", "model presets (debug,1b,8b,70b,405b)", 0, 0,
       NULL},
      {"projs", TP_OPT_STR_LIST, &s->projs, "LIST", "projections (qkv,wo,w13,w2)", 0, 0, NULL},
      {"tokens", TP_OPT_INT_LIST, &s->tokens, "LIST", "tokens per step, whole TP group", 1, 1 << 24,
       NULL},
      {"dtype", TP_OPT_STR_LIST, &s->dtypes, "LIST", "element types", 0, 0, "bf16|fp32"},
      {"tp", TP_OPT_INT_LIST, &s->tp, "LIST", "TP degrees (default: the number of workers)", 1, 64,
       NULL},
      {"schedule", TP_OPT_STR_LIST, &s->schedules, "LIST", "dist_gemm schedules", 0, 0,
       "auto|ce|sm|ring|multimem"},
      {"chunks", TP_OPT_INT_LIST, &s->chunks, "LIST",
       "chunks per rank's shard (0: the schedule decides)", 0, 64, NULL},
      {"pass", TP_OPT_STR_LIST, &s->passes, "LIST", "passes timed per iteration", 0, 0,
       "fwd|bwd|fwd+bwd"},
      {"save-gathered", TP_OPT_STR_LIST, &s->save_gathered, "LIST",
       "all-gather ops' backward: reuse the forward's gathered input (on) or gather again (off)", 0,
       0, "off|on"},
      {"warmup", TP_OPT_INT, &a->warmup, "N", "warm-up iterations per configuration", 0, 100000,
       NULL},
      {"iters", TP_OPT_INT, &a->iters, "N", "measured iterations per configuration", 1, 100000,
       NULL},
      {"timeout", TP_OPT_INT, &a->timeout_s, "S", "seconds before a window counts as hung", 1,
       86400, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "table format printed at the end", 0, 0,
       "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &a->quiet, NULL, "no progress lines on stderr", 0, 0, NULL},
      {"list", TP_OPT_FLAG, &a->list, NULL, "print the expanded matrix and exit (no GPU needed)", 0,
       0, NULL},
  };
  memcpy(o, table, sizeof table);
  tp_rounds_options(&a->rounds, o + N_OWN);
  tp_tracing_options(&a->trace, &a->trace_iters, o + N_OWN + TP_ROUNDS_N_OPTIONS);
}

static tp_rc usage(const char *msg) {
  fprintf(stderr, "tpbench ops: %s\nTry 'tpbench ops --help'.\n", msg);
  return TP_FAIL(TP_EUSAGE, "%s", msg);
}

/* Names and numbers in the lists are checked by expanding them once, so a
 * mistake there is a usage error of the command line like any other. */
static tp_rc check_matrix(const tp_ops_args *args) {
  char msg[1024];
  tp_ops_spec spec = tp_ops_args_spec(args, TP_OPS_LIST_DEFAULT_TP);
  tp_ops_matrix matrix;
  if (tp_ops_expand(&spec, &matrix) != TP_OK) {
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return usage(msg);
  }
  tp_ops_matrix_free(&matrix);
  return TP_OK;
}

tp_rc tp_ops_args_parse(int argc, char **argv, const tp_option *extra, int n_extra,
                        tp_ops_args *args, int *help_shown) {
  if (n_extra < 0 || (n_extra > 0 && !extra))
    return TP_FAIL(TP_EINTERNAL, "%d extra options without a table", n_extra);
  tp_option *options = calloc((size_t)N_COMMON + (size_t)n_extra, sizeof *options);
  if (!options) return TP_FAIL(TP_EOOM, "no memory for the option table");
  common_options(args, options);
  if (n_extra > 0) memcpy(options + N_COMMON, extra, (size_t)n_extra * sizeof *extra);
  tp_command cmd = {
      .name = "ops",
      .usage = "tpbench ops [options]",
      .summary = "Times the TP projections stock vs dist_gemm, plus the GEMM alone and the "
                 "collective alone\non the same shapes, into the database; prints the table.",
      .options = options,
      .n_options = N_COMMON + n_extra,
  };
  tp_rc rc = tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help_shown);
  free(options);
  if (rc != TP_OK || *help_shown) return rc;
  return check_matrix(args);
}
