# CPU tests of collectors/: overlap math, classification, schedule evidence,
# clock offset, NVTX bookkeeping. Links only the pure-C core and the NVTX
# wrapper, so it builds and runs with TPBENCH_WITH_CUDA=OFF.
tp_add_cpu_test(test_collectors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_collectors.c
                LIBS tp_collect_core tp_nvtx m)

# The collector's refusals (late start after NVTX use, NULL arguments) return
# before any CUPTI call, so they are checked here too, where CUDA is built.
if(TPBENCH_WITH_CUDA)
  tp_add_cpu_test(test_collector_guard SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_collector_guard.c
                  LIBS tp_collectors)
endif()

# The rules against names captured on the H200 pair (tests/data/h200_kernel_names.tsv).
tp_add_cpu_test(test_classify_h200 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_classify_h200.c
                LIBS tp_collect_core tp_nvtx)
# ... and every __global__ kernel in kernels/ has a rule of its own.
target_compile_definitions(test_classify_h200 PRIVATE TP_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# tpbench profile's analysis of a program's events: window selection, breakdown, schedules per
# NVTX range name, kernel summary, display names.
tp_add_cpu_test(test_profile_analysis SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_profile_analysis.c
                LIBS tp_collect_core)
