/*
 * tp_project_write.c — `tpbench project`'s output (tp_project.h): the inputs it read (the
 * link probe's points, each shape's GEMM time with its source row or interpolation, bytes
 * and bandwidths), the predictions, and the validation against the rows measured at a
 * projected degree, in markdown, CSV or JSON.
 */
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "report/tp_project_internal.h"
#include "report/tp_report_util.h"

static const double MIB = 1048576.0;

static const char MODEL_MD[] =
    "Model (docs/projection.md): one rank's shard GEMM takes G (a GEMM "
    "alone of that shard, else the rate interpolated by FLOPs); V = (p − 1)/p of the gathered "
    "tensor crosses each rank's links, at the link probe's per-GPU bandwidth and latency for "
    "that size (an NVSwitch host: the same at every p). stock = G + the NCCL collective of V. "
    "dist_gemm = g + (p − 1)·max(g, c) (the first chunk's GEMM g = G/p fills the pipe; c = one "
    "copy-engine push of V/(p − 1)). Forward pass; no barrier, flag or "
    "contention costs. Error = (predicted − measured) / measured.\n\n";

static void md_int(FILE *out, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  tp_md_cell(out, buf);
}

static void md_header(FILE *out, const tp_project_request *req, const tp_project_data *data) {
  fputs("## Projection of stock and dist_gemm (tpbench project)\n\nDegrees:", out);
  for (int i = 0; i < req->n_tps; i++) fprintf(out, "%s %d", i ? "," : "", req->tps[i]);
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
  fputs(MODEL_MD, out);
}

