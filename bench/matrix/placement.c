/*
 * placement.c — placement contracts and their check (see placement.h).
 *
 * The check is a walk with a symbol table: the block's inputs are placed
 * first, every op looks its inputs up, compares, and places its output
 * (replacing an earlier entry of the same name: RoPE works in place). The
 * builders below write the compositions of the layers tpbench runs, one
 * helper per kind of op, so each contract is spelled out once.
 */
#include "bench/matrix/placement.h"

#include <stdio.h>
#include <string.h>

const char *tp_placement_name(tp_placement p) {
  switch (p) {
  case TP_PLACE_SEQ_SHARDED: return "sequence-sharded";
  case TP_PLACE_REPLICATED: return "replicated";
  case TP_PLACE_FEATURE_SHARDED: return "feature-sharded";
  case TP_PLACE_PARTIAL: return "partial";
  case TP_PLACE_AS_INPUT: return "as input";
  }
  return "?";
}

/* "sequence-sharded or replicated" for a set of placements. */
static void accepted_names(unsigned accepts, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int p = TP_PLACE_SEQ_SHARDED; p <= TP_PLACE_PARTIAL && used < cap; ++p) {
    if (!(accepts & TP_PLACE_BIT(p))) continue;
    int n = snprintf(buf + used, cap - used, "%s%s", used ? " or " : "",
                     tp_placement_name((tp_placement)p));
    if (n > 0) used += (size_t)n;
  }
  if (!buf[0]) snprintf(buf, cap, "nothing");
}

/* ---- the check ------------------------------------------------------------------------ */

typedef struct placed {
  const char *tensor;
  tp_placement placement;
  int64_t features;
  const char *by; /* the op that produced it, or "input" */
} placed;

typedef struct symbols {
  placed t[TP_PLACE_MAX_TENSORS];
  int n;
} symbols;

static const placed *lookup(const symbols *s, const char *tensor) {
  for (int i = s->n - 1; i >= 0; --i)
    if (strcmp(s->t[i].tensor, tensor) == 0) return &s->t[i];
  return NULL;
}

static tp_rc define(symbols *s, const char *block, const char *tensor, tp_placement placement,
                    int64_t features, const char *by) {
  if (!tensor) return TP_FAIL(TP_EINTERNAL, "%s: %s produces a tensor without a name", block, by);
  for (int i = 0; i < s->n; ++i)
    if (strcmp(s->t[i].tensor, tensor) == 0) {
      s->t[i] = (placed){tensor, placement, features, by};
      return TP_OK;
    }
  if (s->n == TP_PLACE_MAX_TENSORS)
    return TP_FAIL(TP_EINTERNAL, "%s: more than %d tensors", block, TP_PLACE_MAX_TENSORS);
  s->t[s->n++] = (placed){tensor, placement, features, by};
  return TP_OK;
}

/* One input against what produced it. */
static tp_rc check_input(const char *block, const tp_place_op *op, int i, const symbols *s,
                         const placed **found) {
  const tp_place_in *in = &op->in[i];
  const placed *t = in->tensor ? lookup(s, in->tensor) : NULL;
  if (!t)
    return TP_FAIL(TP_EREJECT, "%s: %s consumes '%s', which nothing before it produces", block,
                   op->name, in->tensor ? in->tensor : "(unnamed)");
  char want[96];
  accepted_names(in->accepts, want, sizeof want);
  if (!(in->accepts & TP_PLACE_BIT(t->placement)) || t->features != in->features)
    return TP_FAIL(TP_EREJECT, "%s: %s takes '%s' %s [%lld features], but %s gives it %s [%lld]",
                   block, op->name, in->tensor, want, (long long)in->features, t->by,
                   tp_placement_name(t->placement), (long long)t->features);
  *found = t;
  return TP_OK;
}

