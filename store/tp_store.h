/*
 * tp_store.h — tpbench's SQLite database: open and migrate it, write runs and
 * configurations, read results back.
 *
 * The store knows nothing of CUDA: callers hand it plain records (below). A
 * database is tpbench's when its application_id pragma is TP_STORE_APP_ID;
 * its schema version is PRAGMA user_version and the migrations embedded from
 * schemas/NNN_*.sql bring an older file up to date. A file that is not a
 * tpbench database, or carries a newer schema than this binary knows, is
 * refused with TP_EFOREIGN and left untouched.
 *
 * Writes follow one rule: each finished configuration (its axes, status,
 * result, samples and schedule choices) is one transaction, so a run that is
 * interrupted keeps every configuration it finished.
 */
#ifndef TP_STORE_H
#define TP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_STORE_APP_ID 0x54504231 /* "TPB1" */

typedef struct tp_store tp_store;

/* Opens (creating if create != 0 and the file is missing) and migrates.
 *
 * On TP_OK *out is a store with foreign keys on, at schema version
 * tp_store_schema_version(), in WAL mode on a local filesystem and in
 * rollback-journal (DELETE) mode on a shared one (tp_store_journal_for). A path the caller cannot
 * use as asked gives TP_EUSAGE: a missing file with create == 0, a directory, not a regular file, a
 * folder that is missing or not writable, a file without write permission. The system failing while
 * opening (an I/O error) gives TP_EIO. A file that is not a tpbench database (not SQLite, another
 * application_id, tables without tpbench's application_id) or has a newer
 * schema gives TP_EFOREIGN and is left byte-for-byte as it was (no
 * -wal/-shm/-journal files made). An existing empty file (0 bytes, or SQLite
 * without tables) is made a new database. Either way *out is NULL on failure
 * and tp_last_error() names the file. */
TP_MUST_CHECK tp_rc tp_store_open(const char *path, int create, tp_store **out);

/* Opens an existing database for reading only, as report, compare, history,
 * trace and dashboard do: never creates, migrates or changes its journal
 * mode, and leaves no -wal/-shm/-journal file it did not find, even when the
 * reader is killed (SQLite's mode=ro; immutable=1 for a WAL file without
 * -wal, which mode=ro would leave a -wal and -shm beside, so a database in a
 * read-only file or folder or on a full disk is still readable). The schema
 * is checked against the migrations' (a view where tpbench has a table is
 * refused) and every query is guarded: one that runs longer than a limit
 * (5 s plus a second per 4 MiB of the file) or, on an immutable connection,
 * that finds the file changed by a writer fails with SQLITE_INTERRUPT; the
 * store's own readers then return TP_ETIMEOUT saying which.
 *
 * Errors, the file untouched each time: missing, a directory, not a regular
 * file or not readable: TP_EUSAGE (TP_EIO when reading it fails); empty (0
 * bytes or no tables), not tpbench's, a
 * schema version below 0 or above tp_store_schema_version(), or a schema
 * unlike the migrations': TP_EFOREIGN; an older schema version: TP_EUSAGE,
 * naming `tpbench migrate`. Writing through the store fails. */
TP_MUST_CHECK tp_rc tp_store_open_readonly(const char *path, tp_store **out);

/* The journal mode tp_store_open gives a database. */
typedef struct tp_store_journal {
  const char *mode; /* "WAL" or "DELETE" */
  char why[96];     /* "the database is on NFS, a shared filesystem" */
} tp_store_journal;

/* Decides the journal mode from the statfs(2) f_type of the database's
 * folder: DELETE on network, cluster and FUSE filesystems (NFS, SMB/CIFS,
 * Lustre, GPFS, BeeGFS, Ceph, ...), where SQLite's WAL index cannot be
 * shared safely, WAL elsewhere. override (TPBENCH_DB_JOURNAL: "wal" or
 * "delete"; NULL or "" for none) wins over the filesystem. TP_EUSAGE for
 * another override. */
TP_MUST_CHECK tp_rc tp_store_journal_for(uint64_t fs_type, const char *override,
                                         tp_store_journal *out);

/* Closes the store (NULL is fine); the last close checkpoints the WAL. */
void tp_store_close(tp_store *store);

/* Schema version this binary writes (the newest migration's number). */
int tp_store_schema_version(void);

