/*
 * tp_linear.c — planning and forward execution of the TP projections,
 * stock and fused (see tp_linear.h for the math and the schedules).
 *
 * Symmetric workspace layout of the fused ops (each rank, offset 0):
 *   AG: gathered input G[T, K]; rank r's shard lands at rows r·S.
 *   RS: receive slots R[W][S, N] (slot r holds rank r's partial of this
 *       rank's rows), then staging P[W-1][S, N] for the partials this rank
 *       pushes out.
 * Signal slots: the flag of chunk j from rank r is TP_SIG_FLAGS + r·MAXC + j;
 * its copy-kernel block counter TP_SIG_COUNTERS + d·MAXC + j (d: the peer
 * pushed to).
 */
#include "tp_linear.h"

#include <stdio.h>
#include <string.h>

#include "tp_cuda_check.h"

enum {
  SM_COPY_BLOCKS = 16,        /* GPU.md: 16 blocks of 1024 threads push ~336 GB/s */
  AUTO_CHUNK_MIN_BYTES = 8 << 20,
  AUTO_CHUNK_MIN_ROWS = 512,
  AUTO_MAX_CHUNKS = 4
};

const char *tp_linear_kind_name(tp_linear_kind kind) {
  switch (kind) {
  case TP_LINEAR_AG: return "ag_linear";
  case TP_LINEAR_AG_MULTI: return "ag_linear_multi";
  case TP_LINEAR_RS: return "linear_rs";
  }
  return "?";
}

const char *tp_backend_name(tp_backend backend) {
  switch (backend) {
  case TP_BACKEND_STOCK: return "stock";
  case TP_BACKEND_DIST: return "dist_gemm";
  case TP_BACKEND_GEMM_ONLY: return "gemm_only";
  case TP_BACKEND_COMM_ONLY: return "comm_only";
  }
  return "?";
}

static const char *const schedule_names[] = {"auto", "ce", "sm", "ring", "multimem", "nccl"};

const char *tp_schedule_name(tp_schedule schedule) {
  if ((unsigned)schedule < sizeof schedule_names / sizeof schedule_names[0])
    return schedule_names[schedule];
  return "?";
}

tp_rc tp_schedule_parse(const char *name, tp_schedule *out) {
  for (unsigned i = 0; i < sizeof schedule_names / sizeof schedule_names[0]; ++i) {
    if (strcmp(name, schedule_names[i]) == 0 && i != TP_SCHED_NCCL) {
      *out = (tp_schedule)i;
      return TP_OK;
    }
  }
  return TP_FAIL(TP_EUSAGE, "unknown schedule '%s' (valid: auto, ce, sm, ring, multimem)", name);
}

static int is_gather_side(tp_linear_kind kind) { return kind != TP_LINEAR_RS; }

size_t tp_linear_x_elems(const tp_linear_plan *p) {
  if (is_gather_side(p->desc.kind)) return (size_t)(p->shard_rows * p->desc.in_features);
  return (size_t)(p->desc.tokens * (p->desc.in_features / p->world));
}

size_t tp_linear_w_elems(const tp_linear_plan *p) { return (size_t)(p->gemm_n * p->gemm_k); }

size_t tp_linear_y_elems(const tp_linear_plan *p) {
  if (is_gather_side(p->desc.kind)) return (size_t)(p->desc.tokens * p->gemm_n);
  return (size_t)(p->shard_rows * p->desc.out_features);
}

/* Largest chunk count <= cap that divides rows, keeps chunks >= min bytes and rows. */
static int auto_chunks(int64_t rows, size_t row_bytes, char *why, size_t why_cap) {
  int best = 1;
  for (int c = 2; c <= AUTO_MAX_CHUNKS; ++c) {
    if (rows % c != 0) continue;
    int64_t r = rows / c;
    if (r < AUTO_CHUNK_MIN_ROWS || (size_t)r * row_bytes < AUTO_CHUNK_MIN_BYTES) continue;
    best = c;
  }
  snprintf(why, why_cap,
           "%d chunk(s) of %lld rows (%.1f MiB): the most, up to %d, that keep a chunk >= %d MiB "
           "and >= %d rows",
           best, (long long)(rows / best), (double)((size_t)(rows / best) * row_bytes) / 1048576.0,
           AUTO_MAX_CHUNKS, AUTO_CHUNK_MIN_BYTES >> 20, AUTO_CHUNK_MIN_ROWS);
  return best;
}

