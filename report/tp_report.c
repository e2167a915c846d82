/*
 * tp_report.c — the throughput table (see tp_report.h): reads one run of a
 * tpbench database, pairs every dist_gemm op with its case's stock op, GEMM
 * alone and collective alone (stock and the collective alone in both
 * variants where the run has them: plain, and on NCCL symmetric windows),
 * derives speedup (against the faster stock) and bound (with the faster
 * collective), and writes markdown, CSV or JSON.
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
#include "common/tp_vocab.h"
#include "report/tp_keys.h"
#include "report/tp_report_internal.h"
#include "report/tp_report_util.h"
#include "report/tp_system_report.h"

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
  char **strings[] = {&c->kind,         &c->backend,    &c->model,      &c->layer,  &c->proj,
                      &c->schedule,     &c->dtype,      &c->pass,       &c->status, &c->reason,
                      &c->numerics_ref, &c->config_key, &c->ran,        &c->ac,     &c->graph_sizes,
                      &c->rs_sum,       &c->numerics,   &c->comm_dtype, &c->symm};
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
  C_STALL,
  C_PEAK,
  C_DP,
  C_AC,
  C_GRAPH_SIZES,
  C_RS_SUM,
  C_ACTIVATION,
  C_ALLOC_PEAK,
  C_NUMERICS,
  C_COMM_DTYPE,
  C_FSDP_TRAFFIC,
  C_SYMM,
  C_TRAFFIC
};

static const char config_sql[] =
    "SELECT config_id, kind, backend, model, layer, proj, schedule, chunks, tp, batch, seqlen, "
    "tokens, m, n, k, n_weights, dtype, sp, pass, graph, save_gathered, status, reason, "
    "config_key, has_result, median_us, cv, tokens_per_s, tflops, workspace_bytes, rel_err, "
    "numerics_ref, (SELECT bytes_moved FROM results WHERE results.config_id = "
    "config_results.config_id), rank_skew, host_stall_frac, peak_mem_bytes, dp, ac, graph_sizes, "
    "rs_sum, activation_bytes, alloc_peak_bytes, numerics, comm_dtype, fsdp_traffic, symm, "
    "traffic_bytes FROM config_results WHERE config_id = ?";

static tp_rc fill_config_strings(sqlite3_stmt *s, config *c) {
  struct {
    int col;
    char **dst;
  } texts[] = {{C_KIND, &c->kind},
               {C_BACKEND, &c->backend},
               {C_MODEL, &c->model},
               {C_LAYER, &c->layer},
               {C_PROJ, &c->proj},
               {C_SCHEDULE, &c->schedule},
               {C_DTYPE, &c->dtype},
               {C_PASS, &c->pass},
               {C_STATUS, &c->status},
               {C_REASON, &c->reason},
               {C_KEY, &c->config_key},
               {C_REF, &c->numerics_ref},
               {C_AC, &c->ac},
               {C_GRAPH_SIZES, &c->graph_sizes},
               {C_RS_SUM, &c->rs_sum},
               {C_NUMERICS, &c->numerics},
               {C_COMM_DTYPE, &c->comm_dtype},
               {C_SYMM, &c->symm}};
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
  c->peak_mem_bytes = real_column(s, C_PEAK);
  c->dp = int_column(s, C_DP, 1);
  c->activation_bytes = real_column(s, C_ACTIVATION);
  c->alloc_peak_bytes = real_column(s, C_ALLOC_PEAK);
  c->fsdp_traffic = int_column(s, C_FSDP_TRAFFIC, 0);
  c->traffic_bytes = real_column(s, C_TRAFFIC);
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
  TP_TRY(prepare(
      r,
      "SELECT commit_sha, host, gpu_name, driver_version, cuda_version, nccl_version, "
      "cublas_version, cupti_version, command_line, command, started_at, finished_at, "
      "dirty, gpu_count, warmup_iters, measure_iters, uuid, test_knobs FROM runs WHERE id = ?",
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
    if (rc == TP_OK) rc = dup_column(s, 17, &h->test_knobs);
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
  free(h->test_knobs);
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
  "(?2 IS NULL OR model = ?2 COLLATE NOCASE) AND (?3 IS NULL OR layer = ?3) AND (?4 IS NULL OR "   \
  "pass = ?4) AND "                                                                                \
  "(?5 IS NULL OR dtype = ?5)"

/* A row's references in its case (c: the table with its run_id and
 * case_key): the stock op in both variants, the GEMM alone, the collective
 * alone in both variants. */
#define REF_JOINS                                                                                  \
  "LEFT JOIN refs s ON s.run_id = c.run_id AND s.case_key = c.case_key AND s.kind = 'op' AND "     \
  "s.variant = 'plain' "                                                                           \
  "LEFT JOIN refs sw ON sw.run_id = c.run_id AND sw.case_key = c.case_key AND sw.kind = 'op' AND " \
  "sw.variant = 'window' "                                                                         \
  "LEFT JOIN refs g ON g.run_id = c.run_id AND g.case_key = c.case_key AND g.kind = 'gemm' "       \
  "LEFT JOIN refs cm ON cm.run_id = c.run_id AND cm.case_key = c.case_key AND cm.kind = 'comm' "   \
  "AND cm.variant = 'plain' "                                                                      \
  "LEFT JOIN refs cw ON cw.run_id = c.run_id AND cw.case_key = c.case_key AND cw.kind = 'comm' "   \
  "AND cw.variant = 'window' "

