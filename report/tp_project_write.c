/*
 * tp_project_write.c — `tpbench project`'s output (tp_project.h), marked a prediction in its
 * header and in a column of every row: the inputs it read (the link probe's points, the
 * fused pipeline's costs and where each came from, each shape's GEMM times with their source
 * rows, bytes and bandwidths), the degree-dependent terms, the predictions, and the
 * validation against the rows measured at a projected degree with each backend's signed
 * median and worst |error|, in markdown, CSV or JSON. The predictions' columns are
 * tp_project_columns.c's (--columns).
 */
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "report/tp_project_internal.h"
#include "report/tp_report_util.h"

static const double MIB = 1048576.0;

static const char MODEL_MD[] =
    "Model (docs/projection.md; report/tp_project.h): a GEMM takes the time of a GEMM-alone row "
    "of its shape, else the rate interpolated by FLOPs (below the measured FLOPs: linear from "
    "the kernel cost k at 0 FLOPs). V = (W − 1)/W of the gathered tensor crosses each rank's "
    "links at the link probe's per-GPU bandwidth and latency for that size (an NVSwitch host: "
    "the same at every W). stock = G·p + c, c the NCCL collective of V, p the pace factor (G "
    "after an idle gap of c over G back to back, from the GEMMs between gaps; 1 without "
    "them). dist_gemm = the fused op's "
    "copy and main streams simulated in the code's order with the chunks auto picks: barrier b, "
    "pushes, flag waits (w when met, else h after the push lands), chunk GEMMs, on the "
    "reduce-scatter side the reduce pass and the C read at the local memory rate and the "
    "drain. Forward pass. Error = (predicted − measured) / measured.\n\n";

static const char DEGREE_MD[] =
    "Degree-dependent terms (W = TP degree, C = chunks, T tokens, R = T/(W·C) rows a chunk): "
    "V = (W − 1)/W·T·width·bytes per rank; per op (W − 1)·C pushes of R rows on one copy "
    "stream and (W − 1)·C flag waits; 1 + (W − 1)·C GEMMs (all-gather side: one of T/W rows, "
    "the rest of R) or W·C GEMMs of R rows (reduce-scatter side), each at the rate of its own "
    "FLOPs; from W = 3 a reduce pass per chunk over W − 1 partials (W·R·N·bytes read and "
    "written); one barrier per op. Held at their probed values whatever W: NCCL's per-call "
    "latency, the barrier, h, w, k. Stock's pace factor p follows the gap c/G.\n\n";

/* ---- the GEMMs the predictions read (model point 2) ----------------------------- */

/* One GEMM a prediction reads: its role, its rows (M; N and K are the row's shard) and its
 * time, read or estimated. */
typedef struct {
  const char *role; /* "stock": G(T); "shard": the all-gather side's G(S); "chunk": G(R) */
  int64_t m;
  const tp_project_gemm_est *est;
} gemm_use;

/* The GEMMs row reads; 0 when the degree was not projected (no GEMM timed). */
static size_t gemm_uses(const tp_project_row *row, gemm_use uses[3]) {
  size_t n = 0;
  if (row->gemm.flops > 0) uses[n++] = (gemm_use){"stock", row->m, &row->gemm};
  if (row->pipe.shard_gemm.flops > 0)
    uses[n++] = (gemm_use){"shard", row->pipe.shard_rows, &row->pipe.shard_gemm};
  if (row->pipe.chunk_gemm.flops > 0)
    uses[n++] = (gemm_use){"chunk", row->pipe.chunk_rows, &row->pipe.chunk_gemm};
  return n;
}

/* The GEMMs the predictions read: a row of their exact shape gives some, FLOPs estimate the
 * others but those without a time (no GEMM row of their dtype). */
typedef struct {
  size_t read, exact, untimed;
} gemm_counts;

static gemm_counts count_gemms(const tp_project_data *data) {
  gemm_counts c = {0};
  for (size_t i = 0; i < data->n_rows; i++) {
    gemm_use uses[3];
    size_t n = gemm_uses(&data->rows[i].row, uses);
    c.read += n;
    for (size_t u = 0; u < n; u++) {
      c.exact += uses[u].est->exact != 0;
      c.untimed += isnan(uses[u].est->us);
    }
  }
  return c;
}

