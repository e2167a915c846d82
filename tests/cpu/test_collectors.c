/*
 * test_collectors.c — CPU tests of collectors/' pure-C parts: the overlap math
 * (disjoint, nested, touching, several streams, several ranks, clipping,
 * empty, what counts as comm and compute, and a brute-force cross-check on
 * random traces; synchronisation apart from both), kernel classification on
 * real kernel names, the schedule evidence verdicts (over a window, and per
 * op inside its NVTX ranges: ok, failed, not checked), the clock-offset
 * measurement and the NVTX wrapper's bookkeeping and gate. No GPU, no CUPTI.
 *
 * Kernel names below were taken from public traces and sources (profiler
 * tables, Nsight and PyTorch profiler outputs, test suites of trace tools);
 * tpbench's own mangled names were produced by nvcc 13.0 from kernels/tp_copy.cu and
 * kernels/tp_signal.cu. Names marked "synthetic" exist only to probe a rule's edge.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectors/tp_collector.h"
#include "collectors/tp_nvtx.h"

/* ---- helpers ---------------------------------------------------------------- */

static tp_event kernel(int rank, uint32_t stream, tp_event_category cat, uint64_t s, uint64_t e) {
  tp_event ev = {0};
  ev.rank = rank;
  ev.device = rank;
  ev.stream = stream;
  ev.type = TP_EV_KERNEL;
  ev.category = cat;
  ev.name = cat == TP_CAT_COMM   ? "ncclDevKernel_AllGather_RING_LL"
            : cat == TP_CAT_SYNC ? "barrier_kernel"
                                 : "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT";
  ev.start_ns = s;
  ev.end_ns = e;
  ev.peer_device = -1;
  return ev;
}

static tp_event named_kernel(const char *name, uint64_t s, uint64_t e) {
  tp_event ev = kernel(0, 7, tp_classify_kernel(name), s, e);
  ev.name = name;
  return ev;
}

static tp_event copy(int rank, tp_copy_kind kind, uint64_t s, uint64_t e) {
  tp_event ev = kernel(rank, 13, tp_classify_copy(kind), s, e);
  ev.type = TP_EV_MEMCPY;
  ev.copy_kind = kind;
  ev.name = "memcpy";
  ev.bytes = 1 << 20;
  return ev;
}

static tp_event other_type(int rank, tp_event_type type, tp_event_category cat, uint64_t s,
                           uint64_t e) {
  tp_event ev = kernel(rank, 7, cat, s, e);
  ev.type = type;
  ev.name = "x";
  return ev;
}

static tp_overlap overlap_of(const tp_event *ev, size_t n, int rank, uint64_t ws, uint64_t we) {
  tp_overlap o;
  memset(&o, 0xAB, sizeof o);
  assert_int_equal(tp_overlap_compute(ev, n, rank, ws, we, &o), TP_OK);
  return o;
}

static void assert_overlap(const tp_overlap *o, uint64_t comm, uint64_t compute, uint64_t overlap) {
  assert_int_equal(o->comm_ns, comm);
  assert_int_equal(o->compute_ns, compute);
  assert_int_equal(o->overlap_ns, overlap);
  assert_int_equal(o->exposed_comm_ns, comm - overlap);
  double pct = comm ? 100.0 * (double)overlap / (double)comm : 0.0;
  assert_true(fabs(o->overlap_pct - pct) < 1e-9);
}

/* The lengths an overlap must come out with, in ns. */
typedef struct lengths {
  uint64_t comm, compute, overlap;
} lengths;

/* The overlap of `rank` over [ws, we), asserted to have the lengths `want`. */
static tp_overlap expect_overlap(const tp_event *ev, size_t n, int rank, uint64_t ws, uint64_t we,
                                 lengths want) {
  tp_overlap o = overlap_of(ev, n, rank, ws, we);
  assert_overlap(&o, want.comm, want.compute, want.overlap);
  return o;
}

#define GEMM_K "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"

/* ---- overlap ---------------------------------------------------------------- */

static void test_overlap_empty(void **state) {
  (void)state;
  tp_overlap o = expect_overlap(NULL, 0, 0, 100, 200, (lengths){0, 0, 0});
  assert_int_equal(o.window_ns, 100);
  assert_int_equal(o.n_comm, 0);
  assert_int_equal(o.n_compute, 0);
  /* an empty window is valid too */
  o = overlap_of(NULL, 0, 0, 50, 50);
  assert_int_equal(o.window_ns, 0);
}

static void test_overlap_disjoint(void **state) {
  (void)state;
  tp_event ev[] = {kernel(0, 1, TP_CAT_COMM, 0, 10), kernel(0, 2, TP_CAT_GEMM, 20, 30)};
  tp_overlap o = expect_overlap(ev, 2, 0, 0, 100, (lengths){10, 10, 0});
  assert_true(o.overlap_pct == 0.0);
}

static void test_overlap_nested(void **state) {
  (void)state;
  /* a long collective hides two GEMMs; a nested comm kernel inside the collective adds nothing */
  tp_event ev[] = {kernel(0, 1, TP_CAT_COMM, 0, 100), kernel(0, 1, TP_CAT_COMM, 40, 60),
                   kernel(0, 2, TP_CAT_GEMM, 10, 20), kernel(0, 2, TP_CAT_ATTENTION, 30, 40)};
  tp_overlap o = expect_overlap(ev, 4, 0, 0, 100, (lengths){100, 20, 20});
  assert_true(fabs(o.overlap_pct - 20.0) < 1e-9);
  assert_int_equal(o.n_comm, 2);
  assert_int_equal(o.n_compute, 2);
  /* and the other way round: compute fully covers communication: 100% hidden */
  tp_event ev2[] = {kernel(0, 2, TP_CAT_GEMM, 0, 100), kernel(0, 1, TP_CAT_COMM, 10, 30)};
  o = expect_overlap(ev2, 2, 0, 0, 100, (lengths){20, 100, 20});
  assert_int_equal(o.exposed_comm_ns, 0);
  assert_true(fabs(o.overlap_pct - 100.0) < 1e-9);
}

static void test_overlap_touching(void **state) {
  (void)state;
  /* half-open intervals: [0,10) and [10,20) merge into 20 ns, and a GEMM
   * starting where the comm ends overlaps nothing */
  tp_event ev[] = {kernel(0, 1, TP_CAT_COMM, 0, 10), kernel(0, 1, TP_CAT_COMM, 10, 20),
                   kernel(0, 2, TP_CAT_GEMM, 20, 30), kernel(0, 3, TP_CAT_ELEMENTWISE, 30, 35)};
  expect_overlap(ev, 4, 0, 0, 100, (lengths){20, 15, 0});
}

static void test_overlap_several_streams(void **state) {
  (void)state;
  /* comm on two streams [0,50) u [25,75) = 75; compute on two streams
   * [40,60) u [50,100) = [40,100) = 60; overlap [40,75) = 35 */
  tp_event ev[] = {kernel(0, 11, TP_CAT_COMM, 0, 50), kernel(0, 12, TP_CAT_COMM, 25, 75),
                   kernel(0, 13, TP_CAT_GEMM, 40, 60), kernel(0, 14, TP_CAT_GEMM, 50, 100)};
  expect_overlap(ev, 4, 0, 0, 100, (lengths){75, 60, 35});
  /* unsorted input gives the same answer */
  tp_event rev[] = {ev[3], ev[1], ev[2], ev[0]};
  expect_overlap(rev, 4, 0, 0, 100, (lengths){75, 60, 35});
}

