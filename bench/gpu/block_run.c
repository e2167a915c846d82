/*
 * block_run.c — forward and backward of the layers (see block.h), op for
 * op as bench/matrix/placement.c declares them, on the group's main stream.
 *
 * Each part (attention, FFN) maps an input x to an output y, and in the
 * backward dy to dx; the transformer block chains them with the residual
 * adds (x1 = x + attention(x), y = x1 + ffn(x1)), whose backward sums the
 * gradient that flows around a part with the one through it. The sums round
 * once from fp32 (tp_launch_reduce_sum of two sources).
 *
 * COMM_ONLY runs the projections' collectives and nothing else; every other
 * backend runs every op, the projections as their backend says (and, for an
 * fp8 recipe, in its format: tp_block_proj_forward, block_fp8.h).
 *
 * Activation checkpointing (block.h has the op lists): the backward starts
 * with the recomputation, in its own NVTX range ("<layer>.recompute") inside
 * the backward's, then runs the backward every mode shares. Selective's
 * forward differs from the others in RoPE alone, which writes the rotated
 * copy (qkv_rot) so that the projection's output stays as it was.
 */
#include <string.h>

#include "bench/gpu/block.h"
#include "bench/gpu/block_fp8.h"
#include "collectors/tp_nvtx.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"

/* The per-rank compute (norms, RoPE, attention core, activations: everything but the
 * collectives) runs unless only the collectives are timed. */
static int runs_compute(const tp_block_plan *p) { return p->backend != TP_BACKEND_COMM_ONLY; }

/* A projection's tensors, starting with its own stock-path scratch when the
 * configuration gave it one (the references: tp_block_tensors.proj_scratch). */
static tp_linear_tensors proj_tensors(const tp_block_tensors *bt, tp_block_proj proj) {
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  t.scratch = bt->proj_scratch[proj];
  return t;
}

/* out = a + b over the block's rows (fp32 sum, one rounding). */
static tp_rc residual(tp_group *g, const tp_block_plan *p, void *out, const void *a,
                      const void *b) {
  const void *srcs[2] = {a, b};
  TP_CUDA(tp_launch_reduce_sum(p->shape.dtype, out, srcs, 2, (size_t)(p->local_rows * p->shape.dim),
                               g->main_stream));
  return TP_OK;
}

static tp_rc rmsnorm_fwd(tp_group *g, const tp_block_plan *p, const void *x, const void *gain,
                         void *h, float *inv_rms) {
  TP_CUDA(tp_launch_rmsnorm_fwd(p->shape.dtype, x, gain, h, inv_rms, p->local_rows, p->shape.dim,
                                TP_RMSNORM_EPS, g->main_stream));
  return TP_OK;
}

static tp_rc rmsnorm_bwd(tp_group *g, const tp_block_plan *p, const tp_block_tensors *t,
                         const void *dh, const void *x, const void *gain, const float *inv_rms,
                         void *dx, void *dgain) {
  TP_CUDA(tp_launch_rmsnorm_bwd(p->shape.dtype, dh, x, gain, inv_rms, dx, dgain, t->norm_ws,
                                p->local_rows, p->shape.dim, g->main_stream));
  return TP_OK;
}

/* ---- attention: RMSNorm, QKV, RoPE, causal GQA core, wo ------------------------------------ */

/* Selective keeps the projection's output: RoPE writes a rotated copy. */
static int rotates_a_copy(const tp_block_plan *p) { return p->shape.ac == TP_AC_SELECTIVE; }

/* The rotated QKV the attention core reads: qkv_rot under selective, else qkv itself. */
static void *rotated_qkv(const tp_block_plan *p, const tp_block_attn *a) {
  return rotates_a_copy(p) ? a->qkv_rot : a->qkv;
}

/* RoPE of the projection's output: in place, or (selective) into qkv_rot. */
static tp_rc rope_fwd(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  tp_block_attn *a = &t->attn;
  if (!rotates_a_copy(p)) {
    TP_CUDA(tp_launch_rope_fwd(&p->attn, a->qkv, t->rope_table, g->main_stream));
    return TP_OK;
  }
  /* In place it would turn the kept output a second time at every recomputation. */
  if (!a->qkv_rot)
    return TP_FAIL(TP_EINTERNAL, "ac=selective on tensors allocated without its rotated copy");
  TP_CUDA(tp_launch_rope_fwd_into(&p->attn, a->qkv, a->qkv_rot, t->rope_table, g->main_stream));
  return TP_OK;
}

