/*
 * tp_report_link.c — `report --run N` of a `tpbench link` probe: its points
 * (configurations of kind link, bench/gpu/cmd_link.c) per transfer kind, in
 * the columns nccl-tests prints, so its numbers can be put beside theirs.
 *
 * What cmd_link.c stores per point: layer = the transfer kind, m = the bytes
 * each rank sends (its share), tp = the ranks, dtype, and the slowest rank's
 * median time per transfer. nccl-tests counts an all-gather's size as its
 * whole output and a reduce-scatter's as its whole input (the share times
 * the ranks), and a push (send/receive) as the bytes sent; algbw = size /
 * time, busbw = algbw · (ranks - 1) / ranks for the two collectives and algbw
 * for a push: the same bus bandwidth cmd_link.c prints.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "report/tp_report_internal.h"

/* One measured point. */
typedef struct {
  int64_t id, ranks, share_bytes, samples;
  int64_t gemm_n, gemm_k; /* a GEMM between gaps (is_gemm): M is share_bytes' column */
  int is_gemm;
  char kind[48], dtype[16];
  char short_key[TP_SHORT_KEY_LEN + 1];
  double time_us, p10_us, p90_us;
  double size_bytes, count, algbw_gbps, busbw_gbps;
} link_point;

typedef struct {
  link_point *items;
  size_t n, cap;
} link_points;

tp_rc tp_report_is_link_run(tp_store *store, int64_t run_id, int *is_link) {
  static const char sql[] =
      "SELECT coalesce(sum(kind IN ('op', 'layer')), 0), coalesce(sum(kind = 'link'), 0) FROM "
      "configs WHERE run_id = ?";
  sqlite3 *db = tp_store_db(store);
  sqlite3_stmt *st = NULL;
  *is_link = 0;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: preparing the run's kinds: %s", tp_store_path(store),
                   sqlite3_errmsg(db));
  tp_rc rc = TP_OK;
  if (sqlite3_bind_int64(st, 1, run_id) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
    rc = TP_FAIL(TP_ESQLITE, "%s: reading the run's kinds: %s", tp_store_path(store),
                 sqlite3_errmsg(db));
  else
    /* link points and nothing a throughput table shows: a row of a kind this tpbench does not
     * know (a newer one's, or a damaged one) does not turn a probe into an empty table */
    *is_link = sqlite3_column_int64(st, 0) == 0 && sqlite3_column_int64(st, 1) > 0;
  sqlite3_finalize(st);
  return rc;
}

static int is_collective(const char *kind) { return !strncmp(kind, "nccl_", 5); }

static double element_bytes(const char *dtype) { return !strcmp(dtype, "fp32") ? 4.0 : 2.0; }

/* nccl-tests' size, count, algbw and busbw of a point. */
static void derive_point(link_point *p) {
  if (p->is_gemm) {
    p->size_bytes = p->count = p->algbw_gbps = p->busbw_gbps = NAN;
    return;
  }
  int collective = is_collective(p->kind);
  p->size_bytes = (double)p->share_bytes * (collective ? (double)p->ranks : 1.0);
  p->count = p->size_bytes / element_bytes(p->dtype);
  /* bytes per µs is MB/s: a thousandth of GB/s */
  p->algbw_gbps = p->time_us > 0 ? p->size_bytes / p->time_us / 1e3 : NAN;
  p->busbw_gbps = collective && p->ranks > 0
                      ? p->algbw_gbps * (double)(p->ranks - 1) / (double)p->ranks
                      : p->algbw_gbps;
}

