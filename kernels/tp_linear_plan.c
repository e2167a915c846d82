/*
 * tp_linear_plan.c — planning of the TP projections (tp_linear.h): checks
 * a descriptor's shape, derives the GEMM shape, bytes and FLOP of one step,
 * chooses the fused schedule and its chunk counts (or the stock path, with
 * the reason), sizes the workspace, names the NVTX ranges, prepares the
 * buffers a plan needs and counts the transfers a trace must show — the
 * identity recipe's (tp_recipe.h) — and makes any recipe's plan, twin and
 * release.
 */
#include <stdio.h>
#include <string.h>

#include "common/tp_chunk_rule.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_linear_internal.h"
#include "kernels/tp_recipe.h"
#include "kernels/tp_window.h"

_Static_assert((int)LINEAR_PHASE_CHUNKS == (int)TP_DIST_MAX_CHUNKS,
               "the matrices reject chunks past TP_DIST_MAX_CHUNKS: the phase's chunks");

enum {
  /* 16 blocks of 1024 threads push 282-342 GB/s over NVLink (the link
   * probe in docs/dev/PERF.md), close to the copy engine with few SMs taken */
  SM_COPY_BLOCKS = 16
};

size_t tp_linear_x_elems(const tp_linear_plan *p) {
  if (tp_op_gathers(p->desc.op))
    return (size_t)((!p->desc.sp ? p->desc.tokens : p->shard_rows) * p->desc.in_features);
  return (size_t)(p->desc.tokens * (p->desc.in_features / p->world));
}

size_t tp_linear_b_elems(const tp_linear_plan *p) { return (size_t)p->gemm_n; }

size_t tp_linear_w_elems(const tp_linear_plan *p) { return (size_t)(p->gemm_n * p->gemm_k); }

size_t tp_linear_y_elems(const tp_linear_plan *p) {
  if (tp_op_gathers(p->desc.op)) return (size_t)(p->desc.tokens * p->gemm_n);
  return (size_t)((!p->desc.sp ? p->desc.tokens : p->shard_rows) * p->desc.out_features);
}

/* ---- the chunk-count model (common/tp_chunk_rule.h) ---------------------------------- */

/* auto's chunk count for the side `gather` (the backward runs the other
 * side's pipeline), with why in why[why_cap]. */
static int auto_chunks(const tp_linear_desc *d, int gather, int world, int64_t rows,
                       size_t row_bytes, char *why, size_t why_cap) {
  const tp_chunk_choice c = tp_auto_chunks(gather, world, rows, row_bytes, d->out_features,
                                           d->in_features, d->n_weights, d->dtype);
  if (gather)
    snprintf(
        why, why_cap,
        "%d chunk(s): model says the shard's pushes take %.0f us against %.0f us of local-shard "
        "GEMM (%s)",
        c.chunks, c.push_us, c.local_gemm_us,
        c.chunks == 1 ? "hidden whole" : "chunked so peer rows start early");
  else
    snprintf(why, why_cap,
             "%d chunk(s) of %lld rows: the second partial GEMM hides the first chunk's transfer "
             "(%.0f us); the last one (%.0f us) stays exposed",
             c.chunks, (long long)(rows / c.chunks), c.push_us / c.chunks, c.push_us / c.chunks);
  return c.chunks;
}

/* ---- shape, bytes, FLOP --------------------------------------------------------------- */

static tp_rc reject(tp_linear_plan *p, const char *fmt, const char *detail) {
  snprintf(p->reason, sizeof p->reason, fmt, detail);
  return TP_FAIL(TP_EREJECT, "%s", p->reason);
}

static tp_rc check_shape(const tp_linear_desc *d, int world, tp_linear_plan *p) {
  char num[64];
  if (d->n_weights < 1 || d->n_weights > TP_MAX_WEIGHTS ||
      (d->op != TP_OP_AG_LINEAR_MULTI && d->n_weights != 1)) {
    snprintf(num, sizeof num, "%d", d->n_weights);
    return reject(p, "unsupported number of weights: %s", num);
  }
  if (d->tokens % world != 0) {
    snprintf(num, sizeof num, "%lld tokens, TP %d", (long long)d->tokens, world);
    return reject(p, "tokens not divisible by the TP degree (%s)", num);
  }
  int64_t sharded = tp_op_gathers(d->op) ? d->out_features : d->in_features;
  if (sharded % world != 0) {
    snprintf(num, sizeof num, "%lld features, TP %d", (long long)sharded, world);
    return reject(p, "sharded weight dimension not divisible by the TP degree (%s)", num);
  }
  return TP_OK;
}

