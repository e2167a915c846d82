/*
 * tp_linear.c — planning and forward execution of the TP projections,
 * stock and fused (see tp_linear.h for the math and the schedules).
 *
 * Symmetric workspace layout of the fused ops (each rank, offset 0):
 *   AG: gathered input G[T, K]; rank r's shard lands at rows r·S.
 *   RS: receive slots R[W][S, N] (slot r holds rank r's partial of this
 *       rank's rows), then staging P[W-1][S, N] for the partials this rank
 *       pushes out.
 *   AG backward: receive slots R[W][S, K] and staging P[W-1][S, K] of the
 *       dx reduce-scatter, then (unless the input was saved) G[T, K].
 *   RS backward: gathered gradient G[T, N].
 * Signal slots: a transfer has a phase (0 or 1; the AG backward runs two at
 * once) and a chunk; the flag of chunk j of phase f from rank r is
 * TP_SIG_FLAGS + r·64 + f·32 + j; its copy-kernel block counter
 * TP_SIG_COUNTERS + d·64 + f·32 + j (d: the peer pushed to).
 *
 * Bits: a GEMM over a block of rows gives the bits the whole GEMM gives for
 * those rows (tp_gemm.h), so every result that needs no cross-rank sum (the
 * gather-side outputs, dW from a gathered operand, the RS-side dx) is
 * bit-identical between stock and dist_gemm; only the reduce-scatter
 * outputs differ in the order ranks are summed.
 */
#include "kernels/tp_linear.h"

#include <stdio.h>
#include <string.h>

#include "collectors/tp_nvtx.h"
#include "kernels/tp_cuda_check.h"

enum {
  SM_COPY_BLOCKS = 16, /* GPU.md: 16 blocks of 1024 threads push ~336 GB/s */
  AUTO_CHUNK_MIN_ROWS = 512,
  AUTO_MAX_CHUNKS = 4,
  /* Below this many bytes per rank and transfer, auto takes the stock path:
   * on the H200 pair fused layers moving 0.5-1 MiB ran at 0.3-0.9x of stock
   * (fixed costs: barrier, flags, copy dispatch), ops moving 8 MiB and more
   * at 1.0-1.5x (docs/PERF.md). */
  AUTO_FUSE_MIN_BYTES = 4 << 20,
  MAX_PHASE_CHUNKS = TP_MAX_CHUNKS / 2
};

/* dist_gemm plans run fused, except where auto chose the stock path (its
 * schedule then says nccl, with the reason). */
static int is_fused(const tp_linear_plan *p) {
  return p->backend == TP_BACKEND_DIST && p->schedule != TP_SCHED_NCCL;
}

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

/* Rates of the chunk-count model, measured on the reference H200 pair
 * (../shared/GPU.md and tpbench ops): a copy-engine push moves about
 * 350 GB/s at these sizes; cuBLASLt runs bf16 GEMMs at about 650 TFLOP/s
 * and fp32 ones at about 50. */
static const double MODEL_PUSH_BYTES_PER_S = 350e9;

static double model_flop_rate(tp_dtype dt) { return dt == TP_BF16 ? 650e12 : 50e12; }

/* Largest of 4, 2, 1 that divides rows and leaves at least min_rows per chunk. */
static int most_chunks(int64_t rows, int64_t min_rows) {
  for (int c = AUTO_MAX_CHUNKS; c > 1; c /= 2)
    if (rows % c == 0 && rows / c >= min_rows) return c;
  return 1;
}

/* All-gather side: if the whole shard moves while the local shard's GEMM
 * runs, one chunk is best (chunk GEMMs only lose efficiency); otherwise
 * chunk so that the GEMM can start on the first peer chunk early.
 * Reduce-scatter side: see below. gather says which pipeline is being
 * chunked (the backward runs the other side's). */
static int auto_chunks(const tp_linear_desc *d, int gather, int world, int64_t rows,
                       size_t row_bytes, char *why, size_t why_cap) {
  const double push_s =
      (double)(world - 1) * (double)rows * (double)row_bytes / MODEL_PUSH_BYTES_PER_S;
  if (gather) {
    const double local_gemm_s = 2.0 * (double)rows * ((double)d->out_features / world) *
                                (double)d->in_features * (double)d->n_weights /
                                model_flop_rate(d->dtype);
    int c = push_s <= 0.75 * local_gemm_s ? 1 : most_chunks(rows, AUTO_CHUNK_MIN_ROWS);
    snprintf(
        why, why_cap,
        "%d chunk(s): model says the shard's pushes take %.0f us against %.0f us of local-shard "
        "GEMM (%s)",
        c, push_s * 1e6, local_gemm_s * 1e6,
        c == 1 ? "hidden whole" : "chunked so peer rows start early");
    return c;
  }
  /* Measured on the H200 pair (docs/PERF.md), forward, 12 row-parallel
   * shapes: two chunks beat one on 11 (the first transfer hides under the
   * second partial GEMM) and four on 10 (smaller chunk GEMMs lose more than
   * they hide). */
  int c = rows % 2 == 0 && rows / 2 >= AUTO_CHUNK_MIN_ROWS ? 2 : 1;
  snprintf(why, why_cap,
           "%d chunk(s) of %lld rows: the second partial GEMM hides the first chunk's transfer "
           "(%.0f us); the last one (%.0f us) stays exposed",
           c, (long long)(rows / c), push_s * 1e6 / c, push_s * 1e6 / c);
  return c;
}

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

