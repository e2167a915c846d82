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
 * heuristic calls; a full cache starts again (the heuristic gives the same
 * algorithm a second time). One tp_gemm_scaled per thread: a call sets the
 * scale pointers on the cached descriptor.
 *
 * The backward's GEMMs are the same TN product on other operands (a kind,
 * tp_gemm_scaled_kind): cuBLASLt's FP8 GEMMs need A transposed and B not
 * (its "TN" format: both operands contiguous along k, the contraction), so
 * the caller materialises each operand K-major and quantized along k:
 *   dgrad  dX[T, K] = dY[T, N] · Wᵀ[K, N]ᵀ: A = dY (E5M2, role ACT, blocks
 *          along N), B = Wᵀ (E4M3, role WEIGHT: 128x128 blocks for
 *          fp8-block, one scale per row of Wᵀ, i.e. per input feature, for
 *          fp8-row);
 *   wgrad  dW[N, K] = dYᵀ[N, T] · Xᵀ[K, T]ᵀ: A = dYᵀ (E5M2, role ACT),
 *          B = Xᵀ (E4M3, role ACT): both blocked along T, 1x128 and 1x128
 *          for fp8-block (DeepSeek-V3's 1x128 / 128x1 wgrad).
 * One operand is E5M2 at most: cuBLASLt's FP8 type table has E4M3 x E4M3,
 * E4M3 x E5M2 and E5M2 x E4M3, not E5M2 x E5M2, and no kind asks for it.
 */
#ifndef TP_GEMM_SCALED_H
#define TP_GEMM_SCALED_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "kernels/tp_gemm.h"
#include "kernels/tp_quant.h"

typedef struct tp_gemm_scaled tp_gemm_scaled;

/* Which product a GEMM is (above): the operands' element types and roles. */
typedef enum {
  TP_GEMM_SCALED_FWD = 0, /* A: X E4M3 (ACT), B: W E4M3 (WEIGHT) */
  TP_GEMM_SCALED_DGRAD,   /* A: dY E5M2 (ACT), B: Wᵀ E4M3 (WEIGHT) */
  TP_GEMM_SCALED_WGRAD,   /* A: dYᵀ E5M2 (ACT), B: Xᵀ E4M3 (ACT) */
  TP_GEMM_SCALED_KINDS
} tp_gemm_scaled_kind;

/* "forward", "dgrad", "wgrad". */
const char *tp_gemm_scaled_kind_name(tp_gemm_scaled_kind k);
/* The element type and the scale role of an operand of a kind (b: 0 for A, 1 for B). */
tp_fp8_type tp_gemm_scaled_elem(tp_gemm_scaled_kind k, int b);
tp_quant_role tp_gemm_scaled_role(tp_gemm_scaled_kind k, int b);

/* A cuBLASLt handle, a device workspace of workspace_bytes and an empty
 * algorithm cache. TP_EOOM / TP_ECUDA / TP_ECUBLAS with the library's text. */
TP_MUST_CHECK tp_rc tp_gemm_scaled_create(size_t workspace_bytes, tp_gemm_scaled **out);

/* A context on base's cuBLASLt handle and workspace, borrowed (base outlives
 * it): the group's one context (tp_group.gemm_scaled). Its GEMMs are offered
 * max_workspace_bytes of that workspace (at most base's), the limit the
 * heuristic chooses under, so the algorithms, and the bits, do not depend on
 * how large base's workspace is. The GEMMs share it with base's: enqueue
 * them on a stream ordered with base's (the group's main stream). */
TP_MUST_CHECK tp_rc tp_gemm_scaled_create_on(const tp_gemm *base, size_t max_workspace_bytes,
                                             tp_gemm_scaled **out);
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

/* tp_gemm_scaled_supported for a GEMM of kind `kind` (the reason names it). */
TP_MUST_CHECK tp_rc tp_gemm_scaled_supported_kind(tp_gemm_scaled *g, tp_gemm_scaled_kind kind,
                                                  tp_quant_format format, int64_t m, int64_t n,
                                                  int64_t k, char *reason, size_t cap);

/* One GEMM (device pointers; the operands' element types and scale roles
 * those of `kind`, TP_GEMM_SCALED_FWD when left zero). Zero-initialise and
 * set every field. */
typedef struct tp_gemm_scaled_desc {
  tp_quant_format format;
  int64_t m, n, k;
  const uint8_t *a;     /* X[m, k] (forward), contiguous rows */
  const void *a_scales; /* A's scales: tp_quant_scale_shape(format, role of A, m, k) */
  const uint8_t *b;     /* W[n, k] (forward), contiguous rows */
  const void *b_scales; /* B's scales: tp_quant_scale_shape(format, role of B, n, k) */
  void *d;              /* D[m, n] bf16, contiguous rows */
  tp_gemm_scaled_kind kind;
} tp_gemm_scaled_desc;

/* Enqueues D = dequant(A) · dequant(B)ᵀ on stream (host-asynchronous). The
 * shape must be supported (TP_EREJECT with the reason otherwise: plans ask
 * tp_gemm_scaled_supported first); cuBLASLt's failure as TP_ECUBLAS. */
TP_MUST_CHECK tp_rc tp_gemm_scaled_enqueue(tp_gemm_scaled *g, const tp_gemm_scaled_desc *desc,
                                           cudaStream_t stream);

#endif /* TP_GEMM_SCALED_H */