static double real_or_nan(sqlite3_stmt *st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

static tp_rc take_point(sqlite3_stmt *st, link_points *pts) {
  link_point *grown = tp_grow_array(pts->items, &pts->cap, pts->n, sizeof *pts->items);
  if (!grown) return TP_FAIL(TP_EOOM, "report: out of memory");
  pts->items = grown;
  link_point *p = &pts->items[pts->n++];
  memset(p, 0, sizeof *p);
  p->id = sqlite3_column_int64(st, 0);
  tp_short_key((const char *)sqlite3_column_text(st, 1), p->short_key, sizeof p->short_key);
  const char *kind = (const char *)sqlite3_column_text(st, 2);
  const char *dtype = (const char *)sqlite3_column_text(st, 5);
  snprintf(p->kind, sizeof p->kind, "%s", kind ? kind : "?");
  snprintf(p->dtype, sizeof p->dtype, "%s", dtype ? dtype : "bf16");
  p->ranks = sqlite3_column_int64(st, 3);
  p->share_bytes = sqlite3_column_int64(st, 4);
  p->time_us = real_or_nan(st, 6);
  p->p10_us = real_or_nan(st, 7);
  p->p90_us = real_or_nan(st, 8);
  p->samples = sqlite3_column_int64(st, 9);
  p->is_gemm = tp_link_is_gemm_gap(p->kind);
  p->gemm_n = sqlite3_column_int64(st, 10);
  p->gemm_k = sqlite3_column_int64(st, 11);
  derive_point(p);
  return TP_OK;
}

/* The run's points that ran, by kind in the probe's order, then size. */
static tp_rc load_points(tp_store *store, int64_t run_id, link_points *pts) {
  static const char sql[] =
      "SELECT c.id, c.config_key, c.layer, c.tp, c.m, c.dtype, r.median_us, r.p10_us, r.p90_us, "
      "r.n_samples, c.n, c.k FROM configs c JOIN results r ON r.config_id = c.id WHERE c.run_id = "
      "? AND "
      "c.kind = 'link' AND c.status = 'ok' ORDER BY CASE c.layer WHEN 'ce_push' THEN 0 WHEN "
      "'sm_push' THEN 1 WHEN 'nccl_all_gather' THEN 2 WHEN 'nccl_reduce_scatter' THEN 3 ELSE 4 "
      "END, c.layer GLOB 'gemm_gap_*', CASE WHEN c.layer GLOB 'gemm_gap_*' THEN '' ELSE c.layer "
      "END, c.m, c.n, c.k, CAST(substr(c.layer, 10) AS INTEGER), c.id";
  sqlite3 *db = tp_store_db(store);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return TP_FAIL(TP_ESQLITE, "%s: preparing the link points: %s", tp_store_path(store),
                   sqlite3_errmsg(db));
  tp_rc rc = TP_OK;
  int step = SQLITE_DONE;
  if (sqlite3_bind_int64(st, 1, run_id) != SQLITE_OK) step = SQLITE_ERROR;
  else
    while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) rc = take_point(st, pts);
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_FAIL(TP_ESQLITE, "%s: reading the link points: %s", tp_store_path(store),
                 sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

/* ---- markdown --------------------------------------------------------------- */

static const char *kind_title(const char *kind) {
  if (!strcmp(kind, "ce_push")) return "copy-engine push into a peer's buffer (the ce schedule)";
  if (!strcmp(kind, "sm_push"))
    return "SM copy kernel's push into a peer's buffer (the sm schedule)";
  if (!strcmp(kind, "nccl_all_gather")) return "NCCL all-gather (the stock path)";
  if (!strcmp(kind, "nccl_reduce_scatter")) return "NCCL reduce-scatter (the stock path)";
  if (!strcmp(kind, "local_copy"))
    return "copy within one GPU (the local memory the reduce-scatter side's sums read)";
  if (!strcmp(kind, "barrier")) return "the fused op's barrier across the ranks, per call";
  if (!strcmp(kind, "flag_round_trip")) return "a flag to a peer and back, per call";
  if (!strcmp(kind, "flag_wait")) return "a flag wait that finds its flag raised, per call";
  return "";
}

static void md_point(FILE *out, const link_point *p) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.0f", p->size_bytes);
  tp_md_cell(out, buf);
  snprintf(buf, sizeof buf, "%.0f", p->count);
  tp_md_cell(out, buf);
  tp_md_cell(out, p->dtype);
  tp_md_num(out, p->time_us, 2);
  tp_md_num(out, p->algbw_gbps, 2);
  tp_md_num(out, p->busbw_gbps, 2);
  snprintf(buf, sizeof buf, "%lld", (long long)p->id);
  tp_md_cell(out, buf);
  tp_md_cell(out, p->short_key);
  fputs("|\n", out);
}

/* The GEMMs between gaps: one table, each point beside its shape's back-to-back time. */
static void md_gemm_gaps(FILE *out, const link_points *pts) {
  double base = NAN;
  int64_t ranks = 0;
  int rows = 0;
  for (size_t i = 0; i < pts->n; i++)
    if (pts->items[i].is_gemm) ranks = pts->items[i].ranks;
  for (size_t i = 0; i < pts->n; i++) {
    const link_point *p = &pts->items[i];
    if (!p->is_gemm) continue;
    if (rows++ == 0)
      fprintf(out,
              "\n### GEMMs between gaps: a bf16 GEMM after an idle gap of a share of its "
              "back-to-back time, %lld rank%s\n\n| M×N×K | gap (%%) | GEMM (us) | over back to "
              "back | id | key |\n|---|---:|---:|---:|---:|---|\n",
              (long long)ranks, ranks == 1 ? "" : "s");
    const link_point *prev = rows > 1 ? &pts->items[i - 1] : NULL;
    if (!prev || !prev->is_gemm || prev->share_bytes != p->share_bytes ||
        prev->gemm_n != p->gemm_n || prev->gemm_k != p->gemm_k)
      base = NAN; /* a shape of its own: only its own back-to-back time */
    if (!strcmp(p->kind, "gemm_gap_0")) base = p->time_us;
    char buf[96];
    snprintf(buf, sizeof buf, "%lld×%lld×%lld", (long long)p->share_bytes, (long long)p->gemm_n,
             (long long)p->gemm_k);
    tp_md_cell(out, buf);
    tp_md_cell(out, p->kind + 9);
    tp_md_num(out, p->time_us, 2);
    tp_md_num(out, p->time_us / base, 3);
    snprintf(buf, sizeof buf, "%lld", (long long)p->id);
    tp_md_cell(out, buf);
    tp_md_cell(out, p->short_key);
    fputs("|\n", out);
  }
}

static void write_markdown(FILE *out, const report *rep, const link_points *pts) {
  tp_report_md_header(out, rep, "link probe");
  size_t shown = 0;
  for (size_t i = 0; i < pts->n; i++) {
    const link_point *p = &pts->items[i];
    if (p->is_gemm) continue;
    if (shown++ == 0 || strcmp(p->kind, pts->items[i - 1].kind) != 0) {
      fprintf(out, "%s### ", shown > 1 ? "\n" : "");
      tp_md_text(out, p->kind);
      fputs(": ", out);
      tp_md_text(out, kind_title(p->kind));
      fprintf(out, ", %lld ranks\n\n", (long long)p->ranks);
      fputs("| size (B) | count (elements) | type | time (us) | algbw (GB/s) | busbw (GB/s) | id "
            "| key |\n|---:|---:|---|---:|---:|---:|---:|---|\n",
            out);
    }
    md_point(out, p);
  }
  md_gemm_gaps(out, pts);
  if (pts->n == 0) fputs("(no link point of this run ran)\n", out);
  if (shown == 0) return; /* no transfer: nothing the bandwidth conventions apply to */
  fputs("\nAs nccl-tests counts them: size is what one collective moves in all (all-gather's "
        "output, reduce-scatter's input) or one rank's push; time is the slowest rank's median "
        "per transfer; algbw = size / time; busbw = algbw · (ranks − 1) / ranks for the "
        "collectives, algbw for a push. GB/s are 10^9 bytes per second.\n",
        out);
}

/* ---- CSV and JSON ------------------------------------------------------------- */

static const char *const csv_columns[] = {"run_id", "commit", "kind",    "ranks",      "size_bytes",
                                          "count",  "dtype",  "time_us", "algbw_gbps", "busbw_gbps",
                                          "p10_us", "p90_us", "samples", "config_id",  "short_key",
                                          "gemm_m", "gemm_n", "gemm_k"};

static void write_csv(FILE *out, const report *rep, const link_points *pts) {
  for (size_t i = 0; i < sizeof csv_columns / sizeof csv_columns[0]; i++)
    tp_csv_field(out, csv_columns[i], i == 0);
  tp_csv_end_line(out);
  for (size_t i = 0; i < pts->n; i++) {
    const link_point *p = &pts->items[i];
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)rep->run.id);
    tp_csv_field(out, buf, 1);
    tp_csv_field(out, rep->run.commit, 0);
    tp_csv_field(out, p->kind, 0);
    tp_csv_int(out, p->ranks);
    tp_csv_num(out, p->size_bytes, 0);
    tp_csv_num(out, p->count, 0);
    tp_csv_field(out, p->dtype, 0);
    tp_csv_num(out, p->time_us, 3);
    tp_csv_num(out, p->algbw_gbps, 3);
    tp_csv_num(out, p->busbw_gbps, 3);
    tp_csv_num(out, p->p10_us, 3);
    tp_csv_num(out, p->p90_us, 3);
    tp_csv_int(out, p->samples);
    tp_csv_int(out, p->id);
    tp_csv_field(out, p->short_key, 0);
    /* a GEMM between gaps: its shape (the three shapes' points of one gap differ only here) */
    for (int axis = 0; axis < 3; axis++) {
      if (!p->is_gemm) {
        tp_csv_field(out, "", 0);
        continue;
      }
      const int64_t v = axis == 0 ? p->share_bytes : axis == 1 ? p->gemm_n : p->gemm_k;
      tp_csv_int(out, v);
    }
    tp_csv_end_line(out);
  }
}