static void test_overlap_several_ranks(void **state) {
  (void)state;
  /* rank 0: comm fully exposed; rank 1: comm fully hidden. Mixing them would
   * wrongly report rank 0's comm as hidden under rank 1's GEMM. */
  tp_event ev[] = {kernel(0, 1, TP_CAT_COMM, 0, 40), kernel(1, 1, TP_CAT_COMM, 0, 40),
                   kernel(1, 2, TP_CAT_GEMM, 0, 50), kernel(0, 2, TP_CAT_GEMM, 60, 80)};
  expect_overlap(ev, 4, 0, 0, 100, (lengths){40, 20, 0});
  expect_overlap(ev, 4, 1, 0, 100, (lengths){40, 50, 40});
  expect_overlap(ev, 4, 2, 0, 100, (lengths){0, 0, 0});
}

static void test_overlap_clipping(void **state) {
  (void)state;
  /* window [50,150): comm [0,100) -> [50,100) = 50; GEMM [90,200) ->
   * [90,150) = 60; overlap [90,100) = 10; an event wholly outside is ignored */
  tp_event ev[] = {kernel(0, 1, TP_CAT_COMM, 0, 100), kernel(0, 2, TP_CAT_GEMM, 90, 200),
                   kernel(0, 2, TP_CAT_GEMM, 0, 50), kernel(0, 1, TP_CAT_COMM, 150, 170)};
  tp_overlap o = expect_overlap(ev, 4, 0, 50, 150, (lengths){50, 60, 10});
  assert_int_equal(o.window_ns, 100);
  assert_int_equal(o.n_comm, 1);
  assert_int_equal(o.n_compute, 1);
}

static void test_overlap_what_counts(void **state) {
  (void)state;
  /* peer copies are comm; local copies, memsets, sync records and ranges are
   * neither comm nor compute (sync records count as sync); a comm kernel is
   * never compute; zero-length and inverted intervals contribute nothing */
  tp_event ev[] = {
      copy(0, TP_COPY_PTOP, 0, 30),
      copy(0, TP_COPY_DTOD, 100, 200),
      other_type(0, TP_EV_MEMSET, TP_CAT_OTHER, 100, 200),
      other_type(0, TP_EV_SYNC, TP_CAT_SYNC, 0, 300),
      other_type(0, TP_EV_RANGE, TP_CAT_RANGE, 0, 300),
      kernel(0, 3, TP_CAT_OTHER, 20, 40),
      kernel(0, 3, TP_CAT_GEMM, 50, 50),
      kernel(0, 3, TP_CAT_GEMM, 80, 60),
      named_kernel(
          "_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b118copy_signal_kernelEP5uint4PKS0_mPjS4_",
          60, 70),
  };
  tp_overlap o = expect_overlap(ev, sizeof ev / sizeof ev[0], 0, 0, 300, (lengths){40, 20, 10});
  assert_int_equal(o.n_comm, 2);
  assert_int_equal(o.n_compute, 1);
  assert_int_equal(o.sync_ns, 300);
  assert_int_equal(o.n_sync, 1);
}

#define BARRIER_K                                                                                  \
  "_ZN45_GLOBAL__N__a3e8a595_12_tp_signal_cu_3d6d82c114barrier_kernelE10tp_pad_setiim"
#define WAIT_K "_ZN45_GLOBAL__N__a3e8a595_12_tp_signal_cu_3d6d82c111wait_kernelEPjiim"
#define REDUCE_VEC_K                                                                               \
  "_ZN43_GLOBAL__N__52d7e809_10_tp_copy_cu_fcb292b121reduce_sum_vec_kernelI13__nv_bfloat16EEvP5"   \
  "uint4NS_8src_listEim"

static void test_overlap_sync_is_neither(void **state) {
  (void)state;
  /* A peer copy [100, 200) hidden half under a GEMM [150, 250): 100 comm, 50
   * overlap. A barrier spinning over the whole window on another stream, and
   * a wait kernel in the middle, change neither comm nor compute nor overlap:
   * they are sync, reported beside. Before sync had its own category the
   * barrier counted as communication (comm 1000, overlap 100). */
  tp_event base[] = {copy(0, TP_COPY_PTOP, 100, 200), named_kernel(GEMM_K, 150, 250)};
  tp_overlap before = overlap_of(base, 2, 0, 0, 1000);
  tp_event more[] = {base[0], base[1], named_kernel(BARRIER_K, 0, 1000),
                     named_kernel(WAIT_K, 400, 600)};
  assert_int_equal(more[2].category, TP_CAT_SYNC);
  tp_overlap after = overlap_of(more, 4, 0, 0, 1000);
  assert_overlap(&before, 100, 100, 50);
  assert_overlap(&after, 100, 100, 50);
  assert_int_equal(after.sync_ns, 1000);
  assert_int_equal(after.n_sync, 2);
  assert_int_equal(before.sync_ns, 0);
  /* the reduction of peers' partials moves bytes: it is communication */
  tp_event red[] = {named_kernel(REDUCE_VEC_K, 300, 340), named_kernel(GEMM_K, 320, 400)};
  assert_int_equal(red[0].category, TP_CAT_COMM);
  expect_overlap(red, 2, 0, 0, 1000, (lengths){40, 80, 20});
}

static void test_overlap_bad_arguments(void **state) {
  (void)state;
  tp_overlap o;
  tp_event ev[] = {kernel(0, 1, TP_CAT_COMM, 0, 10)};
  assert_int_equal(tp_overlap_compute(ev, 1, 0, 200, 100, &o), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "before start"));
  assert_int_equal(tp_overlap_compute(NULL, 3, 0, 0, 100, &o), TP_EUSAGE);
  assert_int_equal(tp_overlap_compute(ev, 1, 0, 0, 100, NULL), TP_EUSAGE);
}

/* A deterministic generator, so a failure reproduces. */
static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

enum { TIMELINE = 240 };

/* The same quantities by brute force: one flag per nanosecond. */
static void brute_overlap(const tp_event *ev, size_t n, int rank, uint64_t ws, uint64_t we,
                          uint64_t *comm, uint64_t *compute, uint64_t *both) {
  unsigned char c[TIMELINE] = {0}, k[TIMELINE] = {0};
  for (size_t i = 0; i < n; ++i) {
    if (ev[i].rank != rank) continue;
    int is_comm = ev[i].category == TP_CAT_COMM && ev[i].type != TP_EV_RANGE;
    int is_comp = ev[i].type == TP_EV_KERNEL && ev[i].category != TP_CAT_COMM &&
                  ev[i].category != TP_CAT_SYNC;
    for (uint64_t t = ev[i].start_ns; t < ev[i].end_ns && t < TIMELINE; ++t) {
      if (t < ws || t >= we) continue;
      if (is_comm) c[t] = 1;
      if (is_comp) k[t] = 1;
    }
  }
  *comm = *compute = *both = 0;
  for (int t = 0; t < TIMELINE; ++t) {
    *comm += c[t];
    *compute += k[t];
    *both += c[t] && k[t];
  }
}