static tp_rc resolve_dist(const tp_group *g, tp_schedule requested, int chunks, tp_linear_plan *p) {
  const tp_linear_desc *d = &p->desc;
  if (g->world < 2) return reject(p, "dist_gemm needs TP > 1: %s", "nothing to gather or scatter");
  if (!d->sp)
    return reject(p, "dist_gemm needs sequence parallelism: %s",
                  "with SP off the input is replicated and there is nothing to gather");
  if (requested == TP_SCHED_MULTIMEM) {
    if (!g->multicast_supported)
      return reject(p, "multimem: %s", "this device does not report NVLink multicast support");
    if (g->multicast_disabled)
      return reject(p, "multimem: %s",
                    "NVLink multicast is disabled in this environment (NCCL_NVLS_ENABLE=0 / "
                    "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 / NVSHMEM_DISABLE_NVLS=1)");
    return reject(p, "multimem: %s", "not implemented in this build");
  }
  if (requested == TP_SCHED_RING && g->world > 2)
    return reject(p, "ring: %s",
                  "beyond TP 2 the ring must forward received chunks to the next neighbour, "
                  "which is not built yet; ce and sm push to every peer directly");
  const size_t e = tp_dtype_bytes(d->dtype);
  const int gather = tp_op_gathers(d->op);
  /* the forward moves the gathered input (K wide) or the partials (N wide);
   * the backward the other one, through the other side's pipeline */
  const size_t fwd_row = (size_t)(gather ? d->in_features : d->out_features) * e;
  const size_t bwd_row = fwd_row; /* dx is K wide on the gather side, dy N wide on the other */
  char chunk_why[420] = "", bwd_why[200] = "";
  const int chunks_requested = chunks;
  int bwd_chunks = chunks;
  if (chunks == 0) {
    chunks = auto_chunks(d, gather, g->world, p->shard_rows, fwd_row, chunk_why, sizeof chunk_why);
    bwd_chunks = d->backward ? auto_chunks(d, !gather, g->world, p->shard_rows, bwd_row, bwd_why,
                                           sizeof bwd_why)
                             : 1;
  } else {
    char num[96];
    snprintf(num, sizeof num, "%d chunks, %lld rows per rank", chunks, (long long)p->shard_rows);
    if (chunks > MAX_PHASE_CHUNKS || chunks < 1) return reject(p, "chunks outside 1..32 (%s)", num);
    if (p->shard_rows % chunks != 0)
      return reject(p, "rows per rank not divisible by chunks (%s)", num);
    snprintf(chunk_why, sizeof chunk_why, "%d chunk(s) as requested", chunks);
    snprintf(bwd_why, sizeof bwd_why, "%d chunk(s) as requested", chunks);
  }
  const size_t chunk_bytes = (size_t)(p->shard_rows / chunks) * fwd_row;
  const size_t bwd_chunk_bytes = (size_t)(p->shard_rows / bwd_chunks) * bwd_row;
  if (requested == TP_SCHED_SM && (chunk_bytes % 16 != 0 || bwd_chunk_bytes % 16 != 0)) {
    char num[64];
    snprintf(num, sizeof num, "%zu bytes", chunk_bytes % 16 ? chunk_bytes : bwd_chunk_bytes);
    return reject(p, "sm: chunk size not a multiple of 16 bytes (%s)", num);
  }
  if (d->backward) {
    size_t used = strlen(chunk_why);
    snprintf(chunk_why + used, sizeof chunk_why - used, "; backward %s", bwd_why);
  }
  p->chunks = chunks;
  p->bwd_chunks = bwd_chunks;
  p->sm_blocks = SM_COPY_BLOCKS;
  const size_t transfer_bytes = (size_t)p->shard_rows * fwd_row;
  if (requested == TP_SCHED_AUTO && chunks_requested == 0 && transfer_bytes < AUTO_FUSE_MIN_BYTES) {
    p->schedule = TP_SCHED_NCCL;
    p->chunks = p->bwd_chunks = 1;
    snprintf(p->reason, sizeof p->reason,
             "auto: the stock path (NCCL collective, then the GEMM) — %.2f MiB per rank and "
             "transfer is below the %d MiB where fusing paid off on the H200 pair; fixed costs "
             "(barrier, flags, copy dispatch) would outweigh the overlap",
             (double)transfer_bytes / 1048576.0, AUTO_FUSE_MIN_BYTES >> 20);
    p->workspace_bytes = stock_scratch(d);
    return TP_OK;
  }
  if (requested == TP_SCHED_AUTO) {
    p->schedule = TP_SCHED_CE;
    snprintf(p->reason, sizeof p->reason,
             "auto: ce — the copy engine moves chunks without taking SMs from the GEMM (ce against "
             "sm on the H200 pair: docs/PERF.md); %s",
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
  p->workspace_bytes = dist_workspace(d, g->world, p->shard_rows);
  return TP_OK;
}

static tp_rc plan_resolve(const tp_group *g, const tp_linear_desc *desc, tp_backend backend,
                          tp_schedule requested, int chunks, tp_linear_plan *out);

/* Names the plan's NVTX ranges, so a timeline reads like the code. */
static void name_ranges(tp_linear_plan *p) {
  char what[64];
  snprintf(what, sizeof what, "%s %s x%d", tp_backend_name(p->backend),
           tp_schedule_name(p->schedule), p->chunks);
  snprintf(p->nvtx_fwd, sizeof p->nvtx_fwd, "%s.fwd %s", tp_op_name(p->desc.op), what);
  snprintf(p->nvtx_bwd, sizeof p->nvtx_bwd, "%s.bwd %s", tp_op_name(p->desc.op), what);
}

tp_rc tp_linear_plan_make(const tp_group *g, const tp_linear_desc *desc, tp_backend backend,
                          tp_schedule requested, int chunks, tp_linear_plan *out) {
  tp_rc rc = plan_resolve(g, desc, backend, requested, chunks, out);
  if (rc == TP_OK) name_ranges(out);
  return rc;
}

static tp_rc plan_resolve(const tp_group *g, const tp_linear_desc *desc, tp_backend backend,
                          tp_schedule requested, int chunks, tp_linear_plan *out) {
  memset(out, 0, sizeof *out);
  out->desc = *desc;
  out->backend = backend;
  out->world = g->world;
  out->rank = g->rank;
  TP_TRY(check_shape(desc, g->world, out));
  fill_shape(desc, g->world, out);
  if (!desc->sp) {
    /* a ring all-reduce sends 2 (W-1)/W of the buffer per rank */
    size_t buf = (size_t)(desc->tokens *
                          (tp_op_gathers(desc->op) ? desc->in_features : desc->out_features)) *
                 tp_dtype_bytes(desc->dtype);
    int has = tp_op_gathers(desc->op) ? desc->backward : 1;
    out->comm_bytes = has ? 2 * buf * (size_t)(g->world - 1) / (size_t)g->world : 0;
  }
  size_t e = tp_dtype_bytes(desc->dtype);
  if (desc->save_gathered) {
    if (!tp_op_gathers(desc->op) || !desc->backward || !desc->sp)
      return reject(out, "save_gathered: %s",
                    "only the all-gather side's backward reuses a gathered input");
    out->saved_bytes = (size_t)(desc->tokens * desc->in_features) * e;
  }
  switch (backend) {
  case TP_BACKEND_DIST: return resolve_dist(g, requested, chunks, out);
  case TP_BACKEND_STOCK:
  case TP_BACKEND_GEMM_ONLY:
  case TP_BACKEND_COMM_ONLY:
    out->schedule = TP_SCHED_NCCL;
    out->chunks = 1;
    out->bwd_chunks = 1;
    snprintf(out->reason, sizeof out->reason, "%s",
             backend == TP_BACKEND_GEMM_ONLY   ? "cuBLASLt GEMM alone"
             : backend == TP_BACKEND_COMM_ONLY ? "NCCL collective alone"
                                               : "NCCL collective, then cuBLASLt GEMM, one stream");
    out->workspace_bytes = stock_scratch(desc);
    return TP_OK;
  }
  return TP_FAIL(TP_EINTERNAL, "unknown backend %d", (int)backend);
}

/* fp32 floats of bias-gradient partial sums a backward needs on this rank. */
static size_t bias_partial_floats(const tp_linear_plan *p) {
  if (!p->desc.bias || !p->desc.backward) return 0;
  size_t rows = (size_t)(tp_op_gathers(p->desc.op) || !p->desc.sp ? p->desc.tokens : p->shard_rows);
  /* the row partials, then one summed row */
  return tp_bias_partial_floats(rows, (size_t)p->gemm_n) + (size_t)p->gemm_n;
}

tp_rc tp_linear_prepare(tp_group *g, const tp_linear_plan *p) {
  float *unused = NULL;
  if (bias_partial_floats(p))
    TP_TRY(tp_group_bias_scratch(g, bias_partial_floats(p) * sizeof(float), &unused));
  if (is_fused(p)) return tp_symm_reserve(g->symm, p->workspace_bytes);
  void *scratch = NULL;
  TP_TRY(tp_group_scratch(g, p->workspace_bytes, &scratch));
  /* The halves timed alone read the scratch: give them real numbers, not zeros. */
  TP_CUDA(tp_launch_fill_random(p->desc.dtype, scratch,
                                p->workspace_bytes / tp_dtype_bytes(p->desc.dtype),
                                0x5eed0000ull + (uint64_t)g->rank, 1.0f, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

static ncclDataType_t nccl_type(tp_dtype dt) { return dt == TP_BF16 ? ncclBfloat16 : ncclFloat32; }

static char *at(void *base, size_t bytes) { return (char *)base + bytes; }
static const char *cat(const void *base, size_t bytes) { return (const char *)base + bytes; }

/* Row-major C[m, n] (ldc) = op(A) · op(B) (+ beta C) on the main stream. */
static tp_rc gemm(tp_group *g, const tp_linear_plan *p, int trans_a, int trans_b, int64_t m,
                  int64_t n, int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                  void *c, int64_t ldc, float beta) {
  return tp_gemm_run(g->gemm, p->desc.dtype, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                     beta, g->main_stream);
}

/* ---- the GEMMs of each op, on a block of rows ---------------------------------------- */

/* Forward: y_i[rows] = x[rows] · w_iᵀ. x_rows points at the block's first row. */
static tp_rc fwd_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                      int64_t rows, const void *x_rows, void *const *out, size_t out_row0) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  for (int i = 0; i < p->desc.n_weights; ++i)
    TP_TRY(gemm(g, p, 0, 1, rows, p->gemm_n, p->gemm_k, x_rows, p->gemm_k, t->w[i], p->gemm_k,
                at(out[i], out_row0 * (size_t)p->gemm_n * e), p->gemm_n, 0.0f));
  return TP_OK;
}

/* Gather-side backward partial: Σ_i dy_i[rows] · w_i → out[rows, K]. */
static tp_rc dgrad_partial_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                int64_t row0, int64_t rows, const void *acc_in, void *out) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    const void *dy_rows = cat(t->dy[i], (size_t)row0 * (size_t)p->gemm_n * e);
    if (i == 0 && acc_in)
      TP_TRY(tp_gemm_run_acc(g->gemm, p->desc.dtype, 0, 0, rows, p->gemm_k, p->gemm_n, dy_rows,
                             p->gemm_n, t->w[i], p->gemm_k, acc_in, out, p->gemm_k,
                             g->main_stream));
    else
      TP_TRY(gemm(g, p, 0, 0, rows, p->gemm_k, p->gemm_n, dy_rows, p->gemm_n, t->w[i], p->gemm_k,
                  out, p->gemm_k, i == 0 ? 0.0f : 1.0f));
  }
  return TP_OK;
}

