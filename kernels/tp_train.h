/*
 * tp_train.h — the kernels of a training step around a layer (`tpbench
 * drift`): the loss and its gradient, the sums of squares of the global
 * gradient norm, and the optimizer updates of bf16 (or fp32) weights kept
 * with an fp32 master copy.
 *
 * Every reduction runs in a fixed order with no atomics, its shape a function
 * of the element count alone (never of the device), so the same inputs give
 * the same bits on every run and every GPU. Elementwise updates read the
 * dtype, compute in fp32 and round once when they store.
 */
#ifndef TP_TRAIN_H
#define TP_TRAIN_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* row_sums[r] = Σ_c (y[r, c] − target[r, c])² for rows x cols (row-major, contiguous), in fp32:
 * 256 threads per row each sum a strided slice in order, then a fixed tree. A row's sum depends
 * on that row alone, so a loss summed over rows in their global order is the same at every TP
 * degree. */
TP_MUST_CHECK cudaError_t tp_launch_sq_err_row_sums(tp_dtype dt, const void *y, const void *target,
                                                    int64_t rows, int64_t cols, float *row_sums,
                                                    cudaStream_t stream);

/* dy[i] = scale · (y[i] − target[i]), fp32, rounded once (the gradient of a mean squared error
 * is scale = 2 / elements). */
TP_MUST_CHECK cudaError_t tp_launch_sq_err_grad(tp_dtype dt, const void *y, const void *target,
                                                size_t count, float scale, void *dy,
                                                cudaStream_t stream);

/* fp32 partial sums tp_launch_sum_squares needs. */
enum { TP_SUM_SQUARES_PARTIALS = 512 };

/* *out = Σ_i x[i]² (out: one double of device memory): TP_SUM_SQUARES_PARTIALS contiguous slices,
 * each summed in fp32 (strided per thread, then a fixed tree) into partials, then the partials
 * added in order in fp64 by one thread. */
TP_MUST_CHECK cudaError_t tp_launch_sum_squares(tp_dtype dt, const void *x, size_t count,
                                                float *partials, double *out, cudaStream_t stream);

/* SGD without momentum or decay: master[i] -= lr · grad[i]; w[i] = master[i] rounded to dt. */
TP_MUST_CHECK cudaError_t tp_launch_sgd_step(tp_dtype dt, void *w, float *master, const void *grad,
                                             size_t count, float lr, cudaStream_t stream);

/* One AdamW step (decoupled weight decay, PyTorch's torch.optim.AdamW order): bias corrections
 * 1 − beta1^t and 1 − beta2^t for step t >= 1, computed by the caller in fp64. */
typedef struct tp_adamw_step {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;
} tp_adamw_step;

/* master *= 1 − lr·wd; m = b1·m + (1 − b1)·g; v = b2·v + (1 − b2)·g²;
 * master −= (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps); w = master rounded to dt. */
TP_MUST_CHECK cudaError_t tp_launch_adamw_step(tp_dtype dt, void *w, float *master, float *m,
                                               float *v, const void *grad, size_t count,
                                               const tp_adamw_step *step, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TP_TRAIN_H */
