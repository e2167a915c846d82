# CPU tests of `tpbench drift`: its options and rejections, the drift table and
# its verdict from stored steps (report/tp_drift.h), --show, and the other
# reading commands on a database holding drift runs.
tp_add_cpu_test(test_drift SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_drift.c
                LIBS tp_bench_cpu tp_report m)
target_compile_definitions(test_drift PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_drift tpbench)
