/*
 * tp_profile_analysis.h — what the events of a profiled program say, window by window.
 *
 * `tpbench profile -- CMD` records every kernel, copy, memset, synchronisation and NVTX range
 * of a program tpbench did not write (collectors/inject.c). This module turns those events into
 * what a reader asks of them, in pure C over tp_event arrays (tested on the CPU):
 *   windows    the steps to look at: the program's step ranges (PyTorch's ProfilerStep#N,
 *              "step N"), the ranges a regex names, or the whole process, per rank;
 *   breakdown  per window: step time, communication / compute / sync / other / idle,
 *              overlap and exposed communication (overlap.c's definitions);
 *   schedules  per NVTX range name of the program: which transport its communication used
 *              (NCCL kernels, copy-engine peer copies, SM copy kernels, multicast) or none;
 *   kernels    the kernel summary of the windows, and a display form of mangled names.
 * Device work belongs to a step window when the API call that launched it (tp_event.launch_ns)
 * started inside the step's range, as in evidence.c: kernels run after their launch, often
 * after the range closed. Definitions: collectors/README.md, "Profiles".
 */
#ifndef TP_PROFILE_ANALYSIS_H
#define TP_PROFILE_ANALYSIS_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "collectors/tp_collector.h"
#include "common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- window selection --------------------------------------------------------------- */

typedef enum {
  TP_SELECT_PROCESS, /* no option: the whole process is one window per rank */
  TP_SELECT_STEPS,   /* --steps A:B: the step ranges numbered A <= N < B */
  TP_SELECT_RANGE    /* --range REGEX: every range whose name matches */
} tp_select_mode;

typedef struct tp_profile_selector {
  tp_select_mode mode;
  int64_t step_lo;       /* TP_SELECT_STEPS: first step kept (0 when "A" was left open) */
  int64_t step_hi;       /* ... first step not kept; INT64_MAX: open ("A:"), every step up
                            to INT64_MAX itself kept */
  char text[128];        /* the option as given, for messages ("--steps 3:5") */
  regex_t range_re;      /* TP_SELECT_RANGE: compiled with REG_EXTENDED | REG_NOSUB */
  int range_re_compiled; /* 1 when range_re must be freed */
} tp_profile_selector;

/* Parses the two user options into *out (NULL or "" for an option not given).
 * steps: "A:B" keeps the step numbers A <= N < B, "A:" and ":B" are open on one side, ":"
 * keeps every step range, "N" alone means N:N+1; A and B are decimal integers >= 0 (no sign,
 * no spaces) and B > A. range: a POSIX extended regex, not empty. Returns TP_EUSAGE naming
 * the option (and regerror's text for a bad regex) for garbage, a negative or overflowing
 * number, B <= A, both options at once. *out needs tp_profile_selector_free after TP_OK. */
TP_MUST_CHECK tp_rc tp_profile_selector_parse(const char *steps, const char *range,
                                              tp_profile_selector *out);

/* Frees the compiled regex, if any; safe on a zeroed selector and twice. */
void tp_profile_selector_free(tp_profile_selector *sel);

/* 1 and *step when `name` is a step range: case-insensitively "ProfilerStep#N" (PyTorch),
 * "step N", "step#N", "step_N" or "stepN", the whole name (after an NVTX "domain:" prefix)
 * with N a decimal number that fits int64_t; else 0. */
int tp_profile_step_number(const char *name, int64_t *step);

/* One window of one rank. */
typedef struct tp_profile_window {
  const char *name;                    /* the range's name; "process" for the whole process */
  uint64_t host_start_ns, host_end_ns; /* the range's own CPU times (whole process: the
                                          rank's first start and last end of any event) */
  uint64_t start_ns, end_ns;           /* on the device: the first start to the last end of
                                          the window's device work; the host bounds when empty */
  int64_t step;                        /* step number read from the name; with --range the
                                          order of the range's start on its rank (0, 1, ...);
                                          -1 for the whole process */
  int rank;
  int whole_process; /* 1: every event of the rank belongs to it, whatever its launch time */
  int empty;         /* no device work was launched inside the range */
} tp_profile_window;

/* The windows `sel` selects in the events, for every rank present, sorted by rank then
 * host start, in a malloc'd array (*out NULL when *n_out is 0; free() it). Device work is
 * a kernel, copy, memset or sync event; it belongs to a range's window when its launch_ns
 * lies in [host_start, host_end) of the range and it is of the range's rank (work without a
 * launch time is in no step window). A step range inside another of the same number on the
 * same rank (a program marking its steps twice) is no window of its own: the outer one is
 * the step. Names point into the events. Returns TP_EUSAGE when --steps or --range selects
 * nothing, with a message listing what exists ("no step in
 * 10:20; the program's steps are 0..7 on rank 0"); TP_EUSAGE for NULL arguments; TP_EOOM.
 * The whole-process selection of no events is zero windows and TP_OK. */
TP_MUST_CHECK tp_rc tp_profile_windows(const tp_event *ev, size_t n, const tp_profile_selector *sel,
                                       tp_profile_window **out, size_t *n_out);

/* 1 when `e` is device work of window `w` (its rank, and launched inside it). */
int tp_profile_in_window(const tp_event *e, const tp_profile_window *w);