/* The GEMM list (req->gemms): a line per GEMM read, its shape as `ops --shape` takes it. */
static void write_gemms(FILE *out, const tp_project_data *data) {
  fputs("model,proj,tokens,tp,role,dtype,m,n,k,op,weights,gflop,exact,us,source", out);
  tp_csv_end_line(out);
  for (size_t i = 0; i < data->n_rows; i++) {
    const tp_project_row *r = &data->rows[i].row;
    gemm_use uses[3];
    size_t n = gemm_uses(r, uses);
    for (size_t u = 0; u < n; u++) {
      tp_csv_field(out, r->shape.model, 1);
      tp_csv_field(out, r->shape.proj, 0);
      tp_csv_int(out, r->shape.tokens);
      tp_csv_int(out, r->tp);
      tp_csv_field(out, uses[u].role, 0);
      tp_csv_field(out, tp_dtype_name(r->shape.dtype), 0);
      tp_csv_int(out, uses[u].m);
      tp_csv_int(out, r->n);
      tp_csv_int(out, r->k);
      tp_csv_field(out, tp_op_name(r->shape.op), 0);
      tp_csv_int(out, r->shape.n_weights);
      tp_csv_num(out, uses[u].est->flops / 1e9, 3);
      tp_csv_int(out, uses[u].est->exact);
      tp_csv_num(out, uses[u].est->us, 3);
      tp_csv_field(out, uses[u].est->source, 0);
      tp_csv_end_line(out);
    }
  }
}

static void md_int(FILE *out, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  tp_md_cell(out, buf);
}

/* A GPU's name as the output shows it (a run may have recorded none). */
static const char *gpu_label(const char *gpu_name) {
  return gpu_name[0] ? gpu_name : "a GPU of no name";
}

/* The GEMM rates and the link probe's costs are of one card. */
static int gemm_gpu_is_link_gpu(const tp_project_data *data) {
  return strcmp(data->link_gpu_name, data->gemm_gpu) == 0;
}

static void md_header(FILE *out, const tp_project_request *req, const tp_project_data *data) {
  fputs("## Prediction of stock and dist_gemm (tpbench project)\n\n"
        "**A prediction, not a measurement**: every stock and dist_gemm time below is computed "
        "from the inputs listed here; only the validation tables' measured columns were "
        "measured.\n\nDegrees:",
        out);
  for (int i = 0; i < req->n_tps; i++) fprintf(out, "%s %d", i ? "," : "", req->tps[i]);
  fputs(". Shapes: ", out);
  if (req->shapes) fprintf(out, "%zu from the model presets", data->n_shapes);
  else if (req->shapes_run)
    fprintf(out, "the %zu run %lld measured", data->n_shapes, (long long)req->shapes_run);
  else fprintf(out, "the %zu the database measured", data->n_shapes);
  fputs(". GEMM rates: GEMM-alone rows (pass fwd) of ", out);
  if (req->run_id) fprintf(out, "run %lld", (long long)req->run_id);
  else fputs("every run (the latest row per shard shape)", out);
  if (req->gemm_tp) fprintf(out, " measured at TP %d", req->gemm_tp);
  fputs(" on ", out);
  tp_md_text(out, gpu_label(data->gemm_gpu));
  if (data->gemm_other_gpus) {
    fputs(" (not read: the rows of other GPUs, ", out);
    tp_md_text(out, data->gemm_other_names);
    fputs("; `--gemm-gpu` picks the card)", out);
  }
  const gemm_counts gemms = count_gemms(data);
  fprintf(out,
          ", %zu shard shapes; of the %zu GEMMs the predictions read, %zu are rows of their exact "
          "shape, %zu estimated from FLOPs",
          data->n_gemms, gemms.read, gemms.exact, gemms.read - gemms.exact - gemms.untimed);
  if (gemms.untimed)
    fprintf(out, ", %zu without a time (no GEMM row of their dtype)", gemms.untimed);
  fputs(" (`--gemms` lists each). Link probe: ", out);
  if (data->link_run) {
    fprintf(out, "run %lld (", (long long)data->link_run);
    tp_md_text(out, data->link_host);
    fputs(", ", out);
    tp_md_text(out, data->link_gpu);
    fputs(")", out);
  } else fputs("none", out);
  if (req->link_gbps > 0)
    fprintf(out, "; bandwidth --link-gbps %g for every transport", req->link_gbps);
  fputs(". GEMMs between gaps (stock's pace factor p): ", out);
  if (data->pace_run) {
    fprintf(out, "run %lld (", (long long)data->pace_run);
    tp_md_text(out, gpu_label(data->pace_gpu));
    fputs(")", out);
  } else fputs("none, p = 1 (`tpbench link` measures them)", out);
  if (!data->pace_run && data->pace_skipped[0]) {
    fputs("; not read: ", out);
    tp_md_text(out, data->pace_skipped);
  }
  fputs(".\n\n", out);
  if (data->link_run && !gemm_gpu_is_link_gpu(data)) {
    fputs("**The GEMM rates and the link probe are of different GPUs** (GEMMs: ", out);
    tp_md_text(out, gpu_label(data->gemm_gpu));
    fputs("; link probe: ", out);
    tp_md_text(out, gpu_label(data->link_gpu_name));
    fputs("): the prediction is of neither card.\n\n", out);
  }
  if (data->link_knobs[0]) {
    fputs("**The link probe ran with test knobs in force** (", out);
    tp_md_text(out, data->link_knobs);
    fputs("): its timings are not the hardware's.\n\n", out);
  }
  if (data->pace_run && data->pace_knobs[0]) {
    fputs("**The GEMMs between gaps ran with test knobs in force** (", out);
    tp_md_text(out, data->pace_knobs);
    fputs("): their timings are not the hardware's.\n\n", out);
  }
  fputs(MODEL_MD, out);
  fputs(DEGREE_MD, out);
}

