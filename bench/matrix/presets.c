/*
 * presets.c — the model shape table, the models a user defines, the
 * projection shapes derived from a model and the FLOP counts of the layers
 * `tpbench run` times (see presets.h). Figures are those of the published
 * model configurations, each preset naming the config.json it was read from;
 * debug is tpbench's own tiny shape for quick runs.
 */
#include "bench/matrix/presets.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { LLAMA3_VOCAB = 128256, FIELD_MAX = 1 << 20 };

/* Where a model's attention is not the grouped-query attention timed here. */
#define DEEPSEEK_V3_MLA                                                                            \
  "DeepSeek-V3 attention is multi-head latent attention (low-rank q and kv projections, "          \
  "q/k head dim 192, v head dim 128), not grouped-query attention: only its dense FFN is modelled"

static const tp_model_preset presets[] = {
    {"debug", 256, 8, 4, 32, 768, 2, LLAMA3_VOCAB, NULL},
    /* The smallest Llama 3 shape is that of Llama 3.2 1B. */
    {"llama3-1b", 2048, 32, 8, 64, 8192, 16, LLAMA3_VOCAB, NULL},
    {"llama3-8b", 4096, 32, 8, 128, 14336, 32, LLAMA3_VOCAB, NULL},
    {"llama3-70b", 8192, 64, 8, 128, 28672, 80, LLAMA3_VOCAB, NULL},
    {"llama3-405b", 16384, 128, 8, 128, 53248, 126, LLAMA3_VOCAB, NULL},
    /* Qwen/Qwen2.5-72B-Instruct config.json: hidden_size 8192, num_attention_heads 64,
     * num_key_value_heads 8, intermediate_size 29568, num_hidden_layers 80, vocab_size
     * 152064; head_dim = hidden_size / num_attention_heads (no head_dim key). Read in copies
     * that name it as their source; Qwen/Qwen2-72B's own config.json has the same figures.
     * Its QKV bias is not modelled (the projections here have no bias). */
    {"qwen2.5-72b", 8192, 64, 8, 128, 29568, 80, 152064, NULL},
    /* mistralai/Mixtral-8x7B-Instruct-v0.1 config.json (commit eba9230): hidden_size 4096,
     * num_attention_heads 32, num_key_value_heads 8, intermediate_size 14336 (ONE expert's
     * w1/w3/w2; num_local_experts 8, num_experts_per_tok 2), num_hidden_layers 32, vocab_size
     * 32000; head_dim = 4096 / 32. The FFN is one expert run on every token of the step:
     * routing is not modelled. */
    {"mixtral-8x7b", 4096, 32, 8, 128, 14336, 32, 32000, NULL},
    /* deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json: dim 7168, inter_dim 18432
     * (the FFN of its n_dense_layers = 3 first, dense layers), n_layers 61, vocab_size 129280.
     * n_heads 128 with kv_lora_rank 512, q_lora_rank 1536, qk_nope_head_dim 128,
     * qk_rope_head_dim 64, v_head_dim 128: attention is MLA, which cannot be expressed here. */
    {"deepseek-v3-dense", 7168, 0, 0, 0, 18432, 61, 129280, DEEPSEEK_V3_MLA},
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

/* "debug, 1b, 8b, ..." : every preset by the name a user types. */
static void preset_names(char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < N_PRESETS && used < cap; i++) {
    const char *alias = short_alias(presets[i].name);
    int n =
        snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", alias ? alias : presets[i].name);
    if (n > 0) used += (size_t)n;
  }
}

/* The one rule for model names: they match in any case, a preset's, its alias, the reserved
 * TP_SHAPE_MODEL and a user's model alike ("8B" is llama3-8b, "MyModel" is mymodel). */
static int same_model_name(const char *a, const char *b) { return strcasecmp(a, b) == 0; }

static const tp_model_preset *find_preset(const char *name) {
  for (int i = 0; i < N_PRESETS; i++) {
    const char *alias = short_alias(presets[i].name);
    if (same_model_name(name, presets[i].name) || (alias && same_model_name(name, alias)))
      return &presets[i];
  }
  return NULL;
}

const char *tp_model_filter_name(const char *name) {
  const tp_model_preset *preset = name ? find_preset(name) : NULL;
  return preset ? preset->name : name;
}