/* The throughput_rows view of schemas/001_init.sql, spelled out for the
 * layers of `tpbench run` as well: they are kind 'layer' where the op
 * benchmark's are kind 'op', and pair with their case's stock layer, GEMMs
 * alone and collectives alone the same way. Stock and the collective alone
 * come in two variants (schedule 'nccl-window': on NCCL symmetric windows;
 * anything else plain, as every run before the variant): each is picked
 * apart. Cases without dist_gemm (stock alone, e.g. at TP 1) are rows too. */
#define ROWS_SQL                                                                                   \
  "WITH refs AS (SELECT config_id, run_id, case_key, kind, variant FROM (SELECT config_id, "       \
  "run_id, case_key, CASE kind WHEN 'layer' THEN 'op' ELSE kind END AS kind, CASE WHEN "           \
  "schedule = 'nccl-window' THEN 'window' ELSE 'plain' END AS variant, row_number() OVER "         \
  "(PARTITION BY run_id, case_key, CASE kind WHEN 'layer' THEN 'op' ELSE kind END, CASE WHEN "     \
  "schedule = 'nccl-window' THEN 1 ELSE 0 END ORDER BY status = 'ok' DESC, config_id DESC) AS "    \
  "pick FROM config_results WHERE (kind IN ('op', 'layer') AND backend = 'stock') OR (kind = "     \
  "'gemm' AND backend = 'cublaslt') OR (kind = 'comm' AND backend = 'nccl')) WHERE pick = 1), "    \
  "pairs AS (SELECT c.run_id, c.id AS dist_id, s.config_id AS stock_id, g.config_id AS gemm_id, "  \
  "cm.config_id AS comm_id, sw.config_id AS stock_window_id, cw.config_id AS comm_window_id, "     \
  "c.model, c.layer, c.pass, c.dtype, (SELECT min(x.id) FROM configs x WHERE x.run_id = "          \
  "c.run_id AND x.case_key = c.case_key) AS order_key FROM configs c " REF_JOINS                   \
  "WHERE c.kind IN ('op', 'layer') AND c.backend = 'dist_gemm' "                                   \
  "UNION ALL SELECT c.run_id, NULL, s.config_id, g.config_id, cm.config_id, sw.config_id, "        \
  "cw.config_id, sc.model, sc.layer, sc.pass, sc.dtype, (SELECT min(x.id) FROM configs x WHERE "   \
  "x.run_id = c.run_id AND x.case_key = c.case_key) FROM (SELECT run_id, case_key, "               \
  "min(config_id) AS any_id FROM refs WHERE kind = 'op' GROUP BY run_id, case_key) c JOIN "        \
  "configs sc ON sc.id = c.any_id " REF_JOINS                                                      \
  "WHERE NOT EXISTS (SELECT 1 FROM configs d WHERE d.run_id = c.run_id AND d.case_key = "          \
  "c.case_key AND d.kind IN ('op', 'layer') AND d.backend = 'dist_gemm')) "

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

/* A table row: its dist_gemm, stock, GEMM-alone, collective-alone, window
 * stock and window collective-alone ids. */
static tp_rc take_row(reader *r, report *rep, sqlite3_stmt *s) {
  table_row *grown = tp_grow_array(rep->rows, &rep->rows_cap, rep->n_rows, sizeof *rep->rows);
  if (!grown) return out_of_memory();
  rep->rows = grown;
  table_row *row = &rep->rows[rep->n_rows++];
  memset(row, 0, sizeof *row);
  config *parts[] = {&row->dist, &row->stock,        &row->gemm,
                     &row->comm, &row->stock_window, &row->comm_window};
  for (int i = 0; i < 6; i++) TP_TRY(load_config(r, sqlite3_column_int64(s, i), parts[i]));
  return TP_OK;
}

