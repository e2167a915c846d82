/*
 * harness.h — what `tpbench ops` and `tpbench run` share: the measurement
 * of the configurations of one case on every rank of the TP group, and
 * their records.
 *
 * In the nccl-tests manner, the harness knows nothing of what runs: a
 * configuration is an *item*, a table of functions (tp_item_ops) over the
 * item's own state. A case (one shape: its stock op or layer, each dist_gemm
 * variant, the GEMMs alone and the collectives alone) runs in phases:
 *
 *   plan, prepare  every configuration of the case, before any is timed
 *                  (the symmetric workspace grows once to the case's
 *                  largest request; graphs captured afterwards stay valid)
 *                  -- the ranks agree: any rank's failure is everyone's --
 *   [graph]        every configuration's eager warm-up (at least one step:
 *                  the workspace and scratch grow to the largest any asks),
 *                  then the group frozen (tp_group_freeze) and each step
 *                  captured into a CUDA graph; frozen until the case ends, a
 *                  capture that would grow them fails its configuration with
 *                  the reason
 *   rounds         R rounds; each round runs every configuration once, in an
 *                  order that rotates (or is shuffled, seeded) per round, as
 *                  a back-to-back window: `before` (what the window needs,
 *                  e.g. the forward of a backward window, or the data a
 *                  reference's skipped half would have delivered), warm-up,
 *                  a host barrier, then the timed steps with one CUDA event
 *                  between consecutive ones and no host synchronisation.
 *                  A replay group (graphs of several sizes on one
 *                  workspace, tp_harness_config.replay_group) is one unit of
 *                  the round: one mixed window replays its graphs
 *                  interleaved, measure_iters each, in a shuffle seeded by
 *                  the run's seed, the case and the round (whatever the
 *                  round order's policy), each sample going to the
 *                  configuration whose replay it timed
 *                  -- the ranks agree; samples gathered --
 *   numerics       per numerics group (a plain case: one): every compared
 *                  output poisoned (NaN), `before`, one step; the REFERENCE
 *                  configuration's outputs must be finite and are kept, each
 *                  CHECK configuration's outputs are judged one by one
 *                  against them (numerics.h); an item that judges itself
 *                  (tp_item_ops.judge) adds its own checks (every rank's,
 *                  the worst kept). A graph configuration runs its eager
 *                  step first (poisoned likewise) and its replay is held
 *                  against it ("graph:eager": bit for bit up to TP 2); the
 *                  reference kept is the eager step's
 *   [trace]        a traced window per configuration, in its own phase, so
 *                  the collector is off during every timed window
 *
 * Rank 0 writes each configuration (axes, status, reason, result, every
 * sample with its round, the windows, the checks, schedules, trace) in one
 * transaction, and prints a progress line.
 *
 * Memory, two readings of rank 0 (results.peak_mem_bytes, alloc_peak_bytes):
 *   peak_mem_bytes    the driver's: the most of cudaMemGetInfo's total - free
 *                     after the configuration's prepare and after each of its
 *                     windows. Everything resident counts: the CUDA context,
 *                     NCCL's own buffers, the group's, and every configuration
 *                     of the case (all are prepared before any is timed).
 *   alloc_peak_bytes  tpbench's own accounting (kernels/tp_device_alloc.h):
 *                     the high-water mark, over each measurement window of
 *                     the configuration (its `before`, warm-up and timed
 *                     steps; the largest of its windows), of the bytes it
 *                     holds =
 *                       the case's tensors (all of them, counted once: the
 *                         worker allocates them under the ledger's case owner,
 *                         TP_ALLOC_CASE)
 *                     + its own buffers (what its plan, prepare and steps
 *                         allocate under its owner, TP_ALLOC_CONFIG with its
 *                         matrix index: fp8 copies and scales, private
 *                         scratch, its cuBLASLt context's workspace)
 *                     + its share of the group's shared buffers: for each of
 *                         the symmetric workspace, the stock scratch, the bias
 *                         scratch and the group's cuBLASLt workspace, the
 *                         largest request its plans made (what it asks for,
 *                         not what other configurations grew the buffer to;
 *                         the symmetric heap's 2 MiB rounding not included).
 *                     NCCL's internal buffers and the CUDA context are outside
 *                     it (the driver's reading has them); the workspace is
 *                     also recorded apart (workspace_bytes, tp_item_info).
 * The harness makes each configuration the ledger's current owner around
 * every call into its item (plan, prepare, capture, windows, numerics,
 * traces).
 */
#ifndef TP_BENCH_HARNESS_H
#define TP_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "bench/gpu/worker_group.h"
#include "bench/stats/numerics.h"
#include "bench/stats/stats.h"
#include "collectors/tp_collector.h"
#include "common/tp_judgement.h"
#include "common/tp_vocab.h"
#include "store/tp_store.h"