static void md_costs(FILE *out, const tp_project_data *data) {
  fputs("### Costs of the fused pipeline\n\n| cost | value | unit | from | source |\n"
        "|---|---:|---|---|---|\n",
        out);
  for (int i = 0; i < TP_COST_KINDS; i++) {
    const tp_project_cost *c = &data->costs[i];
    tp_md_cell(out, tp_cost_kind_name((tp_cost_kind)i));
    tp_md_num(out, c->value, i == TP_COST_LOCAL_GBPS ? 0 : 2);
    tp_md_cell(out, i == TP_COST_LOCAL_GBPS ? "GB/s" : "us");
    tp_md_cell(out, c->measured ? "probe" : isfinite(c->value) ? "fallback" : "unknown");
    tp_md_cell(out, c->source);
    fputs("|\n", out);
  }
  fputs("\n", out);
}

static void md_points(FILE *out, const tp_project_data *data) {
  if (!data->link_run) return;
  fprintf(out, "### Link probe points (run %lld)\n\n", (long long)data->link_run);
  fputs("| point | config | bytes per rank (MiB) | time (µs) | GB/s |\n"
        "|---|---:|---:|---:|---:|\n",
        out);
  for (int kind = 0; kind < TP_LINK_KINDS; kind++)
    for (size_t i = 0; i < data->n_points[kind]; i++) {
      const tp_project_link_point *p = &data->points[kind][i];
      tp_md_cell(out, tp_link_kind_name((tp_link_kind)kind));
      md_int(out, p->config_id);
      tp_md_num(out, p->bytes / MIB, 3);
      tp_md_num(out, p->time_us, 2);
      tp_md_num(out, p->bytes > 0 ? p->bytes / p->time_us / 1e3 : NAN, 1);
      fputs("|\n", out);
    }
  fputs("\n", out);
}

static void md_pace_points(FILE *out, const tp_project_data *data) {
  if (!data->pace_run) return;
  fprintf(out, "### GEMMs between gaps (run %lld)\n\n", (long long)data->pace_run);
  fputs("| config | GFLOP | gap (% of back to back) | GEMM (µs) | over back to back |\n"
        "|---:|---:|---:|---:|---:|\n",
        out);
  double base = NAN, base_flops = NAN;
  for (size_t i = 0; i < data->n_pace; i++) {
    const tp_project_pace_point *p = &data->pace[i];
    if (p->flops != base_flops) {
      base = NAN;
      base_flops = p->flops;
    }
    if (p->gap_pct == 0) base = p->time_us;
    md_int(out, p->config_id);
    tp_md_num(out, p->flops / 1e9, 0);
    tp_md_num(out, p->gap_pct, 0);
    tp_md_num(out, p->time_us, 1);
    tp_md_num(out, p->time_us / base, 3);
    fputs("|\n", out);
  }
  fputs("\n", out);
}

static void md_shape_cells(FILE *out, const tp_project_row *r) {
  tp_md_cell(out, r->shape.model);
  tp_md_cell(out, r->shape.proj);
  tp_md_cell(out, tp_op_name(r->shape.op));
  md_int(out, r->shape.tokens);
  tp_md_cell(out, tp_dtype_name(r->shape.dtype));
  md_int(out, r->tp);
}

/* How to get the inputs back under the default, compact table. */
static const char COMPACT_MD[] =
    "The predictions without their inputs. Every input of each row (the shard's GEMM time and "
    "the row it came from, the collective's bytes and line, the fused pipeline's chunks, pushes, "
    "stall and drain): `--columns all`; single columns by name (`tpbench project --help`).\n\n";