/* Schema version (PRAGMA user_version) of an open store as opened; 0 for
 * NULL. */
int tp_store_version(const tp_store *store);

/* The path the store was opened with, for messages. */
const char *tp_store_path(const tp_store *store);

/* The files SQLite keeps beside a database, by the suffix added to its path. */
enum { TP_STORE_N_SIDE_FILES = 3 };
extern const char *const tp_store_side_suffixes[TP_STORE_N_SIDE_FILES];

/* What describes one invocation of tpbench on one machine. */
typedef struct tp_run_info {
  const char *commit; /* git commit the binary was built from */
  int dirty;          /* 1 if the tree had uncommitted changes */
  const char *host;
  const char *gpu_name;
  int gpu_count;
  const char *driver_version;
  const char *cuda_version; /* runtime version */
  const char *nccl_version;
  const char *cublas_version;
  const char *cupti_version;
  const char *command_line;
  const char *command; /* tpbench subcommand: ops, run, link */
  int warmup_iters;
  int measure_iters;
  int rounds;               /* rounds per case (0: not recorded) */
  const char *order_policy; /* "rotate" or "shuffle" (NULL: not recorded) */
  int64_t order_seed;       /* the shuffle's seed (recorded for "shuffle" only) */
  const char *test_knobs;   /* test-only slowdowns in force, NULL: none */
} tp_run_info;

/* Records a new run (started now, UTC) and returns its id. NULL strings are
 * stored as NULL. */
TP_MUST_CHECK tp_rc tp_store_begin_run(tp_store *store, const tp_run_info *info, int64_t *run_id);

/* One rank of a run as its system record keeps it (schemas/004_system.sql). */
typedef struct tp_rank_host {
  int rank, local_rank;
  const char *host, *gpu_uuid, *pci_bus_id; /* NULL or "": unknown */
  int sm_clock_mhz, max_sm_clock_mhz;       /* 0: unknown */
  double power_limit_w;                     /* 0 or NaN: unknown */
} tp_rank_host;

/* The system a run ran on. Strings may be NULL (unknown, stored NULL). */
typedef struct tp_run_system {
  const char *launcher; /* "tpbench", "torchrun", "Open MPI", "Slurm" */
  const char *slurm_job_id, *slurm_array_job_id, *slurm_array_task_id;
  const char *topology, *topology_source;
  const char *environment; /* NAME=value lines */
  const tp_rank_host *ranks;
  int n_ranks;
} tp_run_system;

/* Records the system of run_id in one transaction: its columns of runs and
 * a row of run_ranks per rank. TP_EUSAGE if there is no such run; two ranks
 * of one number fail the insert (TP_ESQLITE). Nothing is kept on failure. */
TP_MUST_CHECK tp_rc tp_store_put_system(tp_store *store, int64_t run_id, const tp_run_system *sys);

/* Marks the run finished now; TP_EUSAGE if there is no such run. A run left
 * unfinished was interrupted: its configurations are still valid. */
TP_MUST_CHECK tp_rc tp_store_finish_run(tp_store *store, int64_t run_id);

/* The one order of runs in time: by start time, then id (runs imported from
 * other databases get ids in import order, not in the order they ran). Every
 * reader lists runs oldest first by it, and "the latest run" is its last. */
#define TP_STORE_OLDEST_FIRST "started_at, id"
#define TP_STORE_LATEST_FIRST "started_at DESC, id DESC"

/* Resolves which run a reader means: run_id > 0 is that run (TP_EUSAGE if it
 * does not exist, or if commit is given and the run is of another commit);
 * run_id == 0 with a commit prefix is the latest run of that commit
 * (TP_EUSAGE if none, or if the prefix names two commits); run_id == 0
 * without commit is the latest run (TP_EUSAGE if the database has none). */
TP_MUST_CHECK tp_rc tp_store_find_run(tp_store *store, int64_t run_id, const char *commit,
                                      int64_t *out);

/* Every axis of a configuration. Strings may be NULL where an axis does not
 * apply; integers are 0 then. */
