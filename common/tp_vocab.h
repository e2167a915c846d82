/*
 * tp_vocab.h — the words every stage shares, each an enum with one name
 * table: element type, pass, backend, schedule, op and layer. The matrix
 * parses the user's names into these once; everything downstream (workers,
 * kernels, labels, stored axes) works on the enums and turns them back into
 * names only here. Pure C, usable from CUDA sources.
 */
#ifndef TP_VOCAB_H
#define TP_VOCAB_H

#include <stddef.h>

#include "common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the vocabularies that grow: one line per value ----------------------------------------
 * The dtypes and the schedules are each one X-macro list of X(VALUE, "name", CLASS) lines. The
 * enum, its name table (tp_vocab.c), the names a user may ask for and every list of values an
 * option or a matrix prints (bench/cli, bench/matrix) expand from that list, so a new value is
 * one line here and no list elsewhere can forget it. The order is the enum's and every list's.
 * CLASS is one word saying which lists take the value; its properties are these tables: */

/* TP_VOCAB_ASKED_<CLASS>: 1 when a user may ask for the value (the options' choices, the
 * matrices' axes), 0 when tpbench only records it. Asked values come before recorded ones,
 * because a parsed name's index is its enum value (tp_vocab.c checks it). */
#define TP_VOCAB_ASKED_ELEMENT 1
#define TP_VOCAB_ASKED_FP8 1
#define TP_VOCAB_ASKED_ASKED 1
#define TP_VOCAB_ASKED_RECORDED 0
/* TP_VOCAB_FP8_<CLASS>: a dtype that is an fp8 recipe rather than an element type. */
#define TP_VOCAB_FP8_ELEMENT 0
#define TP_VOCAB_FP8_FP8 1

/* TP_VOCAB_IF(COND, text...): the text where COND expands to 1, nothing where it is 0. The extra
 * level lets COND (a TP_VOCAB_<PROPERTY>_<CLASS> name) expand before it is pasted. */
#define TP_VOCAB_IF(cond, ...) TP_VOCAB_IF_(cond, __VA_ARGS__)
#define TP_VOCAB_IF_(cond, ...) TP_VOCAB_IF_##cond(__VA_ARGS__)
#define TP_VOCAB_IF_1(...) __VA_ARGS__
#define TP_VOCAB_IF_0(...)

/* What a list expands to, given one of these as X (the counts are terms of a sum, "0 +1 +1",
 * so they cannot be parenthesized): */
#define TP_VOCAB_ENUM(value, name, class) value,
#define TP_VOCAB_NAME(value, name, class) name,
#define TP_VOCAB_COUNT(value, name, class) +1 /* NOLINT(bugprone-macro-parentheses) */
#define TP_VOCAB_COUNT_ASKED(value, name, class)                                                   \
  +TP_VOCAB_ASKED_##class /* NOLINT(bugprone-macro-parentheses) */