static void md_predictions(FILE *out, const tp_project_data *data, const tp_project_columns *cols,
                           int named) {
  if (cols->full) fputs("### Inputs and predictions\n\n", out);
  else fputs("### Predictions\n\n", out);
  if (!cols->full && !named) fputs(COMPACT_MD, out);
  tp_project_md_rows(out, data, cols);
  if (data->n_rows == 0) fputs("\n(no op shapes)\n", out);
  fputs("\n", out);
}

static void md_check_row(FILE *out, const tp_projected *p) {
  char ids[64], note[64] = "";
  md_shape_cells(out, &p->row);
  tp_md_num(out, p->stock_id ? p->stock_measured_us : NAN, 1);
  tp_md_num(out, p->row.stock_us, 1);
  tp_md_num(out, p->stock_err_pct, 1);
  tp_md_num(out, p->dist_id ? p->dist_measured_us : NAN, 1);
  tp_md_num(out, p->row.dist_us, 1);
  tp_md_num(out, p->dist_err_pct, 1);
  snprintf(ids, sizeof ids, "%lld, %lld", (long long)p->stock_id, (long long)p->dist_id);
  tp_md_cell(out, ids);
  if (p->dist_stock_path) snprintf(note, sizeof note, "dist_gemm took the stock path");
  tp_md_cell(out, note);
  fputs("|\n", out);
}

/* "signed median X %, worst |error| Y % (config N), median |error| Z %, over n shapes" */
static void md_summary(FILE *out, const char *backend, const tp_project_error_summary *e,
                       int64_t worst_config) {
  char a[32], b[32], c[32];
  fprintf(out,
          "%s signed median %s %%, worst |error| %s %% (config %lld), median |error| %s %%, "
          "over %d shapes",
          backend, tp_fmt_num(a, sizeof a, e->median_pct, 1),
          tp_fmt_num(b, sizeof b, e->worst_abs_pct, 1), (long long)worst_config,
          tp_fmt_num(c, sizeof c, e->median_abs_pct, 1), e->rows);
}

static void md_check(FILE *out, const tp_project_data *data, const tp_project_check *c) {
  fprintf(out, "### Validation at TP %d: predicted against measured\n\n", c->tp);
  fputs("| model | proj | op | tokens | dtype | tp | stock measured (µs) | stock predicted (µs) "
        "| stock error % | dist_gemm measured (µs) | dist_gemm predicted (µs) | dist_gemm error "
        "% | measured configs (stock, dist_gemm) | note |\n"
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
        out);
  for (size_t i = 0; i < data->n_rows; i++) {
    const tp_projected *p = &data->rows[i];
    if (p->row.tp == c->tp && (p->stock_id || p->dist_id)) md_check_row(out, p);
  }
  fprintf(out, "\nError at TP %d, over the rows measured at %.1f ms or more: ", c->tp,
          TP_PROJECT_MIN_JUDGED_US / 1000.0);
  md_summary(out, "stock", &c->stock, c->stock_worst_config);
  fputs("; ", out);
  md_summary(out, "dist_gemm", &c->dist, c->dist_worst_config);
  fputs(".\n\n", out);
}

static void write_markdown(FILE *out, const tp_project_request *req, const tp_project_data *data,
                           const tp_project_columns *cols) {
  md_header(out, req, data);
  md_costs(out, data);
  md_points(out, data);
  md_pace_points(out, data);
  md_predictions(out, data, cols, req->columns != NULL);
  for (size_t i = 0; i < data->n_checks; i++) md_check(out, data, &data->checks[i]);
  if (data->n_checks == 0)
    fputs("No validation: the database holds no stock or dist_gemm row (pass fwd) at a projected "
          "degree on the GEMM rows' GPU.\n",
          out);
  if (data->measured_other_gpu) {
    fprintf(out, "\nNot compared: %lld measured row%s at a projected degree on another GPU than ",
            (long long)data->measured_other_gpu, data->measured_other_gpu == 1 ? "" : "s");
    tp_md_text(out, gpu_label(data->gemm_gpu));
    fputs(" (the GEMM rows'): a prediction is judged on its own card only.\n", out);
  }
}

/* ---- CSV: one line per prediction, its measurement beside it; then the error summary -- */

