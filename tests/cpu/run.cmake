# CPU tests of `tpbench run` and `tpbench matrix`: the placement contracts
# (including broken compositions), the run matrix (presets, FLOP counts,
# validity rules, host rules, usage errors, matrix files), the activation
# bytes of each checkpointing mode, the throughput
# table's layer rows, and the two commands as a user runs them.
tp_add_cpu_test(test_placement SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_placement.c
                LIBS tp_bench_cpu)
tp_add_cpu_test(test_layer_matrix SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_layer_matrix.c
                LIBS tp_bench_cpu)
tp_add_cpu_test(test_activation SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_activation.c
                LIBS tp_bench_cpu)
tp_add_cpu_test(test_cmd_run SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cmd_run.c LIBS tp_store)
target_compile_definitions(test_cmd_run PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_cmd_run tpbench)

# docs/coverage.md's coverage table is scripts/coverage-table.py's output for
# the committed coverage database; planted failures fail it (skips without
# python3).
add_test(NAME coverage_table COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/coverage_table.sh
                                     ${CMAKE_SOURCE_DIR})
set_tests_properties(coverage_table PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
