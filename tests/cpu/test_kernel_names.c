/*
 * test_kernel_names.c — kernel names as `tpbench profile`'s kernel table
 * shows them (report/tp_kernel_names.h): a name CUPTI hands over mangled and
 * the same kind of name handed over demangled read alike, through libiberty;
 * what is not C++ is shown as given; the buffer's size is kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "report/tp_kernel_names.h"

/* Names seen from PyTorch and NCCL programs under `tpbench profile`. */
#define NCCL_K "_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE"
#define OWN_COPY_K                                                                                 \
  "_ZN43_GLOBAL__N__52d7e809_10_tp_copy_cu_fcb292b118copy_signal_kernelEP5uint4PKS0_mPjS4_"
#define ONE_SHOT_K                                                                                 \
  "_ZN12_GLOBAL__N_126one_shot_all_reduce_kernelIN3c108BFloat16ELi16ELi2EEEvPPT_S4_S4_mmPPjmm"
#define SYMM_BARRIER_K "_ZN4c10d16symmetric_memory14barrier_kernelEPPjiiim"
/* the mixed table: this one came mangled ... */
#define ELTWISE_MANGLED                                                                            \
  "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_"  \
  "T1_"
/* ... and this one demangled, as CUPTI gave it */
#define ELTWISE_DEMANGLED                                                                          \
  "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "             \
  "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
#define GEMM_K "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"

static void test_one_rule_for_every_name(void **state) {
  (void)state;
  static const struct {
    const char *name, *shown;
  } cases[] = {
      {SYMM_BARRIER_K, "c10d::symmetric_memory::barrier_kernel(...)"},
      {"_Z18copy_signal_kernelPKvPvm", "copy_signal_kernel(...)"},
      {NCCL_K, "ncclDevKernel_AllGather_RING_LL(...)"},
      {ONE_SHOT_K, "(anonymous namespace)::one_shot_all_reduce_kernel<...>(...)"},
      {OWN_COPY_K, "(anonymous namespace)::copy_signal_kernel(...)"},
      {"_Z5setupv", "setup()"},
      {"_ZNSt6vector4sizeEv", "std::vector::size()"},
      /* a constructor, which the home-grown reader left mangled */
      {"_ZN4c10d5ClassC1Ev", "c10d::Class::Class()"},
      /* the same kernel, mangled or demangled, reads the same */
      {ELTWISE_MANGLED, "at::native::vectorized_elementwise_kernel<...>(...)"},
      {ELTWISE_DEMANGLED, "at::native::vectorized_elementwise_kernel<...>(...)"},
      /* not C++, or mangled past reading: as given */
      {GEMM_K, GEMM_K},
      {"_ZN4c10d16symm", "_ZN4c10d16symm"},
      {"_Z", "_Z"},
      {"", ""},
  };
  char buf[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *got = tp_kernel_display_name(cases[i].name, buf, sizeof buf);
    assert_ptr_equal(got, buf);
    if (strcmp(got, cases[i].shown) != 0)
      fail_msg("'%s' shown as '%s', expected '%s'", cases[i].name, got, cases[i].shown);
  }
  char small[8];
  assert_string_equal(tp_kernel_display_name(SYMM_BARRIER_K, small, sizeof small), "c10d::s");
  assert_string_equal(tp_kernel_display_name(NULL, small, sizeof small), "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_rule_for_every_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