static tp_rc reject(tp_linear_plan *p, const char *fmt, const char *detail) {
  snprintf(p->reason, sizeof p->reason, fmt, detail);
  return TP_FAIL(TP_EREJECT, "%s", p->reason);
}

static tp_rc check_shape(const tp_linear_desc *d, int world, tp_linear_plan *p) {
  char num[64];
  if (d->n_weights < 1 || d->n_weights > TP_MAX_WEIGHTS ||
      (d->kind != TP_LINEAR_AG_MULTI && d->n_weights != 1)) {
    snprintf(num, sizeof num, "%d", d->n_weights);
    return reject(p, "unsupported number of weights: %s", num);
  }
  if (d->tokens % world != 0) {
    snprintf(num, sizeof num, "%lld tokens, TP %d", (long long)d->tokens, world);
    return reject(p, "tokens not divisible by the TP degree (%s)", num);
  }
  int64_t sharded = is_gather_side(d->kind) ? d->out_features : d->in_features;
  if (sharded % world != 0) {
    snprintf(num, sizeof num, "%lld features, TP %d", (long long)sharded, world);
    return reject(p, "sharded weight dimension not divisible by the TP degree (%s)", num);
  }
  return TP_OK;
}

static void fill_shape(const tp_linear_desc *d, int world, tp_linear_plan *p) {
  p->shard_rows = d->tokens / world;
  size_t e = tp_dtype_bytes(d->dtype);
  if (is_gather_side(d->kind)) {
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
  p->flops = 2.0 * (double)d->tokens * (double)d->out_features * (double)d->in_features *
             (double)d->n_weights;
}

static tp_rc resolve_dist(const tp_group *g, tp_schedule requested, int chunks,
                          tp_linear_plan *p) {
  const tp_linear_desc *d = &p->desc;
  if (g->world < 2) return reject(p, "dist_gemm needs TP > 1: %s", "nothing to gather or scatter");
  if (requested == TP_SCHED_MULTIMEM) {
    if (!g->multicast_supported)
      return reject(p, "multimem: %s", "this device does not report NVLink multicast support");
    if (g->multicast_disabled)
      return reject(p, "multimem: %s",
                    "NVLink multicast is disabled in this environment (NCCL_NVLS_ENABLE=0 / "
                    "TORCH_SYMM_MEM_DISABLE_MULTICAST=1 / NVSHMEM_DISABLE_NVLS=1)");
    return reject(p, "multimem: %s", "not implemented in this build");
  }
  if (requested == TP_SCHED_RING)
    return reject(p, "ring: %s", "not implemented yet (at TP=2 it equals the direct schedules)");
  size_t e = tp_dtype_bytes(d->dtype);
  size_t row_bytes = (size_t)(is_gather_side(d->kind) ? d->in_features : d->out_features) * e;
  char chunk_why[200] = "";
  if (chunks == 0) {
    chunks = auto_chunks(p->shard_rows, row_bytes, chunk_why, sizeof chunk_why);
  } else {
    char num[96];
    snprintf(num, sizeof num, "%d chunks, %lld rows per rank", chunks, (long long)p->shard_rows);
    if (chunks > TP_MAX_CHUNKS || chunks < 1)
      return reject(p, "chunks outside 1..64 (%s)", num);
    if (p->shard_rows % chunks != 0)
      return reject(p, "rows per rank not divisible by chunks (%s)", num);
    snprintf(chunk_why, sizeof chunk_why, "%d chunk(s) as requested", chunks);
  }
  size_t chunk_bytes = (size_t)(p->shard_rows / chunks) * row_bytes;
  if (requested == TP_SCHED_SM && chunk_bytes % 16 != 0) {
    char num[64];
    snprintf(num, sizeof num, "%zu bytes", chunk_bytes);
    return reject(p, "sm: chunk size not a multiple of 16 bytes (%s)", num);
  }
  p->chunks = chunks;
  p->sm_blocks = SM_COPY_BLOCKS;
  if (requested == TP_SCHED_AUTO) {
    p->schedule = TP_SCHED_CE;
    snprintf(p->reason, sizeof p->reason,
             "auto: ce — the copy engine moves chunks without taking SMs from the GEMM "
             "(default rule, not yet tuned from measurements); %s",
             chunk_why);
  } else {
    p->schedule = requested;
    snprintf(p->reason, sizeof p->reason, "%s as requested; %s", tp_schedule_name(requested),
             chunk_why);
  }
  if (is_gather_side(d->kind))
    p->workspace_bytes = (size_t)(d->tokens * d->in_features) * e;
  else
    p->workspace_bytes = (size_t)(d->tokens * d->out_features) * e +
                         (size_t)(g->world - 1) * (size_t)(p->shard_rows * d->out_features) * e;
  return TP_OK;
}

tp_rc tp_linear_plan_make(const tp_group *g, const tp_linear_desc *desc, tp_backend backend,
                          tp_schedule requested, int chunks, tp_linear_plan *out) {
  memset(out, 0, sizeof *out);
  out->desc = *desc;
  out->backend = backend;
  out->world = g->world;
  out->rank = g->rank;
  TP_TRY(check_shape(desc, g->world, out));
  fill_shape(desc, g->world, out);
  size_t e = tp_dtype_bytes(desc->dtype);
  switch (backend) {
  case TP_BACKEND_DIST: return resolve_dist(g, requested, chunks, out);
  case TP_BACKEND_STOCK:
  case TP_BACKEND_GEMM_ONLY:
  case TP_BACKEND_COMM_ONLY:
    out->schedule = TP_SCHED_NCCL;
    out->chunks = 1;
    snprintf(out->reason, sizeof out->reason, "%s",
             backend == TP_BACKEND_GEMM_ONLY ? "cuBLASLt GEMM alone"
             : backend == TP_BACKEND_COMM_ONLY ? "NCCL collective alone"
                                               : "NCCL collective, then cuBLASLt GEMM, one stream");
    out->workspace_bytes = is_gather_side(desc->kind)
                               ? (size_t)(desc->tokens * desc->in_features) * e
                               : (size_t)(desc->tokens * desc->out_features) * e;
    return TP_OK;
  }
  return TP_FAIL(TP_EINTERNAL, "unknown backend %d", (int)backend);
}

tp_rc tp_linear_prepare(tp_group *g, const tp_linear_plan *p) {
  if (p->backend == TP_BACKEND_DIST) return tp_symm_reserve(g->symm, p->workspace_bytes);
  void *scratch = NULL;
  TP_TRY(tp_group_scratch(g, p->workspace_bytes, &scratch));
  /* The halves timed alone read the scratch: give them real numbers, not zeros. */
  TP_CUDA(tp_launch_fill_random(p->desc.dtype, scratch, p->workspace_bytes / tp_dtype_bytes(p->desc.dtype),
                                0x5eed0000ull + (uint64_t)g->rank, 1.0f, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

static ncclDataType_t nccl_type(tp_dtype dt) { return dt == TP_BF16 ? ncclBfloat16 : ncclFloat32; }

static char *byte_offset(void *base, size_t off) { return (char *)base + off; }
static const char *cbyte_offset(const void *base, size_t off) { return (const char *)base + off; }

/* y[rows] = x[rows] · wᵀ for each weight, row-major, y with leading dim n. */
static tp_rc gemm_rows(tp_group *g, const tp_linear_plan *p, int64_t rows, const void *x,
                       const void *const *w, void *const *y, size_t y_row_offset) {
  size_t e = tp_dtype_bytes(p->desc.dtype);
  for (int i = 0; i < p->desc.n_weights; ++i)
    TP_TRY(tp_gemm_run(g->gemm, p->desc.dtype, 0, 1, rows, p->gemm_n, p->gemm_k, x, p->gemm_k,
                       w[i], p->gemm_k, byte_offset(y[i], y_row_offset * (size_t)p->gemm_n * e),
                       p->gemm_n, 0.0f, g->main_stream));
  return TP_OK;
}

static tp_rc stock_forward(tp_group *g, const tp_linear_plan *p, const void *x,
                           const void *const *w, void *const *y) {
  cudaStream_t s = g->main_stream;
  ncclDataType_t nt = nccl_type(p->desc.dtype);
  if (is_gather_side(p->desc.kind)) {
    size_t shard = tp_linear_x_elems(p);
    if (p->backend != TP_BACKEND_GEMM_ONLY)
      TP_NCCL(ncclAllGather(x, g->scratch, shard, nt, g->nccl, s), g->nccl);
    if (p->backend != TP_BACKEND_COMM_ONLY) TP_TRY(gemm_rows(g, p, p->gemm_m, g->scratch, w, y, 0));
    return TP_OK;
  }
  if (p->backend != TP_BACKEND_COMM_ONLY) {
    void *partial[1] = {g->scratch};
    TP_TRY(gemm_rows(g, p, p->gemm_m, x, w, partial, 0));
  }
  if (p->backend != TP_BACKEND_GEMM_ONLY)
    TP_NCCL(ncclReduceScatter(g->scratch, y[0], tp_linear_y_elems(p), nt, ncclSum, g->nccl, s),
            g->nccl);
  return TP_OK;
}

/* Pushes bytes from a local buffer into peer `dst`'s memory and raises its flag `slot`. */
static tp_rc push_chunk(tp_group *g, const tp_linear_plan *p, int dst, void *dst_ptr,
                        const void *src_ptr, size_t bytes, int chunk) {
  tp_pad_set pads = tp_symm_pads(g->symm);
  int slot = TP_SIG_FLAGS + g->rank * TP_MAX_CHUNKS + chunk;
  if (p->schedule == TP_SCHED_SM) {
    int counter = TP_SIG_COUNTERS + dst * TP_MAX_CHUNKS + chunk;
    TP_CUDA(tp_launch_copy_signal(dst_ptr, src_ptr, bytes, p->sm_blocks, pads.pad[g->rank],
                                  counter, pads.pad[dst], slot, g->comm_stream));
    return TP_OK;
  }
  TP_CUDA(cudaMemcpyAsync(dst_ptr, src_ptr, bytes, cudaMemcpyDeviceToDevice, g->comm_stream));
  TP_CUDA(tp_launch_signal(pads.pad[dst], slot, g->comm_stream));
  return TP_OK;
}

static tp_rc wait_chunk(tp_group *g, int src, int chunk) {
  tp_pad_set pads = tp_symm_pads(g->symm);
  TP_CUDA(tp_launch_wait(pads.pad[g->rank], TP_SIG_FLAGS + src * TP_MAX_CHUNKS + chunk, src,
                         g->wait_timeout_ns, g->main_stream));
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

static tp_rc dist_ag_forward(tp_group *g, const tp_linear_plan *p, const void *x,
                             const void *const *w, void *const *y) {
  const int rank = g->rank, world = g->world, chunks = p->chunks;
  const int64_t S = p->shard_rows, R = S / chunks, K = p->desc.in_features;
  const size_t row_bytes = (size_t)K * tp_dtype_bytes(p->desc.dtype);
  TP_TRY(fork_to_comm(g));
  for (int j = 0; j < chunks; ++j) {
    for (int step = 1; step < world; ++step) {
      int dst = (rank + step) % world;
      void *to = byte_offset(tp_symm_ptr(g->symm, dst), (size_t)(rank * S + j * R) * row_bytes);
      TP_TRY(push_chunk(g, p, dst, to, cbyte_offset(x, (size_t)(j * R) * row_bytes),
                        (size_t)R * row_bytes, j));
    }
  }
  /* The local shard needs no transfer: its GEMM overlaps the first pushes. */
  TP_TRY(gemm_rows(g, p, S, x, w, y, (size_t)(rank * S)));
  const void *gathered = tp_symm_ptr(g->symm, rank);
  for (int j = 0; j < chunks; ++j) {
    for (int step = 1; step < world; ++step) {
      int src = (rank - step + world) % world;
      TP_TRY(wait_chunk(g, src, j));
      size_t row0 = (size_t)(src * S + j * R);
      TP_TRY(gemm_rows(g, p, R, cbyte_offset(gathered, row0 * row_bytes), w, y, row0));
    }
  }
  return join_from_comm(g);
}

static tp_rc dist_rs_forward(tp_group *g, const tp_linear_plan *p, const void *x,
                             const void *const *w, void *const *y) {
  const int rank = g->rank, world = g->world, chunks = p->chunks;
  const int64_t S = p->shard_rows, R = S / chunks, N = p->desc.out_features, Kl = p->gemm_k;
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  const size_t x_row = (size_t)Kl * e, out_row = (size_t)N * e, slot_bytes = (size_t)S * out_row;
  void *own = tp_symm_ptr(g->symm, rank);
  TP_TRY(fork_to_comm(g));
  for (int step = 1; step < world; ++step) {
    int dst = (rank + step) % world;
    void *staging = byte_offset(own, (size_t)world * slot_bytes + (size_t)(step - 1) * slot_bytes);
    for (int j = 0; j < chunks; ++j) {
      size_t row0 = (size_t)(dst * S + j * R);
      void *part[1] = {byte_offset(staging, (size_t)(j * R) * out_row)};
      TP_TRY(gemm_rows(g, p, R, cbyte_offset(x, row0 * x_row), w, part, 0));
      cudaEvent_t ready = g->events[(step - 1) * TP_MAX_CHUNKS + j];
      TP_CUDA(cudaEventRecord(ready, g->main_stream));
      TP_CUDA(cudaStreamWaitEvent(g->comm_stream, ready, 0));
      void *to = byte_offset(tp_symm_ptr(g->symm, dst),
                             (size_t)rank * slot_bytes + (size_t)(j * R) * out_row);
      TP_TRY(push_chunk(g, p, dst, to, part[0], (size_t)R * out_row, j));
    }
  }
  /* The local partial goes straight into its own receive slot. */
  void *own_slot[1] = {byte_offset(own, (size_t)rank * slot_bytes)};
  TP_TRY(gemm_rows(g, p, S, cbyte_offset(x, (size_t)(rank * S) * x_row), w, own_slot, 0));
  for (int j = 0; j < chunks; ++j)
    for (int step = 1; step < world; ++step) TP_TRY(wait_chunk(g, (rank - step + world) % world, j));
  const void *slots[TP_MAX_WORLD];
  for (int r = 0; r < world; ++r) slots[r] = cbyte_offset(own, (size_t)r * slot_bytes);
  TP_CUDA(tp_launch_reduce_sum(p->desc.dtype, y[0], slots, world, (size_t)(S * N), g->main_stream));
  return join_from_comm(g);
}

tp_rc tp_linear_forward(tp_group *g, const tp_linear_plan *p, const void *x, const void *const *w,
                        void *const *y) {
  if (p->backend != TP_BACKEND_DIST) {
    if (g->scratch_bytes < p->workspace_bytes)
      return TP_FAIL(TP_EINTERNAL, "scratch of %zu bytes, plan needs %zu: call tp_linear_prepare",
                     g->scratch_bytes, p->workspace_bytes);
    return stock_forward(g, p, x, w, y);
  }
  if (tp_symm_size(g->symm) < p->workspace_bytes)
    return TP_FAIL(TP_EINTERNAL, "workspace of %zu bytes, plan needs %zu: call tp_linear_prepare",
                   tp_symm_size(g->symm), p->workspace_bytes);
  if (is_gather_side(p->desc.kind)) return dist_ag_forward(g, p, x, w, y);
  return dist_rs_forward(g, p, x, w, y);
}
