/*
 * tp_cuda_check.h — return-code checks for CUDA, NCCL and cuBLASLt calls.
 *
 * Each macro evaluates one library call; on failure it records the call's
 * text, the file and line and the library's own error text through TP_FAIL
 * and returns the matching tp_rc from the enclosing function. After a kernel
 * launch, TP_CHECK_LAUNCH() reads the last CUDA error so a bad launch
 * configuration is reported where it happened.
 */
#ifndef TP_CUDA_CHECK_H
#define TP_CUDA_CHECK_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/tp_error.h"

#define TP_CUDA(call)                                                                              \
  do {                                                                                             \
    cudaError_t tp_cuda_err_ = (call);                                                             \
    if (tp_cuda_err_ != cudaSuccess) {                                                             \
      (void)cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */       \
      return TP_FAIL(tp_cuda_err_ == cudaErrorMemoryAllocation ? TP_EOOM : TP_ECUDA,               \
                     "%s failed: %s (%s)", #call, cudaGetErrorString(tp_cuda_err_),                \
                     cudaGetErrorName(tp_cuda_err_));                                              \
    }                                                                                              \
  } while (0)

#define TP_CHECK_LAUNCH(what) TP_CUDA(((void)(what), cudaGetLastError()))

#define TP_NCCL(call, comm)                                                                        \
  do {                                                                                             \
    ncclResult_t tp_nccl_err_ = (call);                                                            \
    if (tp_nccl_err_ != ncclSuccess && tp_nccl_err_ != ncclInProgress) {                           \
      const char *tp_nccl_last_ = (comm) ? ncclGetLastError(comm) : "";                            \
      return TP_FAIL(TP_ENCCL, "%s failed: %s%s%s", #call, ncclGetErrorString(tp_nccl_err_),       \
                     tp_nccl_last_[0] ? ": " : "", tp_nccl_last_);                                 \
    }                                                                                              \
  } while (0)

#define TP_CUBLAS(call)                                                                            \
  do {                                                                                             \
    cublasStatus_t tp_cublas_err_ = (call);                                                        \
    if (tp_cublas_err_ != CUBLAS_STATUS_SUCCESS)                                                   \
      return TP_FAIL(tp_cublas_err_ == CUBLAS_STATUS_ALLOC_FAILED ? TP_EOOM : TP_ECUBLAS,          \
                     "%s failed: %s (%s)", #call, cublasLtGetStatusString(tp_cublas_err_),         \
                     cublasLtGetStatusName(tp_cublas_err_));                                       \
  } while (0)

#endif /* TP_CUDA_CHECK_H */