static tp_event random_event(uint64_t *seed) {
  uint64_t s = next_rand(seed) % (TIMELINE - 10);
  uint64_t len = next_rand(seed) % 40;
  int rank = (int)(next_rand(seed) % 2);
  uint32_t stream = (uint32_t)(next_rand(seed) % 4);
  switch (next_rand(seed) % 8) {
  case 7: return kernel(rank, stream, TP_CAT_SYNC, s, s + len);
  case 0: return copy(rank, TP_COPY_PTOP, s, s + len);
  case 1: return copy(rank, TP_COPY_DTOD, s, s + len);
  case 2: return other_type(rank, TP_EV_RANGE, TP_CAT_RANGE, s, s + len);
  case 3: return kernel(rank, stream, TP_CAT_COMM, s, s + len);
  case 4: return kernel(rank, stream, TP_CAT_ELEMENTWISE, s, s + len);
  default: return kernel(rank, stream, TP_CAT_GEMM, s, s + len);
  }
}

static void test_overlap_matches_brute_force(void **state) {
  (void)state;
  uint64_t seed = 0x1234567887654321ull;
  tp_event ev[48];
  for (int round = 0; round < 500; ++round) {
    size_t n = (size_t)(next_rand(&seed) % 48);
    for (size_t i = 0; i < n; ++i) ev[i] = random_event(&seed);
    uint64_t ws = next_rand(&seed) % TIMELINE, we = ws + next_rand(&seed) % (TIMELINE - ws + 1);
    for (int rank = 0; rank < 2; ++rank) {
      uint64_t comm, compute, both;
      brute_overlap(ev, n, rank, ws, we, &comm, &compute, &both);
      tp_overlap o = overlap_of(ev, n, rank, ws, we);
      if (o.comm_ns != comm || o.compute_ns != compute || o.overlap_ns != both)
        fail_msg("round %d rank %d window [%llu,%llu): got comm %llu compute %llu overlap %llu, "
                 "brute force %llu %llu %llu",
                 round, rank, (unsigned long long)ws, (unsigned long long)we,
                 (unsigned long long)o.comm_ns, (unsigned long long)o.compute_ns,
                 (unsigned long long)o.overlap_ns, (unsigned long long)comm,
                 (unsigned long long)compute, (unsigned long long)both);
      assert_int_equal(o.exposed_comm_ns, comm - both);
    }
  }
}

/* ---- classification -------------------------------------------------------- */

typedef struct name_case {
  const char *name;
  tp_event_category category;
  tp_kernel_origin origin;
} name_case;

