/*
 * block.c — planning, workspaces and tensors of the layers `tpbench run`
 * times (see block.h); the forward and backward are in block_run.c.
 *
 * A plan is made per backend; the tensors per case, for the shape: the
 * stock layer, each dist_gemm variant and the two references of a case all
 * run on the same inputs and weights, which is what makes their outputs
 * comparable. The four projections are tp_linear plans of the shape's
 * recipe, whatever the dtype (kernels/tp_recipe.h); an fp8 layer's own
 * checks are in block_fp8.c.
 */
#include "bench/gpu/block.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/matrix/placement.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_recipe_rules.h"
#include "kernels/tp_window.h"

static const char *const proj_names[] = {"qkv", "wo", "w13", "w2"};

const char *tp_block_proj_name(tp_block_proj proj) {
  return (unsigned)proj < TP_N_PROJ ? proj_names[proj] : "?";
}

/* ---- planning ------------------------------------------------------------------------ */

static int has_attention(tp_layer k) { return k != TP_LAYER_FFN; }
static int has_ffn(tp_layer k) { return k != TP_LAYER_ATTENTION; }

/* Shapes the sharding needs; the matrix rejects these first, with the same words. */
static tp_rc check_divisible(const tp_block_shape *s, int world) {
  const int64_t tokens = s->batch * s->seq;
  if (s->sp && s->seq % world != 0)
    return TP_FAIL(TP_EREJECT, "seqlen %lld not divisible by TP %d", (long long)s->seq, world);
  if (tokens % world != 0)
    return TP_FAIL(TP_EREJECT, "tokens %lld not divisible by TP %d", (long long)tokens, world);
  if (has_attention(s->layer) && (s->n_heads % world != 0 || s->n_kv_heads % world != 0))
    return TP_FAIL(TP_EREJECT, "n_heads %lld and n_kv_heads %lld must both divide by TP %d",
                   (long long)s->n_heads, (long long)s->n_kv_heads, world);
  if (has_ffn(s->layer) && s->ffn_hidden % world != 0)
    return TP_FAIL(TP_EREJECT, "ffn_hidden %lld not divisible by TP %d", (long long)s->ffn_hidden,
                   world);
  return TP_OK;
}

/* The composition this plan runs must hold its placement contracts. */
static tp_rc check_placement(const tp_block_shape *s, tp_backend backend) {
  const tp_layer_dims dims = {s->dim, (s->n_heads + 2 * s->n_kv_heads) * s->head_dim,
                              s->n_heads * s->head_dim, s->ffn_hidden};
  tp_composition comp;
  TP_TRY(tp_composition_layer(tp_layer_name(s->layer), backend == TP_BACKEND_DIST, s->sp, &dims,
                              &comp));
  tp_rc rc = tp_composition_check(&comp);
  return rc == TP_OK ? TP_OK : tp_fail_context(rc, "placement");
}

/* The projections' recipe: an fp8 format, or the tensors' own dtype. */
static tp_dtype proj_dtype(const tp_block_shape *s) {
  return tp_dtype_is_fp8(s->proj_dtype) ? s->proj_dtype : s->dtype;
}

tp_linear_desc tp_block_proj_desc(const tp_block_shape *s, tp_block_proj proj) {
  tp_linear_desc d;
  memset(&d, 0, sizeof d);
  d.dtype = proj_dtype(s);
  d.tokens = s->batch * s->seq;
  d.n_weights = 1;
  d.backward = s->backward;
  d.sp = s->sp;
  d.rs_sum = s->rs_sum;
  d.symm = s->symm;
  switch (proj) {
  case TP_PROJ_QKV:
    d.op = TP_OP_AG_LINEAR;
    d.in_features = s->dim;
    d.out_features = (s->n_heads + 2 * s->n_kv_heads) * s->head_dim;
    break;
  case TP_PROJ_WO:
    d.op = TP_OP_LINEAR_RS;
    d.in_features = s->n_heads * s->head_dim;
    d.out_features = s->dim;
    break;
  case TP_PROJ_W13:
    d.op = TP_OP_AG_LINEAR_MULTI;
    d.in_features = s->dim;
    d.out_features = s->ffn_hidden;
    d.n_weights = 2;
    break;
  case TP_PROJ_W2:
  default:
    d.op = TP_OP_LINEAR_RS;
    d.in_features = s->ffn_hidden;
    d.out_features = s->dim;
    break;
  }
  d.save_gathered = s->save_gathered && d.op != TP_OP_LINEAR_RS;
  /* an fp8 layer's gathering projections move what the layer's comm_dtype says */
  d.comm = tp_op_gathers(d.op) ? s->comm : TP_COMM_NONE;
  return d;
}

