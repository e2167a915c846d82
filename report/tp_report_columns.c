/*
 * tp_report_columns.c — the throughput table's columns (see tp_report.h):
 * one registry names every column once, with its unit in the name, where its
 * value comes from, and how markdown shows it; markdown, CSV and JSON all
 * render rows through it, so a value cannot differ between formats and
 * --columns works the same in each.
 *
 * The registry's order is the CSV's (its first 60 columns are those of
 * earlier tpbench versions, in their order; later ones are appended).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "report/tp_report_internal.h"
#include "report/tp_table_cell.h"

/* ---- where values come from ------------------------------------------------- */

typedef enum {
  SRC_ROW_NUM,   /* a double of table_row at offset */
  SRC_AXIS_TEXT, /* a string of the row's case configuration at offset */
  SRC_AXIS_INT,  /* an int64_t of it */
  SRC_AXIS_BOOL, /* an int64_t of it, as a switch */
  SRC_RUN_TEXT,  /* a string of run_header at offset */
  SRC_RUN_INT,   /* an int64_t of run_header (-1: unknown) */
  SRC_CUSTOM     /* get() */
} source;

typedef void (*cell_getter)(const report *rep, const table_row *row, tp_cell *out);

enum {
  COL_RUN = 2,    /* the run's, not the row's: JSON keeps it in "run" */
  COL_NUMBER = 4, /* right-aligned in markdown */
};

typedef struct {
  const char *name;      /* CSV header, JSON key, --columns name */
  const char *md_header; /* markdown header, with the unit */
  int flags;
  source src;
  size_t offset;
  int csv_decimals, md_decimals;
  cell_getter get; /* SRC_CUSTOM */
  cell_getter md;  /* markdown's own text for the cell, or NULL */
} column;

static const config *dist_of(const table_row *row) { return &row->dist; }

static void get_run_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)row;
  tp_cell_set_int(c, rep->run.id);
}

static void get_schedule_requested(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, dist_of(row)->present ? dist_of(row)->schedule : NULL);
}

static void get_chunks_requested(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  if (dist_of(row)->present) tp_cell_set_int(c, dist_of(row)->chunks);
  else c->type = TP_CELL_NONE;
}

static void get_schedule_ran(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, dist_of(row)->ran);
}

/* What ran, or what was asked for when nothing ran. */
static void md_schedule(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  const config *d = dist_of(row);
  if (d->ran) snprintf(c->buf, sizeof c->buf, "%s", d->ran);
  else if (d->present && d->schedule && d->chunks > 0)
    snprintf(c->buf, sizeof c->buf, "%s x%lld (requested)", d->schedule, (long long)d->chunks);
  else if (d->present && d->schedule)
    snprintf(c->buf, sizeof c->buf, "%s (requested)", d->schedule);
  else c->buf[0] = '\0';
  tp_cell_set_text(c, c->buf[0] ? c->buf : NULL);
}

/* "1.25 (1.21–1.29)", with "no difference" when the interval holds 1. */
static void with_interval(tp_cell *c, double value, double lo, double hi) {
  if (!isfinite(value)) {
    c->type = TP_CELL_NONE;
    return;
  }
  if (!isfinite(lo) || !isfinite(hi)) snprintf(c->buf, sizeof c->buf, "%.2f", value);
  else
    snprintf(c->buf, sizeof c->buf, "%.2f (%.2f–%.2f%s)", value, lo, hi,
             lo <= 1.0 && 1.0 <= hi ? ", no difference" : "");
  tp_cell_set_own_text(c);
}

static void md_speedup(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  with_interval(c, row->speedup, row->speedup_lo, row->speedup_hi);
}

static void md_dist_over_bound(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  with_interval(c, row->dist_over_bound, row->bound_lo, row->bound_hi);
}

/* A number of the dist_gemm configuration's result, blank unless it ran. */
/* The stock configuration's own figures (the bf16-vs-fp8 table: at TP 1 only stock runs). */
static void get_stock_tokens_per_s(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, tp_report_ran_ok(&row->stock) ? row->stock.tokens_per_s : NAN);
}

