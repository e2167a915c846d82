# GPU test of tpbench's device-memory accounting (kernels/tp_device_alloc.h,
# results.alloc_peak_bytes) on one GPU at TP 1: the ledger over cudaMalloc
# against the driver's reading, a block case's tensors and a step's joint
# peak against block.h's list, and what `tpbench ops` and `tpbench run`
# record against plans made on the same GPU. Runs the tpbench binary of this
# build. Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_alloc_peak
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_alloc_peak.c
                        ${TP_BLOCK_SOURCES}
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 900)
target_compile_definitions(gpu_alloc_peak PRIVATE TP_BUILD_DIR="${CMAKE_BINARY_DIR}")
add_dependencies(gpu_alloc_peak tpbench)
