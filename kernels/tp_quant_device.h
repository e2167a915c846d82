/*
 * tp_quant_device.h — the device quantizer of tp_quant.h (kernels in
 * tp_quant.cu), callable from C. Same arguments, same formats, same scale
 * layouts and the same bits as the reference tp_quant_ref: data through the
 * hardware's fp8 conversion (round to nearest even, saturating), scales by
 * the rules tp_quant.h shares between host and device, amax reduced on the
 * device. Everything is enqueued on the given stream (host-asynchronous);
 * every CUDA call and launch is checked (TP_ECUDA with the call, file, line
 * and CUDA's text).
 */
#ifndef TP_QUANT_DEVICE_H
#define TP_QUANT_DEVICE_H

#include <cuda_runtime_api.h>

#include "kernels/tp_quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Quantizes a->x into a->q and a->scales (device pointers; padding zeroed).
 * With a->agreed_amax (device) the scales come from it (fp8: 1 float,
 * fp8-row: a->rows floats), as tp_quant_shard_check asks on split tensors;
 * without it from the tensor's own amax. TP_EINTERNAL for bad arguments
 * (tp_quant_args_check). */
TP_MUST_CHECK tp_rc tp_quant_enqueue(const tp_quant_args *a, cudaStream_t stream);

/* The amax the ranks agree on, from this tensor alone, into amax (device):
 * fp8 one float, fp8-row a->rows floats (what tp_quant_local_amax_ref
 * gives). The agreement itself (an all-reduce max) is the caller's. */
TP_MUST_CHECK tp_rc tp_quant_local_amax_enqueue(const tp_quant_args *a, float *amax,
                                                cudaStream_t stream);

/* out[i] = the hardware's saturating round-to-nearest-even conversion of
 * x[i] (device arrays of n): what every quantize kernel stores, exposed so
 * tests can hold it against tp_fp8_encode value by value. */
TP_MUST_CHECK tp_rc tp_quant_encode_enqueue(tp_fp8_type t, const float *x, size_t n, uint8_t *out,
                                            cudaStream_t stream);

/* The quantization of the TRANSPOSE of a->x in one pass (the backward's
 * wgrad operands dYᵀ and Xᵀ, quantized along T): a->x, rows, cols, ld
 * describe the bf16 source as it lies ([T, C], rows T); a->q receives the
 * transpose (cols x rows bytes, contiguous) and a->scales the layout of
 * tp_quant_scale_shape(format, role, cols, rows). The bytes are those of
 * tp_quant_enqueue (and tp_quant_ref) on the transposed tensor. a->agreed_amax
 * as for tp_quant_enqueue, counted on the transpose: fp8 1 float, fp8-row
 * a->cols floats (one per source column); the tensor amax of the source is
 * the transpose's, so an amax found for the untransposed tensor serves.
 * Every format with blocks inside a row of the transpose (all but
 * fp8-block's 128x128 weight blocks: TP_EINTERNAL, transpose then quantize);
 * bf16 in only; at most 65535 · 128 source rows. */
TP_MUST_CHECK tp_rc tp_quant_transpose_quantize_enqueue(const tp_quant_args *a,
                                                        cudaStream_t stream);

/* dst (cols x rows) = the transpose of src (rows x cols, contiguous), bf16
 * (the only dtype the fp8 recipes store; TP_EINTERNAL otherwise, for empty
 * shapes or more than 65535 · 32 rows). The backward's K-major operands:
 * cuBLASLt's FP8 GEMMs take both operands contiguous along the contraction
 * (tp_gemm_scaled.h), so dYᵀ, Xᵀ and Wᵀ are materialised, then quantized. */
TP_MUST_CHECK tp_rc tp_quant_transpose_enqueue(tp_dtype dt, const void *src, int64_t rows,
                                               int64_t cols, void *dst, cudaStream_t stream);

/* The whole's stored scales (padding zeroed) from the gathered shards'
 * scales (device buffers, tp_scale_gather_bytes and the whole's
 * tp_quant_scale_bytes): what tp_quant_replace_gathered_ref writes, bit for
 * bit. A no-op copy for OUTER_VEC would do, but every layout takes the same
 * kernel so a wrong shape fails here too. */
TP_MUST_CHECK tp_rc tp_quant_replace_gathered_enqueue(const tp_scale_gather *g,
                                                      const void *gathered, void *whole,
                                                      cudaStream_t stream);

/* whole [rows, tp · shard_cols] (bytes) from the rank-major gathered
 * column pieces, piece r at gathered + r · piece_stride (rows · shard_cols
 * when back to back; more where every piece starts aligned): what
 * tp_quant_replace_columns_ref writes for back-to-back pieces (tp_quant.h's
 * column shards: the wgrad's sequence-sharded transposed operands). */
TP_MUST_CHECK tp_rc tp_quant_replace_columns_enqueue(const uint8_t *gathered, size_t piece_stride,
                                                     int tp, int64_t rows, int64_t shard_cols,
                                                     uint8_t *whole, cudaStream_t stream);

/* The amax the ranks agree on before quantizing a->x's TRANSPOSE
 * (tp_quant_transpose_quantize_enqueue's arguments), from this shard alone,
 * into amax (device): fp8 one float, fp8-row a->cols floats (one per source
 * column, a row of the transpose). */
TP_MUST_CHECK tp_rc tp_quant_transpose_local_amax_enqueue(const tp_quant_args *a, float *amax,
                                                          cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TP_QUANT_DEVICE_H */
