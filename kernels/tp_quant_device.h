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

/* dst (cols x rows) = the transpose of src (rows x cols, contiguous), bf16
 * (the only dtype the fp8 recipes store; TP_EINTERNAL otherwise, for empty
 * shapes or more than 65535 · 32 rows). The backward's K-major operands:
 * cuBLASLt's FP8 GEMMs take both operands contiguous along the contraction
 * (tp_gemm_scaled.h), so dYᵀ, Xᵀ and Wᵀ are materialised, then quantized. */
TP_MUST_CHECK tp_rc tp_quant_transpose_enqueue(tp_dtype dt, const void *src, int64_t rows,
                                               int64_t cols, void *dst, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TP_QUANT_DEVICE_H */
