# CPU tests of store/ (and the embedded schemas/).
tp_add_cpu_test(test_store SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_store.c LIBS tp_store)
