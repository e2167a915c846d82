# The HTML dashboard, generated from a fixture database and checked in
# headless Chromium (skipped, exit 77, where /usr/bin/chromium is missing).
# Screenshots land in the build directory: dashboard-screenshot.png and
# dashboard-full.png.
tp_add_cpu_test(test_dashboard SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dashboard.c
                LIBS tp_dashboard m)
set_tests_properties(test_dashboard PROPERTIES SKIP_RETURN_CODE 77)

# What the dashboard writes, without a browser: the sample's page size, the
# trace files (decoded against the export), the default timeline, the link
# points, pruning and refusals. zlib and libsodium decode the trace files.
tp_add_cpu_test(test_dashboard_files SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dashboard_files.c
                LIBS tp_dashboard m)
target_include_directories(test_dashboard_files PRIVATE ${ZLIB_INCLUDE_DIR} ${SODIUM_INCLUDE_DIR})
target_link_libraries(test_dashboard_files PRIVATE ${ZLIB_STATIC} ${SODIUM_STATIC})

# The sample's dashboard in at most 3 s of CPU (held in optimised builds without sanitizers),
# and a dashboard killed at any moment leaves its folder whole (tp_dashboard_place.h).
tp_add_cpu_test(test_dashboard_whole SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dashboard_whole.c
                LIBS tp_store)
target_compile_definitions(test_dashboard_whole PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
if(NOT TPBENCH_SANITIZE)
  target_compile_definitions(test_dashboard_whole PRIVATE
                             $<$<CONFIG:Release,RelWithDebInfo,MinSizeRel>:TP_TEST_OPTIMIZED=1>)
endif()
add_dependencies(test_dashboard_whole tpbench)
