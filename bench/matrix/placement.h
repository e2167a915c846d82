/*
 * placement.h — placement contracts of the ops a TP layer is built from, and
 * the check that a composition of them is consistent: the C counterpart of a
 * framework's placement type-checking (DTensor's Shard/Replicate/Partial).
 *
 * Every tensor between ops has a placement over the W ranks of the TP group
 * (rows in (seq, batch) order, sequence outermost):
 *   sequence-sharded  [S/W·B, F]  this rank's block of the sequence, every feature
 *   replicated        [S·B, F]    the whole tensor, the same on every rank
 *   feature-sharded   [S·B, F/W]  every row, this rank's heads or columns
 *   partial           [S·B, F]    a partial sum: the tensor is the sum over ranks
 * plus its global feature count F. Every op declares, for each input, the
 * placements it accepts and the feature count it expects, and for its output
 * a placement (or "the placement of its inputs", for row-wise ops such as
 * RMSNorm and the residual add, whose inputs must then agree).
 *
 * tp_composition_check walks the ops in order and checks every input
 * against what produced it, and the block's output against what the block
 * promises (the placement its input had, so blocks stack). A broken
 * composition is TP_EREJECT naming the op, the tensor and both placements,
 * before anything runs. tp_composition_layer builds the compositions tpbench
 * runs (bench/gpu/block*.c follows them op for op): the stock path as a
 * collective and a GEMM (two ops, with the partial sum between them on the
 * reduce-scatter side), the fused path as one op per projection, whose
 * contract has no replicated variant; that is why dist_gemm without sequence
 * parallelism does not compose.
 *
 * Only the forward is declared: each backward op has the dual contract of
 * its forward (an all-gather's backward reduce-scatters, and so on).
 * Pure C, no CUDA.
 */
#ifndef TP_PLACEMENT_H
#define TP_PLACEMENT_H

#include <stdint.h>

#include "common/tp_error.h"

typedef enum {
  TP_PLACE_SEQ_SHARDED = 0,
  TP_PLACE_REPLICATED,
  TP_PLACE_FEATURE_SHARDED,
  TP_PLACE_PARTIAL,
  TP_PLACE_AS_INPUT /* output only: the placement of the op's inputs */
} tp_placement;

/* A set of placements an input accepts. */
#define TP_PLACE_BIT(p) (1u << (unsigned)(p))
/* Row-wise ops take either unsharded-feature placement and keep it. */
#define TP_PLACE_ROWS (TP_PLACE_BIT(TP_PLACE_SEQ_SHARDED) | TP_PLACE_BIT(TP_PLACE_REPLICATED))

/* "sequence-sharded", "replicated", "feature-sharded", "partial", "as input". */
const char *tp_placement_name(tp_placement p);

enum { TP_PLACE_MAX_IN = 2, TP_PLACE_MAX_OPS = 32, TP_PLACE_MAX_TENSORS = 48 };

typedef struct tp_place_in {
  const char *tensor; /* the tensor consumed, by name */
  unsigned accepts;   /* TP_PLACE_BIT set */
  int64_t features;   /* global feature count expected */
} tp_place_in;

typedef struct tp_place_out {
  const char *tensor; /* the tensor produced (a name may be produced again: in-place ops) */
  tp_placement placement;
  int64_t features;
} tp_place_out;

typedef struct tp_place_op {
  const char *name; /* "attention.qkv.all_gather" */
  tp_place_in in[TP_PLACE_MAX_IN];
  int n_in;
  tp_place_out out;
} tp_place_op;

/* A block: its inputs (placed tensors), its ops in execution order, and
 * what it must give. Names are static strings. */
typedef struct tp_composition {
  const char *name;
  tp_place_out inputs[TP_PLACE_MAX_IN];
  int n_inputs;
  tp_place_op ops[TP_PLACE_MAX_OPS];
  int n_ops;
  tp_place_in output;
} tp_composition;

/* TP_OK when every op's inputs exist, carry an accepted placement and the
 * expected feature count (and, for an "as input" op, agree with each other),
 * and the block's output tensor matches its contract. Otherwise TP_EREJECT
 * with "<block>: <op> takes '<tensor>' <accepted> [F], but it is <actual>
 * [F']" or the like in tp_last_error(). TP_EINTERNAL for a malformed
 * composition (too many tensors, no name). */
TP_MUST_CHECK tp_rc tp_composition_check(const tp_composition *c);

/* The global shapes a layer's composition needs. */
typedef struct tp_layer_dims {
  int64_t dim;        /* D: the hidden size between blocks */
  int64_t qkv_width;  /* (n_heads + 2 n_kv_heads) · head_dim */
  int64_t q_width;    /* n_heads · head_dim: attention's output, wo's input */
  int64_t ffn_hidden; /* F: w1 and w3 each, w2's input */
} tp_layer_dims;

/* The composition of a layer as tpbench runs it: "attention" (RMSNorm, QKV,
 * RoPE, attention core, wo), "ffn" (RMSNorm, w1/w3 through one all-gather,
 * SwiGLU, w2) or "block" (both, each with its residual add). fused: the
 * dist_gemm contracts (one op per projection); else stock (collective and
 * GEMM). sp: sequence parallelism, which places the block's input x
 * sequence-sharded (else replicated). Builds; does not check. TP_EUSAGE for
 * an unknown layer. */
TP_MUST_CHECK tp_rc tp_composition_layer(const char *layer, int fused, int sp,
                                         const tp_layer_dims *dims, tp_composition *out);

#endif /* TP_PLACEMENT_H */