/* Weight gradient from a whole gathered operand: dw_i = dy_iᵀ · gathered
 * (gather side), dw = gatheredᵀ · x (RS side). One GEMM over all T rows. */
static tp_rc wgrad(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                   const void *gathered) {
  const int64_t T = p->desc.tokens;
  if (tp_op_gathers(p->desc.op)) {
    for (int i = 0; i < p->desc.n_weights; ++i)
      TP_TRY(gemm(g, p, 1, 0, p->gemm_n, p->gemm_k, T, t->dy[i], p->gemm_n, gathered, p->gemm_k,
                  t->dw[i], p->gemm_k, 0.0f));
    return TP_OK;
  }
  return gemm(g, p, 1, 0, p->gemm_n, p->gemm_k, T, gathered, p->gemm_n, t->x, p->gemm_k, t->dw[0],
              p->gemm_k, 0.0f);
}

/* RS-side backward: dx[rows] = gathered_dy[rows] · w. */
static tp_rc rs_dgrad_rows(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                           int64_t rows, const void *dy_rows, size_t dx_row0) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  return gemm(g, p, 0, 0, rows, p->gemm_k, p->gemm_n, dy_rows, p->gemm_n, t->w[0], p->gemm_k,
              at(t->dx, dx_row0 * (size_t)p->gemm_k * e), p->gemm_k, 0.0f);
}