static tp_rc check_op(const char *block, const tp_place_op *op, symbols *s) {
  if (!op->name || op->n_in < 1 || op->n_in > TP_PLACE_MAX_IN)
    return TP_FAIL(TP_EINTERNAL, "%s: an op without a name or with %d inputs", block, op->n_in);
  const placed *first = NULL;
  for (int i = 0; i < op->n_in; ++i) {
    const placed *t = NULL;
    TP_TRY(check_input(block, op, i, s, &t));
    if (!first) first = t;
    else if (op->out.placement == TP_PLACE_AS_INPUT && t->placement != first->placement)
      return TP_FAIL(TP_EREJECT, "%s: %s adds '%s' (%s) to '%s' (%s): its inputs must agree", block,
                     op->name, t->tensor, tp_placement_name(t->placement), first->tensor,
                     tp_placement_name(first->placement));
  }
  tp_placement out = op->out.placement == TP_PLACE_AS_INPUT ? first->placement : op->out.placement;
  return define(s, block, op->out.tensor, out, op->out.features, op->name);
}

tp_rc tp_composition_check(const tp_composition *c) {
  const char *block = c->name ? c->name : "composition";
  symbols s;
  memset(&s, 0, sizeof s);
  if (c->n_inputs < 1 || c->n_inputs > TP_PLACE_MAX_IN || c->n_ops > TP_PLACE_MAX_OPS)
    return TP_FAIL(TP_EINTERNAL, "%s: %d inputs, %d ops", block, c->n_inputs, c->n_ops);
  for (int i = 0; i < c->n_inputs; ++i) {
    if (c->inputs[i].placement == TP_PLACE_AS_INPUT)
      return TP_FAIL(TP_EINTERNAL, "%s: input '%s' has no placement", block, c->inputs[i].tensor);
    TP_TRY(define(&s, block, c->inputs[i].tensor, c->inputs[i].placement, c->inputs[i].features,
                  "the block's input"));
  }
  for (int i = 0; i < c->n_ops; ++i) TP_TRY(check_op(block, &c->ops[i], &s));
  const tp_place_op result = {"the block's output", {c->output}, 1, {NULL, TP_PLACE_AS_INPUT, 0}};
  const placed *t = NULL;
  return check_input(block, &result, 0, &s, &t);
}

/* ---- the layers tpbench runs ------------------------------------------------------------ */

typedef struct builder {
  tp_composition *c;
  int fused, sp;
  const tp_layer_dims *d;
} builder;

static tp_place_in in_of(const char *tensor, unsigned accepts, int64_t features) {
  return (tp_place_in){tensor, accepts, features};
}

static tp_rc add(builder *b, const char *name, tp_place_in in0, const tp_place_in *in1,
                 const char *out, tp_placement placement, int64_t features) {
  tp_composition *c = b->c;
  if (c->n_ops == TP_PLACE_MAX_OPS)
    return TP_FAIL(TP_EINTERNAL, "%s: more than %d ops", c->name, TP_PLACE_MAX_OPS);
  tp_place_op *op = &c->ops[c->n_ops++];
  memset(op, 0, sizeof *op);
  op->name = name;
  op->in[0] = in0;
  op->n_in = 1;
  if (in1) op->in[op->n_in++] = *in1;
  op->out = (tp_place_out){out, placement, features};
  return TP_OK;
}

/* Row-wise: RMSNorm keeps the rows' placement. */
static tp_rc add_rowwise(builder *b, const char *name, const char *in, const char *out) {
  return add(b, name, in_of(in, TP_PLACE_ROWS, b->d->dim), NULL, out, TP_PLACE_AS_INPUT, b->d->dim);
}

/* Column-parallel projection: needs every row of its input; gives every row,
 * this rank's columns. Stock gathers (with SP) and multiplies as two ops;
 * the fused op takes the sequence shard itself and has no replicated form. */
static tp_rc add_gather_side(builder *b, const char *name, const char *gather_name,
                             const char *gemm_name, const char *gathered, const char *in,
                             int64_t in_features, const char *out, int64_t out_features) {
  const unsigned seq = TP_PLACE_BIT(TP_PLACE_SEQ_SHARDED), rep = TP_PLACE_BIT(TP_PLACE_REPLICATED);
  if (b->fused)
    return add(b, name, in_of(in, seq, in_features), NULL, out, TP_PLACE_FEATURE_SHARDED,
               out_features);
  if (b->sp) {
    TP_TRY(add(b, gather_name, in_of(in, seq, in_features), NULL, gathered, TP_PLACE_REPLICATED,
               in_features));
    in = gathered;
  }
  return add(b, gemm_name, in_of(in, rep, in_features), NULL, out, TP_PLACE_FEATURE_SHARDED,
             out_features);
}

