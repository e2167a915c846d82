/*
 * tp_linear_fused_bwd.c — dist_gemm's backward pass, each side running the
 * other side's pipeline: on the all-gather side dx's partials are
 * reduce-scattered while x is gathered again for dW (unless the forward
 * saved it); on the reduce-scatter side dy is gathered and consumed chunk by
 * chunk for dx, then dW runs over the whole. The row-parallel bias gradient
 * sums the ranks' column sums read from the peers' workspaces
 * (tp_linear_fused.c holds the pipelines).
 */
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_linear_internal.h"

/* Row-parallel bias gradient: each rank's fp32 column sums go into its own
 * workspace at vec_offset; flags tell the peers; every rank then sums the W
 * vectors, read from the peers' memory, in rank order. */
static tp_rc bias_grads_rs(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                           size_t vec_offset) {
  const size_t cols = (size_t)p->gemm_n;
  float *mine = (float *)(void *)ptr_at(tp_symm_ptr(linear_heap(g, p), g->rank), vec_offset);
  TP_TRY(linear_column_sums_f32(g, p, t->dy[0], (size_t)p->shard_rows, mine));
  for (int step = 1; step < g->world; ++step) {
    int dst = (g->rank + step) % g->world;
    TP_TRY(linear_raise_flag(g, p, g->main_stream, dst, linear_flag_slot(g->rank, 1, 0)));
  }
  TP_TRY(linear_wait_gather(g, p, 1, 1));
  const float *srcs[TP_MAX_WORLD];
  for (int r = 0; r < g->world; ++r)
    srcs[r] = (const float *)(const void *)ptr_at(tp_symm_ptr(linear_heap(g, p), r), vec_offset);
  TP_CUDA(tp_launch_sum_f32_rows(p->desc.dtype, t->db[0], srcs, g->world, 1, cols, g->main_stream));
  return TP_OK;
}

/* The gather side's dx partial of a block of rows, as the pipeline calls it. */
static tp_rc dgrad_partial(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                           void *ctx, int64_t row0, int64_t rows, const void *acc_in, void *out) {
  (void)ctx;
  return linear_dgrad_partial_rows(g, p, t, row0, rows, acc_in, out);
}

/* The scatter side's dx rows of a block of gathered dy, as the pipeline calls it. */
static tp_rc rs_dgrad_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                           void *ctx, int64_t rows, const void *dy_rows, size_t row0) {
  (void)ctx;
  return linear_rs_dgrad_rows(g, p, t, rows, dy_rows, row0);
}

/* The input's all-gather for dW (phase 0) moves while dx is computed and
 * reduce-scattered (phase 1); it moves whole (one chunk), since nothing
 * consumes it before it is complete. */
static tp_rc backward_gather_side(tp_group *g, const tp_linear_plan *p,
                                  const tp_linear_tensors *t) {
  const int64_t S = p->shard_rows;
  const size_t row = (size_t)p->gemm_k * tp_dtype_bytes(p->desc.dtype);
  const size_t gather_off = (size_t)(g->world * S + (g->world - 1) * S) * row;
  void *gathered =
      t->saved ? t->saved : ptr_at(tp_symm_ptr(linear_heap(g, p), g->rank), gather_off);
  const linear_gather x_gather = {
      .rows_local = t->x, .row_bytes = row, .offset = gather_off, .phase = 0, .chunks = 1};
  if (!t->saved) TP_TRY(linear_push_gather(g, p, &x_gather));
  const linear_scatter dx_scatter = {.partial = dgrad_partial,
                                     .width = p->gemm_k,
                                     .out = t->dx,
                                     .phase = 1,
                                     .chunks = p->bwd_chunks};
  TP_TRY(linear_fused_reduce_scatter(g, p, t, &dx_scatter));
  if (!t->saved) {
    TP_TRY(linear_place_own_rows(g, p, gathered, t->x, row));
    TP_TRY(linear_wait_gather(g, p, 0, 1));
  }
  TP_TRY(linear_wgrad(g, p, t, gathered));
  if (p->desc.bias) TP_TRY(linear_bias_grads_local(g, p, t));
  return TP_OK;
}

/* Gather dy; dx rows as chunks arrive; dW over the whole. */
static tp_rc backward_scatter_side(tp_group *g, const tp_linear_plan *p,
                                   const tp_linear_tensors *t) {
  const size_t row = (size_t)p->gemm_n * tp_dtype_bytes(p->desc.dtype);
  void *gathered = tp_symm_ptr(linear_heap(g, p), g->rank);
  const linear_gather dy_gather = {
      .rows_local = t->dy[0], .row_bytes = row, .offset = 0, .phase = 0, .chunks = p->bwd_chunks};
  TP_TRY(linear_fused_all_gather(g, p, t, &dy_gather, rs_dgrad_rows));
  TP_TRY(linear_place_own_rows(g, p, gathered, t->dy[0], row));
  TP_TRY(linear_wgrad(g, p, t, gathered));
  if (p->desc.bias) TP_TRY(bias_grads_rs(g, p, t, (size_t)p->desc.tokens * row));
  return TP_OK;
}

tp_rc linear_fused_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(linear_fork_to_comm(g, p));
  if (tp_op_gathers(p->desc.op)) TP_TRY(backward_gather_side(g, p, t));
  else TP_TRY(backward_scatter_side(g, p, t));
  return linear_join_from_comm(g);
}
