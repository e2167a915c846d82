/*
 * tp_project_load.c — `tpbench project`'s reading side (tp_project_internal.h): the op shapes
 * (the request's, else those the database measured: pass fwd, `tpbench ops`' three ops), the
 * GEMM-alone rows, the latest link probe and the pipeline's costs from it, then every
 * prediction with the stock and dist_gemm rows measured at its degree and the error summary.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/tp_array.h"
#include "report/tp_project_internal.h"
#include "report/tp_report_util.h"

/* The rows `tpbench ops` measured of its three ops, forward pass (the model's scope). */
#define OPS_FWD                                                                                    \
  "c.status = 'ok' AND c.pass = 'fwd' "                                                            \
  "AND c.layer IN ('ag_linear', 'ag_linear_multi', 'linear_rs') AND (?1 = 0 OR c.run_id = ?1)"

/* Distinct global shapes, in the order they were first measured (the matrix's order); ?2 > 0:
 * of that run only. */
static const char shapes_sql[] =
    "SELECT coalesce(c.model, ''), coalesce(c.proj, ''), c.layer, c.dtype, c.tokens, "
    "CASE WHEN c.layer = 'linear_rs' THEN c.n ELSE c.n * c.tp END AS gn, "
    "CASE WHEN c.layer = 'linear_rs' THEN c.k * c.tp ELSE c.k END AS gk, c.n_weights, min(c.id) "
    "FROM configs c WHERE c.kind IN ('op', 'gemm') AND (?2 = 0 OR c.run_id = ?2) AND " OPS_FWD
    " GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 9";

/* The GPU name of the run that measured a config (the parameter PARAM), "" for none. */
#define GPU_OF_CONFIG(param)                                                                       \
  "(SELECT coalesce(g.gpu_name, '') FROM configs gc LEFT JOIN runs g ON g.id = gc.run_id WHERE "   \
  "gc.id = " param ")"

/* ", 'bf16'" for each dtype this binary knows (tp_dtype_vocab): a GEMM row of another is never
 * read (take_gemm), so it neither picks the GPU nor counts. */
#define KNOWN_DTYPE(value, name, class) TP_VOCAB_IF(TP_VOCAB_ASKED_##class, ", '" name "'")

/* The GEMM-alone rows of the request's scope (?1 run, ?2 degree). (NULL heads the dtype list:
 * a dtype of none of the names compares NULL, which WHERE takes as false.) */
#define GEMMS_IN_SCOPE                                                                             \
  "FROM configs c JOIN results r ON r.config_id = c.id LEFT JOIN runs u ON u.id = c.run_id "       \
  "WHERE c.kind = 'gemm' AND r.median_us > 0 AND (?2 = 0 OR c.tp = ?2) AND c.dtype IN "            \
  "(NULL" TP_DTYPE_LIST(KNOWN_DTYPE) ") AND " OPS_FWD

/* The GPUs those rows ran on, the one of the latest row first: the name, the row count, the
 * latest row (the GPU's key for gemms_sql) and whether the name is ?3 (--gemm-gpu). Names are
 * compared here, whole: the copies C keeps are cut to their buffers. */
static const char gemm_gpus_sql[] =
    "SELECT coalesce(u.gpu_name, ''), count(*), max(c.id), coalesce(u.gpu_name, '') = "
    "?3 " GEMMS_IN_SCOPE " GROUP BY 1 ORDER BY 3 DESC";

/* The latest GEMM alone per shard shape on one GPU, the one config ?3 ran on: rates of two
 * cards never mix. */
static const char gemms_sql[] =
    "SELECT id, run_id, m, n, k, n_weights, dtype, median_us FROM (SELECT c.id, c.run_id, c.m, "
    "c.n, c.k, c.n_weights, c.dtype, r.median_us, row_number() OVER (PARTITION BY c.m, c.n, c.k, "
    "c.n_weights, c.dtype ORDER BY c.id DESC) AS pick " GEMMS_IN_SCOPE
    " AND coalesce(u.gpu_name, '') = " GPU_OF_CONFIG("?3") ") WHERE pick = 1 ORDER BY id";

/* The latest probe run, one without test knobs (ranks sharing a GPU, planted delays: timings
 * that mean nothing) before any with them. */