/* Row-parallel projection: this rank's columns in, a partial sum out of the
 * GEMM, reduce-scattered (SP) or all-reduced (no SP) by stock; the fused op
 * gives the sequence shard directly. */
static tp_rc add_scatter_side(builder *b, const char *name, const char *gemm_name,
                              const char *reduce_name, const char *partial, const char *in,
                              int64_t in_features, const char *out) {
  const unsigned feat = TP_PLACE_BIT(TP_PLACE_FEATURE_SHARDED);
  const int64_t dim = b->d->dim;
  if (b->fused)
    return add(b, name, in_of(in, feat, in_features), NULL, out, TP_PLACE_SEQ_SHARDED, dim);
  TP_TRY(add(b, gemm_name, in_of(in, feat, in_features), NULL, partial, TP_PLACE_PARTIAL, dim));
  return add(b, reduce_name, in_of(partial, TP_PLACE_BIT(TP_PLACE_PARTIAL), dim), NULL, out,
             b->sp ? TP_PLACE_SEQ_SHARDED : TP_PLACE_REPLICATED, dim);
}

/* Feature-sharded in, feature-sharded out: RoPE, attention over the local
 * heads (which needs every row: the whole sequence), SwiGLU. */
static tp_rc add_local_heads(builder *b, const char *name, const char *in, int64_t in_features,
                             const char *out, int64_t out_features) {
  return add(b, name, in_of(in, TP_PLACE_BIT(TP_PLACE_FEATURE_SHARDED), in_features), NULL, out,
             TP_PLACE_FEATURE_SHARDED, out_features);
}

static tp_rc add_attention(builder *b, const char *x, const char *y) {
  const tp_layer_dims *d = b->d;
  TP_TRY(add_rowwise(b, "attention.rmsnorm", x, "attention.h"));
  TP_TRY(add_gather_side(b, "attention.qkv (fused all-gather + GEMM)", "attention.qkv.all_gather",
                         "attention.qkv.gemm", "attention.h.gathered", "attention.h", d->dim,
                         "attention.qkv", d->qkv_width));
  TP_TRY(add_local_heads(b, "attention.rope", "attention.qkv", d->qkv_width, "attention.qkv",
                         d->qkv_width));
  TP_TRY(add_local_heads(b, "attention.core", "attention.qkv", d->qkv_width, "attention.o",
                         d->q_width));
  return add_scatter_side(b, "attention.wo (fused GEMM + reduce-scatter)", "attention.wo.gemm",
                          b->sp ? "attention.wo.reduce_scatter" : "attention.wo.all_reduce",
                          "attention.wo.partial", "attention.o", d->q_width, y);
}

static tp_rc add_ffn(builder *b, const char *x, const char *y) {
  const tp_layer_dims *d = b->d;
  TP_TRY(add_rowwise(b, "ffn.rmsnorm", x, "ffn.h"));
  TP_TRY(add_gather_side(b, "ffn.w13 (fused all-gather + 2 GEMMs)", "ffn.w13.all_gather",
                         "ffn.w13.gemm", "ffn.h.gathered", "ffn.h", d->dim, "ffn.w13",
                         2 * d->ffn_hidden));
  TP_TRY(add_local_heads(b, "ffn.swiglu", "ffn.w13", 2 * d->ffn_hidden, "ffn.m", d->ffn_hidden));
  return add_scatter_side(b, "ffn.w2 (fused GEMM + reduce-scatter)", "ffn.w2.gemm",
                          b->sp ? "ffn.w2.reduce_scatter" : "ffn.w2.all_reduce", "ffn.w2.partial",
                          "ffn.m", d->ffn_hidden, y);
}

static tp_rc add_residual(builder *b, const char *name, const char *x, const char *branch,
                          const char *out) {
  const tp_place_in second = in_of(branch, TP_PLACE_ROWS, b->d->dim);
  return add(b, name, in_of(x, TP_PLACE_ROWS, b->d->dim), &second, out, TP_PLACE_AS_INPUT,
             b->d->dim);
}

