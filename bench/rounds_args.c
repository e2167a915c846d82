/*
 * rounds_args.c — the rounds options shared by ops and run (see rounds_args.h).
 */
#include "rounds_args.h"

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