static const char link_run_sql[] =
    "SELECT c.run_id, coalesce(u.host, '?'), coalesce(u.gpu_name, '?') || ' × ' || "
    "coalesce(u.gpu_count, '?'), coalesce(u.gpu_name, ''), coalesce(u.test_knobs, '') FROM "
    "configs c JOIN results r ON r.config_id = c.id JOIN runs u ON u.id = c.run_id WHERE c.kind = "
    "'link' AND c.status = 'ok' AND r.median_us > 0 AND c.layer IN ('nccl_all_gather', "
    "'nccl_reduce_scatter', 'ce_push') AND ?1 >= 0 "
    "ORDER BY coalesce(u.test_knobs, '') <> '', c.run_id DESC LIMIT 1";

/* A probe point's bytes through one rank's links: a collective's shares of the other ranks,
 * a push's own bytes. The latest point of a size wins. */
static const char points_sql[] =
    "SELECT max(c.id), c.layer, CASE WHEN c.layer LIKE 'nccl_%' THEN c.m * (c.tp - 1) ELSE c.m "
    "END AS bytes, r.median_us FROM configs c JOIN results r ON r.config_id = c.id WHERE "
    "c.run_id = ?1 AND c.kind = 'link' AND c.status = 'ok' AND r.median_us > 0 GROUP BY 2, 3 "
    "ORDER BY 2, 3";

/* A layer of the GEMMs between gaps as the probe writes it: gemm_gap_<whole percent>, no
 * leading zero, sign or exponent ('gemm_gap_00' is no second gap 0, 'gemm_gap_1e1' no 10). */
#define PACE_LAYER                                                                                 \
  "c.layer GLOB 'gemm_gap_[0-9]*' AND c.layer = 'gemm_gap_' || "                                   \
  "CAST(CAST(substr(c.layer, 10) AS INTEGER) AS TEXT)"

/* Runs of GEMMs between gaps that timed a shape back to back (gap 0, a finite time: without
 * it no point of the run has a ratio), one without test knobs before any with them, the latest
 * first; the last column: on the GPU of config ?1 (the GEMM rows' latest), named as gemms_sql
 * and measured_sql name it ("" for a run of none, or none left). */
static const char pace_runs_sql[] =
    "SELECT DISTINCT c.run_id, coalesce(u.gpu_name, ''), coalesce(u.test_knobs, ''), "
    "coalesce(u.test_knobs, '') <> '' AS knobs, coalesce(u.gpu_name, '') = " GPU_OF_CONFIG(
        "?1") " FROM configs c JOIN results r ON r.config_id = c.id JOIN runs u ON u.id = "
              "c.run_id WHERE c.kind = 'link' AND c.status = 'ok' AND r.median_us > 0 AND "
              "c.layer = 'gemm_gap_0' AND r.median_us < 9e999 AND c.m > 0 AND c.n > 0 AND c.k > 0 "
              "ORDER BY 4, 1 DESC";

/* A run's GEMMs between gaps: FLOPs, gap (%), median; the latest of a shape and gap wins; a
 * shape without FLOPs (M, N or K not positive) is no point. */
static const char pace_points_sql[] =
    "SELECT max(c.id), 2.0 * c.m * c.n * c.k AS flops, CAST(substr(c.layer, 10) AS REAL) AS gap, "
    "r.median_us, c.layer FROM configs c JOIN results r ON r.config_id = c.id WHERE c.run_id = ?1 "
    "AND c.kind = 'link' AND c.status = 'ok' AND r.median_us > 0 AND c.m > 0 AND c.n > 0 AND "
    "c.k > 0 AND " PACE_LAYER " GROUP BY 2, 3 ORDER BY 2, 3";

/* The measured rows a prediction is held to (column 5: ran on the GEMM rows' GPU, the
 * config ?12's; column 6: the row the validation would take of its backend on its GPU, the
 * first by the ORDER BY — a row of another card is counted, never compared, and only that one:
 * an older repeat or a ce row beside auto would not have been compared on any card): plain
 * stock (the projection models plain NCCL from the link probe's collectives, not the
 * nccl-window variant) and dist_gemm auto or ce over the IPC heap (the probe's pushes), with
 * the stored dtype's bytes on the links (comm_dtype none or bf16, not an fp8 dtype's quantized
 * gather: schemas/007_transport.sql). */
