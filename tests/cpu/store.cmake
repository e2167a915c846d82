# CPU tests of store/ (and the embedded schemas/).
tp_add_cpu_test(test_store SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_store.c LIBS tp_store)
# The second migration, traces, configuration readers and import, on a copy
# of the real H200 database in tests/data.
tp_add_cpu_test(test_store_trace SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_store_trace.c
                LIBS tp_store)
# Hostile and damaged databases, and the reading commands that must never
# change one (tpbench itself runs here, as a user runs it).
tp_add_cpu_test(test_store_hostile SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_store_hostile.c
                LIBS tp_store)
target_compile_definitions(test_store_hostile PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_store_hostile tpbench)