typedef struct tp_config_axes {
  const char *kind;  /* "op" (a TP op), "gemm" (GEMM alone), "comm" (collective alone), "layer" */
  const char *model; /* "llama3-8b", ... */
  /* what is timed, an op ("ag_linear", "ag_linear_multi", "linear_rs") or a layer ("attention",
   * "ffn", "block"); stored as the column and key axis "layer" */
  const char *op_or_layer;
  const char *proj;     /* projection: "qkv", "wo", "w13", "w2" */
  const char *backend;  /* "stock" or "dist_gemm"; for kind gemm/comm: "cublaslt" or "nccl" */
  const char *schedule; /* requested: "auto", "ce", "sm", "ring", "multimem", or NULL */
  int chunks;           /* requested chunks per shard, 0 = auto */
  int tp;
  int batch;
  int seqlen;
  int64_t tokens;    /* tokens in the step (global) */
  int64_t m, n, k;   /* the GEMM shape as run by one rank (M rows, N out, K in) */
  const char *dtype; /* "bf16", "fp32" (before n_weights: no padding in the struct) */
  int n_weights;     /* weights sharing one input (2 for w1/w3) */
  int sp;            /* sequence parallelism on */
  const char *pass;  /* "fwd", "bwd", "fwd+bwd" */
  int graph;         /* CUDA graph replay */
  int save_gathered;
  /* Composition (schemas/006_composition.sql); 0 / NULL read as the defaults. */
  int dp;           /* data-parallel degree; 0 or 1: none */
  int fsdp_traffic; /* (007) FSDP's collectives ran beside the layer on the same GPUs; here, not
                       below with 007's other axes, so the struct has no padding */
  const char *ac;   /* "none", "selective", "full"; NULL: "none" */
  const char *graph_sizes; /* mixed-size graph replay: "2048,4096"; NULL: one size */
  const char *rs_sum;      /* dist_gemm's reduce-scatter sum: "epilogue", "nccl"; NULL: none
                              asked for (the epilogue where one runs) */
  /* Transport (schemas/007_transport.sql); 0 / NULL read as the defaults. */
  const char *comm_dtype; /* the gathered fp8 activation's type on the links: "bf16", "fp8";
                             NULL: nothing quantized is gathered */
  const char *symm;       /* dist_gemm's symmetric memory: "ipc", "nccl"; NULL: ipc or none */
} tp_config_axes;

/* Writes the canonical key of a configuration: every axis as name=value in a
 * fixed order, so the same configuration matches across commits. Returns
 * the length written (truncated to cap - 1).
 *
 * Format: "kind=op;model=llama3-8b;...;save_gathered=0", axes in this order:
 * kind, model, layer, proj, backend, schedule, chunks, tp, batch, seqlen,
 * tokens, m, n, k, n_weights, dtype, sp, pass, graph, save_gathered (the
 * struct's order but for dtype, placed there to avoid padding), then dp, ac,
 * graph_sizes and (whole configurations only) rs_sum, then (007) comm_dtype,
 * fsdp_traffic and (whole configurations only) symm, each written only where
 * it differs from its default (dp 1, ac none, no graph sizes, no rs_sum, no
 * comm_dtype, no traffic, symm NULL or "ipc"), so
 * keys made before those axes existed still match; a NULL string is written
 * as empty (NULL and "" match);
 * '\\', ';' and '=' inside a value are escaped with a backslash. The format
 * is stored in databases: axes may be appended, never reordered or renamed. */
size_t tp_config_key(const tp_config_axes *axes, char *buf, size_t cap);

/* The same for the configuration's case: every axis except kind, backend,
 * schedule and chunks. The stock op, each dist_gemm variant, the GEMM alone
 * and the collective alone of one shape share a case key; the report pairs
 * them by it. */
size_t tp_case_key(const tp_config_axes *axes, char *buf, size_t cap);

typedef enum {
  TP_STATUS_OK = 0,
  TP_STATUS_REJECTED,
  TP_STATUS_FAILED,
  TP_STATUS_OOM,
  TP_STATUS_TIMEOUT
} tp_config_status;

/* "ok", "rejected", "failed", "oom", "timeout"; "invalid" for other values. */
const char *tp_status_name(tp_config_status status);

/* Whether a dist_gemm configuration's ops all ran fused schedules. */
typedef enum {
  TP_FUSED_NA = 0,    /* not a dist_gemm configuration, or not known */
  TP_FUSED_ALL,       /* every op ran a fused schedule */
  TP_FUSED_STOCK_PATH /* some op took the stock path (auto's choice, recorded with its reason) */
} tp_fused;

/* Statistics of one configuration's measurement window (times in
 * microseconds, per iteration, the slowest rank of each iteration). */
