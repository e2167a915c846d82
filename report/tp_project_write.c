/*
 * tp_project_write.c — `tpbench project`'s output (tp_project.h), marked a prediction in its
 * header and in a column of every row: the inputs it read (the link probe's points, the
 * fused pipeline's costs and where each came from, each shape's GEMM times with their source
 * rows, bytes and bandwidths), the degree-dependent terms, the predictions, and the
 * validation against the rows measured at a projected degree with each backend's signed
 * median and worst |error|, in markdown, CSV or JSON.
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
    "the same at every W). stock = G + the NCCL collective of V. dist_gemm = the fused op's "
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
    "latency, the barrier, h, w, k.\n\n";

static void md_int(FILE *out, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  tp_md_cell(out, buf);
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
  else fprintf(out, "the %zu the database measured", data->n_shapes);
  fputs(". GEMM rates: GEMM-alone rows (pass fwd) of ", out);
  if (req->run_id) fprintf(out, "run %lld", (long long)req->run_id);
  else fputs("every run (the latest row per shard shape)", out);
  if (req->gemm_tp) fprintf(out, " measured at TP %d", req->gemm_tp);
  fprintf(out, ", %zu shard shapes. Link probe: ", data->n_gemms);
  if (data->link_run) {
    fprintf(out, "run %lld (", (long long)data->link_run);
    tp_md_text(out, data->link_host);
    fputs(", ", out);
    tp_md_text(out, data->link_gpu);
    fputs(")", out);
  } else fputs("none", out);
  if (req->link_gbps > 0)
    fprintf(out, "; bandwidth --link-gbps %g for every transport", req->link_gbps);
  fputs(".\n\n", out);
  if (data->link_knobs[0]) {
    fputs("**The link probe ran with test knobs in force** (", out);
    tp_md_text(out, data->link_knobs);
    fputs("): its timings are not the hardware's.\n\n", out);
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

static void md_shape_cells(FILE *out, const tp_project_row *r) {
  tp_md_cell(out, r->shape.model);
  tp_md_cell(out, r->shape.proj);
  tp_md_cell(out, tp_op_name(r->shape.op));
  md_int(out, r->shape.tokens);
  tp_md_cell(out, tp_dtype_name(r->shape.dtype));
  md_int(out, r->tp);
}

static void md_pipeline_cells(FILE *out, const tp_project_pipeline *p) {
  const int ran = p->chunks > 0;
  md_int(out, p->chunks);
  md_int(out, p->chunk_rows);
  tp_md_num(out, ran ? p->chunk_gemm.us : NAN, 1);
  tp_md_cell(out, ran ? p->chunk_gemm.source : "");
  tp_md_num(out, ran ? p->push.bytes / MIB : NAN, 2);
  tp_md_num(out, ran ? p->push.us : NAN, 1);
  tp_md_cell(out, ran ? p->push.source : "");
  md_int(out, p->gemms);
  md_int(out, p->pushes);
  tp_md_num(out, ran ? p->local_us : NAN, 1);
  tp_md_num(out, ran ? p->stall_us : NAN, 1);
  tp_md_num(out, ran ? p->drain_us : NAN, 1);
}

static void md_prediction(FILE *out, const tp_project_row *r) {
  char shard[64] = "-";
  if (r->m)
    snprintf(shard, sizeof shard, "%lld×%lld×%lld", (long long)r->m, (long long)r->n,
             (long long)r->k);
  tp_md_cell(out, "predicted");
  md_shape_cells(out, r);
  tp_md_cell(out, shard);
  tp_md_num(out, r->m ? r->gemm.us : NAN, 1);
  tp_md_num(out, r->m ? r->gemm.tflops : NAN, 1);
  tp_md_cell(out, r->m ? r->gemm.source : "");
  tp_md_num(out, r->coll.bytes / MIB, 2);
  tp_md_num(out, r->coll.gbps, 1);
  tp_md_num(out, r->coll.latency_us, 1);
  tp_md_num(out, r->coll.us, 1);
  tp_md_cell(out, r->coll.source);
  md_pipeline_cells(out, &r->pipe);
  tp_md_num(out, r->stock_us, 1);
  tp_md_num(out, r->dist_us, 1);
  tp_md_num(out, r->speedup, 3);
  tp_md_cell(out, r->note);
  fputs("|\n", out);
}

static void md_predictions(FILE *out, const tp_project_data *data) {
  fputs("### Inputs and predictions\n\n"
        "| result | model | proj | op | tokens | dtype | tp | shard M×N×K | GEMM (µs) | GEMM "
        "TFLOP/s | GEMM source | V (MiB) | NCCL GB/s | NCCL latency (µs) | collective (µs) | "
        "collective line | chunks C | chunk rows R | chunk GEMM (µs) | chunk GEMM source | push "
        "(MiB) | push (µs) | push line | GEMMs | pushes | local traffic per chunk (µs) | stall "
        "(µs) | drain (µs) | stock (µs) | dist_gemm (µs) | speedup | note |\n"
        "|---|---|---|---|---:|---|---:|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|"
        "---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        out);
  for (size_t i = 0; i < data->n_rows; i++) md_prediction(out, &data->rows[i].row);
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

static void write_markdown(FILE *out, const tp_project_request *req, const tp_project_data *data) {
  md_header(out, req, data);
  md_costs(out, data);
  md_points(out, data);
  md_predictions(out, data);
  for (size_t i = 0; i < data->n_checks; i++) md_check(out, data, &data->checks[i]);
  if (data->n_checks == 0)
    fputs("No validation: the database holds no stock or dist_gemm row (pass fwd) at a projected "
          "degree.\n",
          out);
}

/* ---- CSV: one line per prediction, its measurement beside it; then the error summary -- */

