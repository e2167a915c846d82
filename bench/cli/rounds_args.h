/*
 * rounds_args.h — how `tpbench ops` and `tpbench run` lay out a case's
 * windows: how many rounds, in which order, with which seed, and the traced
 * window after them. One set of options and defaults for both commands, in
 * every build (a build without CUDA parses them too).
 */
#ifndef TP_BENCH_ROUNDS_ARGS_H
#define TP_BENCH_ROUNDS_ARGS_H

#include "bench/cli/cli.h"

typedef struct tp_rounds_args {
  int rounds;        /* rounds per case; default 3 */
  const char *order; /* "rotate" (default) or "shuffle" */
  int seed;          /* the shuffle's seed; default 1 */
} tp_rounds_args;

enum { TP_ROUNDS_N_OPTIONS = 3 };

void tp_rounds_args_defaults(tp_rounds_args *args);

/* Writes the TP_ROUNDS_N_OPTIONS rows --rounds, --order, --seed into out. */
void tp_rounds_options(tp_rounds_args *args, tp_option *out);

/* 1 when the order is shuffled, 0 when it rotates. */
int tp_rounds_shuffle(const tp_rounds_args *args);

enum { TP_TRACING_N_OPTIONS = 2, TP_TRACE_ITERS_DEFAULT = 5 };

/* Writes the TP_TRACING_N_OPTIONS rows --trace (a flag, into *trace) and
 * --trace-iters (into *trace_iters, default TP_TRACE_ITERS_DEFAULT) into
 * out. */
void tp_tracing_options(int *trace, int *trace_iters, tp_option *out);

#endif