static const name_case names[] = {
    /* NCCL 2.19+ device kernels, demangled and mangled as CUPTI reports them */
    {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", TP_CAT_COMM,
     TP_KERNEL_NCCL},
    {"_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE", TP_CAT_COMM,
     TP_KERNEL_NCCL},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", TP_CAT_COMM,
     TP_KERNEL_NCCL},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
     TP_CAT_COMM, TP_KERNEL_NCCL},
    {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", TP_CAT_COMM, TP_KERNEL_NCCL},
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL128", TP_CAT_COMM, TP_KERNEL_NCCL},
    {"ncclDevKernel_Generic", TP_CAT_COMM, TP_KERNEL_NCCL},
    /* NCCL 2.27+ symmetric kernels, on buffers in registered windows (stock nccl-window);
     * names as src/device/symmetric/generate.py makes them */
    {"ncclSymkDevKernel_AllGather_ST(ncclSymkDevWorkArgs4K)", TP_CAT_COMM, TP_KERNEL_NCCL},
    {"_Z30ncclSymkDevKernel_AllGather_LL21ncclSymkDevWorkArgs4K", TP_CAT_COMM, TP_KERNEL_NCCL},
    {"ncclSymkDevKernel_ReduceScatter_LD_sum_bf16(ncclSymkDevWorkArgs4K)", TP_CAT_COMM,
     TP_KERNEL_NCCL},
    {"ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_f32(ncclSymkDevWorkArgs4K)", TP_CAT_COMM,
     TP_KERNEL_NCCL},
    /* NCCL before 2.19 */
    {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", TP_CAT_COMM, TP_KERNEL_NCCL},
    {"ncclKernel_AllReduce_RING_LL_Sum_half(ncclDevComm*, unsigned long, ncclWork*)", TP_CAT_COMM,
     TP_KERNEL_NCCL},
    /* tpbench's kernels as nvcc 13.0 mangles them (anonymous namespace) */
    {"_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b118copy_signal_kernelEP5uint4PKS0_mPjS4_",
     TP_CAT_COMM, TP_KERNEL_OWN_COPY},
    {"_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b117reduce_sum_kernelI13__nv_bfloat16EEvPT_NS_"
     "8src_listEim",
     TP_CAT_COMM, TP_KERNEL_OWN_REDUCE},
    {"_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b117reduce_sum_kernelIfEEvPT_NS_8src_listEim",
     TP_CAT_COMM, TP_KERNEL_OWN_REDUCE},
    {REDUCE_VEC_K, TP_CAT_COMM, TP_KERNEL_OWN_REDUCE},
    /* barriers, signals and waits spin on flags: synchronisation, not communication */
    {"_ZN45_GLOBAL__N__a3e8a595_12_tp_signal_cu_3d6d82c114barrier_kernelE10tp_pad_setiim",
     TP_CAT_SYNC, TP_KERNEL_OWN_SIGNAL},
    {"_ZN45_GLOBAL__N__a3e8a595_12_tp_signal_cu_3d6d82c113signal_kernelEPji", TP_CAT_SYNC,
     TP_KERNEL_OWN_SIGNAL},
    {"_ZN45_GLOBAL__N__a3e8a595_12_tp_signal_cu_3d6d82c111wait_kernelEPjiim", TP_CAT_SYNC,
     TP_KERNEL_OWN_SIGNAL},
    /* the layers' own kernels (synthetic mangling in nvcc's form) */
    {"_ZN45_GLOBAL__N__11111111_13_tp_layers_cu_2222222218rmsnorm_fwd_kernelI13__nv_bfloat16EEvPKT_"
     "S4_PS2_lf",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"_ZN45_GLOBAL__N__11111111_13_tp_layers_cu_2222222211rope_kernelIfEEvPT_PKflll",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"_ZN45_GLOBAL__N__11111111_13_tp_layers_cu_2222222228attention_softmax_fwd_kernelIfEEvPKfPT_l",
     TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"_ZN43_GLOBAL__N__33333333_11_tp_bias_cu_4444444418sum_sources_kernelIfEEvPT_NS_11f32_"
     "sourcesEimm",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    /* ... and demangled */
    {"(anonymous namespace)::copy_signal_kernel(uint4*, const uint4*, unsigned long, unsigned "
     "int*, unsigned int*)",
     TP_CAT_COMM, TP_KERNEL_OWN_COPY},
    {"void (anonymous namespace)::reduce_sum_kernel<__nv_bfloat16>(T1 *, (anonymous "
     "namespace)::src_list, int, unsigned long)",
     TP_CAT_COMM, TP_KERNEL_OWN_REDUCE},
    /* tpbench's helper kernels are not communication */
    {"_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b118fill_random_kernelIfEEvPT_mmf",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b113poison_kernelI13__nv_bfloat16EEvPT_m",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b114to_fp32_kernelI13__nv_bfloat16EEvPKT_Pfm",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b114compare_kernelIfEEvPKT_S3_mPd",
     TP_CAT_OTHER, TP_KERNEL_OTHER},
    /* cuBLAS / cuBLASLt */
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"nvjet_tst_128x128_64x6_2x1_v_bz_splitK_NTT", TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"nvjet_sm100_qrsss_256x256_128x4_2x1_2cta_v_bz_NTT", TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn", TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"ampere_sgemm_32x32_sliced1x4_nn", TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"volta_sgemm_32x32_sliced1x4_nt", TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<float>, float "
     "const*, float const*, "
     "float*, float const*, float const*, float const*)",
     TP_CAT_GEMM, TP_KERNEL_OTHER},
    /* CUTLASS */
    {"void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)", TP_CAT_GEMM,
     TP_KERNEL_OTHER},
    {"cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x64_32x4_nn_align8", TP_CAT_GEMM,
     TP_KERNEL_OTHER},
    /* attention: FA3 is a CUTLASS device kernel with "sm90_" in it, and must still be attention */
    {"void "
     "cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
     "CollectiveMainloopFwdSm90<2, "
     "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<176>, "
     "cute::C<128> >, 128, "
     "cutlass::bfloat16_t, float, cutlass::arch::Sm90, false",
     TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"fmha_cutlassF_bf16_aligned_64x128_rf_sm80", TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"flash_fwd_splitkv_mla_kernel", TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"cudnn_generated_fort_native_sdpa_sm100_flash_bprop_f16", TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::Half, float, c10::Half, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::Half*, c10::Half const*, "
     "int)",
     TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    /* elementwise */
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char*, 1ul> >(int, "
     "at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"void "
     "at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorItera",
     TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"triton_poi_fused_mul_silu_2", TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    /* other */
    {"void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, int, unsigned "
     "int, (int)2, (int)2, "
     "(int)-2>(at::cuda::detail::TensorInfo<T1, T3>, at::cuda::detail::TensorInfo<const T1, T3>, "
     "at::cuda::",
     TP_CAT_OTHER, TP_KERNEL_OTHER},
    {"_rope_kernel", TP_CAT_OTHER, TP_KERNEL_OTHER},
    {"_ce_bwd_kernel", TP_CAT_OTHER, TP_KERNEL_OTHER},
    {"", TP_CAT_OTHER, TP_KERNEL_OTHER},
    /* PyTorch's symmetric memory (c10d/symm_mem), mangled by g++ from the kernels' signatures
     * in CUDASymmetricMemoryOps.cu and CUDASymmetricMemory.cu: SM transfers, multicast, waits */
    {"_ZN12_GLOBAL__N_126one_shot_all_reduce_kernelIN3c108BFloat16ELi16ELi2EEEvPPT_S4_S4_mmPPjmm",
     TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
    {"_ZN12_GLOBAL__N_126two_shot_all_reduce_kernelIN3c108BFloat16ELi16ELi2ELb1ELb0EEEvPPT_S4_"
     "mmPPjmmm",
     TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
    {"_ZN12_GLOBAL__N_126multimem_all_gather_kernelILi16EEEvPcS1_mPPjmm", TP_CAT_COMM,
     TP_KERNEL_MULTICAST},
    {"_ZN4c10d16symmetric_memory14barrier_kernelEPPjiiim", TP_CAT_SYNC, TP_KERNEL_OWN_SIGNAL},
    {"_ZN4c10d16symmetric_memory17put_signal_kernelEPPjiiiim", TP_CAT_SYNC, TP_KERNEL_OTHER},
    /* synthetic: tpbench's short names only count as whole identifiers */
    {"prewait_kernel", TP_CAT_OTHER, TP_KERNEL_OTHER},
    {"_Z12wait_kernelsPj", TP_CAT_OTHER, TP_KERNEL_OTHER},
    {"my_signal_kernel_v2(int)", TP_CAT_OTHER, TP_KERNEL_OTHER},
};

static void test_classify_names(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    tp_kernel_class k = tp_classify_kernel_ex(names[i].name);
    if (k.category != names[i].category || k.origin != names[i].origin)
      fail_msg("'%s': got %s (origin %d, rule '%s'), expected %s (origin %d)", names[i].name,
               tp_category_name(k.category), (int)k.origin, k.rule,
               tp_category_name(names[i].category), (int)names[i].origin);
    assert_int_equal(tp_classify_kernel(names[i].name), names[i].category);
    if (k.category != TP_CAT_OTHER) assert_true(k.rule[0] != '\0');
  }
  assert_int_equal(tp_classify_kernel(NULL), TP_CAT_OTHER);
}

static void test_classify_copies_and_labels(void **state) {
  (void)state;
  assert_int_equal(tp_classify_copy(TP_COPY_PTOP), TP_CAT_COMM);
  assert_int_equal(tp_classify_copy(TP_COPY_DTOD), TP_CAT_OTHER);
  assert_int_equal(tp_classify_copy(TP_COPY_HTOD), TP_CAT_OTHER);
  assert_string_equal(tp_category_name(TP_CAT_COMM), "comm");
  assert_string_equal(tp_category_name(TP_CAT_SYNC), "sync");
  assert_int_equal(tp_classify_sync(), TP_CAT_SYNC);
  assert_string_equal(tp_category_name(TP_CAT_GEMM), "gemm");
  assert_string_equal(tp_category_name(TP_CAT_ATTENTION), "attention");
  assert_string_equal(tp_category_name(TP_CAT_ELEMENTWISE), "elementwise");
  assert_string_equal(tp_category_name(TP_CAT_OTHER), "other");
  assert_string_equal(tp_category_name(TP_CAT_RANGE), "range");
  assert_string_equal(tp_category_name((tp_event_category)99), "invalid");
  assert_string_equal(tp_copy_kind_name(TP_COPY_PTOP), "PtoP");
  assert_string_equal(tp_copy_kind_name(TP_COPY_DTOD), "DtoD");
  assert_string_equal(tp_copy_kind_name(TP_COPY_NONE), "none");
  assert_string_equal(tp_copy_kind_name((tp_copy_kind)42), "invalid");
  assert_string_equal(tp_event_type_name(TP_EV_MEMCPY), "memcpy");
  assert_string_equal(tp_event_type_name(TP_EV_RANGE), "range");
}

/* ---- schedule evidence ------------------------------------------------------ */

#define COPY_SIGNAL                                                                                \
  "_ZN43_GLOBAL__N__b03b59d3_10_tp_copy_cu_fcb292b118copy_signal_kernelEP5uint4PKS0_mPjS4_"
#define BARRIER "_ZN45_GLOBAL__N__a3e8a595_12_tp_signal_cu_3d6d82c114barrier_kernelE10tp_pad_setiim"
#define NCCL_AG "_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE"
#define GEMM "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"

/* A trace of `iters` iterations with `per` transfers each, in the shape of schedule s. */
static size_t build_trace(tp_event *ev, const char *s, int iters, int per, uint64_t t0) {
  size_t n = 0;
  for (int it = 0; it < iters; ++it) {
    uint64_t base = t0 + (uint64_t)it * 1000;
    ev[n++] = named_kernel(BARRIER, base, base + 5);
    for (int j = 0; j < per; ++j) {
      uint64_t s0 = base + 10 + (uint64_t)j * 100;
      if (!strcmp(s, "ce")) ev[n++] = copy(0, TP_COPY_PTOP, s0, s0 + 50);
      else if (!strcmp(s, "sm")) ev[n++] = named_kernel(COPY_SIGNAL, s0, s0 + 50);
      else ev[n++] = named_kernel(NCCL_AG, s0, s0 + 50);
      ev[n++] = named_kernel(GEMM, s0 + 20, s0 + 90);
    }
  }
  return n;
}

static void test_evidence_confirms_each_schedule(void **state) {
  (void)state;
  static const char *const scheds[] = {"ce", "sm", "nccl"};
  tp_event ev[64];
  for (size_t k = 0; k < 3; ++k) {
    size_t n = build_trace(ev, scheds[k], 3, 2, 1000);
    tp_evidence e;
    tp_rc rc = tp_schedule_evidence(ev, n, 1000, 4000, scheds[k], 3, 2, &e);
    if (rc != TP_OK) fail_msg("%s: %s", scheds[k], tp_last_error());
    assert_int_equal(e.verdict, TP_VERDICT_CONFIRMED);
    assert_int_equal(e.expected, 6);
    assert_non_null(strstr(e.message, "confirmed"));
  }
}

/* The stock variant on NCCL symmetric windows: NCCL's symmetric kernels are
 * its transfers, a copy-engine push inside it is not; plain NCCL kernels
 * count as well (NCCL picks per call). */
static void test_evidence_nccl_window_symmetric_kernels(void **state) {
  (void)state;
  static const char *const sym_ag = "ncclSymkDevKernel_AllGather_ST(ncclSymkDevWorkArgs4K)";
  tp_event ev[64];
  size_t n = 0;
  for (int it = 0; it < 3; ++it) {
    uint64_t t0 = 1000 + (uint64_t)it * 1000;
    ev[n++] = named_kernel(sym_ag, t0, t0 + 50);
    ev[n++] = named_kernel(GEMM, t0 + 60, t0 + 90);
  }
  tp_evidence e;
  tp_rc rc = tp_schedule_evidence(ev, n, 1000, 4000, "nccl-window", 3, 1, &e);
  if (rc != TP_OK) fail_msg("nccl-window: %s", tp_last_error());
  assert_int_equal(e.verdict, TP_VERDICT_CONFIRMED);
  assert_int_equal(e.nccl_kernels, 3);
  ev[n++] = copy(0, TP_COPY_PTOP, 1500, 1510);
  assert_int_equal(tp_schedule_evidence(ev, n, 1000, 4000, "nccl-window", 3, 1, &e), TP_EINTERNAL);
  assert_int_equal(e.peer_copies, 1);
}

static void test_evidence_wrong_count_is_an_error(void **state) {
  (void)state;
  tp_event ev[64];
  size_t n = build_trace(ev, "ce", 3, 2, 1000);
  tp_evidence e;
  /* one transfer missing */
  assert_int_equal(tp_schedule_evidence(ev, n - 2, 1000, 4000, "ce", 3, 2, &e), TP_EINTERNAL);
  assert_int_equal(e.verdict, TP_VERDICT_MISMATCH);
  assert_int_equal(e.peer_copies, 5);
  assert_non_null(strstr(e.message, "NOT confirmed"));
  assert_non_null(strstr(e.message, "expected 6 peer-to-peer copies"));
  assert_non_null(strstr(e.message, "found 5"));
  assert_non_null(strstr(tp_last_error(), "found 5"));
  /* one transfer too many is wrong as well */
  assert_int_equal(tp_schedule_evidence(ev, n, 1000, 4000, "ce", 3, 1, &e), TP_EINTERNAL);
}

static void test_evidence_foreign_fingerprints(void **state) {
  (void)state;
  tp_event ev[64];
  tp_evidence e;
  /* ce with the right copy count, but an SM copy kernel ran too */
  size_t n = build_trace(ev, "ce", 2, 2, 0);
  ev[n++] = named_kernel(COPY_SIGNAL, 500, 510);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 2000, "ce", 2, 2, &e), TP_EINTERNAL);
  assert_int_equal(e.copy_kernels, 1);
  /* sm with a peer copy in it */
  n = build_trace(ev, "sm", 2, 2, 0);
  ev[n++] = copy(0, TP_COPY_PTOP, 500, 510);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 2000, "sm", 2, 2, &e), TP_EINTERNAL);
  assert_int_equal(e.peer_copies, 1);
  /* a fused schedule with an NCCL kernel in its window: a stock fallback hiding in it */
  n = build_trace(ev, "ce", 2, 2, 0);
  ev[n++] = named_kernel(NCCL_AG, 500, 510);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 2000, "ce", 2, 2, &e), TP_EINTERNAL);
  assert_int_equal(e.nccl_kernels, 1);
  n = build_trace(ev, "sm", 2, 2, 0);
  ev[n++] = named_kernel(NCCL_AG, 500, 510);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 2000, "sm", 2, 2, &e), TP_EINTERNAL);
  /* stock that is really the sm schedule: no NCCL kernels at all */
  n = build_trace(ev, "sm", 2, 2, 0);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 2000, "nccl", 2, 2, &e), TP_EINTERNAL);
  assert_int_equal(e.nccl_kernels, 0);
  assert_int_equal(e.copy_kernels, 4);
  /* local DtoD copies do not count as ce evidence, and the message says what was seen */
  n = build_trace(ev, "ce", 2, 2, 0);
  for (size_t i = 0; i < n; ++i)
    if (ev[i].type == TP_EV_MEMCPY) ev[i].copy_kind = TP_COPY_DTOD;
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 2000, "ce", 2, 2, &e), TP_EINTERNAL);
  assert_int_equal(e.peer_copies, 0);
  assert_int_equal(e.dtod_copies, 4);
  assert_non_null(strstr(e.message, "DtoD"));
}

