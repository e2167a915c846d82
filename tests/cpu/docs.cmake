# CPU tests of the documentation (labels cpu and docs; scripts/test.sh runs them in build/ only,
# not again under the sanitizers): docs/cli.md is what the option tables print
# (tests/cpu/cli_docs.sh), and every command the pages show runs on copies of
# the sample databases and prints what the page says (tests/cpu/doc_commands.sh,
# the convention in docs/dev/testing.md).
add_test(NAME test_cli_docs
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cli_docs.sh $<TARGET_FILE:tpbench>
                 ${CMAKE_SOURCE_DIR}/docs/cli.md)
set_tests_properties(test_cli_docs PROPERTIES LABELS "cpu;docs" TIMEOUT 120)
# Every command the pages show (README.md, docs/, examples/) runs on copies of the sample
# databases and prints what the page shows; the expected-failure list names the pages that say
# what the binary should print and does not yet. About a minute; longer under the sanitizers.
add_test(NAME test_doc_commands
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/doc_commands.sh --exe $<TARGET_FILE:tpbench>
                 --root ${CMAKE_SOURCE_DIR} --xfail ${CMAKE_CURRENT_LIST_DIR}/doc_commands.xfail
                 --cuda $<IF:$<BOOL:${TPBENCH_WITH_CUDA}>,yes,no>)
set_tests_properties(test_doc_commands PROPERTIES LABELS "cpu;docs" TIMEOUT 900)
# ... and the doc-test fails on planted drift: a changed figure, an unmarked block, a failing
# command, each in a copy of README.md.
add_test(NAME test_doc_commands_drift
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/doc_commands.sh --exe $<TARGET_FILE:tpbench>
                 --root ${CMAKE_SOURCE_DIR} --self-test)
set_tests_properties(test_doc_commands_drift PROPERTIES LABELS "cpu;docs" TIMEOUT 300)
