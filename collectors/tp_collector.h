/*
 * tp_collector.h — what the GPUs did, as events, and what follows from them.
 *
 * The collectors/ stage sits between the kernels and the store: it observes
 * what the GPUs did. It is split along the seams of a trace pipeline:
 *
 *   collect  cupti_collector.c  owns CUPTI: activity kinds, buffers, flushes,
 *                               NVTX injection; the only file with cupti.h.
 *   process  cupti_collector.c  turns raw records into tp_event (names interned,
 *                               NVTX start/end markers paired into ranges).
 *            classify.c         kernel name -> category, one rule table.
 *            overlap.c          per-rank, per-window comm/compute union math.
 *            evidence.c         does the trace show the schedule that was run?
 *            clock.c            CUPTI clock vs CLOCK_REALTIME offset.
 *   annotate nvtx_ranges.c      tp_nvtx_push/pop in the "tpbench" domain.
 *
 * Everything except the collector itself is pure C (library tp_collect_core,
 * tested on the CPU); the collector is library tp_collectors, built only with
 * TPBENCH_WITH_CUDA. Export (store, Chrome trace) belongs to store/ and
 * report/, which consume tp_event and never see CUPTI.
 *
 * Timestamps are nanoseconds on CUPTI's clock, which on Linux is
 * CLOCK_REALTIME unless a tool registered another (collectors/README.md).
 */
#ifndef TP_COLLECTOR_H
#define TP_COLLECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- events --------------------------------------------------------------- */

/* What an event is: device work of one of four types, or an NVTX range. */
typedef enum { TP_EV_KERNEL, TP_EV_MEMCPY, TP_EV_MEMSET, TP_EV_SYNC, TP_EV_RANGE } tp_event_type;

typedef enum {
  TP_CAT_COMM,        /* bytes moving: NCCL kernels, peer copies, tpbench's SM copy kernel and
                         the reductions of partials peers delivered */
  TP_CAT_SYNC,        /* waiting, not moving: tpbench's barrier/signal/wait kernels and CUPTI
                         synchronisation records (stream waits, syncs) */
  TP_CAT_GEMM,        /* cuBLAS, cuBLASLt, CUTLASS */
  TP_CAT_ATTENTION,   /* flash/fused attention, softmax */
  TP_CAT_ELEMENTWISE, /* pointwise kernels, norms, fills, casts */
  TP_CAT_OTHER,       /* anything else, local copies, memsets */
  TP_CAT_RANGE        /* NVTX ranges: annotations, not work */
} tp_event_category;
enum { TP_CAT_COUNT = TP_CAT_RANGE + 1 };

/* Direction of a copy, CUPTI's kinds in tpbench's words (H host, D device,
 * A CUDA array, P peer device). */
typedef enum {
  TP_COPY_NONE = 0, /* not a copy, or unknown */
  TP_COPY_HTOD,
  TP_COPY_DTOH,
  TP_COPY_HTOA,
  TP_COPY_ATOH,
  TP_COPY_ATOA,
  TP_COPY_ATOD,
  TP_COPY_DTOA,
  TP_COPY_DTOD,
  TP_COPY_HTOH,
  TP_COPY_PTOP
} tp_copy_kind;

/* stream of an event that runs on no stream (NVTX ranges, some syncs). */
#define TP_STREAM_NONE UINT32_MAX

typedef struct tp_event {
  /* 64-bit members first: the struct has no padding (it is stored by the million) */
  const char *name;          /* interned, owned by the collector (or the caller for synthetic
                                events); never NULL: copies and syncs get a fixed label */
  uint64_t start_ns, end_ns; /* [start, end), CUPTI clock */
  uint64_t bytes;            /* copies and memsets; 0 otherwise */
  uint64_t launch_ns;        /* device work: when the host API call that issued it started
                                (CUPTI clock, the clock of NVTX ranges); 0 when unknown */
  int rank;                  /* the collector's rank */
  int device;                /* CUDA device ordinal; -1 for host-side events (ranges) */
  uint32_t stream;           /* CUPTI stream id, or TP_STREAM_NONE */
  tp_event_type type;
  tp_event_category category;
  uint32_t correlation; /* CUPTI correlation id (the launching API call); NVTX: marker id */
  tp_copy_kind copy_kind;
  int peer_device; /* the other device of a peer copy; -1 otherwise */
} tp_event;

