/*
 * tp_report.c — the throughput table (see tp_report.h): reads one run of a
 * tpbench database, pairs every dist_gemm op with its case's stock op, GEMM
 * alone and collective alone, derives speedup and bound, and writes markdown,
 * CSV or JSON.
 *
 * The work is split in three passes so every format shows the same numbers:
 * load (SQL: the throughput_rows view of schemas/001_init.sql, extended to
 * the layers of `tpbench run` (ROWS_SQL), names the
 * configurations of each row, one query per configuration fills it in),
 * derive (plain arithmetic on what was loaded, NaN where an input is
 * missing), render (one writer per format; none of them computes anything).
 */
#include "report/tp_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <sqlite3.h>

#include "common/tp_bootstrap.h"
#include "report/tp_report_util.h"
#include "report/tp_system_report.h"

/* ---- what is loaded ----------------------------------------------------- */

/* One configuration as the table needs it; present == 0 when the case has
 * no such configuration. Doubles are NaN where the database holds NULL. */
typedef struct {
  int present;
  int64_t id;
  char *kind, *backend, *model, *layer, *proj, *schedule, *dtype, *pass, *status, *reason;
  char *numerics_ref, *config_key;
  char *ran; /* schedules that ran, "ce x4+sm x2"; NULL when none recorded */
  int64_t chunks, tp, batch, seqlen, tokens, m, n, k, n_weights, sp, graph, save_gathered;
  int has_result;
  double median_us, cv, tokens_per_s, tflops, workspace_bytes, rel_err;
  double bytes_moved; /* bytes one rank sends per iteration (results.bytes_moved) */
  double rank_skew;   /* slowest rank's median / fastest's - 1 (NaN: not recorded) */
  double host_stall;  /* share of iterations a rank's host issued slower than the GPU ran */
  int has_trace;      /* a traces row (schemas/002_trace.sql): trace below is filled */
  tp_trace_info trace;
} config;

/* One row of the table, with everything derived from its configurations. */
typedef struct {
  config dist, stock, gemm, comm;
  double stock_ms, dist_ms, speedup, gemm_ms, comm_ms, bound_ms, dist_over_bound;
  /* 95 % intervals, rounds paired (common/tp_bootstrap.h): the speedup, and
   * dist/bound against the reference that binds (the slower half); NaN
   * where a side has no samples. */
  double speedup_lo, speedup_hi, bound_lo, bound_hi;
  int stock_path; /* dist_gemm took the stock path for some op (auto's choice): no fusion measured
                   */
  /* The stricter bound: max(GEMM alone, this rank's bytes at the peak copy-engine
   * bandwidth the link probe measured on this host); NaN without a probe. */
  double strict_bound_ms, dist_over_strict;
  double workspace_mib, cv_pct;
  /* From the dist_gemm configuration's trace; NaN where it has none. */
  double overlap_pct, exposed_ms, overhead_pct;
  double sync_ms;      /* median time in barriers, waits and signals per window, beside overlap */
  char evidence[1100]; /* "ok", "failed: ...", "not checked: ...", "not traced"; then
                          "; stock: ..." when the stock op's trace is not ok; "" without a trace */
  int both_ok;         /* stock and dist_gemm both ran: the row counts in the summary */
  const char *status;  /* dist_gemm's status, or "missing" */
  char *note;          /* why something is blank or did not run; NULL when nothing to say */
} table_row;

typedef struct {
  int64_t id;
  char *commit, *host, *gpu_name, *driver, *cuda, *nccl, *cublas, *cupti;
  char *command_line, *command, *started_at, *finished_at;
  char *uuid; /* the run's identity across databases (tpbench import) */
  char *system_md; /* the header's system block (report/tp_system_report.h); NULL: none */
  int64_t dirty, gpu_count, warmup_iters, measure_iters; /* -1 where unknown */
} run_header;

typedef struct {
  int rows;               /* rows where stock and dist_gemm both ran and dist_gemm fused */
  double geomean_speedup; /* over those rows */
  int same_rows;          /* of those, rows whose speedup interval holds 1 */
  int stock_path_rows;    /* rows where dist_gemm took the stock path: counted apart */
  double stock_path_geomean;
  int failed_rows, other_rows;    /* dist_gemm failed (failed, oom, timeout); rejected or missing */
  double worst_skew, worst_stall; /* over the stock and dist_gemm configurations of the rows */
  int bound_rows;                 /* of those, rows with a bound */
  double median_dist_bound;       /* median of dist/bound over bound_rows */
  double worst_dist_bound;        /* largest dist/bound */
  int strict_rows;                /* rows with a strict bound */
  double median_dist_strict, worst_dist_strict;
} summary;

typedef struct {
  const tp_report_filter *filter;
  run_header run;
  table_row *rows;
  size_t n_rows, rows_cap;
  config *skipped; /* configurations of the run that did not run, with reasons */
  size_t n_skipped, skipped_cap;
  summary sum;
  int any_trace; /* a row has a trace: markdown shows the trace columns */
  double
      peer_peak_gbps; /* peak copy-engine push of `tpbench link` on the run's host; NaN if none */
} report;

/* ---- loading ------------------------------------------------------------ */

typedef struct {
  sqlite3 *db;
  const char *path;
  sqlite3_stmt *config_stmt;
  sqlite3_stmt *schedule_stmt;
  tp_store *store;
} reader;

#define READ_FAIL(r, what)                                                                         \
  TP_FAIL(TP_ESQLITE, "%s: %s: %s", (r)->path, (what), sqlite3_errmsg((r)->db))

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "report: out of memory"); }

static tp_rc dup_column(sqlite3_stmt *stmt, int col, char **out) {
  const unsigned char *text = sqlite3_column_text(stmt, col);
  *out = NULL;
  if (!text) return TP_OK;
  *out = strdup((const char *)text);
  return *out ? TP_OK : out_of_memory();
}

static double real_column(sqlite3_stmt *stmt, int col) {
  return sqlite3_column_type(stmt, col) == SQLITE_NULL ? NAN : sqlite3_column_double(stmt, col);
}

static int64_t int_column(sqlite3_stmt *stmt, int col, int64_t if_null) {
  return sqlite3_column_type(stmt, col) == SQLITE_NULL ? if_null : sqlite3_column_int64(stmt, col);
}

static tp_rc prepare(reader *r, const char *sql, sqlite3_stmt **stmt) {
  if (sqlite3_prepare_v2(r->db, sql, -1, stmt, NULL) != SQLITE_OK) {
    *stmt = NULL;
    return READ_FAIL(r, "preparing a report query");
  }
  return TP_OK;
}

static void free_config(config *c) {
  char **strings[] = {&c->kind,         &c->backend,    &c->model, &c->layer,  &c->proj,
                      &c->schedule,     &c->dtype,      &c->pass,  &c->status, &c->reason,
                      &c->numerics_ref, &c->config_key, &c->ran};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) free(*strings[i]);
  memset(c, 0, sizeof *c);
}

/* Column order of config_stmt. */
enum {
  C_ID,
  C_KIND,
  C_BACKEND,
  C_MODEL,
  C_LAYER,
  C_PROJ,
  C_SCHEDULE,
  C_CHUNKS,
  C_TP,
  C_BATCH,
  C_SEQLEN,
  C_TOKENS,
  C_M,
  C_N,
  C_K,
  C_NW,
  C_DTYPE,
  C_SP,
  C_PASS,
  C_GRAPH,
  C_SAVE,
  C_STATUS,
  C_REASON,
  C_KEY,
  C_HAS_RESULT,
  C_MEDIAN,
  C_CV,
  C_TOKS,
  C_TFLOPS,
  C_WS,
  C_REL_ERR,
  C_REF,
  C_BYTES,
  C_SKEW,
  C_STALL
};

static const char config_sql[] =
    "SELECT config_id, kind, backend, model, layer, proj, schedule, chunks, tp, batch, seqlen, "
    "tokens, m, n, k, n_weights, dtype, sp, pass, graph, save_gathered, status, reason, "
    "config_key, has_result, median_us, cv, tokens_per_s, tflops, workspace_bytes, rel_err, "
    "numerics_ref, (SELECT bytes_moved FROM results WHERE results.config_id = "
    "config_results.config_id), rank_skew, host_stall_frac FROM config_results "
    "WHERE config_id = ?";