/* How many of LIST's values a user may ask for: the first so many (tp_vocab.c checks it). */
#define TP_VOCAB_N_ASKED(list) (0 list(TP_VOCAB_COUNT_ASKED))
/* the asked names as array elements ("auto", "ce", ...,) */
#define TP_VOCAB_ASKED_NAME(value, name, class) TP_VOCAB_IF(TP_VOCAB_ASKED_##class, name, )
/* the asked names, each after a separator, as one string literal: "|auto|ce..." */
#define TP_VOCAB_ASKED_PIPED(value, name, class) TP_VOCAB_IF(TP_VOCAB_ASKED_##class, "|" name)
#define TP_VOCAB_ASKED_COMMA(value, name, class) TP_VOCAB_IF(TP_VOCAB_ASKED_##class, "," name)
#define TP_VOCAB_ASKED_COMMA_SPACE(value, name, class)                                             \
  TP_VOCAB_IF(TP_VOCAB_ASKED_##class, ", " name)

/* The asked names of LIST joined by the separator X puts before each (TP_VOCAB_ASKED_PIPED:
 * "auto|ce|sm|ring|multimem"), the first separator skipped (SKIP: its length): a pointer into
 * a string literal, so it initializes static tables too. */
#define TP_VOCAB_JOINED(list, X, skip) (&("" list(X))[skip])
#define TP_VOCAB_PIPED(list) TP_VOCAB_JOINED(list, TP_VOCAB_ASKED_PIPED, 1)
#define TP_VOCAB_COMMAS(list) TP_VOCAB_JOINED(list, TP_VOCAB_ASKED_COMMA, 1)
#define TP_VOCAB_COMMA_SPACES(list) TP_VOCAB_JOINED(list, TP_VOCAB_ASKED_COMMA_SPACE, 2)

/* The dtype axis. Element types (ELEMENT): "bf16" (2 bytes), "fp32" (4 bytes). The fp8 formats
 * of the GEMMs (FP8; kernels/tp_quant.h; issue 15): "fp8" (E4M3, one scale per tensor),
 * "fp8-row" (per row / output channel), "fp8-block" (1x128 activation, 128x128 weight blocks),
 * "mxfp8" (32-element blocks, E8M0 scales). An fp8 dtype is a recipe, not an element type: the
 * layer's activations and outputs are stored in bf16 (tp_dtype_storage), each GEMM quantizes its
 * operands. Kernels that take a tp_dtype as an element type take bf16 or fp32 only. */
#define TP_DTYPE_LIST(X)                                                                           \
  X(TP_BF16, "bf16", ELEMENT)                                                                      \
  X(TP_FP32, "fp32", ELEMENT)                                                                      \
  X(TP_FP8, "fp8", FP8)                                                                            \
  X(TP_FP8_ROW, "fp8-row", FP8)                                                                    \
  X(TP_FP8_BLOCK, "fp8-block", FP8)                                                                \
  X(TP_MXFP8, "mxfp8", FP8)

typedef enum { TP_DTYPE_LIST(TP_VOCAB_ENUM) } tp_dtype;

/* Bit d set for each fp8 dtype d. */
#define TP_VOCAB_FP8_BIT(value, name, class) | ((unsigned)TP_VOCAB_FP8_##class << (value))
enum {
  TP_N_DTYPES = 0 TP_DTYPE_LIST(TP_VOCAB_COUNT),
  TP_DTYPE_FP8_MASK = (int)(0u TP_DTYPE_LIST(TP_VOCAB_FP8_BIT))
};

/* One of the fp8 formats (their GEMMs run quantized). */
static inline int tp_dtype_is_fp8(tp_dtype dt) {
  return (unsigned)dt < (unsigned)TP_N_DTYPES && (((unsigned)TP_DTYPE_FP8_MASK >> dt) & 1u);
}

/* The element type the layer's activations are stored in: bf16 for the fp8
 * formats, the dtype itself otherwise. */
static inline tp_dtype tp_dtype_storage(tp_dtype dt) { return tp_dtype_is_fp8(dt) ? TP_BF16 : dt; }

/* Bytes of one stored element (of tp_dtype_storage(dt): 2 for the fp8
 * formats, whose 1-byte quantized copies are counted where they are made). */
static inline size_t tp_dtype_bytes(tp_dtype dt) {
  return tp_dtype_storage(dt) == TP_FP32 ? 4u : 2u;
}

/* The names of TP_DTYPE_LIST, indexed by tp_dtype. */
extern const char *const tp_dtype_names[TP_N_DTYPES];

/* The dtype's name in TP_DTYPE_LIST; "?" for another value. */
const char *tp_dtype_name(tp_dtype dt);

/* What one timed iteration runs: "fwd", "bwd" (the backward alone, its forward
 * run before the window), "fwd+bwd". */
typedef enum { TP_PASS_FWD = 0, TP_PASS_BWD, TP_PASS_FWD_BWD } tp_pass;

/* "fwd", "bwd", "fwd+bwd"; "?" for another value. */
const char *tp_pass_name(tp_pass pass);

/* The pass runs a backward (bwd or fwd+bwd). */
static inline int tp_pass_has_backward(tp_pass pass) { return pass != TP_PASS_FWD; }

/* How a configuration computes its op or layer. STOCK: the NCCL collective
 * and the cuBLASLt GEMM one after the other, as a framework does. DIST: the
 * fused dist_gemm schedules. GEMM_ONLY and COMM_ONLY: the two halves of the
 * stock path alone, the references that bound a fused configuration. */
typedef enum {
  TP_BACKEND_STOCK = 0,
  TP_BACKEND_DIST,
  TP_BACKEND_GEMM_ONLY,
  TP_BACKEND_COMM_ONLY
} tp_backend;

enum { TP_N_BACKENDS = 4 };

/* The backend in plans and NVTX range names: "stock", "dist_gemm", "gemm_only", "comm_only". */
const char *tp_backend_name(tp_backend backend);

/* The stored "backend" axis: "stock", "dist_gemm", "cublaslt" (GEMM alone), "nccl"
 * (collective alone). */
const char *tp_backend_axis(tp_backend backend);

/* The stored "kind" axis of a configuration: what it times. "op" or "layer"
 * (as unit_kind says) for stock and dist_gemm, "gemm" for the GEMM alone,
 * "comm" for the collective alone. */
const char *tp_backend_kind(tp_backend backend, const char *unit_kind);

/* GEMM_ONLY or COMM_ONLY: a reference, not a candidate. */
static inline int tp_backend_is_reference(tp_backend backend) {
  return backend == TP_BACKEND_GEMM_ONLY || backend == TP_BACKEND_COMM_ONLY;
}

/* dist_gemm's schedules. AUTO lets the plan choose; the fused schedules (CE: copy-engine pushes,
 * SM: copy kernels, RING: neighbour pushes, MULTIMEM: NVLink multicast) are the user's to ask
 * for (ASKED; the ring runs at TP 2 only, multimem not in this build: tp_dist_rejection in
 * common/tp_chunk_rule.h). NCCL is what the stock path runs (and what AUTO records
 * when it does not fuse); NCCL_WINDOW is the stock path's second variant: the same NCCL collectives
 * on buffers registered as NCCL symmetric windows (kernels/tp_window.h). Both are RECORDED only:
 * "nccl" is never asked for, "nccl-window" is asked as the stock variant (tp_stock_vocab). */
#define TP_SCHEDULE_LIST(X)                                                                        \
  X(TP_SCHED_AUTO, "auto", ASKED)                                                                  \
  X(TP_SCHED_CE, "ce", ASKED)                                                                      \
  X(TP_SCHED_SM, "sm", ASKED)                                                                      \
  X(TP_SCHED_RING, "ring", ASKED)                                                                  \
  X(TP_SCHED_MULTIMEM, "multimem", ASKED)                                                          \
  X(TP_SCHED_NCCL, "nccl", RECORDED)                                                               \
  X(TP_SCHED_NCCL_WINDOW, "nccl-window", RECORDED)

typedef enum { TP_SCHEDULE_LIST(TP_VOCAB_ENUM) } tp_schedule;

enum { TP_N_SCHEDULES = 0 TP_SCHEDULE_LIST(TP_VOCAB_COUNT) };

/* The names of TP_SCHEDULE_LIST, indexed by tp_schedule; the asked ones come first. */
extern const char *const tp_schedule_names[TP_N_SCHEDULES];

/* The schedule's name in TP_SCHEDULE_LIST; "?" for another value. */
const char *tp_schedule_name(tp_schedule schedule);

/* How dist_gemm's fused reduce-scatter sums the ranks' partials (the stored
 * rs_sum axis). EPILOGUE: the received partial is the C operand of the local
 * rows' GEMM, accumulated in fp32 and rounded once (with more than two ranks
 * the peers' partials are first summed in rank order, fp32, one rounding).
 * NCCL: every partial rounded to the dtype first, then summed as NCCL's ring
 * reduce-scatter does, one rounding per add (kernels/tp_sum_chain.h): at TP 2
 * one add of two operands, NCCL's result whatever its algorithm; beyond, the
 * ring order (unverified against NCCL there). */
typedef enum { TP_RS_SUM_EPILOGUE = 0, TP_RS_SUM_NCCL } tp_rs_sum;

/* "epilogue", "nccl"; "?" for another value. */
const char *tp_rs_sum_name(tp_rs_sum sum);

/* What travels on an fp8 op's all-gather side (the comm_dtype axis, issue
 * 15): NONE — nothing quantized travels (bf16 and fp32 dtypes, TP 1, the
 * reduce-scatter side, which reduces bf16 partials); BF16 — the bf16 shard
 * is gathered and the gathered whole quantized; FP8 — the quantized shard
 * and its scales are gathered (half the bytes). Stored as NULL, "bf16",
 * "fp8". */
typedef enum { TP_COMM_NONE = 0, TP_COMM_BF16, TP_COMM_FP8 } tp_comm_dtype;

/* "none", "bf16", "fp8"; "?" for another value. */
const char *tp_comm_dtype_name(tp_comm_dtype c);

/* The stored axis value: NULL for NONE, else the name. */
static inline const char *tp_comm_dtype_axis(tp_comm_dtype c) {
  return c == TP_COMM_NONE ? NULL : c == TP_COMM_BF16 ? "bf16" : "fp8";
}

/* The stock path's variants (the `stock` axis of ops and run): PLAIN runs the
 * NCCL collectives on ordinary device buffers; WINDOW runs the same
 * collectives on buffers from ncclMemAlloc registered as symmetric windows
 * (NCCL_WIN_COLL_SYMMETRIC), stored as backend "stock" with schedule
 * "nccl-window" (plain stock's schedule stays empty, so its configuration
 * keys are those of runs before the variant existed). The collective-alone
 * reference (kind "comm") has the same two variants. */
typedef enum { TP_STOCK_PLAIN = 0, TP_STOCK_WINDOW } tp_stock_variant;

/* "plain", "window"; "?" for another value. */
const char *tp_stock_variant_name(tp_stock_variant variant);

/* The schedule a stock (or collective-alone) plan is asked for: AUTO (the
 * plain NCCL path) or NCCL_WINDOW. */
static inline tp_schedule tp_stock_schedule(tp_stock_variant variant) {
  return variant == TP_STOCK_WINDOW ? TP_SCHED_NCCL_WINDOW : TP_SCHED_AUTO;
}

/* The stored schedule axis of a stock or collective-alone configuration:
 * NULL for plain (as before the variant existed), "nccl-window" for window. */
static inline const char *tp_stock_schedule_axis(tp_stock_variant variant) {
  return variant == TP_STOCK_WINDOW ? "nccl-window" : NULL;
}

/* dist_gemm's transport: where the fused schedules' symmetric workspace and
 * signal pads live (the `symm` axis of ops and run). IPC: tpbench's own heap,
 * cudaMalloc'd and mapped into the peers with CUDA IPC handles
 * (kernels/tp_symm.h). NCCL: NCCL symmetric windows (ncclMemAlloc,
 * ncclCommWindowRegister NCCL_WIN_COLL_SYMMETRIC), each peer reached
 * through the LSA pointer NCCL's device API gives. The schedules, flags and
 * barriers are the same over both. Stored as dist_gemm's "symm" ("ipc" or
 * "nccl"); the other backends store none. */
typedef enum { TP_SYMM_IPC = 0, TP_SYMM_NCCL } tp_symm_transport;

/* The most ranks one tpbench group holds (kernels/tp_device.h's TP_MAX_WORLD is this): its
 * symmetric heap and signal pads map every peer. A job's world is one group, so its workers
 * (run: the dp x tp mesh; ops: the TP degree) are at most this many. */
enum { TP_MAX_GROUP_RANKS = 16 };

/* 1 with the reason ("WHAT: a tpbench group holds at most 16 ranks (...)") when ranks exceed
 * TP_MAX_GROUP_RANKS; 0 otherwise. The one wording of the rule for the matrices and the job. */
int tp_group_size_rejection(const char *what, long long ranks, char *reason, size_t cap);

/* The largest TP degree a matrix takes, and DP degree of run's mesh, however it is typed (--tp,
 * --axis tp=, a matrix file's axes.tp): one bound, so a value is accepted or refused the same
 * way whichever form gives it. Past TP_MAX_GROUP_RANKS a degree parses and its configurations
 * are rejected with tp_group_size_rejection's reason. */
enum { TP_MAX_DEGREE = 4096 };

/* "ipc", "nccl"; "?" for another value. */
const char *tp_symm_transport_name(tp_symm_transport transport);

/* The tensor-parallel projections. */
typedef enum {
  TP_OP_AG_LINEAR = 0,   /* all-gather the input, then one column-parallel GEMM */
  TP_OP_AG_LINEAR_MULTI, /* one all-gather feeding several column-parallel GEMMs */
  TP_OP_LINEAR_RS        /* row-parallel GEMM, then reduce-scatter the output */
} tp_op;

/* "ag_linear", "ag_linear_multi", "linear_rs"; "?" for another value. */
const char *tp_op_name(tp_op op);

/* The all-gather side (AG_LINEAR, AG_LINEAR_MULTI) rather than the reduce-scatter side. */
static inline int tp_op_gathers(tp_op op) { return op != TP_OP_LINEAR_RS; }

/* The layers `tpbench run` times. */
typedef enum { TP_LAYER_ATTENTION = 0, TP_LAYER_FFN, TP_LAYER_BLOCK } tp_layer;

/* "attention", "ffn", "block"; "?" for another value. */
const char *tp_layer_name(tp_layer layer);

/* Whether a model (by its canonical name, "debug", "llama3-8b") is one of tpbench's toy shapes:
 * a tiny model for quick runs whose figures say nothing about a real one's. Every headline
 * (report, dashboard, compare, OpenMetrics: report/tp_report.h, tp_report_headline) keeps its
 * rows apart; the presets (bench/matrix/presets.c) ask here too. */
int tp_model_is_toy(const char *model);

/* The name tables behind the functions above, for parsing: TP_OK with the
 * enum value in *out when name is one of the n names, else TP_EUSAGE naming
 * what (e.g. "dtype") and the valid names. */
typedef struct tp_vocab_table {
  const char *what;
  const char *const *names;
  int n;
} tp_vocab_table;

extern const tp_vocab_table tp_dtype_vocab, tp_pass_vocab, tp_schedule_vocab, tp_op_vocab,
    tp_layer_vocab, tp_rs_sum_vocab, tp_stock_vocab, tp_symm_vocab, tp_comm_dtype_vocab;

TP_MUST_CHECK tp_rc tp_vocab_parse(const tp_vocab_table *table, const char *name, int *out);

#ifdef __cplusplus
}
#endif

#endif /* TP_VOCAB_H */
