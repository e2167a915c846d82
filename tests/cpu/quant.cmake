# CPU tests of kernels/tp_quant.h (issue 15): fp8 encodings, scale rules and
# layouts, the shard-vs-whole invariant, the flattening negative control and
# the shard rule. Links only the pure-C tp_quant_core, so it builds and runs
# with TPBENCH_WITH_CUDA=OFF (and under the sanitizers).
tp_add_cpu_test(test_quant SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant.c LIBS tp_quant_core m)
# The fp8 dtypes of `tpbench ops` on the CPU: vocabulary, matrix parsing and
# the plan-time rules (bench/matrix/fp8_rules.h) for formats x layouts x TP 2/4/8.
tp_add_cpu_test(test_fp8_matrix SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fp8_matrix.c
                LIBS tp_bench_cpu)
# The re-placement of all-gathered shards' scales into the whole's layout (fp8
# communication): formats x TP 2/4/8 x shard shapes against quantizing the whole; the
# wgrad's transposed column pieces (bytes and scales) against the whole's transpose.
tp_add_cpu_test(test_quant_gather SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_gather.c
                LIBS tp_quant_core m)