static tp_rc fill_config_strings(sqlite3_stmt *s, config *c) {
  struct {
    int col;
    char **dst;
  } texts[] = {{C_KIND, &c->kind},     {C_BACKEND, &c->backend}, {C_MODEL, &c->model},
               {C_LAYER, &c->layer},   {C_PROJ, &c->proj},       {C_SCHEDULE, &c->schedule},
               {C_DTYPE, &c->dtype},   {C_PASS, &c->pass},       {C_STATUS, &c->status},
               {C_REASON, &c->reason}, {C_KEY, &c->config_key},  {C_REF, &c->numerics_ref}};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    TP_TRY(dup_column(s, texts[i].col, texts[i].dst));
  return TP_OK;
}

static void fill_config_numbers(sqlite3_stmt *s, config *c) {
  c->id = sqlite3_column_int64(s, C_ID);
  c->chunks = int_column(s, C_CHUNKS, 0);
  c->tp = int_column(s, C_TP, 0);
  c->batch = int_column(s, C_BATCH, 0);
  c->seqlen = int_column(s, C_SEQLEN, 0);
  c->tokens = int_column(s, C_TOKENS, 0);
  c->m = int_column(s, C_M, 0);
  c->n = int_column(s, C_N, 0);
  c->k = int_column(s, C_K, 0);
  c->n_weights = int_column(s, C_NW, 0);
  c->sp = int_column(s, C_SP, 0);
  c->graph = int_column(s, C_GRAPH, 0);
  c->save_gathered = int_column(s, C_SAVE, 0);
  c->has_result = int_column(s, C_HAS_RESULT, 0) != 0;
  c->median_us = real_column(s, C_MEDIAN);
  c->cv = real_column(s, C_CV);
  c->tokens_per_s = real_column(s, C_TOKS);
  c->tflops = real_column(s, C_TFLOPS);
  c->workspace_bytes = real_column(s, C_WS);
  c->rel_err = real_column(s, C_REL_ERR);
  c->bytes_moved = real_column(s, C_BYTES);
  c->rank_skew = real_column(s, C_SKEW);
  c->host_stall = real_column(s, C_STALL);
}

/* "ce x4+sm x2": what ran for each op, in op order. */
static tp_rc load_schedules_ran(reader *r, config *c) {
  sqlite3_stmt *s = r->schedule_stmt;
  tp_rc rc = TP_OK;
  size_t len = 0;
  if (sqlite3_bind_int64(s, 1, c->id) != SQLITE_OK) rc = READ_FAIL(r, "binding a config id");
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(s)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(s, 0);
    int64_t chunks = sqlite3_column_int64(s, 1);
    char label[128];
    int n = chunks > 0 ? snprintf(label, sizeof label, "%s%s x%lld", len ? "+" : "",
                                  name ? name : "?", (long long)chunks)
                       : snprintf(label, sizeof label, "%s%s", len ? "+" : "", name ? name : "?");
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof label) n = sizeof label - 1;
    char *grown = realloc(c->ran, len + (size_t)n + 1);
    if (!grown) {
      rc = out_of_memory();
      break;
    }
    memcpy(grown + len, label, (size_t)n + 1);
    c->ran = grown;
    len += (size_t)n;
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = READ_FAIL(r, "reading schedules");
  sqlite3_reset(s);
  return rc;
}

/* Fills c from configuration id; id 0 (SQL NULL) leaves it absent. */
static tp_rc load_config(reader *r, int64_t id, config *c) {
  memset(c, 0, sizeof *c);
  if (id == 0) return TP_OK;
  sqlite3_stmt *s = r->config_stmt;
  tp_rc rc = TP_OK;
  if (sqlite3_bind_int64(s, 1, id) != SQLITE_OK) {
    rc = READ_FAIL(r, "binding a config id");
  } else {
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW) {
      c->present = 1;
      fill_config_numbers(s, c);
      rc = fill_config_strings(s, c);
    } else if (step == SQLITE_DONE) {
      rc = TP_FAIL(TP_EINTERNAL, "%s: configuration %lld vanished while reading", r->path,
                   (long long)id);
    } else {
      rc = READ_FAIL(r, "reading a configuration");
    }
  }
  sqlite3_reset(s);
  if (rc == TP_OK) rc = load_schedules_ran(r, c);
  if (rc == TP_OK) rc = tp_store_trace_info(r->store, id, &c->has_trace, &c->trace);
  return rc;
}

static tp_rc load_run(reader *r, int64_t run_id, run_header *h) {
  sqlite3_stmt *s = NULL;
  TP_TRY(prepare(r,
                 "SELECT commit_sha, host, gpu_name, driver_version, cuda_version, nccl_version, "
                 "cublas_version, cupti_version, command_line, command, started_at, finished_at, "
                 "dirty, gpu_count, warmup_iters, measure_iters, uuid FROM runs WHERE id = ?",
                 &s));
  tp_rc rc = TP_OK;
  h->id = run_id;
  if (sqlite3_bind_int64(s, 1, run_id) != SQLITE_OK) {
    rc = READ_FAIL(r, "binding the run id");
  } else if (sqlite3_step(s) != SQLITE_ROW) {
    rc = TP_FAIL(TP_EUSAGE, "%s: there is no run %lld", r->path, (long long)run_id);
  } else {
    char **texts[] = {&h->commit,       &h->host,    &h->gpu_name,   &h->driver,
                      &h->cuda,         &h->nccl,    &h->cublas,     &h->cupti,
                      &h->command_line, &h->command, &h->started_at, &h->finished_at};
    for (int i = 0; rc == TP_OK && i < (int)(sizeof texts / sizeof texts[0]); i++)
      rc = dup_column(s, i, texts[i]);
    h->dirty = int_column(s, 12, -1);
    h->gpu_count = int_column(s, 13, -1);
    h->warmup_iters = int_column(s, 14, -1);
    h->measure_iters = int_column(s, 15, -1);
    if (rc == TP_OK) rc = dup_column(s, 16, &h->uuid);
  }
  sqlite3_finalize(s);
  if (rc == TP_OK) rc = tp_system_report_markdown(r->store, run_id, &h->system_md);
  return rc;
}

static void free_run(run_header *h) {
  char *texts[] = {h->commit, h->host,  h->gpu_name,     h->driver,  h->cuda,       h->nccl,
                   h->cublas, h->cupti, h->command_line, h->command, h->started_at, h->finished_at};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) free(texts[i]);
  free(h->uuid);
  free(h->system_md);
}

/* Binds run id and the optional filters as ?1..?5 (NULL: any). */
static tp_rc bind_filter(reader *r, sqlite3_stmt *s, int64_t run_id, const tp_report_filter *f) {
  int rc = sqlite3_bind_int64(s, 1, run_id);
  const char *values[] = {f->model, f->layer, f->pass, f->dtype};
  for (int i = 0; rc == SQLITE_OK && i < 4; i++)
    rc = values[i] ? sqlite3_bind_text(s, i + 2, values[i], -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(s, i + 2);
  return rc == SQLITE_OK ? TP_OK : READ_FAIL(r, "binding the report filter");
}

#define FILTER_SQL                                                                                 \
  "(?2 IS NULL OR model = ?2) AND (?3 IS NULL OR layer = ?3) AND (?4 IS NULL OR pass = ?4) AND "   \
  "(?5 IS NULL OR dtype = ?5)"

/* The throughput_rows view of schemas/001_init.sql, spelled out for the
 * layers of `tpbench run` as well: they are kind 'layer' where the op
 * benchmark's are kind 'op', and pair with their case's stock layer, GEMMs
 * alone and collectives alone the same way. */
#define ROWS_SQL                                                                                   \
  "WITH refs AS (SELECT config_id, run_id, case_key, kind FROM (SELECT config_id, run_id, "        \
  "case_key, CASE kind WHEN 'layer' THEN 'op' ELSE kind END AS kind, row_number() OVER "           \
  "(PARTITION BY run_id, case_key, CASE kind WHEN 'layer' THEN 'op' ELSE kind END ORDER BY "       \
  "status = 'ok' DESC, config_id DESC) AS pick FROM config_results WHERE (kind IN ('op', "         \
  "'layer') AND backend = 'stock') OR (kind = 'gemm' AND backend = 'cublaslt') OR (kind = "        \
  "'comm' AND backend = 'nccl')) WHERE pick = 1), "                                                \
  "pairs AS (SELECT d.run_id, d.id AS dist_id, s.config_id AS stock_id, g.config_id AS gemm_id, "  \
  "cm.config_id AS comm_id, d.model, d.layer, d.pass, d.dtype, (SELECT min(x.id) FROM configs x "  \
  "WHERE x.run_id = d.run_id AND x.case_key = d.case_key) AS order_key FROM configs d "            \
  "LEFT JOIN refs s ON s.run_id = d.run_id AND s.case_key = d.case_key AND s.kind = 'op' "         \
  "LEFT JOIN refs g ON g.run_id = d.run_id AND g.case_key = d.case_key AND g.kind = 'gemm' "       \
  "LEFT JOIN refs cm ON cm.run_id = d.run_id AND cm.case_key = d.case_key AND cm.kind = 'comm' "   \
  "WHERE d.kind IN ('op', 'layer') AND d.backend = 'dist_gemm' "                                   \
  "UNION ALL SELECT s.run_id, NULL, s.config_id, g.config_id, cm.config_id, sc.model, sc.layer, "  \
  "sc.pass, sc.dtype, (SELECT min(x.id) FROM configs x WHERE x.run_id = s.run_id AND x.case_key "  \
  "= s.case_key) FROM refs s JOIN configs sc ON sc.id = s.config_id "                              \
  "LEFT JOIN refs g ON g.run_id = s.run_id AND g.case_key = s.case_key AND g.kind = 'gemm' "       \
  "LEFT JOIN refs cm ON cm.run_id = s.run_id AND cm.case_key = s.case_key AND cm.kind = 'comm' "   \
  "WHERE s.kind = 'op' AND NOT EXISTS (SELECT 1 FROM configs d WHERE d.run_id = s.run_id AND "     \
  "d.case_key = s.case_key AND d.kind IN ('op', 'layer') AND d.backend = 'dist_gemm')) "

/* Runs sql, bound by bind_filter, and hands each row to take; what names
 * the rows in an error. */
typedef tp_rc (*row_taker)(reader *r, report *rep, sqlite3_stmt *s);
static tp_rc each_filtered_row(reader *r, report *rep, const char *sql, row_taker take,
                               const char *what) {
  sqlite3_stmt *s = NULL;
  TP_TRY(prepare(r, sql, &s));
  tp_rc rc = bind_filter(r, s, rep->run.id, rep->filter);
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(s)) == SQLITE_ROW) rc = take(r, rep, s);
  if (rc == TP_OK && step != SQLITE_DONE) rc = READ_FAIL(r, what);
  sqlite3_finalize(s);
  return rc;
}

