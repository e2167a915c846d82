# GPU test of `tpbench link` (tests/gpu/test_link.c): at TP 1 only the GEMMs between gaps; at
# TP 2, 4 and 8 every transfer and latency point, then the GEMMs. Runs the tpbench binary of
# this build. Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_link SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_link.c LIBS tp_gpu_harness TIMEOUT 900)
target_compile_definitions(gpu_link PRIVATE TP_BUILD_DIR="${CMAKE_BINARY_DIR}")
add_dependencies(gpu_link tpbench)
tp_add_gpu_shared_tests(gpu_link TIMEOUTS 300 600 900)