/* The collective alone of the faster stock's own variant (plain or window). */
static double own_comm_ms(const table_row *row) {
  return row->best_stock == &row->stock_window ? row->comm_window_ms : row->comm_ms;
}

/* What stock loses beyond "the GEMMs, then the collectives", each measured
 * alone in the same run: the faster stock - (GEMM alone + its variant's
 * collective alone). Waiting for the slower rank at each synchronisation,
 * collectives slower in place than alone, copies on the TP path: what a
 * fused schedule can still win. */
static double stock_unaccounted_ms(const table_row *row) {
  return row->best_stock_ms - (row->gemm_ms + own_comm_ms(row));
}

static void get_stock_unaccounted_ms(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, stock_unaccounted_ms(row));
}

/* ... as a share of the collectives' own time. */
static void get_stock_unaccounted_of_comm(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, own_comm_ms(row) > 0 ? stock_unaccounted_ms(row) / own_comm_ms(row) : NAN);
}

/* "plain" or "window": the stock variant the speedup divides by. */
static void get_best_stock(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, !row->best_stock                        ? NULL
                      : row->best_stock == &row->stock_window ? "window"
                                                              : "plain");
}

/* ... and the collective alone the bound takes. */
static void get_best_comm(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, !row->best_comm                       ? NULL
                      : row->best_comm == &row->comm_window ? "window"
                                                            : "plain");
}

/* dist_gemm over the GEMM alone (the no-collective variant): how far above
 * its compute the fused configuration sits. */
static void get_dist_over_gemm(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, row->gemm_ms > 0 ? row->dist_ms / row->gemm_ms : NAN);
}

static double mib_of(const config *k, double bytes) {
  return tp_report_ran_ok(k) ? bytes / (1024.0 * 1024.0) : NAN;
}

static void get_stock_peak_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->stock, row->stock.peak_mem_bytes));
}

static void get_dist_peak_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->dist, row->dist.peak_mem_bytes));
}

static void get_stock_workspace_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->stock, row->stock.workspace_bytes));
}

/* The worst error of the stock configuration's checks: for an fp8 dtype the
 * output against the unquantized bf16 operands (what quantization costs). */
static void get_stock_rel_err(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, tp_report_ran_ok(&row->stock) ? row->stock.rel_err : NAN);
  if (c->type == TP_CELL_NUM) c->type = TP_CELL_SCI;
}

static void get_dist_tokens_per_s(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, tp_report_ran_ok(&row->dist) ? row->dist.tokens_per_s : NAN);
}

static void get_dist_tflops(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, tp_report_ran_ok(&row->dist) ? row->dist.tflops : NAN);
}

static void get_rel_err(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, tp_report_ran_ok(&row->dist) ? row->dist.rel_err : NAN);
  if (c->type == TP_CELL_NUM) c->type = TP_CELL_SCI;
}

static void md_rel_err(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  const config *d = &row->dist;
  if (!tp_report_ran_ok(d) || !isfinite(d->rel_err)) {
    c->type = TP_CELL_NONE;
    return;
  }
  char num[64];
  snprintf(c->buf, sizeof c->buf, "%s (%s)", tp_fmt_sci(num, sizeof num, d->rel_err),
           d->numerics_ref ? d->numerics_ref : "?");
  tp_cell_set_own_text(c);
}

static void get_numerics_ref(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, tp_report_ran_ok(&row->dist) ? row->dist.numerics_ref : NULL);
}

static void get_status(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, row->status);
}

static void md_status(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  if (row->note) snprintf(c->buf, sizeof c->buf, "%s: %s", row->status, row->note);
  else snprintf(c->buf, sizeof c->buf, "%s", row->status);
  tp_cell_set_own_text(c);
}

static void get_reason(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, row->note);
}

static void get_evidence(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, row->evidence[0] ? row->evidence : NULL);
}

static void get_stock_path(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  if (row->both_ok) tp_cell_set_bool(c, row->stock_path);
  else c->type = TP_CELL_NONE;
}

static void get_rank_skew_pct(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, tp_report_ran_ok(&row->dist) ? 100.0 * row->dist.rank_skew : NAN);
}

