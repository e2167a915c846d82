/*
 * tp_linear_stock.c — the stock path of the TP projections: the NCCL
 * collective and the cuBLASLt GEMMs one after the other on the group's main
 * stream, as a framework runs them, with and without sequence parallelism.
 * The GEMM-alone and collective-alone references (GEMM_ONLY, COMM_ONLY) run
 * the same code with one half left out, on the same shapes and buffers.
 * The nccl-window variant is this code too: the same collectives, its
 * scratch the group's window scratch and the caller's tensors in windows
 * (tp_linear.c checks), so NCCL picks its symmetric kernels.
 */
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_linear_internal.h"

static ncclDataType_t nccl_type(tp_dtype dt) { return dt == TP_BF16 ? ncclBfloat16 : ncclFloat32; }

/* In-place sum of count elements of buf over the group. */
static tp_rc all_reduce(tp_group *g, const tp_linear_plan *p, void *buf, size_t count) {
  TP_NCCL(
      ncclAllReduce(buf, buf, count, nccl_type(p->desc.dtype), ncclSum, g->nccl, g->main_stream),
      g->nccl);
  return TP_OK;
}

/* Every rank's count elements of send, in rank order, into recv. */
static tp_rc all_gather(tp_group *g, const tp_linear_plan *p, const void *send, void *recv,
                        size_t count) {
  TP_NCCL(ncclAllGather(send, recv, count, nccl_type(p->desc.dtype), g->nccl, g->main_stream),
          g->nccl);
  return TP_OK;
}

/* This rank's count elements of the group's sum of send, into recv. */
static tp_rc reduce_scatter(tp_group *g, const tp_linear_plan *p, const void *send, void *recv,
                            size_t count) {
  TP_NCCL(ncclReduceScatter(send, recv, count, nccl_type(p->desc.dtype), ncclSum, g->nccl,
                            g->main_stream),
          g->nccl);
  return TP_OK;
}

/* Sequence parallelism off: the gather side needs no collective in the
 * forward (its input is replicated); the scatter side all-reduces its output. */
static tp_rc stock_forward_no_sp(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (linear_runs_gemm(p)) TP_TRY(linear_fwd_rows(g, p, t, p->gemm_m, t->x, t->y, 0));
  if (!tp_op_gathers(p->desc.op) && linear_runs_comm(p))
    TP_TRY(all_reduce(g, p, t->y[0], tp_linear_y_elems(p)));
  return linear_add_biases(g, p, t);
}

/* ... and in the backward the gather side all-reduces dx, the scatter side
 * needs nothing: its gradient arrives replicated. */
static tp_rc stock_backward_no_sp(tp_group *g, const tp_linear_plan *p,
                                  const tp_linear_tensors *t) {
  if (tp_op_gathers(p->desc.op)) {
    if (linear_runs_gemm(p))
      TP_TRY(linear_dgrad_partial_rows(g, p, t, 0, p->desc.tokens, NULL, t->dx));
    if (linear_runs_comm(p)) TP_TRY(all_reduce(g, p, t->dx, tp_linear_x_elems(p)));
    if (linear_runs_gemm(p)) TP_TRY(linear_wgrad(g, p, t, t->x));
    if (p->desc.bias && linear_runs_gemm(p)) TP_TRY(linear_bias_grads_local(g, p, t));
    return TP_OK;
  }
  if (!linear_runs_gemm(p)) return TP_OK;
  TP_TRY(linear_rs_dgrad_rows(g, p, t, p->desc.tokens, t->dy[0], 0));
  TP_TRY(linear_wgrad(g, p, t, t->dy[0]));
  if (p->desc.bias) TP_TRY(linear_bias_grads_local(g, p, t));
  return TP_OK;
}

/* The stock path's scratch: the caller's own (t->scratch: a reference whose
 * halves must read what the other half delivered, untouched by other ops)
 * or the group's (its window scratch for the nccl-window variant). */
static void *scratch_of(const tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (t->scratch) return t->scratch;
  return linear_is_window(p) ? g->window_scratch : g->scratch;
}

