/*
 * tp_linear_fused_fwd.c — dist_gemm's forward pass: on the all-gather side
 * the GEMM consumes the local shard at once and each peer chunk as it
 * lands; on the reduce-scatter side the partial of each peer's rows is
 * computed and pushed while the next is computed, and the local rows' GEMM
 * adds the received partials in its epilogue (tp_linear_fused.c holds the
 * pipelines).
 */
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_linear_internal.h"

/* The row-parallel partial of rows [row0, +rows): x[rows] · wᵀ (+ acc_in). */
static tp_rc fwd_partial(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                         void *ctx, int64_t row0, int64_t rows, const void *acc_in, void *out) {
  (void)ctx;
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  const void *x_rows = cptr_at(t->x, (size_t)row0 * (size_t)p->gemm_k * e);
  if (acc_in) {
    tp_gemm_desc d = linear_fwd_desc(p, rows, x_rows);
    d.b = t->w[0];
    d.c = out;
    d.c_in = acc_in;
    d.beta = 1.0f;
    return tp_gemm_enqueue(g->gemm, &d, g->main_stream);
  }
  void *outs[TP_MAX_WEIGHTS] = {out}; /* the row-parallel side has one weight */
  return linear_fwd_rows(g, p, t, rows, x_rows, outs, 0);
}

/* The all-gather side's GEMM of gathered rows [row0, +rows) into y. */
static tp_rc fwd_gathered_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                               void *ctx, int64_t rows, const void *x_rows, size_t row0) {
  (void)ctx;
  return linear_fwd_rows(g, p, t, rows, x_rows, t->y, row0);
}

static tp_rc forward_scatter_side(tp_group *g, const tp_linear_plan *p,
                                  const tp_linear_tensors *t) {
  const linear_scatter sc = {.partial = fwd_partial,
                             .width = p->desc.out_features,
                             .out = t->y[0],
                             .phase = 0,
                             .chunks = p->chunks};
  return linear_fused_reduce_scatter(g, p, t, &sc);
}

static tp_rc forward_gather_side(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  const size_t row = (size_t)p->desc.in_features * tp_dtype_bytes(p->desc.dtype);
  const linear_gather gather = {
      .rows_local = t->x, .row_bytes = row, .offset = 0, .phase = 0, .chunks = p->chunks};
  TP_TRY(linear_fused_all_gather(g, p, t, &gather, fwd_gathered_rows));
  if (t->saved) {
    void *gathered = tp_symm_ptr(linear_heap(g, p), g->rank);
    TP_TRY(linear_place_own_rows(g, p, gathered, t->x, row));
    TP_CUDA(cudaMemcpyAsync(t->saved, gathered, (size_t)p->desc.tokens * row,
                            cudaMemcpyDeviceToDevice, g->main_stream));
  }
  return TP_OK;
}

tp_rc linear_fused_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(linear_fork_to_comm(g, p));
  if (tp_op_gathers(p->desc.op)) TP_TRY(forward_gather_side(g, p, t));
  else TP_TRY(forward_scatter_side(g, p, t));
  TP_TRY(linear_add_biases(g, p, t));
  return linear_join_from_comm(g);
}