typedef struct tp_result {
  int n_samples;
  double median_us, p10_us, p90_us, mean_us, min_us, max_us;
  double cv; /* coefficient of variation: stddev / mean */
  double tokens_per_s;
  double tflops;            /* from the configuration's own FLOP count */
  double flops;             /* FLOP per iteration (whole TP group) */
  double bytes_moved;       /* bytes of communication per iteration, per rank */
  int64_t workspace_bytes;  /* symmetric workspace (dist_gemm) or collective buffers (stock) */
  int64_t peak_mem_bytes;   /* rank 0, the driver's reading: device memory in use (total - free)
                               at its most after prepare and each window; counts the context and
                               every configuration of the case */
  double max_abs_err;       /* against the reference (NaN where not checked) */
  double rel_err;           /* ||out - ref|| / ||ref|| */
  const char *numerics_ref; /* what the error is measured against: "stock", "reference" */
  /* From here on recorded only when n_rounds > 0 (stored as NULL otherwise). */
  int n_rounds;              /* rounds the samples came from */
  double ci_lo_us, ci_hi_us; /* 95 % interval of median_us (NaN: not computed) */
  double rank_skew;          /* slowest rank's median / fastest rank's - 1 */
  double host_stall_frac;    /* iterations whose issue on some rank outlasted the GPU time */
  const char *numerics;      /* "ok", "failed", "not checked", "reference"; NULL: not compared */
  const char *numerics_reason;
  tp_fused fused;
  /* From schema 006; 0: not recorded (stored as NULL). */
  int64_t activation_bytes; /* per rank: what the forward leaves for the backward */
  int64_t alloc_peak_bytes; /* rank 0, tpbench's own accounting (bench/gpu/harness.h): the
                               high-water mark over its windows of the case's tensors + its own
                               buffers + its requests of the group's shared buffers (symmetric
                               workspace, scratch, cuBLASLt workspace); NCCL's buffers excluded */
  /* From schema 007; 0: not recorded (stored as NULL). */
  int64_t traffic_bytes; /* per rank and step: bytes of the competing FSDP collectives */
} tp_result;

/* Per-iteration times of one rank. */
typedef struct tp_samples {
  int rank;
  int count;
  const double *time_us;
  const int *round;      /* the round of each iteration; NULL: all of round 0 */
  const double *host_us; /* host time spent issuing each step; NULL: not measured */
} tp_samples;

/* One round of a configuration: its place in the round's order, its median. */
typedef struct tp_window {
  int round;
  int position;
  double median_us;
} tp_window;

/* One compared output judged on its own (schemas/003_trust.sql, checks). */
typedef struct tp_check {
  const char *output;
  const char *rule;   /* "exact", "tolerance", "finite" */
  const char *status; /* "ok", "failed", "not checked" */
  int64_t elements, nonfinite, differ;
  double rel_err, max_abs_err, tolerance; /* NaN where not measured */
  const char *reason;                     /* required unless ok */
} tp_check;

/* Which schedule ran for one op of a configuration, and why. */
typedef struct tp_schedule_choice {
  const char *op;       /* "ag_linear", ... or "ag_linear.dx" for a backward part */
  const char *schedule; /* "ce", "sm", "ring", "nccl" (stock) */
  const char *engine;   /* "copy-engine", "sm-kernel", "nccl" */
  int chunks;
  const char *reason; /* why the heuristic (or the user) chose it */
} tp_schedule_choice;

struct tp_trace_record; /* below, with the traces */

/* One finished configuration, written in one transaction. result, samples
 * and schedules may be NULL/0 for a rejected or failed configuration; trace
 * is NULL unless the configuration was traced. */
/* One training step of a drift configuration (schemas/006_composition.sql). */
typedef struct tp_drift_step {
  int step;
  double loss;      /* after the step's backward, before its update */
  double grad_norm; /* the global gradient norm of that backward */
} tp_drift_step;

typedef struct tp_config_record {
  const tp_config_axes *axes;
  tp_config_status status;
  const char *reason; /* why rejected/failed, NULL when ok */
  const tp_result *result;
  const tp_samples *samples;
  int n_sample_sets;
  const tp_schedule_choice *schedules;
  int n_schedules;
  const tp_window *windows; /* per round; may be NULL */
  int n_windows;
  const tp_check *checks; /* per compared output; may be NULL */
  int n_checks;
  const struct tp_trace_record *trace; /* written as tp_store_put_trace would, same transaction */
  const struct tp_drift_step *drift_steps; /* kind "drift": its training steps; may be NULL */
  int n_drift_steps;
} tp_config_record;