static void get_host_stall_pct(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, tp_report_ran_ok(&row->dist) ? 100.0 * row->dist.host_stall : NAN);
}

static void id_of(const config *c, tp_cell *out) {
  if (c->present) tp_cell_set_int(out, c->id);
  else out->type = TP_CELL_NONE;
}

static void get_config_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  id_of(tp_report_case_of(row), c);
}

static void get_dist_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  id_of(&row->dist, c);
}

static void get_stock_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  id_of(&row->stock, c);
}

static void get_gemm_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  id_of(&row->gemm, c);
}

static void get_comm_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  id_of(&row->comm, c);
}

static void get_stock_window_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  id_of(&row->stock_window, c);
}

static void get_comm_window_id(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  id_of(&row->comm_window, c);
}

static void get_short_key(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, row->short_key[0] ? row->short_key : NULL);
}

static void get_config_key(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_text(c, tp_report_case_of(row)->config_key);
}

/* A toy model's row: the headline keeps it apart (report/tp_report.h). */
static void get_toy(const report *rep, const table_row *row, tp_cell *c) {
  tp_cell_set_bool(c, tp_report_row_is_toy(rep, row));
}

static void get_traced(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_bool(c, row->dist.has_trace);
}

static void get_label(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_config_axes axes = tp_report_axes_of(tp_report_case_of(row));
  tp_config_label(c->buf, sizeof c->buf, &axes);
  tp_cell_set_own_text(c);
}

/* "ag_linear qkv", "attention". */
static void get_op(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  const config *k = tp_report_case_of(row);
  snprintf(c->buf, sizeof c->buf, "%s%s%s", k->layer ? k->layer : "",
           k->proj && *k->proj ? " " : "", k->proj ? k->proj : "");
  tp_cell_set_own_text(c);
}

/* Tokens, and the GEMM's M×N×K of an op (one rank's) or B×S of a layer. */
static void get_shape(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  const config *k = tp_report_case_of(row);
  if (k->m > 0)
    snprintf(c->buf, sizeof c->buf, "T=%lld %lld×%lld×%lld", (long long)k->tokens, (long long)k->m,
             (long long)k->n, (long long)k->k);
  else if (k->batch > 0 && k->seqlen > 0)
    snprintf(c->buf, sizeof c->buf, "T=%lld (%lld×%lld)", (long long)k->tokens, (long long)k->batch,
             (long long)k->seqlen);
  else snprintf(c->buf, sizeof c->buf, "T=%lld", (long long)k->tokens);
  tp_cell_set_own_text(c);
}

/* "sp", "no-sp graph save-gathered", "sp dp2 ac-full graph among 2048,4096 rs-nccl",
 * "sp comm-fp8 fsdp-traffic symm-nccl". */
static void get_options(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  const config *k = tp_report_case_of(row);
  char dp[24] = "";
  if (k->dp > 1) snprintf(dp, sizeof dp, " dp%lld", (long long)k->dp);
  const int ac = k->ac && strcmp(k->ac, "none") != 0;
  const int rs_nccl = row->dist.present && row->dist.rs_sum && !strcmp(row->dist.rs_sum, "nccl");
  const int symm_nccl = row->dist.present && row->dist.symm && !strcmp(row->dist.symm, "nccl");
  snprintf(c->buf, sizeof c->buf, "%s%s%s%s%s%s%s%.200s%s%s%.8s%s%s", k->sp ? "sp" : "no-sp", dp,
           ac ? " ac-" : "", ac ? k->ac : "", k->graph ? " graph" : "",
           k->save_gathered ? " save-gathered" : "", k->graph_sizes ? " among " : "",
           k->graph_sizes ? k->graph_sizes : "", rs_nccl ? " rs-nccl" : "",
           k->comm_dtype ? " comm-" : "", k->comm_dtype ? k->comm_dtype : "",
           k->fsdp_traffic ? " fsdp-traffic" : "", symm_nccl ? " symm-nccl" : "");
  tp_cell_set_own_text(c);
}

/* dist_gemm's symmetric memory: "ipc" (rows before schema 007 too) or "nccl"; empty without a
 * dist_gemm configuration. */
