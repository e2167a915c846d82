/*
 * tp_device.h — launchers for tpbench's own device kernels, callable from C.
 *
 * Synchronisation between ranks goes through *signal pads*: a small array of
 * 32-bit slots in every rank's memory, mapped into every peer (tp_symm.h).
 * A producer raises a slot in the consumer's pad with a system-scope release
 * store; the consumer waits for it with an acquire load and lowers it again,
 * so slots reset themselves and the same sequence can be replayed (CUDA
 * graphs). Every wait has a deadline: a peer that never comes makes the
 * kernel print which rank and slot it waited for and trap, which the host
 * sees as a CUDA error instead of a hang.
 *
 * Every launcher returns the launch's cudaError_t (cudaGetLastError()).
 */
#ifndef TP_DEVICE_H
#define TP_DEVICE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TP_MAX_WORLD = TP_MAX_GROUP_RANKS, /* common/tp_vocab.h: the matrices reject larger groups */
  TP_MAX_CHUNKS = 64,
  /* Signal pad layout, in 32-bit slots. */
  TP_SIG_BARRIER = 0,                                            /* [src] */
  TP_SIG_FLAGS = 64,                                             /* [src * TP_MAX_CHUNKS + chunk] */
  TP_SIG_COUNTERS = TP_SIG_FLAGS + TP_MAX_WORLD * TP_MAX_CHUNKS, /* block counters of copies */
  TP_SIG_SLOTS = TP_SIG_COUNTERS + TP_MAX_WORLD * TP_MAX_CHUNKS
};

/* Every rank's signal pad, indexed by rank (own included). */
typedef struct tp_pad_set {
  uint32_t *pad[TP_MAX_WORLD];
} tp_pad_set;

/* All ranks meet: returns (on the stream) once every rank has arrived.
 * One block of one warp; lane p handles peer p. */
TP_MUST_CHECK cudaError_t tp_launch_barrier(tp_pad_set pads, int rank, int world,
                                            uint64_t timeout_ns, cudaStream_t stream);

/* One thread spinning for ns nanoseconds (a test-only slowdown). */
TP_MUST_CHECK cudaError_t tp_launch_delay(uint64_t ns, cudaStream_t stream);

/* Raises slot `slot` in the pad of rank `dst` (release, system scope). */
TP_MUST_CHECK cudaError_t tp_launch_signal(uint32_t *dst_pad, int slot, cudaStream_t stream);

/* Waits until `slot` of this rank's own pad is raised, then lowers it. */
TP_MUST_CHECK cudaError_t tp_launch_wait(uint32_t *own_pad, int slot, int waited_rank,
                                         uint64_t timeout_ns, cudaStream_t stream);

/* Copies bytes (a multiple of 16, both pointers 16-byte aligned) from src to
 * dst, typically dst in a peer's memory, with `blocks` blocks; the last block
 * to finish raises dst_pad[slot], using own_pad[counter_slot] to count blocks.
 * With dst_pad NULL it only copies (own_pad is then unused). */
TP_MUST_CHECK cudaError_t tp_launch_copy_signal(void *dst, const void *src, size_t bytes,
                                                int blocks, uint32_t *own_pad, int counter_slot,
                                                uint32_t *dst_pad, int slot, cudaStream_t stream);

/* out[i] = sum over r = 0..n_src-1, in that order, of src[r][i], accumulated
 * in fp32 and rounded once. */
TP_MUST_CHECK cudaError_t tp_launch_reduce_sum(tp_dtype dt, void *out, const void *const *srcs,
                                               int n_src, size_t count, cudaStream_t stream);

/* Fills count elements with uniform values in [-scale, scale) from a
 * counter-based hash of (seed, index): the same seed gives the same data
 * on every device. */
TP_MUST_CHECK cudaError_t tp_launch_fill_random(tp_dtype dt, void *buf, size_t count, uint64_t seed,
                                                float scale, cudaStream_t stream);

/* Fills with a NaN pattern, so an element nothing wrote is caught. */
TP_MUST_CHECK cudaError_t tp_launch_poison(tp_dtype dt, void *buf, size_t count,
                                           cudaStream_t stream);

/* Compares a with b (count elements): accumulates into acc[0] += sum (a-b)^2,
 * acc[1] += sum b^2, acc[2] = max |a-b|, acc[3] += number of elements whose
 * bits differ, acc[4] += number of non-finite values in a. acc is 5 doubles
 * of device memory, zeroed by the caller. */
TP_MUST_CHECK cudaError_t tp_launch_compare(tp_dtype dt, const void *a, const void *b, size_t count,
                                            double *acc, cudaStream_t stream);

/* Copies count elements of src into dst converting the dtype to fp32 (for
 * host-side references). */
TP_MUST_CHECK cudaError_t tp_launch_to_fp32(tp_dtype dt, const void *src, float *dst, size_t count,
                                            cudaStream_t stream);

/* y[r, c] += bias[c] for rows x cols (row-major, contiguous). */
TP_MUST_CHECK cudaError_t tp_launch_add_bias(tp_dtype dt, void *y, const void *bias, size_t rows,
                                             size_t cols, cudaStream_t stream);

/* Floats of the partial-sum buffer tp_launch_column_partials needs. */
size_t tp_bias_partial_floats(size_t rows, size_t cols);

/* Column sums of dy [rows, cols] over fixed blocks of rows: partial is
 * [ceil(rows / 256), cols] fp32. */
TP_MUST_CHECK cudaError_t tp_launch_column_partials(tp_dtype dt, const void *dy, size_t rows,
                                                    size_t cols, float *partial,
                                                    cudaStream_t stream);

/* out[i] = the largest of srcs[s][i] over the n_src sources, i < count: the
 * ranks' agreed amax from each rank's local one (sources may be peers'
 * memory; the max of the same floats in any order is the same float). */
TP_MUST_CHECK cudaError_t tp_launch_max_f32(float *out, const float *const *srcs, int n_src,
                                            size_t count, cudaStream_t stream);

/* out[c] = sum over sources s (in order), then rows r, of srcs[s][r·cols + c]:
 * fp32 sums, one rounding to dt. Sources may be peers' memory. */
TP_MUST_CHECK cudaError_t tp_launch_sum_f32_rows(tp_dtype dt, void *out, const float *const *srcs,
                                                 int n_src, size_t rows_each, size_t cols,
                                                 cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TP_DEVICE_H */
