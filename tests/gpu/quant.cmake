# GPU test of the low-precision foundations (issue 15), on one GPU: the
# device quantizer against the reference (every format, and shard by shard),
# and the scaled-FP8 cuBLASLt GEMM against a float64 product of the
# dequantized operands; mxfp8 refused with cuBLASLt's reason below sm_100.
# Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_quant SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant.c
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 600)