/* A table row: its dist_gemm, stock, GEMM-alone and collective-alone ids. */
static tp_rc take_row(reader *r, report *rep, sqlite3_stmt *s) {
  table_row *grown = tp_grow_array(rep->rows, &rep->rows_cap, rep->n_rows, sizeof *rep->rows);
  if (!grown) return out_of_memory();
  rep->rows = grown;
  table_row *row = &rep->rows[rep->n_rows++];
  memset(row, 0, sizeof *row);
  config *parts[] = {&row->dist, &row->stock, &row->gemm, &row->comm};
  for (int i = 0; i < 4; i++) TP_TRY(load_config(r, sqlite3_column_int64(s, i), parts[i]));
  return TP_OK;
}

static tp_rc load_rows(reader *r, report *rep) {
  return each_filtered_row(r, rep,
                           ROWS_SQL "SELECT coalesce(dist_id, 0), coalesce(stock_id, 0), "
                                    "coalesce(gemm_id, 0), coalesce(comm_id, 0) FROM pairs WHERE "
                                    "run_id = ?1 AND " FILTER_SQL " ORDER BY order_key, dist_id",
                           take_row, "reading the throughput rows");
}

/* A configuration that did not run. */
static tp_rc take_skipped(reader *r, report *rep, sqlite3_stmt *s) {
  config *grown =
      tp_grow_array(rep->skipped, &rep->skipped_cap, rep->n_skipped, sizeof *rep->skipped);
  if (!grown) return out_of_memory();
  rep->skipped = grown;
  return load_config(r, sqlite3_column_int64(s, 0), &rep->skipped[rep->n_skipped++]);
}

static tp_rc load_skipped(reader *r, report *rep) {
  return each_filtered_row(
      r, rep,
      "SELECT id FROM configs WHERE run_id = ?1 AND status <> 'ok' AND " FILTER_SQL " ORDER BY id",
      take_skipped, "reading configurations not run");
}

/* The highest copy-engine push bandwidth `tpbench link` measured on the
 * run's host (any run of the database), for the stricter bound. */
static tp_rc load_peer_peak(reader *r, report *rep) {
  static const char sql[] =
      "SELECT MAX(res.bytes_moved / res.median_us / 1e3) FROM configs c "
      "JOIN results res ON res.config_id = c.id JOIN runs lr ON lr.id = c.run_id "
      "WHERE c.kind = 'link' AND c.layer = 'ce_push' AND c.status = 'ok' AND res.median_us > 0 "
      "AND lr.host IS (SELECT host FROM runs WHERE id = ?)";
  sqlite3_stmt *st = NULL;
  rep->peer_peak_gbps = NAN;
  TP_TRY(prepare(r, sql, &st));
  tp_rc rc = TP_OK;
  if (sqlite3_bind_int64(st, 1, rep->run.id) != SQLITE_OK) rc = READ_FAIL(r, "binding a run id");
  if (rc == TP_OK) {
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) rep->peer_peak_gbps = real_column(st, 0);
    else if (step != SQLITE_DONE) rc = READ_FAIL(r, "reading the link probe's peak");
  }
  sqlite3_finalize(st);
  return rc;
}

/* A configuration's slowest-rank series with its rounds. */
typedef struct series {
  double *x;
  int *round;
  size_t n;
  int n_rounds;
} series;

static void free_series(series *s) {
  free(s->x);
  free(s->round);
}

static tp_rc load_series(tp_store *store, const config *c, series *s) {
  memset(s, 0, sizeof *s);
  TP_TRY(tp_store_round_times(store, c->id, &s->x, &s->round, &s->n));
  for (size_t i = 0; i < s->n; i++)
    if (s->round[i] + 1 > s->n_rounds) s->n_rounds = s->round[i] + 1;
  return TP_OK;
}

/* num / den's interval; lo and hi stay NaN when either has no samples. */
static tp_rc ratio_interval(const series *num, const series *den, double *lo, double *hi) {
  *lo = *hi = NAN;
  if (num->n == 0 || den->n == 0) return TP_OK;
  tp_round_series a = {num->x, num->round, (int)num->n}, b = {den->x, den->round, (int)den->n};
  const int rounds = num->n_rounds > den->n_rounds ? num->n_rounds : den->n_rounds;
  tp_interval iv;
  tp_rc rc = tp_boot_ratio(&a, &b, rounds, 0.95, 1, &iv);
  if (rc == TP_EINTERNAL) return TP_OK; /* no round in common: no interval */
  TP_TRY(rc);
  *lo = iv.lo;
  *hi = iv.hi;
  return TP_OK;
}

static int ran_ok(const config *c);

/* The speedup's and dist/bound's intervals of a row whose stock and dist_gemm ran. */
static tp_rc load_row_intervals(tp_store *store, table_row *row) {
  row->speedup_lo = row->speedup_hi = row->bound_lo = row->bound_hi = NAN;
  if (!ran_ok(&row->dist) || !ran_ok(&row->stock)) return TP_OK;
  series dist, stock, ref;
  memset(&dist, 0, sizeof dist);
  memset(&stock, 0, sizeof stock);
  memset(&ref, 0, sizeof ref);
  tp_rc rc = load_series(store, &row->dist, &dist);
  if (rc == TP_OK) rc = load_series(store, &row->stock, &stock);
  if (rc == TP_OK) rc = ratio_interval(&stock, &dist, &row->speedup_lo, &row->speedup_hi);
  /* the bound is the slower half: its interval is dist over that reference's */
  if (rc == TP_OK && ran_ok(&row->gemm) && ran_ok(&row->comm)) {
    const config *binding = row->gemm.median_us >= row->comm.median_us ? &row->gemm : &row->comm;
    rc = load_series(store, binding, &ref);
    if (rc == TP_OK) rc = ratio_interval(&dist, &ref, &row->bound_lo, &row->bound_hi);
  }
  free_series(&dist);
  free_series(&stock);
  free_series(&ref);
  return rc;
}

static tp_rc load_report(tp_store *store, int64_t run_id, report *rep) {
  reader r = {tp_store_db(store), tp_store_path(store), NULL, NULL, store};
  if (!r.db) return TP_FAIL(TP_EINTERNAL, "report: store is not open");
  tp_rc rc = prepare(&r, config_sql, &r.config_stmt);
  if (rc == TP_OK)
    rc = prepare(&r, "SELECT schedule, chunks FROM schedules WHERE config_id = ? ORDER BY seq",
                 &r.schedule_stmt);
  if (rc == TP_OK) rc = load_run(&r, run_id, &rep->run);
  if (rc == TP_OK) rc = load_rows(&r, rep);
  if (rc == TP_OK) rc = load_skipped(&r, rep);
  if (rc == TP_OK) rc = load_peer_peak(&r, rep);
  for (size_t i = 0; rc == TP_OK && i < rep->n_rows; i++)
    rc = load_row_intervals(store, &rep->rows[i]);
  sqlite3_finalize(r.config_stmt);
  sqlite3_finalize(r.schedule_stmt);
  return rc;
}