#define MEASURED_ORDER "c.schedule = 'auto' DESC, c.chunks = 0 DESC, c.id DESC"
static const char measured_sql[] =
    "SELECT c.id, c.backend, r.median_us, r.fused, coalesce(u.gpu_name, '') = " GPU_OF_CONFIG(
        "?12") ", row_number() OVER (PARTITION BY c.backend, coalesce(u.gpu_name, '') ORDER "
               "BY " MEASURED_ORDER ") = 1 FROM configs c JOIN results r ON r.config_id = c.id "
               "LEFT JOIN runs u ON u.id = c.run_id WHERE c.kind = 'op' AND r.median_us > 0 "
               "AND " OPS_FWD " AND coalesce(c.model, '') = ?2 AND coalesce(c.proj, '') = ?3 "
               "AND c.layer = ?4 AND c.dtype = ?5 AND c.tokens = ?6 AND c.tp = ?7 AND c.m = ?8 "
               "AND c.n = ?9 AND c.k = ?10 AND c.n_weights = ?11 AND ((c.backend = 'stock' AND "
               "coalesce(c.schedule, '') <> 'nccl-window') OR (c.backend = 'dist_gemm' AND "
               "c.schedule IN ('auto', 'ce') AND coalesce(c.symm, 'ipc') = 'ipc')) AND "
               "coalesce(c.comm_dtype, 'bf16') = 'bf16' ORDER BY c.backend, " MEASURED_ORDER;

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "project: out of memory"); }

static tp_rc prepare(tp_store *store, const char *sql, const char *what, sqlite3_stmt **st) {
  sqlite3 *db = tp_store_db(store);
  if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: preparing %s: %s", tp_store_path(store), what,
                   sqlite3_errmsg(db));
  return TP_OK;
}

typedef tp_rc (*row_fn)(sqlite3_stmt *st, tp_project_data *data, void *ctx);

/* A statement's parameters: ?1 a run, ?2 a second integer, ?3 a text (text3) or else an integer
 * (param3), where it has them. */
typedef struct {
  int64_t run, param2, param3;
  const char *text3;
} query_params;

static int bind_params(sqlite3_stmt *st, query_params q) {
  const int n = sqlite3_bind_parameter_count(st);
  return sqlite3_bind_int64(st, 1, q.run) == SQLITE_OK &&
         (n < 2 || sqlite3_bind_int64(st, 2, q.param2) == SQLITE_OK) &&
         (n < 3 || (q.text3 ? sqlite3_bind_text(st, 3, q.text3, -1, SQLITE_STATIC)
                            : sqlite3_bind_int64(st, 3, q.param3)) == SQLITE_OK);
}

/* Runs sql with the parameters q, calling take on every row. */
static tp_rc each_row(tp_store *store, const char *sql, const char *what, query_params q,
                      row_fn take, tp_project_data *data, void *ctx) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, sql, what, &st));
  tp_rc rc = TP_OK;
  int step = SQLITE_DONE;
  if (!bind_params(st, q)) step = SQLITE_ERROR;
  else
    while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) rc = take(st, data, ctx);
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_FAIL(TP_ESQLITE, "%s: reading %s: %s", tp_store_path(store), what,
                 sqlite3_errmsg(tp_store_db(store)));
  sqlite3_finalize(st);
  return rc;
}

static void copy_text(sqlite3_stmt *st, int col, char *dst, size_t cap) {
  const unsigned char *text = sqlite3_column_text(st, col);
  snprintf(dst, cap, "%s", text ? (const char *)text : "");
}

/* The enum of a name the SQL filtered to the known ones; -1 otherwise. */
static int vocab_of(const tp_vocab_table *table, sqlite3_stmt *st, int col) {
  const unsigned char *text = sqlite3_column_text(st, col);
  int value = -1;
  if (!text || tp_vocab_parse(table, (const char *)text, &value) != TP_OK) return -1;
  return value;
}