tp_rc tp_composition_layer(const char *layer, int fused, int sp, const tp_layer_dims *dims,
                           tp_composition *out) {
  memset(out, 0, sizeof *out);
  builder b = {out, fused, sp, dims};
  const tp_placement x_place = sp ? TP_PLACE_SEQ_SHARDED : TP_PLACE_REPLICATED;
  out->inputs[0] = (tp_place_out){"x", x_place, dims->dim};
  out->n_inputs = 1;
  const char *y = NULL;
  if (strcmp(layer, "attention") == 0) {
    out->name = "attention";
    y = "attention.y";
    TP_TRY(add_attention(&b, "x", y));
  } else if (strcmp(layer, "ffn") == 0) {
    out->name = "ffn";
    y = "ffn.y";
    TP_TRY(add_ffn(&b, "x", y));
  } else if (strcmp(layer, "block") == 0) {
    out->name = "block";
    y = "out";
    TP_TRY(add_attention(&b, "x", "attention.y"));
    TP_TRY(add_residual(&b, "block.residual1", "x", "attention.y", "x1"));
    TP_TRY(add_ffn(&b, "x1", "ffn.y"));
    TP_TRY(add_residual(&b, "block.residual2", "x1", "ffn.y", y));
  } else {
    return TP_FAIL(TP_EUSAGE, "unknown layer '%s' (valid: attention, ffn, block)", layer);
  }
  /* Blocks stack: the output must be placed as the input was. */
  out->output = in_of(y, TP_PLACE_BIT(x_place), dims->dim);
  return TP_OK;
}

/* ---- two mesh dimensions ------------------------------------------------------------------ */

int tp_mesh_rank(const tp_mesh *m, int dp_index, int tp_index) {
  return dp_index * m->tp + tp_index;
}

void tp_mesh_coords(const tp_mesh *m, int rank, int *dp_index, int *tp_index) {
  *dp_index = rank / m->tp;
  *tp_index = rank % m->tp;
}

const char *tp_mesh_place_name(tp_mesh_place p, char *buf, size_t cap) {
  if (p.kind == TP_MESH_SHARD) snprintf(buf, cap, "shard(%d)", p.dim);
  else snprintf(buf, cap, "%s", p.kind == TP_MESH_PARTIAL ? "partial" : "replicate");
  return buf;
}

static const char *mesh_dim_name(int d) { return d == TP_MESH_DP ? "dp" : "tp"; }

static int mesh_size(const tp_mesh *m, int d) { return d == TP_MESH_DP ? m->dp : m->tp; }

tp_rc tp_mesh_local_shape(const tp_mesh *m, const tp_mesh_tensor *t,
                          int64_t local[TP_MESH_MAX_RANK]) {
  if (m->dp < 1 || m->tp < 1) return TP_FAIL(TP_EINTERNAL, "mesh %d x %d", m->dp, m->tp);
  if (!t->name || t->rank < 1 || t->rank > TP_MESH_MAX_RANK)
    return TP_FAIL(TP_EINTERNAL, "a mesh tensor without a name or with %d dims", t->rank);
  for (int i = 0; i < TP_MESH_MAX_RANK; ++i) local[i] = i < t->rank ? t->shape[i] : 1;
  /* tp splits first, dp the TP shard: tp is the inner mesh dimension. */
  static const int order[TP_MESH_NDIMS] = {TP_MESH_TP, TP_MESH_DP};
  for (int o = 0; o < TP_MESH_NDIMS; ++o) {
    const int d = order[o], size = mesh_size(m, d);
    const tp_mesh_place p = t->on[d];
    if (p.kind == TP_MESH_PARTIAL && t->is_param)
      return TP_FAIL(TP_EREJECT, "%s: a parameter cannot be partial over %s", t->name,
                     mesh_dim_name(d));
    if (p.kind != TP_MESH_SHARD) continue;
    if (p.dim < 0 || p.dim >= t->rank)
      return TP_FAIL(TP_EREJECT, "%s: %s shards dim %d of a %d-dim tensor", t->name,
                     mesh_dim_name(d), p.dim, t->rank);
    if (local[p.dim] % size != 0)
      return TP_FAIL(TP_EREJECT, "%s: %s=%d shards dim %d of %lld%s, which does not divide",
                     t->name, mesh_dim_name(d), size, p.dim, (long long)local[p.dim],
                     local[p.dim] != t->shape[p.dim] ? " (its TP shard)" : "");
    local[p.dim] /= size;
  }
  return TP_OK;
}

