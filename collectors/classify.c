/*
 * classify.c — kernel and copy names to categories, by one ordered rule table.
 *
 * The overlap math (overlap.c) needs to know which intervals are
 * communication, which are synchronisation and which are compute, and the
 * schedule evidence (evidence.c) needs to count NCCL kernels and tpbench's
 * SM copy kernel. Both ask this file, and this file asks one table: to teach
 * tpbench a new kernel family, add a row. Rows are tried top to bottom and
 * the first match wins, so the order carries meaning: NCCL and tpbench's own
 * kernels first (each of tpbench's kernels has its own row, so every one is
 * filed deliberately; tests/cpu/test_classify_h200.c fails on a kernel in
 * kernels/ without one), attention before GEMM (FlashAttention-3 runs as
 * "cutlass::device_kernel<flash::...>", which is attention, not a GEMM), GEMM
 * before elementwise (cuBLAS's split-K reduction is part of the GEMM).
 *
 * Communication means bytes moving: NCCL kernels, peer copies, the SM copy
 * kernel, and the reductions of partials that peers pushed (reduce_sum*).
 * Waiting is not moving: the barrier, signal and wait kernels spin on flags
 * and are "sync", so they neither count as communication nor as compute.
 *
 * CUPTI reports kernel names mangled ("_Z31ncclDevKernel_AllGather_RING_LL
 * 24ncclDevKernelArgsStorageILm4096EE"); profilers show them demangled
 * ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)").
 * Rules match substrings, so one rule serves both spellings. tpbench's own
 * kernels have short generic names ("wait_kernel"), so they match as whole
 * identifiers: not preceded by a letter or '_' (a mangled length prefix is
 * digits) and not followed by a lowercase letter, digit or '_'.
 */
#include <ctype.h>
#include <stddef.h>
#include <string.h>

#include "collectors/tp_collector.h"

typedef enum {
  MATCH_SUBSTR, /* case-sensitive substring */
  MATCH_NOCASE, /* case-insensitive substring */
  MATCH_IDENT   /* substring that is a whole identifier */
} match_mode;

typedef struct rule {
  const char *pattern;
  match_mode mode;
  tp_event_category category;
  tp_kernel_origin origin;
} rule;

/* THE table. Examples of real names each row exists for are in
 * tests/cpu/test_collectors.c. */
