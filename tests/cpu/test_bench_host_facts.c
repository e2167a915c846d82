/*
 * test_bench_host_facts.c — bench/launch/host_facts: what a rank sends rank
 * 0 for the system record survives the wire byte for byte, and a damaged
 * message (length, magic, version, unterminated or control-character
 * strings, negative numbers) is refused; nvidia-smi's query line is read
 * with unknown fields left unknown; the recorded environment is exactly the
 * NCCL_/CUDA_/TORCH_ variables, sorted, control characters masked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "bench/launch/host_facts.h"

static tp_host_facts sample(void) {
  tp_host_facts f;
  memset(&f, 0, sizeof f);
  f.rank = 5;
  f.local_rank = 1;
  f.sm_clock_mhz = 1980;
  f.max_sm_clock_mhz = 1980;
  f.power_limit_mw = 700000;
  strcpy(f.host, "gpu-node-17.cluster.example");
  strcpy(f.gpu_uuid, "GPU-8f2c1d3e-0000-1111-2222-333344445555");
  strcpy(f.pci_bus_id, "0000:19:00.0");
  return f;
}

static void test_round_trip(void **state) {
  (void)state;
  tp_host_facts f = sample(), back;
  unsigned char wire[TP_HOST_FACTS_WIRE];
  tp_host_facts_pack(&f, wire);
  assert_memory_equal(wire, "TPHF\x01", 5);
  assert_int_equal(wire[8], 5); /* rank, little-endian */
  assert_int_equal(tp_host_facts_unpack(wire, sizeof wire, &back), TP_OK);
  assert_int_equal(back.rank, 5);
  assert_int_equal(back.local_rank, 1);
  assert_int_equal(back.sm_clock_mhz, 1980);
  assert_int_equal(back.max_sm_clock_mhz, 1980);
  assert_int_equal(back.power_limit_mw, 700000);
  assert_string_equal(back.host, f.host);
  assert_string_equal(back.gpu_uuid, f.gpu_uuid);
  assert_string_equal(back.pci_bus_id, f.pci_bus_id);
  /* A host name that fills its field is cut to fit, never unterminated. */
  memset(f.host, 'h', sizeof f.host);
  tp_host_facts_pack(&f, wire);
  assert_int_equal(tp_host_facts_unpack(wire, sizeof wire, &back), TP_OK);
  assert_int_equal(strlen(back.host), sizeof back.host - 1);
}

static void expect_refused(const unsigned char *wire, size_t len, const char *needle) {
  tp_host_facts back;
  assert_int_equal(tp_host_facts_unpack(wire, len, &back), TP_EIO);
  if (!strstr(tp_last_error(), needle)) fail_msg("'%s' lacks '%s'", tp_last_error(), needle);
}

static void test_damaged_refused(void **state) {
  (void)state;
  tp_host_facts f = sample();
  unsigned char wire[TP_HOST_FACTS_WIRE], bad[TP_HOST_FACTS_WIRE];
  tp_host_facts_pack(&f, wire);
  expect_refused(wire, sizeof wire - 1, "bytes, not");
  memcpy(bad, wire, sizeof bad);
  bad[0] = 'X';
  expect_refused(bad, sizeof bad, "not a version 1 message");
  memcpy(bad, wire, sizeof bad);
  bad[4] = 2;
  expect_refused(bad, sizeof bad, "not a version 1 message");
  memcpy(bad, wire, sizeof bad);
  bad[8 + 3] = 0x80; /* rank < 0 */
  expect_refused(bad, sizeof bad, "a negative number");
  memcpy(bad, wire, sizeof bad);
  memset(bad + 28, 'x', 256); /* the host name's NUL gone */
  expect_refused(bad, sizeof bad, "the host name has no end");
  memcpy(bad, wire, sizeof bad);
  bad[28 + 256 + 2] = '\n';
  expect_refused(bad, sizeof bad, "the GPU UUID holds a control character");
}

static void test_parse_smi(void **state) {
  (void)state;
  tp_host_facts f;
  memset(&f, 0, sizeof f);
  assert_int_equal(tp_host_facts_parse_smi("GPU-abc, 00000000:9B:00.0, 1980, 1980, 700.00\n", &f),
                   TP_OK);
  assert_string_equal(f.gpu_uuid, "GPU-abc");
  assert_string_equal(f.pci_bus_id, "0000:9b:00.0");
  assert_int_equal(f.sm_clock_mhz, 1980);
  assert_int_equal(f.max_sm_clock_mhz, 1980);
  assert_int_equal(f.power_limit_mw, 700000);
  memset(&f, 0, sizeof f);
  assert_int_equal(tp_host_facts_parse_smi("GPU-x, [N/A], 345, [Not Supported], [N/A]", &f), TP_OK);
  assert_string_equal(f.pci_bus_id, "");
  assert_int_equal(f.sm_clock_mhz, 345);
  assert_int_equal(f.max_sm_clock_mhz, 0);
  assert_int_equal(f.power_limit_mw, 0);
  assert_int_equal(tp_host_facts_parse_smi("GPU-x, 0000:01:00.0, 1", &f), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "has 3 fields, not 5"));
  assert_int_equal(tp_host_facts_parse_smi("a, b, 1, 2, 3, 4", &f), TP_EUSAGE);
  assert_int_equal(tp_host_facts_parse_smi("a, b, fast, 2, 3", &f), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "clocks.sm 'fast' is not a number"));
}

static void test_environment(void **state) {
  (void)state;
  char *env[] = {"PATH=/usr/bin",
                 "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
                 "NCCL_DEBUG=INFO",
                 "CUDA_VISIBLE_DEVICES=0,1",
                 "XNCCL_FAKE=1",
                 "NCCL_ALGO=Ring\tTree",
                 "TPBENCH_JOB_SECRET=00",
                 "CUDA_MODULE_LOADING=LAZY",
                 NULL};
  char *text = tp_host_facts_environment(env);
  assert_non_null(text);
  assert_string_equal(text,
                      "CUDA_MODULE_LOADING=LAZY\nCUDA_VISIBLE_DEVICES=0,1\nNCCL_ALGO=Ring?Tree\n"
                      "NCCL_DEBUG=INFO\nTORCH_NCCL_ASYNC_ERROR_HANDLING=1\n");
  free(text);
  char *none[] = {"HOME=/root", NULL};
  text = tp_host_facts_environment(none);
  assert_string_equal(text, "");
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_damaged_refused),
      cmocka_unit_test(test_parse_smi),
      cmocka_unit_test(test_environment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