static void free_report(report *rep) {
  for (size_t i = 0; i < rep->n_rows; i++) {
    free_config(&rep->rows[i].dist);
    free_config(&rep->rows[i].stock);
    free_config(&rep->rows[i].gemm);
    free_config(&rep->rows[i].comm);
    free(rep->rows[i].note);
  }
  for (size_t i = 0; i < rep->n_skipped; i++) free_config(&rep->skipped[i]);
  free(rep->rows);
  free(rep->skipped);
  free_run(&rep->run);
}

/* ---- deriving ----------------------------------------------------------- */

static int ran_ok(const config *c) {
  return c->present && c->status && !strcmp(c->status, "ok") && c->has_result;
}

/* Median time in ms of a configuration that ran; NaN otherwise. */
static double median_ms(const config *c) { return ran_ok(c) ? c->median_us / 1000.0 : NAN; }

/* a / b, NaN unless both are finite and b > 0. */
static double ratio(double a, double b) {
  return (isfinite(a) && isfinite(b) && b > 0) ? a / b : NAN;
}

static char *format_note(const char *fmt, const char *a, const char *b) {
  int n = snprintf(NULL, 0, fmt, a, b);
  char *note = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (note) snprintf(note, (size_t)n + 1, fmt, a, b);
  return note;
}

/* The row's status and what explains its blanks. */
static tp_rc derive_status(table_row *row) {
  const config *d = &row->dist, *s = &row->stock;
  if (!d->present) {
    row->status = "missing";
    row->note = strdup("no dist_gemm configuration for this case");
  } else if (!ran_ok(d)) {
    row->status = d->status ? d->status : "unknown";
    if (!d->reason) return TP_OK;
    row->note = strdup(d->reason);
  } else {
    row->status = "ok";
    if (!s->present) row->note = strdup("no stock configuration for this case");
    else if (!ran_ok(s))
      row->note = format_note("stock %s: %s", s->status ? s->status : "unknown",
                              s->reason ? s->reason : "no reason recorded");
    else return TP_OK;
  }
  return row->note ? TP_OK : out_of_memory();
}

/* "ok", "failed" or "not checked". */
static const char *evidence_state(const tp_trace_info *t) {
  return t->evidence[0] ? t->evidence : t->evidence_ok ? "ok" : "failed";
}

/* "ok", or the state and what decided it ("failed: ...", "not checked: ..."). */
static void describe_evidence(char *out, size_t cap, const tp_trace_info *t) {
  const char *state = evidence_state(t);
  if (strcmp(state, "ok") == 0 || !t->evidence_message[0]) snprintf(out, cap, "%s", state);
  else snprintf(out, cap, "%s: %s", state, t->evidence_message);
}

/* The trace columns: the dist_gemm configuration's overlap (of real
 * communication: bytes moving), its synchronisation beside it, exposed
 * communication and tracing cost. Evidence is the dist_gemm configuration's
 * own: a row whose dist_gemm configuration was not traced says "not traced",
 * never ok on the stock op's word; the stock op's evidence is added when it
 * is not ok (its trace must show NCCL and nothing else). */
static void derive_trace(table_row *row) {
  const config *d = &row->dist, *s = &row->stock;
  row->overlap_pct = row->exposed_ms = row->overhead_pct = row->sync_ms = NAN;
  row->evidence[0] = '\0';
  if (d->has_trace) {
    row->overlap_pct = d->trace.overlap_pct_median;
    row->exposed_ms = d->trace.exposed_ns_median / 1e6;
    row->overhead_pct = d->trace.overhead * 100.0;
    row->sync_ms = d->trace.sync_ns_median / 1e6;
  }
  char dist[540] = "", stock[540] = "";
  if (d->has_trace) describe_evidence(dist, sizeof dist, &d->trace);
  else if (d->present && s->has_trace) snprintf(dist, sizeof dist, "not traced");
  if (s->has_trace && strcmp(evidence_state(&s->trace), "ok") != 0)
    describe_evidence(stock, sizeof stock, &s->trace);
  if (stock[0])
    snprintf(row->evidence, sizeof row->evidence, "%s; stock: %s", dist[0] ? dist : "not traced",
             stock);
  else snprintf(row->evidence, sizeof row->evidence, "%s", dist);
}

static tp_rc derive_row(table_row *row, double peer_peak_gbps) {
  derive_trace(row);
  row->stock_ms = median_ms(&row->stock);
  row->dist_ms = median_ms(&row->dist);
  row->gemm_ms = median_ms(&row->gemm);
  row->comm_ms = median_ms(&row->comm);
  row->speedup = ratio(row->stock_ms, row->dist_ms);
  /* Both references are needed: half a bound would flatter the fused op. */
  row->bound_ms =
      (isfinite(row->gemm_ms) && isfinite(row->comm_ms)) ? fmax(row->gemm_ms, row->comm_ms) : NAN;
  row->dist_over_bound = ratio(row->dist_ms, row->bound_ms);
  /* bytes over GB/s: bytes / (GB/s · 1e9) s = bytes / (GB/s · 1e6) ms */
  double peak_ms = row->dist.bytes_moved / (peer_peak_gbps * 1e6);
  row->strict_bound_ms = isfinite(row->gemm_ms) && isfinite(peak_ms) && ran_ok(&row->dist)
                             ? fmax(row->gemm_ms, peak_ms)
                             : NAN;
  row->dist_over_strict = ratio(row->dist_ms, row->strict_bound_ms);
  int dist_ran = ran_ok(&row->dist);
  row->workspace_mib = dist_ran ? row->dist.workspace_bytes / (1024.0 * 1024.0) : NAN;
  row->cv_pct = dist_ran ? row->dist.cv * 100.0 : NAN;
  row->both_ok = isfinite(row->speedup) && row->speedup > 0;
  /* an op whose recorded schedule is the stock path's ("nccl") did not fuse */
  row->stock_path = row->dist.ran &&
                    (!strncmp(row->dist.ran, "nccl", 4) || strstr(row->dist.ran, "+nccl") != NULL);
  return derive_status(row);
}

/* Median and worst of the finite dist/strict ratios of the rows in the summary. */
static tp_rc summarise_strict(report *rep) {
  summary *sum = &rep->sum;
  double *v = malloc((rep->n_rows ? rep->n_rows : 1) * sizeof *v);
  if (!v) return out_of_memory();
  sum->median_dist_strict = sum->worst_dist_strict = NAN;
  for (size_t i = 0; i < rep->n_rows; i++)
    if (rep->rows[i].both_ok && isfinite(rep->rows[i].dist_over_strict))
      v[sum->strict_rows++] = rep->rows[i].dist_over_strict;
  if (sum->strict_rows) {
    sum->median_dist_strict = tp_median(v, (size_t)sum->strict_rows); /* sorts */
    sum->worst_dist_strict = v[sum->strict_rows - 1];
  }
  free(v);
  return TP_OK;
}

/* The larger of two values where NaN means "not known": a known one wins. */
static double larger(double a, double b) {
  if (!isfinite(b)) return a;
  return isfinite(a) && a >= b ? a : b;
}

