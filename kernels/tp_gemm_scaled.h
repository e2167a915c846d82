/*
 * tp_gemm_scaled.h — one scaled-FP8 GEMM through cuBLASLt, for the formats
 * of tp_quant.h:
 *     D[m, n] = dequant(A)[m, k] · dequant(B)[n, k]ᵀ
 * with A the activation X (E4M3, row-major, role ACT), B the weight W[n, k]
 * (E4M3, row-major, role WEIGHT), D bf16 row-major, fp32 accumulation, the
 * scales applied by cuBLASLt in the mode of the format (tp_quant.h's table)
 * and in exactly the layout tp_quant_ref / tp_quant_enqueue write.
 *
 * Row-major to column-major, as tp_gemm.h does it: the row-major D[m, n] is
 * cuBLASLt's column-major Dᶜ[n, m] = Wᶜ · Xᶜ with cuBLASLt's A = W (stored
 * column-major k x n, ld k, TRANSA = T) and cuBLASLt's B = X (column-major
 * k x m, ld k, TRANSB = N): the "TN" form FP8 needs. So the weight's scales
 * go to CUBLASLT_MATMUL_DESC_A_SCALE_POINTER/_A_SCALE_MODE and the
 * activation's to the B ones; cuBLASLt's M is n and its N is m.
 *
 * Whether the installed cuBLASLt and this GPU run a format is asked from
 * cuBLASLt's heuristic (cublasLtMatmulAlgoGetHeuristic), never from version
 * numbers: mxfp8 (VEC32_UE8M0) needs sm_100, so on sm_90 the answer is a
 * rejection with the library's words. Nothing is emulated. Algorithms are
 * cached per shape (the first without split-K), so timed loops make no
 * heuristic calls. One tp_gemm_scaled per thread: a call sets the scale
 * pointers on the cached descriptor.
 */
#ifndef TP_GEMM_SCALED_H
#define TP_GEMM_SCALED_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "kernels/tp_quant.h"

typedef struct tp_gemm_scaled tp_gemm_scaled;

/* A cuBLASLt handle, a device workspace of workspace_bytes and an empty
 * algorithm cache. TP_EOOM / TP_ECUDA / TP_ECUBLAS with the library's text. */
TP_MUST_CHECK tp_rc tp_gemm_scaled_create(size_t workspace_bytes, tp_gemm_scaled **out);
void tp_gemm_scaled_destroy(tp_gemm_scaled *g);

/* Whether cuBLASLt has an algorithm for this format and shape on the current
 * device. TP_OK (the algorithm is cached for tp_gemm_scaled_enqueue);
 * TP_EREJECT when the heuristic answers CUBLAS_STATUS_NOT_SUPPORTED or
 * CUBLAS_STATUS_INVALID_VALUE (its refusal of a scale mode) or finds no
 * algorithm, with a reason (written to reason, cap bytes, may be NULL,
 * and recorded as the last error) naming the format, its scale modes, the
 * shape, the device's sm and cuBLASLt's version and answer; TP_EINTERNAL for
 * an empty dimension or unknown format; another cuBLASLt or CUDA failure as
 * TP_ECUBLAS / TP_ECUDA. */
TP_MUST_CHECK tp_rc tp_gemm_scaled_supported(tp_gemm_scaled *g, tp_quant_format format, int64_t m,
                                             int64_t n, int64_t k, char *reason, size_t cap);

/* One GEMM (device pointers; elem of both operands E4M3). Zero-initialise and
 * set every field. */
typedef struct tp_gemm_scaled_desc {
  tp_quant_format format;
  int64_t m, n, k;
  const uint8_t *a;     /* X[m, k] E4M3, contiguous rows */
  const void *a_scales; /* X's scales: tp_quant_scale_shape(format, TP_QROLE_ACT, m, k) */
  const uint8_t *b;     /* W[n, k] E4M3, contiguous rows */
  const void *b_scales; /* W's scales: tp_quant_scale_shape(format, TP_QROLE_WEIGHT, n, k) */
  void *d;              /* D[m, n] bf16, contiguous rows */
} tp_gemm_scaled_desc;

/* Enqueues D = dequant(A) · dequant(B)ᵀ on stream (host-asynchronous). The
 * shape must be supported (TP_EREJECT with the reason otherwise: plans ask
 * tp_gemm_scaled_supported first); cuBLASLt's failure as TP_ECUBLAS. */
TP_MUST_CHECK tp_rc tp_gemm_scaled_enqueue(tp_gemm_scaled *g, const tp_gemm_scaled_desc *desc,
                                           cudaStream_t stream);

#endif /* TP_GEMM_SCALED_H */
