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
# fp8 communication (kernels/tp_linear_fp8_comm.h) on one GPU, TP ranks simulated: the
# re-placement of all-gathered shards' scales against quantizing the whole (formats x TP
# 2/4/8 x shard layouts, a planted off-by-one caught) and each chunk's scaled GEMM on its
# own scales. Exits 77 without a GPU.
tp_add_gpu_test(gpu_fp8_comm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fp8_comm.c
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 600)
# The same binary's real TP paths (`tp`: stock comm fp8 / bf16, dist_gemm ce and sm, the
# scatter side, the backward, the collectives alone, a planted off-by-one scale block) at TP
# 2, 4 and 8, each degree skipped with a message above the visible GPUs ...
add_test(NAME gpu_fp8_comm_tp COMMAND gpu_fp8_comm tp)
set_tests_properties(gpu_fp8_comm_tp PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900 RESOURCE_LOCK gpu
                     ENVIRONMENT "NCCL_NVLS_ENABLE=0;TORCH_SYMM_MEM_DISABLE_MULTICAST=1;NVSHMEM_DISABLE_NVLS=1")
# ... and per degree with every rank on device 0 (TPBENCH_TEST_SHARE_GPU, tests/gpu/
# gpu_harness.h: NCCL over loopback sockets, the symmetric heap over CUDA IPC on one
# device): the code of TP > 1 checked on a machine of one GPU; nothing is timed.
tp_add_gpu_shared_tests(gpu_fp8_comm TIMEOUTS 600 900 1500)
# The wgrad's transposed column pieces on one GPU, TP ranks simulated: each rank's shard
# transposed and quantized with the agreed amax, the pieces gathered rank-major and re-placed
# (bytes and scales) equal the whole's transpose quantized, bit for bit (formats x TP 2/4/8 x
# shapes, E4M3 and E5M2; planted faults caught). Exits 77 without a GPU.
tp_add_gpu_test(gpu_fp8_columns SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fp8_columns.c
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 600)