static json_t *json_point(tp_json_builder *jb, const link_point *p) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "kind", tp_json_str(p->kind));
  tp_json_set(jb, o, "ranks", json_integer(p->ranks));
  tp_json_set(jb, o, "size_bytes", tp_json_real(p->size_bytes));
  tp_json_set(jb, o, "count", tp_json_real(p->count));
  tp_json_set(jb, o, "dtype", tp_json_str(p->dtype));
  tp_json_set(jb, o, "time_us", tp_json_real(p->time_us));
  tp_json_set(jb, o, "algbw_gbps", tp_json_real(p->algbw_gbps));
  tp_json_set(jb, o, "busbw_gbps", tp_json_real(p->busbw_gbps));
  tp_json_set(jb, o, "p10_us", tp_json_real(p->p10_us));
  tp_json_set(jb, o, "p90_us", tp_json_real(p->p90_us));
  tp_json_set(jb, o, "samples", json_integer(p->samples));
  tp_json_set(jb, o, "config_id", json_integer(p->id));
  tp_json_set(jb, o, "short_key", tp_json_str(p->short_key));
  if (p->is_gemm) {
    tp_json_set(jb, o, "gemm_m", json_integer(p->share_bytes));
    tp_json_set(jb, o, "gemm_n", json_integer(p->gemm_n));
    tp_json_set(jb, o, "gemm_k", json_integer(p->gemm_k));
  }
  return o;
}

