# GPU test of `tpbench profile` from outside a CUDA program (profile_target.cu):
# step windows against the program's own times, kernel counts, --overhead,
# a missing step window, CUPTI claimed by the program. Exits 77 without a device.
add_executable(profile_target ${CMAKE_CURRENT_LIST_DIR}/profile_target.cu)
target_include_directories(profile_target SYSTEM PRIVATE ${CUPTI_INCLUDE_DIR}
                           ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(profile_target PRIVATE CUDA::cudart ${CUPTI_LIBRARY})
tp_add_gpu_test(gpu_profile SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_profile.c
                LIBS tp_store CUDA::cudart m TIMEOUT 300)
target_compile_definitions(gpu_profile PRIVATE TPBENCH_EXE="$<TARGET_FILE:tpbench>"
                           TARGET_EXE="$<TARGET_FILE:profile_target>")