static tp_rc take_shape(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  (void)ctx;
  int op = vocab_of(&tp_op_vocab, st, 2), dtype = vocab_of(&tp_dtype_vocab, st, 3);
  if (op < 0 || dtype < 0) return TP_OK; /* a name this binary does not know: not projected */
  tp_project_shape *grown =
      tp_grow_array(data->shapes, &data->shapes_cap, data->n_shapes, sizeof *data->shapes);
  if (!grown) return out_of_memory();
  data->shapes = grown;
  tp_project_shape *s = &data->shapes[data->n_shapes++];
  memset(s, 0, sizeof *s);
  copy_text(st, 0, s->model, sizeof s->model);
  copy_text(st, 1, s->proj, sizeof s->proj);
  s->op = (tp_op)op;
  s->dtype = (tp_dtype)dtype;
  s->tokens = sqlite3_column_int64(st, 4);
  s->n = sqlite3_column_int64(st, 5);
  s->k = sqlite3_column_int64(st, 6);
  s->n_weights = sqlite3_column_int64(st, 7);
  return TP_OK;
}

static tp_rc take_gemm(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  (void)ctx;
  int dtype = vocab_of(&tp_dtype_vocab, st, 6);
  if (dtype < 0) return TP_OK;
  tp_project_gemm *grown =
      tp_grow_array(data->gemms, &data->gemms_cap, data->n_gemms, sizeof *data->gemms);
  if (!grown) return out_of_memory();
  data->gemms = grown;
  tp_project_gemm *g = &data->gemms[data->n_gemms++];
  g->config_id = sqlite3_column_int64(st, 0);
  g->run_id = sqlite3_column_int64(st, 1);
  g->m = sqlite3_column_int64(st, 2);
  g->n = sqlite3_column_int64(st, 3);
  g->k = sqlite3_column_int64(st, 4);
  g->n_weights = sqlite3_column_int64(st, 5);
  g->dtype = (tp_dtype)dtype;
  g->median_us = sqlite3_column_double(st, 7);
  return TP_OK;
}

/* A GPU of the scope's GEMM rows (gemm_gpus_sql): the one asked for (ctx, a name: SQL compared
 * it), else the first (the latest row's), is read; every other is counted and named, whole
 * entries only while they leave room for the tail gemm_others_done writes. */
static tp_rc take_gemm_gpu(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  const int wanted = ctx ? sqlite3_column_int(st, 3) : 1;
  char gpu[128];
  copy_text(st, 0, gpu, sizeof gpu);
  const int64_t rows = sqlite3_column_int64(st, 1);
  if (!data->gemm_gpu_found && wanted) {
    snprintf(data->gemm_gpu, sizeof data->gemm_gpu, "%s", gpu);
    data->gemm_gpu_key = sqlite3_column_int64(st, 2);
    data->gemm_gpu_found = 1;
    return TP_OK;
  }
  data->gemm_other_gpus++;
  data->gemm_other_rows += rows;
  char entry[sizeof gpu + 48];
  snprintf(entry, sizeof entry, "%s%s (%lld %s)", data->gemm_other_listed ? ", " : "",
           gpu[0] ? gpu : "a GPU of no name", (long long)rows, rows == 1 ? "row" : "rows");
  const size_t used = strlen(data->gemm_other_names), tail = 64;
  if (data->gemm_other_listed == data->gemm_other_gpus - 1 &&
      used + strlen(entry) + tail < sizeof data->gemm_other_names) {
    memcpy(data->gemm_other_names + used, entry, strlen(entry) + 1);
    data->gemm_other_listed++;
    data->gemm_other_listed_rows += rows;
  }
  return TP_OK;
}

/* The other GPUs that did not fit in the names, counted at their end. */
static void gemm_others_done(tp_project_data *data) {
  const int more = data->gemm_other_gpus - data->gemm_other_listed;
  if (more == 0) return;
  const int64_t rows = data->gemm_other_rows - data->gemm_other_listed_rows;
  const size_t used = strlen(data->gemm_other_names);
  snprintf(data->gemm_other_names + used, sizeof data->gemm_other_names - used,
           "%s%d more GPU%s (%lld %s)", data->gemm_other_listed ? ", and " : "", more,
           more == 1 ? "" : "s", (long long)rows, rows == 1 ? "row" : "rows");
}

/* " of run N at TP W": the scope of the request's GEMM rows, for a message. */
static const char *gemm_scope(const tp_project_request *req, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  if (req->run_id) used = (size_t)snprintf(buf, cap, " of run %lld", (long long)req->run_id);
  if (req->gemm_tp && used < cap) snprintf(buf + used, cap - used, " at TP %d", req->gemm_tp);
  return buf;
}