static void test_evidence_counts_only_the_window(void **state) {
  (void)state;
  tp_event ev[64];
  tp_evidence e;
  /* warm-up iteration at t=0..1000, measured window [1000, 3000): two iterations */
  size_t n = build_trace(ev, "sm", 3, 2, 0);
  assert_int_equal(tp_schedule_evidence(ev, n, 1000, 3000, "sm", 2, 2, &e), TP_OK);
  assert_int_equal(e.copy_kernels, 4);
  /* the same trace judged over everything has one iteration too many */
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 3000, "sm", 2, 2, &e), TP_EINTERNAL);
  /* an empty trace never confirms */
  assert_int_equal(tp_schedule_evidence(NULL, 0, 0, 3000, "nccl", 1, 1, &e), TP_EINTERNAL);
  assert_int_equal(e.verdict, TP_VERDICT_MISMATCH);
}

static void test_evidence_usage_errors(void **state) {
  (void)state;
  tp_event ev[64];
  tp_evidence e;
  size_t n = build_trace(ev, "ce", 1, 1, 0);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 1000, "multimem", 1, 1, &e), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "unknown schedule 'multimem'"));
  /* the ring (at TP 2) moves its chunks with the copy engine: its trace is a ce trace */
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 1000, "ring", 1, 1, &e), TP_OK);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 1000, "ce", 0, 1, &e), TP_EUSAGE);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 1000, "ce", 1, 0, &e), TP_EUSAGE);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 1000, NULL, 1, 1, &e), TP_EUSAGE);
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 1000, "ce", 1, 1, NULL), TP_EUSAGE);
  ev[1].rank = 1;
  assert_int_equal(tp_schedule_evidence(ev, n, 0, 1000, "ce", 1, 1, &e), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "mixed"));
}

