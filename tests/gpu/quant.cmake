# GPU test of the low-precision foundations (issue 15), on one GPU: the
# device quantizer against the reference (every format, and shard by shard),
# and the scaled-FP8 cuBLASLt GEMM against a float64 product of the
# dequantized operands; mxfp8 refused with cuBLASLt's reason below sm_100.
# Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_quant SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant.c
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 600)
# The fp8 projection of `tpbench ops` at TP 1 (kernels/tp_linear_fp8.h), per
# format: the plan (mxfp8 rejected below sm_100 with cuBLASLt's reason), the
# worker's numerics verdict on the timed step, the GEMMs alone bit-identical,
# and the check failing on a doubled scale and a NaN. Exits 77 without a GPU.
tp_add_gpu_test(gpu_fp8_ops SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fp8_ops.c
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 600)