static tp_rc write_json(FILE *out, const report *rep, const link_points *pts) {
  tp_json_builder jb = {0};
  json_t *root = json_object(), *list = json_array();
  if (!root || !list) jb.failed = 1;
  for (size_t i = 0; list && i < pts->n; i++)
    tp_json_append(&jb, list, json_point(&jb, &pts->items[i]));
  if (root) {
    tp_json_set(&jb, root, "run", tp_report_json_run(&jb, &rep->run));
    tp_json_set(&jb, root, "link", list);
  } else {
    json_decref(list);
  }
  return tp_json_write_document(out, root, &jb, "report");
}

tp_rc tp_report_link(tp_store *store, const report *rep, tp_report_format fmt, FILE *out) {
  link_points pts = {0};
  tp_rc rc = load_points(store, rep->run.id, &pts);
  if (rc == TP_OK) {
    switch (fmt) {
    case TP_FMT_MARKDOWN: write_markdown(out, rep, &pts); break;
    case TP_FMT_CSV: write_csv(out, rep, &pts); break;
    case TP_FMT_JSON: rc = write_json(out, rep, &pts); break;
    default: rc = TP_FAIL(TP_EUSAGE, "unknown report format %d", (int)fmt);
    }
  }
  free(pts.items);
  return rc;
}