static const char CSV_HEADER[] =
    "result,model,proj,op,tokens,dtype,tp,m,n,k,gemm_gflop,gemm_us,gemm_tflops,gemm_exact,"
    "gemm_source,gemm_lo_config,gemm_hi_config,volume_bytes,nccl_gbps,nccl_latency_us,"
    "collective_us,collective_line,chunks,chunk_rows,chunk_gemm_us,chunk_gemm_source,chunk_bytes,"
    "push_gbps,push_latency_us,push_us,push_line,gemms,pushes,local_us,stall_us,drain_us,"
    "stock_us,dist_us,speedup,note,stock_measured_us,stock_config,stock_error_pct,"
    "dist_measured_us,dist_config,dist_error_pct,dist_stock_path\n";

static void csv_link(FILE *out, const tp_project_link_est *e) {
  tp_csv_num(out, e->bytes, 0);
  tp_csv_num(out, e->gbps, 3);
  tp_csv_num(out, e->latency_us, 3);
  tp_csv_num(out, e->us, 3);
  tp_csv_field(out, e->source, 0);
}

static void csv_pipeline(FILE *out, const tp_project_pipeline *p) {
  const int ran = p->chunks > 0;
  tp_csv_int(out, p->chunks);
  tp_csv_int(out, p->chunk_rows);
  tp_csv_num(out, ran ? p->chunk_gemm.us : NAN, 3);
  tp_csv_field(out, ran ? p->chunk_gemm.source : "", 0);
  tp_project_link_est none = {.bytes = NAN, .us = NAN, .gbps = NAN, .latency_us = NAN};
  csv_link(out, ran ? &p->push : &none);
  tp_csv_int(out, p->gemms);
  tp_csv_int(out, p->pushes);
  tp_csv_num(out, ran ? p->local_us : NAN, 3);
  tp_csv_num(out, ran ? p->stall_us : NAN, 3);
  tp_csv_num(out, ran ? p->drain_us : NAN, 3);
}

static void csv_line(FILE *out, const tp_projected *p) {
  const tp_project_row *r = &p->row;
  tp_csv_field(out, "predicted", 1);
  tp_csv_field(out, r->shape.model, 0);
  tp_csv_field(out, r->shape.proj, 0);
  tp_csv_field(out, tp_op_name(r->shape.op), 0);
  tp_csv_int(out, r->shape.tokens);
  tp_csv_field(out, tp_dtype_name(r->shape.dtype), 0);
  tp_csv_int(out, r->tp);
  tp_csv_int(out, r->m);
  tp_csv_int(out, r->n);
  tp_csv_int(out, r->k);
  tp_csv_num(out, r->gemm.flops / 1e9, 3);
  tp_csv_num(out, r->gemm.us, 3);
  tp_csv_num(out, r->gemm.tflops, 3);
  tp_csv_int(out, r->gemm.exact);
  tp_csv_field(out, r->gemm.source, 0);
  tp_csv_int(out, r->gemm.lo_id);
  tp_csv_int(out, r->gemm.hi_id);
  csv_link(out, &r->coll);
  csv_pipeline(out, &r->pipe);
  tp_csv_num(out, r->stock_us, 3);
  tp_csv_num(out, r->dist_us, 3);
  tp_csv_num(out, r->speedup, 4);
  tp_csv_field(out, r->note, 0);
  tp_csv_num(out, p->stock_id ? p->stock_measured_us : NAN, 3);
  tp_csv_int(out, p->stock_id);
  tp_csv_num(out, p->stock_err_pct, 2);
  tp_csv_num(out, p->dist_id ? p->dist_measured_us : NAN, 3);
  tp_csv_int(out, p->dist_id);
  tp_csv_num(out, p->dist_err_pct, 2);
  tp_csv_int(out, p->dist_stock_path);
  fputs("\n", out);
}