static void get_symm(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  if (!row->dist.present) return;
  snprintf(c->buf, sizeof c->buf, "%.8s", row->dist.symm ? row->dist.symm : "ipc");
  tp_cell_set_own_text(c);
}

static void get_stock_traffic_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->stock, row->stock.traffic_bytes));
}

static void get_dist_traffic_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->dist, row->dist.traffic_bytes));
}

static void get_stock_activation_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->stock, row->stock.activation_bytes));
}

static void get_dist_activation_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->dist, row->dist.activation_bytes));
}

static void get_stock_alloc_peak_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->stock, row->stock.alloc_peak_bytes));
}

static void get_dist_alloc_peak_mib(const report *rep, const table_row *row, tp_cell *c) {
  (void)rep;
  tp_cell_set_num(c, mib_of(&row->dist, row->dist.alloc_peak_bytes));
}

#define ROW_NUM(name, header, field, csv_dec, md_dec)                                              \
  { name, header, COL_NUMBER, SRC_ROW_NUM, offsetof(table_row, field), csv_dec, md_dec, NULL, NULL }
#define AXIS(name, header, src, field, flags)                                                      \
  { name, header, (flags), src, offsetof(config, field), 0, 0, NULL, NULL }
#define RUN(name, header, src, field, flags)                                                       \
  { name, header, COL_RUN | (flags), src, offsetof(run_header, field), 0, 0, NULL, NULL }
#define CUSTOM(name, header, flags, dec, md_dec, get, md)                                          \
  { name, header, flags, SRC_CUSTOM, 0, dec, md_dec, get, md }

