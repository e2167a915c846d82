/*
 * tp_linear_fused.c — the transfers of the fused (dist_gemm) schedules:
 * flags between ranks, chunk pushes into a peer's symmetric workspace (the
 * copy engine, or the copy kernel for sm), the fork to and join from the
 * comm stream, and the two pipelines the passes of every recipe are built
 * from — an all-gather of payloads consumed chunk by chunk as they land,
 * and a reduce-scatter fed chunk by chunk by the GEMM of its partials
 * (layouts and flag slots in tp_linear_internal.h). A recipe brings its
 * payload (rows as they are, or fp8 rows with their scales), the GEMM that
 * consumes or produces it, and how the local rows' sum is made.
 */
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_linear_internal.h"
#include "kernels/tp_sum_chain.h"

int linear_flag_slot(int src, int phase, int chunk) {
  return TP_SIG_FLAGS + src * TP_MAX_CHUNKS + phase * LINEAR_PHASE_CHUNKS + chunk;
}

/* A stream memory operation where usable (fenced; no kernel launch between
 * the work's end and the peer's wake-up), or the signal kernel while a
 * graph is captured. */
tp_rc linear_raise_flag(tp_group *g, const tp_linear_plan *p, cudaStream_t stream, int dst,
                        int slot) {
  tp_pad_set pads = tp_symm_pads(linear_heap(g, p));
  if (tp_group_memops_usable(g, stream))
    return tp_group_write_flag(g, stream, pads.pad[dst] + slot, 1);
  TP_CUDA(tp_launch_signal(pads.pad[dst], slot, stream));
  return TP_OK;
}

tp_rc linear_push_chunk(tp_group *g, const tp_linear_plan *p, int dst, void *dst_ptr,
                        const void *src_ptr, size_t bytes, int phase, int chunk) {
  tp_pad_set pads = tp_symm_pads(linear_heap(g, p));
  const int slot = linear_flag_slot(g->rank, phase, chunk);
  if (p->schedule == TP_SCHED_SM) {
    int counter = TP_SIG_COUNTERS + dst * TP_MAX_CHUNKS + phase * LINEAR_PHASE_CHUNKS + chunk;
    TP_CUDA(tp_launch_copy_signal(dst_ptr, src_ptr, bytes, p->sm_blocks, pads.pad[g->rank], counter,
                                  pads.pad[dst], slot, g->comm_stream));
    return TP_OK;
  }
  TP_CUDA(cudaMemcpyAsync(dst_ptr, src_ptr, bytes, cudaMemcpyDeviceToDevice, g->comm_stream));
  return linear_raise_flag(g, p, g->comm_stream, dst, slot);
}

tp_rc linear_wait_chunk(tp_group *g, const tp_linear_plan *p, int src, int phase, int chunk) {
  tp_pad_set pads = tp_symm_pads(linear_heap(g, p));
  uint32_t *flag = pads.pad[g->rank] + linear_flag_slot(src, phase, chunk);
  if (tp_group_memops_usable(g, g->main_stream)) {
    TP_TRY(tp_group_wait_flag(g, g->main_stream, flag, 1));
    return tp_group_write_flag(g, g->main_stream, flag, 0);
  }
  TP_CUDA(tp_launch_wait(pads.pad[g->rank], linear_flag_slot(src, phase, chunk), src,
                         g->wait_timeout_ns, g->main_stream));
  return TP_OK;
}

/* Waits for chunk j of every peer, nearest preceding rank first. */
static tp_rc wait_peers(tp_group *g, const tp_linear_plan *p, int phase, int j) {
  for (int step = 1; step < g->world; ++step)
    TP_TRY(linear_wait_chunk(g, p, (g->rank - step + g->world) % g->world, phase, j));
  return TP_OK;
}

tp_rc linear_wait_gather(tp_group *g, const tp_linear_plan *p, int phase, int chunks) {
  for (int j = 0; j < chunks; ++j) TP_TRY(wait_peers(g, p, phase, j));
  return TP_OK;
}

/* Meets every rank before touching a peer's workspace (it may still be read
 * by the peer's previous op). */
tp_rc linear_fork_to_comm(tp_group *g, const tp_linear_plan *p) {
  cudaEvent_t fork = g->events[TP_EVENT_POOL - 1];
  TP_CUDA(cudaEventRecord(fork, g->main_stream));
  TP_CUDA(cudaStreamWaitEvent(g->comm_stream, fork, 0));
  TP_CUDA(tp_launch_barrier(tp_symm_pads(linear_heap(g, p)), g->rank, g->world, g->wait_timeout_ns,
                            g->comm_stream));
  return TP_OK;
}

tp_rc linear_join_from_comm(tp_group *g) {
  cudaEvent_t join = g->events[TP_EVENT_POOL - 2];
  TP_CUDA(cudaEventRecord(join, g->comm_stream));
  TP_CUDA(cudaStreamWaitEvent(g->main_stream, join, 0));
  return TP_OK;
}

