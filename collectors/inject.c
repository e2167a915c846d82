/*
 * inject.c — libtpbench_inject.so, the collector inside a program that
 * `tpbench profile` runs (CUDA builds only).
 *
 * The CUDA driver loads the library named by CUDA_INJECTION64_PATH when the
 * program initialises CUDA and calls InitializeInjection. That starts the
 * process's one collector (collectors/cupti_collector.c) and opens one window
 * over the rest of the process, so every kernel, copy (peer-to-peer too),
 * memset, synchronisation and NVTX range is recorded. At exit (atexit) or on
 * SIGTERM/SIGINT the window is closed and its events are written to
 * process-<pid>.tpprof in the folder named by TPBENCH_PROFILE_OUT
 * (collectors/tp_profile_file.h; written under a temporary name, then
 * renamed, so the parent never reads half a file), which the parent imports.
 * Every process of the command that initialises CUDA writes its own file; a
 * program that never initialises CUDA never loads the library and writes
 * none. Processes that end with _exit are caught by this library's _exit
 * (it is preloaded too, LD_PRELOAD). A child forked after CUDA started
 * inherits the atexit handler but not
 * a working collector: only the process that started it writes. Ranks come
 * from the launcher's variables (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK),
 * else -1 (see rank_from_env).
 *
 * TPBENCH_PROFILE_MODE=ranges records NVTX ranges only (no device activity,
 * no API records): the baseline run of `tpbench profile --overhead`. When
 * the collector cannot start (CUPTI busy: another profiler attached), the
 * program runs unprofiled and the reason goes to process-<pid>.error, which
 * `tpbench profile` reports.
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "collectors/tp_collector.h"
#include "collectors/tp_profile_file.h"
#include "common/tp_log.h"

static const char LOG[] = "inject";

/* The library's one collector; written once by InitializeInjection. */
static tp_collector *collector;
static pid_t collector_pid; /* the process that started it: forked children do not write */
static atomic_int written;  /* the file was written (at exit or on a signal) */

/* torchrun, Slurm and Open MPI name the rank; -1 when none does (a single
 * program, or a launcher's own process: tp_profile_folder_read numbers or
 * keeps them apart). */
static int rank_from_env(void) {
  const char *names[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    const char *v = getenv(names[i]);
    char *end = NULL;
    long rank = v ? strtol(v, &end, 10) : 0;
    if (v && *v && end && *end == '\0' && rank >= 0 && rank <= INT_MAX) return (int)rank;
  }
  return -1;
}

/* Writes folder/process-<pid>.tpprof through a temporary name. */
static void write_file(const char *folder, const tp_profile_meta *meta, const tp_event *events,
                       size_t n) {
  char path[4096], tmp[4096 + 8];
  if (!folder || !*folder) {
    TP_LOGW(LOG, "TPBENCH_PROFILE_OUT is not set: the profile is lost");
    return;
  }
  snprintf(path, sizeof path, "%s/process-%lld.tpprof", folder, (long long)meta->pid);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    TP_LOGW(LOG, "%s cannot be written: the profile is lost", tmp);
    return;
  }
  int ok = tp_profile_file_write(f, meta, events, n) == TP_OK;
  if (!ok) TP_LOGW(LOG, "writing %s: %s", tmp, tp_last_error());
  if (fclose(f) != 0) ok = 0;
  if (rename(tmp, path) != 0) TP_LOGW(LOG, "renaming %s to %s failed", tmp, path);
  else if (!ok) TP_LOGW(LOG, "%s may be cut short", path);
}

/* Says in folder/process-<pid>.error why this process is not profiled. */
static void write_error(const char *reason) {
  const char *folder = getenv("TPBENCH_PROFILE_OUT");
  char path[4096];
  if (!folder || !*folder) return;
  snprintf(path, sizeof path, "%s/process-%lld.error", folder, (long long)getpid());
  FILE *f = fopen(path, "w");
  if (!f) return;
  (void)fprintf(f, "%s\n", reason);
  (void)fclose(f);
}