static const column registry[] = {
    CUSTOM("run_id", "run", COL_RUN | COL_NUMBER, 0, 0, get_run_id, NULL),
    RUN("commit", "commit", SRC_RUN_TEXT, commit, 0),
    AXIS("model", "model", SRC_AXIS_TEXT, model, 0),
    AXIS("layer", "op or layer", SRC_AXIS_TEXT, layer, 0),
    AXIS("proj", "proj", SRC_AXIS_TEXT, proj, 0),
    AXIS("tp", "tp", SRC_AXIS_INT, tp, COL_NUMBER),
    AXIS("batch", "batch", SRC_AXIS_INT, batch, COL_NUMBER),
    AXIS("seqlen", "seqlen", SRC_AXIS_INT, seqlen, COL_NUMBER),
    AXIS("tokens", "tokens", SRC_AXIS_INT, tokens, COL_NUMBER),
    AXIS("m", "M", SRC_AXIS_INT, m, COL_NUMBER),
    AXIS("n", "N", SRC_AXIS_INT, n, COL_NUMBER),
    AXIS("k", "K", SRC_AXIS_INT, k, COL_NUMBER),
    AXIS("n_weights", "weights", SRC_AXIS_INT, n_weights, COL_NUMBER),
    AXIS("dtype", "dtype", SRC_AXIS_TEXT, dtype, 0),
    AXIS("pass", "pass", SRC_AXIS_TEXT, pass, 0),
    AXIS("sp", "sp", SRC_AXIS_BOOL, sp, 0),
    AXIS("graph", "graph", SRC_AXIS_BOOL, graph, 0),
    AXIS("save_gathered", "save gathered", SRC_AXIS_BOOL, save_gathered, 0),
    CUSTOM("schedule_requested", "schedule requested", 0, 0, 0, get_schedule_requested, NULL),
    CUSTOM("chunks_requested", "chunks requested", COL_NUMBER, 0, 0, get_chunks_requested, NULL),
    CUSTOM("schedule", "schedule", 0, 0, 0, get_schedule_ran, md_schedule),
    ROW_NUM("stock_ms", "stock ms", stock_ms, 3, 3), /* the plain stock's */
    ROW_NUM("dist_ms", "dist_gemm ms", dist_ms, 3, 3),
    {"speedup", "speedup (95% CI)", COL_NUMBER, SRC_ROW_NUM, offsetof(table_row, speedup), 3, 2,
     NULL, md_speedup},
    ROW_NUM("gemm_ms", "GEMM ms", gemm_ms, 3, 3),
    ROW_NUM("comm_ms", "comm ms", comm_ms, 3, 3),
    ROW_NUM("bound_ms", "bound ms", bound_ms, 3, 3),
    {"dist_over_bound", "dist/bound (95% CI)", COL_NUMBER, SRC_ROW_NUM,
     offsetof(table_row, dist_over_bound), 3, 2, NULL, md_dist_over_bound},
    CUSTOM("dist_tokens_per_s", "dist tok/s", COL_NUMBER, 0, 0, get_dist_tokens_per_s, NULL),
    CUSTOM("dist_tflops", "dist TFLOP/s", COL_NUMBER, 2, 1, get_dist_tflops, NULL),
    ROW_NUM("workspace_mib", "workspace MiB", workspace_mib, 2, 1),
    CUSTOM("rel_err", "rel err (ref)", COL_NUMBER, 0, 0, get_rel_err, md_rel_err),
    CUSTOM("numerics_ref", "numerics ref", 0, 0, 0, get_numerics_ref, NULL),
    ROW_NUM("dist_cv_pct", "dist cv %", cv_pct, 2, 1),
    CUSTOM("status", "status", 0, 0, 0, get_status, md_status),
    CUSTOM("reason", "reason", 0, 0, 0, get_reason, NULL),
    ROW_NUM("overlap_pct", "overlap %", overlap_pct, 2, 1),
    ROW_NUM("exposed_comm_ms", "exposed comm ms", exposed_ms, 4, 3),
    ROW_NUM("trace_overhead_pct", "trace overhead %", overhead_pct, 2, 1),
    CUSTOM("evidence", "evidence", 0, 0, 0, get_evidence, NULL),
    RUN("host", "host", SRC_RUN_TEXT, host, 0),
    RUN("gpu_name", "GPU", SRC_RUN_TEXT, gpu_name, 0),
    RUN("gpu_count", "GPUs", SRC_RUN_INT, gpu_count, COL_NUMBER),
    RUN("driver_version", "driver", SRC_RUN_TEXT, driver, 0),
    RUN("cuda_version", "CUDA", SRC_RUN_TEXT, cuda, 0),
    RUN("nccl_version", "NCCL", SRC_RUN_TEXT, nccl, 0),
    RUN("cublas_version", "cuBLAS", SRC_RUN_TEXT, cublas, 0),
    RUN("cupti_version", "CUPTI", SRC_RUN_TEXT, cupti, 0),
    RUN("warmup_iters", "warm-up iterations", SRC_RUN_INT, warmup_iters, COL_NUMBER),
    RUN("measure_iters", "measured iterations", SRC_RUN_INT, measure_iters, COL_NUMBER),
    ROW_NUM("strict_bound_ms", "strict bound ms", strict_bound_ms, 4, 3),
    ROW_NUM("dist_over_strict", "dist/strict", dist_over_strict, 3, 2),
    ROW_NUM("sync_ms", "sync ms", sync_ms, 4, 3),
    ROW_NUM("speedup_lo", "speedup 95% low", speedup_lo, 3, 2),
    ROW_NUM("speedup_hi", "speedup 95% high", speedup_hi, 3, 2),
    ROW_NUM("dist_over_bound_lo", "dist/bound 95% low", bound_lo, 3, 2),
    ROW_NUM("dist_over_bound_hi", "dist/bound 95% high", bound_hi, 3, 2),
    CUSTOM("stock_path", "stock path", 0, 0, 0, get_stock_path, NULL),
    CUSTOM("dist_rank_skew_pct", "dist rank skew %", COL_NUMBER, 2, 1, get_rank_skew_pct, NULL),
    CUSTOM("dist_host_stall_pct", "dist host stall %", COL_NUMBER, 2, 1, get_host_stall_pct, NULL),
    /* appended: what finds the row again */
    CUSTOM("config_id", "id", COL_NUMBER, 0, 0, get_config_id, NULL),
    CUSTOM("short_key", "key", 0, 0, 0, get_short_key, NULL),
    CUSTOM("config_key", "config key", 0, 0, 0, get_config_key, NULL),
    CUSTOM("dist_config_id", "dist_gemm id", COL_NUMBER, 0, 0, get_dist_id, NULL),
    CUSTOM("stock_config_id", "stock id", COL_NUMBER, 0, 0, get_stock_id, NULL),
    CUSTOM("gemm_config_id", "GEMM id", COL_NUMBER, 0, 0, get_gemm_id, NULL),
    CUSTOM("comm_config_id", "comm id", COL_NUMBER, 0, 0, get_comm_id, NULL),
    CUSTOM("traced", "traced", 0, 0, 0, get_traced, NULL),
    /* appended: the compact table's own (in CSV and JSON too: every column is, by default) */
    CUSTOM("label", "configuration", 0, 0, 0, get_label, NULL),
    CUSTOM("op", "op", 0, 0, 0, get_op, NULL),
    CUSTOM("shape", "shape", 0, 0, 0, get_shape, NULL),
    CUSTOM("options", "options", 0, 0, 0, get_options, NULL),
    CUSTOM("stock_tokens_per_s", "stock tok/s", COL_NUMBER, 0, 0, get_stock_tokens_per_s, NULL),
    CUSTOM("stock_peak_mib", "stock peak MiB", COL_NUMBER, 1, 1, get_stock_peak_mib, NULL),
    CUSTOM("dist_peak_mib", "dist peak MiB", COL_NUMBER, 1, 1, get_dist_peak_mib, NULL),
    CUSTOM("stock_workspace_mib", "stock workspace MiB", COL_NUMBER, 2, 1, get_stock_workspace_mib,
           NULL),
    CUSTOM("stock_rel_err", "stock rel err", COL_NUMBER, 0, 0, get_stock_rel_err, NULL),
    CUSTOM("stock_unaccounted_ms", "stock unaccounted ms", COL_NUMBER, 4, 3,
           get_stock_unaccounted_ms, NULL),
    CUSTOM("stock_unaccounted_of_comm", "unaccounted / comm", COL_NUMBER, 3, 2,
           get_stock_unaccounted_of_comm, NULL),
    CUSTOM("dist_over_gemm", "dist/GEMM", COL_NUMBER, 3, 2, get_dist_over_gemm, NULL),
    /* appended with schema 006: the composition axes and what a configuration holds */
    AXIS("dp", "dp", SRC_AXIS_INT, dp, COL_NUMBER),
    AXIS("ac", "ac", SRC_AXIS_TEXT, ac, 0),
    AXIS("graph_sizes", "graph sizes", SRC_AXIS_TEXT, graph_sizes, 0),
    CUSTOM("stock_activation_mib", "stock activations MiB", COL_NUMBER, 2, 1,
           get_stock_activation_mib, NULL),
    CUSTOM("dist_activation_mib", "dist activations MiB", COL_NUMBER, 2, 1, get_dist_activation_mib,
           NULL),
    CUSTOM("stock_alloc_peak_mib", "stock alloc peak MiB", COL_NUMBER, 1, 1,
           get_stock_alloc_peak_mib, NULL),
    CUSTOM("dist_alloc_peak_mib", "dist alloc peak MiB", COL_NUMBER, 1, 1, get_dist_alloc_peak_mib,
           NULL),
    /* appended: the stock variant on NCCL symmetric windows, and which of the two the speedup
     * and the bound use (stock_ms and comm_ms stay the plain ones) */
    ROW_NUM("stock_window_ms", "stock window ms", stock_window_ms, 3, 3),
    ROW_NUM("best_stock_ms", "best stock ms", best_stock_ms, 3, 3),
    CUSTOM("best_stock", "best stock", 0, 0, 0, get_best_stock, NULL),
    ROW_NUM("comm_window_ms", "comm window ms", comm_window_ms, 3, 3),
    ROW_NUM("best_comm_ms", "best comm ms", best_comm_ms, 3, 3),
    CUSTOM("best_comm", "best comm", 0, 0, 0, get_best_comm, NULL),
    CUSTOM("stock_window_config_id", "stock window id", COL_NUMBER, 0, 0, get_stock_window_id,
           NULL),
    CUSTOM("comm_window_config_id", "comm window id", COL_NUMBER, 0, 0, get_comm_window_id, NULL),
    /* appended with schema 007: how the operands travel */
    AXIS("comm_dtype", "comm dtype", SRC_AXIS_TEXT, comm_dtype, 0),
    AXIS("fsdp_traffic", "fsdp traffic", SRC_AXIS_INT, fsdp_traffic, COL_NUMBER),
    CUSTOM("symm", "symm", 0, 0, 0, get_symm, NULL),
    CUSTOM("stock_traffic_mib", "stock traffic MiB", COL_NUMBER, 1, 1, get_stock_traffic_mib, NULL),
    CUSTOM("dist_traffic_mib", "dist traffic MiB", COL_NUMBER, 1, 1, get_dist_traffic_mib, NULL),
    /* appended: whether the headline keeps the row apart */
    CUSTOM("toy", "toy model", 0, 0, 0, get_toy, NULL),
};
enum { N_REGISTRY = sizeof registry / sizeof registry[0] };
_Static_assert((int)N_REGISTRY <= (int)TP_REPORT_MAX_COLUMNS, "a column set holds every column");

