/*
 * tp_store_import.c — merging another tpbench database into the store
 * (tp_store_import in tp_store.h): how the results of a Slurm job array, each
 * job with its own database, end up in one file.
 *
 * The source is looked at first through tp_store_probe (read-only, through its
 * -wal when it has one: a foreign or empty file, a newer schema or a schema
 * unlike the migrations' is refused before the store is touched), then
 * ATTACHed read-only, so the whole copy is SQL inside one transaction of the
 * store's connection: either every new run arrives with everything it holds,
 * or nothing does. The source is
 * read so that nothing is left beside it (tp_store_read_mode): a WAL file
 * without -wal is attached immutable, watched by the guard while it is read
 * and checked once more before the commit, since an immutable attachment
 * would not see a writer that started meanwhile. Every statement runs under
 * the guard's time limit, so a hostile source cannot hang the import.
 *
 * A run is the unit of identity. Its uuid (schemas/002_trace.sql) travels
 * with it; a run already in the store is skipped whole, which is what makes a
 * second import of the same file a no-op. One exception: a copy the store
 * holds of a run that was unfinished when imported (no finished_at) is
 * replaced, under its id, when the source's run has grown since (more
 * configurations, or as many and finished): a job array's databases imported
 * while some jobs still ran get the rest of their results on the next import.
 * Rows get new ids here: a temporary
 * table maps each imported configuration's source id to its new id, and the
 * tables below configurations are copied through that map in one statement
 * each. Trace names are matched by text, since string ids differ between
 * files.
 *
 * When a migration adds a column to a copied table, add it to the column
 * lists below: the copy names its columns so a source at an older version
 * (without the newer columns) still imports.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/tp_store_internal.h"

/* The identity a run has, or would have got from migration 002. */
#define RUN_IDENTITY_V1                                                                            \
  "'v1:' || id || ':' || coalesce(commit_sha, '') || '@' || coalesce(host, '') || ':' || "         \
  "started_at"

static const char run_columns[] =
    "commit_sha, dirty, host, gpu_name, gpu_count, driver_version, cuda_version, nccl_version, "
    "cublas_version, cupti_version, command_line, command, warmup_iters, measure_iters, "
    "started_at, finished_at";
/* ... and what migration 003 added to runs */
static const char run_columns_v3[] = "rounds, order_policy, order_seed, test_knobs";
/* ... and 004's system record (its ranks in run_ranks, copied with the run) */
static const char run_columns_v4[] = "launcher, slurm_job_id, slurm_array_job_id, "
                                     "slurm_array_task_id, topology, topology_source, environment";
static const char rank_columns_v4[] = "rank, local_rank, host, gpu_uuid, pci_bus_id, sm_clock_mhz, "
                                      "max_sm_clock_mhz, power_limit_w";

static const char config_columns[] =
    "config_key, case_key, kind, model, layer, proj, backend, schedule, chunks, tp, batch, "
    "seqlen, tokens, m, n, k, n_weights, dtype, sp, pass, graph, save_gathered, status, reason, "
    "recorded_at";
/* ... and what migration 006 added to configs */
static const char config_columns_v6[] = "dp, ac, graph_sizes, rs_sum";
/* ... and 007 */
static const char config_columns_v7[] = "comm_dtype, fsdp_traffic, symm";

/* A table below configs, copied through the id map: its columns besides
 * config_id, and those a later schema version added. */
typedef struct detail_table {
  const char *table, *what;
  int since;            /* the schema version that made the table */
  const char *columns;  /* columns at `since` */
  const char *added_v3; /* columns migration 003 added (NULL: none) */
  const char *added_v6; /* columns migration 006 added (NULL: none) */
  const char *added_v7; /* columns migration 007 added (NULL: none) */
  /* A column migration 003 added and filled from the rows' older columns (NULL: none), and
   * its value as 003's UPDATE computes it: a source before 003 gets it the same way, so a
   * row reads alike whether its source was migrated before the import or not. */
  const char *filled_v3, *filled_v3_value;
} detail_table;