tp_rc linear_stock_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (!p->desc.sp) return stock_forward_no_sp(g, p, t);
  void *scratch = scratch_of(g, p, t);
  if (tp_op_gathers(p->desc.op)) {
    void *gathered = t->saved ? t->saved : scratch;
    if (linear_runs_comm(p)) TP_TRY(all_gather(g, p, t->x, gathered, tp_linear_x_elems(p)));
    if (linear_runs_gemm(p)) TP_TRY(linear_fwd_rows(g, p, t, p->gemm_m, gathered, t->y, 0));
    return linear_add_biases(g, p, t);
  }
  void *partial[TP_MAX_WEIGHTS] = {scratch}; /* one weight on the row-parallel side */
  if (linear_runs_gemm(p)) TP_TRY(linear_fwd_rows(g, p, t, p->gemm_m, t->x, partial, 0));
  if (linear_runs_comm(p)) TP_TRY(reduce_scatter(g, p, scratch, t->y[0], tp_linear_y_elems(p)));
  return linear_add_biases(g, p, t);
}

/* Row-parallel bias gradient: local column sums, an NCCL all-reduce, one rounding. */
static tp_rc bias_grads_rs(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  const size_t rows = (size_t)p->shard_rows, cols = (size_t)p->gemm_n;
  float *vec = linear_bias_vector(g, p, rows);
  if (linear_runs_gemm(p)) TP_TRY(linear_column_sums_f32(g, p, t->dy[0], rows, vec));
  if (linear_runs_comm(p))
    TP_NCCL(ncclAllReduce(vec, vec, cols, ncclFloat32, ncclSum, g->nccl, g->main_stream), g->nccl);
  const float *srcs[1] = {vec};
  if (linear_runs_gemm(p))
    TP_CUDA(tp_launch_sum_f32_rows(p->desc.dtype, t->db[0], srcs, 1, 1, cols, g->main_stream));
  return TP_OK;
}

/* Gather side: dx's partial over all rows reduce-scattered; x gathered
 * again for dW unless the forward saved it. */
static tp_rc stock_backward_gather_side(tp_group *g, const tp_linear_plan *p,
                                        const tp_linear_tensors *t, void *scratch) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  void *gathered = t->saved ? t->saved : scratch; /* where the forward gathered it */
  void *partial = ptr_at(scratch, (size_t)(p->desc.tokens * p->gemm_k) * e);
  if (linear_runs_gemm(p))
    TP_TRY(linear_dgrad_partial_rows(g, p, t, 0, p->desc.tokens, NULL, partial));
  if (linear_runs_comm(p)) {
    TP_TRY(reduce_scatter(g, p, partial, t->dx, tp_linear_x_elems(p)));
    if (!t->saved) TP_TRY(all_gather(g, p, t->x, gathered, tp_linear_x_elems(p)));
  }
  if (linear_runs_gemm(p)) TP_TRY(linear_wgrad(g, p, t, gathered));
  if (p->desc.bias && linear_runs_gemm(p)) TP_TRY(linear_bias_grads_local(g, p, t));
  return TP_OK;
}

tp_rc linear_stock_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (!p->desc.sp) return stock_backward_no_sp(g, p, t);
  /* Regions of one op never alias inside a step: the gathered input (or
   * gradient) has its own, so the GEMMs of a reference run alone read what
   * the collective delivered, not a partial written since. */
  void *scratch = scratch_of(g, p, t);
  if (tp_op_gathers(p->desc.op)) return stock_backward_gather_side(g, p, t, scratch);
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  void *gathered = ptr_at(scratch, (size_t)(p->desc.tokens * p->gemm_n) * e); /* past the partial */
  if (linear_runs_comm(p)) TP_TRY(all_gather(g, p, t->dy[0], gathered, tp_linear_y_elems(p)));
  if (linear_runs_gemm(p)) {
    TP_TRY(linear_rs_dgrad_rows(g, p, t, p->desc.tokens, gathered, 0));
    TP_TRY(linear_wgrad(g, p, t, gathered));
  }
  if (p->desc.bias) TP_TRY(bias_grads_rs(g, p, t));
  return TP_OK;
}
