/*
 * presets.h — Llama 3 model shapes and the tensor-parallel projections a
 * transformer layer of each runs.
 *
 * A preset carries the shapes of one published model (debug is a tiny one
 * for quick runs). A projection names one TP linear op of a layer: its op
 * kind (column-parallel all-gather side or row-parallel reduce-scatter side)
 * and its global GEMM shape (N out features per weight, K in features,
 * number of weights sharing one input). How a rank's share is cut from that
 * shape is the op's business (see ops_matrix.h).
 */
#ifndef TP_PRESETS_H
#define TP_PRESETS_H

#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"

typedef struct tp_model_preset {
  const char *name; /* canonical: "debug", "llama3-1b", "llama3-8b", ... */
  int dim;          /* model (hidden) width */
  int n_heads;
  int n_kv_heads; /* grouped-query attention: heads sharing K and V */
  int head_dim;
  int ffn_hidden; /* SwiGLU inner width (w1 and w3 each) */
  int n_layers;
  int vocab;
} tp_model_preset;

/* Finds a preset by canonical name or short alias ("8b" or "llama3-8b",
 * case-insensitive). TP_EUSAGE listing the valid names if none matches. */
TP_MUST_CHECK tp_rc tp_preset_find(const char *name, const tp_model_preset **out);

/* All presets, smallest first: *count receives their number. */
const tp_model_preset *tp_presets(int *count);

typedef struct tp_projection {
  const char *name; /* "qkv", "wo", "w13", "w2" */
  tp_op op;
  int64_t n;     /* global out features, per weight */
  int64_t k;     /* global in features */
  int n_weights; /* weights sharing one input: 2 for w13 (w1 and w3), else 1 */
} tp_projection;

/* The projections of one layer, in layer order: qkv, wo, w13, w2. */
const char *const *tp_projection_names(int *count);

/* Shapes of projection proj of model (TP-independent):
 *   qkv → ag_linear,       N = (n_heads + 2 * n_kv_heads) * head_dim, K = dim
 *   wo  → linear_rs,       N = dim, K = n_heads * head_dim
 *   w13 → ag_linear_multi, N = ffn_hidden per weight, K = dim, 2 weights
 *   w2  → linear_rs,       N = dim, K = ffn_hidden
 * TP_EUSAGE listing the valid names for an unknown proj. */
TP_MUST_CHECK tp_rc tp_preset_projection(const tp_model_preset *model, const char *proj,
                                         tp_projection *out);

/* Forward FLOPs of the whole projection (every weight, all ranks together)
 * for tokens tokens: 2 * tokens * N * K * n_weights. */
double tp_projection_flops(const tp_projection *proj, int64_t tokens);

/* The layers `tpbench run` times: "attention", "ffn" and "block" (both). */
const char *const *tp_layer_names(int *count);

/* FLOPs of one step of a layer over batch x seqlen tokens (T = batch·seqlen),
 * the whole TP group together (the count does not depend on TP):
 *   attention  2·T·D·(H + 2·Hkv)·d       QKV
 *            + 4·batch·seqlen²·H·d        the attention core's Q·Kᵀ and P·V,
 *                                         the full S×S products: NOT halved for
 *                                         the causal mask, because the core
 *                                         (kernels/tp_layers.h) computes them all
 *            + 2·T·H·d·D                  wo
 *   ffn        6·T·D·F                    w1 and w3 (2·T·D·F each), w2
 *   block      attention + ffn
 * (D dim, H heads, Hkv KV heads, d head_dim, F ffn_hidden). Element-wise work
 * (RMSNorm, RoPE, softmax, SwiGLU, residual adds) is not counted. backward
 * != 0 counts a forward and a backward: three times the forward, since the
 * backward runs two products the size of each forward one (dX and dW of a
 * projection; dP and dV, dQ and dK of the core). TP_EUSAGE for an unknown
 * layer (*out untouched). */
TP_MUST_CHECK tp_rc tp_layer_flops(const tp_model_preset *model, const char *layer, int64_t batch,
                                   int64_t seqlen, int backward, double *out);

#endif /* TP_PRESETS_H */