/* Closes the window and writes its events; complete is 0 on a signal. */
static void write_profile(int complete) {
  if (!collector || getpid() != collector_pid || atomic_exchange(&written, 1)) return;
  const char *folder = getenv("TPBENCH_PROFILE_OUT");
  tp_event *events = NULL;
  size_t n = 0;
  tp_rc rc = tp_collector_window_end(collector, &events, &n);
  if (rc != TP_OK) TP_LOGW(LOG, "closing the profile window: %s", tp_last_error());
  tp_collector_stats stats;
  tp_collector_get_stats(collector, &stats);
  tp_profile_meta meta = {.pid = (int64_t)getpid(),
                          .rank = rank_from_env(),
                          .dropped = stats.dropped,
                          .clock_offset_ns = stats.clock.offset_ns,
                          .complete = complete && rc == TP_OK};
  tp_collector_window_bounds(collector, &meta.start_ns, &meta.end_ns);
  tp_collector_gpu_name(meta.gpu_name, sizeof meta.gpu_name);
  write_file(folder, &meta, events, n);
  tp_collector_stop(collector);
  collector = NULL;
}

static void at_exit(void) { write_profile(1); }

/* Processes that end with _exit skip atexit: tpbench's own forked workers do,
 * as do many launchers' children. `tpbench profile` also names this library
 * in LD_PRELOAD, so this definition comes before libc's: it writes the
 * profile of the process that started the collector (nothing elsewhere),
 * then ends the process as libc's _exit does. */
void _exit(int status) { /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
  write_profile(1);
  for (;;) (void)syscall(SYS_exit_group, status);
}

/* The signal handler only writes the signal's number to this pipe (write is
 * async-signal-safe); signal_watcher, a thread of the library, reads it,
 * writes the profile, then raises the signal again with its default action,
 * so the parent sees how the program ended. */
static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig) {
  unsigned char byte = (unsigned char)sig;
  ssize_t n = write(signal_pipe[1], &byte, 1);
  (void)n; /* nothing safe to do about a failed write here */
}

static void *signal_watcher(void *arg) {
  (void)arg;
  unsigned char byte = 0;
  while (read(signal_pipe[0], &byte, 1) != 1) {}
  write_profile(0);
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  (void)sigaction(byte, &dfl, NULL);
  (void)raise(byte);
  return NULL;
}

/* SIGTERM and SIGINT write what was collected before the process ends. */
static void watch_signals(void) {
  pthread_t thread;
  if (pipe(signal_pipe) != 0 || pthread_create(&thread, NULL, signal_watcher, NULL) != 0) {
    TP_LOGW(LOG, "no signal watcher: a program killed by a signal leaves no profile");
    return;
  }
  (void)pthread_detach(thread);
  struct sigaction act = {.sa_handler = on_signal};
  (void)sigemptyset(&act.sa_mask);
  if (sigaction(SIGTERM, &act, NULL) != 0 || sigaction(SIGINT, &act, NULL) != 0)
    TP_LOGW(LOG, "sigaction failed: a program killed by a signal may leave no profile");
}

/* Called by the CUDA driver (CUDA_INJECTION64_PATH) during cuInit. Returns
 * 1 when the collector runs, 0 when it could not start (the program runs
 * unprofiled; the reason is logged). */
int InitializeInjection(void);
int InitializeInjection(void) {
  if (collector) return 1;
  tp_collector *c = NULL;
  char reason[768];
  if (tp_collector_start(rank_from_env(), &c) != TP_OK) {
    snprintf(reason, sizeof reason,
             "CUPTI refused tpbench's collector (is another profiler attached, such as Nsight "
             "Systems, or a second tpbench?): %s",
             tp_last_error());
    TP_LOGE(LOG, "%s", reason);
    write_error(reason);
    return 0;
  }
  const char *mode = getenv("TPBENCH_PROFILE_MODE");
  int ranges_only = mode && strcmp(mode, "ranges") == 0;
  if ((ranges_only ? tp_collector_window_begin_ranges(c) : tp_collector_window_begin(c)) != TP_OK) {
    snprintf(reason, sizeof reason, "the profile window cannot open: %s", tp_last_error());
    TP_LOGE(LOG, "%s", reason);
    write_error(reason);
    tp_collector_stop(c);
    return 0;
  }
  collector = c;
  collector_pid = getpid();
  if (atexit(at_exit) != 0) TP_LOGW(LOG, "atexit failed: the profile is written on signals only");
  watch_signals();
  return 1;
}
