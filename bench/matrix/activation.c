/*
 * activation.c — the tensors a layer's forward leaves for its backward under
 * each activation-checkpointing mode, and their bytes (see activation.h).
 */
#include "bench/matrix/activation.h"

#include <string.h>

const char *tp_ac_name(tp_ac ac) {
  static const char *const names[] = {"none", "selective", "full"};
  return ac >= TP_AC_NONE && ac <= TP_AC_FULL ? names[ac] : "?";
}

static void keep(tp_activation_set *set, const char *name, int64_t bytes) {
  if (set->n == TP_ACTIVATION_MAX_TENSORS) return; /* the lists below hold at most 12 */
  set->tensors[set->n++] = (tp_activation_tensor){name, bytes};
  set->bytes += bytes;
}

static int has_attention(tp_layer layer) { return layer != TP_LAYER_FFN; }
static int has_ffn(tp_layer layer) { return layer != TP_LAYER_ATTENTION; }

/* The attention part's tensors under none or selective. */
static void attention_part(const tp_activation_shape *s, tp_ac ac, tp_activation_set *set) {
  const int64_t e = s->elem_bytes, T = s->batch * s->seq, L = s->local_rows, D = s->dim;
  const int64_t k = (s->hq + 2 * s->hkv) * s->head_dim, q = s->hq * s->head_dim;
  if (ac == TP_AC_NONE) keep(set, "attention.inv_rms", L * (int64_t)sizeof(float));
  if (s->save_gathered) keep(set, "attention.saved", T * D * e);
  else if (ac == TP_AC_NONE) keep(set, "attention.h", L * D * e);
  keep(set, "attention.qkv", T * k * e);
  keep(set, "attention.probs", s->batch * s->hq * s->seq * s->seq * e);
  keep(set, "attention.o", T * q * e);
  /* The block's first residual add: none keeps its sum, selective the projection's output. */
  if (s->layer == TP_LAYER_BLOCK) keep(set, ac == TP_AC_NONE ? "x1" : "attention.y", L * D * e);
}

static void ffn_part(const tp_activation_shape *s, tp_ac ac, tp_activation_set *set) {
  const int64_t e = s->elem_bytes, T = s->batch * s->seq, L = s->local_rows, D = s->dim;
  const int64_t f = s->ffn_local;
  if (ac == TP_AC_NONE) keep(set, "ffn.inv_rms", L * (int64_t)sizeof(float));
  if (s->save_gathered) keep(set, "ffn.saved", T * D * e);
  else if (ac == TP_AC_NONE) keep(set, "ffn.h", L * D * e);
  keep(set, "ffn.a", T * f * e);
  keep(set, "ffn.b", T * f * e);
  if (ac == TP_AC_NONE) keep(set, "ffn.m", T * f * e);
}

void tp_activation_saved(const tp_activation_shape *s, tp_ac ac, tp_activation_set *out) {
  memset(out, 0, sizeof *out);
  keep(out, "x", s->local_rows * s->dim * s->elem_bytes);
  if (ac == TP_AC_FULL) return;
  if (ac != TP_AC_SELECTIVE) ac = TP_AC_NONE;
  if (has_attention(s->layer)) attention_part(s, ac, out);
  if (has_ffn(s->layer)) ffn_part(s, ac, out);
}

int tp_activation_has(const tp_activation_set *set, const char *name) {
  for (int i = 0; i < set->n; ++i)
    if (strcmp(set->tensors[i].name, name) == 0) return 1;
  return 0;
}