/* A summary line: result (error_median or error_worst_abs), tp, and the two backends' figures
 * in stock_error_pct and dist_error_pct; every other column empty but the note. */
static void csv_summary(FILE *out, const char *result, int tp, double stock, double dist,
                        const char *note) {
  tp_csv_field(out, result, 1);
  fputs(",,,,,", out); /* model .. dtype: empty */
  tp_csv_int(out, tp);
  for (int i = 0; i < 32; i++) fputc(',', out); /* m .. speedup: empty */
  tp_csv_field(out, note, 0);
  fputs(",,", out);
  tp_csv_num(out, stock, 2);
  fputs(",,", out);
  tp_csv_num(out, dist, 2);
  fputs(",\n", out);
}

static void csv_check(FILE *out, const tp_project_check *c) {
  char note[200];
  snprintf(note, sizeof note,
           "signed median of (predicted - measured) / measured, %%, over %d stock and %d "
           "dist_gemm rows measured at %.0f us or more",
           c->stock.rows, c->dist.rows, TP_PROJECT_MIN_JUDGED_US);
  csv_summary(out, "error_median", c->tp, c->stock.median_pct, c->dist.median_pct, note);
  snprintf(note, sizeof note, "worst |error|, %%: stock config %lld, dist_gemm config %lld",
           (long long)c->stock_worst_config, (long long)c->dist_worst_config);
  csv_summary(out, "error_worst_abs", c->tp, c->stock.worst_abs_pct, c->dist.worst_abs_pct, note);
}

static void write_csv(FILE *out, const tp_project_data *data) {
  fputs(CSV_HEADER, out);
  for (size_t i = 0; i < data->n_rows; i++) csv_line(out, &data->rows[i]);
  for (size_t i = 0; i < data->n_checks; i++) csv_check(out, &data->checks[i]);
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
  tp_json_set(jb, o, "pipeline", json_pipeline(jb, &r->pipe));
  tp_json_set(jb, o, "stock_us", tp_json_real(r->stock_us));
  tp_json_set(jb, o, "dist_us", tp_json_real(r->dist_us));
  tp_json_set(jb, o, "speedup", tp_json_real(r->speedup));
  tp_json_set(jb, o, "note", tp_json_str(r->note));
  tp_json_set(jb, o, "measured", json_measured(jb, p));
  return o;
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
  tp_json_set(jb, o, "gemm_shard_shapes", json_integer((json_int_t)data->n_gemms));
  tp_json_set(jb, o, "link_run", data->link_run ? json_integer(data->link_run) : json_null());
  tp_json_set(jb, o, "link_host", tp_json_str(data->link_run ? data->link_host : NULL));
  tp_json_set(jb, o, "link_gpu", tp_json_str(data->link_run ? data->link_gpu : NULL));
  tp_json_set(jb, o, "link_test_knobs",
              tp_json_str(data->link_run && data->link_knobs[0] ? data->link_knobs : NULL));
  tp_json_set(jb, o, "shapes_from", tp_json_str(req->shapes ? "presets" : "database"));
  tp_json_set(jb, o, "link_gbps", req->link_gbps > 0 ? tp_json_real(req->link_gbps) : json_null());
  tp_json_set(jb, o, "link_points", json_points(jb, data));
  tp_json_set(jb, o, "costs", json_costs(jb, data));
  return o;
}

static tp_rc write_json(FILE *out, const tp_project_request *req, const tp_project_data *data) {
  tp_json_builder jb = {0};
  json_t *root = json_object();
  json_t *rows = json_array();
  for (size_t i = 0; i < data->n_rows; i++)
    tp_json_append(&jb, rows, json_row(&jb, &data->rows[i]));
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

tp_rc tp_project_report(tp_store *store, const tp_project_request *req, tp_report_format fmt,
                        FILE *out) {
  tp_project_data data;
  tp_rc rc = tp_project_load(store, req, &data);
  if (rc == TP_OK) rc = tp_project_compute(store, req, &data);
  if (rc == TP_OK) {
    if (fmt == TP_FMT_JSON) rc = write_json(out, req, &data);
    else if (fmt == TP_FMT_CSV) write_csv(out, &data);
    else write_markdown(out, req, &data);
  }
  tp_project_data_free(&data);
  return rc;
}