/* The ac axis's rules, in the matrix's words (layer_matrix.c rejects these first). */
static tp_rc check_ac(const tp_block_shape *s) {
  if (s->ac != TP_AC_NONE && s->ac != TP_AC_SELECTIVE && s->ac != TP_AC_FULL)
    return TP_FAIL(TP_EINTERNAL, "unknown activation checkpointing mode %d", (int)s->ac);
  if (s->ac != TP_AC_NONE && !s->backward)
    return TP_FAIL(TP_EREJECT, "ac=%s recomputes activations in the backward; pass fwd has none",
                   tp_ac_name(s->ac));
  if (s->ac == TP_AC_FULL && s->save_gathered)
    return TP_FAIL(TP_EREJECT, "ac=full recomputes the forward, its all-gathers included, in the "
                               "backward: nothing is kept for save_gathered=on to reuse");
  return TP_OK;
}

/* What the activation count needs of this rank's block. */
static tp_activation_shape activation_shape(const tp_block_plan *p) {
  const tp_block_shape *s = &p->shape;
  tp_activation_shape a;
  memset(&a, 0, sizeof a);
  a.layer = s->layer;
  a.elem_bytes = (int64_t)tp_dtype_bytes(s->dtype);
  a.batch = s->batch;
  a.seq = s->seq;
  a.local_rows = p->local_rows;
  a.dim = s->dim;
  a.hq = p->hq;
  a.hkv = p->hkv;
  a.head_dim = s->head_dim;
  a.ffn_local = p->ffn_local;
  /* what the projections' plans keep (an fp8 projection keeps no gathered copy) */
  a.save_gathered = p->saved_bytes > 0;
  return a;
}

void tp_block_kept(const tp_block_plan *p, tp_activation_set *out) {
  const tp_activation_shape as = activation_shape(p);
  tp_activation_saved(&as, p->shape.ac, out);
}

/* The gathered inputs the activation count keeps must be the ones the
 * projections' plans ask the caller for (saved_bytes), or one of the two
 * is wrong. */
static tp_rc check_activation_count(const tp_block_plan *p, const tp_activation_set *kept) {
  int64_t saved = 0;
  for (int i = 0; i < kept->n; ++i)
    if (strstr(kept->tensors[i].name, ".saved")) saved += kept->tensors[i].bytes;
  if (saved == (int64_t)p->saved_bytes) return TP_OK;
  return TP_FAIL(TP_EINTERNAL,
                 "activation count keeps %lld bytes of gathered inputs, the projections save %zu",
                 (long long)saved, p->saved_bytes);
}

/* Bytes one rank sends in a projection's forward alone: its plan, asked for
 * the same way, without the backward (ac=full sends them twice a step). */
static tp_rc forward_comm_bytes(const tp_group *g, const tp_linear_desc *desc, tp_backend backend,
                                tp_schedule requested, int chunks, size_t *out) {
  tp_linear_desc d = *desc;
  d.backward = 0;
  d.save_gathered = 0;
  tp_linear_plan fwd;
  TP_TRY(tp_linear_plan_make(g, &d, backend, requested, chunks, &fwd));
  *out = fwd.comm_bytes;
  tp_linear_release(&fwd);
  return TP_OK;
}

static void add_sizes(tp_block_plan *p, const tp_linear_plan *lp) {
  /* a dist_gemm projection for which auto chose the stock path uses the scratch */
  if (lp->backend == TP_BACKEND_DIST && lp->schedule != TP_SCHED_NCCL) {
    if (lp->workspace_bytes > p->symm_bytes) p->symm_bytes = lp->workspace_bytes;
  } else if (lp->schedule == TP_SCHED_NCCL_WINDOW) {
    if (lp->workspace_bytes > p->window_bytes) p->window_bytes = lp->workspace_bytes;
  } else if (lp->workspace_bytes > p->scratch_bytes) {
    p->scratch_bytes = lp->workspace_bytes;
  }
  p->saved_bytes += lp->saved_bytes;
  p->comm_bytes += lp->comm_bytes;
}

/* One projection's plan: its own, or (src) a twin of src's projection. */
static tp_rc plan_projection(const tp_group *g, const tp_block_plan *src, const tp_linear_desc *d,
                             tp_backend backend, tp_schedule request, int chunks, int i,
                             tp_linear_plan *out) {
  if (src) return tp_linear_twin(g, &src->proj[i], backend, request, out);
  return tp_linear_plan_make(g, d, backend, request, chunks, out);
}

