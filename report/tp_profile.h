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
} tp_profile_import_args;

/* What the import made of it. */
typedef struct tp_profile_import_result {
  int64_t run_id, config_id; /* config_id 0: none written */
  size_t n_events;
  size_t n_processes; /* event files read: processes of the command that used CUDA */
  int empty;          /* no event file: the program never initialised CUDA */
  int incomplete;     /* the command failed, the file was cut short, or records were dropped */
} tp_profile_import_result;

/* Stores one profiled command as a run (command "profile") with one
 * configuration (kind "profile") holding the events of every process that
 * wrote a file (their ranks as the files say; the overlap row is the first
 * file's rank over the window of them all): status ok with the process window's length
 * as its one sample when the command succeeded and the file is complete;
 * failed, with the events kept and a reason saying why the profile is
 * incomplete, otherwise; rejected, without a trace, when there is no event
 * file (reason: the program never initialised CUDA; result.empty). The run is finished.
 * Errors: TP_EUSAGE for NULL arguments, TP_EIO for an unreadable or
 * malformed file (nothing stored but the run), TP_ESQLITE, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_import(tp_store *store, const tp_profile_import_args *args,
                                      tp_profile_import_result *out);

/* One kernel name's line of the summary. */
typedef struct tp_kernel_row {
  char name[256]; /* truncated if longer */
  char category[16];
  int64_t count;
  double total_us, mean_us;
  double share_pct; /* of the total kernel time of the configuration */
} tp_kernel_row;

/* The kernels of config_id, grouped by name, longest total first (ties by
 * name), in a malloc'd array (*rows NULL when *n is 0; free() it). Only
 * events of kind kernel count. TP_ESQLITE, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_kernel_summary(tp_store *store, int64_t config_id,
                                              tp_kernel_row **rows, size_t *n);

/* The profile configuration of run_id: *config_id 0 when the run is not a
 * profile run (or has no configuration). TP_ESQLITE. */
TP_MUST_CHECK tp_rc tp_profile_config_of_run(tp_store *store, int64_t run_id, int64_t *config_id);

/* Prints a profile run: its command line and status, overlap over the
 * process window, and the kernel summary as a markdown table. TP_ESQLITE,
 * TP_EOOM, TP_EIO when writing fails. */
TP_MUST_CHECK tp_rc tp_profile_report(tp_store *store, int64_t run_id, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* TP_PROFILE_H */
