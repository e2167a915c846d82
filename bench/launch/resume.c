/*
 * resume.c — the restart loop shared by `ops` and `run` (see resume.h).
 */
#include "bench/launch/resume.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

enum { MAX_RESTARTS = 16 };

tp_job_progress *tp_job_progress_map(const char *cmd) {
  void *shared = mmap(NULL, sizeof(tp_job_progress), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    fprintf(stderr, "tpbench %s: no shared memory for the job's progress\n", cmd);
    return NULL;
  }
  memset(shared, 0, sizeof(tp_job_progress));
  return shared;
}

void tp_job_progress_unmap(tp_job_progress *progress) {
  if (progress) munmap(progress, sizeof *progress);
}

void tp_job_progress_case_done(volatile tp_job_progress *progress, int next, int recorded) {
  progress->next = next;
  progress->current = -1;
  progress->recorded = recorded;
}

static int interrupted(int status) {
  return status == 128 + SIGINT || status == 128 + SIGTERM || status == 128 + SIGHUP;
}

int tp_resume_is_lost(const tp_resume *resume, int index) {
  for (int i = 0; i < resume->n_lost; ++i)
    if (resume->lost[i] == index) return 1;
  return 0;
}

/* After workers died: where the next ones start, what they record lost, and
 * which configurations of the unfinished case they leave out (every one lost
 * since the case began: a case whose configurations hang one after another
 * loses one more each time, never the same one twice). */
static void plan_restart(const tp_job_progress *pr, int status, tp_resume *resume) {
  if (pr->next > resume->start) resume->n_lost = 0; /* those are recorded, before start */
  resume->start = pr->next;
  resume->lost_index = -1;
  resume->lost_reason = NULL;
  if (pr->current < pr->next) return; /* died between cases: nothing was running */
  resume->lost_index = pr->current;
  if (resume->n_lost < TP_RESUME_MAX_LOST) resume->lost[resume->n_lost++] = pr->current;
  if (status == TP_WATCHDOG_EXIT) {
    resume->lost_rc = TP_ETIMEOUT;
    snprintf(resume->reason_buf, sizeof resume->reason_buf, "%s",
             "it did not finish within --timeout and hung where the worker could not look: the "
             "watchdog aborted the NCCL communicator and ended the workers; new workers went on "
             "after it");
  } else {
    resume->lost_rc = TP_EINTERNAL;
    snprintf(resume->reason_buf, sizeof resume->reason_buf,
             "the workers died while running this configuration (exit status %d); new workers "
             "went on after it",
             status);
  }
  resume->lost_reason = resume->reason_buf;
}

int tp_launch_until_done(const tp_launch_job *job) {
  const char *cmd = job->cmd;
  const int n_configs = job->n_configs;
  tp_job_progress *pr = job->progress;
  tp_resume *resume = job->resume;
  int status = 0;
  for (int attempt = 0;; ++attempt) {
    pr->next = resume->start;
    pr->current = -1;
    pr->recorded = 0;
    status = tp_launch(job->world, job->fn, job->ctx);
    if (status == 0 && attempt > 0) {
      /* the matrix is through, but workers died on the way: a failure, as when the last
       * configuration takes them down (the run keeps every result) */
      fprintf(stderr,
              "tpbench %s: every configuration is recorded; %d restart(s) after workers died, "
              "each lost configuration recorded with the reason\n",
              cmd, attempt);
      return TP_EXIT_FAILURE;
    }
    if (status == 0 || job->external || interrupted(status)) return status;
    if (pr->next >= n_configs) return status; /* all recorded: it failed at the end */
    /* Workers that died running a configuration leave progress behind them:
     * the next ones record it lost. Only an attempt that neither recorded
     * anything nor was running a configuration makes none. */
    const int running = pr->current >= pr->next;
    if ((attempt > 0 && pr->recorded == 0 && !running) || attempt == MAX_RESTARTS) {
      fprintf(stderr,
              "tpbench %s: giving up at configuration %d of %d: new workers made no progress; "
              "the run keeps what was recorded\n",
              cmd, pr->next + 1, n_configs);
      return status;
    }
    plan_restart(pr, status, resume);
    fprintf(stderr,
            "tpbench %s: the workers stopped at configuration %d of %d (exit status %d); "
            "starting new ones to go on\n",
            cmd, pr->next + 1, n_configs, status);
  }
}
