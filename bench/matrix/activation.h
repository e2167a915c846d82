/*
 * activation.h — activation checkpointing (the `ac` axis of `tpbench run`):
 * its modes, and the bytes a layer's forward leaves for its backward under
 * each, per rank. Pure size arithmetic, no CUDA: the matrix, the GPU blocks
 * (bench/gpu/block.h, which runs the modes) and the CPU tests share it.
 *
 * The modes, for a layer of bench/gpu/block.h (attention: RMSNorm, QKV, RoPE,
 * causal core, wo; FFN: RMSNorm, w1/w3, SwiGLU, w2; block: both with their
 * residual adds):
 *   none       the backward reads what the forward wrote.
 *   selective  the forward keeps the projections' outputs (qkv before RoPE,
 *              w1's and w3's a and b, wo's output where a residual add needs
 *              it) and the attention core's output o with its softmax P (the
 *              core's backward reads P: this unfused core keeps it, a fused
 *              one would keep only its row statistics); the backward first
 *              recomputes RMSNorm (h and 1/rms of each part), RoPE (the rotated
 *              Q and K), the block's first residual add (x1 = x + attention(x))
 *              and SwiGLU (m = silu(a)·b), then runs as under none.
 *   full       the forward keeps only the layer's input; the backward first
 *              runs the whole forward again, the projections with their
 *              collectives (the all-gathers of every gather-side projection
 *              included), then runs as under none.
 *
 * Activation bytes, per rank: the sum of the tensors the backward reads that
 * must live from the forward to the backward, named as the block names them
 * (L local rows, T tokens, D dim, k = (hq + 2·hkv)·d the local QKV width,
 * q = hq·d, f the local FFN width, e the element size, P = B·hq·S²·e):
 *   always     x [L, D]: the layer's input (RMSNorm's backward reads it; under
 *              full it is all there is)
 *   none       attention.inv_rms [L] fp32, attention.h [L, D] (qkv's dW
 *              gathers it; with save_gathered attention.saved [T, D] instead),
 *              attention.qkv [T, k] (rotated), attention.probs P,
 *              attention.o [T, q]; block: x1 [L, D] (the FFN's input);
 *              ffn.inv_rms [L] fp32, ffn.h [L, D] (or ffn.saved [T, D]),
 *              ffn.a, ffn.b, ffn.m [T, f] each
 *   selective  attention.qkv [T, k] (before RoPE), attention.probs P,
 *              attention.o [T, q], attention.saved [T, D] with save_gathered;
 *              block: attention.y [L, D] (wo's output: x1 is recomputed from
 *              it); ffn.a, ffn.b [T, f], ffn.saved [T, D] with save_gathered
 *   full       nothing more.
 * Transient buffers (the attention core's workspace, the collectives'
 * scratch, the rotated copy selective recomputes) are not activations; the
 * layer's output y is the next layer's input, not this backward's.
 */
#ifndef TP_BENCH_ACTIVATION_H
#define TP_BENCH_ACTIVATION_H

#include <stdint.h>

#include "common/tp_vocab.h"

/* Activation checkpointing (the ac axis). */
typedef enum { TP_AC_NONE = 0, TP_AC_SELECTIVE, TP_AC_FULL } tp_ac;

/* "none", "selective", "full"; "?" for other values. */
const char *tp_ac_name(tp_ac ac);

/* One rank's shape of a layer, as the activation count needs it. */
typedef struct tp_activation_shape {
  tp_layer layer;
  int64_t elem_bytes; /* of the activations' dtype */
  int64_t batch, seq; /* B, S; T = B·S tokens */
  int64_t local_rows; /* L: T / W with sequence parallelism, T without */
  int64_t dim;        /* D */
  int64_t hq, hkv;    /* this rank's query and KV heads */
  int64_t head_dim;   /* d */
  int64_t ffn_local;  /* f */
  int save_gathered;  /* the gather side keeps AG(h) for its backward */
} tp_activation_shape;

/* One tensor kept from the forward for the backward. */
typedef struct tp_activation_tensor {
  const char *name; /* "x", "attention.qkv", ...: static */
  int64_t bytes;
} tp_activation_tensor;

enum { TP_ACTIVATION_MAX_TENSORS = 16 };

typedef struct tp_activation_set {
  tp_activation_tensor tensors[TP_ACTIVATION_MAX_TENSORS];
  int n;
  int64_t bytes; /* their sum: the configuration's activation bytes */
} tp_activation_set;

/* The tensors a layer of shape keeps under ac (the list above), in layer
 * order. An unknown ac keeps what none keeps. */
void tp_activation_saved(const tp_activation_shape *shape, tp_ac ac, tp_activation_set *out);

/* Whether name is in set. */
int tp_activation_has(const tp_activation_set *set, const char *name);

#endif /* TP_BENCH_ACTIVATION_H */