static const detail_table details[] = {
    {"results", "results", 1,
     "n_samples, median_us, p10_us, p90_us, mean_us, min_us, max_us, cv, tokens_per_s, tflops, "
     "flops, bytes_moved, workspace_bytes, peak_mem_bytes, max_abs_err, rel_err, numerics_ref",
     "n_rounds, ci_lo_us, ci_hi_us, rank_skew, host_stall_frac, numerics, numerics_reason, fused",
     "activation_bytes, alloc_peak_bytes", "traffic_bytes", NULL, NULL},
    {"samples", "samples", 1, "rank, iter, time_us", "round, host_us", NULL, NULL, NULL, NULL},
    {"schedules", "schedules", 1, "seq, op, schedule, engine, chunks, reason",
     "evidence, evidence_message", NULL, NULL, NULL, NULL},
    {"overlap", "overlap rows", 2,
     "rank, window, window_start_ns, window_end_ns, comm_ns, compute_ns, overlap_ns, exposed_ns, "
     "overlap_pct",
     "sync_ns", NULL, NULL, NULL, NULL},
    {"traces", "traces", 2,
     "traced_iters, traced_median_us, untraced_median_us, overhead, evidence_ok, "
     "evidence_message, dropped_records, clock_offset_ns, recorded_at",
     "evidence", NULL, NULL, "evidence", "CASE evidence_ok WHEN 1 THEN 'ok' ELSE 'failed' END"},
    {"windows", "round windows", 3, "round, position, median_us", NULL, NULL, NULL, NULL, NULL},
    {"checks", "numerics checks", 3,
     "seq, output, rule, status, elements, nonfinite, differ, rel_err, max_abs_err, tolerance, "
     "reason",
     NULL, NULL, NULL, NULL, NULL},
    {"profiles", "profiles", 5,
     "selector, processes, ranks, windows, exit_status, gpu_name, baseline_method, "
     "baseline_step_us, profiled_step_us, overhead_pct",
     NULL, NULL, NULL, NULL, NULL},
    {"profile_steps", "profile steps", 5,
     "rank, step, name, host_start_ns, host_end_ns, start_ns, end_ns, comm_ns, compute_ns, "
     "sync_ns, other_ns, idle_ns, overlap_ns, exposed_ns, kernels, empty",
     NULL, NULL, NULL, NULL, NULL},
    {"profile_schedules", "profile schedules", 5,
     "rank, range_name, ranges, nccl_kernels, ce_copies, sm_copy_kernels, multicast_kernels, "
     "comm_ns, gemm_ns, transport",
     NULL, NULL, NULL, NULL, NULL},
    {"profile_kernels", "profile kernels", 5, "name, category, count, total_ns", NULL, NULL, NULL,
     NULL, NULL},
    {"drift_steps", "drift steps", 6, "step, loss, grad_norm", NULL, NULL, NULL, NULL, NULL},
};

/* Trace names are matched by text: string ids differ between files. */
static const char copy_strings[] =
    "INSERT OR IGNORE INTO main.strings (text) "
    "SELECT s.text FROM tp_src.strings s WHERE s.id IN "
    "(SELECT e.name_id FROM tp_src.events e JOIN temp.tp_import_map m ON m.old_id = e.config_id) "
    "ORDER BY s.id";

static const char copy_events[] =
    "INSERT INTO main.events (config_id, rank, device, stream, kind, category, name_id, "
    "start_ns, end_ns, bytes, correlation, copy_kind, peer_device) "
    "SELECT m.new_id, e.rank, e.device, e.stream, e.kind, e.category, ms.id, e.start_ns, "
    "e.end_ns, e.bytes, e.correlation, e.copy_kind, e.peer_device "
    "FROM tp_src.events e JOIN temp.tp_import_map m ON m.old_id = e.config_id "
    "JOIN tp_src.strings ss ON ss.id = e.name_id JOIN main.strings ms ON ms.text = ss.text "
    "ORDER BY e.id";

