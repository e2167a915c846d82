# CPU tests of bench/: statistics, presets, matrix expansion, option parsing,
# rendezvous and launcher (forked processes on loopback), and the tpbench
# binary itself.
foreach(part stats numerics presets ops_matrix cli rendezvous launcher resume hostlist host_facts
             progress_line replay_order)
  tp_add_cpu_test(test_bench_${part} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_${part}.c
                  LIBS tp_bench_cpu)
endforeach()

tp_add_cpu_test(test_bench_tpbench SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_tpbench.c
                LIBS tp_store)
target_compile_definitions(test_bench_tpbench PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_bench_tpbench tpbench)

# The binary under faked srun and mpirun environments (two ranks at once).
tp_add_cpu_test(test_bench_faked_launch SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_faked_launch.c
                LIBS tp_bench_cpu)
target_compile_definitions(test_bench_faked_launch PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>"
                           TP_TEST_CUDA_BUILD=$<BOOL:${TPBENCH_WITH_CUDA}>)
add_dependencies(test_bench_faked_launch tpbench)

# The regression-tracking and trace commands (compare, history, trace,
# import, dashboard) run as a user runs them, on a copy of the real H200
# database with synthesised runs.
tp_add_cpu_test(test_commands SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_commands.c LIBS tp_store)
target_include_directories(test_commands PRIVATE ${JANSSON_INCLUDE_DIR})
target_link_libraries(test_commands PRIVATE ${JANSSON_STATIC})
target_compile_definitions(test_commands PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_commands tpbench)

# docs/clusters.md's Slurm batch scripts (bash -n; sbatch --test-only where slurm-client is
# installed) and the host list expansion against scontrol's.
tp_add_cpu_test(test_launch_readme SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_launch_readme.c
                LIBS tp_bench_cpu)

# A CUDA build must start where there is no driver (a CPU machine, a login
# node) to say so: tpbench and the injection library look the driver up at
# run time, never link it.
if(TPBENCH_WITH_CUDA)
  add_test(NAME tpbench_links_no_driver
           COMMAND sh -c "for f in \"$1\" \"$2\"; do if readelf -d \"$f\" | grep -q 'libcuda\\.so'; then echo \"$f needs libcuda.so\"; exit 1; fi; done"
                   sh $<TARGET_FILE:tpbench> $<TARGET_FILE:tpbench_inject>)
  set_tests_properties(tpbench_links_no_driver PROPERTIES LABELS cpu)
endif()

# The binary against its documentation on the sample databases (the .db files of examples/): runs oldest
# first and one "latest run", CSV/JSON carry every column, trace says why there is no trace,
# compare names the commits it has, the topology without escape codes.
tp_add_cpu_test(test_front_door SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_front_door.c LIBS tp_store)
target_include_directories(test_front_door PRIVATE ${JANSSON_INCLUDE_DIR})
target_link_libraries(test_front_door PRIVATE ${JANSSON_STATIC})
target_compile_definitions(test_front_door PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_front_door tpbench)

# The main job (scripts/main-job.sh, run by scripts/run.sh) with no, one and several GPUs faked
# by an nvidia-smi stub: the sample's report and exit 1; TP 1 and the prediction; tpbench run.
tp_add_cpu_test(test_main_job SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_main_job.c LIBS tp_store)
target_compile_definitions(test_main_job PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>")
add_dependencies(test_main_job tpbench)

# The device scripts' parts that run without a GPU (tests/cpu/device_scripts.sh): device-gpu-tests.sh's
# time stamps keep every line as it came, exit 1 on a failed test, exit 2 and say why on a folder
# that is not a build or a bad degree, exit 1 on a degree without tests; device-recipe-check.sh
# refuses an unknown PARTS word, its comparison rounds rel_err only and names a missing side
# (skips without python3 or ctest).
add_test(NAME device_scripts COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/device_scripts.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(device_scripts PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 120)