static tp_rc attention_fwd(tp_group *g, const tp_block_plan *p, tp_block_tensors *t, const void *x,
                           void *y) {
  tp_block_attn *a = &t->attn;
  const tp_attention_shape *as = &p->attn;
  const int compute = runs_compute(p);
  if (compute) TP_TRY(rmsnorm_fwd(g, p, x, a->g, a->h, a->inv_rms));
  tp_linear_tensors qkv = proj_tensors(t, TP_PROJ_QKV);
  qkv.x = a->h;
  qkv.w[0] = a->w_qkv;
  qkv.y[0] = a->qkv;
  qkv.saved = p->proj[TP_PROJ_QKV].desc.save_gathered ? a->saved : NULL;
  TP_TRY(tp_block_proj_forward(g, p, TP_PROJ_QKV, &qkv));
  if (compute) {
    TP_TRY(rope_fwd(g, p, t));
    TP_TRY(tp_attention_forward(g->gemm, as, rotated_qkv(p, a), a->o, a->probs, a->ws,
                                g->main_stream));
  }
  tp_linear_tensors wo = proj_tensors(t, TP_PROJ_WO);
  wo.x = a->o;
  wo.w[0] = a->w_o;
  wo.y[0] = y;
  return tp_block_proj_forward(g, p, TP_PROJ_WO, &wo);
}

static tp_rc attention_bwd(tp_group *g, const tp_block_plan *p, tp_block_tensors *t, const void *x,
                           const void *dy, void *dx) {
  tp_block_attn *a = &t->attn;
  const tp_attention_shape *as = &p->attn;
  const int compute = runs_compute(p);
  tp_linear_tensors wo = proj_tensors(t, TP_PROJ_WO);
  wo.x = a->o;
  wo.w[0] = a->w_o;
  wo.dy[0] = dy;
  wo.dx = a->d_o;
  wo.dw[0] = a->dw_o;
  TP_TRY(tp_block_proj_backward(g, p, TP_PROJ_WO, &wo));
  if (compute) {
    /* The core's gradient is with respect to the rotated Q and K; RoPE's
     * backward turns it back. */
    TP_TRY(tp_attention_backward(g->gemm, as, rotated_qkv(p, a), a->probs, a->d_o, a->dqkv, a->ws,
                                 g->main_stream));
    TP_CUDA(tp_launch_rope_bwd(as, a->dqkv, t->rope_table, g->main_stream));
  }
  tp_linear_tensors qkv = proj_tensors(t, TP_PROJ_QKV);
  qkv.x = a->h;
  qkv.w[0] = a->w_qkv;
  qkv.dy[0] = a->dqkv;
  qkv.dx = a->dh;
  qkv.dw[0] = a->dw_qkv;
  qkv.saved = p->proj[TP_PROJ_QKV].desc.save_gathered ? a->saved : NULL;
  TP_TRY(tp_block_proj_backward(g, p, TP_PROJ_QKV, &qkv));
  if (compute) TP_TRY(rmsnorm_bwd(g, p, t, a->dh, x, a->g, a->inv_rms, dx, a->dg));
  return TP_OK;
}

/* ---- FFN: RMSNorm, w1 and w3 through one all-gather, SwiGLU, w2 ----------------------------- */

static size_t ffn_elems(const tp_block_plan *p) { return (size_t)(p->tokens * p->ffn_local); }

static tp_rc ffn_fwd(tp_group *g, const tp_block_plan *p, tp_block_tensors *t, const void *x,
                     void *y) {
  tp_block_ffn *f = &t->ffn;
  const int compute = runs_compute(p);
  if (compute) TP_TRY(rmsnorm_fwd(g, p, x, f->g, f->h, f->inv_rms));
  tp_linear_tensors w13 = proj_tensors(t, TP_PROJ_W13);
  w13.x = f->h;
  w13.w[0] = f->w1;
  w13.w[1] = f->w3;
  w13.y[0] = f->a;
  w13.y[1] = f->b;
  w13.saved = p->proj[TP_PROJ_W13].desc.save_gathered ? f->saved : NULL;
  TP_TRY(tp_block_proj_forward(g, p, TP_PROJ_W13, &w13));
  if (compute)
    TP_CUDA(tp_launch_swiglu_fwd(p->shape.dtype, f->a, f->b, f->m, ffn_elems(p), g->main_stream));
  tp_linear_tensors w2 = proj_tensors(t, TP_PROJ_W2);
  w2.x = f->m;
  w2.w[0] = f->w2;
  w2.y[0] = y;
  return tp_block_proj_forward(g, p, TP_PROJ_W2, &w2);
}