static tp_rc derive_summary(report *rep) {
  summary *sum = &rep->sum;
  TP_TRY(summarise_strict(rep));
  double *bounds = malloc((rep->n_rows ? rep->n_rows : 1) * sizeof *bounds);
  if (!bounds) return out_of_memory();
  double log_sum = 0, stock_path_log_sum = 0;
  sum->worst_dist_bound = sum->worst_skew = sum->worst_stall = NAN;
  for (size_t i = 0; i < rep->n_rows; i++) {
    const table_row *row = &rep->rows[i];
    const config *both[2] = {&row->stock, &row->dist};
    for (int k = 0; k < 2; k++) {
      if (!ran_ok(both[k])) continue;
      sum->worst_skew = larger(sum->worst_skew, both[k]->rank_skew);
      sum->worst_stall = larger(sum->worst_stall, both[k]->host_stall);
    }
    if (!row->both_ok) {
      if (row->dist.present && row->dist.status && strcmp(row->dist.status, "ok") != 0 &&
          strcmp(row->dist.status, "rejected") != 0)
        sum->failed_rows++;
      else sum->other_rows++;
      continue;
    }
    /* identical code under another name measures noise, not fusion: apart */
    if (row->stock_path) {
      sum->stock_path_rows++;
      stock_path_log_sum += log(row->speedup);
      continue;
    }
    sum->rows++;
    log_sum += log(row->speedup);
    if (row->speedup_lo <= 1.0 && 1.0 <= row->speedup_hi) sum->same_rows++;
    if (!isfinite(row->dist_over_bound)) continue;
    bounds[sum->bound_rows++] = row->dist_over_bound;
  }
  sum->geomean_speedup = sum->rows ? exp(log_sum / sum->rows) : NAN;
  sum->stock_path_geomean =
      sum->stock_path_rows ? exp(stock_path_log_sum / sum->stock_path_rows) : NAN;
  sum->median_dist_bound = NAN;
  if (sum->bound_rows) {
    size_t n = (size_t)sum->bound_rows;
    sum->median_dist_bound = tp_median(bounds, n); /* sorts: the worst is last */
    sum->worst_dist_bound = bounds[n - 1];
  }
  free(bounds);
  return TP_OK;
}

static tp_rc derive_report(report *rep) {
  for (size_t i = 0; i < rep->n_rows; i++) {
    TP_TRY(derive_row(&rep->rows[i], rep->peer_peak_gbps));
    if (rep->rows[i].evidence[0]) rep->any_trace = 1;
  }
  return derive_summary(rep);
}

/* ---- text helpers shared by markdown and CSV ---------------------------- */

static const char *or_empty(const char *s) { return s ? s : ""; }

/* The axes of a case, taken from whichever configuration the row has. */
static const config *case_of(const table_row *row) {
  return row->dist.present ? &row->dist : &row->stock;
}

/* What ran, or what was asked for when nothing ran. */
static void schedule_label(const table_row *row, char *buf, size_t cap) {
  const config *d = &row->dist;
  if (d->ran) snprintf(buf, cap, "%s", d->ran);
  else if (d->present && d->schedule && d->chunks > 0)
    snprintf(buf, cap, "%s x%lld (requested)", d->schedule, (long long)d->chunks);
  else if (d->present && d->schedule) snprintf(buf, cap, "%s (requested)", d->schedule);
  else buf[0] = '\0';
}

static void options_label(const config *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s%s%s", c->sp ? "sp" : "no-sp", c->graph ? " graph" : "",
           c->save_gathered ? " save-gathered" : "");
}

static void describe_config(const config *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s %s %s %s %s tp=%lld tokens=%lld %s %s%s%s", or_empty(c->kind),
           or_empty(c->backend), or_empty(c->model), or_empty(c->layer), or_empty(c->proj),
           (long long)c->tp, (long long)c->tokens, or_empty(c->dtype), or_empty(c->pass),
           c->schedule ? " schedule=" : "", or_empty(c->schedule));
}

/* ---- markdown ----------------------------------------------------------- */

static void md_count(FILE *out, int64_t value) {
  if (value < 0) fputs("?", out);
  else fprintf(out, "%lld", (long long)value);
}

/* "label value" and the rest of a header line: stored text goes through
 * tp_md_text, so a host name or version cannot add lines or markup. */
static void md_words(FILE *out, const char *before, const char *text, const char *missing) {
  fputs(before, out);
  tp_md_text(out, text ? text : missing);
}

static void md_header(FILE *out, const report *rep) {
  const run_header *h = &rep->run;
  fprintf(out, "## tpbench throughput: run %lld\n\n", (long long)h->id);
  fputs("- **commit** ", out);
  tp_md_code(out, h->commit ? h->commit : "unknown");
  fprintf(out, "%s\n", h->dirty == 1 ? " (dirty tree)" : "");
  md_words(out, "- **time** ", h->started_at, "?");
  md_words(out, " to ", h->finished_at, "not finished");
  md_words(out, " (UTC)\n- **host** ", h->host, "?");
  md_words(out, ": ", h->gpu_name, "?");
  fputs(" × ", out);
  md_count(out, h->gpu_count);
  md_words(out, ", driver ", h->driver, "?");
  md_words(out, "\n- **software** CUDA ", h->cuda, "?");
  md_words(out, ", NCCL ", h->nccl, "?");
  md_words(out, ", cuBLAS ", h->cublas, "?");
  md_words(out, ", CUPTI ", h->cupti, "?");
  fputs("\n- **iterations** ", out);
  md_count(out, h->warmup_iters);
  fputs(" warm-up, ", out);
  md_count(out, h->measure_iters);
  fputs(" measured\n", out);
  fputs("- **command** ", out);
  tp_md_code(out, h->command_line ? h->command_line : "?");
  fputc('\n', out);
  if (h->system_md) fputs(h->system_md, out);
  const tp_report_filter *f = rep->filter;
  if (f->model || f->layer || f->pass || f->dtype) {
    fputs("- **filter**", out);
    if (f->model) md_words(out, " model=", f->model, "");
    if (f->layer) md_words(out, " layer=", f->layer, "");
    if (f->pass) md_words(out, " pass=", f->pass, "");
    if (f->dtype) md_words(out, " dtype=", f->dtype, "");
    fputc('\n', out);
  }
  fputc('\n', out);
}

static const char *const md_columns[] = {"model",
                                         "op",
                                         "proj",
                                         "tp",
                                         "B×S",
                                         "tokens",
                                         "dtype",
                                         "pass",
                                         "options",
                                         "schedule",
                                         "stock ms",
                                         "dist_gemm ms",
                                         "speedup",
                                         "speedup 95% CI",
                                         "GEMM ms",
                                         "comm ms",
                                         "bound ms",
                                         "dist/bound",
                                         "dist/bound 95% CI",
                                         "strict bound ms",
                                         "dist/strict",
                                         "dist tok/s",
                                         "dist TFLOP/s",
                                         "workspace MiB",
                                         "rel err (ref)",
                                         "dist cv %",
                                         "status"};
enum { MD_N_COLUMNS = sizeof md_columns / sizeof md_columns[0], MD_FIRST_NUMBER = 10 };

/* With traces, these go before "status": three numbers, then the evidence. */
static const char *const md_trace_columns[] = {"overlap %", "sync ms", "exposed comm ms",
                                               "trace overhead %", "evidence"};
enum { MD_N_TRACE_COLUMNS = sizeof md_trace_columns / sizeof md_trace_columns[0] };

static void md_table_head(FILE *out, int with_trace) {
  for (int i = 0; i < MD_N_COLUMNS - 1; i++) tp_md_cell(out, md_columns[i]);
  for (int i = 0; with_trace && i < MD_N_TRACE_COLUMNS; i++) tp_md_cell(out, md_trace_columns[i]);
  tp_md_cell(out, md_columns[MD_N_COLUMNS - 1]);
  fputs("|\n", out);
  /* Numbers align right so their decimals line up. */
  for (int i = 0; i < MD_N_COLUMNS - 1; i++) fputs(i >= MD_FIRST_NUMBER ? "|---:" : "|---", out);
  for (int i = 0; with_trace && i < MD_N_TRACE_COLUMNS; i++)
    fputs(i < MD_N_TRACE_COLUMNS - 1 ? "|---:" : "|---", out);
  fputs("|---|\n", out);
}

static void md_trace_cells(FILE *out, const table_row *row) {
  tp_md_num(out, row->overlap_pct, 1);
  tp_md_num(out, row->sync_ms, 3);
  tp_md_num(out, row->exposed_ms, 3);
  tp_md_num(out, row->overhead_pct, 1);
  tp_md_cell(out, row->evidence[0] ? row->evidence : "-");
}

/* "1.08–1.12", with "no difference" when the interval holds 1; "-" without one
 * (no brackets: markdown would escape them). */
static void interval_label(double lo, double hi, char *buf, size_t cap) {
  if (!isfinite(lo) || !isfinite(hi)) {
    snprintf(buf, cap, "-");
    return;
  }
  snprintf(buf, cap, "%.2f–%.2f%s", lo, hi, lo <= 1.0 && 1.0 <= hi ? " no difference" : "");
}