/* "kernel", "memcpy", "memset", "sync", "range" (the store's "kind" column). */
const char *tp_event_type_name(tp_event_type type);
/* "comm", "sync", "gemm", "attention", "elementwise", "other", "range". */
const char *tp_category_name(tp_event_category category);
/* "HtoD", "DtoD", "PtoP", ...; "none" for TP_COPY_NONE. */
const char *tp_copy_kind_name(tp_copy_kind kind);

/* ---- classification (classify.c) ------------------------------------------ */

/* Whose transfer or signalling kernel a kernel is, beyond its category: the
 * schedule evidence counts kernels by their origin. */
typedef enum {
  TP_KERNEL_OTHER = 0,  /* none of the below (tpbench's compute kernels included) */
  TP_KERNEL_NCCL,       /* an NCCL device kernel */
  TP_KERNEL_OWN_COPY,   /* tpbench's SM copy kernel (schedule "sm") */
  TP_KERNEL_OWN_REDUCE, /* tpbench's cross-rank sum */
  TP_KERNEL_OWN_SIGNAL, /* tpbench's barrier / signal / wait kernels (category sync) */
  TP_KERNEL_SYMM_MEM,   /* PyTorch's symmetric-memory SM kernels that move bytes between peers
                           (one_shot_all_reduce_kernel, two_shot_all_reduce_kernel, ...) */
  TP_KERNEL_MULTICAST   /* NVLink multicast kernels ("multimem" in the name), category comm */
} tp_kernel_origin;

typedef struct tp_kernel_class {
  tp_event_category category;
  tp_kernel_origin origin;
  const char *rule; /* the matching rule's pattern, for messages; "" when none matched */
} tp_kernel_class;

/* Classifies a kernel by its name as CUPTI reports it (mangled or demangled:
 * rules match substrings, so both work). NULL or "" is TP_CAT_OTHER. Rules
 * are tried in table order; the first match wins. */
tp_event_category tp_classify_kernel(const char *name);
tp_kernel_class tp_classify_kernel_ex(const char *name);

/* Category of a copy: peer-to-peer copies are communication, others "other". */
tp_event_category tp_classify_copy(tp_copy_kind kind);

/* Category of a CUPTI synchronisation record (stream wait, stream or
 * context sync): always TP_CAT_SYNC. */
tp_event_category tp_classify_sync(void);

/* ---- overlap (overlap.c; defined in collectors/README.md, "Definitions") ---- */

typedef struct tp_overlap {
  uint64_t window_ns;       /* win_end - win_start */
  uint64_t comm_ns;         /* |U comm| inside the window */
  uint64_t compute_ns;      /* |U compute| inside the window */
  uint64_t overlap_ns;      /* |U comm  n  U compute| */
  uint64_t exposed_comm_ns; /* comm_ns - overlap_ns */
  double overlap_pct;       /* 100 * overlap / comm; 0 when comm_ns == 0 (check comm_ns) */
  uint64_t sync_ns;         /* |U sync| inside the window: time spent waiting, beside overlap */
  size_t n_comm, n_compute; /* events that contributed (after clipping) */
  size_t n_sync;
} tp_overlap;

/* Overlap of communication and compute for one rank in the window
 * [win_start, win_end). Only events of `rank` count. Communication is every
 * event of category TP_CAT_COMM (kernels and peer copies); compute is every
 * kernel of category gemm, attention, elementwise or other; sync is every
 * event of category TP_CAT_SYNC (barrier/wait/signal kernels and CUPTI sync
 * records), measured on its own and never comm nor compute. Ranges, memsets
 * and local copies count as none of them. Intervals are clipped to the
 * window, unioned per class across streams, and comm is intersected with
 * compute. Events with end <= start contribute nothing. Returns TP_EUSAGE
 * for win_end < win_start or ev == NULL with n > 0, TP_EOOM if scratch
 * memory fails; *out is filled only on TP_OK. */
TP_MUST_CHECK tp_rc tp_overlap_compute(const tp_event *ev, size_t n, int rank, uint64_t win_start,
                                       uint64_t win_end, tp_overlap *out);

