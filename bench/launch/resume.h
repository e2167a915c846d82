/*
 * resume.h — a matrix that outlives its workers: `ops` and `run` start one
 * worker per GPU and, when the workers die (a sticky CUDA error, a hung and
 * aborted collective, a killed process), start new ones that record the
 * configuration that was running as failed and go on with the rest, in the
 * same run. Cases are measured whole (rounds interleave their
 * configurations), so new workers start at the first configuration not
 * recorded — a case's first — and leave out the lost one.
 *
 * Where the job stands lives in an anonymous shared mapping that the parent
 * reads after the workers end and rank 0 writes as it goes.
 */
#ifndef TP_BENCH_RESUME_H
#define TP_BENCH_RESUME_H

#include <stdint.h>

#include "bench/launch/launcher.h"
#include "common/tp_error.h"

/* The exit status of a worker its watchdog ended (bench/gpu/watchdog.h):
 * timeout(1)'s. */
enum { TP_WATCHDOG_EXIT = 124 };

typedef struct tp_job_progress {
  int64_t run_id; /* 0 until the run began */
  int next;       /* the first configuration not recorded yet (a case's first) */
  int current;    /* the configuration being run; -1 between cases */
  int recorded;   /* configurations these workers recorded so far */
} tp_job_progress;

enum { TP_RESUME_MAX_LOST = 64 };

/* Where a set of workers starts. */
typedef struct tp_resume {
  int start;               /* the first configuration to run */
  int lost_index;          /* the configuration that killed the last workers, -1: none */
  const char *lost_reason; /* non-NULL with lost_index: record it with this reason */
  tp_rc lost_rc;           /* ... and this status: TP_ETIMEOUT when the watchdog fired */
  char reason_buf[256];
  /* Every configuration at or after start that killed workers (the newest,
   * lost_index, included): recorded already or now, never run again. */
  int lost[TP_RESUME_MAX_LOST];
  int n_lost;
} tp_resume;

/* 1 if configuration index is one of resume's lost ones. */
int tp_resume_is_lost(const tp_resume *resume, int index);

/* A zeroed progress in memory shared with the workers to come; NULL (and a
 * message on stderr naming cmd) if it cannot be mapped. */
tp_job_progress *tp_job_progress_map(const char *cmd);
void tp_job_progress_unmap(tp_job_progress *progress);

/* A command's job as the restart loop drives it. */
typedef struct tp_launch_job {
  const char *cmd;           /* "ops", "run": names the messages */
  int world;                 /* workers per attempt */
  int external;              /* an external launcher owns the processes: one attempt only */
  int n_configs;             /* configurations in the matrix */
  tp_job_progress *progress; /* shared with the workers (tp_job_progress_map) */
  tp_resume *resume;         /* where the next attempt starts; updated for fn to read */
  tp_worker_fn fn;           /* each worker's entry */
  void *ctx;                 /* fn's argument */
} tp_launch_job;

/* Starts workers until the matrix is through: new ones after workers that
 * died, each time at progress->next with the running configuration recorded
 * as lost. Stops when an attempt records nothing, after 16 restarts, on an
 * interrupt, or at once under an external launcher. Returns the last
 * attempt's exit status, but TP_EXIT_FAILURE when the matrix got through only after
 * restarts (something was lost on the way). */
TP_MUST_CHECK int tp_launch_until_done(const tp_launch_job *job);

/* Rank 0 after a case: every configuration before next is recorded. */
void tp_job_progress_case_done(volatile tp_job_progress *progress, int next, int recorded);

#endif