static void fill_shape(const tp_linear_desc *d, int world, tp_linear_plan *p) {
  p->shard_rows = d->tokens / world;
  size_t e = tp_dtype_bytes(d->dtype);
  if (tp_op_gathers(d->op)) {
    p->gemm_m = d->tokens;
    p->gemm_n = d->out_features / world;
    p->gemm_k = d->in_features;
    p->comm_bytes = (size_t)(p->shard_rows * d->in_features) * e * (size_t)(world - 1);
  } else {
    p->gemm_m = d->tokens;
    p->gemm_n = d->out_features;
    p->gemm_k = d->in_features / world;
    p->comm_bytes = (size_t)(p->shard_rows * d->out_features) * e * (size_t)(world - 1);
  }
  /* The backward runs two GEMMs of the forward's size (dx and dw) and moves
   * as much again: one reduce-scatter and, unless saved, one all-gather. */
  p->flops = 2.0 * (double)d->tokens * (double)d->out_features * (double)d->in_features *
             (double)d->n_weights * (d->backward ? 3.0 : 1.0);
  if (d->backward) {
    size_t fwd = p->comm_bytes;
    size_t other =
        (size_t)(p->shard_rows * (tp_op_gathers(d->op) ? d->in_features : d->out_features)) * e *
        (size_t)(world - 1);
    p->comm_bytes = fwd + other + (tp_op_gathers(d->op) && !d->save_gathered ? fwd : 0);
  }
}

/* Symmetric bytes the fused schedules need: a max over the passes. */
static size_t dist_workspace(const tp_linear_desc *d, int world, int64_t S) {
  const size_t e = tp_dtype_bytes(d->dtype);
  const size_t T = (size_t)d->tokens, K = (size_t)d->in_features, N = (size_t)d->out_features;
  const size_t rs_slots = (size_t)world * (size_t)S, rs_staging = (size_t)(world - 1) * (size_t)S;
  size_t fwd, bwd = 0;
  if (tp_op_gathers(d->op)) {
    fwd = T * K * e;
    if (d->backward) bwd = (rs_slots + rs_staging) * K * e + (d->save_gathered ? 0 : T * K * e);
  } else {
    fwd = (rs_slots + rs_staging) * N * e;
    /* the bias gradient's per-rank column sums, fp32, after the gathered dy */
    if (d->backward) bwd = T * N * e + (d->bias ? N * sizeof(float) : 0);
  }
  return fwd > bwd ? fwd : bwd;
}

/* Private bytes of the stock path (gathered input, full partials), max over passes. */
static size_t stock_scratch(const tp_linear_desc *d) {
  const size_t e = tp_dtype_bytes(d->dtype);
  const size_t T = (size_t)d->tokens, K = (size_t)d->in_features, N = (size_t)d->out_features;
  return (d->backward ? 2 : 1) * (tp_op_gathers(d->op) ? T * K : T * N) * e;
}

/* ---- the fused schedule --------------------------------------------------------------- */

/* What rules dist_gemm out here: the window variant, SP off, then the rule the matrices ask
 * too (common/tp_chunk_rule.h: TP 1, multimem, the ring beyond TP 2, the chunk count). */
static tp_rc dist_check(const tp_group *g, tp_schedule requested, int chunks, tp_linear_plan *p) {
  if (requested == TP_SCHED_NCCL_WINDOW)
    return reject(p, "nccl-window: %s",
                  "the stock path's variant on NCCL symmetric windows, not a dist_gemm schedule");
  if (!p->desc.sp && g->world > 1)
    return reject(p, "dist_gemm needs sequence parallelism: %s",
                  "with SP off the input is replicated and there is nothing to gather");
  char why[sizeof p->reason];
  if (tp_dist_rejection(requested, g->world, p->shard_rows, chunks, why, sizeof why))
    return reject(p, "%s", why);
  return TP_OK;
}