/* ---- the all-gather side -------------------------------------------------------------- */

size_t linear_gather_shard_bytes(const tp_linear_plan *p, const linear_gather *gather) {
  if (gather->payload_bytes) return gather->payload_bytes;
  return (size_t)p->shard_rows * gather->row_bytes;
}

size_t linear_gather_chunk_bytes(const tp_linear_plan *p, const linear_gather *gather) {
  if (gather->payload_bytes) return gather->payload_bytes; /* moved whole */
  return (size_t)(p->shard_rows / gather->chunks) * gather->row_bytes;
}

static tp_rc check_gather(const linear_gather *gather) {
  if (gather->payload_bytes && gather->chunks != 1)
    return TP_FAIL(TP_EINTERNAL, "a payload that is not rows moves whole: 1 chunk, not %d",
                   gather->chunks);
  return TP_OK;
}

tp_rc linear_push_gather(tp_group *g, const tp_linear_plan *p, const linear_gather *gather) {
  TP_TRY(check_gather(gather));
  const int rank = g->rank, world = g->world;
  const size_t shard = linear_gather_shard_bytes(p, gather);
  const size_t chunk = linear_gather_chunk_bytes(p, gather);
  for (int j = 0; j < gather->chunks; ++j)
    for (int step = 1; step < world; ++step) {
      int dst = (rank + step) % world;
      void *to = ptr_at(tp_symm_ptr(linear_heap(g, p), dst),
                        gather->offset + (size_t)rank * shard + (size_t)j * chunk);
      TP_TRY(linear_push_chunk(g, p, dst, to, cptr_at(gather->rows_local, (size_t)j * chunk), chunk,
                               gather->phase, j));
    }
  return TP_OK;
}

tp_rc linear_consume_gather(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                            const linear_gather *gather, linear_rows_fn consume) {
  TP_TRY(check_gather(gather));
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / gather->chunks;
  const size_t shard = linear_gather_shard_bytes(p, gather);
  const size_t chunk = linear_gather_chunk_bytes(p, gather);
  const void *gathered = ptr_at(tp_symm_ptr(linear_heap(g, p), rank), gather->offset);
  TP_TRY(consume(g, p, t, gather->ctx, S, gather->rows_local, (size_t)(rank * S)));
  for (int j = 0; j < gather->chunks; ++j)
    for (int step = 1; step < world; ++step) {
      int src = (rank - step + world) % world;
      TP_TRY(linear_wait_chunk(g, p, src, gather->phase, j));
      const size_t row0 = (size_t)(src * S + j * R);
      TP_TRY(consume(g, p, t, gather->ctx, R,
                     cptr_at(gathered, (size_t)src * shard + (size_t)j * chunk), row0));
    }
  return TP_OK;
}

tp_rc linear_fused_all_gather(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                              const linear_gather *gather, linear_rows_fn consume) {
  TP_TRY(linear_push_gather(g, p, gather));
  return linear_consume_gather(g, p, t, gather, consume);
}

tp_rc linear_place_own_rows(tp_group *g, const tp_linear_plan *p, void *gathered,
                            const void *rows_local, size_t row_bytes) {
  size_t off = (size_t)(g->rank * p->shard_rows) * row_bytes;
  TP_CUDA(cudaMemcpyAsync(ptr_at(gathered, off), rows_local, (size_t)p->shard_rows * row_bytes,
                          cudaMemcpyDeviceToDevice, g->main_stream));
  return TP_OK;
}

/* ---- the reduce-scatter side ---------------------------------------------------------- */

/* rs_sum=nccl, the local chunk j: the local rows' partial rounded to the
 * dtype into this rank's own receive slot, then every rank's partial summed
 * as NCCL's ring reduce-scatter sums this rank's chunk — starting from the
 * next rank's, each following rank adding its own, this rank's last, one
 * rounding per add (tp_sum_chain.h). Ring order is taken to be rank order:
 * at TP 2 that is the one add of two operands, whatever NCCL's algorithm;
 * beyond TP 2 NCCL's ring, channels and algorithm choice were not checked. */
static tp_rc local_chunk_nccl_sum(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                  const linear_scatter *sc, size_t row, int j) {
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / sc->chunks;
  const size_t slot = (size_t)S * row, chunk_off = (size_t)(j * R) * row;
  void *own = tp_symm_ptr(linear_heap(g, p), rank);
  void *mine = ptr_at(own, (size_t)rank * slot + chunk_off);
  TP_TRY(sc->partial(g, p, t, sc->ctx, rank * S + j * R, R, NULL, mine));
  const void *ring[TP_MAX_WORLD];
  for (int step = 1; step <= world; ++step)
    ring[step - 1] = cptr_at(own, (size_t)((rank + step) % world) * slot + chunk_off);
  TP_CUDA(tp_launch_sum_chain(p->desc.dtype, ptr_at(sc->out, chunk_off), ring, world,
                              (size_t)R * row / tp_dtype_bytes(p->desc.dtype), g->main_stream));
  return TP_OK;
}

