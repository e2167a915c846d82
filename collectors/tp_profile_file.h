/*
 * tp_profile_file.h — the per-process event file of `tpbench profile`.
 *
 * The injection library (collectors/inject.c) writes what one process's
 * collector saw into this file at exit; `tpbench profile` reads it back and
 * stores it (report/tp_profile.h). A line-oriented text format, so that a
 * file cut short by a crash still reads up to its last whole line:
 *
 *   tpbench-profile 1
 *   meta <pid> <rank> <start_ns> <end_ns> <dropped> <clock_offset_ns> <complete>
 *   gpu <the device's name to the end of the line>          (optional)
 *   ev <type> <category> <copy> <start> <end> <bytes> <launch> <rank> <device>
 *      <stream> <correlation> <peer> <name to the end of the line>
 *
 * (one `ev` line per event; numbers in decimal; type, category and copy are
 * the tp_event enums' values). Tabs and newlines in names are written as
 * spaces. Each process writes its own file, process-<pid>.tpprof, in the
 * folder `tpbench profile` names (TPBENCH_PROFILE_OUT).
 */
#ifndef TP_PROFILE_FILE_H
#define TP_PROFILE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collectors/tp_collector.h"
#include "common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the file says about the process beside its events. */
typedef struct tp_profile_meta {
  int64_t pid;
  int rank;
  uint64_t start_ns, end_ns; /* the collector's window: the whole process, CUPTI clock */
  uint64_t dropped;          /* records CUPTI dropped */
  int64_t clock_offset_ns;   /* CUPTI clock - CLOCK_REALTIME */
  int complete;              /* 1: written at a normal exit; 0: on a signal or a flush error */
  char gpu_name[128];        /* the device the process used, as the driver names it; "" unknown */
} tp_profile_meta;

/* Events read back; every name is owned by the struct. */
typedef struct tp_profile_data {
  tp_profile_meta meta;
  tp_event *events;
  size_t n_events;
  char **names;  /* one per event, the storage behind events[i].name */
  int truncated; /* 1: the last line was cut short (the writer died mid-line) */
} tp_profile_data;

/* Writes the header, meta and one line per event to `f`. TP_EUSAGE for NULL
 * arguments (events may be NULL when n == 0), TP_EIO when a write fails. */
TP_MUST_CHECK tp_rc tp_profile_file_write(FILE *f, const tp_profile_meta *meta,
                                          const tp_event *events, size_t n);

/* Reads a file written by tp_profile_file_write. TP_EIO if it cannot be
 * opened or is not a regular file (a link, a FIFO: never followed), TP_EIO (with the line number)
 * also for a header that is not this format or a malformed line other than a cut-off last one,
 * TP_EOOM. *out is filled only on TP_OK; free it with tp_profile_data_free. */
TP_MUST_CHECK tp_rc tp_profile_file_read(const char *path, tp_profile_data *out);

/* Reads every process-*.tpprof file of `folder` (one per process of the
 * profiled command that initialised CUDA; in name order) into one set:
 * events appended, meta of the first file with start the earliest, end the
 * latest, dropped summed, complete only if every file is, truncated if any
 * is. Processes with rank -1 (no launcher's rank) are numbered 0, 1, ...
 * in name order when every process has -1, else keep -1. *n_files receives how many were read: 0
 * (the folder is missing or has none) leaves *out empty and returns TP_OK. Errors as
 * tp_profile_file_read, naming the file. */
TP_MUST_CHECK tp_rc tp_profile_folder_read(const char *folder, tp_profile_data *out,
                                           size_t *n_files);

/* Counts the process-*.error files of `folder` (a process whose collector
 * could not start writes one, with the reason, and runs unprofiled) and
 * copies the first one's reason into first: its first line, cut to cap,
 * control characters as spaces; a link or FIFO is not read. A missing folder
 * has none. TP_EUSAGE for NULL arguments. */
TP_MUST_CHECK tp_rc tp_profile_folder_errors(const char *folder, char *first, size_t cap,
                                             size_t *n_errors);

/* Frees what tp_profile_file_read allocated; NULL is a no-op. */
void tp_profile_data_free(tp_profile_data *data);

#ifdef __cplusplus
}
#endif

#endif /* TP_PROFILE_FILE_H */
