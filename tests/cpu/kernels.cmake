# CPU tests of kernels/' pure-C parts besides the quantizer (quant.cmake):
# the device-memory ledger (tp_device_alloc.h) over a fake host allocator.
# Links only tp_alloc_core, so it builds and runs with TPBENCH_WITH_CUDA=OFF
# (and under the sanitizers).
tp_add_cpu_test(test_device_alloc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_alloc.c
                LIBS tp_alloc_core)
# The ranks' agreement on an allocation (tp_agree.h) over threads standing in
# for ranks, and the planted failure's knob. Pure C (tp_agree_core).
tp_add_cpu_test(test_agree SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_agree.c LIBS tp_agree_core
                Threads::Threads)