static void md_points(FILE *out, const tp_project_data *data) {
  if (!data->link_run) return;
  fprintf(out, "### Link probe points (run %lld)\n\n", (long long)data->link_run);
  fputs("| transport | config | bytes per rank (MiB) | time (µs) | GB/s |\n"
        "|---|---:|---:|---:|---:|\n",
        out);
  for (int kind = 0; kind < TP_LINK_KINDS; kind++)
    for (size_t i = 0; i < data->n_points[kind]; i++) {
      const tp_project_link_point *p = &data->points[kind][i];
      tp_md_cell(out, tp_link_kind_name((tp_link_kind)kind));
      md_int(out, p->config_id);
      tp_md_num(out, p->bytes / MIB, 1);
      tp_md_num(out, p->time_us, 2);
      tp_md_num(out, p->bytes / p->time_us / 1e3, 1);
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

static void md_link_cells(FILE *out, const tp_project_link_est *e) {
  tp_md_num(out, e->bytes / MIB, 2);
  tp_md_num(out, e->gbps, 1);
  tp_md_num(out, e->latency_us, 1);
  tp_md_num(out, e->us, 1);
  tp_md_cell(out, e->source);
}

static void md_prediction(FILE *out, const tp_project_row *r) {
  char shard[64] = "-";
  if (r->m)
    snprintf(shard, sizeof shard, "%lld×%lld×%lld", (long long)r->m, (long long)r->n,
             (long long)r->k);
  md_shape_cells(out, r);
  tp_md_cell(out, shard);
  tp_md_num(out, r->m ? r->gemm.us : NAN, 1);
  tp_md_num(out, r->m ? r->gemm.tflops : NAN, 1);
  tp_md_cell(out, r->m ? r->gemm.source : "");
  md_link_cells(out, &r->coll);
  md_link_cells(out, &r->chunk);
  tp_md_num(out, r->stock_us, 1);
  tp_md_num(out, r->dist_us, 1);
  tp_md_num(out, r->speedup, 3);
  tp_md_cell(out, r->note);
  fputs("|\n", out);
}

static void md_predictions(FILE *out, const tp_project_data *data) {
  fputs("### Inputs and predictions\n\n"
        "| model | proj | op | tokens | dtype | tp | shard M×N×K | GEMM (µs) | GEMM TFLOP/s | GEMM "
        "source | V (MiB) | NCCL GB/s | NCCL latency (µs) | collective (µs) | collective line "
        "| chunk (MiB) | push GB/s | push latency (µs) | push (µs) | push line | stock (µs) | "
        "dist_gemm (µs) | speedup | note |\n"
        "|---|---|---|---:|---|---:|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|"
        "---:|---|---:|---:|---:|---|\n",
        out);
  for (size_t i = 0; i < data->n_rows; i++) md_prediction(out, &data->rows[i].row);
  if (data->n_rows == 0) fputs("\n(no op shapes in the database)\n", out);
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
  char a[32], b[32];
  fprintf(
      out,
      "\nMedian |error| at TP %d: stock %s %% over %d shapes, dist_gemm %s %% over %d shapes.\n\n",
      c->tp, tp_fmt_num(a, sizeof a, c->stock_median_abs_pct, 1), c->stock_rows,
      tp_fmt_num(b, sizeof b, c->dist_median_abs_pct, 1), c->dist_rows);
}

static void write_markdown(FILE *out, const tp_project_request *req, const tp_project_data *data) {
  md_header(out, req, data);
  md_points(out, data);
  md_predictions(out, data);
  for (size_t i = 0; i < data->n_checks; i++) md_check(out, data, &data->checks[i]);
  if (data->n_checks == 0)
    fputs("No validation: the database holds no stock or dist_gemm row (pass fwd) at a projected "
          "degree.\n",
          out);
}

/* ---- CSV: one line per prediction, its measurement beside it ----------------- */

static const char CSV_HEADER[] =
    "model,proj,op,tokens,dtype,tp,m,n,k,gemm_gflop,gemm_us,gemm_tflops,gemm_exact,gemm_source,"
    "gemm_lo_config,gemm_hi_config,volume_bytes,nccl_gbps,nccl_latency_us,collective_us,"
    "collective_line,chunk_bytes,push_gbps,push_latency_us,push_us,push_line,stock_us,dist_us,"
    "speedup,note,stock_measured_us,stock_config,stock_error_pct,dist_measured_us,dist_config,"
    "dist_error_pct,dist_stock_path\n";

static void csv_link(FILE *out, const tp_project_link_est *e) {
  tp_csv_num(out, e->bytes, 0);
  tp_csv_num(out, e->gbps, 3);
  tp_csv_num(out, e->latency_us, 3);
  tp_csv_num(out, e->us, 3);
  tp_csv_field(out, e->source, 0);
}

static void csv_line(FILE *out, const tp_projected *p) {
  const tp_project_row *r = &p->row;
  tp_csv_field(out, r->shape.model, 1);
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
  csv_link(out, &r->chunk);
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

static void write_csv(FILE *out, const tp_project_data *data) {
  fputs(CSV_HEADER, out);
  for (size_t i = 0; i < data->n_rows; i++) csv_line(out, &data->rows[i]);
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

static json_t *json_row(tp_json_builder *jb, const tp_projected *p) {
  const tp_project_row *r = &p->row;
  json_t *o = json_object();
  tp_json_set(jb, o, "model", tp_json_str(r->shape.model));
  tp_json_set(jb, o, "proj", tp_json_str(r->shape.proj));
  tp_json_set(jb, o, "op", tp_json_str(tp_op_name(r->shape.op)));
  tp_json_set(jb, o, "tokens", json_integer(r->shape.tokens));
  tp_json_set(jb, o, "dtype", tp_json_str(tp_dtype_name(r->shape.dtype)));
  tp_json_set(jb, o, "tp", json_integer(r->tp));
  tp_json_set(jb, o, "gemm", json_gemm(jb, r));
  tp_json_set(jb, o, "collective", json_link(jb, &r->coll));
  tp_json_set(jb, o, "push", json_link(jb, &r->chunk));
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
      tp_json_set(jb, o, "transport", tp_json_str(tp_link_kind_name((tp_link_kind)kind)));
      tp_json_set(jb, o, "config_id", json_integer(p->config_id));
      tp_json_set(jb, o, "bytes", tp_json_real(p->bytes));
      tp_json_set(jb, o, "time_us", tp_json_real(p->time_us));
      tp_json_append(jb, a, o);
    }
  return a;
}

static json_t *json_checks(tp_json_builder *jb, const tp_project_data *data) {
  json_t *a = json_array();
  for (size_t i = 0; i < data->n_checks; i++) {
    const tp_project_check *c = &data->checks[i];
    json_t *o = json_object();
    tp_json_set(jb, o, "tp", json_integer(c->tp));
    tp_json_set(jb, o, "stock_shapes", json_integer(c->stock_rows));
    tp_json_set(jb, o, "stock_median_abs_error_pct", tp_json_real(c->stock_median_abs_pct));
    tp_json_set(jb, o, "dist_shapes", json_integer(c->dist_rows));
    tp_json_set(jb, o, "dist_median_abs_error_pct", tp_json_real(c->dist_median_abs_pct));
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
  tp_json_set(jb, o, "link_gbps", req->link_gbps > 0 ? tp_json_real(req->link_gbps) : json_null());
  tp_json_set(jb, o, "link_points", json_points(jb, data));
  return o;
}

static tp_rc write_json(FILE *out, const tp_project_request *req, const tp_project_data *data) {
  tp_json_builder jb = {0};
  json_t *root = json_object();
  json_t *rows = json_array();
  for (size_t i = 0; i < data->n_rows; i++)
    tp_json_append(&jb, rows, json_row(&jb, &data->rows[i]));
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
