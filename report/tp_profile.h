/*
 * tp_profile.h — `tpbench profile`'s runs: importing the per-process event
 * file the injection library wrote (collectors/tp_profile_file.h) into the
 * store, and the kernel summary of a stored profile.
 *
 * A profile is stored like a traced window: a run with command "profile",
 * one configuration of kind "profile" whose trace holds every event of the
 * process (the events, overlap and traces tables), so `tpbench trace
 * --config ID` reads it as any other trace. Its overlap row is the whole
 * process window, computed with collectors/' overlap math.
 */
#ifndef TP_PROFILE_H
#define TP_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/tp_error.h"
#include "store/tp_store.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tp_profile_selector; /* collectors/tp_profile_analysis.h */

/* What the profiled command was and how it ended. */
typedef struct tp_profile_import_args {
  const char *profile_dir;  /* the folder of the processes' event files (tp_profile_file.h);
                               none there: no process used CUDA */
  const char *command_line; /* the profiled command, as typed */
  const char *label;        /* free text, stored as the configuration's layer; NULL: "process" */
  const char *commit;       /* tpbench's commit */
  int dirty;
  const char *host;
  int exit_status; /* the command's: 0 ok; else the run's configuration is marked failed */
  const struct tp_profile_selector *selector; /* the windows to keep; NULL: the whole process */
  double baseline_step_us;     /* median host step time of the baseline run; NaN: none */
  const char *baseline_method; /* how it was taken (NULL when none) */
} tp_profile_import_args;

/* What the import made of it. */
typedef struct tp_profile_import_result {
  int64_t run_id, config_id; /* config_id 0: none written */
  size_t n_events;
  size_t n_processes; /* event files read: processes of the command that used CUDA */
  int empty;          /* no event file: the program never initialised CUDA */
  int incomplete;     /* the command failed, the file was cut short, or records were dropped */
  int busy;           /* a process's collector could not start (CUPTI busy): not profiled */
  int no_windows;     /* the selector found no window (the reason is the configuration's) */
  size_t n_ranks, n_windows;
  double overhead_pct; /* NaN when no baseline was given or no step was measured */
  char reason[512];    /* why the configuration is not ok ("" when it is) */
} tp_profile_import_result;

/* Stores one profiled command as a run (command "profile") with one
 * configuration (kind "profile") holding the events of every process that
 * wrote a file (their ranks as the files say), and its analysis
 * (store/tp_store_profile.h): the windows the selector keeps, each one's
 * breakdown per rank (also as overlap rows, window = its order on the
 * rank), the transport of each NVTX range's communication, the kernel
 * summary of the windows, and the overhead against args->baseline_step_us.
 * The configuration's samples are the step times per rank; its result is
 * over the steps, each step as long as its slowest rank. Status ok when the
 * command succeeded, the files are complete and the selector found windows;
 * failed, with the events kept and a reason, otherwise; rejected, without a
 * trace, when there is no event file (the program never initialised CUDA:
 * result.empty; or every process's collector failed to start: result.busy,
 * the reason is the first process's). The run is finished.
 * Errors: TP_EUSAGE for NULL arguments, TP_EIO for an unreadable or
 * malformed file (nothing stored but the run), TP_ESQLITE, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_import(tp_store *store, const tp_profile_import_args *args,
                                      tp_profile_import_result *out);

/* The median over steps of the host duration of the step ranges the
 * selector keeps in the event files of `folder` (each step as long as its
 * slowest rank): the step time of a baseline run made with NVTX ranges only.
 * *n_steps 0 and *median_us NaN when there are none. TP_EIO, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_host_step_median(const char *folder,
                                                const struct tp_profile_selector *selector,
                                                double *median_us, size_t *n_steps);

/* The profile configuration of run_id: *config_id 0 when the run is not a
 * profile run (or has no configuration). TP_ESQLITE. */
TP_MUST_CHECK tp_rc tp_profile_config_of_run(tp_store *store, int64_t run_id, int64_t *config_id);

/* Prints a profile run: its command line, status, window selection and
 * overhead; the breakdown of each window per rank; the transport of each
 * NVTX range's communication; and the kernel summary (names shown
 * demangled), as markdown tables. TP_ESQLITE,
 * TP_EOOM, TP_EIO when writing fails. */
TP_MUST_CHECK tp_rc tp_profile_report(tp_store *store, int64_t run_id, FILE *out);

/* Prints two profile configurations side by side (markdown, a section of
 * `tpbench compare`): per step (the slowest rank), the median step time,
 * communication, compute, sync, idle and exposed communication of each,
 * the change, and for the step time Welch's p over the steps. A side
 * without windows says so. TP_ESQLITE, TP_EOOM, TP_EIO. */
TP_MUST_CHECK tp_rc tp_profile_compare_pair(tp_store *store, int64_t base_config,
                                            int64_t head_config, const char *label, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* TP_PROFILE_H */