/* Sets the forward's and the backward's chunk counts (chunks = 0: the
 * model's), with why in why[cap]. row_bytes: a row of what moves — the
 * gathered input (K wide) or the partials (N wide) forward; the backward
 * moves the other one through the other side's pipeline, which is as wide
 * (dx is K wide on the gather side, dy N wide on the other). */
static tp_rc dist_chunks(const tp_group *g, tp_schedule requested, int chunks, size_t row_bytes,
                         tp_linear_plan *p, char *why, size_t cap) {
  const tp_linear_desc *d = &p->desc;
  const int gather = tp_op_gathers(d->op);
  char bwd_why[200] = "";
  int bwd_chunks = chunks;
  if (chunks == 0) {
    chunks = auto_chunks(d, gather, g->world, p->shard_rows, row_bytes, why, cap);
    bwd_chunks = d->backward ? auto_chunks(d, !gather, g->world, p->shard_rows, row_bytes, bwd_why,
                                           sizeof bwd_why)
                             : 1;
  } else { /* in 1..LINEAR_PHASE_CHUNKS, dividing the rows: dist_check asked */
    snprintf(why, cap, "%d chunk(s) as requested", chunks);
    snprintf(bwd_why, sizeof bwd_why, "%d chunk(s) as requested", chunks);
  }
  const size_t chunk_bytes = (size_t)(p->shard_rows / chunks) * row_bytes;
  const size_t bwd_chunk_bytes = (size_t)(p->shard_rows / bwd_chunks) * row_bytes;
  /* the rule of tp_sm_unaligned_chunk (common/tp_chunk_rule.h), which the matrices ask */
  if (requested == TP_SCHED_SM &&
      (chunk_bytes % TP_SM_CHUNK_ALIGN != 0 || bwd_chunk_bytes % TP_SM_CHUNK_ALIGN != 0)) {
    char num[64];
    snprintf(num, sizeof num, "%zu bytes",
             chunk_bytes % TP_SM_CHUNK_ALIGN ? chunk_bytes : bwd_chunk_bytes);
    return reject(p, "sm: chunk size not a multiple of 16 bytes (%s)", num);
  }
  if (d->backward) {
    size_t used = strlen(why);
    snprintf(why + used, cap - used, "; backward %s", bwd_why);
  }
  p->chunks = chunks;
  p->bwd_chunks = bwd_chunks;
  return TP_OK;
}

/* Auto on a small transfer: the stock path, with the reason. */
static void dist_falls_back_to_stock(tp_linear_plan *p, size_t transfer_bytes) {
  p->schedule = TP_SCHED_NCCL;
  p->chunks = p->bwd_chunks = 1;
  snprintf(p->reason, sizeof p->reason,
           "auto: the stock path (NCCL collective, then the GEMM) — %.2f MiB per rank and "
           "transfer is below the %d MiB where fusing paid off on the H200 pair; fixed costs "
           "(barrier, flags, copy dispatch) would outweigh the overlap",
           (double)transfer_bytes / 1048576.0, TP_AUTO_FUSE_MIN_BYTES >> 20);
  p->workspace_bytes = stock_scratch(&p->desc);
}

/* The schedule that runs and its reason, chunk_why appended. */
static void dist_name_schedule(tp_linear_plan *p, tp_schedule requested, const char *chunk_why) {
  if (requested == TP_SCHED_AUTO) {
    p->schedule = TP_SCHED_CE;
    snprintf(p->reason, sizeof p->reason,
             "auto: ce — the copy engine moves chunks without taking SMs from the GEMM (ce against "
             "sm on the H200 pair: docs/dev/PERF.md); %s",
             chunk_why);
  } else if (requested == TP_SCHED_RING) {
    p->schedule = TP_SCHED_RING;
    snprintf(p->reason, sizeof p->reason,
             "ring as requested: at TP 2 the ring's one neighbour is the one peer, so its "
             "copy-engine pushes are the ce pipeline's; %s",
             chunk_why);
  } else {
    p->schedule = requested;
    snprintf(p->reason, sizeof p->reason, "%s as requested; %s", tp_schedule_name(requested),
             chunk_why);
  }
}

