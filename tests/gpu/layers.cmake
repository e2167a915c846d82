# GPU test of the non-TP layer pieces (kernels/tp_layers.h): RMSNorm, RoPE,
# causal GQA attention and SwiGLU, forward and backward, bf16 and fp32,
# against float64 CPU references, on one GPU. Exits 77 (skipped) without one.
tp_add_gpu_test(gpu_layers SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_layers.c
                LIBS tp_gpu_harness m TIMEOUT 300)
