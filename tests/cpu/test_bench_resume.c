/*
 * test_bench_resume.c — the restart loop of `ops` and `run` (bench/launch/resume.h)
 * with simulated workers (forked by the real launcher, writing the shared
 * progress as rank 0 of a real job does): new workers start at the first
 * configuration not recorded with the running one recorded lost; a watchdog
 * exit is recorded as a timeout; workers that die running a configuration
 * are restarted even when they recorded nothing (the next ones record the
 * lost one); workers that die before running anything are given up on; an
 * interrupt and an external launcher are never restarted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "bench/launch/resume.h"

enum { N_CONFIGS = 12, MAX_SEEN = 8 };

/* What each attempt saw, in memory shared with the forked workers. */
typedef struct script {
  int attempts;
  int start[MAX_SEEN], lost[MAX_SEEN], lost_rc[MAX_SEEN];
  int left_out[MAX_SEEN][N_CONFIGS]; /* per attempt: which configurations were lost */
  int plan;                          /* which scenario the workers play */
} script;

typedef struct job {
  script *sc;
  tp_job_progress *progress;
  const tp_resume *resume;
} job;

static script *shared_script(void) {
  void *p = mmap(NULL, sizeof(script), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  memset(p, 0, sizeof(script));
  return p;
}

enum {
  PLAN_TIMEOUT_THEN_DONE,
  PLAN_DIE_RUNNING_TWICE,
  PLAN_DIE_BEFORE_ANY,
  PLAN_INTERRUPTED,
  PLAN_CASE_HANGS_IN_TURN,
  PLAN_ALL_RECORDED
};

/* Rank 0's side of one attempt, as the scenario says. */
static int play(const tp_launch_env *env, void *ctx) {
  job *j = ctx;
  if (env->rank != 0) return 0;
  script *sc = j->sc;
  tp_job_progress *pr = j->progress;
  const int a = sc->attempts++;
  sc->start[a] = j->resume->start;
  sc->lost[a] = j->resume->lost_reason ? j->resume->lost_index : -1;
  sc->lost_rc[a] = (int)j->resume->lost_rc;
  for (int i = 0; i < N_CONFIGS; ++i) sc->left_out[a][i] = tp_resume_is_lost(j->resume, i);
  switch (sc->plan) {
  case PLAN_TIMEOUT_THEN_DONE:
    if (a == 0) { /* cases 0..2 recorded, then configuration 4 hangs */
      tp_job_progress_case_done(pr, 3, 3);
      pr->current = 4;
      return TP_WATCHDOG_EXIT;
    }
    tp_job_progress_case_done(pr, N_CONFIGS, 5);
    return 0;
  case PLAN_DIE_RUNNING_TWICE:
    if (a < 2) { /* dies running a configuration, recording nothing */
      pr->current = j->resume->start + 1;
      return 1;
    }
    tp_job_progress_case_done(pr, N_CONFIGS, 1);
    return 0;
  case PLAN_DIE_BEFORE_ANY: return 1;
  case PLAN_INTERRUPTED: return 130; /* what a worker stopped by SIGINT exits with */
  case PLAN_CASE_HANGS_IN_TURN:
    /* the case of configurations 4..7: each one not yet lost hangs in turn,
     * as every configuration of a case with a too-long window does */
    tp_job_progress_case_done(pr, 4, 1);
    for (int i = 4; i < 8; ++i)
      if (!tp_resume_is_lost(j->resume, i)) {
        pr->current = i;
        return TP_WATCHDOG_EXIT;
      }
    tp_job_progress_case_done(pr, N_CONFIGS, 2);
    return 0;
  case PLAN_ALL_RECORDED: tp_job_progress_case_done(pr, N_CONFIGS, N_CONFIGS); return 0;
  }
  return 1;
}

static int run_plan(int plan, int external, script **out) {
  script *sc = shared_script();
  sc->plan = plan;
  tp_job_progress *pr = tp_job_progress_map("test");
  assert_non_null(pr);
  tp_resume resume;
  memset(&resume, 0, sizeof resume);
  resume.lost_index = -1;
  job j = {sc, pr, &resume};
  const tp_launch_job launch = {"test", 2, external, N_CONFIGS, pr, &resume, play, &j};
  int status = tp_launch_until_done(&launch);
  tp_job_progress_unmap(pr);
  *out = sc;
  return status;
}

static void test_timeout_is_recorded_and_the_matrix_goes_on(void **state) {
  (void)state;
  script *sc = NULL;
  assert_int_equal(run_plan(PLAN_TIMEOUT_THEN_DONE, 0, &sc),
                   TP_EXIT_FAILURE); /* through, but a configuration was lost */
  assert_int_equal(sc->attempts, 2);
  assert_int_equal(sc->start[0], 0);
  assert_int_equal(sc->lost[0], -1);
  assert_int_equal(sc->start[1], 3); /* the first configuration not recorded */
  assert_int_equal(sc->lost[1], 4);  /* the one that was running */
  assert_int_equal(sc->lost_rc[1], TP_ETIMEOUT);
  munmap(sc, sizeof *sc);
}

/* A matrix through in one attempt is a success; through only after restarts, a failure. */
static void test_clean_run_exits_0(void **state) {
  (void)state;
  script *sc = NULL;
  assert_int_equal(run_plan(PLAN_ALL_RECORDED, 0, &sc), TP_EXIT_OK);
  assert_int_equal(sc->attempts, 1);
  munmap(sc, sizeof *sc);
}

static void test_dying_while_running_is_progress(void **state) {
  (void)state;
  script *sc = NULL;
  assert_int_equal(run_plan(PLAN_DIE_RUNNING_TWICE, 0, &sc), TP_EXIT_FAILURE);
  assert_int_equal(sc->attempts, 3);
  assert_int_equal(sc->lost[1], 1);
  assert_int_equal(sc->lost_rc[1], TP_EINTERNAL);
  assert_int_equal(sc->lost[2], 1); /* nothing recorded: the same start, the lost one told again */
  munmap(sc, sizeof *sc);
}

static void test_each_lost_configuration_stays_out(void **state) {
  (void)state;
  script *sc = NULL;
  assert_int_equal(run_plan(PLAN_CASE_HANGS_IN_TURN, 0, &sc), TP_EXIT_FAILURE);
  assert_int_equal(sc->attempts, 5); /* one per configuration of the case, then the rest */
  for (int a = 1; a < 5; ++a) {
    assert_int_equal(sc->start[a], 4);
    assert_int_equal(sc->lost[a], 3 + a); /* the newest lost one, recorded once */
    for (int i = 4; i < 8; ++i) assert_int_equal(sc->left_out[a][i], i < 4 + a);
  }
  munmap(sc, sizeof *sc);
}

static void test_no_progress_gives_up(void **state) {
  (void)state;
  script *sc = NULL;
  assert_int_not_equal(run_plan(PLAN_DIE_BEFORE_ANY, 0, &sc), 0);
  assert_int_equal(sc->attempts, 2); /* one restart, then it gives up */
  munmap(sc, sizeof *sc);
}

static void test_interrupt_and_external_are_not_restarted(void **state) {
  (void)state;
  script *sc = NULL;
  assert_int_not_equal(run_plan(PLAN_INTERRUPTED, 0, &sc), 0);
  assert_int_equal(sc->attempts, 1);
  munmap(sc, sizeof *sc);
  assert_int_not_equal(run_plan(PLAN_DIE_BEFORE_ANY, 1, &sc), 0);
  assert_int_equal(sc->attempts, 1);
  munmap(sc, sizeof *sc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timeout_is_recorded_and_the_matrix_goes_on),
      cmocka_unit_test(test_clean_run_exits_0),
      cmocka_unit_test(test_dying_while_running_is_progress),
      cmocka_unit_test(test_each_lost_configuration_stays_out),
      cmocka_unit_test(test_no_progress_gives_up),
      cmocka_unit_test(test_interrupt_and_external_are_not_restarted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
