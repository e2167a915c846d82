/*
 * presets.h — model shapes (the presets, taken from published model
 * configurations, and models the user defines in a matrix file) and the
 * tensor-parallel projections a transformer layer of each runs.
 *
 * A preset carries the shapes of one published model (debug is a tiny one
 * for quick runs). A user's model is checked by tp_model_set_add and found,
 * like a preset, by tp_model_find. A projection names one TP linear op of a layer: its op
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

enum {
  TP_MODEL_NAME_MAX = 48, /* bytes of a model's name, its NUL included */
  TP_MODEL_SET_MAX = 16   /* models one matrix file may define */
};

/* The model name of `ops --shape` configurations: a bare projection of no model. */
#define TP_SHAPE_MODEL "shape"

/* A model's shapes. A value type: the name is held, not pointed to, so a copy
 * stands alone (user-defined models travel inside the specs by copy). */
typedef struct tp_model_preset {
  char name[TP_MODEL_NAME_MAX]; /* canonical: "debug", "llama3-8b", "qwen2.5-72b", ... */
  int dim;                      /* model (hidden) width */
  int n_heads;
  int n_kv_heads; /* grouped-query attention: heads sharing K and V */
  int head_dim;
  int ffn_hidden; /* SwiGLU inner width (w1 and w3 each) */
  int n_layers;   /* 0: not given (a user's model) */
  int vocab;      /* 0: not given */
  /* NULL, or why the model's attention cannot be expressed as the grouped-query
   * attention timed here (its attention layers and projections are rejected with
   * this reason; its FFN is timed). */
  const char *no_attention;
  /* a tiny shape for quick runs (debug), kept out of every headline: tp_model_is_toy
   * (common/tp_vocab.h) names them, so report/ knows them without the presets */
} tp_model_preset;

/* Finds a preset by canonical name or short alias ("8b" or "llama3-8b",
 * case-insensitive). TP_EUSAGE listing the valid names if none matches. */
TP_MUST_CHECK tp_rc tp_preset_find(const char *name, const tp_model_preset **out);

/* The name a --model filter of stored results (report's, compare's) looks for: a preset's
 * canonical name for any of its names or its alias, in any case ("8b": "llama3-8b"); any other
 * name as given, which the filters match in any case, as model names are matched everywhere
 * ("mymodel" finds a matrix file's "MyModel"). NULL stays NULL. */
const char *tp_model_filter_name(const char *name);

/* All presets, smallest first: *count receives their number. */
const tp_model_preset *tp_presets(int *count);

/* Models a user defined (in a matrix file), by copy. */
typedef struct tp_model_set {
  int count;
  tp_model_preset models[TP_MODEL_SET_MAX];
} tp_model_set;

/* Checks model and appends a copy to set. The rules: a name of 1 to 47
 * characters from [A-Za-z0-9._-] that is neither a preset's name or alias
 * (any case), nor TP_SHAPE_MODEL, nor already in set (any case: names match
 * in any case, so "MyModel" and "mymodel" are one model); dim, n_heads, n_kv_heads,
 * head_dim and ffn_hidden whole numbers in [1, 1048576]; head_dim even (RoPE
 * rotates pairs); n_heads a multiple of n_kv_heads (grouped-query attention);
 * n_layers and vocab 0 (not given) or in [1, 1048576]; no_attention NULL. Unlike
 * the Llama 3 presets, dim need not equal n_heads·head_dim (wo maps
 * n_heads·head_dim back to dim). TP_EUSAGE naming the field otherwise (set
 * unchanged), also when set is full. */
TP_MUST_CHECK tp_rc tp_model_set_add(tp_model_set *set, const tp_model_preset *model);

/* Finds name among set's models (any case, as presets are found; set may be
 * NULL) and then the presets (tp_preset_find). TP_EUSAGE listing the valid names, the set's
 * too, if none matches. */
TP_MUST_CHECK tp_rc tp_model_find(const tp_model_set *set, const char *name,
                                  const tp_model_preset **out);

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