static void md_row(FILE *out, const table_row *row, int with_trace) {
  const config *c = case_of(row);
  char buf[512], num_buf[64];
  tp_md_cell(out, c->model);
  tp_md_cell(out, c->layer);
  tp_md_cell(out, c->proj);
  snprintf(buf, sizeof buf, "%lld", (long long)c->tp);
  tp_md_cell(out, buf);
  /* op rows have tokens only: no batch and sequence split */
  if (c->batch > 0 && c->seqlen > 0)
    snprintf(buf, sizeof buf, "%lld×%lld", (long long)c->batch, (long long)c->seqlen);
  else snprintf(buf, sizeof buf, "-");
  tp_md_cell(out, buf);
  snprintf(buf, sizeof buf, "%lld", (long long)c->tokens);
  tp_md_cell(out, buf);
  tp_md_cell(out, c->dtype);
  tp_md_cell(out, c->pass);
  options_label(c, buf, sizeof buf);
  tp_md_cell(out, buf);
  schedule_label(row, buf, sizeof buf);
  tp_md_cell(out, buf);
  tp_md_num(out, row->stock_ms, 3);
  tp_md_num(out, row->dist_ms, 3);
  tp_md_num(out, row->speedup, 2);
  interval_label(row->speedup_lo, row->speedup_hi, buf, sizeof buf);
  tp_md_cell(out, buf);
  tp_md_num(out, row->gemm_ms, 3);
  tp_md_num(out, row->comm_ms, 3);
  tp_md_num(out, row->bound_ms, 3);
  tp_md_num(out, row->dist_over_bound, 2);
  interval_label(row->bound_lo, row->bound_hi, buf, sizeof buf);
  tp_md_cell(out, buf);
  tp_md_num(out, row->strict_bound_ms, 3);
  tp_md_num(out, row->dist_over_strict, 2);
  tp_md_num(out, ran_ok(&row->dist) ? row->dist.tokens_per_s : NAN, 0);
  tp_md_num(out, ran_ok(&row->dist) ? row->dist.tflops : NAN, 1);
  tp_md_num(out, row->workspace_mib, 1);
  if (ran_ok(&row->dist) && isfinite(row->dist.rel_err)) {
    snprintf(buf, sizeof buf, "%s (%s)", tp_fmt_sci(num_buf, sizeof num_buf, row->dist.rel_err),
             row->dist.numerics_ref ? row->dist.numerics_ref : "?");
    tp_md_cell(out, buf);
  } else {
    tp_md_cell(out, "-");
  }
  tp_md_num(out, row->cv_pct, 1);
  if (with_trace) md_trace_cells(out, row);
  if (row->note) snprintf(buf, sizeof buf, "%s: %s", row->status, row->note);
  else snprintf(buf, sizeof buf, "%s", row->status);
  tp_md_cell(out, buf);
  fputs("|\n", out);
}

/* The rows the headline leaves out, counted; how far ranks and hosts strayed. */
static void md_summary_apart(FILE *out, const summary *sum) {
  char a[64], b[64];
  if (isfinite(sum->worst_skew) || isfinite(sum->worst_stall))
    fprintf(out,
            "Ranks and hosts: the slowest rank's median exceeded the fastest's by up to %s %%; "
            "in up to %s %% of a configuration's iterations a rank's host issued the step slower "
            "than the GPU ran it.\n",
            tp_fmt_num(a, sizeof a, 100.0 * sum->worst_skew, 1),
            tp_fmt_num(b, sizeof b, 100.0 * sum->worst_stall, 1));
  if (sum->stock_path_rows)
    fprintf(out,
            "Not in the geometric mean: %d row%s where dist_gemm took the stock path (auto's "
            "choice: the same code as stock, geometric-mean ratio %s).\n",
            sum->stock_path_rows, sum->stock_path_rows == 1 ? "" : "s",
            tp_fmt_num(a, sizeof a, sum->stock_path_geomean, 3));
  if (sum->failed_rows || sum->other_rows)
    fprintf(out,
            "Rows without a speedup: %d failed (failed, oom, timeout), %d rejected or missing.\n",
            sum->failed_rows, sum->other_rows);
}

static void md_summary(FILE *out, const summary *sum) {
  char a[64], b[64], c[64];
  if (sum->rows == 0) {
    fputs("\n**Summary**: no row has both stock and fused dist_gemm results.\n", out);
    md_summary_apart(out, sum);
    return;
  }
  fprintf(out,
          "\n**Summary** over %d row%s with stock and dist_gemm results: geometric-mean "
          "speedup %s",
          sum->rows, sum->rows == 1 ? "" : "s", tp_fmt_num(a, sizeof a, sum->geomean_speedup, 3));
  if (sum->same_rows)
    fprintf(out, " (%d of them no different from stock: their interval holds 1)", sum->same_rows);
  if (sum->bound_rows)
    fprintf(out, "; dist/bound median %s, worst %s (over %d row%s with a bound)",
            tp_fmt_num(b, sizeof b, sum->median_dist_bound, 2),
            tp_fmt_num(c, sizeof c, sum->worst_dist_bound, 2), sum->bound_rows,
            sum->bound_rows == 1 ? "" : "s");
  if (sum->strict_rows)
    fprintf(out,
            "; against the stricter bound (GEMM alone or this rank's bytes at the link probe's "
            "peak copy-engine bandwidth), median %s, worst %s",
            tp_fmt_num(b, sizeof b, sum->median_dist_strict, 2),
            tp_fmt_num(c, sizeof c, sum->worst_dist_strict, 2));
  fputs(".\n", out);
  md_summary_apart(out, sum);
}

static void md_skipped(FILE *out, const report *rep) {
  if (rep->n_skipped == 0) return;
  fprintf(out, "\n**Not run** (%zu configuration%s):\n\n", rep->n_skipped,
          rep->n_skipped == 1 ? "" : "s");
  char what[512];
  for (size_t i = 0; i < rep->n_skipped; i++) {
    const config *c = &rep->skipped[i];
    describe_config(c, what, sizeof what);
    fprintf(out, "- config %lld (", (long long)c->id);
    tp_md_text(out, what);
    md_words(out, "): ", c->status, "");
    md_words(out, ": ", c->reason, "no reason recorded");
    fputc('\n', out);
  }
}

static void write_markdown(FILE *out, const report *rep) {
  md_header(out, rep);
  md_table_head(out, rep->any_trace);
  for (size_t i = 0; i < rep->n_rows; i++) md_row(out, &rep->rows[i], rep->any_trace);
  if (rep->n_rows == 0) fputs("\n(no op configurations in this selection)\n", out);
  md_summary(out, &rep->sum);
  if (rep->any_trace)
    fputs("\nTrace columns (dist_gemm, from its traced window): overlap % (of communication: "
          "bytes moving), sync (barriers, waits, signals: beside it, in neither) and exposed comm "
          "are medians over ranks and iterations; trace overhead = traced / untraced median - 1; "
          "evidence says whether each op's trace, inside its own NVTX ranges, shows the schedule "
          "recorded as run: ok, failed or not checked (with the reason), or not traced.\n",
          out);
  md_skipped(out, rep);
}

/* ---- CSV ---------------------------------------------------------------- */

static const char *const csv_columns[] = {
    "run_id", "commit", "model", "layer", "proj", "tp", "batch", "seqlen", "tokens", "m", "n", "k",
    "n_weights", "dtype", "pass", "sp", "graph", "save_gathered", "schedule_requested",
    "chunks_requested", "schedule", "stock_ms", "dist_ms", "speedup", "gemm_ms", "comm_ms",
    "bound_ms", "dist_over_bound", "dist_tokens_per_s", "dist_tflops", "workspace_mib", "rel_err",
    "numerics_ref", "dist_cv_pct", "status", "reason",
    /* appended: the trace, then the run */
    "overlap_pct", "exposed_comm_ms", "trace_overhead_pct", "evidence", "host", "gpu_name",
    "gpu_count", "driver_version", "cuda_version", "nccl_version", "cublas_version",
    "cupti_version", "warmup_iters", "measure_iters",
    /* appended: the stricter bound from the link probe */
    "strict_bound_ms", "dist_over_strict",
    /* appended: synchronisation beside overlap */
    "sync_ms",
    /* appended: intervals (95 %, rounds paired) and whether dist_gemm took the stock path */
    "speedup_lo", "speedup_hi", "dist_over_bound_lo", "dist_over_bound_hi", "stock_path",
    /* appended: ranks and hosts of the dist_gemm configuration */
    "dist_rank_skew_pct", "dist_host_stall_pct"};

/* What the markdown header says of the run, on every line: a CSV reader
 * sees one table, and rows of several runs can be concatenated. */
static void csv_run_fields(FILE *out, const run_header *h) {
  tp_csv_field(out, h->host, 0);
  tp_csv_field(out, h->gpu_name, 0);
  if (h->gpu_count >= 0) tp_csv_int(out, h->gpu_count);
  else tp_csv_field(out, "", 0);
  const char *versions[] = {h->driver, h->cuda, h->nccl, h->cublas, h->cupti};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
    tp_csv_field(out, versions[i], 0);
  if (h->warmup_iters >= 0) tp_csv_int(out, h->warmup_iters);
  else tp_csv_field(out, "", 0);
  if (h->measure_iters >= 0) tp_csv_int(out, h->measure_iters);
  else tp_csv_field(out, "", 0);
}