/* Every projection the block has, in the shape's recipe (src: twins of
 * src's), and what their plans add up to (ac=full sends the forward's bytes
 * twice). */
static tp_rc plan_projections(const tp_group *g, tp_schedule requested, int chunks,
                              const tp_block_plan *src, tp_block_plan *out) {
  const tp_block_shape *shape = &out->shape;
  const tp_backend backend = out->backend;
  /* dist_gemm's schedule, or the stock variant on NCCL symmetric windows */
  const int asked = backend == TP_BACKEND_DIST || requested == TP_SCHED_NCCL_WINDOW;
  const tp_schedule request = asked ? requested : TP_SCHED_AUTO;
  for (int i = 0; i < TP_N_PROJ; ++i) {
    if (!out->has[i]) continue;
    tp_linear_desc d = tp_block_proj_desc(shape, (tp_block_proj)i);
    if (g->world == 1) d.comm = TP_COMM_NONE; /* nothing travels */
    tp_rc rc = plan_projection(g, src, &d, backend, request, chunks, i, &out->proj[i]);
    if (rc != TP_OK) return tp_fail_context(rc, "%s", proj_names[i]);
    add_sizes(out, &out->proj[i]);
    size_t again = 0;
    if (shape->ac == TP_AC_FULL) rc = forward_comm_bytes(g, &d, backend, request, chunks, &again);
    if (rc != TP_OK) return tp_fail_context(rc, "%s recomputed", proj_names[i]);
    out->comm_bytes += again;
  }
  /* every projection on the stock path (auto, small shapes): no symmetric memory is used */
  if (backend == TP_BACKEND_DIST && shape->symm == TP_SYMM_NCCL && out->symm_bytes == 0)
    return TP_FAIL(TP_EREJECT, "symm=nccl: auto runs every projection on the stock path here, "
                               "which uses no symmetric memory (the symm=ipc configuration "
                               "times it)");
  return TP_OK;
}

/* The recipe's rules of the whole layer (kernels/tp_recipe_rules.h: the
 * matrix asks the same), for what each projection's own plan cannot see:
 * qkv's weight parts, the layer's sp and symm, its backend at TP 1. */
static tp_rc check_recipe_rules(const tp_group *g, tp_backend backend, tp_schedule requested,
                                int chunks, const tp_block_shape *s) {
  if (!tp_dtype_is_fp8(s->proj_dtype)) return TP_OK;
  if (s->dtype != TP_BF16)
    return TP_FAIL(TP_EINTERNAL, "an %s block keeps bf16 activations, not %s",
                   tp_dtype_name(s->proj_dtype), tp_dtype_name(s->dtype));
  const tp_recipe_layer l = {s->proj_dtype,
                             s->layer,
                             s->batch * s->seq,
                             s->dim,
                             s->n_heads,
                             s->n_kv_heads,
                             s->head_dim,
                             s->ffn_hidden,
                             g->world,
                             s->backward ? TP_PASS_FWD_BWD : TP_PASS_FWD,
                             s->sp,
                             g->world > 1 ? s->comm : TP_COMM_NONE};
  char why[400];
  if (tp_recipe_layer_backend_rejection(&l, backend, why, sizeof why) ||
      tp_recipe_layer_rejection(&l, why, sizeof why) ||
      (backend == TP_BACKEND_DIST &&
       tp_recipe_layer_dist_rejection(&l, requested, chunks, s->symm, why, sizeof why)))
    return TP_FAIL(TP_EREJECT, "%s", why);
  return TP_OK;
}

/* A block plan: its own projections, or (src) twins of src's. */
static tp_rc block_plan(const tp_group *g, const tp_block_shape *shape, tp_backend backend,
                        tp_schedule requested, int chunks, const tp_block_plan *src,
                        tp_block_plan *out) {
  memset(out, 0, sizeof *out);
  out->shape = *shape;
  out->backend = backend;
  out->world = g->world;
  out->rank = g->rank;
  TP_TRY(check_ac(shape));
  TP_TRY(check_divisible(shape, g->world));
  TP_TRY(check_placement(shape, backend));
  out->tokens = shape->batch * shape->seq;
  out->local_rows = shape->sp ? out->tokens / g->world : out->tokens;
  out->hq = shape->n_heads / g->world;
  out->hkv = shape->n_kv_heads / g->world;
  out->ffn_local = shape->ffn_hidden / g->world;
  out->has[TP_PROJ_QKV] = out->has[TP_PROJ_WO] = has_attention(shape->layer);
  out->has[TP_PROJ_W13] = out->has[TP_PROJ_W2] = has_ffn(shape->layer);
  out->attn = (tp_attention_shape){shape->dtype, shape->seq, shape->batch,
                                   out->hq,      out->hkv,   shape->head_dim};
  TP_TRY(check_recipe_rules(g, backend, requested, chunks, shape));
  TP_TRY(plan_projections(g, requested, chunks, src, out));
  if (!shape->backward) return TP_OK;
  tp_activation_set kept;
  tp_block_kept(out, &kept);
  TP_TRY(check_activation_count(out, &kept));
  out->activation_bytes = kept.bytes;
  return TP_OK;
}

