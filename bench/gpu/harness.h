/*
 * harness.h — what `tpbench ops` and `tpbench run` share: the measurement
 * of one configuration on every rank of the TP group, and its record.
 *
 * In the nccl-tests manner, the harness knows nothing of what runs: a
 * configuration is an *item*, a table of functions (tp_item_ops) over the
 * item's own state, and the harness calls them in a fixed order:
 *
 *   plan       does it apply here? TP_EREJECT with the reason if not (a
 *              shape the kernels refuse, a schedule this host cannot run);
 *              not collective
 *   prepare    workspaces and buffers (collective: the symmetric workspace
 *              grows on every rank together)
 *              -- the ranks agree: any rank's failure is everyone's --
 *   [graph]    warm-up, then one step captured into a CUDA graph (graph.h)
 *              -- the ranks agree --
 *   before     once (NULL: nothing), e.g. the forward a backward window needs
 *   step       warm-up, then a timed window of back-to-back steps (or graph
 *              replays) with one CUDA event between consecutive ones and no
 *              host synchronisation inside; a hung window becomes a timeout
 *              -- the ranks agree; samples gathered; slowest rank per step --
 *   outputs    the tensors compared across the configurations of a case: a
 *              configuration marked REFERENCE keeps copies of them, a later
 *              CHECK one of the same case is compared against the copies
 *              (every rank, summed over ranks) and fails above its tolerance
 *   info       what the record needs: schedules that ran and why, bytes
 *              moved, workspace, what a trace must show
 *   [trace]    a traced window (ops_trace.h) when a collector is given
 *
 * Rank 0 writes each configuration (axes, status, reason, result, every
 * sample, schedules, trace) in one transaction, and prints a progress line.
 */
#ifndef TP_BENCH_HARNESS_H
#define TP_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "../../collectors/tp_collector.h"
#include "../../kernels/tp_dtype.h"
#include "../../store/tp_store.h"
#include "worker_group.h"

enum { TP_ITEM_MAX_OUTPUTS = 16, TP_ITEM_MAX_SCHEDULES = 8 };

/* One tensor an item's configurations are compared on (this rank's part). */
typedef struct tp_item_output {
  const char *name; /* "y", "dw_qkv": names the worst one in a failure */
  const void *ptr;  /* device memory of the item's dtype */
  size_t count;     /* elements */
} tp_item_output;

/* What an item tells the record once it ran (or tried to). */
typedef struct tp_item_info {
  int planned; /* its plan was made: the schedules below are recorded */
  tp_schedule_choice schedules[TP_ITEM_MAX_SCHEDULES];
  int n_schedules;
  const char *schedule_label;    /* progress line: "ce", "nccl"; NULL: nothing to say */
  double bytes_moved;            /* communication per rank per step */
  int64_t workspace_bytes;       /* symmetric workspace or stock scratch, plus saved inputs */
  const char *evidence_schedule; /* what a trace must show ("ce", "sm", "nccl"); NULL: nothing */
  int transfers_per_step;        /* ... and how many transfers of it */
  tp_dtype dtype;                /* of the outputs */
} tp_item_info;

typedef struct tp_item_ops {
  const char *name; /* "op", "layer" */
  tp_rc (*plan)(void *self, tp_group *group);
  tp_rc (*prepare)(void *self, tp_group *group);
  tp_rc (*before)(void *self, tp_group *group); /* may be NULL */
  tp_rc (*step)(void *self, tp_group *group);
  /* Fills out[0..max) and returns how many (0: nothing to compare). */
  int (*outputs)(void *self, tp_item_output *out, int max);
  void (*info)(void *self, tp_item_info *out);
} tp_item_ops;

typedef struct tp_item {
  const tp_item_ops *ops;
  void *self;
} tp_item;

typedef enum {
  TP_NUMERICS_NONE = 0,  /* not compared (the GEMMs or the collectives alone) */
  TP_NUMERICS_REFERENCE, /* keep the outputs: the case's reference (stock) */
  TP_NUMERICS_CHECK      /* compare against the case's reference, if it ran */
} tp_numerics_role;

/* One configuration as the harness sees it. */
typedef struct tp_harness_config {
  const tp_config_axes *axes; /* recorded as is; axes->graph selects graph mode */
  int rejected;               /* rejected before any GPU work: recorded with reason */
  const char *reason;
  double flops; /* per step, the whole group; 0 when not counted */
  tp_numerics_role numerics;
  double tolerance;  /* CHECK: the largest relative error that passes */
  int worst_output;  /* CHECK: record the worst output's relative error (else all pooled) */
  const char *label; /* the progress line's description */
} tp_harness_config;

typedef struct tp_harness_options {
  const char *command; /* the run's subcommand: "ops", "run" */
  const char *db_path;
  const char *command_line;
  int warmup_iters;     /* eager warm-up steps; graph mode replays as many again */
  int measure_iters;    /* timed steps */
  int window_timeout_s; /* a window that does not finish in this time is a timeout */
  int quiet;            /* no progress lines */
  const char *format;   /* table printed at the end: md, csv, json */
  int trace_iters;      /* iterations of a traced window (with a collector) */
  int64_t resume_run;   /* > 0: record into this run (a restarted job) instead of a new one */
} tp_harness_options;

typedef struct tp_harness tp_harness;

/* Collective. Allocates the timing state; rank 0 opens the database and
 * begins the run (or resumes opts->resume_run). Every rank learns whether
 * all could start. total: configurations, for progress lines. collector:
 * NULL for no traced windows. */
tp_rc tp_harness_open(tp_worker_ctx *ctx, tp_collector *collector, const tp_harness_options *opts,
                      int total, tp_harness **out);

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
tp_rc tp_harness_agree(tp_harness *h, tp_rc local, tp_rc *agreed, char *reason, size_t cap);

/* Runs one configuration on every rank and records it. TP_OK when it ended
 * (ok, rejected, failed, oom, timeout: recorded); an error only when this
 * worker cannot go on (a sticky CUDA error, a timeout, a lost peer, the
 * database), after recording what it could. */
tp_rc tp_harness_run(tp_harness *h, const tp_harness_config *cfg, const tp_item *item);

/* Records a configuration that could not be tried (its case failed): rc
 * gives the status, reason the text. */
tp_rc tp_harness_skip(tp_harness *h, const tp_harness_config *cfg, tp_rc rc, const char *reason);

/* The case ends: the kept reference outputs are freed. */
void tp_harness_case_end(tp_harness *h);

/* Ends the run: when rc is TP_OK and finish is set, rank 0 marks the run
 * finished and prints the throughput table of it. Frees h (NULL is fine).
 * Returns rc, or the first error of finishing. */
tp_rc tp_harness_close(tp_harness *h, tp_rc rc, int finish);

#endif