static int runs_gemm(const tp_linear_plan *p) { return p->backend != TP_BACKEND_COMM_ONLY; }
static int runs_comm(const tp_linear_plan *p) { return p->backend != TP_BACKEND_GEMM_ONLY; }

/* ---- biases ------------------------------------------------------------------------- */

/* Forward: adds each weight's bias to its finished output (after the
 * reduce-scatter on the row-parallel side), the same kernel in both
 * backends so their bits stay comparable. */
static tp_rc add_biases(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (!p->desc.bias || !runs_gemm(p)) return TP_OK;
  size_t rows = (size_t)(tp_op_gathers(p->desc.op) || !p->desc.sp ? p->desc.tokens : p->shard_rows);
  for (int i = 0; i < p->desc.n_weights; ++i)
    TP_CUDA(tp_launch_add_bias(p->desc.dtype, t->y[i], t->b[i], rows, (size_t)p->gemm_n,
                               g->main_stream));
  return TP_OK;
}

/* fp32 column sums of dy [rows, cols] into out (cols floats), via the
 * group's partial-sum scratch: fixed row blocks, summed in order. */
static tp_rc column_sums_f32(tp_group *g, const tp_linear_plan *p, const void *dy, size_t rows,
                             float *out) {
  const size_t cols = (size_t)p->gemm_n;
  float *partial = g->bias_scratch;
  TP_CUDA(tp_launch_column_partials(p->desc.dtype, dy, rows, cols, partial, g->main_stream));
  const float *srcs[1] = {partial};
  TP_CUDA(tp_launch_sum_f32_rows(TP_FP32, out, srcs, 1, tp_bias_partial_floats(rows, cols) / cols,
                                 cols, g->main_stream));
  return TP_OK;
}

/* The summed row of the scratch, after the partials. */
static float *bias_vector(tp_group *g, const tp_linear_plan *p, size_t rows) {
  return g->bias_scratch + tp_bias_partial_floats(rows, (size_t)p->gemm_n);
}

/* Column-parallel: db_i = column sums of dy_i over all T rows: local, no communication. */
static tp_rc bias_grads_local(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  const size_t rows = (size_t)p->desc.tokens;
  float *vec = bias_vector(g, p, rows);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(column_sums_f32(g, p, t->dy[i], rows, vec));
    const float *srcs[1] = {vec};
    TP_CUDA(tp_launch_sum_f32_rows(p->desc.dtype, t->db[i], srcs, 1, 1, (size_t)p->gemm_n,
                                   g->main_stream));
  }
  return TP_OK;
}

/* Row-parallel, stock: local column sums, an NCCL all-reduce, one rounding. */
static tp_rc bias_grads_rs_stock(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  const size_t rows = (size_t)p->shard_rows, cols = (size_t)p->gemm_n;
  float *vec = bias_vector(g, p, rows);
  if (runs_gemm(p)) TP_TRY(column_sums_f32(g, p, t->dy[0], rows, vec));
  if (runs_comm(p))
    TP_NCCL(ncclAllReduce(vec, vec, cols, ncclFloat32, ncclSum, g->nccl, g->main_stream), g->nccl);
  const float *srcs[1] = {vec};
  if (runs_gemm(p))
    TP_CUDA(tp_launch_sum_f32_rows(p->desc.dtype, t->db[0], srcs, 1, 1, cols, g->main_stream));
  return TP_OK;
}

/* ---- stock: NCCL and cuBLASLt on one stream ---------------------------------------- */

/* Sequence parallelism off: the gather side needs no collective in the
 * forward (its input is replicated); the scatter side all-reduces its output. */
static tp_rc stock_forward_no_sp(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (tp_op_gathers(p->desc.op)) {
    if (runs_gemm(p)) TP_TRY(fwd_rows(g, p, t, p->gemm_m, t->x, t->y, 0));
    return add_biases(g, p, t);
  }
  if (runs_gemm(p)) TP_TRY(fwd_rows(g, p, t, p->gemm_m, t->x, t->y, 0));
  if (runs_comm(p))
    TP_NCCL(ncclAllReduce(t->y[0], t->y[0], tp_linear_y_elems(p), nccl_type(p->desc.dtype), ncclSum,
                          g->nccl, g->main_stream),
            g->nccl);
  return add_biases(g, p, t);
}

