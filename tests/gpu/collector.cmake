# GPU test of the CUPTI collector: a kernel, a D2D copy, a memset and an NVTX
# range come back as events with sane timestamps, categories and launch
# times; an untraced window with the collector attached leaves no record and
# no NVTX range, a traced one after it records both; a peer copy is PtoP
# communication (2+ devices).
# Exits 77 (skipped) without a device.
tp_add_gpu_test(gpu_collector
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_collector.c ${CMAKE_CURRENT_LIST_DIR}/collector_kernels.cu
                LIBS tp_collectors tp_kernels CUDA::cudart TIMEOUT 120)