static tp_rc ffn_bwd(tp_group *g, const tp_block_plan *p, tp_block_tensors *t, const void *x,
                     const void *dy, void *dx) {
  tp_block_ffn *f = &t->ffn;
  const int compute = runs_compute(p);
  tp_linear_tensors w2 = proj_tensors(t, TP_PROJ_W2);
  w2.x = f->m;
  w2.w[0] = f->w2;
  w2.dy[0] = dy;
  w2.dx = f->dm;
  w2.dw[0] = f->dw2;
  TP_TRY(tp_block_proj_backward(g, p, TP_PROJ_W2, &w2));
  /* SwiGLU's gradients replace a and b in place (each element is read
   * before it is written): the forward recomputes them every step. */
  if (compute)
    TP_CUDA(tp_launch_swiglu_bwd(p->shape.dtype, f->dm, f->a, f->b, f->a, f->b, ffn_elems(p),
                                 g->main_stream));
  tp_linear_tensors w13 = proj_tensors(t, TP_PROJ_W13);
  w13.x = f->h;
  w13.w[0] = f->w1;
  w13.w[1] = f->w3;
  w13.dy[0] = f->a;
  w13.dy[1] = f->b;
  w13.dx = f->dh;
  w13.dw[0] = f->dw1;
  w13.dw[1] = f->dw3;
  w13.saved = p->proj[TP_PROJ_W13].desc.save_gathered ? f->saved : NULL;
  TP_TRY(tp_block_proj_backward(g, p, TP_PROJ_W13, &w13));
  if (compute) TP_TRY(rmsnorm_bwd(g, p, t, f->dh, x, f->g, f->inv_rms, dx, f->dg));
  return TP_OK;
}

/* ---- the blocks ---------------------------------------------------------------------------- */

static tp_rc forward(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  switch (p->shape.layer) {
  case TP_LAYER_ATTENTION: return attention_fwd(g, p, t, t->x, t->y);
  case TP_LAYER_FFN: return ffn_fwd(g, p, t, t->x, t->y);
  case TP_LAYER_BLOCK: break;
  }
  const int compute = runs_compute(p);
  TP_TRY(attention_fwd(g, p, t, t->x, t->attn.y));
  if (compute) TP_TRY(residual(g, p, t->x1, t->x, t->attn.y));
  TP_TRY(ffn_fwd(g, p, t, t->x1, t->ffn.y));
  if (compute) TP_TRY(residual(g, p, t->y, t->x1, t->ffn.y));
  return TP_OK;
}

/* ---- recomputation (activation checkpointing) ------------------------------------------------ */

/* Selective, attention: RMSNorm's h and 1/rms from the part's input, RoPE from qkv. */
static tp_rc attention_recompute(tp_group *g, const tp_block_plan *p, tp_block_tensors *t,
                                 const void *x) {
  TP_TRY(rmsnorm_fwd(g, p, x, t->attn.g, t->attn.h, t->attn.inv_rms));
  return rope_fwd(g, p, t);
}

/* Selective, FFN: RMSNorm's h and 1/rms from the part's input, m = silu(a)·b. */
static tp_rc ffn_recompute(tp_group *g, const tp_block_plan *p, tp_block_tensors *t,
                           const void *x) {
  tp_block_ffn *f = &t->ffn;
  TP_TRY(rmsnorm_fwd(g, p, x, f->g, f->h, f->inv_rms));
  TP_CUDA(tp_launch_swiglu_fwd(p->shape.dtype, f->a, f->b, f->m, ffn_elems(p), g->main_stream));
  return TP_OK;
}

/* Selective: the forward's elementwise outputs again from what it kept (no
 * collective among them: COMM_ONLY has nothing to recompute). */
static tp_rc recompute_selective(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  if (!runs_compute(p)) return TP_OK;
  switch (p->shape.layer) {
  case TP_LAYER_ATTENTION: return attention_recompute(g, p, t, t->x);
  case TP_LAYER_FFN: return ffn_recompute(g, p, t, t->x);
  case TP_LAYER_BLOCK: break;
  }
  TP_TRY(attention_recompute(g, p, t, t->x));
  TP_TRY(residual(g, p, t->x1, t->x, t->attn.y));
  return ffn_recompute(g, p, t, t->x1);
}