/* ... and in the backward the gather side all-reduces dx, the scatter side
 * needs nothing: its gradient arrives replicated. */
static tp_rc stock_backward_no_sp(tp_group *g, const tp_linear_plan *p,
                                  const tp_linear_tensors *t) {
  if (tp_op_gathers(p->desc.op)) {
    if (runs_gemm(p)) TP_TRY(dgrad_partial_rows(g, p, t, 0, p->desc.tokens, NULL, t->dx));
    if (runs_comm(p))
      TP_NCCL(ncclAllReduce(t->dx, t->dx, tp_linear_x_elems(p), nccl_type(p->desc.dtype), ncclSum,
                            g->nccl, g->main_stream),
              g->nccl);
    if (runs_gemm(p)) TP_TRY(wgrad(g, p, t, t->x));
    if (p->desc.bias && runs_gemm(p)) TP_TRY(bias_grads_local(g, p, t));
    return TP_OK;
  }
  if (!runs_gemm(p)) return TP_OK;
  TP_TRY(rs_dgrad_rows(g, p, t, p->desc.tokens, t->dy[0], 0));
  TP_TRY(wgrad(g, p, t, t->dy[0]));
  if (p->desc.bias) TP_TRY(bias_grads_local(g, p, t));
  return TP_OK;
}

/* The stock path's scratch: the caller's own (t->scratch: a reference whose
 * halves must read what the other half delivered, untouched by other ops)
 * or the group's. */
static void *scratch_of(const tp_group *g, const tp_linear_tensors *t) {
  return t->scratch ? t->scratch : g->scratch;
}

static tp_rc stock_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  cudaStream_t s = g->main_stream;
  ncclDataType_t nt = nccl_type(p->desc.dtype);
  if (!p->desc.sp) return stock_forward_no_sp(g, p, t);
  void *scratch = scratch_of(g, t);
  if (tp_op_gathers(p->desc.op)) {
    void *gathered = t->saved ? t->saved : scratch;
    if (runs_comm(p))
      TP_NCCL(ncclAllGather(t->x, gathered, tp_linear_x_elems(p), nt, g->nccl, s), g->nccl);
    if (runs_gemm(p)) TP_TRY(fwd_rows(g, p, t, p->gemm_m, gathered, t->y, 0));
    return add_biases(g, p, t);
  }
  void *partial[TP_MAX_WEIGHTS] = {scratch}; /* one weight on the row-parallel side */
  if (runs_gemm(p)) TP_TRY(fwd_rows(g, p, t, p->gemm_m, t->x, partial, 0));
  if (runs_comm(p))
    TP_NCCL(ncclReduceScatter(scratch, t->y[0], tp_linear_y_elems(p), nt, ncclSum, g->nccl, s),
            g->nccl);
  return add_biases(g, p, t);
}

static tp_rc stock_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  cudaStream_t s = g->main_stream;
  ncclDataType_t nt = nccl_type(p->desc.dtype);
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  if (!p->desc.sp) return stock_backward_no_sp(g, p, t);
  /* Regions of one op never alias inside a step: the gathered input (or
   * gradient) has its own, so the GEMMs of a reference run alone read what
   * the collective delivered, not a partial written since. */
  void *scratch = scratch_of(g, t);
  if (tp_op_gathers(p->desc.op)) {
    void *gathered = t->saved ? t->saved : scratch; /* where the forward gathered it */
    void *partial = at(scratch, (size_t)(p->desc.tokens * p->gemm_k) * e);
    if (runs_gemm(p)) TP_TRY(dgrad_partial_rows(g, p, t, 0, p->desc.tokens, NULL, partial));
    if (runs_comm(p)) {
      TP_NCCL(ncclReduceScatter(partial, t->dx, tp_linear_x_elems(p), nt, ncclSum, g->nccl, s),
              g->nccl);
      if (!t->saved)
        TP_NCCL(ncclAllGather(t->x, gathered, tp_linear_x_elems(p), nt, g->nccl, s), g->nccl);
    }
    if (runs_gemm(p)) TP_TRY(wgrad(g, p, t, gathered));
    if (p->desc.bias && runs_gemm(p)) TP_TRY(bias_grads_local(g, p, t));
    return TP_OK;
  }
  void *gathered = at(scratch, (size_t)(p->desc.tokens * p->gemm_n) * e); /* past the partial */
  if (runs_comm(p))
    TP_NCCL(ncclAllGather(t->dy[0], gathered, tp_linear_y_elems(p), nt, g->nccl, s), g->nccl);
  if (runs_gemm(p)) {
    TP_TRY(rs_dgrad_rows(g, p, t, p->desc.tokens, gathered, 0));
    TP_TRY(wgrad(g, p, t, gathered));
  }
  if (p->desc.bias) TP_TRY(bias_grads_rs_stock(g, p, t));
  return TP_OK;
}

/* ---- fused: transfers on the comm stream, flags between ranks ------------------------- */

static int flag_slot(int src, int phase, int chunk) {
  return TP_SIG_FLAGS + src * TP_MAX_CHUNKS + phase * MAX_PHASE_CHUNKS + chunk;
}

/* Raises slot `slot` in peer dst's pad once everything before it on `stream`
 * is done: a stream memory operation (fenced; no kernel launch between the
 * work's end and the peer's wake-up), or the signal kernel while a graph is
 * captured. */
static tp_rc raise_flag(tp_group *g, cudaStream_t stream, int dst, int slot) {
  tp_pad_set pads = tp_symm_pads(g->symm);
  if (tp_group_memops_usable(g, stream))
    return tp_group_write_flag(g, stream, pads.pad[dst] + slot, 1);
  TP_CUDA(tp_launch_signal(pads.pad[dst], slot, stream));
  return TP_OK;
}

