/*
 * run_args.h — the options of `tpbench run` and `tpbench matrix` in one
 * table, so the GPU command (bench/gpu/cmd_run.c), its stand-in in a build
 * without CUDA (bench/cli/cmd_run_unavailable.c) and `matrix` (bench/
 * cmd_matrix.c) accept and reject the same command lines.
 *
 * The matrix comes from --preset P (default quick), then --matrix FILE (a
 * JSON matrix file, matrix_file.h; its own "preset" counts when --preset is
 * not given), then every --axis NAME=V1,V2 and convenience flag (--models,
 * --tp, --pass, ...: matrix_args.h, shared with `ops`) in order.
 * `run` adds where the results go and how each configuration is timed.
 */
#ifndef TP_RUN_ARGS_H
#define TP_RUN_ARGS_H

#include "bench/cli/rounds_args.h"
#include "bench/matrix/layer_matrix.h"

/* TP degree `matrix` assumes when the tp axis is not given (no GPUs are counted). */
#define TP_RUN_MATRIX_DEFAULT_TP 2

typedef struct tp_run_args {
  tp_layer_spec spec;      /* the matrix asked for (tp.count == 0: the job's worker count) */
  const char *preset;      /* NULL: the matrix file's, else quick */
  const char *matrix_file; /* NULL: none */
  /* run only */
  int gpus;              /* workers to start; 0 = every visible GPU */
  const char *db;        /* default "tpbench.db" */
  int warmup;            /* untimed iterations (eager; graph replays as many again); default 10 */
  int iters;             /* timed iterations; default 50 */
  int timeout_s;         /* seconds before a window counts as hung; default 120 */
  const char *format;    /* table printed at the end: md, csv, json; default md */
  int quiet;             /* no progress lines */
  int verbose;           /* a line per configuration on a terminal too */
  int trace;             /* a traced window (CUPTI) after each measured one */
  int trace_iters;       /* its iterations; default 5 */
  tp_rounds_args rounds; /* rounds per case, their order and seed */
} tp_run_args;

void tp_run_args_defaults(tp_run_args *args);

/*
 * Parses the options of command "run" or "matrix" (argv[0] is the command's
 * name; `matrix` takes only --preset, --matrix and --axis) into args, which
 * holds the defaults on entry, and builds args->spec. --help prints every
 * option and sets *help_shown (TP_OK). Any mistake, including an unknown
 * axis or value and a matrix file that cannot be read, is TP_EUSAGE with
 * "tpbench CMD: message" on stderr (exit 2). The axes are checked by
 * expanding them once (TP_RUN_MATRIX_DEFAULT_TP standing in for an unset tp).
 */
TP_MUST_CHECK tp_rc tp_run_args_parse(const char *cmd, int argc, char **argv, tp_run_args *args,
                                      int *help_shown);

/* The same, listing extra (n_extra, at most TP_MATRIX_N_EXTRA: `matrix`'s
 * own options, which the caller has taken out of argv) in --help. */
TP_MUST_CHECK tp_rc tp_run_args_parse_for(const char *cmd, int argc, char **argv,
                                          const tp_option *extra, int n_extra, tp_run_args *args,
                                          int *help_shown);

#endif /* TP_RUN_ARGS_H */