static void csv_row(FILE *out, const report *rep, const table_row *row) {
  const config *c = case_of(row);
  const config *d = &row->dist;
  char buf[512];
  snprintf(buf, sizeof buf, "%lld", (long long)rep->run.id);
  tp_csv_field(out, buf, 1);
  tp_csv_field(out, rep->run.commit, 0);
  tp_csv_field(out, c->model, 0);
  tp_csv_field(out, c->layer, 0);
  tp_csv_field(out, c->proj, 0);
  int64_t ints[] = {c->tp, c->batch, c->seqlen, c->tokens, c->m, c->n, c->k, c->n_weights};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) tp_csv_int(out, ints[i]);
  tp_csv_field(out, c->dtype, 0);
  tp_csv_field(out, c->pass, 0);
  tp_csv_int(out, c->sp);
  tp_csv_int(out, c->graph);
  tp_csv_int(out, c->save_gathered);
  tp_csv_field(out, d->present ? d->schedule : NULL, 0);
  if (d->present) tp_csv_int(out, d->chunks);
  else tp_csv_field(out, "", 0);
  tp_csv_field(out, d->ran, 0);
  tp_csv_num(out, row->stock_ms, 3);
  tp_csv_num(out, row->dist_ms, 3);
  tp_csv_num(out, row->speedup, 3);
  tp_csv_num(out, row->gemm_ms, 3);
  tp_csv_num(out, row->comm_ms, 3);
  tp_csv_num(out, row->bound_ms, 3);
  tp_csv_num(out, row->dist_over_bound, 3);
  tp_csv_num(out, ran_ok(d) ? d->tokens_per_s : NAN, 0);
  tp_csv_num(out, ran_ok(d) ? d->tflops : NAN, 2);
  tp_csv_num(out, row->workspace_mib, 2);
  tp_csv_field(out, ran_ok(d) ? tp_fmt_sci(buf, sizeof buf, d->rel_err) : "", 0);
  tp_csv_field(out, ran_ok(d) ? d->numerics_ref : NULL, 0);
  tp_csv_num(out, row->cv_pct, 2);
  tp_csv_field(out, row->status, 0);
  tp_csv_field(out, row->note, 0);
  tp_csv_num(out, row->overlap_pct, 2);
  tp_csv_num(out, row->exposed_ms, 4);
  tp_csv_num(out, row->overhead_pct, 2);
  tp_csv_field(out, row->evidence, 0);
  csv_run_fields(out, &rep->run);
  tp_csv_num(out, row->strict_bound_ms, 4);
  tp_csv_num(out, row->dist_over_strict, 3);
  tp_csv_num(out, row->sync_ms, 4);
  tp_csv_num(out, row->speedup_lo, 3);
  tp_csv_num(out, row->speedup_hi, 3);
  tp_csv_num(out, row->bound_lo, 3);
  tp_csv_num(out, row->bound_hi, 3);
  tp_csv_field(out, row->both_ok ? (row->stock_path ? "1" : "0") : "", 0);
  tp_csv_num(out, ran_ok(&row->dist) ? 100.0 * row->dist.rank_skew : NAN, 2);
  tp_csv_num(out, ran_ok(&row->dist) ? 100.0 * row->dist.host_stall : NAN, 2);
  fputs("\r\n", out);
}

static void write_csv(FILE *out, const report *rep) {
  size_t n = sizeof csv_columns / sizeof csv_columns[0];
  for (size_t i = 0; i < n; i++) tp_csv_field(out, csv_columns[i], i == 0);
  fputs("\r\n", out);
  for (size_t i = 0; i < rep->n_rows; i++) csv_row(out, rep, &rep->rows[i]);
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *json_run(tp_json_builder *jb, const run_header *h) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "id", json_integer(h->id));
  tp_json_set(jb, o, "uuid", tp_json_str(h->uuid));
  tp_json_set(jb, o, "commit", tp_json_str(h->commit));
  tp_json_set(jb, o, "dirty", h->dirty < 0 ? json_null() : json_boolean(h->dirty));
  tp_json_set(jb, o, "started_at", tp_json_str(h->started_at));
  tp_json_set(jb, o, "finished_at", tp_json_str(h->finished_at));
  tp_json_set(jb, o, "host", tp_json_str(h->host));
  tp_json_set(jb, o, "gpu_name", tp_json_str(h->gpu_name));
  tp_json_set(jb, o, "gpu_count", h->gpu_count < 0 ? json_null() : json_integer(h->gpu_count));
  tp_json_set(jb, o, "driver_version", tp_json_str(h->driver));
  tp_json_set(jb, o, "cuda_version", tp_json_str(h->cuda));
  tp_json_set(jb, o, "nccl_version", tp_json_str(h->nccl));
  tp_json_set(jb, o, "cublas_version", tp_json_str(h->cublas));
  tp_json_set(jb, o, "cupti_version", tp_json_str(h->cupti));
  tp_json_set(jb, o, "command", tp_json_str(h->command));
  tp_json_set(jb, o, "command_line", tp_json_str(h->command_line));
  tp_json_set(jb, o, "warmup_iters",
              h->warmup_iters < 0 ? json_null() : json_integer(h->warmup_iters));
  tp_json_set(jb, o, "measure_iters",
              h->measure_iters < 0 ? json_null() : json_integer(h->measure_iters));
  return o;
}

static json_t *jid(const config *c) { return c->present ? json_integer(c->id) : json_null(); }

static void json_axes(tp_json_builder *jb, json_t *o, const config *c) {
  tp_json_set(jb, o, "model", tp_json_str(c->model));
  tp_json_set(jb, o, "layer", tp_json_str(c->layer));
  tp_json_set(jb, o, "proj", tp_json_str(c->proj));
  tp_json_set(jb, o, "tp", json_integer(c->tp));
  tp_json_set(jb, o, "batch", json_integer(c->batch));
  tp_json_set(jb, o, "seqlen", json_integer(c->seqlen));
  tp_json_set(jb, o, "tokens", json_integer(c->tokens));
  tp_json_set(jb, o, "m", json_integer(c->m));
  tp_json_set(jb, o, "n", json_integer(c->n));
  tp_json_set(jb, o, "k", json_integer(c->k));
  tp_json_set(jb, o, "n_weights", json_integer(c->n_weights));
  tp_json_set(jb, o, "dtype", tp_json_str(c->dtype));
  tp_json_set(jb, o, "pass", tp_json_str(c->pass));
  tp_json_set(jb, o, "sp", json_boolean(c->sp));
  tp_json_set(jb, o, "graph", json_boolean(c->graph));
  tp_json_set(jb, o, "save_gathered", json_boolean(c->save_gathered));
}

