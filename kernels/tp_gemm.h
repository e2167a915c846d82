/*
 * tp_gemm.h — the one place where tpbench's row-major matrices meet
 * cuBLASLt's column-major convention.
 *
 * tp_gemm_enqueue computes, in row-major terms,
 *     C[m, n] = op(A) · op(B)  (+ beta · C)
 * where op(A) is A[m, k] (or Aᵀ of a stored [k, m] when trans_a) and op(B) is
 * B[k, n] (or Bᵀ of a stored [n, k] when trans_b); lda/ldb/ldc are the
 * row-major leading dimensions (elements per stored row). The forward of a
 * linear layer, Y[T, N] = X[T, K] · W[N, K]ᵀ, is trans_a = 0, trans_b = 1.
 *
 * bf16 runs with fp32 accumulation; fp32 runs in full fp32 (no TF32).
 * Algorithms come from cuBLASLt's heuristic, preferring ones without split-K
 * so that a row's result does not depend on how many rows the call has: a
 * GEMM over a chunk of rows gives the bits the whole GEMM gives. Chosen
 * algorithms are cached per shape, so timed loops make no heuristic calls.
 */
#ifndef TP_GEMM_H
#define TP_GEMM_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"

typedef struct tp_gemm tp_gemm;

TP_MUST_CHECK tp_rc tp_gemm_create(size_t workspace_bytes, tp_gemm **out);
void tp_gemm_destroy(tp_gemm *gemm);

/* The cuBLASLt workspace every GEMM of this context is offered (bytes). */
size_t tp_gemm_workspace_bytes(const tp_gemm *gemm);

/* The context's cuBLASLt handle and workspace, which the scaled fp8 GEMMs of
 * the same group borrow (tp_gemm_scaled_create_on): one handle and one
 * workspace per group, whatever the recipes its projections run. */
cublasLtHandle_t tp_gemm_handle(const tp_gemm *gemm);
void *tp_gemm_workspace(const tp_gemm *gemm);

/* One GEMM, in tpbench's row-major terms:
 *     D[m, n] = op(A) · op(B) + beta · C_in
 * with D at c, and C_in at c_in or, when c_in is NULL, at c itself (the
 * plain C = op(A) · op(B) + beta · C). C_in and D share the layout (ldc).
 * With c_in and beta = 1 a received partial sum is added inside the GEMM's
 * fp32 epilogue and D is rounded once. Zero-initialise and set the fields a
 * call needs: beta 0 and c_in NULL give C = op(A) · op(B). */
typedef struct tp_gemm_desc {
  tp_dtype dtype;       /* A, B and C (batched: A and B; tp_gemm_batch.c_dtype is C's) */
  int trans_a, trans_b; /* op(A) = Aᵀ of a stored [k, m]; op(B) = Bᵀ of a stored [n, k] */
  int64_t m, n, k;
  const void *a;
  int64_t lda; /* elements per stored row of A */
  const void *b;
  int64_t ldb;
  void *c; /* the output D */
  int64_t ldc;
  const void *c_in; /* NULL: C is c (in place) */
  float beta;
} tp_gemm_desc;

/* Enqueues one GEMM on stream (host-asynchronous). TP_EINTERNAL for an
 * empty dimension; cuBLASLt's failure otherwise. */
TP_MUST_CHECK tp_rc tp_gemm_enqueue(tp_gemm *gemm, const tp_gemm_desc *desc, cudaStream_t stream);

/* The batch of tp_gemm_enqueue_batched. Strides are in elements of the
 * operand's own type (A and B: the input dtype; C: c_dtype). */
typedef struct tp_gemm_batch {
  int64_t count;                        /* batch members, 1 .. INT32_MAX */
  int64_t stride_a, stride_b, stride_c; /* member i of A starts at a + i·stride_a, ... */
  tp_dtype c_dtype; /* C's element type: dtype, or TP_FP32 with bf16 inputs (fp32 output) */
  float alpha;      /* C_i = alpha · op(A_i) · op(B_i) + beta · C_i */
} tp_gemm_batch;

/* Strided-batched tp_gemm_enqueue: for i in [0, batch->count),
 *     C_i[m, n] = alpha · op(A_i) · op(B_i) + beta · C_i
 * with tp_gemm_enqueue's row-major convention (trans flags, leading dimensions
 * in elements per stored row) applied to every member, and the same
 * algorithm cache (keyed by the strides and C's type as well). The
 * alignment cuBLASLt is told about covers every member, not just the first.
 * A leading dimension larger than the row lets a member be a strided view,
 * e.g. rows B apart for one batch element of seq-major activations.
 * desc->c_in must be NULL (C is updated in place). */
TP_MUST_CHECK tp_rc tp_gemm_enqueue_batched(tp_gemm *gemm, const tp_gemm_desc *desc,
                                            const tp_gemm_batch *batch, cudaStream_t stream);

/* cuBLASLt's version, e.g. "13.0.2". */
void tp_gemm_version(char *buf, size_t cap);

#endif /* TP_GEMM_H */
