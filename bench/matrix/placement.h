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
 *
 * The second half (tp_mesh_*) places tensors on two mesh dimensions, dp × tp
 * (FSDP beside TP): one placement per dimension for each tensor, the shard a
 * rank holds, and the check that every shard divides.
 * Pure C, no CUDA.
 */
#ifndef TP_PLACEMENT_H
#define TP_PLACEMENT_H

#include <stddef.h>
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

/* ---- two mesh dimensions: data parallel × tensor parallel ------------------------------
 *
 * `run --axis dp=D --axis tp=T` places a layer on a D × T mesh of D·T ranks,
 * laid out tp-innermost:
 *   rank = dp_index · T + tp_index
 * so a TP group is T consecutive ranks (the GPUs of one NVLink island when T
 * divides a host's GPUs) and a dp group is the ranks T apart. Each tensor has
 * one placement per mesh dimension, as DTensor's: shard(d) (split along its
 * dim d), replicate, or partial (a sum over that dimension's ranks). When both
 * dimensions shard one tensor dim, tp splits it first and dp splits the TP
 * shard (FSDP over TP: the TP-local tensor's dim 0 is what FSDP shards), so
 * the dim must divide by T and its TP shard by D. Parameters are never
 * partial: a gradient is (over dp, until its reduce-scatter).
 */
typedef enum { TP_MESH_REPLICATE = 0, TP_MESH_SHARD, TP_MESH_PARTIAL } tp_mesh_kind;

typedef struct tp_mesh_place {
  tp_mesh_kind kind;
  int dim; /* shard's tensor dim */
} tp_mesh_place;

enum { TP_MESH_DP = 0, TP_MESH_TP = 1, TP_MESH_NDIMS = 2, TP_MESH_MAX_RANK = 3 };

typedef struct tp_mesh {
  int dp, tp; /* sizes, >= 1 */
} tp_mesh;

typedef struct tp_mesh_tensor {
  const char *name;                /* static */
  int rank;                        /* tensor dims, 1..TP_MESH_MAX_RANK */
  int64_t shape[TP_MESH_MAX_RANK]; /* global */
  tp_mesh_place on[TP_MESH_NDIMS]; /* by mesh dimension: TP_MESH_DP, TP_MESH_TP */
  int is_param;                    /* a parameter: never partial */
} tp_mesh_tensor;

/* The rank of mesh coordinates (tp-innermost) and back; the caller keeps the
 * indices inside the mesh. */
int tp_mesh_rank(const tp_mesh *m, int dp_index, int tp_index);
void tp_mesh_coords(const tp_mesh *m, int rank, int *dp_index, int *tp_index);

/* "shard(0)", "replicate", "partial". */
const char *tp_mesh_place_name(tp_mesh_place p, char *buf, size_t cap);

/* The shape one rank holds. TP_EREJECT naming the tensor, the mesh dimension
 * and the tensor dim when a shard names a dim the tensor lacks or does not
 * split evenly, or a parameter is partial; TP_EINTERNAL for a malformed
 * tensor or mesh. */
TP_MUST_CHECK tp_rc tp_mesh_local_shape(const tp_mesh *m, const tp_mesh_tensor *t,
                                        int64_t local[TP_MESH_MAX_RANK]);

/* tp_mesh_local_shape of every tensor: the first failure. */
TP_MUST_CHECK tp_rc tp_mesh_check(const tp_mesh *m, const tp_mesh_tensor *t, int n);

enum { TP_MESH_MAX_TENSORS = 24 };

/* The tensors of a layer ("attention", "ffn", "block") under FSDP × TP: the
 * block's input x [B, S, D] (dp shard(0): whole sequences per dp rank; tp
 * shard(1) with sequence parallelism, else replicate), every parameter (dp
 * shard(0); tp shard(0) column-parallel qkv, w1, w3; shard(1) row-parallel
 * wo, w2; replicate the RMSNorm weights) and, for each, its gradient as the
 * backward leaves it before the reduce-scatter (dp partial, tp as the
 * parameter). out has room for TP_MESH_MAX_TENSORS. TP_EUSAGE for an unknown
 * layer. */
TP_MUST_CHECK tp_rc tp_mesh_layer_tensors(const char *layer, int sp, const tp_layer_dims *dims,
                                          int64_t batch, int64_t seqlen, tp_mesh_tensor *out,
                                          int *n);

#endif /* TP_PLACEMENT_H */