/* ---- breakdown per window ---------------------------------------------------------- */

typedef struct tp_profile_breakdown {
  uint64_t step_ns;         /* the device window: end_ns - start_ns */
  uint64_t host_ns;         /* the range on the CPU: host_end_ns - host_start_ns */
  uint64_t comm_ns;         /* |U comm| of the window's events (overlap.c) */
  uint64_t compute_ns;      /* |U compute| */
  uint64_t sync_ns;         /* |U sync| */
  uint64_t other_ns;        /* |U memsets and local copies| */
  uint64_t busy_ns;         /* |U all the window's device work| */
  uint64_t idle_ns;         /* step_ns - busy_ns */
  uint64_t overlap_ns;      /* |U comm n U compute| */
  uint64_t exposed_comm_ns; /* comm_ns - overlap_ns */
  double overlap_pct;       /* 100 * overlap / comm; 0 when comm_ns == 0 */
  size_t kernels;           /* kernels launched inside the window */
} tp_profile_breakdown;

/* The breakdown of window `w` over its own events (tp_profile_in_window), through
 * tp_overlap_compute over the window [start_ns, end_ns). TP_EUSAGE for NULL arguments,
 * TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_breakdown_of(const tp_event *ev, size_t n,
                                            const tp_profile_window *w, tp_profile_breakdown *out);

/* The breakdowns of all n_w windows at once, out[k] that of w[k] (room for n_w), exactly
 * as tp_profile_breakdown_of gives each, in O((n + n_w) log n) plus each window's own
 * events: the events are indexed by rank and launch time once, not scanned per window.
 * TP_EUSAGE for NULL arguments, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_breakdowns(const tp_event *ev, size_t n, const tp_profile_window *w,
                                          size_t n_w, tp_profile_breakdown *out);

/* ---- schedules per NVTX range name ---------------------------------------------------- */

/* How a transfer moved its bytes. */
typedef enum {
  TP_TRANSPORT_NONE = 0,    /* not a transfer */
  TP_TRANSPORT_NCCL,        /* an NCCL kernel */
  TP_TRANSPORT_COPY_ENGINE, /* a peer copy: PtoP, or DtoD to another device */
  TP_TRANSPORT_SM_COPY,     /* an SM kernel writing or reading peers' memory (tpbench's copy
                               kernel, PyTorch's symmetric-memory all-reduce kernels) */
  TP_TRANSPORT_MULTICAST    /* an NVLink multicast (multimem) kernel */
} tp_transport;

/* The transport of one event (classify.c's origins and the copy's kind and devices). */
tp_transport tp_profile_transport_of(const tp_event *e);

/* What the ranges of one name launched on one rank, over the selected windows. */
typedef struct tp_profile_schedule {
  const char *name; /* the NVTX range's name (points into the events) */
  int rank;
  size_t ranges;            /* ranges of this name inside the windows */
  size_t device_events;     /* device work launched inside them */
  size_t nccl_kernels;      /* TP_TRANSPORT_NCCL */
  size_t peer_copies;       /* TP_TRANSPORT_COPY_ENGINE */
  size_t sm_copy_kernels;   /* TP_TRANSPORT_SM_COPY */
  size_t multicast_kernels; /* TP_TRANSPORT_MULTICAST */
  uint64_t comm_ns;         /* |U comm| of that work */
  uint64_t gemm_ns;         /* |U GEMM kernels| of that work */
  uint64_t overlap_ns;      /* |U comm n U compute| of that work */
  const char *verdict;      /* "nccl", "copy-engine", "sm-copy", "multicast", "mixed" (more
                               than one kind) or "none" (no transfer: a fused op that fell
                               back to a local GEMM, a world of one) */
} tp_profile_schedule;

/* One row per (rank, range name) whose ranges launched device work inside the windows,
 * sorted by rank then name, in a malloc'd array (*out NULL when *n_out is 0; free() it).
 * Step ranges (tp_profile_step_number) are left out; with --range the selected ranges
 * themselves are rows too. A range belongs to a window when it starts inside the window's
 * host interval (any range of the rank for a whole-process window). An event launched
 * inside nested ranges counts for each enclosing name, once per name. TP_EUSAGE for NULL
 * arguments, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_schedules(const tp_event *ev, size_t n, const tp_profile_window *w,
                                         size_t n_w, tp_profile_schedule **out, size_t *n_out);

/* ---- kernel summary ------------------------------------------------------------------- */

typedef struct tp_profile_kernel {
  const char *name; /* as CUPTI reported it (points into the events) */
  tp_event_category category;
  size_t count;
  uint64_t total_ns;
  double mean_ns;
  double share_pct; /* of the total kernel time of the windows */
} tp_profile_kernel;

/* The kernels of the windows (a kernel counts once even when windows overlap), grouped by
 * name, longest total first (ties by name), in a malloc'd array (*out NULL when *n_out is 0;
 * free() it). TP_EUSAGE for NULL arguments, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_profile_kernel_summary_of(const tp_event *ev, size_t n,
                                                 const tp_profile_window *w, size_t n_w,
                                                 tp_profile_kernel **out, size_t *n_out);

#ifdef __cplusplus
}
#endif

#endif /* TP_PROFILE_ANALYSIS_H */