/* The compact markdown table; "?" marks a column shown only when its
 * values differ between rows, "~" one shown only when a row was traced,
 * "+" one shown only when the run has the stock variant on NCCL windows. */
static const char *const compact[] = {"config_id",    "short_key", "model",    "op",
                                      "shape",        "?tp",       "?dtype",   "?options",
                                      "pass",         "schedule",  "stock_ms", "+stock_window_ms",
                                      "+best_stock",  "dist_ms",   "speedup",  "dist_over_bound",
                                      "~overlap_pct", "status"};

static void cell_of(const column *col, const report *rep, const table_row *row, int markdown,
                    tp_cell *c) {
  tp_cell_clear(c);
  c->buf[0] = '\0';
  const config *k = tp_report_case_of(row);
  const char *base_row = (const char *)row, *base_cfg = (const char *)k,
             *base_run = (const char *)&rep->run;
  if (markdown && col->md) {
    col->md(rep, row, c);
    return;
  }
  switch (col->src) {
  case SRC_ROW_NUM: tp_cell_set_num(c, *(const double *)(base_row + col->offset)); break;
  case SRC_AXIS_TEXT: tp_cell_set_text(c, *(char *const *)(base_cfg + col->offset)); break;
  case SRC_AXIS_INT: tp_cell_set_int(c, *(const int64_t *)(base_cfg + col->offset)); break;
  case SRC_AXIS_BOOL: tp_cell_set_bool(c, *(const int64_t *)(base_cfg + col->offset) != 0); break;
  case SRC_RUN_TEXT: tp_cell_set_text(c, *(char *const *)(base_run + col->offset)); break;
  case SRC_RUN_INT: {
    int64_t v = *(const int64_t *)(base_run + col->offset);
    if (v >= 0) tp_cell_set_int(c, v);
    else c->type = TP_CELL_NONE;
    break;
  }
  case SRC_CUSTOM: col->get(rep, row, c); break;
  }
}

