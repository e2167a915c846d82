# cmake/fuzz.cmake — the TPBENCH_FUZZ option: builds the libFuzzer targets of
# tests/fuzz/ (scripts/fuzz.sh runs them). Every host C file is then compiled
# with libFuzzer's coverage instrumentation, AddressSanitizer and UBSan, so
# the fuzzer sees the branches of the code under test; only clang has
# libFuzzer, and the GPU side has nothing to fuzz, so CUDA must be off.
option(TPBENCH_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only, CUDA off)" OFF)
if(TPBENCH_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TPBENCH_FUZZ needs clang (configure with CC=clang), "
                        "not ${CMAKE_C_COMPILER_ID}")
  endif()
  if(TPBENCH_WITH_CUDA)
    message(FATAL_ERROR "TPBENCH_FUZZ needs -DTPBENCH_WITH_CUDA=OFF")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=address,undefined)
endif()