/* Writes one configuration of run run_id in one transaction (BEGIN IMMEDIATE
 * ... COMMIT): the configs row, its results row (when rec->result is set),
 * every sample, every schedule choice and its trace (when rec->trace is
 * set: events, overlap rows, the traces row), or nothing at all. Non-finite
 * doubles (NaN, infinities) are stored as NULL. An ok status needs a result,
 * any other status needs a reason. config_id (may be NULL) receives the new
 * row's id. Errors: TP_EINTERNAL for a malformed record, TP_ESQLITE for a
 * database error or a violated constraint (the transaction is rolled back). */
TP_MUST_CHECK tp_rc tp_store_put_config(tp_store *store, int64_t run_id,
                                        const tp_config_record *rec, int64_t *config_id);

/* Underlying handle for modules that read (report/). */
struct sqlite3 *tp_store_db(tp_store *store);

/* ---- traces (schemas/002_trace.sql; store/tp_store_trace.c) --------------
 *
 * The store takes trace records by name (kind, category, copy kind), so it
 * needs no collector header: collectors/' tp_event_type_name,
 * tp_category_name and tp_copy_kind_name give the names, and the fields
 * below mirror tp_event one for one (`kind` holds its type). */

#define TP_TRACE_NO_STREAM UINT32_MAX /* stream of an event on no stream */

/* One activity record of a traced window. */
typedef struct tp_trace_event {
  const char *name;          /* kernel, copy label or NVTX range; never NULL */
  const char *kind;          /* "kernel", "memcpy", "memset", "sync", "range" */
  const char *category;      /* "comm", "sync", "gemm", "attention", "elementwise", "other",
                                "range" */
  const char *copy_kind;     /* "HtoD", "DtoD", "PtoP", ...; NULL or "none": not a copy */
  uint64_t start_ns, end_ns; /* [start, end), tracer clock; end >= start, both < 2^63 */
  uint64_t bytes;            /* copies and memsets; 0 otherwise */
  int rank;
  int device;      /* CUDA device ordinal; -1 for host-side events (ranges) */
  uint32_t stream; /* CUPTI stream id, or TP_TRACE_NO_STREAM */
  uint32_t correlation;
  int peer_device; /* the other device of a peer copy; -1 otherwise */
} tp_trace_event;

/* Communication against compute for one rank in one iteration window
 * (collectors/' tp_overlap). */
typedef struct tp_trace_overlap {
  int rank;
  int window; /* 0, 1, ...: the traced iterations in order */
  uint64_t window_start_ns, window_end_ns;
  uint64_t comm_ns, compute_ns, overlap_ns, exposed_ns; /* exposed = comm - overlap */
  double overlap_pct; /* 100 * overlap / comm; stored as NULL when comm_ns == 0 */
  uint64_t sync_ns;   /* |U sync| (barriers, waits, signals, stream waits): beside overlap,
                         never in comm (0 on rows written before schemas/003) */
} tp_trace_overlap;

/* The schedule evidence of one op of the configuration: its schedules row
 * (seq, the order in tp_config_record.schedules) gets evidence and message. */
typedef struct tp_trace_op_evidence {
  int seq;
  const char *evidence; /* "ok", "failed", "not checked" */
  const char *message;  /* what was expected and seen, or why not checked; required unless ok */
} tp_trace_op_evidence;

/* Everything traced for one configuration, every rank. */
typedef struct tp_trace_record {
  const tp_trace_event *events;
  size_t n_events;
  const tp_trace_overlap *overlap;
  size_t n_overlap;
  int traced_iters;             /* iterations inside the traced window */
  double traced_median_us;      /* median iteration time while tracing (NaN: unknown) */
  double untraced_median_us;    /* the measurement window's median (NaN: unknown) */
  int evidence_ok;              /* 1: the trace shows the schedule recorded as run */
  const char *evidence_message; /* what was expected and seen; required unless evidence is ok */
  uint64_t dropped_records;     /* records the tracer lost in the window */
  int64_t clock_offset_ns;      /* tracer clock - CLOCK_REALTIME, rank 0 */
  /* Evidence in three states (schemas/003): "ok", "failed" (an op failed) or
   * "not checked" (no op failed, one could not be checked). When set it
   * decides, and traces.evidence_ok is stored as 1 only for "ok"; NULL keeps
   * the two states of evidence_ok. */
  const char *evidence;
  const tp_trace_op_evidence *op_evidence; /* per op; may be NULL/0 */
  size_t n_op_evidence;
} tp_trace_record;