/* ---- schedule evidence per op, inside its NVTX ranges --------------------------------- */

#define CE_FWD "ag_linear.fwd dist_gemm ce x2"
#define RS_STOCK_FWD "linear_rs.fwd dist_gemm nccl x1"

/* A transfer of schedule `what` ("ce", "sm", "nccl") launched by the host at
 * `at`, running on the device 5 us later (the host runs ahead). */
static tp_event transfer(const char *what, uint64_t at) {
  uint64_t s0 = at + 5000;
  tp_event e = !strcmp(what, "ce")   ? copy(0, TP_COPY_PTOP, s0, s0 + 50)
               : !strcmp(what, "sm") ? named_kernel(COPY_SIGNAL, s0, s0 + 50)
                                     : named_kernel(NCCL_AG, s0, s0 + 50);
  e.launch_ns = at;
  return e;
}

static tp_event range_named(const char *name, uint64_t s, uint64_t e) {
  tp_event r = other_type(0, TP_EV_RANGE, TP_CAT_RANGE, s, e);
  r.device = -1;
  r.name = name;
  return r;
}

/* One op's range [t, t+100) with `transfers` of `what` and a GEMM launched inside. */
static size_t op_in_range(tp_event *ev, const char *range, const char *what, int transfers,
                          uint64_t t) {
  size_t n = 0;
  ev[n++] = range_named(range, t, t + 100);
  for (int j = 0; j < transfers; ++j) ev[n++] = transfer(what, t + 10 + (uint64_t)j);
  ev[n] = named_kernel(GEMM, t + 5100, t + 5200);
  ev[n++].launch_ns = t + 50;
  return n;
}

static tp_op_evidence op_spec(const char *op, const char *schedule, const char *prefix,
                              const char *suffix) {
  tp_op_evidence o;
  memset(&o, 0, sizeof o);
  o.op = op;
  o.schedule = schedule;
  o.range_prefix = prefix;
  o.range_suffix = suffix;
  o.state = TP_EVIDENCE_OK; /* must be overwritten: nothing is ok by default */
  return o;
}

/* Two iterations of one op, its ranges at 1000 and 2000, with `first` and
 * `second` transfers of `what` launched inside. */
static size_t two_iterations(tp_event *ev, const char *range, const char *what, int first,
                             int second) {
  size_t n = op_in_range(ev, range, what, first, 1000);
  return n + op_in_range(ev + n, range, what, second, 2000);
}

/* ag_linear's forward judged as the ce schedule (ranges CE_FWD). */
static tp_op_evidence ce_op(void) { return op_spec("ag_linear", "ce", "ag_linear.", " ce x2"); }

static const tp_evidence_window WINDOW = {0, 1000000, 2, 2, NULL, 0, 0};

static tp_evidence_state judge(const tp_event *ev, size_t n, const tp_evidence_window *w,
                               tp_op_evidence *ops, size_t n_ops) {
  tp_evidence_state overall = TP_EVIDENCE_OK;
  assert_int_equal(tp_ops_evidence(ev, n, w, ops, n_ops, &overall), TP_OK);
  return overall;
}

static void test_op_evidence_ce_ok(void **state) {
  (void)state;
  tp_event ev[32];
  size_t n = two_iterations(ev, CE_FWD, "ce", 2, 2);
  tp_op_evidence op = ce_op();
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_OK);
  assert_int_equal(op.state, TP_EVIDENCE_OK);
  assert_int_equal(op.ranges, 2);
  assert_int_equal(op.peer_copies, 4);
  assert_string_equal(tp_evidence_state_name(op.state), "ok");
}

static void test_op_evidence_nccl_inside_ce_fails(void **state) {
  (void)state;
  tp_event ev[32];
  size_t n = two_iterations(ev, CE_FWD, "ce", 2, 2);
  ev[n++] = transfer("nccl", 2020); /* planted: an NCCL kernel launched inside the fused op */
  tp_op_evidence op = ce_op();
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_FAILED);
  assert_int_equal(op.nccl_kernels, 1);
  assert_non_null(strstr(op.message, "no NCCL kernel"));
  assert_non_null(strstr(op.message, "1 NCCL kernels"));
  /* an SM copy kernel inside a ce op fails it as well */
  ev[n - 1] = transfer("sm", 2020);
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_FAILED);
  assert_int_equal(op.copy_kernels, 1);
}

static void test_op_evidence_ce_without_copies_fails(void **state) {
  (void)state;
  tp_event ev[32];
  size_t n = two_iterations(ev, CE_FWD, "ce", 0, 0);
  tp_op_evidence op = ce_op();
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_FAILED);
  assert_int_equal(op.ranges, 2);
  assert_non_null(strstr(op.message, "must launch 4 transfers"));
  assert_non_null(strstr(op.message, "found 0"));
  /* a copy missing is as wrong as all of them */
  n = two_iterations(ev, CE_FWD, "ce", 2, 1);
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_FAILED);
}

/* Ranks sharing one GPU: a push is a DtoD copy on the transfer stream. Judged
 * as pushes only there and only in that mode; a DtoD copy on another stream
 * (a local copy of the op's own rows) never counts; on a real host no DtoD
 * copy counts, so the rule stays strict. */
static void test_op_evidence_shared_gpu_pushes(void **state) {
  (void)state;
  enum { PUSH_STREAM = 13, MAIN_STREAM = 7 };
  tp_event ev[32];
  size_t n = two_iterations(ev, CE_FWD, "ce", 2, 2);
  for (size_t i = 0; i < n; ++i)
    if (ev[i].type == TP_EV_MEMCPY) {
      ev[i].copy_kind = TP_COPY_DTOD;
      ev[i].stream = PUSH_STREAM;
    }
  tp_op_evidence op = ce_op();
  /* a real host: DtoD copies are no pushes */
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_FAILED);
  assert_non_null(strstr(op.message, "found 0"));
  tp_evidence_window w = WINDOW;
  w.shared_device = 1;
  w.push_stream = PUSH_STREAM;
  assert_int_equal(judge(ev, n, &w, &op, 1), TP_EVIDENCE_OK);
  assert_int_equal(op.peer_copies, 4);
  assert_non_null(strstr(op.message, "ranks share one GPU"));
  /* the same copies on another stream are local copies: nothing was pushed */
  w.push_stream = PUSH_STREAM + 1;
  assert_int_equal(judge(ev, n, &w, &op, 1), TP_EVIDENCE_FAILED);
  /* a local copy beside the pushes does not inflate the count */
  w.push_stream = PUSH_STREAM;
  tp_event local = transfer("ce", 2030);
  local.copy_kind = TP_COPY_DTOD;
  local.stream = MAIN_STREAM;
  ev[n++] = local;
  assert_int_equal(judge(ev, n, &w, &op, 1), TP_EVIDENCE_OK);
  assert_int_equal(op.peer_copies, 4);
  /* one push missing fails as on a real host */
  n = two_iterations(ev, CE_FWD, "ce", 2, 1);
  for (size_t i = 0; i < n; ++i)
    if (ev[i].type == TP_EV_MEMCPY) {
      ev[i].copy_kind = TP_COPY_DTOD;
      ev[i].stream = PUSH_STREAM;
    }
  assert_int_equal(judge(ev, n, &w, &op, 1), TP_EVIDENCE_FAILED);
  /* a stock op on the shared GPU still may not push */
  n = two_iterations(ev, "linear_rs.fwd stock nccl x1", "nccl", 2, 2);
  tp_op_evidence stock = op_spec("linear_rs", "nccl", "linear_rs.", " nccl x1");
  assert_int_equal(judge(ev, n, &w, &stock, 1), TP_EVIDENCE_OK);
  tp_event push = transfer("ce", 1030);
  push.copy_kind = TP_COPY_DTOD;
  push.stream = PUSH_STREAM;
  ev[n++] = push;
  assert_int_equal(judge(ev, n, &w, &stock, 1), TP_EVIDENCE_FAILED);
}

