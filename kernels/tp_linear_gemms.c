/*
 * tp_linear_gemms.c — the GEMMs and bias kernels of each TP projection on a
 * block of rows, on the group's main stream: the pieces the stock path
 * (tp_linear_stock.c) runs over all rows and the fused schedules
 * (tp_linear_fused_*.c) run chunk by chunk, so both give the same bits
 * wherever no cross-rank sum is involved.
 */
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_linear_internal.h"

/* ---- the GEMMs of each op, on a block of rows ---------------------------------------- */

tp_gemm_desc linear_fwd_desc(const tp_linear_plan *p, int64_t rows, const void *x_rows) {
  const tp_gemm_desc d = {.dtype = p->desc.dtype,
                          .trans_b = 1,
                          .m = rows,
                          .n = p->gemm_n,
                          .k = p->gemm_k,
                          .a = x_rows,
                          .lda = p->gemm_k,
                          .ldb = p->gemm_k,
                          .ldc = p->gemm_n};
  return d;
}

/* dx[rows, K] = dy[rows, N] · w[N, K] (one weight's term): a and c left to the caller. */
static tp_gemm_desc dgrad_desc(const tp_linear_plan *p, int64_t rows, const void *w) {
  const tp_gemm_desc d = {.dtype = p->desc.dtype,
                          .m = rows,
                          .n = p->gemm_k,
                          .k = p->gemm_n,
                          .b = w,
                          .lda = p->gemm_n,
                          .ldb = p->gemm_k,
                          .ldc = p->gemm_k};
  return d;
}

tp_rc linear_fwd_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                      int64_t rows, const void *x_rows, void *const *out, size_t out_row0) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  tp_gemm_desc d = linear_fwd_desc(p, rows, x_rows);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    d.b = t->w[i];
    d.c = ptr_at(out[i], out_row0 * (size_t)p->gemm_n * e);
    TP_TRY(tp_gemm_enqueue(g->gemm, &d, g->main_stream));
  }
  return TP_OK;
}

tp_rc linear_dgrad_partial_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                int64_t row0, int64_t rows, const void *acc_in, void *out) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    tp_gemm_desc d = dgrad_desc(p, rows, t->w[i]);
    d.a = cptr_at(t->dy[i], (size_t)row0 * (size_t)p->gemm_n * e);
    d.c = out;
    /* the first weight's product starts the sum (from acc_in, if given); the rest add to it */
    d.c_in = i == 0 ? acc_in : NULL;
    d.beta = i == 0 && !acc_in ? 0.0f : 1.0f;
    TP_TRY(tp_gemm_enqueue(g->gemm, &d, g->main_stream));
  }
  return TP_OK;
}

tp_rc linear_wgrad(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                   const void *gathered) {
  tp_gemm_desc d = {.dtype = p->desc.dtype,
                    .trans_a = 1,
                    .m = p->gemm_n,
                    .n = p->gemm_k,
                    .k = p->desc.tokens,
                    .lda = p->gemm_n,
                    .ldb = p->gemm_k,
                    .ldc = p->gemm_k};
  if (tp_op_gathers(p->desc.op)) {
    d.b = gathered;
    for (int i = 0; i < p->desc.n_weights; ++i) {
      d.a = t->dy[i];
      d.c = t->dw[i];
      TP_TRY(tp_gemm_enqueue(g->gemm, &d, g->main_stream));
    }
    return TP_OK;
  }
  d.a = gathered;
  d.b = t->x;
  d.c = t->dw[0];
  return tp_gemm_enqueue(g->gemm, &d, g->main_stream);
}

tp_rc linear_rs_dgrad_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                           int64_t rows, const void *dy_rows, size_t dx_row0) {
  tp_gemm_desc d = dgrad_desc(p, rows, t->w[0]);
  d.a = dy_rows;
  d.c = ptr_at(t->dx, dx_row0 * (size_t)p->gemm_k * tp_dtype_bytes(p->desc.dtype));
  return tp_gemm_enqueue(g->gemm, &d, g->main_stream);
}

/* ---- biases ------------------------------------------------------------------------- */

tp_rc linear_add_biases(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (!p->desc.bias || !linear_runs_gemm(p)) return TP_OK;
  const size_t rows = linear_bias_rows(p);
  for (int i = 0; i < p->desc.n_weights; ++i)
    TP_CUDA(tp_launch_add_bias(p->desc.dtype, t->y[i], t->b[i], rows, (size_t)p->gemm_n,
                               g->main_stream));
  return TP_OK;
}

tp_rc linear_column_sums_f32(tp_group *g, const tp_linear_plan *p, const void *dy, size_t rows,
                             float *out) {
  const size_t cols = (size_t)p->gemm_n;
  float *partial = g->bias_scratch;
  TP_CUDA(tp_launch_column_partials(p->desc.dtype, dy, rows, cols, partial, g->main_stream));
  const float *srcs[1] = {partial};
  TP_CUDA(tp_launch_sum_f32_rows(TP_FP32, out, srcs, 1, tp_bias_partial_floats(rows, cols) / cols,
                                 cols, g->main_stream));
  return TP_OK;
}

float *linear_bias_vector(tp_group *g, const tp_linear_plan *p, size_t rows) {
  return g->bias_scratch + tp_bias_partial_floats(rows, (size_t)p->gemm_n);
}

tp_rc linear_bias_grads_local(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  const size_t rows = (size_t)p->desc.tokens;
  float *vec = linear_bias_vector(g, p, rows);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(linear_column_sums_f32(g, p, t->dy[i], rows, vec));
    const float *srcs[1] = {vec};
    TP_CUDA(tp_launch_sum_f32_rows(p->desc.dtype, t->db[i], srcs, 1, 1, (size_t)p->gemm_n,
                                   g->main_stream));
  }
  return TP_OK;
}
