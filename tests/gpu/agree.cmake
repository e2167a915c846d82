# GPU test of the review's reliability hazards (tests/gpu/test_agree.c): at
# TP 1 the ledger counting a window's bytes (or NCCL 2.28.3's refusal at one
# rank, asserted), the planted workspace failure (TPBENCH_TEST_FAIL_ALLOC)
# and `tpbench drift`'s watchdog on a planted hang (TPBENCH_TEST_HANG_STEP);
# at TP 2, 4 and 8 the last rank's planted allocation failure failing every
# rank's windows (where NCCL gives them), workspace and `tpbench ops`
# configurations alike within seconds, and drift with the last rank hung.
# Runs the tpbench binary of this build. Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_agree
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_agree.c
                LIBS tp_kernels tp_gpu_harness m TIMEOUT 1200)
target_compile_definitions(gpu_agree PRIVATE TP_BUILD_DIR="${CMAKE_BINARY_DIR}")
add_dependencies(gpu_agree tpbench)
tp_add_gpu_shared_tests(gpu_agree TIMEOUTS 600 600 900)