/* Pushes bytes from a local buffer into peer dst's memory, then raises the
 * flag of (this rank, phase, chunk) in dst's pad. */
static tp_rc push_chunk(tp_group *g, const tp_linear_plan *p, int dst, void *dst_ptr,
                        const void *src_ptr, size_t bytes, int phase, int chunk) {
  tp_pad_set pads = tp_symm_pads(g->symm);
  const int slot = flag_slot(g->rank, phase, chunk);
  if (p->schedule == TP_SCHED_SM) {
    int counter = TP_SIG_COUNTERS + dst * TP_MAX_CHUNKS + phase * MAX_PHASE_CHUNKS + chunk;
    TP_CUDA(tp_launch_copy_signal(dst_ptr, src_ptr, bytes, p->sm_blocks, pads.pad[g->rank], counter,
                                  pads.pad[dst], slot, g->comm_stream));
    return TP_OK;
  }
  TP_CUDA(cudaMemcpyAsync(dst_ptr, src_ptr, bytes, cudaMemcpyDeviceToDevice, g->comm_stream));
  return raise_flag(g, g->comm_stream, dst, slot);
}

/* The main stream waits for (src, phase, chunk) to land here, then lowers
 * the flag for its next use. */
static tp_rc wait_chunk(tp_group *g, int src, int phase, int chunk) {
  tp_pad_set pads = tp_symm_pads(g->symm);
  uint32_t *flag = pads.pad[g->rank] + flag_slot(src, phase, chunk);
  if (tp_group_memops_usable(g, g->main_stream)) {
    TP_TRY(tp_group_wait_flag(g, g->main_stream, flag, 1));
    return tp_group_write_flag(g, g->main_stream, flag, 0);
  }
  TP_CUDA(tp_launch_wait(pads.pad[g->rank], flag_slot(src, phase, chunk), src, g->wait_timeout_ns,
                         g->main_stream));
  return TP_OK;
}

/* Row-parallel, fused: each rank's fp32 column sums go into its own
 * workspace at vec_offset; flags tell the peers; every rank then sums the W
 * vectors, read from the peers' memory, in rank order. */
static tp_rc bias_grads_rs_dist(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                size_t vec_offset) {
  const size_t cols = (size_t)p->gemm_n;
  float *mine = (float *)at(tp_symm_ptr(g->symm, g->rank), vec_offset);
  TP_TRY(column_sums_f32(g, p, t->dy[0], (size_t)p->shard_rows, mine));
  for (int step = 1; step < g->world; ++step) {
    int dst = (g->rank + step) % g->world;
    TP_TRY(raise_flag(g, g->main_stream, dst, flag_slot(g->rank, 1, 0)));
  }
  for (int step = 1; step < g->world; ++step)
    TP_TRY(wait_chunk(g, (g->rank - step + g->world) % g->world, 1, 0));
  const float *srcs[TP_MAX_WORLD];
  for (int r = 0; r < g->world; ++r)
    srcs[r] = (const float *)at(tp_symm_ptr(g->symm, r), vec_offset);
  TP_CUDA(tp_launch_sum_f32_rows(p->desc.dtype, t->db[0], srcs, g->world, 1, cols, g->main_stream));
  return TP_OK;
}

/* The comm stream starts after everything already on the main stream, and
 * meets every rank before touching a peer's workspace (it may still be read
 * by the peer's previous op). */
static tp_rc fork_to_comm(tp_group *g) {
  cudaEvent_t fork = g->events[TP_EVENT_POOL - 1];
  TP_CUDA(cudaEventRecord(fork, g->main_stream));
  TP_CUDA(cudaStreamWaitEvent(g->comm_stream, fork, 0));
  TP_CUDA(tp_launch_barrier(tp_symm_pads(g->symm), g->rank, g->world, g->wait_timeout_ns,
                            g->comm_stream));
  return TP_OK;
}

static tp_rc join_from_comm(tp_group *g) {
  cudaEvent_t join = g->events[TP_EVENT_POOL - 2];
  TP_CUDA(cudaEventRecord(join, g->comm_stream));
  TP_CUDA(cudaStreamWaitEvent(g->main_stream, join, 0));
  return TP_OK;
}

/* Pushes this rank's rows [S, row_bytes] into every peer's buffer at
 * gather_offset + rank·S rows, chunk by chunk; all chunks for every peer
 * are queued at once (chunk-major, so every peer gets chunk 0 first). */
static tp_rc push_gather(tp_group *g, const tp_linear_plan *p, const void *rows_local,
                         size_t row_bytes, size_t gather_offset, int phase, int chunks) {
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / chunks;
  for (int j = 0; j < chunks; ++j)
    for (int step = 1; step < world; ++step) {
      int dst = (rank + step) % world;
      void *to =
          at(tp_symm_ptr(g->symm, dst), gather_offset + (size_t)(rank * S + j * R) * row_bytes);
      TP_TRY(push_chunk(g, p, dst, to, cat(rows_local, (size_t)(j * R) * row_bytes),
                        (size_t)R * row_bytes, phase, j));
    }
  return TP_OK;
}

/* Waits for every peer chunk of a gather (same order as pushed). */
static tp_rc wait_gather(tp_group *g, int phase, int chunks) {
  for (int j = 0; j < chunks; ++j)
    for (int step = 1; step < g->world; ++step)
      TP_TRY(wait_chunk(g, (g->rank - step + g->world) % g->world, phase, j));
  return TP_OK;
}