tp_rc tp_block_plan_make(const tp_group *g, const tp_block_shape *shape, tp_backend backend,
                         tp_schedule requested, int chunks, tp_block_plan *out) {
  return block_plan(g, shape, backend, requested, chunks, NULL, out);
}

tp_rc tp_block_plan_twin(const tp_group *g, const tp_block_plan *p, tp_backend backend,
                         tp_schedule requested, tp_block_plan *out) {
  return block_plan(g, &p->shape, backend, requested, 0, p, out);
}

void tp_block_release(tp_block_plan *p) {
  for (int i = 0; i < TP_N_PROJ; ++i) tp_linear_release(&p->proj[i]);
}

tp_rc tp_block_prepare(tp_group *g, const tp_block_plan *p) {
  for (int i = 0; i < TP_N_PROJ; ++i)
    if (p->has[i]) TP_TRY(tp_linear_prepare(g, &p->proj[i]));
  return TP_OK;
}

/* A projection's weights in the tensors (block.h's layouts). */
static void proj_weights(const tp_block_tensors *t, tp_block_proj proj, tp_linear_tensors *lt) {
  switch (proj) {
  case TP_PROJ_QKV: lt->w[0] = t->attn.w_qkv; break;
  case TP_PROJ_WO: lt->w[0] = t->attn.w_o; break;
  case TP_PROJ_W13:
    lt->w[0] = t->ffn.w1;
    lt->w[1] = t->ffn.w3;
    break;
  case TP_PROJ_W2:
  default: lt->w[0] = t->ffn.w2; break;
  }
}

tp_rc tp_block_prepare_weights(tp_group *g, const tp_block_plan *p, const tp_block_tensors *t) {
  for (int i = 0; i < TP_N_PROJ; ++i) {
    if (!p->has[i]) continue;
    tp_linear_tensors lt;
    memset(&lt, 0, sizeof lt);
    proj_weights(t, (tp_block_proj)i, &lt);
    /* at TP > 1 also the communication's buffers and a fused pipeline's
     * symmetric workspace (collective: every rank, the same order) */
    tp_rc rc = tp_linear_prepare_weights(g, &p->proj[i], &lt);
    if (rc != TP_OK) return tp_fail_context(rc, "%s", tp_block_proj_name((tp_block_proj)i));
  }
  return TP_OK;
}

tp_rc tp_block_proj_forward(tp_group *g, const tp_block_plan *p, tp_block_proj proj,
                            const tp_linear_tensors *t) {
  return tp_linear_forward(g, &p->proj[proj], t);
}

tp_rc tp_block_proj_backward(tp_group *g, const tp_block_plan *p, tp_block_proj proj,
                             const tp_linear_tensors *t) {
  return tp_linear_backward(g, &p->proj[proj], t);
}

tp_rc tp_block_twin_step(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  tp_block_plan twin;
  tp_rc rc = tp_block_plan_twin(g, p, TP_BACKEND_STOCK, TP_SCHED_AUTO, &twin);
  if (rc == TP_OK) rc = tp_block_step(g, &twin, t);
  tp_block_release(&twin);
  return rc;
}

size_t tp_block_own_bytes(const tp_block_plan *p) {
  size_t bytes = 0;
  for (int i = 0; i < TP_N_PROJ; ++i)
    if (p->has[i]) bytes += tp_linear_own_bytes(&p->proj[i]);
  return bytes;
}

int tp_block_transfers(const tp_block_plan *p) {
  const int forwards = p->shape.ac == TP_AC_FULL ? 2 : 1;
  int n = 0;
  for (int i = 0; i < TP_N_PROJ; ++i)
    if (p->has[i])
      n += forwards * tp_linear_transfers(&p->proj[i], 1, 0) +
           tp_linear_transfers(&p->proj[i], 0, p->shape.backward);
  return n;
}