/* The transport of the fused schedules' symmetric memory, appended to the reason. */
static void dist_name_transport(tp_linear_plan *p) {
  const size_t used = strlen(p->reason);
  snprintf(p->reason + used, sizeof p->reason - used, "; symm=%s: %s",
           tp_symm_transport_name(p->desc.symm),
           p->desc.symm == TP_SYMM_NCCL
               ? "workspace and flags in NCCL symmetric windows (ncclMemAlloc, "
                 "ncclCommWindowRegister NCCL_WIN_COLL_SYMMETRIC), peers through NCCL's LSA "
                 "pointers"
               : "workspace and flags in tpbench's CUDA-IPC heap");
}

static tp_rc resolve_dist(const tp_group *g, tp_schedule requested, int chunks, tp_linear_plan *p) {
  const tp_linear_desc *d = &p->desc;
  TP_TRY(dist_check(g, requested, chunks, p));
  const size_t row_bytes =
      (size_t)(tp_op_gathers(d->op) ? d->in_features : d->out_features) * tp_dtype_bytes(d->dtype);
  char chunk_why[420] = "";
  TP_TRY(dist_chunks(g, requested, chunks, row_bytes, p, chunk_why, sizeof chunk_why));
  p->sm_blocks = SM_COPY_BLOCKS;
  const size_t transfer_bytes = (size_t)p->shard_rows * row_bytes;
  if (requested == TP_SCHED_AUTO && chunks == 0 && !tp_auto_fuses(p->shard_rows, row_bytes)) {
    dist_falls_back_to_stock(p, transfer_bytes);
    return TP_OK;
  }
  dist_name_schedule(p, requested, chunk_why);
  dist_name_transport(p);
  p->workspace_bytes = dist_workspace(d, g->world, p->shard_rows);
  return TP_OK;
}

/* ---- the plan ------------------------------------------------------------------------- */

void linear_name_ranges(tp_linear_plan *p) {
  char what[64];
  snprintf(what, sizeof what, "%s %s x%d", tp_backend_name(p->backend),
           tp_schedule_name(p->schedule), p->chunks);
  snprintf(p->nvtx_fwd, sizeof p->nvtx_fwd, "%s.fwd %s", tp_op_name(p->desc.op), what);
  snprintf(p->nvtx_bwd, sizeof p->nvtx_bwd, "%s.bwd %s", tp_op_name(p->desc.op), what);
}

/* Without sequence parallelism one all-reduce replaces the collective: a
 * ring all-reduce sends 2 (W-1)/W of the buffer per rank. */
static size_t all_reduce_bytes(const tp_linear_desc *desc, int world) {
  size_t buf =
      (size_t)(desc->tokens * (tp_op_gathers(desc->op) ? desc->in_features : desc->out_features)) *
      tp_dtype_bytes(desc->dtype);
  int has = tp_op_gathers(desc->op) ? desc->backward : 1;
  return has ? 2 * buf * (size_t)(world - 1) / (size_t)world : 0;
}

/* The stock path and its halves: NCCL on plain buffers, or (requested
 * NCCL_WINDOW) on NCCL symmetric windows. */
static tp_rc resolve_stock(tp_schedule requested, tp_linear_plan *p) {
  const tp_backend backend = p->backend;
  const int window = requested == TP_SCHED_NCCL_WINDOW;
  if (window && backend == TP_BACKEND_GEMM_ONLY)
    return reject(p, "nccl-window: %s", "the GEMM alone runs no collective to put on windows");
  if (window && p->desc.bias)
    return reject(p, "nccl-window: %s",
                  "biases are not built on windows (the row-parallel bias gradient's all-reduce "
                  "sums a private fp32 buffer)");
  p->schedule = window ? TP_SCHED_NCCL_WINDOW : TP_SCHED_NCCL;
  p->chunks = 1;
  p->bwd_chunks = 1;
  const char *what = "NCCL collective, then cuBLASLt GEMM, one stream";
  if (backend == TP_BACKEND_GEMM_ONLY) what = "cuBLASLt GEMM alone";
  else if (backend == TP_BACKEND_COMM_ONLY) what = "NCCL collective alone";
  snprintf(p->reason, sizeof p->reason, "%s%s", what,
           window ? "; the collectives' buffers in NCCL symmetric windows (ncclMemAlloc, "
                    "ncclCommWindowRegister NCCL_WIN_COLL_SYMMETRIC)"
                  : "");
  p->workspace_bytes = stock_scratch(&p->desc);
  return TP_OK;
}