static void test_op_evidence_stock_with_peer_copy_fails(void **state) {
  (void)state;
  tp_event ev[32];
  const char *range = "linear_rs.fwd stock nccl x1";
  size_t n = two_iterations(ev, range, "nccl", 2, 2);
  tp_op_evidence op = op_spec("linear_rs", "nccl", "linear_rs.", " nccl x1");
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_OK);
  ev[n++] = transfer("ce", 1030);
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_FAILED);
  assert_int_equal(op.peer_copies, 1);
  assert_non_null(strstr(op.message, "no peer copy"));
  /* the GEMM alone must show no transfer at all */
  tp_event gemm_only[8];
  size_t g = op_in_range(gemm_only, "linear_rs.fwd gemm_only nccl x1", "ce", 0, 1000);
  tp_op_evidence alone = op_spec("linear_rs", "none", "linear_rs.", " nccl x1");
  tp_evidence_window w = WINDOW;
  w.transfers_per_iteration = 0;
  assert_int_equal(judge(gemm_only, g, &w, &alone, 1), TP_EVIDENCE_OK);
  gemm_only[g++] = transfer("nccl", 1010);
  assert_int_equal(judge(gemm_only, g, &w, &alone, 1), TP_EVIDENCE_FAILED);
}

static void test_op_evidence_mixed_layer_op_by_op(void **state) {
  (void)state;
  /* qkv fused with ce (2 pushes per iteration), wo on the stock path (1 NCCL
   * kernel): 3 transfers per iteration, each op in its own ranges */
  tp_event ev[48];
  size_t n = 0;
  for (uint64_t it = 0; it < 2; ++it) {
    n += op_in_range(ev + n, CE_FWD, "ce", 2, 1000 + it * 1000);
    n += op_in_range(ev + n, RS_STOCK_FWD, "nccl", 1, 1500 + it * 1000);
  }
  tp_op_evidence ops[2] = {op_spec("qkv", "ce", "ag_linear.", " ce x2"),
                           op_spec("wo", "nccl", "linear_rs.", " nccl x1")};
  tp_evidence_window w = WINDOW;
  w.transfers_per_iteration = 3;
  assert_int_equal(judge(ev, n, &w, ops, 2), TP_EVIDENCE_OK);
  assert_int_equal(ops[0].state, TP_EVIDENCE_OK);
  assert_int_equal(ops[1].state, TP_EVIDENCE_OK);
  assert_int_equal(ops[0].peer_copies, 4);
  assert_int_equal(ops[0].nccl_kernels, 0); /* wo's NCCL kernels are not qkv's */
  assert_int_equal(ops[1].nccl_kernels, 2);
  /* an NCCL kernel planted in qkv's range fails qkv, and only qkv */
  ev[n++] = transfer("nccl", 2030);
  assert_int_equal(judge(ev, n, &w, ops, 2), TP_EVIDENCE_FAILED);
  assert_int_equal(ops[0].state, TP_EVIDENCE_FAILED);
  assert_int_equal(ops[1].state, TP_EVIDENCE_OK);
  /* a transfer launched outside every op's range fails the configuration */
  ev[n - 1] = transfer("nccl", 1300);
  assert_int_equal(judge(ev, n, &w, ops, 2), TP_EVIDENCE_FAILED);
  assert_non_null(strstr(ops[0].message, "outside every op's range"));
}

static void test_op_evidence_not_checked(void **state) {
  (void)state;
  tp_event ev[32];
  /* events without any NVTX range (a graph replay): not checked, never ok */
  size_t n = 0;
  for (int j = 0; j < 4; ++j) ev[n++] = transfer("ce", 1000 + (uint64_t)j);
  tp_op_evidence op = ce_op();
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_NOT_CHECKED);
  assert_int_equal(op.state, TP_EVIDENCE_NOT_CHECKED);
  assert_non_null(strstr(op.message, "no NVTX range"));
  /* a range of another op does not stand in for this one */
  n = op_in_range(ev, RS_STOCK_FWD, "nccl", 2, 1000);
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_NOT_CHECKED);
  /* the window cannot be judged (markers missing): every op says why */
  n = two_iterations(ev, CE_FWD, "ce", 2, 2);
  tp_evidence_window w = WINDOW;
  w.not_checked = "iteration markers: 1 of 2 seen";
  tp_op_evidence two[2] = {op, op_spec("wo", "nccl", "linear_rs.", "")};
  assert_int_equal(judge(ev, n, &w, two, 2), TP_EVIDENCE_NOT_CHECKED);
  assert_int_equal(two[1].state, TP_EVIDENCE_NOT_CHECKED);
  assert_non_null(strstr(two[0].message, "iteration markers: 1 of 2 seen"));
  /* a transfer whose launch was not recorded cannot be placed */
  ev[1].launch_ns = 0;
  assert_int_equal(judge(ev, n, &WINDOW, &op, 1), TP_EVIDENCE_NOT_CHECKED);
  assert_non_null(strstr(op.message, "no launch record"));
  /* no ops at all is no evidence */
  assert_int_equal(judge(ev, n, &WINDOW, NULL, 0), TP_EVIDENCE_NOT_CHECKED);
}

static void test_op_evidence_combine_and_usage(void **state) {
  (void)state;
  assert_int_equal(tp_evidence_combine(TP_EVIDENCE_OK, TP_EVIDENCE_OK), TP_EVIDENCE_OK);
  assert_int_equal(tp_evidence_combine(TP_EVIDENCE_OK, TP_EVIDENCE_NOT_CHECKED),
                   TP_EVIDENCE_NOT_CHECKED);
  assert_int_equal(tp_evidence_combine(TP_EVIDENCE_NOT_CHECKED, TP_EVIDENCE_FAILED),
                   TP_EVIDENCE_FAILED);
  assert_string_equal(tp_evidence_state_name(TP_EVIDENCE_NOT_CHECKED), "not checked");
  assert_string_equal(tp_evidence_state_name(TP_EVIDENCE_FAILED), "failed");
  tp_event ev[8];
  size_t n = op_in_range(ev, CE_FWD, "ce", 2, 1000);
  tp_op_evidence op = op_spec("x", "multimem", "ag_linear.", "");
  tp_evidence_state overall;
  assert_int_equal(tp_ops_evidence(ev, n, &WINDOW, &op, 1, &overall), TP_EUSAGE);
  /* the valid names come from the schedule table's per-op rows */
  assert_non_null(strstr(tp_last_message(), "(valid: ce, ring, sm, nccl, none)"));
  op.schedule = "ce";
  tp_evidence_window w = WINDOW;
  w.iterations = 0;
  assert_int_equal(tp_ops_evidence(ev, n, &w, &op, 1, &overall), TP_EUSAGE);
  assert_int_equal(tp_ops_evidence(ev, n, NULL, &op, 1, &overall), TP_EUSAGE);
  ev[1].rank = 1;
  assert_int_equal(tp_ops_evidence(ev, n, &WINDOW, &op, 1, &overall), TP_EUSAGE);
}