/* ---- tensors -------------------------------------------------------------------------- */

/* What allocation needs besides the plan. In a window (tp_block_alloc_window)
 * the tensors are carved one after the other from it, in the same order and
 * sizes on every rank; a first pass with sizing set only adds up the bytes. */
typedef struct allocator {
  tp_dtype dt;
  cudaStream_t stream;
  uint64_t seed;  /* per case */
  uint64_t rank;  /* mixed into the seeds of sharded tensors */
  uint64_t count; /* tensors so far: each gets its own seed */
  char *window;   /* NULL: each tensor cudaMalloc'd */
  size_t used;    /* bytes carved from the window (or counted, sizing) */
  int sizing;     /* count only: no memory, no kernels */
} allocator;

enum { WINDOW_TENSOR_ALIGN = 4096 };

static tp_rc alloc_bytes(allocator *a, void **p, size_t bytes) {
  if (!a->window && !a->sizing) return tp_device_malloc(p, bytes ? bytes : 1);
  *p = a->sizing ? NULL : a->window + a->used;
  a->used +=
      ((bytes ? bytes : 1) + WINDOW_TENSOR_ALIGN - 1) / WINDOW_TENSOR_ALIGN * WINDOW_TENSOR_ALIGN;
  return TP_OK;
}

/* A tensor of n elements of the dtype, random in [-scale, scale). sharded:
 * different numbers on every rank; else the same everywhere. */
static tp_rc alloc_random(allocator *a, void **p, size_t n, float scale, int sharded) {
  TP_TRY(alloc_bytes(a, p, n * tp_dtype_bytes(a->dt)));
  uint64_t seed = a->seed * 1000003ull + ++a->count;
  if (sharded) seed ^= (a->rank + 1) * 0x9E3779B97F4A7C15ull;
  if (!a->sizing) TP_CUDA(tp_launch_fill_random(a->dt, *p, n, seed, scale, a->stream));
  return TP_OK;
}

static float weight_scale(int64_t in_features) { return 1.0f / sqrtf((float)in_features); }

static tp_rc alloc_attention(allocator *al, const tp_block_plan *p, tp_block_attn *a, void *y) {
  const tp_block_shape *s = &p->shape;
  const size_t L = (size_t)p->local_rows, T = (size_t)p->tokens, D = (size_t)s->dim;
  const size_t q = (size_t)(p->hq * s->head_dim), k = (size_t)tp_attention_qkv_width(&p->attn);
  const float w_scale = weight_scale(s->dim), o_scale = weight_scale(s->n_heads * s->head_dim);
  TP_TRY(alloc_random(al, &a->g, D, 1.0f, 0));
  TP_TRY(alloc_random(al, &a->h, L * D, 1.0f, s->sp));
  TP_TRY(alloc_bytes(al, (void **)&a->inv_rms, L * sizeof(float)));
  TP_TRY(alloc_random(al, &a->w_qkv, k * D, w_scale, 1));
  TP_TRY(alloc_random(al, &a->qkv, T * k, 1.0f, 1));
  TP_TRY(alloc_random(al, &a->probs, tp_attention_saved_bytes(&p->attn) / tp_dtype_bytes(al->dt),
                      1.0f, 1));
  TP_TRY(alloc_bytes(al, &a->ws, tp_attention_workspace_bytes(&p->attn, s->backward)));
  TP_TRY(alloc_random(al, &a->o, T * q, 1.0f, 1));
  TP_TRY(alloc_random(al, &a->w_o, D * q, o_scale, 1));
  a->y = y;
  if (!a->y) TP_TRY(alloc_random(al, &a->y, L * D, 1.0f, s->sp));
  if (s->save_gathered) TP_TRY(alloc_random(al, &a->saved, T * D, 1.0f, 0));
  if (!s->backward) return TP_OK;
  TP_TRY(alloc_random(al, &a->dg, D, 1.0f, 1));
  TP_TRY(alloc_random(al, &a->dh, L * D, 1.0f, 1));
  TP_TRY(alloc_random(al, &a->dw_qkv, k * D, 1.0f, 1));
  TP_TRY(alloc_random(al, &a->dqkv, T * k, 1.0f, 1));
  TP_TRY(alloc_random(al, &a->d_o, T * q, 1.0f, 1));
  return alloc_random(al, &a->dw_o, D * q, 1.0f, 1);
}