static void csv_check(FILE *out, const tp_project_check *c, const tp_project_columns *cols) {
  char note[200];
  snprintf(note, sizeof note,
           "signed median of (predicted - measured) / measured, %%, over %d stock and %d "
           "dist_gemm rows measured at %.0f us or more",
           c->stock.rows, c->dist.rows, TP_PROJECT_MIN_JUDGED_US);
  tp_project_csv_summary_line line = {"error_median", c->tp, c->stock.median_pct,
                                      c->dist.median_pct, note};
  tp_project_csv_summary(out, &line, cols);
  snprintf(note, sizeof note, "worst |error|, %%: stock config %lld, dist_gemm config %lld",
           (long long)c->stock_worst_config, (long long)c->dist_worst_config);
  line = (tp_project_csv_summary_line){"error_worst_abs", c->tp, c->stock.worst_abs_pct,
                                       c->dist.worst_abs_pct, note};
  tp_project_csv_summary(out, &line, cols);
}

/* Rows measured on another GPU than the GEMM rows' (never compared), a line per degree that has
 * some: without it a CSV reader takes a missing error summary for rows never measured. */
static void csv_not_compared(FILE *out, const tp_project_data *data,
                             const tp_project_columns *cols) {
  for (size_t i = 0; i < data->n_rows; i++) {
    int seen_before = 0, rows = 0;
    for (size_t j = 0; j < i; j++) seen_before |= data->rows[j].row.tp == data->rows[i].row.tp;
    if (seen_before) continue;
    for (size_t j = i; j < data->n_rows; j++)
      if (data->rows[j].row.tp == data->rows[i].row.tp) rows += data->rows[j].other_gpu_rows;
    if (rows == 0) continue;
    char note[300];
    snprintf(note, sizeof note,
             "%d measured row%s at TP %d on another GPU than %.128s (the GEMM rows'), not "
             "compared: a prediction is judged on its own card only",
             rows, rows == 1 ? "" : "s", data->rows[i].row.tp, gpu_label(data->gemm_gpu));
    tp_project_csv_summary_line line = {"not_compared", data->rows[i].row.tp, NAN, NAN, note};
    tp_project_csv_summary(out, &line, cols);
  }
}

static void write_csv(FILE *out, const tp_project_data *data, const tp_project_columns *cols) {
  tp_project_csv_header(out, cols);
  for (size_t i = 0; i < data->n_rows; i++) tp_project_csv_row(out, &data->rows[i], cols);
  for (size_t i = 0; i < data->n_checks; i++) csv_check(out, &data->checks[i], cols);
  csv_not_compared(out, data, cols);
}

/* ---- JSON --------------------------------------------------------------------- */

static json_t *json_link(tp_json_builder *jb, const tp_project_link_est *e) {
  json_t *o = json_object();
  tp_json_set(jb, o, "bytes", tp_json_real(e->bytes));
  tp_json_set(jb, o, "gbps", tp_json_real(e->gbps));
  tp_json_set(jb, o, "latency_us", tp_json_real(e->latency_us));
  tp_json_set(jb, o, "us", tp_json_real(e->us));
  tp_json_set(jb, o, "line", tp_json_str(e->source));
  return o;
}

static json_t *json_gemm(tp_json_builder *jb, const tp_project_row *r) {
  json_t *o = json_object();
  tp_json_set(jb, o, "m", json_integer(r->m));
  tp_json_set(jb, o, "n", json_integer(r->n));
  tp_json_set(jb, o, "k", json_integer(r->k));
  tp_json_set(jb, o, "flops", tp_json_real(r->gemm.flops));
  tp_json_set(jb, o, "us", tp_json_real(r->gemm.us));
  tp_json_set(jb, o, "tflops", tp_json_real(r->gemm.tflops));
  tp_json_set(jb, o, "exact", json_boolean(r->gemm.exact));
  tp_json_set(jb, o, "source", tp_json_str(r->gemm.source));
  tp_json_set(jb, o, "lo_config", json_integer(r->gemm.lo_id));
  tp_json_set(jb, o, "hi_config", json_integer(r->gemm.hi_id));
  return o;
}

static json_t *json_measured(tp_json_builder *jb, const tp_projected *p) {
  if (!p->stock_id && !p->dist_id) return json_null();
  json_t *o = json_object();
  tp_json_set(jb, o, "stock_us", tp_json_real(p->stock_id ? p->stock_measured_us : NAN));
  tp_json_set(jb, o, "stock_config", p->stock_id ? json_integer(p->stock_id) : json_null());
  tp_json_set(jb, o, "stock_error_pct", tp_json_real(p->stock_err_pct));
  tp_json_set(jb, o, "dist_us", tp_json_real(p->dist_id ? p->dist_measured_us : NAN));
  tp_json_set(jb, o, "dist_config", p->dist_id ? json_integer(p->dist_id) : json_null());
  tp_json_set(jb, o, "dist_error_pct", tp_json_real(p->dist_err_pct));
  tp_json_set(jb, o, "dist_stock_path", json_boolean(p->dist_stock_path));
  return o;
}