/* The identity recipe's plan: its element type, shape, options and backend. */
static tp_rc plan_resolve(const tp_group *g, tp_schedule requested, int chunks,
                          tp_linear_plan *out) {
  const tp_linear_desc *desc = &out->desc;
  const tp_backend backend = out->backend;
  if (desc->dtype != TP_BF16 && desc->dtype != TP_FP32)
    return TP_FAIL(TP_EINTERNAL, "the identity recipe takes bf16 or fp32 elements, not %s",
                   tp_dtype_name(desc->dtype));
  TP_TRY(check_shape(desc, g->world, out));
  fill_shape(desc, g->world, out);
  if (!desc->sp) out->comm_bytes = all_reduce_bytes(desc, g->world);
  if (desc->save_gathered) {
    if (!tp_op_gathers(desc->op) || !desc->backward || !desc->sp)
      return reject(out, "save_gathered: %s",
                    "only the all-gather side's backward reuses a gathered input");
    out->saved_bytes = (size_t)(desc->tokens * desc->in_features) * tp_dtype_bytes(desc->dtype);
  }
  if (desc->symm != TP_SYMM_IPC && backend != TP_BACKEND_DIST)
    return reject(out, "symm=nccl: %s",
                  "the transport of dist_gemm's symmetric memory; the other backends use none");
  if (desc->rs_sum != TP_RS_SUM_EPILOGUE && backend != TP_BACKEND_DIST)
    return reject(out, "rs_sum %s: stock sums in NCCL itself (the mode is dist_gemm's)",
                  tp_rs_sum_name(desc->rs_sum));
  switch (backend) {
  case TP_BACKEND_DIST: return resolve_dist(g, requested, chunks, out);
  case TP_BACKEND_STOCK:
  case TP_BACKEND_GEMM_ONLY:
  case TP_BACKEND_COMM_ONLY: return resolve_stock(requested, out);
  }
  return TP_FAIL(TP_EINTERNAL, "unknown backend %d", (int)backend);
}

const char *linear_engine(const tp_linear_plan *p) {
  if (p->backend == TP_BACKEND_GEMM_ONLY) return "cublaslt";
  switch (p->schedule) {
  case TP_SCHED_CE:
  case TP_SCHED_RING: return "copy-engine"; /* at TP 2 the ring's pushes are copy-engine ones */
  case TP_SCHED_SM: return "sm-kernel";
  case TP_SCHED_NCCL:
  case TP_SCHED_NCCL_WINDOW: return "nccl";
  default: return "none";
  }
}

tp_rc linear_identity_plan(const tp_group *g, tp_linear_plan *p, tp_schedule requested,
                           int chunks) {
  TP_TRY(plan_resolve(g, requested, chunks, p));
  linear_name_ranges(p);
  p->engine = linear_engine(p);
  return TP_OK;
}

tp_rc tp_linear_plan_make(const tp_group *g, const tp_linear_desc *desc, tp_backend backend,
                          tp_schedule requested, int chunks, tp_linear_plan *out) {
  memset(out, 0, sizeof *out);
  out->desc = *desc;
  out->backend = backend;
  out->world = g->world;
  out->rank = g->rank;
  out->recipe = tp_recipe_of(desc->dtype);
  const tp_rc rc = out->recipe->plan(g, out, requested, chunks);
  /* a failed plan keeps its reason; what its recipe made is freed */
  if (rc != TP_OK && out->recipe->release) out->recipe->release(out);
  return rc;
}

tp_rc tp_linear_twin(const tp_group *g, const tp_linear_plan *p, tp_backend backend,
                     tp_schedule requested, tp_linear_plan *out) {
  return p->recipe->twin(g, p, backend, requested, out);
}

tp_rc linear_identity_twin(const tp_group *g, const tp_linear_plan *p, tp_backend backend,
                           tp_schedule requested, tp_linear_plan *out) {
  return tp_linear_plan_make(g, &p->desc, backend, requested, 0, out);
}

void tp_linear_release(tp_linear_plan *p) {
  if (!p->recipe) return; /* zeroed, or never planned */
  if (!p->twin && p->recipe->release) p->recipe->release(p);
  const tp_linear_desc desc = p->desc;
  memset(p, 0, sizeof *p);
  p->desc = desc;
}

/* ---- buffers and transfers of a plan ---------------------------------------------------- */

