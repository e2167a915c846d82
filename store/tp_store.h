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

#include "../common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_STORE_APP_ID 0x54504231 /* "TPB1" */

typedef struct tp_store tp_store;

/* Opens (creating if create != 0 and the file is missing) and migrates.
 *
 * On TP_OK *out is a store in WAL mode with foreign keys on, at schema
 * version tp_store_schema_version(). A missing file with create == 0, a
 * directory, or a path that cannot be created or written gives TP_EIO; a file
 * that is not a tpbench database (not SQLite, another application_id, tables
 * without tpbench's application_id) or has a newer schema gives TP_EFOREIGN
 * and is left byte-for-byte as it was (no -wal/-shm/-journal files made).
 * Either way *out is NULL on failure and tp_last_error() names the file. */
tp_rc tp_store_open(const char *path, int create, tp_store **out);

/* Closes the store (NULL is fine); the last close checkpoints the WAL. */
void tp_store_close(tp_store *store);

/* Schema version this binary writes, and the version of an open store. */
int tp_store_schema_version(void);
int tp_store_version(const tp_store *store);

/* The path the store was opened with, for messages. */
const char *tp_store_path(const tp_store *store);

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
} tp_run_info;

/* Records a new run (started now, UTC) and returns its id. NULL strings are
 * stored as NULL. */
tp_rc tp_store_begin_run(tp_store *store, const tp_run_info *info, int64_t *run_id);

/* Marks the run finished now; TP_EUSAGE if there is no such run. A run left
 * unfinished was interrupted: its configurations are still valid. */
tp_rc tp_store_finish_run(tp_store *store, int64_t run_id);

/* Resolves which run a reader means: run_id > 0 is that run (TP_EUSAGE if it
 * does not exist, or if commit is given and the run is of another commit);
 * run_id == 0 with a commit prefix is the latest run of that commit
 * (TP_EUSAGE if none, or if the prefix names two commits); run_id == 0
 * without commit is the latest run (TP_EUSAGE if the database has none). */
tp_rc tp_store_find_run(tp_store *store, int64_t run_id, const char *commit, int64_t *out);

/* Every axis of a configuration. Strings may be NULL where an axis does not
 * apply; integers are 0 then. */
typedef struct tp_config_axes {
  const char *kind;  /* "op" (a TP op), "gemm" (GEMM alone), "comm" (collective alone), "layer" */
  const char *model; /* "llama3-8b", ... */
  const char
      *layer;       /* op or layer: "ag_linear", "ag_linear_multi", "linear_rs", "attention", ... */
  const char *proj; /* projection: "qkv", "wo", "w13", "w2" */
  const char *backend;  /* "stock" or "dist_gemm"; for kind gemm/comm: "cublaslt" or "nccl" */
  const char *schedule; /* requested: "auto", "ce", "sm", "ring", "multimem", or NULL */
  int chunks;           /* requested chunks per shard, 0 = auto */
  int tp;
  int batch;
  int seqlen;
  int64_t tokens;    /* tokens in the step (global) */
  int64_t m, n, k;   /* the GEMM shape as run by one rank (M rows, N out, K in) */
  int n_weights;     /* weights sharing one input (2 for w1/w3) */
  const char *dtype; /* "bf16", "fp32" */
  int sp;            /* sequence parallelism on */
  const char *pass;  /* "fwd", "bwd", "fwd+bwd" */
  int graph;         /* CUDA graph replay */
  int save_gathered;
} tp_config_axes;

/* Writes the canonical key of a configuration: every axis as name=value in a
 * fixed order, so the same configuration matches across commits. Returns
 * the length written (truncated to cap - 1).
 *
 * Format: "kind=op;model=llama3-8b;...;save_gathered=0", axes in the order of
 * tp_config_axes; a NULL string is written as empty (NULL and "" match);
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
  int64_t peak_mem_bytes;   /* device memory in use at the peak, rank 0 */
  double max_abs_err;       /* against the reference (NaN where not checked) */
  double rel_err;           /* ||out - ref|| / ||ref|| */
  const char *numerics_ref; /* what the error is measured against: "stock", "reference" */
} tp_result;

/* Per-iteration times of one rank. */
typedef struct tp_samples {
  int rank;
  int count;
  const double *time_us;
} tp_samples;

/* Which schedule ran for one op of a configuration, and why. */
typedef struct tp_schedule_choice {
  const char *op;       /* "ag_linear", ... or "ag_linear.dx" for a backward part */
  const char *schedule; /* "ce", "sm", "ring", "nccl" (stock) */
  const char *engine;   /* "copy-engine", "sm-kernel", "nccl" */
  int chunks;
  const char *reason; /* why the heuristic (or the user) chose it */
} tp_schedule_choice;

/* One finished configuration, written in one transaction. result, samples
 * and schedules may be NULL/0 for a rejected or failed configuration. */
typedef struct tp_config_record {
  const tp_config_axes *axes;
  tp_config_status status;
  const char *reason; /* why rejected/failed, NULL when ok */
  const tp_result *result;
  const tp_samples *samples;
  int n_sample_sets;
  const tp_schedule_choice *schedules;
  int n_schedules;
} tp_config_record;

/* Writes one configuration of run run_id in one transaction (BEGIN IMMEDIATE
 * ... COMMIT): the configs row, its results row (when rec->result is set),
 * every sample and every schedule choice, or nothing at all. Non-finite
 * doubles (NaN, infinities) are stored as NULL. An ok status needs a result,
 * any other status needs a reason. config_id (may be NULL) receives the new
 * row's id. Errors: TP_EINTERNAL for a malformed record, TP_ESQLITE for a
 * database error or a violated constraint (the transaction is rolled back). */
tp_rc tp_store_put_config(tp_store *store, int64_t run_id, const tp_config_record *rec,
                          int64_t *config_id);

/* Underlying handle for modules that read (report/). */
struct sqlite3 *tp_store_db(tp_store *store);

#ifdef __cplusplus
}
#endif

#endif /* TP_STORE_H */
