# CPU tests of report/ (the throughput table on a synthetic database).
tp_add_cpu_test(test_report SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_report.c LIBS tp_report)
target_include_directories(test_report PRIVATE ${JANSSON_INCLUDE_DIR})