static tp_rc alloc_ffn(allocator *al, const tp_block_plan *p, tp_block_ffn *f, void *y) {
  const tp_block_shape *s = &p->shape;
  const size_t L = (size_t)p->local_rows, T = (size_t)p->tokens, D = (size_t)s->dim;
  const size_t fl = (size_t)p->ffn_local;
  const float w_scale = weight_scale(s->dim), w2_scale = weight_scale(s->ffn_hidden);
  TP_TRY(alloc_random(al, &f->g, D, 1.0f, 0));
  TP_TRY(alloc_random(al, &f->h, L * D, 1.0f, s->sp));
  TP_TRY(alloc_bytes(al, (void **)&f->inv_rms, L * sizeof(float)));
  TP_TRY(alloc_random(al, &f->w1, fl * D, w_scale, 1));
  TP_TRY(alloc_random(al, &f->w3, fl * D, w_scale, 1));
  TP_TRY(alloc_random(al, &f->a, T * fl, 1.0f, 1));
  TP_TRY(alloc_random(al, &f->b, T * fl, 1.0f, 1));
  TP_TRY(alloc_random(al, &f->m, T * fl, 1.0f, 1));
  TP_TRY(alloc_random(al, &f->w2, D * fl, w2_scale, 1));
  f->y = y;
  if (!f->y) TP_TRY(alloc_random(al, &f->y, L * D, 1.0f, s->sp));
  if (s->save_gathered) TP_TRY(alloc_random(al, &f->saved, T * D, 1.0f, 0));
  if (!s->backward) return TP_OK;
  TP_TRY(alloc_random(al, &f->dg, D, 1.0f, 1));
  TP_TRY(alloc_random(al, &f->dh, L * D, 1.0f, 1));
  TP_TRY(alloc_random(al, &f->dw1, fl * D, 1.0f, 1));
  TP_TRY(alloc_random(al, &f->dw3, fl * D, 1.0f, 1));
  TP_TRY(alloc_random(al, &f->dm, T * fl, 1.0f, 1));
  return alloc_random(al, &f->dw2, D * fl, 1.0f, 1);
}

