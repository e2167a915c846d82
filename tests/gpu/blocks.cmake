# GPU test of the layers `tpbench run` times (bench/gpu/block*.c): attention,
# FFN and transformer block, forward and backward, stock and dist_gemm, on a
# TP group of the visible GPUs against a single-device reference (TP=1 on
# every rank), which is itself checked against a float64 CPU forward and
# finite differences; CUDA graph replay and capture with workspace growth;
# every activation-checkpointing mode against ac=none bit for bit.
# The block code is compiled in (it lives in the tpbench binary otherwise).
# Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_blocks
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_blocks.c
                        ${TP_BLOCK_SOURCES}
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 1200)
tp_add_gpu_shared_tests(gpu_blocks TIMEOUTS 600 900 1500)
# The fp8 layers of `run` at TP 1 (bench/gpu/block_fp8.h, issue 15): attention,
# FFN and block, fwd and fwd+bwd, per fp8 format: finite outputs, each projection
# against float64 products, the layer against the bf16 layer (y < 0.1, gradients
# < 0.25), the GEMMs alone bit-identical, the checks failing on doubled scales;
# mxfp8 refused below sm_100 with cuBLASLt's reason, dist_gemm refused. At TP 2,
# 4 and 8 (a shape grown with the degree: whole 128-blocks per rank), forward and
# backward: stock with comm_dtype fp8 and bf16 (the same bits), its projections'
# checks, against the bf16 layer, the planted faults; dist_gemm ce and sm against
# stock within the harness's layer tolerance; the GEMMs and collectives alone;
# each rejection's reason, and the TP 2 shape rejected at TP 4/8 where the rules
# say. Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_fp8_blocks
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fp8_blocks.c
                        ${CMAKE_SOURCE_DIR}/bench/stats/numerics.c
                        ${TP_BLOCK_SOURCES}
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 1200)
tp_add_gpu_shared_tests(gpu_fp8_blocks TIMEOUTS 600 900 1500)

# GPU test of several CUDA graph sizes on one workspace (run's graph=mixed):
# three sizes of the block warmed eagerly (the workspace or scratch grown to
# the largest), captured frozen, replayed interleaved, each bit-identical to
# its eager step; a larger size's capture refused with the reason. Stock at
# TP 1, 2, 4, 8; dist_gemm at TP 2, 4, 8. Exits 77 without a GPU.
tp_add_gpu_test(gpu_graph_sizes
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_graph_sizes.c
                        ${TP_BLOCK_SOURCES}
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 600)
tp_add_gpu_shared_tests(gpu_graph_sizes TIMEOUTS 300 600 900)

# GPU test of FSDP's collectives beside a block's step (bench/gpu/fsdp.h, run's
# dp > 1 at TP 1 and fsdp_traffic=on): every output equal to the step without
# them bit for bit, the gathered weights equal to the weights, the
# reduce-scattered shard against an all-reduce's slice, planted faults (a
# wrong gather offset, a changed gradient shard, a missing partial) caught. TP 1:
# dp 1 and fsdp_traffic; 2, 4, 8 ranks: dp N x tp 1 and fsdp_traffic at TP N.
# Exits 77 without a GPU.
tp_add_gpu_test(gpu_fsdp
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fsdp.c
                        ${TP_BLOCK_SOURCES}
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 900)
tp_add_gpu_shared_tests(gpu_fsdp TIMEOUTS 600 900 1500)
