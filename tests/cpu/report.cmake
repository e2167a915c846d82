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
# Output files (report/tp_output.h): refused targets (FIFO, device link,
# folder, the database), planted links, failed writes, racing writers.
tp_add_cpu_test(test_output SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_output.c LIBS tp_report)