static tp_rc take_link_run(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  (void)ctx;
  data->link_run = sqlite3_column_int64(st, 0);
  copy_text(st, 1, data->link_host, sizeof data->link_host);
  copy_text(st, 2, data->link_gpu, sizeof data->link_gpu);
  copy_text(st, 3, data->link_gpu_name, sizeof data->link_gpu_name);
  copy_text(st, 4, data->link_knobs, sizeof data->link_knobs);
  return TP_OK;
}

static tp_rc take_point(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  (void)ctx;
  const unsigned char *layer = sqlite3_column_text(st, 1);
  for (int kind = 0; kind < TP_LINK_KINDS; kind++) {
    if (!layer || strcmp((const char *)layer, tp_link_kind_name((tp_link_kind)kind)) != 0) continue;
    tp_project_link_point *grown = tp_grow_array(data->points[kind], &data->points_cap[kind],
                                                 data->n_points[kind], sizeof *grown);
    if (!grown) return out_of_memory();
    data->points[kind] = grown;
    tp_project_link_point *p = &grown[data->n_points[kind]++];
    p->config_id = sqlite3_column_int64(st, 0);
    p->bytes = sqlite3_column_double(st, 2);
    p->time_us = sqlite3_column_double(st, 3);
  }
  return TP_OK;
}

/* The first pacing run on the GEMM rows' GPU (p scales those GEMMs: their card's clock); the
 * first of another GPU is named, not read. Names compared in SQL (column 4), never cut. */
static tp_rc take_pace_run(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  (void)ctx;
  if (data->pace_run) return TP_OK;
  if (!sqlite3_column_int(st, 4)) {
    /* the column's text, not a copy cut to pace_gpu's size: a driver's name whole */
    const unsigned char *name = sqlite3_column_text(st, 1);
    if (!data->pace_skipped[0])
      snprintf(data->pace_skipped, sizeof data->pace_skipped,
               "run %lld on %s, not the GEMM rows' GPU", (long long)sqlite3_column_int64(st, 0),
               name && *name ? (const char *)name : "a GPU of no name");
    return TP_OK;
  }
  char gpu[128];
  copy_text(st, 1, gpu, sizeof gpu);
  data->pace_run = sqlite3_column_int64(st, 0);
  snprintf(data->pace_gpu, sizeof data->pace_gpu, "%s", gpu);
  copy_text(st, 2, data->pace_knobs, sizeof data->pace_knobs);
  return TP_OK;
}

static tp_rc take_pace_point(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  (void)ctx;
  /* report's predicate of a gap layer, and a time (SQL's "> 0" lets an infinity through) */
  const double time_us = sqlite3_column_double(st, 3);
  if (!tp_link_is_gemm_gap((const char *)sqlite3_column_text(st, 4)) || !isfinite(time_us))
    return TP_OK;
  tp_project_pace_point *grown =
      tp_grow_array(data->pace, &data->pace_cap, data->n_pace, sizeof *grown);
  if (!grown) return out_of_memory();
  data->pace = grown;
  tp_project_pace_point *p = &grown[data->n_pace++];
  p->config_id = sqlite3_column_int64(st, 0);
  p->flops = sqlite3_column_double(st, 1);
  p->gap_pct = sqlite3_column_double(st, 2);
  p->time_us = sqlite3_column_double(st, 3);
  return TP_OK;
}

static tp_rc load_pacing(tp_store *store, tp_project_data *data) {
  TP_TRY(each_row(store, pace_runs_sql, "the GEMMs between gaps",
                  (query_params){.run = data->gemm_gpu_key}, take_pace_run, data, NULL));
  if (!data->pace_run) return TP_OK;
  return each_row(store, pace_points_sql, "the GEMMs between gaps' points",
                  (query_params){.run = data->pace_run}, take_pace_point, data, NULL);
}

static tp_rc check_run(tp_store *store, int64_t run_id) {
  static const char sql[] = "SELECT count(*) FROM runs WHERE id = ?1";
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, sql, "the run", &st));
  int found = sqlite3_bind_int64(st, 1, run_id) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW
                  ? sqlite3_column_int(st, 0)
                  : -1;
  sqlite3_finalize(st);
  if (found < 0)
    return TP_FAIL(TP_ESQLITE, "%s: reading the run: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  if (found == 0)
    return TP_FAIL(TP_EUSAGE, "project: no run %lld in %s (tpbench runs lists them)",
                   (long long)run_id, tp_store_path(store));
  return TP_OK;
}

