/*
 * presets.c — the Llama 3 shape table, the projection shapes derived
 * from it and the FLOP counts of the layers `tpbench run` times (see
 * presets.h). Figures are those of the published model
 * configurations; debug is tpbench's own tiny shape for quick runs.
 */
#include "bench/matrix/presets.h"

#include <string.h>
#include <strings.h>

enum { LLAMA3_VOCAB = 128256 };

static const tp_model_preset presets[] = {
    {"debug", 256, 8, 4, 32, 768, 2, LLAMA3_VOCAB},
    /* The smallest Llama 3 shape is that of Llama 3.2 1B. */
    {"llama3-1b", 2048, 32, 8, 64, 8192, 16, LLAMA3_VOCAB},
    {"llama3-8b", 4096, 32, 8, 128, 14336, 32, LLAMA3_VOCAB},
    {"llama3-70b", 8192, 64, 8, 128, 28672, 80, LLAMA3_VOCAB},
    {"llama3-405b", 16384, 128, 8, 128, 53248, 126, LLAMA3_VOCAB},
};
enum { N_PRESETS = sizeof presets / sizeof presets[0] };

static const char *const projection_names[] = {"qkv", "wo", "w13", "w2"};
enum { N_PROJECTIONS = sizeof projection_names / sizeof projection_names[0] };

const tp_model_preset *tp_presets(int *count) {
  *count = N_PRESETS;
  return presets;
}

const char *const *tp_projection_names(int *count) {
  *count = N_PROJECTIONS;
  return projection_names;
}

/* The alias of a canonical name: "llama3-8b" → "8b"; "debug" has none. */
static const char *short_alias(const char *canonical) {
  const char *prefix = "llama3-";
  size_t len = strlen(prefix);
  return strncmp(canonical, prefix, len) == 0 ? canonical + len : NULL;
}

tp_rc tp_preset_find(const char *name, const tp_model_preset **out) {
  for (int i = 0; i < N_PRESETS; i++) {
    const char *alias = short_alias(presets[i].name);
    if (strcasecmp(name, presets[i].name) == 0 || (alias && strcasecmp(name, alias) == 0)) {
      *out = &presets[i];
      return TP_OK;
    }
  }
  return TP_FAIL(TP_EUSAGE,
                 "unknown model '%s' (valid: debug, 1b, 8b, 70b, 405b, or llama3-1b, ...)", name);
}

tp_rc tp_preset_projection(const tp_model_preset *model, const char *proj, tp_projection *out) {
  int64_t dim = model->dim, head_dim = model->head_dim, ffn = model->ffn_hidden;
  int64_t q_width = model->n_heads * head_dim;
  int64_t kv_width = model->n_kv_heads * head_dim;
  tp_projection p;
  if (strcmp(proj, "qkv") == 0)
    p = (tp_projection){"qkv", TP_OP_AG_LINEAR, q_width + 2 * kv_width, dim, 1};
  else if (strcmp(proj, "wo") == 0) p = (tp_projection){"wo", TP_OP_LINEAR_RS, dim, q_width, 1};
  else if (strcmp(proj, "w13") == 0) p = (tp_projection){"w13", TP_OP_AG_LINEAR_MULTI, ffn, dim, 2};
  else if (strcmp(proj, "w2") == 0) p = (tp_projection){"w2", TP_OP_LINEAR_RS, dim, ffn, 1};
  else return TP_FAIL(TP_EUSAGE, "unknown projection '%s' (valid: qkv, wo, w13, w2)", proj);
  *out = p;
  return TP_OK;
}

double tp_projection_flops(const tp_projection *proj, int64_t tokens) {
  return 2.0 * (double)tokens * (double)proj->n * (double)proj->k * proj->n_weights;
}

static const char *const layer_names[] = {"attention", "ffn", "block"};

const char *const *tp_layer_names(int *count) {
  *count = (int)(sizeof layer_names / sizeof layer_names[0]);
  return layer_names;
}

static double attention_flops(const tp_model_preset *m, double batch, double seqlen) {
  const double tokens = batch * seqlen, dim = m->dim, d = m->head_dim;
  const double qkv = 2.0 * tokens * dim * (m->n_heads + 2.0 * m->n_kv_heads) * d;
  const double core = 4.0 * batch * seqlen * seqlen * m->n_heads * d;
  const double wo = 2.0 * tokens * m->n_heads * d * dim;
  return qkv + core + wo;
}

static double ffn_flops(const tp_model_preset *m, double tokens) {
  return 6.0 * tokens * (double)m->dim * (double)m->ffn_hidden;
}

tp_rc tp_layer_flops(const tp_model_preset *model, const char *layer, int64_t batch, int64_t seqlen,
                     int backward, double *out) {
  const double b = (double)batch, s = (double)seqlen;
  double fwd = 0;
  if (strcmp(layer, "attention") == 0) fwd = attention_flops(model, b, s);
  else if (strcmp(layer, "ffn") == 0) fwd = ffn_flops(model, b * s);
  else if (strcmp(layer, "block") == 0)
    fwd = attention_flops(model, b, s) + ffn_flops(model, b * s);
  else return TP_FAIL(TP_EUSAGE, "unknown layer '%s' (valid: attention, ffn, block)", layer);
  *out = backward ? 3.0 * fwd : fwd;
  return TP_OK;
}