enum { TP_ITEM_MAX_OUTPUTS = 16, TP_ITEM_MAX_SCHEDULES = 8, TP_HARNESS_MAX_ROUNDS = 64 };

/* One tensor an item's configurations are compared on (this rank's part).
 * Every configuration of a case lists the same outputs in the same order;
 * one that does not compute an output says so with TP_RULE_SKIP. */
typedef struct tp_item_output {
  const char *name; /* "y", "dw", "dx", "y1": unique within the item */
  const void *ptr;  /* device memory of the item's dtype */
  size_t count;     /* elements */
  tp_output_rule rule;
  int64_t reduction_len; /* longest dot product behind an element (TOLERANCE) */
  int summed_ranks;      /* ranks whose partials meet in an element (1: none) */
  int depth;             /* 1: an op's own output; 5: through a layer (numerics.h) */
  const char *skip_why;  /* TP_RULE_SKIP: why this configuration does not compute it */
} tp_item_output;

/* What an item tells the record once it ran (or tried to). */
typedef struct tp_item_info {
  int planned; /* its plan was made: the schedules below are recorded */
  tp_schedule_choice schedules[TP_ITEM_MAX_SCHEDULES];
  int n_schedules;
  const char *schedule_label; /* progress line: "ce", "nccl"; NULL: nothing to say */
  double bytes_moved;         /* communication per rank per step */
  int64_t workspace_bytes;    /* symmetric workspace or stock scratch, plus saved inputs */
  int64_t activation_bytes;   /* per rank: what the forward leaves for the backward; 0: none
                                 recorded (no backward) */
  int64_t traffic_bytes;      /* per rank per step: the competing FSDP collectives' bytes
                                 (bench/gpu/fsdp.h); 0: none */
  int transfers_per_step;     /* transfers a trace must show per step (every op together) */
  tp_dtype dtype;             /* of the outputs */
  tp_fused fused;             /* dist_gemm: did every op fuse? */
} tp_item_info;

/* An item's own judgement of one output against a reference it computes
 * itself (a recipe's judge: the fp8 ops' float64 product of the dequantized
 * operands), recorded as a check beside the comparison with the case's
 * reference (common/tp_judgement.h). */
typedef tp_judgement tp_item_check;

/* An fp8 op of two weights judges y, y1, dx, dw and dw1, each twice, and at
 * TP > 1 up to 2 gathered operands against the whole; an fp8 transformer
 * block judges its 4 projections, at TP > 1 up to 8 gathered operands, and
 * reports its 9 outputs against bf16; a layer under activation
 * checkpointing adds one check per output (up to 12), so an fp8 block under
 * ac at TP > 1 needs 33. A configuration records its compared outputs'
 * checks and then these (harness.c keeps room for both). */
enum { TP_ITEM_MAX_OWN_CHECKS = 40 };

typedef struct tp_item_ops {
  const char *name; /* "op", "layer" */
  tp_rc (*plan)(void *self, tp_group *group);
  tp_rc (*prepare)(void *self, tp_group *group);
  /* Before every window and the numerics step (NULL: nothing): what the
   * window needs that it does not make itself. Its work is not timed. */
  tp_rc (*before)(void *self, tp_group *group);
  tp_rc (*step)(void *self, tp_group *group);
  /* Fills out[0..max) and returns how many (0: nothing to compare). */
  int (*outputs)(void *self, tp_item_output *out, int max);
  void (*info)(void *self, tp_item_info *out);
  /* After the numerics step (NULL: none): the item's own checks of the
   * outputs it just computed, out[0..*n) with *n <= max. */
  tp_rc (*judge)(void *self, tp_group *group, tp_item_check *out, int max, int *n);
} tp_item_ops;

typedef struct tp_item {
  const tp_item_ops *ops;
  void *self;
} tp_item;

/* What a configuration's outputs are used for in its case's numerics step. */
typedef enum {
  TP_NUMERICS_NONE = 0,  /* not compared (the collectives alone) */
  TP_NUMERICS_REFERENCE, /* outputs must be finite and are kept: the case's reference (stock) */
  TP_NUMERICS_CHECK      /* each output judged against the reference's (not checked without one) */
} tp_numerics_use;