static const rule rules[] = {
    /* NCCL device kernels: "ncclDevKernel_*" since NCCL 2.19, "ncclKernel_*" before; the
     * symmetric kernels on registered windows (2.27 on): "ncclSymkDevKernel_*". */
    {"ncclDevKernel_", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_NCCL},
    {"ncclSymkDevKernel_", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_NCCL},
    {"ncclKernel_", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_NCCL},
    /* NVLink multicast (multimem.ld_reduce / multimem.st): PyTorch's symmetric-memory
     * multimem_all_reduce_kernel, multimem_one_shot_all_reduce_kernel,
     * multimem_all_gather_kernel. Before the all-reduce rows below, which they contain. */
    {"multimem", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_MULTICAST},
    /* tpbench's kernels, every one (kernels/tp_copy.cu, tp_signal.cu, tp_bias.cu,
     * tp_layers.cu). Moving bytes: the SM copy into a peer's memory, and the sums of
     * the partials peers pushed (reduce-scatter side, W > 2; reduce_sum_vec_kernel is
     * the 16-byte path actually launched for aligned sizes). */
    {"copy_signal_kernel", MATCH_IDENT, TP_CAT_COMM, TP_KERNEL_OWN_COPY},
    {"reduce_sum_vec_kernel", MATCH_IDENT, TP_CAT_COMM, TP_KERNEL_OWN_REDUCE},
    {"reduce_sum_kernel", MATCH_IDENT, TP_CAT_COMM, TP_KERNEL_OWN_REDUCE},
    /* Waiting: spin on flags in peers' pads until they are raised. */
    {"barrier_kernel", MATCH_IDENT, TP_CAT_SYNC, TP_KERNEL_OWN_SIGNAL},
    {"signal_kernel", MATCH_IDENT, TP_CAT_SYNC, TP_KERNEL_OWN_SIGNAL},
    {"wait_kernel", MATCH_IDENT, TP_CAT_SYNC, TP_KERNEL_OWN_SIGNAL},
    /* PyTorch's symmetric memory (torch/csrc/distributed/c10d/symm_mem): SM kernels that
     * load from or store to peers' buffers move bytes (one_shot_all_reduce_kernel,
     * two_shot_all_reduce_kernel and its _inplace form, which also serves reduce_scatter_out;
     * SM all-gathers); its put_signal/wait_signal kernels only wait (its barrier_kernel is
     * sync through tpbench's row above). Any other kernel of the c10d::symmetric_memory
     * namespace is taken as a transfer. */
    {"put_signal_kernel", MATCH_IDENT, TP_CAT_SYNC, TP_KERNEL_OTHER},
    {"wait_signal_kernel", MATCH_IDENT, TP_CAT_SYNC, TP_KERNEL_OTHER},
    {"one_shot_all_reduce", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
    {"two_shot_all_reduce", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
    {"all_gather", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
    {"symmetric_memory", MATCH_SUBSTR, TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
    /* Compute of the layers: norms, rotary embedding, SwiGLU, bias. sum_sources_kernel
     * sums fp32 column partials: local everywhere but in the fused row-parallel bias
     * gradient, where it reads W vectors of one row each from the peers (a few KiB);
     * the name cannot tell the two apart, so it is filed with the local majority. */
    {"rmsnorm_fwd_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"rmsnorm_bwd_dx_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"rmsnorm_dg_partial_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"rmsnorm_dg_final_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"rope_table_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"rope_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"swiglu_fwd_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"swiglu_bwd_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"add_bias_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"column_partial_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"sum_sources_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    /* A fused fp8 pass's amax agreement: the max of the ranks' amaxes, read from the
     * slots of its own workspace the peers pushed them into (the pushes are the comm). */
    {"max_sources_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    /* The attention core's own kernels (its GEMMs are cuBLASLt's). */
    {"attention_heads_copy_kernel", MATCH_IDENT, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"attention_softmax_fwd_kernel", MATCH_IDENT, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"attention_softmax_bwd_kernel", MATCH_IDENT, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    /* Buffers: random fills, NaN poisoning, casts for the checks; the numerics
     * comparison runs outside timed windows and is none of the layer's work. */
    {"fill_random_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"poison_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"to_fp32_kernel", MATCH_IDENT, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"compare_kernel", MATCH_IDENT, TP_CAT_OTHER, TP_KERNEL_OTHER},
    /* The test knob's fixed slowdown inside a fused op (off by default): it stands
     * for slower work of the op, so it counts as compute, not as waiting. */
    {"delay_kernel", MATCH_IDENT, TP_CAT_OTHER, TP_KERNEL_OTHER},
    /* Attention: flash (FA2 "flash_fwd_kernel", FA3 "FlashAttnFwdSm90"), xformers and
     * PyTorch memory-efficient (fmha_cutlassF, AttentionKernel), cuDNN SDPA, softmax. */
    {"flash", MATCH_NOCASE, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"fmha", MATCH_NOCASE, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"sdpa", MATCH_NOCASE, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"attention", MATCH_NOCASE, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    {"softmax", MATCH_NOCASE, TP_CAT_ATTENTION, TP_KERNEL_OTHER},
    /* GEMM: cuBLAS(Lt) Hopper ("sm90_xmma_gemm_*", "nvjet_*"), Ampere ("ampere_*gemm*",
     * "sm80_xmma_*"), CUTLASS, split-K reduction ("splitKreduce_kernel"), GEMV. */
    {"gemm", MATCH_NOCASE, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"gemv", MATCH_NOCASE, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"xmma", MATCH_SUBSTR, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"nvjet", MATCH_SUBSTR, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"cutlass", MATCH_NOCASE, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"cublas", MATCH_NOCASE, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"splitKreduce", MATCH_SUBSTR, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"ampere_", MATCH_SUBSTR, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"sm80_", MATCH_SUBSTR, TP_CAT_GEMM, TP_KERNEL_OTHER},
    {"sm90_", MATCH_SUBSTR, TP_CAT_GEMM, TP_KERNEL_OTHER},
    /* Elementwise: PyTorch's elementwise loops, Triton pointwise ("triton_poi_"), fills,
     * tpbench's fill/poison/cast kernels. */
    {"elementwise", MATCH_NOCASE, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"vectorized", MATCH_NOCASE, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"triton_poi_", MATCH_SUBSTR, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"fill", MATCH_NOCASE, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
    {"poison", MATCH_NOCASE, TP_CAT_ELEMENTWISE, TP_KERNEL_OTHER},
};

static int ident_char(char ch) { return isalpha((unsigned char)ch) || ch == '_'; }

/* True when the match at name[at, at+len) is a whole identifier (see the header). */
static int ident_bounded(const char *name, size_t at, size_t len) {
  if (at > 0 && ident_char(name[at - 1])) return 0;
  char next = name[at + len];
  return !(islower((unsigned char)next) || isdigit((unsigned char)next) || next == '_');
}

static int starts_nocase(const char *s, const char *pat) {
  for (; *pat; ++s, ++pat)
    if (tolower((unsigned char)*s) != tolower((unsigned char)*pat)) return 0;
  return 1;
}

static int rule_matches(const rule *r, const char *name) {
  size_t len = strlen(r->pattern);
  switch (r->mode) {
  case MATCH_SUBSTR: return strstr(name, r->pattern) != NULL;
  case MATCH_NOCASE:
    for (const char *p = name; *p; ++p)
      if (starts_nocase(p, r->pattern)) return 1;
    return 0;
  case MATCH_IDENT:
    for (const char *p = name; (p = strstr(p, r->pattern)) != NULL; ++p)
      if (ident_bounded(name, (size_t)(p - name), len)) return 1;
    return 0;
  }
  return 0;
}

tp_kernel_class tp_classify_kernel_ex(const char *name) {
  tp_kernel_class out = {TP_CAT_OTHER, TP_KERNEL_OTHER, ""};
  if (!name || !*name) return out;
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; ++i) {
    if (rule_matches(&rules[i], name)) {
      out.category = rules[i].category;
      out.origin = rules[i].origin;
      out.rule = rules[i].pattern;
      return out;
    }
  }
  return out;
}

tp_event_category tp_classify_kernel(const char *name) {
  return tp_classify_kernel_ex(name).category;
}

tp_event_category tp_classify_copy(tp_copy_kind kind) {
  return kind == TP_COPY_PTOP ? TP_CAT_COMM : TP_CAT_OTHER;
}

tp_event_category tp_classify_sync(void) { return TP_CAT_SYNC; }

/* names[value], or "invalid" for a value outside the table or without a name. */
static const char *name_in(const char *const *names, size_t n, unsigned value) {
  return value < n && names[value] ? names[value] : "invalid";
}

const char *tp_category_name(tp_event_category category) {
  static const char *const names[TP_CAT_COUNT] = {[TP_CAT_COMM] = "comm",
                                                  [TP_CAT_SYNC] = "sync",
                                                  [TP_CAT_GEMM] = "gemm",
                                                  [TP_CAT_ATTENTION] = "attention",
                                                  [TP_CAT_ELEMENTWISE] = "elementwise",
                                                  [TP_CAT_OTHER] = "other",
                                                  [TP_CAT_RANGE] = "range"};
  return name_in(names, TP_CAT_COUNT, (unsigned)category);
}

const char *tp_event_type_name(tp_event_type type) {
  static const char *const names[] = {[TP_EV_KERNEL] = "kernel",
                                      [TP_EV_MEMCPY] = "memcpy",
                                      [TP_EV_MEMSET] = "memset",
                                      [TP_EV_SYNC] = "sync",
                                      [TP_EV_RANGE] = "range"};
  return name_in(names, sizeof names / sizeof names[0], (unsigned)type);
}

const char *tp_copy_kind_name(tp_copy_kind kind) {
  static const char *const names[] = {"none", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                      "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  return name_in(names, sizeof names / sizeof names[0], (unsigned)kind);
}