/* ---- helpers -------------------------------------------------------------- */

/* Only this file's SQL goes through here; a failure names what was being
 * prepared (the SQL stays out of messages). */
static tp_rc prepare(tp_store *s, const char *sql, const char *what, sqlite3_stmt **stmt) {
  if (sqlite3_prepare_v2(tp_store_db(s), sql, -1, stmt, NULL) != SQLITE_OK) {
    *stmt = NULL;
    return TP_STORE_SQL_FAIL(s, "import: preparing %s", what);
  }
  return TP_OK;
}

/* Runs a copy statement and adds the rows it wrote to *count (may be NULL). */
static tp_rc copy_rows(tp_store *s, const char *sql, const char *what, int64_t *count) {
  char phrase[96];
  snprintf(phrase, sizeof phrase, "import: copying %s", what);
  TP_TRY(tp_store_exec(s, sql, phrase));
  if (count) *count += sqlite3_changes64(tp_store_db(s));
  return TP_OK;
}

/* Importing a file into itself would find every run present; refusing says
 * so plainly instead. */
static tp_rc check_not_same_file(tp_store *s, const char *src_path) {
  struct stat a, b;
  if (stat(src_path, &a) == 0 && stat(tp_store_path(s), &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return TP_FAIL(TP_EUSAGE, "%s: cannot import a database into itself", src_path);
  return TP_OK;
}

/* ---- attaching the source ------------------------------------------------ */

static tp_rc attach_source(tp_store *s, const char *src_path, tp_read_mode mode) {
  char *uri = tp_store_file_uri(src_path, tp_store_read_query(mode));
  if (!uri) return TP_FAIL(TP_EOOM, "import: out of memory");
  sqlite3_stmt *st = NULL;
  tp_rc rc = prepare(s, "ATTACH DATABASE ? AS tp_src", "to attach the source", &st);
  if (rc == TP_OK) {
    int step = sqlite3_bind_text(st, 1, uri, -1, SQLITE_STATIC);
    step = step == SQLITE_OK ? sqlite3_step(st) : step;
    if (step != SQLITE_DONE)
      rc = TP_FAIL(TP_EIO, "%s: cannot open for import: %s", src_path,
                   sqlite3_errmsg(tp_store_db(s)));
  }
  sqlite3_finalize(st);
  free(uri);
  return rc;
}

static void detach_source(tp_store *s) {
  /* A failed DETACH leaves the attachment until the store closes: harmless. */
  (void)sqlite3_exec(tp_store_db(s), "DETACH DATABASE tp_src", NULL, NULL, NULL);
}

/* What says whether the source changed under an immutable attachment. */
typedef struct {
  struct stat main;
  int has_wal;
} source_stamp;

static tp_rc stamp_source(const char *src_path, source_stamp *stamp) {
  char wal[4096];
  struct stat st;
  if (stat(src_path, &stamp->main) != 0)
    return TP_FAIL(TP_EIO, "%s: cannot read: %s", src_path, strerror(errno));
  stamp->has_wal =
      snprintf(wal, sizeof wal, "%s-wal", src_path) < (int)sizeof wal && stat(wal, &st) == 0;
  return TP_OK;
}

/* A writer that started on the source during the copy shows as a -wal or a
 * changed main file; what was read may then be torn, so nothing is kept. */
static tp_rc check_source_unchanged(const char *src_path, const source_stamp *before) {
  source_stamp now;
  TP_TRY(stamp_source(src_path, &now));
  if (now.has_wal == before->has_wal && now.main.st_ino == before->main.st_ino &&
      now.main.st_size == before->main.st_size &&
      now.main.st_mtim.tv_sec == before->main.st_mtim.tv_sec &&
      now.main.st_mtim.tv_nsec == before->main.st_mtim.tv_nsec)
    return TP_OK;
  return TP_FAIL(TP_EIO,
                 "%s: another program wrote to it while it was being imported; nothing was "
                 "imported, try again when it is done",
                 src_path);
}

/* The source's identity and schema once more, now read inside the
 * transaction and with its -wal in view (the probe looked at the main file
 * only). A source found empty now is refused as the probe refuses one. */
static tp_rc check_source_again(tp_store *s, const char *src_path, int64_t *version) {
  return tp_store_check_identity(tp_store_db(s), "tp_src", src_path, version);
}

/* ---- copying runs and configurations ------------------------------------ */

typedef struct {
  tp_store *store;
  sqlite3_stmt *present;      /* is a uuid in the store? */
  sqlite3_stmt *grown;        /* the store's unfinished copy of a run the source has more of */
  sqlite3_stmt *drop_run;     /* delete one run of the store, with all below it */
  sqlite3_stmt *insert_run;   /* copy one run, giving its uuid (and its id, or NULL: a new one) */
  sqlite3_stmt *insert_ranks; /* its ranks' hosts (schema 4 on); NULL before */
  sqlite3_stmt *list_configs; /* configurations of one source run */
  sqlite3_stmt *insert_config;
  sqlite3_stmt *map;
  tp_import_stats *stats;
} importer;

static tp_rc prepare_importer(importer *im, int64_t version) {
  tp_store *s = im->store;
  char sql[1536], cols[512];
  TP_TRY(prepare(s, "SELECT 1 FROM main.runs WHERE uuid = ?", "the run lookup", &im->present));
  TP_TRY(prepare(s,
                 "SELECT d.id FROM main.runs d JOIN tp_src.runs r ON r.id = ?2 "
                 "CROSS JOIN (SELECT count(*) AS n FROM tp_src.configs WHERE run_id = ?2) src "
                 "WHERE d.uuid = ?1 AND d.finished_at IS NULL AND src.n >= "
                 "(SELECT count(*) FROM main.configs WHERE run_id = d.id) AND "
                 "(r.finished_at IS NOT NULL OR src.n > "
                 "(SELECT count(*) FROM main.configs WHERE run_id = d.id))",
                 "the grown-run lookup", &im->grown));
  TP_TRY(
      prepare(s, "DELETE FROM main.runs WHERE id = ?", "the stale run's removal", &im->drop_run));
  snprintf(cols, sizeof cols, "%s%s%s%s%s", run_columns, version >= 3 ? ", " : "",
           version >= 3 ? run_columns_v3 : "", version >= 4 ? ", " : "",
           version >= 4 ? run_columns_v4 : "");
  snprintf(sql, sizeof sql,
           "INSERT INTO main.runs (id, %s, uuid) SELECT ?3, %s, ?2 FROM tp_src.runs "
           "WHERE id = ?1",
           cols, cols);
  TP_TRY(prepare(s, sql, "the run copy", &im->insert_run));
  if (version >= 4) {
    snprintf(sql, sizeof sql,
             "INSERT INTO main.run_ranks (run_id, %s) SELECT ?2, %s FROM tp_src.run_ranks "
             "WHERE run_id = ?1",
             rank_columns_v4, rank_columns_v4);
    TP_TRY(prepare(s, sql, "the ranks' copy", &im->insert_ranks));
  }
  TP_TRY(prepare(s, "SELECT id FROM tp_src.configs WHERE run_id = ? ORDER BY id",
                 "the configuration list", &im->list_configs));
  snprintf(cols, sizeof cols, "%s%s%s%s%s", config_columns, version >= 6 ? ", " : "",
           version >= 6 ? config_columns_v6 : "", version >= 7 ? ", " : "",
           version >= 7 ? config_columns_v7 : "");
  snprintf(sql, sizeof sql,
           "INSERT INTO main.configs (run_id, %s) SELECT ?2, %s "
           "FROM tp_src.configs WHERE id = ?1",
           cols, cols);
  TP_TRY(prepare(s, sql, "the configuration copy", &im->insert_config));
  return prepare(s, "INSERT INTO temp.tp_import_map (old_id, new_id) VALUES (?, ?)",
                 "the configuration id map", &im->map);
}

static void finalize_importer(importer *im) {
  sqlite3_finalize(im->present);
  sqlite3_finalize(im->grown);
  sqlite3_finalize(im->drop_run);
  sqlite3_finalize(im->insert_run);
  sqlite3_finalize(im->insert_ranks);
  sqlite3_finalize(im->list_configs);
  sqlite3_finalize(im->insert_config);
  sqlite3_finalize(im->map);
}

/* Steps a statement whose parameters are bound (bind_rc: the binds' result). */
static tp_rc step_reset(importer *im, sqlite3_stmt *st, int bind_rc, const char *what) {
  tp_rc rc = TP_OK;
  if (bind_rc != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
    rc = TP_STORE_SQL_FAIL(im->store, "import: %s", what);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc;
}

static tp_rc uuid_present(importer *im, const char *uuid, int *present) {
  int step = sqlite3_bind_text(im->present, 1, uuid, -1, SQLITE_STATIC);
  step = step == SQLITE_OK ? sqlite3_step(im->present) : step;
  sqlite3_reset(im->present);
  if (step != SQLITE_ROW && step != SQLITE_DONE)
    return TP_STORE_SQL_FAIL(im->store, "import: looking up run %s", uuid);
  *present = step == SQLITE_ROW;
  return TP_OK;
}

/* The id of the store's unfinished copy of source run old_run when the source holds more of it
 * (0: none, or nothing to add). */
static tp_rc grown_copy(importer *im, const char *uuid, int64_t old_run, int64_t *stale) {
  int step = sqlite3_bind_text(im->grown, 1, uuid, -1, SQLITE_STATIC);
  step = step == SQLITE_OK ? sqlite3_bind_int64(im->grown, 2, old_run) : step;
  step = step == SQLITE_OK ? sqlite3_step(im->grown) : step;
  *stale = step == SQLITE_ROW ? sqlite3_column_int64(im->grown, 0) : 0;
  sqlite3_reset(im->grown);
  sqlite3_clear_bindings(im->grown);
  if (step != SQLITE_ROW && step != SQLITE_DONE)
    return TP_STORE_SQL_FAIL(im->store, "import: comparing run %s with the store's copy", uuid);
  return TP_OK;
}

static tp_rc copy_config(importer *im, int64_t old_id, int64_t new_run) {
  sqlite3_int64 new_id = 0;
  int b = sqlite3_bind_int64(im->insert_config, 1, old_id);
  b = b ? b : sqlite3_bind_int64(im->insert_config, 2, new_run);
  TP_TRY(step_reset(im, im->insert_config, b, "copying a configuration"));
  new_id = sqlite3_last_insert_rowid(tp_store_db(im->store));
  b = sqlite3_bind_int64(im->map, 1, old_id);
  b = b ? b : sqlite3_bind_int64(im->map, 2, new_id);
  TP_TRY(step_reset(im, im->map, b, "mapping a configuration id"));
  im->stats->configs++;
  return TP_OK;
}

/* Copies source run old_run with everything below it, as run keep_id of the store (0: a new id). */
static tp_rc copy_run(importer *im, int64_t old_run, const char *uuid, int64_t keep_id) {
  int b = sqlite3_bind_int64(im->insert_run, 1, old_run);
  b = b ? b : sqlite3_bind_text(im->insert_run, 2, uuid, -1, SQLITE_STATIC);
  b = b             ? b
      : keep_id > 0 ? sqlite3_bind_int64(im->insert_run, 3, keep_id)
                    : sqlite3_bind_null(im->insert_run, 3);
  TP_TRY(step_reset(im, im->insert_run, b, "copying a run"));
  int64_t new_run = sqlite3_last_insert_rowid(tp_store_db(im->store));
  if (im->insert_ranks) {
    b = sqlite3_bind_int64(im->insert_ranks, 1, old_run);
    b = b ? b : sqlite3_bind_int64(im->insert_ranks, 2, new_run);
    TP_TRY(step_reset(im, im->insert_ranks, b, "copying a run's ranks"));
  }
  /* Collect the ids first: the list statement must not stay open while the
   * same connection inserts. */
  int64_t *ids = NULL;
  size_t n = 0, cap = 0;
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(im->list_configs, 1, old_run);
  while (rc == TP_OK && step == SQLITE_OK &&
         (step = sqlite3_step(im->list_configs)) == SQLITE_ROW) {
    int64_t *grown = tp_grow_array(ids, &cap, n, sizeof *ids);
    if (!grown) {
      rc = TP_FAIL(TP_EOOM, "import: out of memory");
      break;
    }
    ids = grown;
    ids[n++] = sqlite3_column_int64(im->list_configs, 0);
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_STORE_SQL_FAIL(im->store, "import: listing the configurations of run %lld",
                           (long long)old_run);
  sqlite3_reset(im->list_configs);
  for (size_t i = 0; rc == TP_OK && i < n; i++) rc = copy_config(im, ids[i], new_run);
  free(ids);
  return rc;
}

/* A run's identity and id, read from the source before any copy starts. */
typedef struct {
  int64_t id;
  char *uuid;
} source_run;

static void free_runs(source_run *runs, size_t n) {
  for (size_t i = 0; i < n; i++) free(runs[i].uuid);
  free(runs);
}

static tp_rc list_source_runs(tp_store *s, int64_t version, source_run **out, size_t *n) {
  const char *sql = version >= 2 ? "SELECT id, coalesce(uuid, " RUN_IDENTITY_V1
                                   ") FROM tp_src.runs ORDER BY id"
                                 : "SELECT id, " RUN_IDENTITY_V1 " FROM tp_src.runs ORDER BY id";
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(s, sql, "the source's run list", &st));
  source_run *runs = NULL;
  size_t count = 0, cap = 0;
  tp_rc rc = TP_OK;
  int step = SQLITE_OK;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    source_run *grown = tp_grow_array(runs, &cap, count, sizeof *runs);
    if (!grown) {
      rc = TP_FAIL(TP_EOOM, "import: out of memory");
      break;
    }
    runs = grown;
    const char *uuid = (const char *)sqlite3_column_text(st, 1);
    runs[count].id = sqlite3_column_int64(st, 0);
    runs[count].uuid = strdup(uuid ? uuid : "");
    if (!runs[count++].uuid) rc = TP_FAIL(TP_EOOM, "import: out of memory");
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_STORE_SQL_FAIL(s, "import: listing the source's runs");
  sqlite3_finalize(st);
  if (rc != TP_OK) {
    free_runs(runs, count);
    return rc;
  }
  *out = runs;
  *n = count;
  return TP_OK;
}

static tp_rc copy_new_runs(tp_store *s, int64_t version, tp_import_stats *stats) {
  source_run *runs = NULL;
  size_t n = 0;
  TP_TRY(list_source_runs(s, version, &runs, &n));
  importer im = {.store = s, .stats = stats};
  tp_rc rc = prepare_importer(&im, version);
  for (size_t i = 0; rc == TP_OK && i < n; i++) {
    int present = 0;
    int64_t stale = 0;
    stats->runs_seen++;
    rc = uuid_present(&im, runs[i].uuid, &present);
    if (rc == TP_OK && present) rc = grown_copy(&im, runs[i].uuid, runs[i].id, &stale);
    if (rc == TP_OK && stale) {
      /* the cascade takes its configurations, their rows and its ranks */
      rc = step_reset(&im, im.drop_run, sqlite3_bind_int64(im.drop_run, 1, stale),
                      "removing the store's unfinished copy of a run");
      if (rc == TP_OK) rc = copy_run(&im, runs[i].id, runs[i].uuid, stale);
      if (rc == TP_OK) stats->runs_updated++;
    } else if (rc == TP_OK && present) {
      stats->runs_present++;
    } else if (rc == TP_OK) {
      rc = copy_run(&im, runs[i].id, runs[i].uuid, 0);
      if (rc == TP_OK) stats->runs_imported++;
    }
  }
  finalize_importer(&im);
  free_runs(runs, n);
  return rc;
}

/* Copies one table below configs with the columns the source's version has. */
static tp_rc copy_detail(tp_store *s, const detail_table *d, int64_t version, int64_t *count) {
  char cols[1024], sql[3072];
  const int more = version >= 3 && d->added_v3, more6 = version >= 6 && d->added_v6,
            more7 = version >= 7 && d->added_v7;
  snprintf(cols, sizeof cols, "%s%s%s%s%s%s%s", d->columns, more ? ", " : "",
           more ? d->added_v3 : "", more6 ? ", " : "", more6 ? d->added_v6 : "", more7 ? ", " : "",
           more7 ? d->added_v7 : "");
  const int fill = version < 3 && d->filled_v3;
  /* the source's columns need no prefix: the id map's are old_id and new_id */
  snprintf(sql, sizeof sql,
           "INSERT INTO main.%s (config_id, %s%s%s) SELECT m.new_id, %s%s%s FROM tp_src.%s t "
           "JOIN temp.tp_import_map m ON m.old_id = t.config_id",
           d->table, cols, fill ? ", " : "", fill ? d->filled_v3 : "", cols, fill ? ", " : "",
           fill ? d->filled_v3_value : "", d->table);
  return copy_rows(s, sql, d->what, count);
}

/* Everything below configurations, for every configuration copied. */
static tp_rc copy_details(tp_store *s, int64_t version, tp_import_stats *stats) {
  for (size_t i = 0; i < sizeof details / sizeof details[0]; i++) {
    const detail_table *d = &details[i];
    if (version < d->since) continue;
    int64_t *count = !strcmp(d->table, "samples")       ? &stats->samples
                     : !strcmp(d->table, "drift_steps") ? &stats->drift_steps
                                                        : NULL;
    TP_TRY(copy_detail(s, d, version, count));
  }
  if (version < 2) return TP_OK; /* the source has no traces */
  TP_TRY(copy_rows(s, copy_strings, "trace names", NULL));
  return copy_rows(s, copy_events, "trace events", &stats->events);
}

static tp_rc import_attached(tp_store *s, const char *src_path, tp_import_stats *stats) {
  int64_t version = 0;
  TP_TRY(check_source_again(s, src_path, &version));
  if (version == 0) return tp_store_refuse_empty(src_path);
  TP_TRY(tp_store_exec(s,
                       "CREATE TEMP TABLE IF NOT EXISTS tp_import_map "
                       "(old_id INTEGER PRIMARY KEY, new_id INTEGER NOT NULL);"
                       "DELETE FROM temp.tp_import_map",
                       "import: making the table of new configuration ids"));
  TP_TRY(copy_new_runs(s, version, stats));
  if (stats->runs_imported + stats->runs_updated == 0) return TP_OK;
  return copy_details(s, version, stats);
}

/* The import proper, on an attached source and under the time limit. */
static tp_rc import_in_transaction(tp_store *store, const char *src_path, tp_read_mode mode,
                                   const source_stamp *before, tp_import_stats *stats) {
  tp_rc rc = tp_store_exec(store, "BEGIN IMMEDIATE",
                           "import: starting the transaction (is another tpbench writing?)");
  if (rc != TP_OK) return rc;
  rc = import_attached(store, src_path, stats);
  if (rc == TP_OK && mode == TP_READ_IMMUTABLE) rc = check_source_unchanged(src_path, before);
  if (rc == TP_OK) rc = tp_store_exec(store, "COMMIT", "import: committing");
  if (rc != TP_OK) tp_store_rollback(store);
  return rc;
}

/* A database error during the copy, said as the source's when the source is damaged: a file
 * damaged past what tp_store_probe reads (its header, schema and identity) passes the probe and
 * fails only when the copy reaches the damage. That is bad input, as a foreign file is
 * (TP_EFOREIGN); any other error stays as it was. Damaged: SQLite's check of the source finds
 * fault, or the copy's insert refused one of its rows for its values (a CHECK or NOT NULL
 * constraint of the schema it was vetted to have), which that check of a read-only file leaves
 * out (CHECK constraints). */
static tp_rc blame_damaged_source(tp_store *store, const char *src_path, tp_rc rc) {
  char refused[256] = "";
  const int failed = tp_store_take_failure(store, refused, sizeof refused);
  if (rc != TP_ESQLITE) return rc;
  sqlite3 *db = tp_store_db(store);
  sqlite3_stmt *st = NULL;
  char why[320] = "";
  int damaged = 0;
  if (sqlite3_prepare_v2(db, "PRAGMA tp_src.quick_check(1)", -1, &st, NULL) == SQLITE_OK) {
    int step = sqlite3_step(st);
    const unsigned char *text = step == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    int code = sqlite3_errcode(db) & 0xff;
    if (text) damaged = strcmp((const char *)text, "ok") != 0;
    else damaged = code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
    snprintf(why, sizeof why, "SQLite's check: %s", text ? (const char *)text : sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
  /* CHECK and NOT NULL judge the row's own values, which the source and the store's schema
   * share; a trigger's or a key's refusal may be the store's (left as it was) */
  if (!damaged && (failed == SQLITE_CONSTRAINT_CHECK || failed == SQLITE_CONSTRAINT_NOTNULL)) {
    damaged = 1;
    snprintf(why, sizeof why, "a row its schema refuses: %s", refused);
  }
  if (!damaged) return rc;
  for (char *c = why; *c; c++)
    if (*c == '\n') *c = ' '; /* the check's report is lines */
  return TP_FAIL(TP_EFOREIGN, "%s is damaged (%s); not a readable tpbench database", src_path, why);
}

tp_rc tp_store_import(tp_store *store, const char *src_path, tp_import_stats *stats) {
  tp_import_stats local = {0};
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  if (!store || !src_path) return TP_FAIL(TP_EINTERNAL, "tp_store_import: NULL argument");
  (void)tp_store_take_failure(store, NULL, 0); /* an earlier call's, not this import's */
  TP_TRY(tp_store_probe(src_path, NULL));
  TP_TRY(check_not_same_file(store, src_path));
  tp_read_mode mode = tp_store_read_mode(src_path);
  source_stamp before;
  TP_TRY(stamp_source(src_path, &before));
  TP_TRY(attach_source(store, src_path, mode));
  tp_query_limit guard;
  tp_query_limit_start(&guard, tp_store_db(store), src_path, mode == TP_READ_IMMUTABLE);
  tp_rc rc = import_in_transaction(store, src_path, mode, &before, stats);
  rc = blame_damaged_source(store, src_path, rc);
  tp_query_limit_stop(&guard);
  detach_source(store);
  char why[160];
  const char *reason = tp_query_limit_reason(&guard, why, sizeof why);
  if (rc != TP_OK && reason) rc = TP_FAIL(TP_ETIMEOUT, "reading it %s", reason);
  if (rc != TP_OK) {
    rc = TP_STORE_CONTEXT(rc, "nothing imported from %s", src_path);
    memset(stats, 0, sizeof *stats);
  }
  return rc;
}
