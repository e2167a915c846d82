# GPU test of `tpbench drift`'s pieces (bench/gpu/drift.c): the NCCL-order sum
# (kernels/tp_sum_chain.cu) and the training kernels (kernels/tp_train.cu)
# against host references; at TP 1 stock trained twice bit-identical, SGD
# learning one batch, another seed differing, the rejections (at every
# degree); at TP 2, 4 and 8 rs_sum=nccl against stock bit for bit, the ops
# alone and over training steps. The block and drift code is
# compiled in. Exits 77 (skipped) without a GPU.
tp_add_gpu_test(gpu_drift
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_drift.c
                        ${CMAKE_SOURCE_DIR}/bench/gpu/drift.c
                        ${CMAKE_SOURCE_DIR}/bench/gpu/watchdog.c
                        ${TP_BLOCK_SOURCES}
                LIBS tp_quant_gpu tp_gpu_harness m TIMEOUT 900)
tp_add_gpu_shared_tests(gpu_drift TIMEOUTS 600 900 1500)
