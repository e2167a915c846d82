add_library(tp_gpu_harness STATIC ${CMAKE_CURRENT_LIST_DIR}/gpu_harness.c)
target_include_directories(tp_gpu_harness PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(tp_gpu_harness PUBLIC tp_kernels tp_bench_cpu ${CMOCKA_SHARED})
# The TP projections per degree (tests/gpu/test_linear.c): cases NAME/tpN at 1, 2, 4, 8 on
# the visible GPUs, and per degree on one shared GPU.
tp_add_gpu_test(gpu_linear SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_linear.c
                LIBS tp_gpu_harness m TIMEOUT 1200)
tp_add_gpu_shared_tests(gpu_linear TIMEOUTS 600 900 1500)
# NCCL windows need the ranks inside one NCCL host: the shared entries skip, saying why.
tp_add_gpu_test(gpu_stock_window SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stock_window.c
                LIBS tp_gpu_harness m TIMEOUT 600)
tp_add_gpu_shared_tests(gpu_stock_window TIMEOUTS 300 300 300)
tp_add_gpu_test(gpu_symm_nccl SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_symm_nccl.c
                LIBS tp_gpu_harness TIMEOUT 600)
tp_add_gpu_shared_tests(gpu_symm_nccl TIMEOUTS 300 300 300)
# tp_gemm's row contract on one GPU: a chunk of rows gives the whole GEMM's bits (bf16 and
# fp32, llama3-1b's projection shapes in 2, 4 and 8 chunks). Exits 77 without a GPU.
tp_add_gpu_test(gpu_gemm_rows SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gemm_rows.c
                LIBS tp_gpu_harness TIMEOUT 120)