/* Computes and pushes the partial of every peer's rows, then the local
 * partial into slot `rank`, waits for the peers' partials and sums the W
 * slots in rank order into out [S, width]. partial(dst_row0, rows, dst)
 * writes the partial of rows [dst_row0, +rows) of the full [T, width] result. */
typedef tp_rc (*partial_fn)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                            int64_t row0, int64_t rows, const void *acc_in, void *out);

/* The local chunk j: once every peer's partial of chunk j has landed, the
 * GEMM of the local rows adds them in its epilogue (fp32, one rounding)
 * and writes the output rows directly: no separate reduction pass. With
 * more than one peer, the peers' partials are first summed in rank order
 * into this rank's own receive slot. */
static tp_rc local_chunk(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                         partial_fn partial, size_t row, void *out, int phase, int chunks, int j) {
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / chunks;
  const size_t slot = (size_t)S * row, chunk_off = (size_t)(j * R) * row;
  void *own = tp_symm_ptr(g->symm, rank);
  for (int step = 1; step < world; ++step)
    TP_TRY(wait_chunk(g, (rank - step + world) % world, phase, j));
  const void *acc = cat(own, (size_t)((rank + 1) % world) * slot + chunk_off);
  if (world > 2) {
    const void *peers[TP_MAX_WORLD];
    int n = 0;
    for (int r = 0; r < world; ++r)
      if (r != rank) peers[n++] = cat(own, (size_t)r * slot + chunk_off);
    void *sum = at(own, (size_t)rank * slot + chunk_off);
    TP_CUDA(tp_launch_reduce_sum(p->desc.dtype, sum, peers, n,
                                 (size_t)R * row / tp_dtype_bytes(p->desc.dtype), g->main_stream));
    acc = sum;
  }
  return partial(g, p, t, rank * S + j * R, R, acc, at(out, chunk_off));
}

/* Computes and pushes the partial of every peer's rows chunk by chunk, and
 * one chunk behind, the local rows (local_chunk): a peer's chunk j has had a
 * whole chunk GEMM's time to arrive before it is needed. partial(row0,
 * rows, acc, dst) writes rows [row0, +rows) of the full [T, width] partial
 * product (plus acc when given). */
static tp_rc fused_reduce_scatter(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                  partial_fn partial, int64_t width, void *out, int phase,
                                  int chunks) {
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / chunks;
  const size_t row = (size_t)width * tp_dtype_bytes(p->desc.dtype), slot = (size_t)S * row;
  void *own = tp_symm_ptr(g->symm, rank);
  for (int j = 0; j < chunks; ++j) {
    for (int step = 1; step < world; ++step) {
      int dst = (rank + step) % world;
      void *staging = at(own, (size_t)world * slot + (size_t)(step - 1) * slot);
      void *part = at(staging, (size_t)(j * R) * row);
      TP_TRY(partial(g, p, t, dst * S + j * R, R, NULL, part));
      cudaEvent_t ready = g->events[(step - 1) * TP_MAX_CHUNKS + j];
      TP_CUDA(cudaEventRecord(ready, g->main_stream));
      TP_CUDA(cudaStreamWaitEvent(g->comm_stream, ready, 0));
      void *to = at(tp_symm_ptr(g->symm, dst), (size_t)rank * slot + (size_t)(j * R) * row);
      TP_TRY(push_chunk(g, p, dst, to, part, (size_t)R * row, phase, j));
    }
    if (j > 0) TP_TRY(local_chunk(g, p, t, partial, row, out, phase, chunks, j - 1));
  }
  return local_chunk(g, p, t, partial, row, out, phase, chunks, chunks - 1);
}

static tp_rc fwd_partial(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                         int64_t row0, int64_t rows, const void *acc_in, void *out) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  const void *x_rows = cat(t->x, (size_t)row0 * (size_t)p->gemm_k * e);
  if (acc_in)
    return tp_gemm_run_acc(g->gemm, p->desc.dtype, 0, 1, rows, p->gemm_n, p->gemm_k, x_rows,
                           p->gemm_k, t->w[0], p->gemm_k, acc_in, out, p->gemm_n, g->main_stream);
  void *outs[TP_MAX_WEIGHTS] = {out}; /* the row-parallel side has one weight */
  return fwd_rows(g, p, t, rows, x_rows, outs, 0);
}

/* Copies the local rows into the own slot of a gathered buffer, so a GEMM
 * over the whole gathered operand can run as one call. */
static tp_rc place_own_rows(tp_group *g, const tp_linear_plan *p, void *gathered,
                            const void *rows_local, size_t row_bytes) {
  size_t off = (size_t)(g->rank * p->shard_rows) * row_bytes;
  TP_CUDA(cudaMemcpyAsync(at(gathered, off), rows_local, (size_t)p->shard_rows * row_bytes,
                          cudaMemcpyDeviceToDevice, g->main_stream));
  return TP_OK;
}

static tp_rc dist_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  TP_TRY(fork_to_comm(g));
  if (!tp_op_gathers(p->desc.op)) {
    TP_TRY(fused_reduce_scatter(g, p, t, fwd_partial, p->desc.out_features, t->y[0], 0, p->chunks));
    TP_TRY(add_biases(g, p, t));
    return join_from_comm(g);
  }
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / p->chunks;
  const size_t row = (size_t)p->desc.in_features * e;
  void *gathered = tp_symm_ptr(g->symm, rank);
  TP_TRY(push_gather(g, p, t->x, row, 0, 0, p->chunks));
  /* The local shard needs no transfer: its GEMM overlaps the first pushes. */
  TP_TRY(fwd_rows(g, p, t, S, t->x, t->y, (size_t)(rank * S)));
  for (int j = 0; j < p->chunks; ++j)
    for (int step = 1; step < world; ++step) {
      int src = (rank - step + world) % world;
      TP_TRY(wait_chunk(g, src, 0, j));
      size_t row0 = (size_t)(src * S + j * R);
      TP_TRY(fwd_rows(g, p, t, R, cat(gathered, row0 * row), t->y, row0));
    }
  if (t->saved) {
    TP_TRY(place_own_rows(g, p, gathered, t->x, row));
    TP_CUDA(cudaMemcpyAsync(t->saved, gathered, (size_t)p->desc.tokens * row,
                            cudaMemcpyDeviceToDevice, g->main_stream));
  }
  TP_TRY(add_biases(g, p, t));
  return join_from_comm(g);
}

