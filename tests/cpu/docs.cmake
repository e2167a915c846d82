# CPU tests of the documentation: docs/cli.md is what the option tables print
# (tests/cpu/cli_docs.sh), and every command the pages show runs on copies of
# the sample databases and prints what the page says (tests/cpu/doc_commands.sh,
# the convention in docs/dev/testing.md).
add_test(NAME test_cli_docs
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cli_docs.sh $<TARGET_FILE:tpbench>
                 ${CMAKE_SOURCE_DIR}/docs/cli.md)
set_tests_properties(test_cli_docs PROPERTIES LABELS cpu TIMEOUT 120)