static json_t *json_row(tp_json_builder *jb, const table_row *row) {
  json_t *o = json_object();
  if (!o) return NULL;
  const config *d = &row->dist;
  int dist_ran = ran_ok(d);
  json_axes(jb, o, case_of(row));
  tp_json_set(jb, o, "schedule_requested", d->present ? tp_json_str(d->schedule) : json_null());
  tp_json_set(jb, o, "chunks_requested", d->present ? json_integer(d->chunks) : json_null());
  tp_json_set(jb, o, "schedule", tp_json_str(d->ran));
  tp_json_set(jb, o, "stock_ms", tp_json_real(row->stock_ms));
  tp_json_set(jb, o, "dist_ms", tp_json_real(row->dist_ms));
  tp_json_set(jb, o, "speedup", tp_json_real(row->speedup));
  tp_json_set(jb, o, "gemm_ms", tp_json_real(row->gemm_ms));
  tp_json_set(jb, o, "comm_ms", tp_json_real(row->comm_ms));
  tp_json_set(jb, o, "bound_ms", tp_json_real(row->bound_ms));
  tp_json_set(jb, o, "dist_over_bound", tp_json_real(row->dist_over_bound));
  tp_json_set(jb, o, "strict_bound_ms", tp_json_real(row->strict_bound_ms));
  tp_json_set(jb, o, "dist_over_strict", tp_json_real(row->dist_over_strict));
  tp_json_set(jb, o, "dist_tokens_per_s", tp_json_real(dist_ran ? d->tokens_per_s : NAN));
  tp_json_set(jb, o, "dist_tflops", tp_json_real(dist_ran ? d->tflops : NAN));
  tp_json_set(jb, o, "workspace_mib", tp_json_real(row->workspace_mib));
  tp_json_set(jb, o, "rel_err", tp_json_real(dist_ran ? d->rel_err : NAN));
  tp_json_set(jb, o, "numerics_ref", dist_ran ? tp_json_str(d->numerics_ref) : json_null());
  tp_json_set(jb, o, "dist_cv_pct", tp_json_real(row->cv_pct));
  tp_json_set(jb, o, "status", tp_json_str(row->status));
  tp_json_set(jb, o, "reason", tp_json_str(row->note));
  tp_json_set(jb, o, "overlap_pct", tp_json_real(row->overlap_pct));
  tp_json_set(jb, o, "exposed_comm_ms", tp_json_real(row->exposed_ms));
  tp_json_set(jb, o, "trace_overhead_pct", tp_json_real(row->overhead_pct));
  tp_json_set(jb, o, "sync_ms", tp_json_real(row->sync_ms));
  tp_json_set(jb, o, "speedup_lo", tp_json_real(row->speedup_lo));
  tp_json_set(jb, o, "speedup_hi", tp_json_real(row->speedup_hi));
  tp_json_set(jb, o, "dist_over_bound_lo", tp_json_real(row->bound_lo));
  tp_json_set(jb, o, "dist_over_bound_hi", tp_json_real(row->bound_hi));
  tp_json_set(jb, o, "stock_path", json_boolean(row->stock_path));
  tp_json_set(jb, o, "dist_rank_skew", tp_json_real(ran_ok(d) ? d->rank_skew : NAN));
  tp_json_set(jb, o, "dist_host_stall_frac", tp_json_real(ran_ok(d) ? d->host_stall : NAN));
  tp_json_set(jb, o, "evidence", row->evidence[0] ? tp_json_str(row->evidence) : json_null());
  tp_json_set(jb, o, "traced", json_boolean(row->dist.has_trace));
  tp_json_set(jb, o, "dist_config_id", jid(d));
  tp_json_set(jb, o, "stock_config_id", jid(&row->stock));
  tp_json_set(jb, o, "gemm_config_id", jid(&row->gemm));
  tp_json_set(jb, o, "comm_config_id", jid(&row->comm));
  tp_json_set(jb, o, "config_key", tp_json_str(d->present ? d->config_key : row->stock.config_key));
  return o;
}

static json_t *json_skipped(tp_json_builder *jb, const config *c) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "config_id", json_integer(c->id));
  tp_json_set(jb, o, "kind", tp_json_str(c->kind));
  tp_json_set(jb, o, "backend", tp_json_str(c->backend));
  json_axes(jb, o, c);
  tp_json_set(jb, o, "schedule_requested", tp_json_str(c->schedule));
  tp_json_set(jb, o, "chunks_requested", json_integer(c->chunks));
  tp_json_set(jb, o, "status", tp_json_str(c->status));
  tp_json_set(jb, o, "reason", tp_json_str(c->reason));
  tp_json_set(jb, o, "config_key", tp_json_str(c->config_key));
  return o;
}

static json_t *json_summary(tp_json_builder *jb, const summary *sum) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "rows", json_integer(sum->rows));
  tp_json_set(jb, o, "geomean_speedup", tp_json_real(sum->geomean_speedup));
  tp_json_set(jb, o, "bound_rows", json_integer(sum->bound_rows));
  tp_json_set(jb, o, "median_dist_over_bound", tp_json_real(sum->median_dist_bound));
  tp_json_set(jb, o, "worst_dist_over_bound", tp_json_real(sum->worst_dist_bound));
  tp_json_set(jb, o, "median_dist_over_strict", tp_json_real(sum->median_dist_strict));
  tp_json_set(jb, o, "worst_dist_over_strict", tp_json_real(sum->worst_dist_strict));
  tp_json_set(jb, o, "rows_no_difference", json_integer(sum->same_rows));
  tp_json_set(jb, o, "stock_path_rows", json_integer(sum->stock_path_rows));
  tp_json_set(jb, o, "stock_path_geomean", tp_json_real(sum->stock_path_geomean));
  tp_json_set(jb, o, "failed_rows", json_integer(sum->failed_rows));
  tp_json_set(jb, o, "rejected_or_missing_rows", json_integer(sum->other_rows));
  tp_json_set(jb, o, "worst_rank_skew", tp_json_real(sum->worst_skew));
  tp_json_set(jb, o, "worst_host_stall_frac", tp_json_real(sum->worst_stall));
  return o;
}

static tp_rc write_json(FILE *out, const report *rep) {
  tp_json_builder jb = {0};
  json_t *root = json_object();
  json_t *rows = json_array();
  json_t *skipped = json_array();
  if (!root || !rows || !skipped) jb.failed = 1;
  for (size_t i = 0; rows && i < rep->n_rows; i++)
    tp_json_append(&jb, rows, json_row(&jb, &rep->rows[i]));
  for (size_t i = 0; skipped && i < rep->n_skipped; i++)
    tp_json_append(&jb, skipped, json_skipped(&jb, &rep->skipped[i]));
  if (root) {
    tp_json_set(&jb, root, "run", json_run(&jb, &rep->run));
    tp_json_set(&jb, root, "rows", rows);
    tp_json_set(&jb, root, "rejected", skipped);
    tp_json_set(&jb, root, "summary", json_summary(&jb, &rep->sum));
  } else {
    json_decref(rows);
    json_decref(skipped);
  }
  tp_rc rc = TP_OK;
  if (jb.failed) rc = TP_FAIL(TP_EOOM, "report: building the JSON document failed (out of memory)");
  else if (json_dumpf(root, out, JSON_INDENT(2)) != 0 || fputc('\n', out) == EOF)
    rc = TP_FAIL(TP_EIO, "report: writing the JSON document failed");
  json_decref(root);
  return rc;
}

/* ---- entry points ------------------------------------------------------- */

tp_rc tp_report_format_parse(const char *name, tp_report_format *out) {
  if (!name || !out) return TP_FAIL(TP_EUSAGE, "no report format given (md, csv, json)");
  if (!strcasecmp(name, "md") || !strcasecmp(name, "markdown")) *out = TP_FMT_MARKDOWN;
  else if (!strcasecmp(name, "csv")) *out = TP_FMT_CSV;
  else if (!strcasecmp(name, "json")) *out = TP_FMT_JSON;
  else return TP_FAIL(TP_EUSAGE, "unknown report format \"%s\" (md, csv, json)", name);
  return TP_OK;
}

/* Nothing to show is an error, so a typo in a filter is not a blank table. */
static tp_rc check_not_empty(tp_store *store, const report *rep) {
  if (rep->n_rows > 0 || rep->n_skipped > 0) return TP_OK;
  const tp_report_filter *f = rep->filter;
  return TP_FAIL(TP_EUSAGE, "%s: run %lld has no op configurations%s%s%s%s%s%s%s%s%s",
                 tp_store_path(store), (long long)rep->run.id,
                 (f->model || f->layer || f->pass || f->dtype) ? " matching the filter:" : "",
                 f->model ? " model=" : "", or_empty(f->model), f->layer ? " layer=" : "",
                 or_empty(f->layer), f->pass ? " pass=" : "", or_empty(f->pass),
                 f->dtype ? " dtype=" : "", or_empty(f->dtype));
}

static tp_rc render(FILE *out, const report *rep, tp_report_format fmt) {
  switch (fmt) {
  case TP_FMT_MARKDOWN: write_markdown(out, rep); break;
  case TP_FMT_CSV: write_csv(out, rep); break;
  case TP_FMT_JSON: TP_TRY(write_json(out, rep)); break;
  default: return TP_FAIL(TP_EUSAGE, "unknown report format %d", (int)fmt);
  }
  if (fflush(out) != 0 || ferror(out)) return TP_FAIL(TP_EIO, "report: writing the output failed");
  return TP_OK;
}

tp_rc tp_report_throughput(tp_store *store, const tp_report_filter *filter, tp_report_format fmt,
                           FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_throughput: NULL argument");
  static const tp_report_filter no_filter = {0};
  report rep = {0};
  rep.filter = filter ? filter : &no_filter;
  int64_t run_id = 0;
  TP_TRY(tp_store_find_run(store, rep.filter->run_id, rep.filter->commit, &run_id));
  tp_rc rc = load_report(store, run_id, &rep);
  if (rc == TP_OK) rc = check_not_empty(store, &rep);
  if (rc == TP_OK) rc = derive_report(&rep);
  if (rc == TP_OK) rc = render(out, &rep, fmt);
  free_report(&rep);
  return rc;
}
