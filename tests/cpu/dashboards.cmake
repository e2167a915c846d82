# The HTML dashboard, generated from a fixture database and checked in
# headless Chromium (skipped, exit 77, where /usr/bin/chromium is missing).
# Screenshots land in the build directory: dashboard-screenshot.png and
# dashboard-full.png.
tp_add_cpu_test(test_dashboard SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dashboard.c
                LIBS tp_dashboard m)
set_tests_properties(test_dashboard PROPERTIES SKIP_RETURN_CODE 77)