static tp_rc recompute(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  switch (p->shape.ac) {
  case TP_AC_NONE: return TP_OK;
  case TP_AC_SELECTIVE: return recompute_selective(g, p, t);
  case TP_AC_FULL: return forward(g, p, t);
  }
  return TP_FAIL(TP_EINTERNAL, "unknown activation checkpointing mode %d", (int)p->shape.ac);
}

static const char *recompute_range(tp_layer layer) {
  return layer == TP_LAYER_BLOCK ? "block.recompute"
         : layer == TP_LAYER_FFN ? "ffn.recompute"
                                 : "attention.recompute";
}

/* The residual passes dy on unchanged, so each part's input gradient is
 * what came around it plus what came through it. */
static tp_rc backward(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  if (p->shape.ac != TP_AC_NONE) {
    tp_nvtx_push(recompute_range(p->shape.layer));
    tp_rc rc = recompute(g, p, t);
    tp_nvtx_pop();
    TP_TRY(rc);
  }
  switch (p->shape.layer) {
  case TP_LAYER_ATTENTION: return attention_bwd(g, p, t, t->x, t->dy, t->dx);
  case TP_LAYER_FFN: return ffn_bwd(g, p, t, t->x, t->dy, t->dx);
  case TP_LAYER_BLOCK: break;
  }
  const int compute = runs_compute(p);
  TP_TRY(ffn_bwd(g, p, t, t->x1, t->dy, t->dx_part));
  if (compute) TP_TRY(residual(g, p, t->dx1, t->dy, t->dx_part));
  TP_TRY(attention_bwd(g, p, t, t->x, t->dx1, t->dx_part));
  if (compute) TP_TRY(residual(g, p, t->dx, t->dx1, t->dx_part));
  return TP_OK;
}

tp_rc tp_block_forward(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  tp_nvtx_push(p->shape.layer == TP_LAYER_BLOCK ? "block.fwd"
               : p->shape.layer == TP_LAYER_FFN ? "ffn.fwd"
                                                : "attention.fwd");
  tp_rc rc = forward(g, p, t);
  tp_nvtx_pop();
  return rc;
}

tp_rc tp_block_backward(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  if (!p->shape.backward) return TP_FAIL(TP_EINTERNAL, "block planned for the forward only");
  tp_nvtx_push(p->shape.layer == TP_LAYER_BLOCK ? "block.bwd"
               : p->shape.layer == TP_LAYER_FFN ? "ffn.bwd"
                                                : "attention.bwd");
  tp_rc rc = backward(g, p, t);
  tp_nvtx_pop();
  return rc;
}

/* The workspace, lazily, as a framework's op asks for it: nothing to do
 * once prepared; growth while frozen (graph capture) fails with TP_EREJECT. */
static tp_rc ensure_workspace(tp_group *g, const tp_block_plan *p) {
  if (p->backend == TP_BACKEND_DIST) {
    tp_symm *heap = NULL;
    TP_TRY(tp_group_symm(g, p->shape.symm, &heap));
    TP_TRY(tp_symm_reserve(heap, p->symm_bytes));
  }
  if (g->scratch_bytes < p->scratch_bytes) {
    void *scratch = NULL;
    TP_TRY(tp_group_scratch(g, p->scratch_bytes, &scratch));
  }
  return TP_OK;
}

static tp_rc hook(const tp_step_hooks *h, tp_group *g, tp_step_point point) {
  return h ? h->at(h->ctx, g, point) : TP_OK;
}

tp_rc tp_block_step_hooked(tp_group *g, const tp_block_plan *p, tp_block_tensors *t,
                           const tp_step_hooks *hooks) {
  TP_TRY(ensure_workspace(g, p));
  TP_TRY(hook(hooks, g, TP_STEP_FORWARD));
  TP_TRY(tp_block_forward(g, p, t));
  if (p->shape.backward) {
    TP_TRY(hook(hooks, g, TP_STEP_BACKWARD));
    TP_TRY(tp_block_backward(g, p, t));
  }
  return hook(hooks, g, TP_STEP_END);
}

tp_rc tp_block_step(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  return tp_block_step_hooked(g, p, t, NULL);
}
