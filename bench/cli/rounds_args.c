/*
 * rounds_args.c — the rounds and tracing options shared by ops and run (see
 * rounds_args.h).
 */
#include "bench/cli/rounds_args.h"

#include <string.h>

void tp_rounds_args_defaults(tp_rounds_args *args) {
  args->rounds = 3;
  args->order = "rotate";
  args->seed = 1;
}

void tp_rounds_options(tp_rounds_args *a, tp_option *out) {
  const tp_option table[TP_ROUNDS_N_OPTIONS] = {
      {"rounds", TP_OPT_INT, &a->rounds, "N",
       "rounds per case: each runs every configuration of the case once, back to back", 1, 64,
       NULL},
      {"order", TP_OPT_STRING, &a->order, "HOW",
       "order of a case's configurations per round: rotated by one, or shuffled (seeded)", 0, 0,
       "rotate|shuffle"},
      {"seed", TP_OPT_INT, &a->seed, "N", "seed of the shuffled order", 0, 1 << 30, NULL},
  };
  memcpy(out, table, sizeof table);
}

int tp_rounds_shuffle(const tp_rounds_args *args) { return strcmp(args->order, "shuffle") == 0; }

void tp_tracing_options(int *trace, int *trace_iters, tp_option *out) {
  const tp_option table[TP_TRACING_N_OPTIONS] = {
      {"trace", TP_OPT_FLAG, trace, NULL,
       "after a case's rounds, a traced window per configuration (CUPTI; the timed windows stay "
       "untraced): timeline, overlap, schedule evidence",
       0, 0, NULL},
      {"trace-iters", TP_OPT_INT, trace_iters, "N", "iterations of the traced window", 1, 1000,
       NULL},
  };
  memcpy(out, table, sizeof table);
}