static tp_rc alloc_all(tp_group *g, const tp_block_plan *p, allocator *al, tp_block_tensors *t) {
  const tp_block_shape *s = &p->shape;
  const size_t L = (size_t)p->local_rows, D = (size_t)s->dim;
  /* Without sequence parallelism the activations are replicated: the same
   * numbers on every rank, as a real replicated input would be. */
  TP_TRY(alloc_random(al, &t->x, L * D, 1.0f, s->sp));
  TP_TRY(alloc_random(al, &t->y, L * D, 1.0f, s->sp));
  if (s->backward) {
    TP_TRY(alloc_random(al, &t->dy, L * D, 1.0f, s->sp));
    TP_TRY(alloc_random(al, &t->dx, L * D, 1.0f, s->sp));
    TP_TRY(alloc_bytes(al, (void **)&t->norm_ws,
                       tp_rmsnorm_bwd_workspace_bytes(p->local_rows, s->dim)));
  }
  const int full = s->layer == TP_LAYER_BLOCK;
  if (full) {
    TP_TRY(alloc_random(al, &t->x1, L * D, 1.0f, s->sp));
    if (s->backward) {
      TP_TRY(alloc_random(al, &t->dx1, L * D, 1.0f, s->sp));
      TP_TRY(alloc_random(al, &t->dx_part, L * D, 1.0f, s->sp));
    }
  }
  if (has_attention(s->layer)) {
    TP_TRY(alloc_bytes(al, (void **)&t->rope_table, tp_rope_table_bytes(s->seq, s->head_dim)));
    if (!al->sizing)
      TP_CUDA(
          tp_launch_rope_table(t->rope_table, s->seq, s->head_dim, TP_ROPE_THETA, g->main_stream));
    TP_TRY(alloc_attention(al, p, &t->attn, full ? NULL : t->y));
  }
  if (has_ffn(s->layer)) TP_TRY(alloc_ffn(al, p, &t->ffn, full ? NULL : t->y));
  /* Last, so the tensors before hold the same numbers whatever the mode. */
  if (s->ac == TP_AC_SELECTIVE && has_attention(s->layer))
    TP_TRY(alloc_random(al, &t->attn.qkv_rot,
                        (size_t)p->tokens * (size_t)tp_attention_qkv_width(&p->attn), 1.0f, 1));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

tp_rc tp_block_alloc(tp_group *g, const tp_block_plan *p, uint64_t seed, tp_block_tensors *t) {
  memset(t, 0, sizeof *t);
  allocator al = {p->shape.dtype, g->main_stream, seed, (uint64_t)g->rank, 0, NULL, 0, 0};
  tp_rc rc = alloc_all(g, p, &al, t);
  if (rc != TP_OK) tp_block_free(t);
  return rc;
}

tp_rc tp_block_alloc_window(tp_group *g, const tp_block_plan *p, uint64_t seed,
                            tp_block_tensors *t) {
  memset(t, 0, sizeof *t);
  allocator size = {p->shape.dtype, g->main_stream, seed, (uint64_t)g->rank, 0, NULL, 0, 1};
  TP_TRY(alloc_all(g, p, &size, t));
  memset(t, 0, sizeof *t);
  void *window = NULL;
  TP_TRY(tp_window_alloc(g, size.used, &window));
  t->window = window;
  t->window_group = g;
  allocator al = {p->shape.dtype, g->main_stream, seed, (uint64_t)g->rank, 0, window, 0, 0};
  tp_rc rc = alloc_all(g, p, &al, t);
  if (rc != TP_OK) tp_block_free(t);
  return rc;
}

static void free_all(void *const *ptrs, size_t n) {
  for (size_t i = 0; i < n; ++i) tp_device_release(ptrs[i]);
}

void tp_block_free(tp_block_tensors *t) {
  if (t->window) { /* every tensor is carved from it */
    tp_window_free(t->window_group, t->window);
    memset(t, 0, sizeof *t);
    return;
  }
  tp_block_attn *a = &t->attn;
  tp_block_ffn *f = &t->ffn;
  /* A part's output is the block's own y in the attention and FFN blocks. */
  void *a_y = a->y == t->y ? NULL : a->y, *f_y = f->y == t->y ? NULL : f->y;
  void *const attn[] = {a->g,  a->h,      a->inv_rms, a->w_qkv, a->qkv,   a->probs,
                        a->ws, a->o,      a->w_o,     a_y,      a->saved, a->dg,
                        a->dh, a->dw_qkv, a->dqkv,    a->d_o,   a->dw_o,  a->qkv_rot};
  void *const ffn[] = {f->g, f->h,     f->inv_rms, f->w1, f->w3,  f->a,   f->b,  f->m,  f->w2,
                       f_y,  f->saved, f->dg,      f->dh, f->dw1, f->dw3, f->dm, f->dw2};
  void *const top[] = {t->x,   t->y,       t->dy,         t->dx,     t->x1,
                       t->dx1, t->dx_part, t->rope_table, t->norm_ws};
  free_all(attn, sizeof attn / sizeof attn[0]);
  free_all(ffn, sizeof ffn / sizeof ffn[0]);
  free_all(top, sizeof top / sizeof top[0]);
  memset(t, 0, sizeof *t);
}

/* ---- outputs ------------------------------------------------------------------------------ */

static void add_output(tp_block_output *out, int *n, const char *name, void *ptr, size_t count) {
  if (*n < TP_BLOCK_MAX_OUTPUTS) out[(*n)++] = (tp_block_output){name, ptr, count};
}

int tp_block_outputs(const tp_block_plan *p, const tp_block_tensors *t, tp_block_output *out) {
  const tp_block_shape *s = &p->shape;
  const size_t L = (size_t)p->local_rows, D = (size_t)s->dim;
  int n = 0;
  add_output(out, &n, "y", t->y, L * D);
  if (!s->backward) return n;
  add_output(out, &n, "dx", t->dx, L * D);
  if (has_attention(s->layer)) {
    const size_t q = (size_t)(p->hq * s->head_dim), k = (size_t)tp_attention_qkv_width(&p->attn);
    add_output(out, &n, "dw_qkv", t->attn.dw_qkv, k * D);
    add_output(out, &n, "dw_o", t->attn.dw_o, D * q);
    add_output(out, &n, "dg_attention_norm", t->attn.dg, D);
  }
  if (has_ffn(s->layer)) {
    const size_t fl = (size_t)p->ffn_local;
    add_output(out, &n, "dw1", t->ffn.dw1, fl * D);
    add_output(out, &n, "dw3", t->ffn.dw3, fl * D);
    add_output(out, &n, "dw2", t->ffn.dw2, D * fl);
    add_output(out, &n, "dg_ffn_norm", t->ffn.dg, D);
  }
  return n;
}

/* ---- data and parameters ------------------------------------------------------------------ */

tp_rc tp_block_reseed_data(tp_group *g, const tp_block_plan *p, tp_block_tensors *t,
                           uint64_t seed) {
  const size_t n = (size_t)(p->local_rows * p->shape.dim);
  const tp_dtype dt = p->shape.dtype;
  TP_CUDA(tp_launch_fill_random(dt, t->x, n, seed * 1000003ull + 1, 1.0f, g->main_stream));
  if (p->shape.backward)
    TP_CUDA(tp_launch_fill_random(dt, t->dy, n, seed * 1000003ull + 2, 1.0f, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

static void add_param(tp_block_param *out, int *n, const char *name, void *w, void *dw,
                      int64_t rows, int64_t cols) {
  if (*n < TP_BLOCK_MAX_PARAMS) out[(*n)++] = (tp_block_param){name, w, dw, rows, cols};
}

int tp_block_params(const tp_block_plan *p, const tp_block_tensors *t, tp_block_param *out) {
  const tp_block_shape *s = &p->shape;
  const int64_t D = s->dim;
  int n = 0;
  if (has_attention(s->layer)) {
    const int64_t q = p->hq * s->head_dim, k = tp_attention_qkv_width(&p->attn);
    add_param(out, &n, "attention_norm", t->attn.g, t->attn.dg, D, 1);
    add_param(out, &n, "w_qkv", t->attn.w_qkv, t->attn.dw_qkv, k, D);
    add_param(out, &n, "w_o", t->attn.w_o, t->attn.dw_o, D, q);
  }
  if (has_ffn(s->layer)) {
    const int64_t f = p->ffn_local;
    add_param(out, &n, "ffn_norm", t->ffn.g, t->ffn.dg, D, 1);
    add_param(out, &n, "w1", t->ffn.w1, t->ffn.dw1, f, D);
    add_param(out, &n, "w3", t->ffn.w3, t->ffn.dw3, f, D);
    add_param(out, &n, "w2", t->ffn.w2, t->ffn.dw2, D, f);
  }
  return n;
}

/* ---- what the forward writes ------------------------------------------------------------- */

static void add_tensor(tp_block_tensor *out, int *n, const char *name, void *ptr, size_t bytes,
                       tp_dtype dtype) {
  if (ptr && *n < TP_BLOCK_MAX_FORWARD_TENSORS)
    out[(*n)++] = (tp_block_tensor){name, ptr, bytes, dtype};
}

int tp_block_forward_tensors(const tp_block_plan *p, const tp_block_tensors *t,
                             tp_block_tensor *out) {
  const tp_block_shape *s = &p->shape;
  const tp_dtype dt = s->dtype;
  const size_t e = tp_dtype_bytes(dt), L = (size_t)p->local_rows, T = (size_t)p->tokens;
  const size_t D = (size_t)s->dim, LD = L * D * e, fl = (size_t)p->ffn_local;
  const int block = s->layer == TP_LAYER_BLOCK;
  int n = 0;
  add_tensor(out, &n, "x", t->x, LD, dt);
  if (has_attention(s->layer)) {
    const tp_block_attn *a = &t->attn;
    const size_t qkv = T * (size_t)tp_attention_qkv_width(&p->attn) * e;
    add_tensor(out, &n, "attention.h", a->h, LD, dt);
    add_tensor(out, &n, "attention.inv_rms", a->inv_rms, L * sizeof(float), TP_FP32);
    add_tensor(out, &n, "attention.saved", a->saved, T * D * e, dt);
    add_tensor(out, &n, "attention.qkv", a->qkv, qkv, dt);
    add_tensor(out, &n, "attention.qkv_rot", a->qkv_rot, qkv, dt);
    add_tensor(out, &n, "attention.probs", a->probs, tp_attention_saved_bytes(&p->attn), dt);
    add_tensor(out, &n, "attention.o", a->o, T * (size_t)(p->hq * s->head_dim) * e, dt);
    if (block) add_tensor(out, &n, "attention.y", a->y, LD, dt);
  }
  if (block) add_tensor(out, &n, "x1", t->x1, LD, dt);
  if (has_ffn(s->layer)) {
    const tp_block_ffn *f = &t->ffn;
    add_tensor(out, &n, "ffn.h", f->h, LD, dt);
    add_tensor(out, &n, "ffn.inv_rms", f->inv_rms, L * sizeof(float), TP_FP32);
    add_tensor(out, &n, "ffn.saved", f->saved, T * D * e, dt);
    add_tensor(out, &n, "ffn.a", f->a, T * fl * e, dt);
    add_tensor(out, &n, "ffn.b", f->b, T * fl * e, dt);
    add_tensor(out, &n, "ffn.m", f->m, T * fl * e, dt);
    if (block) add_tensor(out, &n, "ffn.y", f->y, LD, dt);
  }
  return n;
}