/* The schedules an op's trace is judged by are the evidence table's per-op rows: the ones
 * ops_trace.c listed by hand before (ce, ring, sm, nccl, none), not nccl-window, not the
 * schedules without a fingerprint. */
static void test_op_evidence_knows(void **state) {
  (void)state;
  const char *const judged[] = {"ce", "ring", "sm", "nccl", "none"};
  for (size_t i = 0; i < sizeof judged / sizeof judged[0]; ++i)
    assert_true(tp_ops_evidence_knows(judged[i]));
  const char *const not_judged[] = {"nccl-window", "multimem", "auto", "", "CE"};
  for (size_t i = 0; i < sizeof not_judged / sizeof not_judged[0]; ++i)
    assert_false(tp_ops_evidence_knows(not_judged[i]));
  assert_false(tp_ops_evidence_knows(NULL));
}

/* ---- clock offset ------------------------------------------------------------- */

static uint64_t realtime_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A tracer clock that runs `*ctx` ns off CLOCK_REALTIME. */
static uint64_t shifted_clock(void *ctx) {
  return (uint64_t)((int64_t)realtime_now() + *(int64_t *)ctx);
}

static uint64_t broken_clock(void *ctx) {
  (void)ctx;
  return 0;
}

static void test_clock_offset(void **state) {
  (void)state;
  static const int64_t shifts[] = {5000000000LL, -3000000000LL, 0};
  for (size_t i = 0; i < 3; ++i) {
    int64_t shift = shifts[i];
    tp_clock_offset off;
    assert_int_equal(tp_clock_offset_measure(shifted_clock, &shift, 8, &off), TP_OK);
    int64_t err = off.offset_ns - shift;
    if (err < 0) err = -err;
    /* the tracer read happened inside the bracket, so the midpoint is off by at most half of it */
    if ((uint64_t)err > off.uncertainty_ns)
      fail_msg("shift %lld: measured %lld +- %llu", (long long)shift, (long long)off.offset_ns,
               (unsigned long long)off.uncertainty_ns);
    assert_true(off.uncertainty_ns < 50000000ull); /* a bracket of two clock reads, not 50 ms */
    assert_true(off.realtime_ns > 0);
  }
  tp_clock_offset off;
  assert_int_equal(tp_clock_offset_measure(broken_clock, NULL, 4, &off), TP_EIO);
  assert_int_equal(tp_clock_offset_measure(shifted_clock, NULL, 0, &off), TP_EUSAGE);
  assert_int_equal(tp_clock_offset_measure(NULL, NULL, 4, &off), TP_EUSAGE);
}

/* ---- NVTX wrapper --------------------------------------------------------------- */

static void test_nvtx_gate(void **state) {
  (void)state;
  /* No collector: every range is recorded (external profilers keep working). */
  assert_int_equal(tp_nvtx_recording(), 1);
  tp_nvtx_push("outer");
  assert_int_equal(tp_nvtx_open_ranges(), 1);
  tp_nvtx_pop();
  /* A collector attached: nothing outside its windows. */
  tp_nvtx_gate(1);
  assert_int_equal(tp_nvtx_recording(), 0);
  tp_nvtx_push("untraced iteration"); /* skipped */
  assert_int_equal(tp_nvtx_open_ranges(), 0);
  tp_nvtx_window(1);
  assert_int_equal(tp_nvtx_recording(), 1);
  tp_nvtx_push("traced op"); /* recorded */
  assert_int_equal(tp_nvtx_open_ranges(), 1);
  tp_nvtx_pop(); /* pops the recorded one */
  assert_int_equal(tp_nvtx_open_ranges(), 0);
  tp_nvtx_pop(); /* the skipped push's pop stays skipped though the window is open */
  assert_int_equal(tp_nvtx_open_ranges(), 0);
  tp_nvtx_push("spans the window's end");
  tp_nvtx_window(0);
  assert_int_equal(tp_nvtx_recording(), 0);
  tp_nvtx_pop(); /* its push was recorded, so its pop is too */
  assert_int_equal(tp_nvtx_open_ranges(), 0);
  tp_nvtx_gate(0);
  assert_int_equal(tp_nvtx_recording(), 1);
}

static void test_nvtx_bookkeeping(void **state) {
  (void)state;
  /* No tool is attached in a CPU test: ranges are no-ops, but the first call
   * is remembered, which is what lets the collector refuse a late start. */
  unsetenv("NVTX_INJECTION64_PATH");
  assert_int_equal(tp_nvtx_used(), 0);
  tp_nvtx_push("iteration");
  assert_int_equal(tp_nvtx_used(), 1);
  tp_nvtx_push(NULL);
  tp_nvtx_pop();
  tp_nvtx_pop();
  assert_int_equal(tp_nvtx_attach(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_overlap_empty),
      cmocka_unit_test(test_overlap_disjoint),
      cmocka_unit_test(test_overlap_nested),
      cmocka_unit_test(test_overlap_touching),
      cmocka_unit_test(test_overlap_several_streams),
      cmocka_unit_test(test_overlap_several_ranks),
      cmocka_unit_test(test_overlap_clipping),
      cmocka_unit_test(test_overlap_what_counts),
      cmocka_unit_test(test_overlap_sync_is_neither),
      cmocka_unit_test(test_overlap_bad_arguments),
      cmocka_unit_test(test_overlap_matches_brute_force),
      cmocka_unit_test(test_classify_names),
      cmocka_unit_test(test_classify_copies_and_labels),
      cmocka_unit_test(test_evidence_confirms_each_schedule),
      cmocka_unit_test(test_evidence_nccl_window_symmetric_kernels),
      cmocka_unit_test(test_evidence_wrong_count_is_an_error),
      cmocka_unit_test(test_evidence_foreign_fingerprints),
      cmocka_unit_test(test_evidence_counts_only_the_window),
      cmocka_unit_test(test_evidence_usage_errors),
      cmocka_unit_test(test_op_evidence_ce_ok),
      cmocka_unit_test(test_op_evidence_knows),
      cmocka_unit_test(test_op_evidence_shared_gpu_pushes),
      cmocka_unit_test(test_op_evidence_nccl_inside_ce_fails),
      cmocka_unit_test(test_op_evidence_ce_without_copies_fails),
      cmocka_unit_test(test_op_evidence_stock_with_peer_copy_fails),
      cmocka_unit_test(test_op_evidence_mixed_layer_op_by_op),
      cmocka_unit_test(test_op_evidence_not_checked),
      cmocka_unit_test(test_op_evidence_combine_and_usage),
      cmocka_unit_test(test_clock_offset),
      cmocka_unit_test(test_nvtx_bookkeeping),
      cmocka_unit_test(test_nvtx_gate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
