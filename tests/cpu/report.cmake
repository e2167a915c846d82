# CPU tests of report/ (the throughput table on a synthetic database).
tp_add_cpu_test(test_report SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_report.c LIBS tp_report)
target_include_directories(test_report PRIVATE ${JANSSON_INCLUDE_DIR})
# Regression tracking: the Mann-Whitney test, compare's verdicts, history and
# trends (synthetic samples, and a synthesised copy of the real H200 run).
tp_add_cpu_test(test_compare SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_compare.c LIBS tp_report m)
# What report/ makes of traces: the table's trace columns and the Chrome
# trace export (synthesised traces on a copy of the real H200 run).
tp_add_cpu_test(test_report_trace SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_report_trace.c
                LIBS tp_report m)
# Every trace of the sample exported (Chrome and Kineto) and checked for nesting; NVTX
# projections and launch arrows; the Kineto files against what HTA reads, and HTA's
# comm/compute overlap computed from them next to tpbench's own.
tp_add_cpu_test(test_trace_nesting SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_trace_nesting.c
                LIBS tp_report m)
# Output files (report/tp_output.h): refused targets (FIFO, device link,
# folder, the database), planted links, failed writes, racing writers.
tp_add_cpu_test(test_output SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_output.c LIBS tp_report)
# CI formats (compare --format junit/bmf, --changed-only, --top; report
# --format openmetrics; the XML and OpenMetrics escaping) on a synthetic
# comparison and the sample database.
tp_add_cpu_test(test_compare_ci SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_compare_ci.c
                LIBS tp_report m)
# The JUnit file of `tpbench compare --format junit` read by a real JUnit
# parser (python3-junitparser, via check_junit.py) and xmllint; skipped (77)
# where junitparser is missing.
tp_add_cpu_test(test_compare_junit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_compare_junit.c
                LIBS tp_report m)
target_compile_definitions(test_compare_junit PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_compare_junit tpbench)
set_tests_properties(test_compare_junit PROPERTIES SKIP_RETURN_CODE 77)
# The run header's system block: launcher and Slurm ids, ranks, environment,
# topology, escaped; nothing for a run without a record.
tp_add_cpu_test(test_system_report SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_system_report.c
                LIBS tp_report)
# tpbench profile without a GPU: the per-process event file, its import (overlap over the
# process window, kernel summary, failed and empty commands) and the command's exit status.
tp_add_cpu_test(test_profile SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_profile.c
                LIBS tp_report tp_bench_cpu m)
target_compile_definitions(test_profile PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>"
                           $<$<BOOL:${TPBENCH_WITH_CUDA}>:TPBENCH_PROFILE_INJECT=1>)
add_dependencies(test_profile tpbench)
# ... and the import of a profile the size of a real job's (a million events, 20,000 windows)
# completes: the analysis is not windows x events.
tp_add_cpu_test(test_profile_scale SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_profile_scale.c
                LIBS tp_report)
# About 12 s in a release build, two minutes under the sanitizers on a busy machine.
set_tests_properties(test_profile_scale PROPERTIES TIMEOUT 600)
# tpbench project: the model's arithmetic by hand, interpolation, the validation table on a
# synthetic database, refusals, and the command on a copy of the sample database.
tp_add_cpu_test(test_project SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_project.c
                LIBS tp_report m)
target_include_directories(test_project PRIVATE ${JANSSON_INCLUDE_DIR})
target_compile_definitions(test_project PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_project tpbench)
# Kernel names in tpbench profile's table: mangled and demangled names read alike (libiberty).
tp_add_cpu_test(test_kernel_names SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kernel_names.c
                LIBS tp_report)
# One headline rule: report (JSON, markdown), OpenMetrics, compare and the dashboard agree with
# tp_report_headline on every run of every sample database, toy models apart.
tp_add_cpu_test(test_headline SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_headline.c LIBS tp_report)
target_include_directories(test_headline PRIVATE ${JANSSON_INCLUDE_DIR})
target_compile_definitions(test_headline PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_headline tpbench)
# Hostile text: every reading command on poisoned copies of the sample databases (escape
# sequences, HTML, '|', line breaks, bytes that are not UTF-8 in every text column) exits 0
# where the clean copy does and prints nothing raw.
tp_add_cpu_test(test_hostile_text SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hostile_text.c
                LIBS tp_store)
target_compile_definitions(test_hostile_text PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_hostile_text tpbench)
set_tests_properties(test_hostile_text PROPERTIES TIMEOUT 1200)
# The demo database (examples/tpbench-demo.db, scripts/device-demo-db.sh): compare quiet on its
# identical pair, gating its planted slowdown; skipped (77) until the file exists.
tp_add_cpu_test(test_demo_db SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_demo_db.c LIBS tp_store)
target_include_directories(test_demo_db PRIVATE ${JANSSON_INCLUDE_DIR})
target_link_libraries(test_demo_db PRIVATE ${JANSSON_STATIC})
target_compile_definitions(test_demo_db PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_demo_db tpbench)
set_tests_properties(test_demo_db PROPERTIES SKIP_RETURN_CODE 77)
# scripts/gemm-model-check.py: project --gemms' estimates against GEMM rows planted at known
# ratios (skips without python3).
add_test(NAME gemm_model_check COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/gemm_model_check.sh
                                       ${CMAKE_SOURCE_DIR} $<TARGET_FILE:tpbench>)
set_tests_properties(gemm_model_check PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
