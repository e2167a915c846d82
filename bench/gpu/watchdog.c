/*
 * watchdog.c — the thread of watchdog.h: a deadline under a mutex, a
 * condition variable to re-arm, disarm or stop it, and on expiry the
 * worker's last words (under the lock, so the main thread cannot re-arm or
 * disarm past them), then _exit (nothing else of the process can be
 * trusted then: the main thread may hold CUDA's or NCCL's locks, or be
 * inside NCCL with the communicator an abort would free).
 */
#include "bench/gpu/watchdog.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct tp_watchdog {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  tp_group *group;
  int rank;
  int armed, stopping;
  struct timespec deadline; /* CLOCK_MONOTONIC */
  double seconds;
  const char *what;
  tp_watchdog_last_words_fn last_words;
  void *last_words_ctx;
};

static struct timespec after(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long ns = (long long)ts.tv_nsec + (long long)(seconds * 1e9);
  ts.tv_sec += (time_t)(ns / 1000000000LL);
  ts.tv_nsec = (long)(ns % 1000000000LL);
  return ts;
}

static int passed(const struct timespec *deadline) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > deadline->tv_sec ||
         (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

static void fire(tp_watchdog *w) {
  fprintf(stderr,
          "tpbench: rank %d: %s did not finish within %.0f s: aborting the NCCL communicator "
          "and this worker\n",
          w->rank, w->what ? w->what : "a window", w->seconds);
  if (w->last_words) w->last_words(w->last_words_ctx, w->what ? w->what : "a window");
  /* No ncclCommAbort here: the main thread may be inside NCCL with that
   * communicator (a TP 2 drift step hung by its peer died of SIGSEGV that
   * way, on the shared-GPU run); the process ends now and the driver tears
   * its context down, hung kernels included. */
  _exit(TP_WATCHDOG_EXIT);
}

static void *watch(void *arg) {
  tp_watchdog *w = arg;
  pthread_mutex_lock(&w->lock);
  while (!w->stopping) {
    if (!w->armed) {
      pthread_cond_wait(&w->changed, &w->lock);
      continue;
    }
    struct timespec deadline = w->deadline;
    (void)pthread_cond_timedwait(&w->changed, &w->lock, &deadline);
    /* woken early (re-armed, disarmed, stopping) or spuriously: look again */
    if (w->armed && !w->stopping && passed(&w->deadline)) fire(w);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

tp_rc tp_watchdog_start(tp_group *group, int rank, tp_watchdog **out) {
  *out = NULL;
  tp_watchdog *w = calloc(1, sizeof *w);
  if (!w) return TP_FAIL(TP_EOOM, "no host memory for the watchdog");
  w->group = group;
  w->rank = rank;
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc == 0) rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0) rc = pthread_cond_init(&w->changed, &attr);
  pthread_condattr_destroy(&attr);
  if (rc == 0) rc = pthread_mutex_init(&w->lock, NULL);
  if (rc == 0) rc = pthread_create(&w->thread, NULL, watch, w);
  if (rc != 0) {
    free(w);
    return TP_FAIL(TP_EIO, "cannot start the watchdog thread: %s", strerror(rc));
  }
  *out = w;
  return TP_OK;
}

void tp_watchdog_arm(tp_watchdog *w, double seconds, const char *what) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->deadline = after(seconds);
  w->seconds = seconds;
  w->what = what;
  w->armed = 1;
  pthread_cond_signal(&w->changed);
  pthread_mutex_unlock(&w->lock);
}

void tp_watchdog_disarm(tp_watchdog *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->armed = 0;
  pthread_cond_signal(&w->changed);
  pthread_mutex_unlock(&w->lock);
}

void tp_watchdog_set_last_words(tp_watchdog *w, tp_watchdog_last_words_fn fn, void *ctx) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->last_words = fn;
  w->last_words_ctx = ctx;
  pthread_mutex_unlock(&w->lock);
}

void tp_watchdog_stop(tp_watchdog *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stopping = 1;
  pthread_cond_signal(&w->changed);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->changed);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