static json_t *json_pipeline(tp_json_builder *jb, const tp_project_pipeline *p) {
  json_t *o = json_object();
  const int ran = p->chunks > 0;
  tp_json_set(jb, o, "chunks", json_integer(p->chunks));
  tp_json_set(jb, o, "chunk_rows", json_integer(p->chunk_rows));
  tp_json_set(jb, o, "stock_path", json_boolean(p->stock_path));
  tp_json_set(jb, o, "chunk_gemm_us", tp_json_real(ran ? p->chunk_gemm.us : NAN));
  tp_json_set(jb, o, "chunk_gemm_source", tp_json_str(ran ? p->chunk_gemm.source : NULL));
  tp_json_set(jb, o, "push", ran ? json_link(jb, &p->push) : json_null());
  tp_json_set(jb, o, "gemms", json_integer(p->gemms));
  tp_json_set(jb, o, "pushes", json_integer(p->pushes));
  tp_json_set(jb, o, "waits", json_integer(p->waits));
  tp_json_set(jb, o, "local_us", tp_json_real(ran ? p->local_us : NAN));
  tp_json_set(jb, o, "gemm_sum_us", tp_json_real(p->gemm_sum_us));
  tp_json_set(jb, o, "stall_us", tp_json_real(p->stall_us));
  tp_json_set(jb, o, "drain_us", tp_json_real(p->drain_us));
  tp_json_set(jb, o, "total_us", tp_json_real(p->total_us));
  return o;
}

static json_t *json_pace(tp_json_builder *jb, const tp_project_pace_est *pace) {
  json_t *o = json_object();
  tp_json_set(jb, o, "factor", tp_json_real(pace->factor));
  tp_json_set(jb, o, "gap_pct", tp_json_real(pace->gap_pct));
  tp_json_set(jb, o, "lo_config", pace->lo_id ? json_integer(pace->lo_id) : json_null());
  tp_json_set(jb, o, "hi_config", pace->hi_id ? json_integer(pace->hi_id) : json_null());
  tp_json_set(jb, o, "source", tp_json_str(pace->source));
  return o;
}

static json_t *json_row(tp_json_builder *jb, const tp_projected *p) {
  const tp_project_row *r = &p->row;
  json_t *o = json_object();
  tp_json_set(jb, o, "result", tp_json_str("predicted"));
  tp_json_set(jb, o, "model", tp_json_str(r->shape.model));
  tp_json_set(jb, o, "proj", tp_json_str(r->shape.proj));
  tp_json_set(jb, o, "op", tp_json_str(tp_op_name(r->shape.op)));
  tp_json_set(jb, o, "tokens", json_integer(r->shape.tokens));
  tp_json_set(jb, o, "dtype", tp_json_str(tp_dtype_name(r->shape.dtype)));
  tp_json_set(jb, o, "tp", json_integer(r->tp));
  tp_json_set(jb, o, "gemm", json_gemm(jb, r));
  tp_json_set(jb, o, "collective", json_link(jb, &r->coll));
  tp_json_set(jb, o, "pace", json_pace(jb, &r->pace));
  tp_json_set(jb, o, "pipeline", json_pipeline(jb, &r->pipe));
  tp_json_set(jb, o, "stock_us", tp_json_real(r->stock_us));
  tp_json_set(jb, o, "dist_us", tp_json_real(r->dist_us));
  tp_json_set(jb, o, "speedup", tp_json_real(r->speedup));
  tp_json_set(jb, o, "note", tp_json_str(r->note));
  tp_json_set(jb, o, "measured", json_measured(jb, p));
  return o;
}

static json_t *json_pace_points(tp_json_builder *jb, const tp_project_data *data) {
  json_t *a = json_array();
  for (size_t i = 0; i < data->n_pace; i++) {
    const tp_project_pace_point *p = &data->pace[i];
    json_t *o = json_object();
    tp_json_set(jb, o, "config_id", json_integer(p->config_id));
    tp_json_set(jb, o, "flops", tp_json_real(p->flops));
    tp_json_set(jb, o, "gap_pct", tp_json_real(p->gap_pct));
    tp_json_set(jb, o, "time_us", tp_json_real(p->time_us));
    tp_json_append(jb, a, o);
  }
  return a;
}