static tp_rc load_link(tp_store *store, const tp_project_request *req, tp_project_data *data) {
  TP_TRY(each_row(store, link_run_sql, "the latest link probe", (query_params){0}, take_link_run,
                  data, NULL));
  if (data->link_run == 0) {
    if (req->link_gbps > 0) return TP_OK;
    return TP_FAIL(TP_EUSAGE,
                   "project: no link probe in %s (run 'tpbench link' on the host, or give "
                   "--link-gbps)",
                   tp_store_path(store));
  }
  return each_row(store, points_sql, "the link probe's points",
                  (query_params){.run = data->link_run}, take_point, data, NULL);
}

/* The request's own shapes (from model presets), in its order. */
static tp_rc copy_shapes(const tp_project_request *req, tp_project_data *data) {
  data->shapes = calloc(req->n_shapes + 1, sizeof *data->shapes);
  if (!data->shapes) return out_of_memory();
  memcpy(data->shapes, req->shapes, req->n_shapes * sizeof *data->shapes);
  data->n_shapes = data->shapes_cap = req->n_shapes;
  return TP_OK;
}

/* The GEMM rows of the request's scope on one GPU (--gemm-gpu, else the latest row's); the
 * other GPUs' rows counted. */
static tp_rc load_gemms(tp_store *store, const tp_project_request *req, tp_project_data *data) {
  const query_params gemm_scope_params = {.run = req->run_id, .param2 = req->gemm_tp};
  query_params gpus = gemm_scope_params;
  gpus.text3 = req->gemm_gpu ? req->gemm_gpu : "";
  TP_TRY(each_row(store, gemm_gpus_sql, "the GEMM rows' GPUs", gpus, take_gemm_gpu, data,
                  (void *)req->gemm_gpu));
  gemm_others_done(data);
  char scope[96];
  gemm_scope(req, scope, sizeof scope);
  if (req->gemm_gpu && !data->gemm_gpu_found && data->gemm_other_gpus)
    return TP_FAIL(TP_EUSAGE,
                   "project: no GEMM rows%s on GPU '%s' in %s (--gemm-gpu takes the name "
                   "`tpbench runs` shows before the ×); the GEMM rows%s there are of: %s",
                   scope, req->gemm_gpu, tp_store_path(store), scope, data->gemm_other_names);
  if (data->gemm_gpu_found) {
    query_params on_gpu = gemm_scope_params;
    on_gpu.param3 = data->gemm_gpu_key;
    TP_TRY(each_row(store, gemms_sql, "the GEMM rows", on_gpu, take_gemm, data, NULL));
  }
  if (data->n_gemms > 0) return TP_OK;
  return TP_FAIL(TP_EUSAGE,
                 "project: no GEMM rows%s in %s (kind gemm, pass fwd, of ag_linear, "
                 "ag_linear_multi or linear_rs: 'tpbench ops' measures them as the GEMM alone)",
                 scope, tp_store_path(store));
}

tp_rc tp_project_load(tp_store *store, const tp_project_request *req, tp_project_data *data) {
  memset(data, 0, sizeof *data);
  if (req->run_id != 0) TP_TRY(check_run(store, req->run_id));
  TP_TRY(load_gemms(store, req, data));
  if (req->shapes) TP_TRY(copy_shapes(req, data));
  else {
    if (req->shapes_run) TP_TRY(check_run(store, req->shapes_run));
    /* --run keeps the shapes to its own run too: another run's would be none */
    if (req->shapes_run && req->run_id && req->shapes_run != req->run_id)
      return TP_FAIL(TP_EUSAGE,
                     "project: --shapes-run %lld and --run %lld: --run reads the shapes of run "
                     "%lld only (leave --run out for GEMM rows of every run)",
                     (long long)req->shapes_run, (long long)req->run_id, (long long)req->run_id);
    TP_TRY(each_row(store, shapes_sql, "the op shapes",
                    (query_params){.run = req->run_id, .param2 = req->shapes_run}, take_shape, data,
                    NULL));
    if (req->shapes_run && data->n_shapes == 0)
      return TP_FAIL(TP_EUSAGE,
                     "project: run %lld of %s measured no op shape (pass fwd, of ag_linear, "
                     "ag_linear_multi or linear_rs)",
                     (long long)req->shapes_run, tp_store_path(store));
  }
  TP_TRY(load_link(store, req, data));
  TP_TRY(load_pacing(store, data));
  tp_project_inputs in = tp_project_inputs_of(data, req->link_gbps);
  tp_project_resolve_costs(in.links, data->link_run ? data->link_gpu_name : NULL, data->costs);
  return TP_OK;
}

