/*
 * drift_args.h — the options of `tpbench drift` in one table, so the CUDA
 * build's command (bench/gpu/cmd_drift.c) and the stand-in of a build
 * without CUDA (bench/cli/cmd_drift_unavailable.c) accept and reject the
 * same command lines; both print a stored table with --show
 * (bench/cli/cmd_drift_show.c), which needs no GPU.
 *
 * Everything is parsed and checked here, into the shared vocabulary's enums,
 * before any GPU is looked for: names, ranges, the learning rate (plain SGD
 * has no default one: its step size depends on the loss's scale), a model
 * whose attention cannot run here with a layer that has attention.
 */
#ifndef TP_DRIFT_ARGS_H
#define TP_DRIFT_ARGS_H

#include <stdint.h>

#include "bench/cli/cli.h"
#include "bench/matrix/presets.h"
#include "common/tp_vocab.h"

enum { TP_DRIFT_MAX_VARIANTS = 16 };

typedef enum { TP_DRIFT_ARG_SGD = 0, TP_DRIFT_ARG_ADAMW } tp_drift_arg_optimizer;

/* AdamW's learning rate when --lr is not given. */
#define TP_DRIFT_ADAMW_DEFAULT_LR 1e-4

typedef struct tp_drift_args {
  /* as typed (the table's destinations) */
  const char *model_name, *layer_name, *dtype_name, *optimizer_name, *lr_text, *show_text;
  tp_str_list schedule_names, rs_sum_names;
  int depth, seqlen, batch, gpus, chunks, steps, repeat, same_batch, quiet;
  int timeout_s; /* a training step's (and a configuration's set-up's) deadline */
  long long seed;
  const char *db, *format;
  /* resolved */
  const tp_model_preset *model;
  tp_layer layer;
  tp_dtype dtype;
  tp_drift_arg_optimizer optimizer;
  double lr;
  tp_schedule schedules[TP_LIST_MAX];
  int n_schedules;
  tp_rs_sum rs_sums[TP_LIST_MAX];
  int n_rs_sums;
  int show;         /* --show given: print the stored table of show_run and exit */
  int64_t show_run; /* 0: the latest drift run */
} tp_drift_args;

/* Fills args with the defaults: llama3-8b, block, 1 layer, seqlen 4096,
 * batch 1, bf16, every visible GPU, schedule ce, chunks auto, 10 steps,
 * AdamW at 1e-4, seed 1, rs_sum epilogue and nccl, stock twice, a fresh
 * batch per step, tpbench.db, markdown, a step hung after 120 s. */
void tp_drift_args_defaults(tp_drift_args *args);

/* Parses `drift` options (argv[0] = "drift") into args, which holds the
 * defaults on entry, and resolves them. --help prints the options and sets
 * *help_shown (TP_OK, exit 0); a mistake is TP_EUSAGE with "tpbench drift:
 * message" on stderr (exit 2). */
TP_MUST_CHECK tp_rc tp_drift_args_parse(int argc, char **argv, tp_drift_args *args,
                                        int *help_shown);

/* Configurations the arguments ask for: stock `repeat` times, then one
 * dist_gemm configuration per schedule and rs_sum. */
int tp_drift_args_variants(const tp_drift_args *args);

/* The test-only knob TPBENCH_TEST_HANG_STEP=STEP[:RANK] (rank 0 when not
 * given): that rank stops before step STEP's collectives in every
 * configuration, as a rank that died mid-training would leave its peers, so
 * the watchdog's end of the run can be shown at one GPU. */
#define TP_DRIFT_HANG_ENV "TPBENCH_TEST_HANG_STEP"

typedef struct tp_drift_hang {
  int step; /* -1: off */
  int rank;
} tp_drift_hang;

/* Parses value (NULL or "": off) for world ranks and steps steps; TP_EUSAGE
 * naming the variable and the expected form otherwise. */
TP_MUST_CHECK tp_rc tp_drift_hang_parse(const char *value, int world, int steps,
                                        tp_drift_hang *out);

/* `tpbench drift --show`: prints the stored table (cmd_drift_show.c) and
 * returns the exit status (tp_drift_exit_status; 2 for a database or run
 * that cannot be used as asked). */
int tp_drift_show(const tp_drift_args *args);

#endif /* TP_DRIFT_ARGS_H */