static json_t *json_points(tp_json_builder *jb, const tp_project_data *data) {
  json_t *a = json_array();
  for (int kind = 0; kind < TP_LINK_KINDS; kind++)
    for (size_t i = 0; i < data->n_points[kind]; i++) {
      const tp_project_link_point *p = &data->points[kind][i];
      json_t *o = json_object();
      tp_json_set(jb, o, "point", tp_json_str(tp_link_kind_name((tp_link_kind)kind)));
      tp_json_set(jb, o, "config_id", json_integer(p->config_id));
      tp_json_set(jb, o, "bytes", tp_json_real(p->bytes));
      tp_json_set(jb, o, "time_us", tp_json_real(p->time_us));
      tp_json_append(jb, a, o);
    }
  return a;
}

static json_t *json_summary(tp_json_builder *jb, const tp_project_error_summary *e,
                            int64_t worst_config) {
  json_t *o = json_object();
  tp_json_set(jb, o, "shapes", json_integer(e->rows));
  tp_json_set(jb, o, "median_error_pct", tp_json_real(e->median_pct));
  tp_json_set(jb, o, "worst_abs_error_pct", tp_json_real(e->worst_abs_pct));
  tp_json_set(jb, o, "worst_error_pct", tp_json_real(e->worst_pct));
  tp_json_set(jb, o, "worst_config", e->rows ? json_integer(worst_config) : json_null());
  tp_json_set(jb, o, "median_abs_error_pct", tp_json_real(e->median_abs_pct));
  return o;
}

static json_t *json_checks(tp_json_builder *jb, const tp_project_data *data) {
  json_t *a = json_array();
  for (size_t i = 0; i < data->n_checks; i++) {
    const tp_project_check *c = &data->checks[i];
    json_t *o = json_object();
    tp_json_set(jb, o, "tp", json_integer(c->tp));
    tp_json_set(jb, o, "min_measured_us", tp_json_real(TP_PROJECT_MIN_JUDGED_US));
    tp_json_set(jb, o, "stock", json_summary(jb, &c->stock, c->stock_worst_config));
    tp_json_set(jb, o, "dist_gemm", json_summary(jb, &c->dist, c->dist_worst_config));
    tp_json_append(jb, a, o);
  }
  return a;
}

static json_t *json_costs(tp_json_builder *jb, const tp_project_data *data) {
  json_t *a = json_array();
  for (int i = 0; i < TP_COST_KINDS; i++) {
    const tp_project_cost *c = &data->costs[i];
    json_t *o = json_object();
    tp_json_set(jb, o, "cost", tp_json_str(tp_cost_kind_name((tp_cost_kind)i)));
    tp_json_set(jb, o, "value", tp_json_real(c->value));
    tp_json_set(jb, o, "unit", tp_json_str(i == TP_COST_LOCAL_GBPS ? "GB/s" : "us"));
    tp_json_set(jb, o, "measured", json_boolean(c->measured));
    tp_json_set(jb, o, "config_id", c->config_id ? json_integer(c->config_id) : json_null());
    tp_json_set(jb, o, "source", tp_json_str(c->source));
    tp_json_append(jb, a, o);
  }
  return a;
}