/* One configuration as the harness sees it. */
typedef struct tp_harness_config {
  const tp_config_axes *axes; /* recorded as is; axes->graph selects graph mode */
  int rejected;               /* rejected before any GPU work: recorded with reason */
  const char *reason;
  double flops; /* per step, the whole group; 0 when not counted */
  tp_numerics_use numerics;
  const char *label; /* the progress line's description */
  int index;         /* the configuration's index in its matrix (progress) */
  /* Graphs of several sizes on one workspace (run's graph=mixed). The
   * configurations of one replay_group > 0 are timed together in mixed
   * windows and stand or fall together: one that drops out before the
   * windows (prepare, warm-up, capture) fails the others with its reason. A
   * CHECK is judged against the REFERENCE of its numerics_group (0 for
   * every configuration of a plain case). */
  int replay_group;
  int numerics_group;
} tp_harness_config;

/* A configuration with the item that runs it. */
typedef struct tp_harness_entry {
  tp_harness_config cfg;
  tp_item item;
} tp_harness_entry;

typedef struct tp_harness_options {
  const char *command; /* the run's subcommand: "ops", "run" */
  const char *db_path;
  const char *command_line;
  int warmup_iters;     /* eager warm-up steps; graph mode replays as many again */
  int measure_iters;    /* timed steps */
  int window_timeout_s; /* a window that does not finish in this time is a timeout */
  int quiet;            /* no progress lines */
  int verbose;          /* on a terminal too, a line per configuration (progress_line.h) */
  const char *format;   /* table printed at the end: md, csv, json */
  int trace_iters;      /* iterations of a traced window (with a collector) */
  int64_t resume_run;   /* > 0: record into this run (a restarted job) instead of a new one */
  int rounds;           /* rounds per case (>= 1) */
  int shuffle;          /* 0: the order rotates by one per round; 1: seeded shuffle */
  uint64_t seed;        /* the shuffle's seed */
  volatile int *current_config; /* rank 0 writes the index of the configuration being run, -1
                                   between cases (NULL: nobody asks) */
} tp_harness_options;

typedef struct tp_harness tp_harness;

/* The per-iteration statistics of a measurement into res (n_samples, the
 * median, p10, p90, mean, min, max, cv); the other fields are left alone. */
void tp_result_set_stats(tp_result *res, const tp_stats *st);

/* Collective. Allocates the timing state; rank 0 opens the database and
 * begins the run (or resumes opts->resume_run). Every rank learns whether
 * all could start. total: configurations, for progress lines. collector:
 * NULL for no traced windows. */
TP_MUST_CHECK tp_rc tp_harness_open(tp_worker_ctx *ctx, tp_collector *collector,
                                    const tp_harness_options *opts, int total, tp_harness **out);

/* The run's id (rank 0; 0 elsewhere). */
int64_t tp_harness_run_id(const tp_harness *h);

/* Configurations rank 0 has written to the database so far (0 elsewhere). */
int tp_harness_recorded(const tp_harness *h);

/* Progress lines count from done + 1 (a resumed job). */
void tp_harness_set_done(tp_harness *h, int done);

/* Exchanges each rank's outcome of a step: *agreed is TP_OK only if every
 * rank succeeded, else the first failing rank's code with its message in
 * reason ("rank R: ..." unless a rejection). The return value is the
 * exchange's own. */
TP_MUST_CHECK tp_rc tp_harness_agree(tp_harness *h, tp_rc local, tp_rc *agreed, char *reason,
                                     size_t cap);

/* Runs the configurations of one case on every rank (the phases above) and
 * records each. TP_OK when all ended (ok, rejected, failed, oom, timeout:
 * recorded); an error only when this worker cannot go on (a sticky CUDA
 * error, a timeout, a lost peer, the database), after recording every
 * configuration of the case with what became of it. n <= TP_HARNESS_MAX_CASE. */
enum { TP_HARNESS_MAX_CASE = 32 };
TP_MUST_CHECK tp_rc tp_harness_measure_case(tp_harness *h, tp_harness_entry *entries, int n);

/* After the worker freed the case's tensors and every configuration's own
 * buffers: forgets their ledger owners (the configurations' claims on the
 * group's buffers with them). TP_EINTERNAL, naming the owner, when one still
 * holds an allocation (a leak). */
TP_MUST_CHECK tp_rc tp_harness_release_case(const tp_harness_entry *entries, int n);

/* Records a configuration that could not be tried (its case failed): rc
 * gives the status, reason the text. */
TP_MUST_CHECK tp_rc tp_harness_skip(tp_harness *h, const tp_harness_config *cfg, tp_rc rc,
                                    const char *reason);

/* Ends the run: when rc is TP_OK and finish is set, rank 0 marks the run
 * finished and prints the throughput table of it. Frees h (NULL is fine).
 * Returns rc, or the first error of finishing. */
TP_MUST_CHECK tp_rc tp_harness_close(tp_harness *h, tp_rc rc, int finish);

#endif