size_t linear_bias_partial_floats(const tp_linear_plan *p) {
  if (!p->desc.bias || !p->desc.backward) return 0;
  /* the row partials, then one summed row */
  return tp_bias_partial_floats(linear_bias_rows(p), (size_t)p->gemm_n) + (size_t)p->gemm_n;
}

tp_rc linear_identity_prepare(tp_group *g, const tp_linear_plan *p) {
  float *unused = NULL;
  if (linear_bias_partial_floats(p))
    TP_TRY(tp_group_bias_scratch(g, linear_bias_partial_floats(p) * sizeof(float), &unused));
  /* the cuBLASLt workspace the group's GEMMs are given: a share every op that runs GEMMs holds */
  if (p->backend != TP_BACKEND_COMM_ONLY)
    TP_TRY(tp_device_claim(TP_SHARED_GEMM, tp_gemm_workspace_bytes(g->gemm)));
  if (linear_is_fused(p)) {
    /* symm=nccl: the NCCL heap is made on first use (collective), or NCCL's refusal */
    tp_symm *heap = NULL;
    TP_TRY(tp_group_symm(g, p->desc.symm, &heap));
    return tp_symm_reserve(heap, p->workspace_bytes);
  }
  void *scratch = NULL;
  /* a window plan asks NCCL first: a communicator without symmetric memory
   * rejects the configuration here, with NCCL's reason (collective) */
  if (linear_is_window(p)) TP_TRY(tp_window_scratch(g, p->workspace_bytes, &scratch));
  else TP_TRY(tp_group_scratch(g, p->workspace_bytes, &scratch));
  /* The halves timed alone read the scratch: give them real numbers, not zeros. */
  TP_CUDA(tp_launch_fill_random(p->desc.dtype, scratch,
                                p->workspace_bytes / tp_dtype_bytes(p->desc.dtype),
                                0x5eed0000ull + (uint64_t)g->rank, 1.0f, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

int linear_identity_transfers(const tp_linear_plan *p, int fwd, int bwd) {
  const int gather = tp_op_gathers(p->desc.op);
  bwd = bwd && p->desc.backward;
  if (p->backend == TP_BACKEND_GEMM_ONLY) return 0;
  if (!p->desc.sp) /* one all-reduce: the scatter side's forward, the gather side's backward */
    return gather ? (bwd ? 1 : 0) : (fwd ? 1 : 0);
  if (!linear_is_fused(p)) {
    int calls = fwd ? 1 : 0;
    if (bwd) calls += gather ? (p->desc.save_gathered ? 1 : 2) : 1 + (p->desc.bias ? 1 : 0);
    return calls;
  }
  const int peers = p->world - 1;
  int pushes = fwd ? p->chunks * peers : 0;
  /* the gather side's backward: dx reduce-scatter, plus x gathered whole unless saved */
  if (bwd) pushes += p->bwd_chunks * peers + (gather && !p->desc.save_gathered ? peers : 0);
  return pushes;
}

const char *linear_y_name(int weight) {
  static const char *const names[TP_MAX_WEIGHTS] = {"y", "y1", "y2", "y3"};
  return names[weight];
}

const char *linear_dw_name(int weight) {
  static const char *const names[TP_MAX_WEIGHTS] = {"dw", "dw1", "dw2", "dw3"};
  return names[weight];
}

/* y (and dw) per weight, then dx: y summed on the scatter side (its
 * reduce-scatter, or the all-reduce without SP), dx on the gather side and,
 * without SP, on the scatter side too (replicated dy). */
int linear_identity_outputs(const tp_linear_plan *p, const tp_linear_tensors *t,
                            tp_linear_output *out, int max) {
  const int gather = tp_op_gathers(p->desc.op), sp = p->desc.sp, bwd = p->desc.backward;
  int n = 0;
  for (int i = 0; i < p->desc.n_weights && n + 2 <= max; ++i) {
    out[n++] =
        (tp_linear_output){linear_y_name(i), t->y[i], tp_linear_y_elems(p), !gather, p->gemm_k};
    if (bwd)
      out[n++] =
          (tp_linear_output){linear_dw_name(i), t->dw[i], tp_linear_w_elems(p), 0, p->gemm_m};
  }
  if (bwd && n < max)
    out[n++] = (tp_linear_output){"dx", t->dx, tp_linear_x_elems(p), gather || !sp, p->gemm_n};
  return n;
}
