# CPU tests of common/: the bootstrap intervals.
tp_add_cpu_test(test_bootstrap SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap.c LIBS tp_common)