static tp_rc dist_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  const int rank = g->rank, world = g->world;
  const int chunks = p->bwd_chunks;
  const int64_t S = p->shard_rows, R = S / chunks, T = p->desc.tokens;
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  TP_TRY(fork_to_comm(g));
  if (tp_op_gathers(p->desc.op)) {
    /* The input's all-gather for dW (phase 0) moves while dx is computed and
     * reduce-scattered (phase 1); it moves whole (one chunk), since nothing
     * consumes it before it is complete. */
    const size_t row = (size_t)p->gemm_k * e;
    const size_t gather_off = (size_t)(world * S + (world - 1) * S) * row;
    void *gathered = t->saved ? t->saved : at(tp_symm_ptr(g->symm, rank), gather_off);
    if (!t->saved) TP_TRY(push_gather(g, p, t->x, row, gather_off, 0, 1));
    TP_TRY(fused_reduce_scatter(g, p, t, dgrad_partial_rows, p->gemm_k, t->dx, 1, chunks));
    if (!t->saved) {
      TP_TRY(place_own_rows(g, p, gathered, t->x, row));
      TP_TRY(wait_gather(g, 0, 1));
    }
    TP_TRY(wgrad(g, p, t, gathered));
    if (p->desc.bias) TP_TRY(bias_grads_local(g, p, t));
    return join_from_comm(g);
  }
  /* RS side: gather dy; dx rows as chunks arrive; dW over the whole. */
  const size_t row = (size_t)p->gemm_n * e;
  void *gathered = tp_symm_ptr(g->symm, rank);
  TP_TRY(push_gather(g, p, t->dy[0], row, 0, 0, chunks));
  TP_TRY(rs_dgrad_rows(g, p, t, S, t->dy[0], (size_t)(rank * S)));
  for (int j = 0; j < chunks; ++j)
    for (int step = 1; step < world; ++step) {
      int src = (rank - step + world) % world;
      TP_TRY(wait_chunk(g, src, 0, j));
      size_t row0 = (size_t)(src * S + j * R);
      TP_TRY(rs_dgrad_rows(g, p, t, R, cat(gathered, row0 * row), row0));
    }
  TP_TRY(place_own_rows(g, p, gathered, t->dy[0], row));
  TP_TRY(wgrad(g, p, t, gathered));
  if (p->desc.bias) TP_TRY(bias_grads_rs_dist(g, p, t, (size_t)T * row));
  return join_from_comm(g);
}

static tp_rc check_ready(const tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (p->desc.bias && g->bias_scratch_bytes < bias_partial_floats(p) * sizeof(float))
    return TP_FAIL(TP_EINTERNAL, "bias scratch too small: call tp_linear_prepare");
  if (p->desc.save_gathered && !t->saved)
    return TP_FAIL(TP_EINTERNAL, "plan saves the gathered input but no buffer was given");
  if (is_fused(p)) {
    if (tp_symm_size(g->symm) < p->workspace_bytes)
      return TP_FAIL(TP_EINTERNAL, "workspace of %zu bytes, plan needs %zu: call tp_linear_prepare",
                     tp_symm_size(g->symm), p->workspace_bytes);
  } else if (!t->scratch && g->scratch_bytes < p->workspace_bytes) {
    return TP_FAIL(TP_EINTERNAL, "scratch of %zu bytes, plan needs %zu: call tp_linear_prepare",
                   g->scratch_bytes, p->workspace_bytes);
  }
  return TP_OK;
}

tp_rc tp_linear_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(check_ready(g, p, t));
  tp_nvtx_push(p->nvtx_fwd);
  /* the test knob's fixed slowdown of every fused op (off unless set) */
  if (is_fused(p) && g->test_delay_ns) TP_CUDA(tp_launch_delay(g->test_delay_ns, g->main_stream));
  tp_rc rc = is_fused(p) ? dist_forward(g, p, t) : stock_forward(g, p, t);
  tp_nvtx_pop();
  return rc;
}

tp_rc tp_linear_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (!p->desc.backward) return TP_FAIL(TP_EINTERNAL, "plan was made for the forward only");
  TP_TRY(check_ready(g, p, t));
  tp_nvtx_push(p->nvtx_bwd);
  tp_rc rc = is_fused(p) ? dist_backward(g, p, t) : stock_backward(g, p, t);
  tp_nvtx_pop();
  return rc;
}

int tp_linear_transfers(const tp_linear_plan *p, int fwd, int bwd) {
  const int gather = tp_op_gathers(p->desc.op);
  bwd = bwd && p->desc.backward;
  if (p->backend == TP_BACKEND_GEMM_ONLY) return 0;
  if (!p->desc.sp) /* one all-reduce: the scatter side's forward, the gather side's backward */
    return p->backend == TP_BACKEND_GEMM_ONLY ? 0 : gather ? (bwd ? 1 : 0) : (fwd ? 1 : 0);
  if (!is_fused(p)) {
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

tp_rc tp_linear_step(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(tp_linear_forward(g, p, t));
  if (p->desc.backward) TP_TRY(tp_linear_backward(g, p, t));
  return TP_OK;
}