static json_t *json_inputs(tp_json_builder *jb, const tp_project_request *req,
                           const tp_project_data *data) {
  json_t *o = json_object();
  json_t *tps = json_array();
  for (int i = 0; i < req->n_tps; i++) tp_json_append(jb, tps, json_integer(req->tps[i]));
  tp_json_set(jb, o, "tp", tps);
  tp_json_set(jb, o, "gemm_run", req->run_id ? json_integer(req->run_id) : json_null());
  tp_json_set(jb, o, "gemm_tp", req->gemm_tp ? json_integer(req->gemm_tp) : json_null());
  tp_json_set(jb, o, "gemm_gpu", tp_json_str(data->gemm_gpu));
  tp_json_set(jb, o, "gemm_rows_other_gpus", json_integer((json_int_t)data->gemm_other_rows));
  tp_json_set(jb, o, "gemm_other_gpus",
              tp_json_str(data->gemm_other_gpus ? data->gemm_other_names : NULL));
  tp_json_set(jb, o, "gemm_shard_shapes", json_integer((json_int_t)data->n_gemms));
  tp_json_set(jb, o, "measured_rows_other_gpus",
              json_integer((json_int_t)data->measured_other_gpu));
  const gemm_counts gemms = count_gemms(data);
  tp_json_set(jb, o, "gemms_read", json_integer((json_int_t)gemms.read));
  tp_json_set(jb, o, "gemms_exact", json_integer((json_int_t)gemms.exact));
  tp_json_set(jb, o, "gemms_untimed", json_integer((json_int_t)gemms.untimed));
  tp_json_set(jb, o, "link_run", data->link_run ? json_integer(data->link_run) : json_null());
  tp_json_set(jb, o, "link_host", tp_json_str(data->link_run ? data->link_host : NULL));
  tp_json_set(jb, o, "link_gpu", tp_json_str(data->link_run ? data->link_gpu : NULL));
  tp_json_set(jb, o, "link_gpu_name", tp_json_str(data->link_run ? data->link_gpu_name : NULL));
  /* the bold line's test, for a reader of the JSON: GEMMs and link costs of one card */
  tp_json_set(jb, o, "gemm_gpu_is_link_gpu",
              data->link_run ? json_boolean(gemm_gpu_is_link_gpu(data)) : json_null());
  tp_json_set(jb, o, "link_test_knobs",
              tp_json_str(data->link_run && data->link_knobs[0] ? data->link_knobs : NULL));
  tp_json_set(jb, o, "shapes_from", tp_json_str(req->shapes ? "presets" : "database"));
  tp_json_set(jb, o, "shapes_run",
              req->shapes_run && !req->shapes ? json_integer(req->shapes_run) : json_null());
  tp_json_set(jb, o, "link_gbps", req->link_gbps > 0 ? tp_json_real(req->link_gbps) : json_null());
  tp_json_set(jb, o, "link_points", json_points(jb, data));
  tp_json_set(jb, o, "pace_run", data->pace_run ? json_integer(data->pace_run) : json_null());
  tp_json_set(jb, o, "pace_gpu", tp_json_str(data->pace_run ? data->pace_gpu : NULL));
  tp_json_set(jb, o, "pace_test_knobs",
              tp_json_str(data->pace_run && data->pace_knobs[0] ? data->pace_knobs : NULL));
  tp_json_set(jb, o, "pace_not_read",
              tp_json_str(!data->pace_run && data->pace_skipped[0] ? data->pace_skipped : NULL));
  tp_json_set(jb, o, "pace_points", json_pace_points(jb, data));
  tp_json_set(jb, o, "costs", json_costs(jb, data));
  return o;
}

static tp_rc write_json(FILE *out, const tp_project_request *req, const tp_project_data *data,
                        const tp_project_columns *cols) {
  tp_json_builder jb = {0};
  json_t *root = json_object();
  json_t *rows = json_array();
  /* every field, nested, unless columns were named: then flat rows of those, as in the CSV */
  for (size_t i = 0; i < data->n_rows; i++)
    tp_json_append(&jb, rows,
                   cols->full ? json_row(&jb, &data->rows[i])
                              : tp_project_json_flat_row(&jb, &data->rows[i], cols));
  tp_json_set(&jb, root, "result", tp_json_str("prediction"));
  tp_json_set(&jb, root, "inputs", json_inputs(&jb, req, data));
  tp_json_set(&jb, root, "rows", rows);
  tp_json_set(&jb, root, "validation", json_checks(&jb, data));
  tp_rc rc = TP_OK;
  if (jb.failed || !root) rc = TP_FAIL(TP_EOOM, "project: out of memory");
  else if (json_dumpf(root, out, JSON_INDENT(2)) != 0 || fputc('\n', out) == EOF)
    rc = TP_FAIL(TP_EIO, "project: writing the JSON failed");
  json_decref(root);
  return rc;
}

tp_rc tp_project_check_columns(const char *columns) {
  tp_project_columns cols;
  return tp_project_columns_pick(columns, TP_FMT_CSV, &cols);
}

tp_rc tp_project_report(tp_store *store, const tp_project_request *req, tp_report_format fmt,
                        FILE *out) {
  tp_project_columns cols;
  TP_TRY(tp_project_columns_pick(req->columns, fmt, &cols)); /* before anything is written */
  tp_project_data data;
  tp_rc rc = tp_project_load(store, req, &data);
  if (rc == TP_OK) rc = tp_project_compute(store, req, &data);
  if (rc == TP_OK) {
    if (req->gemms) write_gemms(out, &data);
    else if (fmt == TP_FMT_JSON) rc = write_json(out, req, &data, &cols);
    else if (fmt == TP_FMT_CSV) write_csv(out, &data, &cols);
    else write_markdown(out, req, &data, &cols);
  }
  tp_project_data_free(&data);
  return rc;
}
