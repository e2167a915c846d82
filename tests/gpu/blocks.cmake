# GPU test of the layers `tpbench run` times (bench/gpu/block*.c): attention,
# FFN and transformer block, forward and backward, stock and dist_gemm, on a
# TP group of the visible GPUs against a single-device reference (TP=1 on
# every rank), which is itself checked against a float64 CPU forward and
# finite differences; CUDA graph replay and capture with workspace growth.
# The block code is compiled in (it lives in the tpbench binary otherwise).
# Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_blocks
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_blocks.c
                        ${CMAKE_SOURCE_DIR}/bench/gpu/block.c
                        ${CMAKE_SOURCE_DIR}/bench/gpu/block_run.c
                        ${CMAKE_SOURCE_DIR}/bench/gpu/block_fp8.c
                        ${CMAKE_SOURCE_DIR}/bench/gpu/graph.c
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 600)