/* ---- choosing ------------------------------------------------------------- */

static int find_column(const char *name, size_t len) {
  for (int i = 0; i < N_REGISTRY; i++)
    if (strlen(registry[i].name) == len && !strncmp(registry[i].name, name, len)) return i;
  return -1;
}

static tp_rc add_column(column_set *set, int index) {
  if (set->count >= TP_REPORT_MAX_COLUMNS)
    return TP_FAIL(TP_EUSAGE, "--columns: at most %d columns", TP_REPORT_MAX_COLUMNS);
  set->index[set->count++] = index;
  return TP_OK;
}

/* Whether the column's value differs between rows (as markdown shows it). */
static int varies(const report *rep, int index) {
  tp_cell first, other;
  for (size_t i = 0; i < rep->n_rows; i++) {
    tp_cell *c = i == 0 ? &first : &other;
    cell_of(&registry[index], rep, &rep->rows[i], 1, c);
    if (i == 0) continue;
    int same = c->type == first.type &&
               (c->type == TP_CELL_TEXT ? !strcmp(c->text, first.text) : c->i == first.i);
    if (!same) return 1;
  }
  return 0;
}

static tp_rc pick_compact(const report *rep, column_set *set) {
  for (size_t i = 0; i < sizeof compact / sizeof compact[0]; i++) {
    const char *name = compact[i];
    int only_if_varies = name[0] == '?', only_if_traced = name[0] == '~',
        only_if_window = name[0] == '+';
    if (only_if_varies || only_if_traced || only_if_window) name++;
    int index = find_column(name, strlen(name));
    if (index < 0) return TP_FAIL(TP_EINTERNAL, "report: no column %s", name);
    if (only_if_varies && !varies(rep, index)) continue;
    if (only_if_traced && !rep->any_trace) continue;
    if (only_if_window && !rep->any_window) continue;
    TP_TRY(add_column(set, index));
  }
  return TP_OK;
}

