/*
 * ops_args.h — the options of `tpbench ops` in one table, so every build
 * accepts and rejects the same command lines: the CPU-only stand-in
 * (bench/cli/cmd_ops_unavailable.c) parses with it, and the CUDA build's command
 * (bench/gpu/cmd_ops.c) can. The names, ranges and defaults follow that
 * command; keep them in step.
 *
 * The matrix axes land in a tp_ops_spec (ops_matrix.h), everything else next
 * to it: the defaults, then --matrix FILE, then every --axis NAME=LIST and
 * convenience flag (--models, --tokens, --shape, ...) in order, the one matrix
 * interface `run` shares (matrix_args.h). A command with options of its own
 * passes them as `extra`; they are parsed and listed in --help with the common
 * ones.
 */
#ifndef TP_OPS_ARGS_H
#define TP_OPS_ARGS_H

#include "bench/cli/cli.h"
#include "bench/cli/rounds_args.h"
#include "bench/matrix/ops_matrix.h"

typedef struct tp_ops_args {
  tp_ops_spec spec;        /* spec.tp.count == 0: not given, the job's worker count */
  const char *matrix_file; /* --matrix FILE; NULL: none */
  int gpus;                /* workers to start; 0 = every visible GPU */
  const char *db;          /* database file; default "tpbench.db" */
  int warmup;              /* untimed iterations before the window; default 10 */
  int iters;               /* timed iterations; default 50 */
  int timeout_s;           /* seconds before a window counts as hung; default 120 */
  tp_rounds_args rounds;   /* rounds per case, their order and seed */
  const char *format;      /* table printed at the end: md, csv, json; default md */
  int quiet;               /* no progress lines */
  int verbose;             /* a line per configuration on a terminal too */
  int list;                /* print the expanded matrix and stop; needs no GPU */
  int trace;               /* a traced window (CUPTI) after a case's rounds */
  int trace_iters;         /* its iterations; default TP_TRACE_ITERS_DEFAULT */
} tp_ops_args;

/* TP degree --list assumes when --tp is not given (no GPUs are counted). */
#define TP_OPS_LIST_DEFAULT_TP 2

/* Fills args with the defaults above. */
void tp_ops_args_defaults(tp_ops_args *args);

/*
 * Parses `ops` options (argv[0] = "ops") into args, which holds the defaults
 * on entry. extra (n_extra entries, may be NULL/0) are further options with
 * destinations of the caller's. --help prints every option and sets
 * *help_shown (return TP_OK; exit 0). TP_EUSAGE, message on stderr, for a
 * mistake (exit 2), including an unknown name or a
 * bad number in the matrix lists (checked by expanding them once, with
 * TP_OPS_LIST_DEFAULT_TP standing in for an unset --tp).
 */
TP_MUST_CHECK tp_rc tp_ops_args_parse(int argc, char **argv, const tp_option *extra, int n_extra,
                                      tp_ops_args *args, int *help_shown);

/* The same for `tpbench matrix --for ops` (cmd "matrix"): only the matrix
 * options (--matrix, --axis, the convenience flags) and extra (n_extra, at
 * most TP_MATRIX_N_EXTRA: `matrix`'s own rows, listed in --help), into
 * args->spec. */
TP_MUST_CHECK tp_rc tp_ops_matrix_args_parse(const char *cmd, int argc, char **argv,
                                             const tp_option *extra, int n_extra, tp_ops_args *args,
                                             int *help_shown);

/* The spec to expand: args->spec, with --tp set to tp_default if not given. */
tp_ops_spec tp_ops_args_spec(const tp_ops_args *args, int tp_default);

/* Token counts that do not split evenly over the TP degrees of spec (the
 * expanded one: a missing --tp is the job's workers) are a mistake in the
 * command line, refused before any GPU time is spent rather than a matrix of
 * rejected rows: TP_EUSAGE, "tpbench CMD: --tokens T is not divisible by the
 * TP degree W" on stderr. `ops` asks it before it runs, `ops --list` and
 * `matrix --for ops` before they print, so the plan says what ops does.
 * Shapes (--shape) replace the tokens: an M that does not divide is a
 * rejected configuration, with its reason. */
TP_MUST_CHECK tp_rc tp_ops_check_tokens_divisible(const char *cmd, const tp_ops_spec *spec);

#endif /* TP_OPS_ARGS_H */