/* Writes the trace of a configuration already stored (tp_store_put_config
 * with rec->trace does the same for one being stored), in one transaction
 * (BEGIN IMMEDIATE ... COMMIT): every event (names interned in the strings table),
 * every overlap row and the traces row, whose overhead is
 * traced_median_us / untraced_median_us - 1 (NULL unless both are finite and
 * untraced > 0); or nothing at all. A configuration has at most one trace: a
 * second call for it fails and writes nothing. Errors: TP_EINTERNAL for a
 * malformed record (NULL name, unknown kind or category, end < start, times
 * at or past 2^63, exposed != comm - overlap, an evidence other than ok
 * without its message, an unknown evidence word, an op's evidence for a
 * schedules row the configuration does not have); TP_ESQLITE for a database
 * error or a violated constraint (no such configuration, a second trace);
 * the transaction is rolled back. Per-op evidence goes into the
 * configuration's schedules rows (evidence, evidence_message). */
TP_MUST_CHECK tp_rc tp_store_put_trace(tp_store *store, int64_t config_id,
                                       const tp_trace_record *rec);

/* The traces row of a configuration and a summary of its overlap rows. */
typedef struct tp_trace_info {
  int64_t config_id;
  int traced_iters;
  double traced_median_us, untraced_median_us, overhead; /* NaN where NULL */
  int evidence_ok;
  char evidence[16]; /* "ok", "failed", "not checked" (before schemas/003: from evidence_ok) */
  char evidence_message[512]; /* "" when none; truncated if longer */
  uint64_t dropped_records;
  int64_t clock_offset_ns;
  int64_t n_events;
  int n_ranks;               /* ranks with events */
  int n_windows;             /* overlap rows (all ranks and windows) */
  double overlap_pct_median; /* median over the rows with comm > 0; NaN if none */
  double exposed_ns_median;  /* median exposed communication over all rows; NaN if none */
  double comm_ns_median;     /* median communication over all rows; NaN if none */
  double sync_ns_median;     /* median synchronisation over the rows that recorded it; NaN if
                                none (traces before schemas/003 counted it as communication) */
} tp_trace_info;

/* Reads the trace summary of config_id: *found = 1 and *out filled when the
 * configuration has a traces row, *found = 0 (and *out zeroed) when it has
 * none or does not exist. TP_ESQLITE on a database error. */
TP_MUST_CHECK tp_rc tp_store_trace_info(tp_store *store, int64_t config_id, int *found,
                                        tp_trace_info *out);

/* What the database can say about a configuration that has no trace: its
 * run, whether that run's command line asked for tracing (a " --trace"
 * word), and how many of the run's configurations hold a trace. A run made
 * with --trace whose configuration has none was trimmed or merged (the
 * sample database keeps some traces only), not run without tracing. */
typedef struct tp_trace_absence {
  int64_t run_id;
  int run_asked_trace;
  int64_t traced_in_run;
} tp_trace_absence;

/* Fills *out for config_id (which must exist: TP_EUSAGE otherwise);
 * TP_ESQLITE on a database error. */
TP_MUST_CHECK tp_rc tp_store_trace_absence(tp_store *store, int64_t config_id,
                                           tp_trace_absence *out);

/* Calls fn(ctx, ev) for every event of config_id, ordered by rank, then
 * start time, then id. ev and its strings are valid during the call only.
 * A non-TP_OK return from fn stops the walk and is returned. */
typedef tp_rc (*tp_trace_event_fn)(void *ctx, const tp_trace_event *ev);
TP_MUST_CHECK tp_rc tp_store_each_trace_event(tp_store *store, int64_t config_id,
                                              tp_trace_event_fn fn, void *ctx);

/* The overlap rows of config_id ordered by rank and window, in a malloc'd
 * array (*rows NULL when *n is 0; free() it). overlap_pct is NaN where NULL. */