/* ---- schedule evidence (evidence.c; collectors/README.md, "Definitions") ---- */

typedef enum { TP_VERDICT_CONFIRMED, TP_VERDICT_MISMATCH } tp_verdict;

typedef struct tp_evidence {
  tp_verdict verdict;
  size_t expected;     /* iterations * transfers_per_iteration */
  size_t peer_copies;  /* memcpy events of kind PtoP */
  size_t dtod_copies;  /* memcpy events of kind DtoD (reported in a mismatch message) */
  size_t copy_kernels; /* tpbench SM copy kernel launches */
  size_t nccl_kernels; /* NCCL kernel launches */
  char message[512];   /* what was expected and what was seen */
} tp_evidence;

/* Says whether the events of one rank's traced window [win_start, win_end)
 * show the schedule that was recorded as run, over the whole window:
 *   "ce"   peer copies == expected, and no SM copy kernel nor NCCL kernel;
 *   "sm"   SM copy kernel launches == expected, and no peer copy nor NCCL kernel;
 *   "nccl" (stock) NCCL kernels == expected, and neither peer copies nor
 *          SM copy kernels.
 * expected = iterations * transfers_per_iteration (both >= 1). Only events
 * that start inside the window are counted. Fills *out in every case where
 * the arguments are valid. Returns TP_OK when the trace confirms the
 * schedule; TP_EINTERNAL with out->message as the error text (also in
 * tp_last_error) on a mismatch; TP_EUSAGE for an unknown schedule, counts
 * < 1, events of more than one rank, or NULL pointers. tp_ops_evidence
 * below judges each op of a configuration inside its own NVTX ranges. */
TP_MUST_CHECK tp_rc tp_schedule_evidence(const tp_event *ev, size_t n, uint64_t win_start,
                                         uint64_t win_end, const char *schedule, int iterations,
                                         int transfers_per_iteration, tp_evidence *out);

/* A verdict that can say it did not look. */
typedef enum { TP_EVIDENCE_OK, TP_EVIDENCE_FAILED, TP_EVIDENCE_NOT_CHECKED } tp_evidence_state;

/* "ok", "failed", "not checked" (the store's words). */
const char *tp_evidence_state_name(tp_evidence_state state);

/* The verdict of several: failed if any failed, else not checked if any was
 * not checked, else ok. */
tp_evidence_state tp_evidence_combine(tp_evidence_state a, tp_evidence_state b);

/* One op of a configuration and what its own NVTX ranges must show. */
typedef struct tp_op_evidence {
  /* in */
  const char *op;           /* for messages: "qkv", "linear_rs" */
  const char *schedule;     /* "ce", "ring" (copy-engine pushes), "sm", "nccl" (stock path) or
                               "none" (the GEMM alone: no transfer at all) */
  const char *range_prefix; /* the op's ranges are the NVTX ranges whose name starts with this */
  const char *range_suffix; /* ... and ends with this ("" or NULL: any ending) */
  /* out */
  tp_evidence_state state;
  size_t ranges;                                  /* the op's ranges in the window */
  size_t peer_copies, copy_kernels, nccl_kernels; /* launched inside those ranges */
  char message[256];                              /* what was expected and seen, or why not */
} tp_op_evidence;

/* Where and what to judge. */
typedef struct tp_evidence_window {
  uint64_t start_ns, end_ns;   /* the collector's window: ranges starting outside are ignored */
  int iterations;              /* traced iterations, >= 1 */
  int transfers_per_iteration; /* of all ops together, each counted by its own schedule */
  const char *not_checked;     /* non-NULL: the trace cannot be judged (iteration markers
                                  missing, records dropped): every op is not checked with
                                  this reason */
  /* 0 on a real host: a copy-engine push is a peer-to-peer copy, nothing
   * else counts. 1 when the ranks share one GPU (TPBENCH_TEST_SHARE_GPU): a
   * push into a peer's memory on the same device is recorded by CUPTI as a
   * device-to-device copy, so there a DtoD copy on push_stream (the group's
   * transfer stream, where only pushes run) counts as a push, and a DtoD
   * copy on any other stream stays a local copy. */
  int shared_device;
  uint32_t push_stream; /* CUPTI stream id; read only when shared_device */
} tp_evidence_window;