/* The registry's names, in its order, for the shared --columns parser (tp_report_util.h). */
static tp_rc pick_named(const char *spec, column_set *set) {
  const char *names[N_REGISTRY];
  for (int i = 0; i < N_REGISTRY; i++) names[i] = registry[i].name;
  return tp_columns_parse(spec, names, N_REGISTRY, set->index, &set->count);
}

tp_rc tp_report_columns_pick(const char *spec, tp_report_format fmt, const report *rep,
                             column_set *out) {
  memset(out, 0, sizeof *out);
  out->explicit_choice = spec != NULL;
  if (spec && !strcmp(spec, "all")) {
    for (int i = 0; i < N_REGISTRY; i++) TP_TRY(add_column(out, i));
    return TP_OK;
  }
  if (spec) return pick_named(spec, out);
  if (fmt == TP_FMT_MARKDOWN) return pick_compact(rep, out);
  /* CSV and JSON carry every column (JSON the run's in its "run" object): a reader of the
   * machine formats should never have to know a column exists to get it */
  for (int i = 0; i < N_REGISTRY; i++) {
    if (fmt == TP_FMT_JSON && (registry[i].flags & COL_RUN)) continue;
    TP_TRY(add_column(out, i));
  }
  return TP_OK;
}

/* ---- markdown --------------------------------------------------------------- */

void tp_report_md_rows(FILE *out, const report *rep, const column_set *cols) {
  for (int i = 0; i < cols->count; i++) tp_md_cell(out, registry[cols->index[i]].md_header);
  fputs("|\n", out);
  /* Numbers align right so their decimals line up. */
  for (int i = 0; i < cols->count; i++)
    fputs(registry[cols->index[i]].flags & COL_NUMBER ? "|---:" : "|---", out);
  fputs("|\n", out);
  tp_cell c;
  for (size_t r = 0; r < rep->n_rows; r++) {
    for (int i = 0; i < cols->count; i++) {
      const column *col = &registry[cols->index[i]];
      cell_of(col, rep, &rep->rows[r], 1, &c);
      tp_cell_md(out, &c, col->md_decimals, "-");
    }
    fputs("|\n", out);
  }
}

/* ---- CSV -------------------------------------------------------------------- */

void tp_report_csv_rows(FILE *out, const report *rep, const column_set *cols) {
  for (int i = 0; i < cols->count; i++) tp_csv_field(out, registry[cols->index[i]].name, i == 0);
  tp_csv_end_line(out);
  tp_cell c;
  for (size_t r = 0; r < rep->n_rows; r++) {
    for (int i = 0; i < cols->count; i++) {
      const column *col = &registry[cols->index[i]];
      cell_of(col, rep, &rep->rows[r], 0, &c);
      tp_cell_csv(out, &c, col->csv_decimals, i, cols->count);
    }
    tp_csv_end_line(out);
  }
}

/* ---- JSON ------------------------------------------------------------------- */

json_t *tp_report_json_row(tp_json_builder *jb, const report *rep, const table_row *row,
                           const column_set *cols) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_cell c;
  for (int i = 0; i < cols->count; i++) {
    const column *col = &registry[cols->index[i]];
    cell_of(col, rep, row, 0, &c);
    tp_json_set(jb, o, col->name, tp_cell_json(&c));
  }
  return o;
}