tp_project_inputs tp_project_inputs_of(const tp_project_data *data, double link_gbps) {
  tp_project_inputs in = {.gemms = data->gemms, .n_gemms = data->n_gemms, .link_gbps = link_gbps};
  for (int kind = 0; kind < TP_LINK_KINDS; kind++) {
    in.links[kind].points = data->points[kind];
    in.links[kind].n = data->n_points[kind];
  }
  memcpy(in.costs, data->costs, sizeof in.costs);
  in.pacing = (tp_project_pacing){data->pace, data->n_pace};
  return in;
}

/* ---- measured rows ---------------------------------------------------------- */

static double err_pct(double predicted, double measured) {
  return (predicted - measured) / measured * 100.0;
}

static tp_rc take_measured(sqlite3_stmt *st, tp_project_data *data, void *ctx) {
  (void)data;
  tp_projected *p = ctx;
  if (!sqlite3_column_int(st, 4)) {
    p->other_gpu_rows += sqlite3_column_int(st, 5); /* the one the validation would take */
    return TP_OK;
  }
  const unsigned char *backend = sqlite3_column_text(st, 1);
  int stock = backend && !strcmp((const char *)backend, "stock");
  if (stock ? p->stock_id : p->dist_id) return TP_OK; /* the first is the one (ORDER BY) */
  if (stock) {
    p->stock_id = sqlite3_column_int64(st, 0);
    p->stock_measured_us = sqlite3_column_double(st, 2);
    p->stock_err_pct = err_pct(p->row.stock_us, p->stock_measured_us);
  } else {
    p->dist_id = sqlite3_column_int64(st, 0);
    p->dist_measured_us = sqlite3_column_double(st, 2);
    p->dist_err_pct = err_pct(p->row.dist_us, p->dist_measured_us);
    p->dist_stock_path = sqlite3_column_type(st, 3) != SQLITE_NULL && !sqlite3_column_int(st, 3);
  }
  return TP_OK;
}

static tp_rc bind_shape(sqlite3_stmt *st, const tp_project_row *r, int64_t run_id,
                        int64_t gemm_gpu_key) {
  const tp_project_shape *s = &r->shape;
  int ok = sqlite3_bind_int64(st, 1, run_id) == SQLITE_OK &&
           sqlite3_bind_text(st, 2, s->model, -1, SQLITE_STATIC) == SQLITE_OK &&
           sqlite3_bind_text(st, 3, s->proj, -1, SQLITE_STATIC) == SQLITE_OK &&
           sqlite3_bind_text(st, 4, tp_op_name(s->op), -1, SQLITE_STATIC) == SQLITE_OK &&
           sqlite3_bind_text(st, 5, tp_dtype_name(s->dtype), -1, SQLITE_STATIC) == SQLITE_OK &&
           sqlite3_bind_int64(st, 6, s->tokens) == SQLITE_OK &&
           sqlite3_bind_int64(st, 7, r->tp) == SQLITE_OK &&
           sqlite3_bind_int64(st, 8, r->m) == SQLITE_OK &&
           sqlite3_bind_int64(st, 9, r->n) == SQLITE_OK &&
           sqlite3_bind_int64(st, 10, r->k) == SQLITE_OK &&
           sqlite3_bind_int64(st, 11, s->n_weights) == SQLITE_OK &&
           sqlite3_bind_int64(st, 12, gemm_gpu_key) == SQLITE_OK;
  return ok ? TP_OK : TP_FAIL(TP_ESQLITE, "project: binding a shape to the measured-row query");
}

