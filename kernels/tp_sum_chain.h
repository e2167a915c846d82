/*
 * tp_sum_chain.h — the cross-rank sum of NCCL's ring reduce-scatter, as
 * dist_gemm's rs_sum=nccl mode runs it (tp_vocab.h's tp_rs_sum): every
 * operand is already in the dtype, and each add of two operands is computed
 * in fp32 and rounded to the dtype before the next one, in the order given.
 *
 * Why this is NCCL's arithmetic: NCCL's bf16 sum adds two bf16 values with
 * one rounding of the exact sum (__hadd on sm_80 and later, float and back
 * before). The fp32 sum of two bf16 values is exact unless their exponents
 * are more than 16 apart, and then the smaller one is far below half a bf16
 * unit of the larger, so rounding the fp32 sum gives the same bf16 value as
 * rounding the exact one. fp32 sums are fp32 adds in both.
 */
#ifndef TP_SUM_CHAIN_H
#define TP_SUM_CHAIN_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = (...((srcs[0][i] + srcs[1][i]) + srcs[2][i]) ... + srcs[n_src-1][i]), each add
 * rounded to dt (bf16 or fp32). n_src in 1..TP_MAX_WORLD (tp_device.h); with 1 a copy.
 * Sources may be peers' memory; out may alias srcs[0]. Returns the launch's error
 * (cudaErrorInvalidValue for a dtype or count it refuses). */
TP_MUST_CHECK cudaError_t tp_launch_sum_chain(tp_dtype dt, void *out, const void *const *srcs,
                                              int n_src, size_t count, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TP_SUM_CHAIN_H */