/* Judges each op of one rank's traced window inside its own NVTX ranges.
 * Device work belongs to an op when the API call that issued it
 * (tp_event.launch_ns) started inside one of the op's ranges. Per op:
 *   not checked  w->not_checked is set; or no range of the op in the window
 *                (a CUDA graph replay opens none); or a transfer's launch
 *                time is unknown, so it cannot be placed
 *   failed       a forbidden transfer inside its ranges:
 *                  ce/ring  peer copies required; NCCL and SM copy kernels forbidden
 *                  sm       SM copy kernels required; NCCL kernels, peer copies forbidden
 *                  nccl     NCCL kernels required; peer copies, SM copy kernels forbidden
 *                  none     every transfer forbidden
 *                or the required transfers of all ops together (an event in the
 *                ranges of two ops counts once) differ from iterations *
 *                transfers_per_iteration (an op of a stock layer without sequence
 *                parallelism may move nothing in its forward, so the count is judged
 *                over the configuration, and every op that moves data fails with it),
 *                or transfers were launched outside every op's range
 *   ok           otherwise: never by default.
 * *overall is the combination over the ops (not checked when n_ops == 0).
 * Returns TP_OK whatever the verdicts; TP_EUSAGE for NULL pointers, an
 * unknown schedule, iterations < 1, transfers < 0, or events of several
 * ranks. */
TP_MUST_CHECK tp_rc tp_ops_evidence(const tp_event *ev, size_t n, const tp_evidence_window *w,
                                    tp_op_evidence *ops, size_t n_ops, tp_evidence_state *overall);

/* Whether tp_ops_evidence has a rule for schedule: "ce", "ring", "sm", "nccl", "none" (the rows
 * of evidence.c's schedule table judged op by op); 0 for another name or NULL. An op whose
 * schedule has none is reported not checked rather than judged. */
int tp_ops_evidence_knows(const char *schedule);

/* ---- clocks (clock.c) -------------------------------------------------------- */

/* Offset between a tracer's clock and CLOCK_REALTIME:
 *   realtime_ns = tracer_ns - offset_ns, known to +- uncertainty_ns. */
typedef struct tp_clock_offset {
  int64_t offset_ns;
  uint64_t uncertainty_ns; /* half the tightest bracket of realtime reads */
  uint64_t realtime_ns;    /* when it was measured */
} tp_clock_offset;

/* Measures the offset of `read_clock` (a tracer clock in ns) to CLOCK_REALTIME
 * by bracketing `samples` (>= 1) reads between two CLOCK_REALTIME reads and
 * keeping the tightest bracket. Returns TP_EUSAGE for bad arguments, TP_EIO if
 * CLOCK_REALTIME or the tracer clock cannot be read (read_clock returns 0). */
TP_MUST_CHECK tp_rc tp_clock_offset_measure(uint64_t (*read_clock)(void *ctx), void *ctx,
                                            int samples, tp_clock_offset *out);

/* ---- the CUPTI collector (cupti_collector.c, needs TPBENCH_WITH_CUDA) ---------- */

/* The collector is driven from one thread (the worker's): start, windows and
 * stop must not race each other. CUPTI's own threads only touch the buffer
 * queue, which has its own lock. */
typedef struct tp_collector tp_collector;

typedef struct tp_collector_stats {
  uint64_t records;          /* activity records processed since start */
  uint64_t dropped;          /* records CUPTI dropped since start (buffers full) */
  uint64_t dropped_window;   /* ... in the last window */
  uint64_t outside_window;   /* events discarded because they lay outside every window */
  uint64_t unpaired_markers; /* NVTX end markers without a start, and starts never ended */
  uint64_t unknown_records;  /* records of kinds the collector does not convert */
  uint64_t untimed_records;  /* records CUPTI could not time (start = end = 0), skipped */
  size_t buffers;            /* activity buffers handed to CUPTI since start */
  int nvtx_injected;         /* 1 if NVTX ranges reach CUPTI */
  tp_clock_offset clock;     /* CUPTI clock vs CLOCK_REALTIME, measured at start */
} tp_collector_stats;