/* Fills p's measured side from the database (nothing when the degree was not measured). */
static tp_rc read_measured(tp_store *store, sqlite3_stmt *st, int64_t run_id, int64_t gemm_gpu_key,
                           tp_projected *p) {
  if (p->row.m == 0) return TP_OK; /* not projected: no shard to match */
  if (sqlite3_reset(st) != SQLITE_OK || sqlite3_clear_bindings(st) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: resetting the measured-row query: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  TP_TRY(bind_shape(st, &p->row, run_id, gemm_gpu_key));
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) TP_TRY(take_measured(st, NULL, p));
  if (step != SQLITE_DONE)
    return TP_FAIL(TP_ESQLITE, "%s: reading the measured rows: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  return TP_OK;
}

/* One degree's error summary per backend (check->stock.rows == 0 when nothing was measured
 * there). */
static tp_rc check_degree(const tp_project_data *data, int tp, tp_project_check *check) {
  memset(check, 0, sizeof *check);
  check->tp = tp;
  const size_t n = data->n_rows;
  double *errs = calloc(4 * n + 1, sizeof *errs);
  size_t *index = calloc(n + 1, sizeof *index);
  if (!errs || !index) {
    free(errs);
    free(index);
    return out_of_memory();
  }
  double *stock = errs, *stock_us = errs + n, *dist = errs + 2 * n, *dist_us = errs + 3 * n;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const tp_projected *p = &data->rows[i];
    if (p->row.tp != tp) continue;
    stock[at] = p->stock_err_pct;
    stock_us[at] = p->stock_measured_us;
    dist[at] = p->dist_err_pct;
    dist_us[at] = p->dist_measured_us;
    index[at++] = i;
  }
  tp_rc rc = tp_project_summarise_errors(stock, stock_us, at, &check->stock);
  if (rc == TP_OK) rc = tp_project_summarise_errors(dist, dist_us, at, &check->dist);
  if (rc == TP_OK && check->stock.rows)
    check->stock_worst_config = data->rows[index[check->stock.worst_index]].stock_id;
  if (rc == TP_OK && check->dist.rows)
    check->dist_worst_config = data->rows[index[check->dist.worst_index]].dist_id;
  free(errs);
  free(index);
  return rc;
}

static tp_rc check_degrees(const tp_project_request *req, tp_project_data *data) {
  data->checks = calloc((size_t)req->n_tps + 1, sizeof *data->checks);
  if (!data->checks) return out_of_memory();
  for (int i = 0; i < req->n_tps; i++) {
    tp_project_check *check = &data->checks[data->n_checks];
    TP_TRY(check_degree(data, req->tps[i], check));
    int measured = 0;
    for (size_t r = 0; r < data->n_rows; r++)
      measured |=
          data->rows[r].row.tp == req->tps[i] && (data->rows[r].stock_id || data->rows[r].dist_id);
    if (measured) data->n_checks++;
  }
  return TP_OK;
}

tp_rc tp_project_compute(tp_store *store, const tp_project_request *req, tp_project_data *data) {
  size_t n = data->n_shapes * (size_t)req->n_tps;
  data->rows = calloc(n + 1, sizeof *data->rows);
  if (!data->rows) return out_of_memory();
  tp_project_inputs in = tp_project_inputs_of(data, req->link_gbps);
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, measured_sql, "the measured rows", &st));
  tp_rc rc = TP_OK;
  for (size_t s = 0; s < data->n_shapes && rc == TP_OK; s++)
    for (int t = 0; t < req->n_tps && rc == TP_OK; t++) {
      tp_projected *p = &data->rows[data->n_rows++];
      tp_project_predict(&in, &data->shapes[s], req->tps[t], &p->row);
      p->stock_err_pct = p->dist_err_pct = NAN;
      p->stock_measured_us = p->dist_measured_us = NAN;
      rc = read_measured(store, st, req->run_id, data->gemm_gpu_key, p);
      data->measured_other_gpu += p->other_gpu_rows;
    }
  sqlite3_finalize(st);
  if (rc == TP_OK) rc = check_degrees(req, data);
  return rc;
}

void tp_project_data_free(tp_project_data *data) {
  free(data->shapes);
  free(data->gemms);
  for (int kind = 0; kind < TP_LINK_KINDS; kind++) free(data->points[kind]);
  free(data->pace);
  free(data->rows);
  free(data->checks);
  memset(data, 0, sizeof *data);
}