tp_rc tp_mesh_check(const tp_mesh *m, const tp_mesh_tensor *t, int n) {
  int64_t local[TP_MESH_MAX_RANK];
  for (int i = 0; i < n; ++i) TP_TRY(tp_mesh_local_shape(m, &t[i], local));
  return TP_OK;
}

typedef struct mesh_builder {
  tp_mesh_tensor *out;
  int n;
} mesh_builder;

static const tp_mesh_place REPLICATE = {TP_MESH_REPLICATE, 0};
static const tp_mesh_place PARTIAL = {TP_MESH_PARTIAL, 0};

static tp_mesh_place shard(int dim) { return (tp_mesh_place){TP_MESH_SHARD, dim}; }

static void add_tensor(mesh_builder *b, const char *name, int rank, int64_t d0, int64_t d1,
                       tp_mesh_place on_dp, tp_mesh_place on_tp, int is_param) {
  b->out[b->n++] = (tp_mesh_tensor){name, rank, {d0, d1, 1}, {on_dp, on_tp}, is_param};
}

/* A parameter (FSDP: dp shard(0)) and its gradient before the reduce-scatter
 * (dp partial). tp_dim < 0: replicated over tp; its gradient is then partial
 * over tp with sequence parallelism (each rank saw its share of the
 * sequence), replicated without. */
static void add_param(mesh_builder *b, const char *name, const char *grad, int rank, int64_t d0,
                      int64_t d1, int tp_dim, int sp) {
  const tp_mesh_place on_tp = tp_dim < 0 ? REPLICATE : shard(tp_dim);
  const tp_mesh_place grad_tp = tp_dim < 0 && sp ? PARTIAL : on_tp;
  add_tensor(b, name, rank, d0, d1, shard(0), on_tp, 1);
  add_tensor(b, grad, rank, d0, d1, PARTIAL, grad_tp, 0);
}

static void add_attention_params(mesh_builder *b, const tp_layer_dims *d, int sp) {
  add_param(b, "attention.norm.weight", "attention.norm.weight.grad", 1, d->dim, 1, -1, sp);
  add_param(b, "attention.qkv.weight", "attention.qkv.weight.grad", 2, d->qkv_width, d->dim, 0, sp);
  add_param(b, "attention.wo.weight", "attention.wo.weight.grad", 2, d->dim, d->q_width, 1, sp);
}

static void add_ffn_params(mesh_builder *b, const tp_layer_dims *d, int sp) {
  add_param(b, "ffn.norm.weight", "ffn.norm.weight.grad", 1, d->dim, 1, -1, sp);
  add_param(b, "ffn.w1.weight", "ffn.w1.weight.grad", 2, d->ffn_hidden, d->dim, 0, sp);
  add_param(b, "ffn.w3.weight", "ffn.w3.weight.grad", 2, d->ffn_hidden, d->dim, 0, sp);
  add_param(b, "ffn.w2.weight", "ffn.w2.weight.grad", 2, d->dim, d->ffn_hidden, 1, sp);
}

tp_rc tp_mesh_layer_tensors(const char *layer, int sp, const tp_layer_dims *dims, int64_t batch,
                            int64_t seqlen, tp_mesh_tensor *out, int *n) {
  const int attention = strcmp(layer, "attention") == 0 || strcmp(layer, "block") == 0;
  const int ffn = strcmp(layer, "ffn") == 0 || strcmp(layer, "block") == 0;
  *n = 0;
  if (!attention && !ffn)
    return TP_FAIL(TP_EUSAGE, "unknown layer '%s' (valid: attention, ffn, block)", layer);
  mesh_builder b = {out, 0};
  b.out[b.n++] = (tp_mesh_tensor){
      "x", 3, {batch, seqlen, dims->dim}, {shard(0), sp ? shard(1) : REPLICATE}, 0};
  if (attention) add_attention_params(&b, dims, sp);
  if (ffn) add_ffn_params(&b, dims, sp);
  *n = b.n;
  return TP_OK;
}