TP_MUST_CHECK tp_rc tp_store_trace_overlap(tp_store *store, int64_t config_id,
                                           tp_trace_overlap **rows, size_t *n);

/* ---- reading configurations (store/tp_store_trace.c) -------------------- */

/* Resolves which configuration a reader means. config_id > 0: that one
 * (TP_EUSAGE if it does not exist). Otherwise key (a canonical config key,
 * tp_config_key): the latest configuration with that key, within run run_id
 * when run_id > 0, preferring one that has a trace when prefer_traced is set;
 * TP_EUSAGE when no configuration has that key (in that run). Neither id nor
 * key: TP_EUSAGE. */
TP_MUST_CHECK tp_rc tp_store_find_config(tp_store *store, int64_t config_id, const char *key,
                                         int64_t run_id, int prefer_traced, int64_t *out);

/* The per-iteration times of config_id as the statistics use them: for each
 * iteration, the slowest rank's time (iterations where no rank has a time are
 * left out), in iteration order, in a malloc'd array (*times NULL when *n is
 * 0; free() it). */
TP_MUST_CHECK tp_rc tp_store_iteration_times(tp_store *store, int64_t config_id, double **times,
                                             size_t *n);

/* The same, with each iteration's round (schema 3: samples.round; 0 for runs
 * measured in one window) in a malloc'd array parallel to *times (rounds may
 * be NULL when not wanted; free() it). */
TP_MUST_CHECK tp_rc tp_store_round_times(tp_store *store, int64_t config_id, double **times,
                                         int **rounds, size_t *n);

/* ---- merging databases (store/tp_store_import.c) ------------------------ */

/* TP_OK when path is a tpbench database this binary can read (any schema
 * version from 1 up to tp_store_schema_version()); TP_EUSAGE when it is
 * missing, a directory, not a regular file or not readable, TP_EIO when
 * reading it fails, TP_EFOREIGN when it is empty (0 bytes, or SQLite without
 * tables: tpbench never wrote it), not tpbench's, has a newer or a negative
 * schema version, or a schema unlike the one the migrations make (a view
 * where tpbench has a table, a changed view, a trigger of its own).
 * Reads through an immutable connection: the file is never changed and no
 * -wal/-shm/-journal file is made. *version (may be NULL) receives the
 * file's schema version. */
TP_MUST_CHECK tp_rc tp_store_probe(const char *path, int *version);

/* What an import did. */
typedef struct tp_import_stats {
  int runs_seen;     /* runs in the source */
  int runs_imported; /* ... copied into the store */
  int runs_present;  /* ... already in the store (same uuid): skipped */
  int runs_updated;  /* ... in the store unfinished, grown in the source: replaced */
  int64_t configs, samples, events;
  int64_t drift_steps; /* rows of drift_steps copied (schema 006) */
} tp_import_stats;

/* Copies every run of the tpbench database at src_path that the store does
 * not hold yet, with its configurations, results, samples, schedules and
 * traces (events, strings, overlap), in one transaction: all or nothing.
 * Runs are matched by runs.uuid (for a source still at schema version 1, by
 * the label migration 002 would give them), so importing the same file again
 * adds nothing; a run the store holds unfinished (finished_at NULL) is replaced
 * under its id when the source's copy has grown (more configurations, or as
 * many and finished). Rows get new ids in the store; everything else is copied as
 * is. The source is opened read-only and never changed.
 *
 * Nothing is left beside the source (see tp_store_open_readonly), and every
 * statement runs under the same time limit.
 *
 * Errors: TP_EFOREIGN when the source is not a tpbench database (an empty
 * one included), has a newer schema or fails tp_store_probe's schema check
 * (checked before anything is written: the store is untouched), or when a
 * database error of the copy comes with the source failing SQLite's
 * quick_check or is a CHECK or NOT NULL constraint refusing one of its rows
 * (damaged past what the probe reads); TP_EUSAGE
 * when it is missing or not readable (as tp_store_probe says) or is the
 * store's own file; TP_EIO when reading it fails or another program wrote
 * to it during the import; TP_ETIMEOUT when reading it ran past the time
 * limit;
 * TP_ESQLITE on a database error. Every error rolls back. stats may be NULL. */
TP_MUST_CHECK tp_rc tp_store_import(tp_store *store, const char *src_path, tp_import_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* TP_STORE_H */