static tp_rc load_rows(reader *r, report *rep) {
  return each_filtered_row(
      r, rep,
      ROWS_SQL "SELECT coalesce(dist_id, 0), coalesce(stock_id, 0), coalesce(gemm_id, 0), "
               "coalesce(comm_id, 0), coalesce(stock_window_id, 0), coalesce(comm_window_id, 0) "
               "FROM pairs WHERE run_id = ?1 AND " FILTER_SQL " ORDER BY order_key, dist_id",
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
  return each_filtered_row(r, rep,
                           "SELECT id FROM configs WHERE run_id = ?1 AND status <> 'ok' AND kind "
                           "<> 'drift' AND " FILTER_SQL " ORDER BY id",
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

/* The speedup's and dist/bound's intervals of a row whose stock and dist_gemm
 * ran: against the faster stock, the bound's with the faster collective. */
static tp_rc load_row_intervals(tp_store *store, table_row *row) {
  row->speedup_lo = row->speedup_hi = row->bound_lo = row->bound_hi = NAN;
  const config *best_stock = tp_report_faster(&row->stock, &row->stock_window);
  const config *best_comm = tp_report_faster(&row->comm, &row->comm_window);
  if (!tp_report_ran_ok(&row->dist) || !best_stock) return TP_OK;
  series dist, stock, ref;
  memset(&dist, 0, sizeof dist);
  memset(&stock, 0, sizeof stock);
  memset(&ref, 0, sizeof ref);
  tp_rc rc = load_series(store, &row->dist, &dist);
  if (rc == TP_OK) rc = load_series(store, best_stock, &stock);
  if (rc == TP_OK) rc = ratio_interval(&stock, &dist, &row->speedup_lo, &row->speedup_hi);
  /* the bound is the slower half: its interval is dist over that reference's */
  if (rc == TP_OK && tp_report_ran_ok(&row->gemm) && best_comm) {
    const config *binding = row->gemm.median_us >= best_comm->median_us ? &row->gemm : best_comm;
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
    free_config(&rep->rows[i].stock_window);
    free_config(&rep->rows[i].comm_window);
    free(rep->rows[i].note);
  }
  for (size_t i = 0; i < rep->n_skipped; i++) free_config(&rep->skipped[i]);
  free(rep->rows);
  free(rep->skipped);
  free(rep->models);
  free_run(&rep->run);
}

/* ---- deriving ----------------------------------------------------------- */

/* "ok", "failed" or "not checked". */
static const char *evidence_state(const tp_trace_info *t) {
  return t->evidence[0] ? t->evidence : t->evidence_ok ? "ok" : "failed";
}

int tp_report_ran_ok(const config *c) {
  return c->present && c->status && !strcmp(c->status, "ok") && c->has_result;
}

/* Whether a configuration's numerics or its schedule evidence failed: what
 * compare's faster reference also refuses (its entries' ok). */
static int failed_a_check(const config *c) {
  if (c->numerics && !strcmp(c->numerics, "failed")) return 1;
  return c->has_trace && !strcmp(evidence_state(&c->trace), "failed");
}

const config *tp_report_faster(const config *plain, const config *window) {
  const int p = tp_report_ran_ok(plain), w = tp_report_ran_ok(window);
  if (p && w && failed_a_check(plain) != failed_a_check(window))
    return failed_a_check(window) ? plain : window;
  if (p && w) return window->median_us < plain->median_us ? window : plain;
  return p ? plain : w ? window : NULL;
}

/* Median time in ms of a configuration that ran; NaN otherwise. */
static double median_ms(const config *c) {
  return tp_report_ran_ok(c) ? c->median_us / 1000.0 : NAN;
}

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

/* The row's stock as its status speaks of it: the faster that ran, else
 * plain when the case has it, else the window variant. */
static const config *stock_of(const table_row *row) {
  if (row->best_stock) return row->best_stock;
  return row->stock.present || !row->stock_window.present ? &row->stock : &row->stock_window;
}

/* The row's status and what explains its blanks. */
static tp_rc derive_status(table_row *row) {
  const config *d = &row->dist, *s = stock_of(row);
  if (!d->present) {
    row->status = "missing";
    row->note = strdup("no dist_gemm configuration for this case");
  } else if (!tp_report_ran_ok(d)) {
    row->status = d->status ? d->status : "unknown";
    if (!d->reason) return TP_OK;
    row->note = strdup(d->reason);
  } else {
    row->status = "ok";
    if (!s->present) row->note = strdup("no stock configuration for this case");
    else if (!tp_report_ran_ok(s))
      row->note = format_note("stock %s: %s", s->status ? s->status : "unknown",
                              s->reason ? s->reason : "no reason recorded");
    else return TP_OK;
  }
  return row->note ? TP_OK : out_of_memory();
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
  const config *d = &row->dist, *s = stock_of(row);
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
  row->stock_window_ms = median_ms(&row->stock_window);
  row->dist_ms = median_ms(&row->dist);
  row->gemm_ms = median_ms(&row->gemm);
  row->comm_ms = median_ms(&row->comm);
  row->comm_window_ms = median_ms(&row->comm_window);
  /* against the strongest stock, so no gain comes from a weak baseline */
  row->best_stock = tp_report_faster(&row->stock, &row->stock_window);
  row->best_comm = tp_report_faster(&row->comm, &row->comm_window);
  row->best_stock_ms = row->best_stock ? median_ms(row->best_stock) : NAN;
  row->best_comm_ms = row->best_comm ? median_ms(row->best_comm) : NAN;
  row->speedup = ratio(row->best_stock_ms, row->dist_ms);
  /* Both references are needed: half a bound would flatter the fused op. */
  row->bound_ms = (isfinite(row->gemm_ms) && isfinite(row->best_comm_ms))
                      ? fmax(row->gemm_ms, row->best_comm_ms)
                      : NAN;
  row->dist_over_bound = ratio(row->dist_ms, row->bound_ms);
  /* bytes over GB/s: bytes / (GB/s · 1e9) s = bytes / (GB/s · 1e6) ms */
  double peak_ms = row->dist.bytes_moved / (peer_peak_gbps * 1e6);
  row->strict_bound_ms = isfinite(row->gemm_ms) && isfinite(peak_ms) && tp_report_ran_ok(&row->dist)
                             ? fmax(row->gemm_ms, peak_ms)
                             : NAN;
  row->dist_over_strict = ratio(row->dist_ms, row->strict_bound_ms);
  int dist_ran = tp_report_ran_ok(&row->dist);
  row->workspace_mib = dist_ran ? row->dist.workspace_bytes / (1024.0 * 1024.0) : NAN;
  row->cv_pct = dist_ran ? row->dist.cv * 100.0 : NAN;
  row->both_ok = isfinite(row->speedup) && row->speedup > 0;
  /* an op whose recorded schedule is the stock path's ("nccl") did not fuse */
  row->stock_path = row->dist.ran &&
                    (!strncmp(row->dist.ran, "nccl", 4) || strstr(row->dist.ran, "+nccl") != NULL);
  return derive_status(row);
}

/* Which rows a summary covers: one model's, or (model NULL) every model's
 * but the toys', unless toys_too. */
typedef struct {
  const char *model;
  int toys_too;
} scope;

/* The filter's list when it names one (tests do), else tpbench's toy shapes: every reader of a
 * run's headline gets the same rule without knowing the presets. */
static int is_toy(const report *rep, const char *model) {
  const tp_report_filter *f = rep->filter;
  if (!f->toy_models) return tp_model_is_toy(model);
  for (int i = 0; model && i < f->n_toy_models; i++)
    if (f->toy_models[i] && !strcmp(f->toy_models[i], model)) return 1;
  return 0;
}

int tp_report_row_is_toy(const report *rep, const table_row *row) {
  return is_toy(rep, tp_report_case_of(row)->model);
}

static int in_scope(const report *rep, const table_row *row, scope sc) {
  const char *model = tp_report_case_of(row)->model;
  if (sc.model) return model && !strcmp(model, sc.model);
  return sc.toys_too || !is_toy(rep, model);
}

/* Median and worst of the finite dist/strict ratios of the rows in the summary. */
static tp_rc summarise_strict(const report *rep, scope sc, summary *sum) {
  double *v = malloc((rep->n_rows ? rep->n_rows : 1) * sizeof *v);
  if (!v) return out_of_memory();
  sum->median_dist_strict = sum->worst_dist_strict = NAN;
  for (size_t i = 0; i < rep->n_rows; i++)
    if (in_scope(rep, &rep->rows[i], sc) && rep->rows[i].both_ok &&
        isfinite(rep->rows[i].dist_over_strict))
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

/* Counts a row without a speedup: failed, or rejected/missing. */
static void count_unpaired(const table_row *row, summary *sum) {
  if (row->dist.present && row->dist.status && strcmp(row->dist.status, "ok") != 0 &&
      strcmp(row->dist.status, "rejected") != 0)
    sum->failed_rows++;
  else sum->other_rows++;
}

static tp_rc summarise(const report *rep, scope sc, summary *sum) {
  memset(sum, 0, sizeof *sum);
  TP_TRY(summarise_strict(rep, sc, sum));
  double *bounds = malloc((rep->n_rows ? rep->n_rows : 1) * sizeof *bounds);
  if (!bounds) return out_of_memory();
  double log_sum = 0, stock_path_log_sum = 0;
  sum->worst_dist_bound = sum->worst_skew = sum->worst_stall = NAN;
  for (size_t i = 0; i < rep->n_rows; i++) {
    const table_row *row = &rep->rows[i];
    if (!in_scope(rep, row, sc)) continue;
    const config *both[3] = {&row->stock, &row->stock_window, &row->dist};
    for (int k = 0; k < 3; k++) {
      if (!tp_report_ran_ok(both[k])) continue;
      sum->worst_skew = larger(sum->worst_skew, both[k]->rank_skew);
      sum->worst_stall = larger(sum->worst_stall, both[k]->host_stall);
    }
    if (!row->both_ok) {
      count_unpaired(row, sum);
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

/* One summary per model the rows name, in their order; real models first,
 * toys after them. */
static tp_rc summarise_models(report *rep) {
  rep->models = calloc(rep->n_rows ? rep->n_rows : 1, sizeof *rep->models);
  if (!rep->models) return out_of_memory();
  for (int toy = 0; toy <= 1; toy++) {
    for (size_t i = 0; i < rep->n_rows; i++) {
      const char *model = tp_report_case_of(&rep->rows[i])->model;
      if (!model || is_toy(rep, model) != toy) continue;
      int seen = 0;
      for (size_t m = 0; m < rep->n_models && !seen; m++)
        seen = !strcmp(rep->models[m].model, model);
      if (seen) continue;
      model_summary *ms = &rep->models[rep->n_models++];
      ms->model = model;
      ms->toy = toy;
      TP_TRY(summarise(rep, (scope){model, 1}, &ms->sum));
    }
  }
  return TP_OK;
}

/* The headline leaves toy models out; a run of toys alone is summarised
 * over them, and says so. */
static tp_rc derive_summary(report *rep) {
  TP_TRY(summarise(rep, (scope){NULL, 0}, &rep->sum));
  int real_rows =
      rep->sum.rows + rep->sum.stock_path_rows + rep->sum.failed_rows + rep->sum.other_rows;
  if (real_rows == 0 && rep->n_rows > 0) {
    rep->headline_toy_only = 1;
    TP_TRY(summarise(rep, (scope){NULL, 1}, &rep->sum));
  }
  return summarise_models(rep);
}

static tp_rc derive_report(report *rep) {
  for (size_t i = 0; i < rep->n_rows; i++) {
    TP_TRY(derive_row(&rep->rows[i], rep->peer_peak_gbps));
    const config *c = tp_report_case_of(&rep->rows[i]);
    tp_short_key(c->config_key, rep->rows[i].short_key, sizeof rep->rows[i].short_key);
    if (rep->rows[i].evidence[0]) rep->any_trace = 1;
    if (rep->rows[i].stock_window.present || rep->rows[i].comm_window.present) rep->any_window = 1;
  }
  return derive_summary(rep);
}

/* ---- text helpers ---------------------------------------------------------- */

static const char *or_empty(const char *s) { return s ? s : ""; }

/* The axes of a case, taken from whichever configuration the row has. */
const config *tp_report_case_of(const table_row *row) {
  return row->dist.present ? &row->dist : &row->stock;
}

tp_config_axes tp_report_axes_of(const config *c) {
  return (tp_config_axes){.kind = c->kind,
                          .model = c->model,
                          .op_or_layer = c->layer,
                          .proj = c->proj,
                          .backend = c->backend,
                          .schedule = c->schedule,
                          .chunks = (int)c->chunks,
                          .tp = (int)c->tp,
                          .batch = (int)c->batch,
                          .seqlen = (int)c->seqlen,
                          .tokens = c->tokens,
                          .m = c->m,
                          .n = c->n,
                          .k = c->k,
                          .dtype = c->dtype,
                          .n_weights = (int)c->n_weights,
                          .sp = (int)c->sp,
                          .pass = c->pass,
                          .graph = (int)c->graph,
                          .save_gathered = (int)c->save_gathered,
                          .dp = (int)c->dp,
                          .ac = c->ac,
                          .graph_sizes = c->graph_sizes,
                          .rs_sum = c->rs_sum,
                          .comm_dtype = c->comm_dtype,
                          .fsdp_traffic = (int)c->fsdp_traffic,
                          .symm = c->symm};
}

/* A configuration's label (report/tp_report_util.h). */
static void describe_config(const config *c, char *buf, size_t cap) {
  tp_config_axes axes = tp_report_axes_of(c);
  tp_config_label(buf, cap, &axes);
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

void tp_report_md_header(FILE *out, const report *rep, const char *title) {
  const run_header *h = &rep->run;
  fprintf(out, "## tpbench %s: run %lld\n\n", title, (long long)h->id);
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
  /* "not recorded", not "?": a reader took "CUPTI ?" for a version string (runs before the
   * system record, and runs without tracing, hold none) */
  md_words(out, "\n- **software** CUDA ", h->cuda, "not recorded");
  md_words(out, ", NCCL ", h->nccl, "not recorded");
  md_words(out, ", cuBLAS ", h->cublas, "not recorded");
  md_words(out, ", CUPTI ", h->cupti, "not recorded");
  fputs("\n- **iterations** ", out);
  md_count(out, h->warmup_iters);
  fputs(" warm-up, ", out);
  md_count(out, h->measure_iters);
  fputs(" measured\n", out);
  fputs("- **command** ", out);
  tp_md_code(out, h->command_line ? h->command_line : "?");
  fputc('\n', out);
  /* a run under a test knob says so first: its figures are not the stack's own */
  if (h->test_knobs && *h->test_knobs)
    md_words(out, "- **test knobs in force** ", h->test_knobs, "");
  if (h->test_knobs && *h->test_knobs) fputc('\n', out);
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

/* "debug, tiny" : the toy models among the rows. */
static void md_toy_names(FILE *out, const report *rep) {
  int n = 0;
  for (size_t m = 0; m < rep->n_models; m++) {
    if (!rep->models[m].toy) continue;
    fputs(n++ ? ", " : "", out);
    tp_md_text(out, rep->models[m].model);
  }
}

static void md_headline(FILE *out, const report *rep) {
  const summary *sum = &rep->sum;
  char a[64], b[64], c[64];
  const char *whose = rep->headline_toy_only ? "toy models only: " : "";
  if (sum->rows == 0) {
    fprintf(out, "\n**Summary** (%s): no row has both stock and fused dist_gemm results.\n",
            rep->headline_toy_only ? "toy models only" : "models that are not toys");
    return;
  }
  fprintf(out,
          "\n**Summary** (%sover %d row%s with stock and dist_gemm results): geometric-mean "
          "speedup %s",
          whose, sum->rows, sum->rows == 1 ? "" : "s",
          tp_fmt_num(a, sizeof a, sum->geomean_speedup, 3));
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
}

/* One line per model: the headline's figures over its rows alone. */
static void md_model_table(FILE *out, const report *rep) {
  if (rep->n_models == 0) return;
  fputs("\n| model | rows with a speedup | geomean speedup | no difference | dist/bound median | "
        "dist/bound worst | failed | rejected or missing |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|\n",
        out);
  char name[128];
  for (size_t m = 0; m < rep->n_models; m++) {
    const model_summary *ms = &rep->models[m];
    snprintf(name, sizeof name, "%s%s", ms->model, ms->toy ? " (toy)" : "");
    tp_md_cell(out, name);
    fprintf(out, "| %d ", ms->sum.rows);
    tp_md_num(out, ms->sum.geomean_speedup, 3);
    fprintf(out, "| %d ", ms->sum.same_rows);
    tp_md_num(out, ms->sum.median_dist_bound, 2);
    tp_md_num(out, ms->sum.worst_dist_bound, 2);
    fprintf(out, "| %d | %d |\n", ms->sum.failed_rows, ms->sum.other_rows);
  }
  int toys = 0;
  for (size_t m = 0; m < rep->n_models; m++) toys += rep->models[m].toy;
  if (toys && !rep->headline_toy_only) {
    fputs("\nToy models, kept out of the headline: ", out);
    md_toy_names(out, rep);
    fputs(".\n", out);
  }
}

static void md_summary(FILE *out, const report *rep) {
  md_headline(out, rep);
  md_summary_apart(out, &rep->sum);
  md_model_table(out, rep);
}

static int same_outcome(const config *a, const config *b) {
  return !strcmp(or_empty(a->status), or_empty(b->status)) &&
         !strcmp(or_empty(a->reason), or_empty(b->reason));
}

/* Configurations that did not run for the same status and reason, as one line: a one-GPU run
 * rejects every dist_gemm and collective-alone configuration alike, and a line each was a wall
 * that hid the ones that failed. */
static void md_skipped_group(FILE *out, const report *rep, size_t first, unsigned char *shown) {
  const config *c = &rep->skipped[first];
  size_t n = 0;
  for (size_t j = first; j < rep->n_skipped; j++)
    n += !shown[j] && same_outcome(c, &rep->skipped[j]);
  if (n == 1) {
    char what[512], key[TP_SHORT_KEY_LEN + 1];
    describe_config(c, what, sizeof what);
    tp_short_key(c->config_key, key, sizeof key);
    fprintf(out, "- config %lld, key %s (", (long long)c->id, key);
    tp_md_text(out, what);
    md_words(out, "): ", c->status, "");
    md_words(out, ": ", c->reason, "no reason recorded");
    fputc('\n', out);
    shown[first] = 1;
    return;
  }
  fprintf(out, "- %zu configurations, ", n);
  md_words(out, "", c->status, "");
  md_words(out, ": ", c->reason, "no reason recorded");
  fputs(": configs", out);
  for (size_t j = first, k = 0; j < rep->n_skipped; j++) {
    if (shown[j] || !same_outcome(c, &rep->skipped[j])) continue;
    fprintf(out, "%s %lld", k++ ? "," : "", (long long)rep->skipped[j].id);
    shown[j] = 1;
  }
  fputc('\n', out);
}

static void md_skipped(FILE *out, const report *rep) {
  if (rep->n_skipped == 0) return;
  fprintf(out,
          "\n**Not run** (%zu configuration%s; `--format json` lists each under "
          "\"rejected\"):\n\n",
          rep->n_skipped, rep->n_skipped == 1 ? "" : "s");
  unsigned char *shown = calloc(rep->n_skipped, 1);
  for (size_t i = 0; i < rep->n_skipped; i++) {
    if (shown && shown[i]) continue;
    if (shown) md_skipped_group(out, rep, i, shown);
  }
  free(shown);
}

static void write_markdown(FILE *out, const report *rep, const column_set *cols) {
  tp_report_md_header(out, rep, "throughput");
  tp_report_md_rows(out, rep, cols);
  if (rep->n_rows == 0) fputs("\n(no op configurations in this selection)\n", out);
  fputs("\nTimes are medians of the slowest rank per iteration, in ms; speedup = stock / "
        "dist_gemm and dist/bound with their 95 % intervals; id and key name the "
        "configuration for `history` and `trace`; `--columns all` shows every column.\n",
        out);
  if (rep->any_window)
    fputs("Stock runs in two variants, plain NCCL and the same NCCL collectives on symmetric "
          "windows (stock window ms; ncclMemAlloc + ncclCommWindowRegister): the speedup is "
          "against the faster of the two per row (best stock; a variant whose numerics or schedule "
          "evidence failed is not taken while the other passed), and the bound takes the faster "
          "collective alone.\n",
          out);
  md_summary(out, rep);
  if (rep->any_trace)
    fputs("\nTrace columns (dist_gemm, from its traced window): overlap % (of communication: "
          "bytes moving), sync (barriers, waits, signals: beside it, in neither) and exposed comm "
          "are medians over ranks and iterations; trace overhead = traced / untraced median - 1; "
          "evidence says whether each op's trace, inside its own NVTX ranges, shows the schedule "
          "recorded as run: ok, failed or not checked (with the reason), or not traced.\n",
          out);
  md_skipped(out, rep);
}

/* ---- JSON --------------------------------------------------------------- */

json_t *tp_report_json_run(tp_json_builder *jb, const run_header *h) {
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
  tp_json_set(jb, o, "test_knobs", tp_json_str(h->test_knobs));
  tp_json_set(jb, o, "warmup_iters",
              h->warmup_iters < 0 ? json_null() : json_integer(h->warmup_iters));
  tp_json_set(jb, o, "measure_iters",
              h->measure_iters < 0 ? json_null() : json_integer(h->measure_iters));
  return o;
}

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
  tp_json_set(jb, o, "dp", json_integer(c->dp));
  tp_json_set(jb, o, "ac", tp_json_str(c->ac));
  tp_json_set(jb, o, "graph_sizes", tp_json_str(c->graph_sizes));
  tp_json_set(jb, o, "rs_sum", tp_json_str(c->rs_sum));
  tp_json_set(jb, o, "comm_dtype", tp_json_str(c->comm_dtype));
  tp_json_set(jb, o, "fsdp_traffic", json_boolean(c->fsdp_traffic));
  tp_json_set(jb, o, "symm", tp_json_str(c->symm));
}

static json_t *json_skipped(tp_json_builder *jb, const config *c) {
  json_t *o = json_object();
  if (!o) return NULL;
  char key[TP_SHORT_KEY_LEN + 1], label[512];
  tp_short_key(c->config_key, key, sizeof key);
  describe_config(c, label, sizeof label);
  tp_json_set(jb, o, "config_id", json_integer(c->id));
  tp_json_set(jb, o, "short_key", tp_json_str(key));
  tp_json_set(jb, o, "label", tp_json_str(label));
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

/* The figures of one summary; shares in percent. */
static void json_summary_fields(tp_json_builder *jb, json_t *o, const summary *sum) {
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
  tp_json_set(jb, o, "worst_rank_skew_pct", tp_json_real(100.0 * sum->worst_skew));
  tp_json_set(jb, o, "worst_host_stall_pct", tp_json_real(100.0 * sum->worst_stall));
}

static json_t *json_models(tp_json_builder *jb, const report *rep) {
  json_t *list = json_array();
  for (size_t m = 0; list && m < rep->n_models; m++) {
    json_t *o = json_object();
    if (o) {
      tp_json_set(jb, o, "model", tp_json_str(rep->models[m].model));
      tp_json_set(jb, o, "toy", json_boolean(rep->models[m].toy));
      json_summary_fields(jb, o, &rep->models[m].sum);
    }
    tp_json_append(jb, list, o);
  }
  return list;
}

/* The headline (toy models left out unless there is nothing else), then
 * one summary per model. */
static json_t *json_summary(tp_json_builder *jb, const report *rep) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_summary_fields(jb, o, &rep->sum);
  tp_json_set(jb, o, "toy_only", json_boolean(rep->headline_toy_only));
  tp_json_set(jb, o, "models", json_models(jb, rep));
  return o;
}

static tp_rc write_json(FILE *out, const report *rep, const column_set *cols) {
  tp_json_builder jb = {0};
  json_t *root = json_object();
  json_t *rows = json_array();
  json_t *skipped = json_array();
  if (!root || !rows || !skipped) jb.failed = 1;
  for (size_t i = 0; rows && i < rep->n_rows; i++)
    tp_json_append(&jb, rows, tp_report_json_row(&jb, rep, &rep->rows[i], cols));
  for (size_t i = 0; skipped && i < rep->n_skipped; i++)
    tp_json_append(&jb, skipped, json_skipped(&jb, &rep->skipped[i]));
  if (root) {
    tp_json_set(&jb, root, "run", tp_report_json_run(&jb, &rep->run));
    tp_json_set(&jb, root, "rows", rows);
    tp_json_set(&jb, root, "rejected", skipped);
    tp_json_set(&jb, root, "summary", json_summary(&jb, rep));
  } else {
    json_decref(rows);
    json_decref(skipped);
  }
  return tp_json_write_document(out, root, &jb, "report");
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
  column_set cols;
  TP_TRY(tp_report_columns_pick(rep->filter->columns, fmt, rep, &cols));
  switch (fmt) {
  case TP_FMT_MARKDOWN: write_markdown(out, rep, &cols); break;
  case TP_FMT_CSV: tp_report_csv_rows(out, rep, &cols); break;
  case TP_FMT_JSON: TP_TRY(write_json(out, rep, &cols)); break;
  default: return TP_FAIL(TP_EUSAGE, "unknown report format %d", (int)fmt);
  }
  if (fflush(out) != 0 || ferror(out)) return TP_FAIL(TP_EIO, "report: writing the output failed");
  return TP_OK;
}

/* A link probe's run: its header and its points, nothing else loaded. */
static tp_rc report_link_run(tp_store *store, report *rep, int64_t run_id, tp_report_format fmt,
                             FILE *out) {
  reader r = {tp_store_db(store), tp_store_path(store), NULL, NULL, store};
  tp_rc rc = TP_OK;
  /* "all" is every column of the run's table, which the fixed table is; names are not there */
  if (rep->filter->columns && strcmp(rep->filter->columns, "all") != 0)
    rc = TP_FAIL(TP_EUSAGE,
                 "%s: run %lld is a link probe: its table has fixed columns (size, "
                 "count, time, algbw, busbw); --columns applies to op and layer runs "
                 "(--columns all shows the fixed ones)",
                 tp_store_path(store), (long long)run_id);
  if (rc == TP_OK) rc = load_run(&r, run_id, &rep->run);
  if (rc == TP_OK) rc = tp_report_link(store, rep, fmt, out);
  if (rc == TP_OK && (fflush(out) != 0 || ferror(out)))
    rc = TP_FAIL(TP_EIO, "report: writing the output failed");
  free_run(&rep->run);
  return rc;
}

/* ---- the headline --------------------------------------------------------------------- */

static tp_headline_figures figures_of(const summary *sum) {
  return (tp_headline_figures){.rows = sum->rows,
                               .geomean_speedup = sum->geomean_speedup,
                               .bound_rows = sum->bound_rows,
                               .median_dist_over_bound = sum->median_dist_bound};
}

static void fill_headline(const report *rep, tp_headline *out) {
  memset(out, 0, sizeof *out);
  out->run_id = rep->run.id;
  out->figures = figures_of(&rep->sum);
  out->toy_only = rep->headline_toy_only;
  for (size_t m = 0; m < rep->n_models && out->n_toys < TP_HEADLINE_MAX_TOYS; m++) {
    if (!rep->models[m].toy) continue;
    snprintf(out->toys[out->n_toys].model, TP_HEADLINE_MODEL_MAX, "%s", rep->models[m].model);
    out->toys[out->n_toys++].figures = figures_of(&rep->models[m].sum);
  }
}

tp_rc tp_report_headline(tp_store *store, int64_t run_id, tp_headline *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_headline: NULL argument");
  static const tp_report_filter every_row = {0};
  report rep = {.filter = &every_row};
  int64_t id = 0;
  int is_link = 0;
  TP_TRY(tp_store_find_run(store, run_id, NULL, &id));
  TP_TRY(tp_report_is_link_run(store, id, &is_link));
  if (is_link)
    return TP_FAIL(TP_EUSAGE, "%s: run %lld is a link probe: it has no headline",
                   tp_store_path(store), (long long)id);
  tp_rc rc = load_report(store, id, &rep);
  if (rc == TP_OK) rc = check_not_empty(store, &rep);
  if (rc == TP_OK) rc = derive_report(&rep);
  if (rc == TP_OK) fill_headline(&rep, out);
  free_report(&rep);
  return rc;
}

/* "1.067x over 24 rows, dist/bound median 1.18 over 24" */
static int figures_text(char *buf, size_t cap, const tp_headline_figures *f) {
  char a[64], b[64];
  if (f->rows == 0) return snprintf(buf, cap, "no row with stock and fused dist_gemm results");
  int n =
      snprintf(buf, cap, "%sx geometric-mean speedup over %d row%s",
               tp_fmt_num(a, sizeof a, f->geomean_speedup, 3), f->rows, f->rows == 1 ? "" : "s");
  if (f->bound_rows && n >= 0 && (size_t)n < cap)
    n += snprintf(buf + n, cap - (size_t)n, ", median dist/bound %s over %d",
                  tp_fmt_num(b, sizeof b, f->median_dist_over_bound, 2), f->bound_rows);
  return n;
}

void tp_headline_line(const tp_headline *h, char *buf, size_t cap) {
  if (!cap) return;
  size_t used = 0;
  int n = snprintf(buf, cap, "%s", h->toy_only ? "toy models only: " : "");
  used = n > 0 ? (size_t)n : 0;
  if (used < cap) {
    n = figures_text(buf + used, cap - used, &h->figures);
    used += n > 0 ? (size_t)n : 0;
  }
  for (int i = 0; !h->toy_only && i < h->n_toys && used < cap; i++) {
    char a[64], b[64];
    const tp_headline_figures *f = &h->toys[i].figures;
    const char *sep = i ? ", " : "; toy models apart: ";
    n = f->rows == 0 ? snprintf(buf + used, cap - used, "%s%s no fused row", sep, h->toys[i].model)
                     : snprintf(buf + used, cap - used, "%s%s %sx, dist/bound %s", sep,
                                h->toys[i].model, tp_fmt_num(a, sizeof a, f->geomean_speedup, 3),
                                tp_fmt_num(b, sizeof b, f->median_dist_over_bound, 2));
    used += n > 0 ? (size_t)n : 0;
  }
}

tp_rc tp_report_throughput(tp_store *store, const tp_report_filter *filter, tp_report_format fmt,
                           FILE *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_throughput: NULL argument");
  static const tp_report_filter no_filter = {0};
  report rep = {0};
  rep.filter = filter ? filter : &no_filter;
  int64_t run_id = 0;
  TP_TRY(tp_store_find_run(store, rep.filter->run_id, rep.filter->commit, &run_id));
  int is_link = 0;
  TP_TRY(tp_report_is_link_run(store, run_id, &is_link));
  if (is_link) return report_link_run(store, &rep, run_id, fmt, out);
  tp_rc rc = load_report(store, run_id, &rep);
  if (rc == TP_OK) rc = check_not_empty(store, &rep);
  if (rc == TP_OK) rc = derive_report(&rep);
  if (rc == TP_OK) rc = render(out, &rep, fmt);
  free_report(&rep);
  return rc;
}