/* LINEAR_SUM_SLOTS, the local chunk j: the local rows' partial into this
 * rank's own receive slot (computed while the peers' land), then every
 * rank's partial summed in rank order, fp32, one rounding. */
static tp_rc local_chunk_slots(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                               const linear_scatter *sc, size_t row, int j) {
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / sc->chunks;
  const size_t slot = (size_t)S * row, chunk_off = (size_t)(j * R) * row;
  void *own = tp_symm_ptr(linear_heap(g, p), rank);
  TP_TRY(sc->partial(g, p, t, sc->ctx, rank * S + j * R, R, NULL,
                     ptr_at(own, (size_t)rank * slot + chunk_off)));
  const void *parts[TP_MAX_WORLD];
  for (int r = 0; r < world; ++r) {
    if (r != rank) TP_TRY(linear_wait_chunk(g, p, r, sc->phase, j));
    parts[r] = cptr_at(own, (size_t)r * slot + chunk_off);
  }
  TP_CUDA(tp_launch_reduce_sum(p->desc.dtype, ptr_at(sc->out, chunk_off), parts, world,
                               (size_t)R * row / tp_dtype_bytes(p->desc.dtype), g->main_stream));
  return TP_OK;
}

/* The local chunk j: once every peer's partial of chunk j has landed, the
 * GEMM of the local rows adds them in its epilogue (fp32, one rounding)
 * and writes the output rows directly: no separate reduction pass. With
 * more than one peer, the peers' partials are first summed in rank order
 * into this rank's own receive slot. rs_sum=nccl sums as NCCL does instead
 * (above); a GEMM that adds nothing in its epilogue, in slots (above). */
static tp_rc local_chunk(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                         const linear_scatter *sc, size_t row, int j) {
  if (sc->sum == LINEAR_SUM_SLOTS) return local_chunk_slots(g, p, t, sc, row, j);
  const int rank = g->rank, world = g->world;
  const int64_t S = p->shard_rows, R = S / sc->chunks;
  const size_t slot = (size_t)S * row, chunk_off = (size_t)(j * R) * row;
  void *own = tp_symm_ptr(linear_heap(g, p), rank);
  TP_TRY(wait_peers(g, p, sc->phase, j));
  if (p->desc.rs_sum == TP_RS_SUM_NCCL) return local_chunk_nccl_sum(g, p, t, sc, row, j);
  const void *acc = cptr_at(own, (size_t)((rank + 1) % world) * slot + chunk_off);
  if (world > 2) {
    const void *peers[TP_MAX_WORLD];
    int n = 0;
    for (int r = 0; r < world; ++r)
      if (r != rank) peers[n++] = cptr_at(own, (size_t)r * slot + chunk_off);
    void *sum = ptr_at(own, (size_t)rank * slot + chunk_off);
    TP_CUDA(tp_launch_reduce_sum(p->desc.dtype, sum, peers, n,
                                 (size_t)R * row / tp_dtype_bytes(p->desc.dtype), g->main_stream));
    acc = sum;
  }
  return sc->partial(g, p, t, sc->ctx, rank * S + j * R, R, acc, ptr_at(sc->out, chunk_off));
}

/* Computes chunk j of the partial of peer dst's rows into staging, and
 * pushes it once the main stream has written it. */
static tp_rc push_partial(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                          const linear_scatter *sc, size_t row, int step, int j) {
  const int rank = g->rank, world = g->world, dst = (rank + step) % world;
  const int64_t S = p->shard_rows, R = S / sc->chunks;
  const size_t slot = (size_t)S * row;
  void *staging = ptr_at(tp_symm_ptr(linear_heap(g, p), rank),
                         (size_t)world * slot + (size_t)(step - 1) * slot);
  void *part = ptr_at(staging, (size_t)(j * R) * row);
  TP_TRY(sc->partial(g, p, t, sc->ctx, dst * S + j * R, R, NULL, part));
  cudaEvent_t ready = g->events[(step - 1) * TP_MAX_CHUNKS + j];
  TP_CUDA(cudaEventRecord(ready, g->main_stream));
  TP_CUDA(cudaStreamWaitEvent(g->comm_stream, ready, 0));
  void *to =
      ptr_at(tp_symm_ptr(linear_heap(g, p), dst), (size_t)rank * slot + (size_t)(j * R) * row);
  return linear_push_chunk(g, p, dst, to, part, (size_t)R * row, sc->phase, j);
}

tp_rc linear_fused_reduce_scatter(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                  const linear_scatter *sc) {
  const size_t row = (size_t)sc->width * tp_dtype_bytes(p->desc.dtype);
  for (int j = 0; j < sc->chunks; ++j) {
    for (int step = 1; step < g->world; ++step) TP_TRY(push_partial(g, p, t, sc, row, step, j));
    if (j > 0) TP_TRY(local_chunk(g, p, t, sc, row, j - 1));
  }
  return local_chunk(g, p, t, sc, row, sc->chunks - 1);
}