tp_rc tp_preset_find(const char *name, const tp_model_preset **out) {
  const tp_model_preset *found = find_preset(name);
  if (found) {
    *out = found;
    return TP_OK;
  }
  char valid[512];
  preset_names(valid, sizeof valid);
  return TP_FAIL(TP_EUSAGE, "unknown model '%s' (valid: %s, or llama3-1b, ...)", name, valid);
}

/* ---- models a user defines ----------------------------------------------------------------- */

static int valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

static tp_rc check_model_name(const tp_model_set *set, const char *name) {
  size_t len = strnlen(name, TP_MODEL_NAME_MAX);
  if (len == 0 || len >= TP_MODEL_NAME_MAX)
    return TP_FAIL(TP_EUSAGE, "model name '%.20s': 1 to %d characters", name,
                   TP_MODEL_NAME_MAX - 1);
  for (size_t i = 0; i < len; i++)
    if (!valid_name_char(name[i]))
      return TP_FAIL(TP_EUSAGE, "model name '%s': only letters, digits, '.', '_' and '-'", name);
  if (find_preset(name))
    return TP_FAIL(TP_EUSAGE, "model name '%s' is a preset's (%s); choose another", name,
                   find_preset(name)->name);
  if (same_model_name(name, TP_SHAPE_MODEL))
    return TP_FAIL(TP_EUSAGE, "model name '%s' is reserved for `ops --shape`", name);
  for (int i = 0; i < set->count; i++)
    if (same_model_name(set->models[i].name, name))
      return TP_FAIL(TP_EUSAGE, "model '%s' is defined twice (as '%s')", name, set->models[i].name);
  return TP_OK;
}

static tp_rc check_field(const char *model, const char *field, int value, int optional) {
  if ((optional && value == 0) || (value >= 1 && value <= FIELD_MAX)) return TP_OK;
  return TP_FAIL(TP_EUSAGE, "model '%s': %s %d is out of range [1, %d]", model, field, value,
                 FIELD_MAX);
}

tp_rc tp_model_set_add(tp_model_set *set, const tp_model_preset *m) {
  TP_TRY(check_model_name(set, m->name));
  if (set->count >= TP_MODEL_SET_MAX)
    return TP_FAIL(TP_EUSAGE, "model '%s': at most %d models may be defined", m->name,
                   TP_MODEL_SET_MAX);
  TP_TRY(check_field(m->name, "dim", m->dim, 0));
  TP_TRY(check_field(m->name, "n_heads", m->n_heads, 0));
  TP_TRY(check_field(m->name, "n_kv_heads", m->n_kv_heads, 0));
  TP_TRY(check_field(m->name, "head_dim", m->head_dim, 0));
  TP_TRY(check_field(m->name, "ffn_hidden", m->ffn_hidden, 0));
  TP_TRY(check_field(m->name, "n_layers", m->n_layers, 1));
  TP_TRY(check_field(m->name, "vocab", m->vocab, 1));
  if (m->head_dim % 2 != 0)
    return TP_FAIL(TP_EUSAGE, "model '%s': head_dim %d is odd; RoPE rotates pairs of values",
                   m->name, m->head_dim);
  if (m->n_heads % m->n_kv_heads != 0)
    return TP_FAIL(TP_EUSAGE,
                   "model '%s': n_heads %d is not a multiple of n_kv_heads %d (grouped-query "
                   "attention shares each KV head among a whole number of query heads)",
                   m->name, m->n_heads, m->n_kv_heads);
  if (m->no_attention) return TP_FAIL(TP_EINTERNAL, "model '%s': no_attention is set", m->name);
  set->models[set->count++] = *m;
  return TP_OK;
}

tp_rc tp_model_find(const tp_model_set *set, const char *name, const tp_model_preset **out) {
  for (int i = 0; set && i < set->count; i++)
    if (same_model_name(set->models[i].name, name)) {
      *out = &set->models[i];
      return TP_OK;
    }
  const tp_model_preset *found = find_preset(name);
  if (found) {
    *out = found;
    return TP_OK;
  }
  char valid[1024];
  preset_names(valid, sizeof valid);
  size_t used = strlen(valid);
  for (int i = 0; set && i < set->count && used < sizeof valid; i++) {
    int n = snprintf(valid + used, sizeof valid - used, ", %s", set->models[i].name);
    if (n > 0) used += (size_t)n;
  }
  return TP_FAIL(TP_EUSAGE, "unknown model '%s' (valid: %s, or llama3-1b, ...)", name, valid);
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
