/*
 * tp_chunk_rule.c — dist_gemm auto's chunk count and its fuse-or-stock threshold, and the
 * schedules and chunk counts dist_gemm takes (tp_chunk_rule.h), shared by the plan, the
 * projection and the matrices.
 */
#include "common/tp_chunk_rule.h"

#include <stdio.h>

/* Rates of the chunk-count model, measured on the reference H200 pair: a copy-engine push
 * moves about 350 GB/s at these sizes (the link probe in docs/dev/PERF.md: 306-389 GB/s from 8 to
 * 256 MiB per rank); cuBLASLt runs bf16 GEMMs at about 650 TFLOP/s (the model of
 * docs/dev/PERF.md, attempt 2) and fp32 ones at about 50. */
static const double MODEL_PUSH_BYTES_PER_S = 350e9;

static double model_flop_rate(tp_dtype dt) { return dt == TP_BF16 ? 650e12 : 50e12; }

/* Largest of 4, 2, 1 that divides rows and leaves at least min_rows per chunk. */
static int most_chunks(int64_t rows, int64_t min_rows) {
  for (int c = TP_AUTO_MAX_CHUNKS; c > 1; c /= 2)
    if (rows % c == 0 && rows / c >= min_rows) return c;
  return 1;
}

tp_chunk_choice tp_auto_chunks(int gather, int world, int64_t rows, size_t row_bytes,
                               int64_t out_features, int64_t in_features, int n_weights,
                               tp_dtype dtype) {
  tp_chunk_choice c = {.chunks = 1, .push_us = 0, .local_gemm_us = 0};
  const double push_s =
      (double)(world - 1) * (double)rows * (double)row_bytes / MODEL_PUSH_BYTES_PER_S;
  c.push_us = push_s * 1e6;
  if (gather) {
    const double local_gemm_s = 2.0 * (double)rows * ((double)out_features / world) *
                                (double)in_features * (double)n_weights / model_flop_rate(dtype);
    c.local_gemm_us = local_gemm_s * 1e6;
    c.chunks = push_s <= 0.75 * local_gemm_s ? 1 : most_chunks(rows, TP_AUTO_CHUNK_MIN_ROWS);
    return c;
  }
  /* Measured on the H200 pair (docs/dev/PERF.md), forward, 12 row-parallel shapes: two chunks
   * beat one on 11 (the first transfer hides under the second partial GEMM) and four on 10
   * (smaller chunk GEMMs lose more than they hide). */
  c.chunks = rows % 2 == 0 && rows / 2 >= TP_AUTO_CHUNK_MIN_ROWS ? 2 : 1;
  return c;
}

int tp_auto_fuses(int64_t rows, size_t row_bytes) {
  return (double)rows * (double)row_bytes >= (double)TP_AUTO_FUSE_MIN_BYTES;
}

size_t tp_sm_unaligned_chunk(int gather, int backward, int world, int64_t rows, size_t row_bytes,
                             int chunks, int64_t out_features, int64_t in_features, int n_weights,
                             tp_dtype dtype) {
  int fwd = chunks, bwd = chunks;
  if (chunks == 0) {
    fwd =
        tp_auto_chunks(gather, world, rows, row_bytes, out_features, in_features, n_weights, dtype)
            .chunks;
    bwd = backward ? tp_auto_chunks(!gather, world, rows, row_bytes, out_features, in_features,
                                    n_weights, dtype)
                         .chunks
                   : 1;
  }
  if (fwd < 1 || bwd < 1) return 0; /* no chunk: the chunk rules reject it */
  const size_t fwd_bytes = (size_t)(rows / fwd) * row_bytes;
  const size_t bwd_bytes = (size_t)(rows / bwd) * row_bytes;
  if (fwd_bytes % TP_SM_CHUNK_ALIGN != 0) return fwd_bytes;
  return bwd_bytes % TP_SM_CHUNK_ALIGN != 0 ? bwd_bytes : 0;
}

int tp_dist_rejection(tp_schedule schedule, int world, int64_t rows_per_rank, int chunks,
                      char *reason, size_t cap) {
  if (world < 2) {
    snprintf(reason, cap, "dist_gemm needs TP > 1: nothing to gather or scatter");
    return 1;
  }
  if (schedule == TP_SCHED_MULTIMEM) {
    snprintf(reason, cap,
             "multimem: not implemented in this build (its NVLink multicast kernels are not "
             "written; ce and sm push to every peer)");
    return 1;
  }
  if (schedule == TP_SCHED_RING && world > 2) {
    snprintf(reason, cap,
             "ring: beyond TP 2 the ring must forward received chunks to the next neighbour, "
             "which is not built yet; ce and sm push to every peer directly");
    return 1;
  }
  if (chunks < 0 || chunks > TP_DIST_MAX_CHUNKS) {
    snprintf(reason, cap, "chunks %d outside 1..%d", chunks, TP_DIST_MAX_CHUNKS);
    return 1;
  }
  if (chunks > 0 && rows_per_rank % chunks != 0) {
    snprintf(reason, cap, "tokens per rank %lld not divisible by chunks %d",
             (long long)rows_per_rank, chunks);
    return 1;
  }
  return 0;
}