/* Starts the one collector of this process for `rank`. Call it before the
 * CUDA work of interest and before the first NVTX call of the process (any
 * tp_nvtx_* call): it points NVTX_INJECTION64_PATH at the libcupti already
 * loaded (unless the variable is set), enables CUPTI_ACTIVITY_KIND_MARKER and
 * only then lets NVTX initialise, and verifies that the "tpbench" domain is
 * attached. Registers the activity buffer callbacks and measures the clock
 * offset. Device activity kinds are enabled only inside windows, so untraced
 * iterations pay nothing for them. Returns TP_EUSAGE if a collector is
 * already running or NVTX was used before, TP_ECUPTI on a CUPTI failure (with
 * CUPTI's text), TP_EOOM. */
TP_MUST_CHECK tp_rc tp_collector_start(int rank, tp_collector **out);

/* Opens a traced window: enables CONCURRENT_KERNEL, MEMCPY, MEMCPY2
 * (peer-to-peer), MEMSET and SYNCHRONIZATION and takes the window's start
 * timestamp. Discards nothing and flushes nothing, so it is cheap; still,
 * call it outside timed regions. TP_EUSAGE if a window is already open. */
TP_MUST_CHECK tp_rc tp_collector_window_begin(tp_collector *c);

/* Opens a window that records NVTX ranges only (no device activity, no API
 * records): the baseline of `tpbench profile --overhead`, whose step times
 * are the host durations of the program's step ranges. Closed by
 * tp_collector_window_end like any window. */
TP_MUST_CHECK tp_rc tp_collector_window_begin_ranges(tp_collector *c);

/* The path of the libcupti this process loaded (for NVTX_INJECTION64_PATH
 * in a child). TP_ECUPTI when it cannot be found. */
TP_MUST_CHECK tp_rc tp_collector_cupti_path(char *out, size_t size);

/* The name of the device of the first CUDA context created after a
 * collector started (how a program profiled from outside is told apart),
 * "" when none was. */
void tp_collector_gpu_name(char *buf, size_t cap);

/* Closes the window. The caller must have waited for the window's GPU work
 * (cudaDeviceSynchronize or equivalent) first. Takes the end timestamp,
 * flushes every CUPTI buffer (forced), disables the device kinds, converts
 * the records and returns, sorted by start_ns, the events that intersect the
 * window: kernels, copies, memsets, syncs, and NVTX ranges (paired). Events
 * wholly outside the window (e.g. ranges of untraced iterations) are counted
 * in stats.outside_window and discarded. The array and names belong to the
 * collector: the array is valid until the next window_end or stop, names
 * until stop. Returns TP_ECUPTI when CUPTI dropped records during the window
 * (the trace is incomplete; *events and *n are still set so the caller can
 * store them marked incomplete), or on a CUPTI failure. */
TP_MUST_CHECK tp_rc tp_collector_window_end(tp_collector *c, tp_event **events, size_t *n);

/* The bounds of the last closed window, CUPTI clock. */
void tp_collector_window_bounds(const tp_collector *c, uint64_t *start_ns, uint64_t *end_ns);

/* Counters since start (see tp_collector_stats). */
void tp_collector_get_stats(const tp_collector *c, tp_collector_stats *out);

/* CUPTI's clock now, in ns (the clock of every event). 0 if unavailable. */
uint64_t tp_collector_now(void);

/* Disables every kind, flushes, frees buffers, events and names. Reports
 * (as a warning) records dropped and ranges never closed. NULL is a no-op. */
void tp_collector_stop(tp_collector *c);

/* The CUPTI stream id (tp_event.stream) of a CUDA stream (a cudaStream_t,
 * passed as void * so this header needs no CUDA header): how a caller names
 * one of its streams to the evidence rules. TP_ECUPTI with CUPTI's text. */
TP_MUST_CHECK tp_rc tp_collector_stream_id(void *stream, uint32_t *id);

/* CUPTI's API version as "api N" (cuptiGetVersion), for the run header.
 * TP_ECUPTI with CUPTI's text if it cannot be read. */
TP_MUST_CHECK tp_rc tp_collector_cupti_version(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* TP_COLLECTOR_H */
