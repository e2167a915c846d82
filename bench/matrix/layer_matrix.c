/*
 * layer_matrix.c — axes, presets, expansion and validity rules of `tpbench
 * run` (see layer_matrix.h). The matrix file reader is matrix_file.c.
 *
 * One table describes every axis (name, where its list lives in the spec,
 * its valid names or its range), so setting an axis, resolving it and
 * printing the valid values share one source. Expansion resolves every list
 * to canonical static names first (mistakes become usage errors), then
 * walks the cases and attaches to each configuration its axes, its FLOP
 * count and, where it cannot run, the reason.
 */
#include "bench/matrix/layer_matrix.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matrix/matrix_file.h"
#include "bench/matrix/placement.h"
#include "common/tp_chunk_rule.h"
#include "kernels/tp_recipe_rules.h"

#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_TOKENS (1LL << 30)
#define MAX_CONFIGS 200000

/* ---- the axes ------------------------------------------------------------------------- */

static const char *const layer_values[] = {"attention", "ffn", "block"};
static const char *const backend_values[] = {"stock", "dist_gemm"};
static const char *const on_off_values[] = {"off", "on"};
static const char *const graph_values[] = {"off", "on", "mixed"};
static const char *const pass_values[] = {"fwd", "fwd+bwd"};
static const char *const ac_values[] = {"none", "selective", "full"}; /* tp_ac order */
static const char *const stock_values[] = {"plain", "window"};        /* tp_stock_vocab's names */
static const char *const symm_values[] = {"ipc", "nccl"};             /* tp_symm_vocab's names */
static const char *const comm_values[] = {"bf16", "fp8"};             /* tp_comm_dtype after NONE */

const char *tp_layer_graph_name(const tp_layer_case *c) {
  return graph_values[c->graph_mixed ? 2 : c->graph ? 1 : 0];
}

typedef struct axis_def {
  const char *name;
  size_t offset;             /* of its tp_str_list or tp_int_list in tp_layer_spec */
  const char *const *values; /* names of a string axis (NULL: model presets) */
  long long min, max;        /* range of a number axis */
  int is_int;
  int n_values; /* names in values */
} axis_def;

#define STR_AXIS(n, field, table)                                                                  \
  { n, offsetof(tp_layer_spec, field), table, 0, 0, 0, COUNT_OF(table) }
/* An axis whose values are a vocabulary's asked names, in the order of its one list
 * (common/tp_vocab.h; the asked names are the first of the names table). */
#define VOCAB_AXIS(n, field, names, list)                                                          \
  { n, offsetof(tp_layer_spec, field), names, 0, 0, 0, TP_VOCAB_N_ASKED(list) }
#define INT_AXIS(n, field, lo, hi)                                                                 \
  { n, offsetof(tp_layer_spec, field), NULL, lo, hi, 1, 0 }

static const axis_def axes[] = {
    {"model", offsetof(tp_layer_spec, model), NULL, 0, 0, 0, 0},
    STR_AXIS("layer", layer, layer_values),
    STR_AXIS("backend", backend, backend_values),
    VOCAB_AXIS("schedule", schedule, tp_schedule_names, TP_SCHEDULE_LIST),
    INT_AXIS("chunks", chunks, 0, 64),
    INT_AXIS("tp", tp, 1, TP_MAX_DEGREE),
    INT_AXIS("batch", batch, 1, 1 << 20),
    INT_AXIS("seqlen", seqlen, 1, 1 << 24),
    VOCAB_AXIS("dtype", dtype, tp_dtype_names, TP_DTYPE_LIST),
    STR_AXIS("sp", sp, on_off_values),
    STR_AXIS("pass", pass, pass_values),
    STR_AXIS("graph", graph, graph_values),
    STR_AXIS("save_gathered", save_gathered, on_off_values),
    INT_AXIS("dp", dp, 1, TP_MAX_DEGREE),
    STR_AXIS("ac", ac, ac_values),
    STR_AXIS("stock", stock, stock_values),
    STR_AXIS("symm", symm, symm_values),
    STR_AXIS("fsdp_traffic", fsdp_traffic, on_off_values),
    STR_AXIS("comm_dtype", comm_dtype, comm_values),
};
enum { N_AXES = COUNT_OF(axes) };

static const char *axis_names_table[N_AXES];

const char *const *tp_layer_axis_names(int *count) {
  for (int i = 0; i < N_AXES; ++i) axis_names_table[i] = axes[i].name;
  *count = N_AXES;
  return axis_names_table;
}

static void *axis_list(tp_layer_spec *spec, const axis_def *a) { return (char *)spec + a->offset; }
static const void *axis_list_c(const tp_layer_spec *spec, const axis_def *a) {
  return (const char *)spec + a->offset;
}

/* "a, b, c" from a table of names, for messages. */
static void join_names(const char *const *names, int n, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < cap; i++) {
    int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
    if (w > 0) used += (size_t)w;
  }
}

static const axis_def *find_axis(const char *name) {
  for (int i = 0; i < N_AXES; ++i)
    if (strcmp(axes[i].name, name) == 0) return &axes[i];
  return NULL;
}

tp_rc tp_layer_spec_set_axis(tp_layer_spec *spec, const char *axis, const char *values) {
  const axis_def *a = find_axis(axis);
  if (!a) {
    int n = 0;
    const char *const *names = tp_layer_axis_names(&n);
    char valid[256];
    join_names(names, n, valid, sizeof valid);
    return TP_FAIL(TP_EUSAGE, "unknown axis '%s' (valid: %s)", axis, valid);
  }
  tp_rc rc = a->is_int ? tp_int_list_set(axis_list(spec, a), values, a->min, a->max)
                       : tp_str_list_set(axis_list(spec, a), values);
  if (rc != TP_OK) {
    char text[512];
    snprintf(text, sizeof text, "%s", tp_cli_last_message());
    return TP_FAIL(TP_EUSAGE, "axis %s: %s", axis, text);
  }
  return TP_OK;
}

tp_rc tp_layer_spec_assign(tp_layer_spec *spec, const char *assignment) {
  const char *eq = strchr(assignment, '=');
  if (!eq || eq == assignment || !eq[1])
    return TP_FAIL(TP_EUSAGE, "'%s' is not NAME=V1,V2 (e.g. seqlen=2048,4096)", assignment);
  char name[64];
  size_t len = (size_t)(eq - assignment);
  if (len >= sizeof name) return TP_FAIL(TP_EUSAGE, "axis name in '%s' is too long", assignment);
  memcpy(name, assignment, len);
  name[len] = '\0';
  return tp_layer_spec_set_axis(spec, name, eq + 1);
}

/* ---- presets ---------------------------------------------------------------------------- */

typedef struct preset_def {
  const char *name;
  const char *axes[N_AXES]; /* values in axes[] order; NULL: unset (tp: the job's workers) */
} preset_def;

static const preset_def presets[] = {
    /* A few minutes on two GPUs: the small model and one real one, every
     * layer, two sequence lengths, both passes, eager and graph. */
    {"quick",
     {"debug,8b", "attention,ffn,block", "stock,dist_gemm", "auto", "0", NULL, "1", "2048,4096",
      "bf16", "on", "fwd,fwd+bwd", "off,on", "off", "1", "none", "plain,window", "ipc", "off",
      "fp8"}},
    /* Every model and option; hours, and some shapes will not fit (recorded as oom). */
    {"full",
     {"debug,1b,8b,70b,405b", "attention,ffn,block", "stock,dist_gemm", "auto,ce,sm", "0", NULL,
      "1,2", "2048,8192", "bf16,fp32", "on,off", "fwd,fwd+bwd", "off,on", "off,on", "1", "none",
      "plain,window", "ipc", "off", "fp8"}},
};

static const char *preset_names_table[COUNT_OF(presets)];

const char *const *tp_layer_preset_names(int *count) {
  for (int i = 0; i < COUNT_OF(presets); ++i) preset_names_table[i] = presets[i].name;
  *count = COUNT_OF(presets);
  return preset_names_table;
}

tp_rc tp_layer_spec_preset(const char *name, tp_layer_spec *spec) {
  for (int p = 0; p < COUNT_OF(presets); ++p) {
    if (strcmp(presets[p].name, name) != 0) continue;
    memset(spec, 0, sizeof *spec);
    for (int i = 0; i < N_AXES; ++i)
      if (presets[p].axes[i])
        TP_TRY(tp_layer_spec_set_axis(spec, axes[i].name, presets[p].axes[i]));
    return TP_OK;
  }
  int n = 0;
  const char *const *names = tp_layer_preset_names(&n);
  char valid[128];
  join_names(names, n, valid, sizeof valid);
  return TP_FAIL(TP_EUSAGE, "unknown preset '%s' (valid: %s)", name, valid);
}

/* ---- the matrix file ---------------------------------------------------------------------- */

static tp_rc preset_hook(void *spec, const char *name) { return tp_layer_spec_preset(name, spec); }
static tp_rc axis_hook(void *spec, const char *axis, const char *values) {
  return tp_layer_spec_set_axis(spec, axis, values);
}

tp_rc tp_layer_spec_load(const char *path, const char *preset, tp_layer_spec *spec) {
  tp_layer_spec *loaded = calloc(1, sizeof *loaded);
  if (!loaded) return TP_FAIL(TP_EOOM, "no memory for the matrix");
  const tp_matrix_file_target target = {"run",   loaded,    preset_hook,
                                        "quick", axis_hook, &loaded->defined};
  tp_rc rc = tp_matrix_file_load(path, preset, &target);
  if (rc == TP_OK) *spec = *loaded;
  free(loaded);
  return rc;
}

/* ---- resolving the lists ------------------------------------------------------------------ */

/* Every list resolved: canonical static names, checked numbers. */
typedef struct resolved {
  const tp_model_set *defined; /* the spec's own models */
  const tp_model_preset *models[TP_LIST_MAX];
  const char *names[N_AXES][TP_LIST_MAX]; /* string axes, by axis index */
  long long numbers[N_AXES][TP_LIST_MAX]; /* number axes, by axis index */
  int count[N_AXES];
} resolved;

static int index_of(const char *const *table, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(table[i], name) == 0) return i;
  return -1;
}

static tp_rc resolve_names(const axis_def *a, const tp_str_list *list, int ai, resolved *r) {
  for (int i = 0; i < list->count; ++i) {
    const char *name = tp_str_list_at(list, i);
    const char *canonical = NULL;
    if (!a->values) {
      const tp_model_preset *model = NULL;
      TP_TRY(tp_model_find(r->defined, name, &model));
      r->models[i] = model;
      canonical = model->name;
    } else {
      int at = index_of(a->values, a->n_values, name);
      if (at < 0) {
        char valid[256];
        join_names(a->values, a->n_values, valid, sizeof valid);
        return TP_FAIL(TP_EUSAGE, "axis %s: unknown value '%s' (valid: %s)", a->name, name, valid);
      }
      canonical = a->values[at];
    }
    if (index_of(r->names[ai], i, canonical) >= 0)
      return TP_FAIL(TP_EUSAGE, "axis %s: '%s' is listed twice", a->name, canonical);
    r->names[ai][i] = canonical;
  }
  return TP_OK;
}

static tp_rc resolve_numbers(const axis_def *a, const tp_int_list *list, int ai, resolved *r) {
  for (int i = 0; i < list->count; ++i) {
    long long v = list->items[i];
    if (v < a->min || v > a->max)
      return TP_FAIL(TP_EUSAGE, "axis %s: %lld is out of range [%lld, %lld]", a->name, v, a->min,
                     a->max);
    for (int j = 0; j < i; ++j)
      if (r->numbers[ai][j] == v)
        return TP_FAIL(TP_EUSAGE, "axis %s: %lld is listed twice", a->name, v);
    r->numbers[ai][i] = v;
  }
  return TP_OK;
}

static int axis_index(const char *name) {
  const axis_def *a = find_axis(name);
  return a ? (int)(a - axes) : -1;
}

/* A missing tp axis stands for the job's workers; with one dp value that divides them, the
 * workers are the mesh, so TP is what dp leaves (dp 2 on 8 GPUs: tp 4, not a mesh of 16). */
static void default_tp_within_dp(const tp_layer_spec *spec, int tp_default, resolved *r) {
  const int tp = axis_index("tp"), dp = axis_index("dp");
  if (tp < 0 || dp < 0 || spec->tp.count != 0 || r->count[dp] != 1) return;
  const long long d = r->numbers[dp][0];
  if (d > 1 && tp_default % d == 0 && tp_default / d >= 1) r->numbers[tp][0] = tp_default / d;
}

static tp_rc resolve(const tp_layer_spec *spec, int tp_default, resolved *r) {
  memset(r, 0, sizeof *r);
  r->defined = &spec->defined;
  for (int ai = 0; ai < N_AXES; ++ai) {
    const axis_def *a = &axes[ai];
    const void *list = axis_list_c(spec, a);
    int count = a->is_int ? ((const tp_int_list *)list)->count : ((const tp_str_list *)list)->count;
    if (strcmp(a->name, "tp") == 0 && count == 0) {
      if (tp_default < 1) return TP_FAIL(TP_EINTERNAL, "no TP degree and no default");
      r->numbers[ai][0] = tp_default;
      r->count[ai] = 1;
      continue;
    }
    if (count < 1) return TP_FAIL(TP_EUSAGE, "axis %s: no value given", a->name);
    TP_TRY(a->is_int ? resolve_numbers(a, list, ai, r) : resolve_names(a, list, ai, r));
    r->count[ai] = count;
  }
  default_tp_within_dp(spec, tp_default, r);
  return TP_OK;
}

/* ---- validity rules ----------------------------------------------------------------------- */

static int layer_has_attention(tp_layer layer) { return layer != TP_LAYER_FFN; }
static int layer_has_ffn(tp_layer layer) { return layer != TP_LAYER_ATTENTION; }

/* FSDP's collectives (dp > 1, or fsdp_traffic=on at dp 1: bench/gpu/fsdp.h)
 * beside what cannot have them. */
static int fsdp_rejection(const tp_layer_case *c, char *reason, size_t cap) {
  if (c->dp > 1 && c->fsdp_traffic) {
    snprintf(reason, cap,
             "fsdp_traffic=on puts FSDP's collectives beside a dp 1 layer; dp %d runs its own "
             "(the all-gather and reduce-scatter over dp)",
             c->dp);
    return 1;
  }
  if (c->dp == 1 && !c->fsdp_traffic) return 0;
  const char *what = c->dp > 1 ? "dp > 1" : "fsdp_traffic=on";
  if (c->graph) {
    snprintf(reason, cap,
             "%s with graph=%s: FSDP's side-stream collectives are not captured into CUDA graphs "
             "(graph=off only)",
             what, tp_layer_graph_name(c));
    return 1;
  }
  if (tp_dtype_is_fp8(c->dtype)) {
    snprintf(reason, cap,
             "%s with %s: the fp8 weights are quantized once at prepare; gathering them every "
             "step (with their scales) is not implemented",
             what, tp_dtype_name(c->dtype));
    return 1;
  }
  return 0;
}

/* The rules of the ac axis and of the dp × tp mesh (placement.h). */
static int mesh_rejection(const tp_layer_case *c, char *reason, size_t cap) {
  if (c->ac != TP_AC_NONE && c->pass == TP_PASS_FWD) {
    snprintf(reason, cap, "ac=%s recomputes activations in the backward; pass fwd has none",
             tp_ac_name(c->ac));
    return 1;
  }
  if (c->ac == TP_AC_FULL && c->save_gathered) {
    snprintf(reason, cap,
             "ac=full recomputes the forward, its all-gathers included, in the backward: nothing "
             "is kept for save_gathered=on to reuse");
    return 1;
  }
  if (c->batch % c->dp != 0) {
    snprintf(reason, cap,
             "batch %d not divisible by dp %d: data parallelism gives each dp rank whole "
             "sequences",
             c->batch, c->dp);
    return 1;
  }
  if (fsdp_rejection(c, reason, cap)) return 1;
  const tp_model_preset *m = c->model;
  const tp_layer_dims dims = {m->dim, (int64_t)(m->n_heads + 2 * m->n_kv_heads) * m->head_dim,
                              (int64_t)m->n_heads * m->head_dim, m->ffn_hidden};
  tp_mesh_tensor tensors[TP_MESH_MAX_TENSORS];
  int n = 0;
  const tp_mesh mesh = {c->dp, c->tp};
  tp_rc rc = tp_mesh_layer_tensors(tp_layer_name(c->layer), c->sp, &dims, c->batch, c->seqlen,
                                   tensors, &n);
  if (rc == TP_OK) rc = tp_mesh_check(&mesh, tensors, n);
  if (rc == TP_OK) return 0;
  snprintf(reason, cap, "placement on the dp %d x tp %d mesh: %s", c->dp, c->tp,
           tp_cli_last_message());
  return 1;
}

/* A layer of a recipe (an fp8 format): the rules of its four projections
 * (kernels/tp_recipe_rules.h), the same as ops applies to each of them and
 * the block's plan asks again. */
static tp_recipe_layer recipe_layer_of(const tp_layer_case *c) {
  const tp_model_preset *m = c->model;
  const tp_recipe_layer l = {c->dtype,   c->layer,      c->tokens,   m->dim,
                             m->n_heads, m->n_kv_heads, m->head_dim, m->ffn_hidden,
                             c->tp,      c->pass,       c->sp,       c->comm};
  return l;
}

static int recipe_rejection(const tp_layer_case *c, char *reason, size_t cap) {
  const tp_recipe_layer l = recipe_layer_of(c);
  return tp_recipe_layer_rejection(&l, reason, cap);
}

/* dist_gemm's layer of a recipe: the schedules, chunks and symmetric memory
 * its projections push with. */
static int recipe_dist_gemm_rejection(const tp_layer_case *c, tp_schedule schedule, int chunks,
                                      tp_symm_transport symm, char *reason, size_t cap) {
  const tp_recipe_layer l = recipe_layer_of(c);
  return tp_recipe_layer_dist_rejection(&l, schedule, chunks, symm, reason, cap);
}

/* Why no configuration of the case can run; 0 if they can. */
static int case_rejection(const tp_layer_case *c, char *reason, size_t cap) {
  const tp_model_preset *m = c->model;
  const long long ranks = (long long)c->dp * c->tp;
  char what[64];
  snprintf(what, sizeof what, "dp %d x tp %d is %lld ranks", c->dp, c->tp, ranks);
  if (tp_group_size_rejection(what, ranks, reason, cap)) return 1;
  if (layer_has_attention(c->layer) && m->no_attention) {
    snprintf(reason, cap, "%s: %s", m->name, m->no_attention);
    return 1;
  }
  if (c->sp && c->seqlen % c->tp != 0) {
    snprintf(reason, cap,
             "seqlen %d not divisible by TP %d: sequence parallelism shards the sequence in "
             "whole positions",
             c->seqlen, c->tp);
    return 1;
  }
  if (c->tokens % c->tp != 0) {
    snprintf(reason, cap, "tokens %lld not divisible by TP %d", (long long)c->tokens, c->tp);
    return 1;
  }
  if (layer_has_attention(c->layer) && m->n_heads % c->tp != 0) {
    snprintf(reason, cap, "%s: n_heads %d not divisible by TP %d", m->name, m->n_heads, c->tp);
    return 1;
  }
  if (layer_has_attention(c->layer) && m->n_kv_heads % c->tp != 0) {
    snprintf(reason, cap,
             "%s: n_kv_heads %d not divisible by TP %d (KV heads are split across ranks, not "
             "replicated)",
             m->name, m->n_kv_heads, c->tp);
    return 1;
  }
  if (layer_has_ffn(c->layer) && m->ffn_hidden % c->tp != 0) {
    snprintf(reason, cap, "%s: ffn_hidden %d not divisible by TP %d", m->name, m->ffn_hidden,
             c->tp);
    return 1;
  }
  if (c->save_gathered && c->pass == TP_PASS_FWD) {
    snprintf(reason, cap,
             "save_gathered=on keeps the forward's gathered input for the backward; pass fwd has "
             "no backward");
    return 1;
  }
  if (c->save_gathered && !c->sp) {
    snprintf(reason, cap,
             "save_gathered=on needs sequence parallelism: with SP off the input is replicated "
             "and never gathered");
    return 1;
  }
  if (c->save_gathered && tp_recipe_save_gathered_rejection(c->dtype, reason, cap)) return 1;
  if (mesh_rejection(c, reason, cap)) return 1;
  return recipe_rejection(c, reason, cap);
}

static int dist_gemm_rejection(const tp_layer_case *c, tp_schedule schedule, int chunks,
                               char *reason, size_t cap) {
  if (!c->sp) {
    snprintf(reason, cap,
             "dist_gemm needs sequence parallelism: its fused ops take and give sequence-sharded "
             "rows; with SP off the activations are replicated (stock only)");
    return 1;
  }
  return tp_dist_rejection(schedule, c->tp, c->tokens / c->dp / c->tp, chunks, reason, cap);
}

/* sm's copy kernel pushes 16-byte vectors: each projection's plan refuses sm where a chunk is
 * not a whole number of them (common/tp_chunk_rule.h); the reason names the projection, as the
 * block's plan does. Every projection moves rows dim wide (qkv and w13 gather x, wo and w2
 * scatter partials of the output). An fp8 layer's schedule is its projections' bf16 base plans'
 * (kernels/tp_linear_fp8_comm.c): the forward's shard in one chunk. */
static int sm_chunk_rejection(const tp_layer_case *c, tp_schedule schedule, int chunks,
                              char *reason, size_t cap) {
  if (schedule != TP_SCHED_SM || c->tp < 2) return 0;
  const tp_model_preset *m = c->model;
  const int fp8 = tp_dtype_is_fp8(c->dtype);
  const tp_dtype dtype = fp8 ? TP_BF16 : c->dtype;
  const int64_t q = (int64_t)m->n_heads * m->head_dim;
  const struct {
    const char *name;
    int has, gather, n_weights;
    int64_t n, k;
  } projs[] = {
      {"qkv", layer_has_attention(c->layer), 1, 1, q + 2LL * m->n_kv_heads * m->head_dim, m->dim},
      {"wo", layer_has_attention(c->layer), 0, 1, m->dim, q},
      {"w13", layer_has_ffn(c->layer), 1, 2, m->ffn_hidden, m->dim},
      {"w2", layer_has_ffn(c->layer), 0, 1, m->dim, m->ffn_hidden},
  };
  const size_t row_bytes = (size_t)m->dim * tp_dtype_bytes(dtype);
  for (int i = 0; i < COUNT_OF(projs); ++i) {
    if (!projs[i].has) continue;
    const size_t bad = tp_sm_unaligned_chunk(
        projs[i].gather, fp8 ? 0 : tp_pass_has_backward(c->pass), c->tp, c->tokens / c->dp / c->tp,
        row_bytes, fp8 ? 1 : chunks, projs[i].n, projs[i].k, projs[i].n_weights, dtype);
    if (!bad) continue;
    snprintf(reason, cap, "%s: sm: chunk size not a multiple of %d bytes (%zu bytes)",
             projs[i].name, TP_SM_CHUNK_ALIGN, bad);
    return 1;
  }
  return 0;
}

/* The placement contracts of the composition this configuration runs. */
static int placement_rejection(const tp_layer_case *c, int fused, char *reason, size_t cap) {
  const tp_model_preset *m = c->model;
  const tp_layer_dims dims = {m->dim, (int64_t)(m->n_heads + 2 * m->n_kv_heads) * m->head_dim,
                              (int64_t)m->n_heads * m->head_dim, m->ffn_hidden};
  tp_composition comp;
  tp_rc rc = tp_composition_layer(tp_layer_name(c->layer), fused, c->sp, &dims, &comp);
  if (rc == TP_OK) rc = tp_composition_check(&comp);
  if (rc == TP_OK) return 0;
  snprintf(reason, cap, "placement: %s", tp_cli_last_message());
  return 1;
}

/* The enum value of a canonical name the axis tables accepted. */
static int vocab_value(const tp_vocab_table *table, const char *canonical) {
  int value = 0;
  /* The axis tables hold names of the shared vocabulary: this cannot fail. */
  if (tp_vocab_parse(table, canonical, &value) != TP_OK) value = 0;
  return value;
}

/* ---- building configurations ------------------------------------------------------------ */

static tp_config_axes case_axes(const tp_layer_case *c) {
  tp_config_axes a;
  memset(&a, 0, sizeof a);
  a.model = c->model->name;
  a.op_or_layer = tp_layer_name(c->layer);
  a.tp = c->tp;
  a.batch = c->batch;
  a.seqlen = c->seqlen;
  a.tokens = c->tokens;
  a.dtype = tp_dtype_name(c->dtype);
  a.sp = c->sp;
  a.pass = tp_pass_name(c->pass);
  a.graph = c->graph;
  a.save_gathered = c->save_gathered;
  a.dp = c->dp;
  a.ac = tp_ac_name(c->ac);
  a.fsdp_traffic = c->fsdp_traffic;
  a.comm_dtype = tp_comm_dtype_axis(c->comm); /* keyed only for fp8 at TP > 1 with sp */
  return a;
}

static tp_layer_config make_config(const tp_layer_case *c, int case_index, tp_backend backend) {
  tp_layer_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.backend = backend;
  cfg.schedule = TP_SCHED_AUTO;
  cfg.case_index = case_index;
  cfg.axes = case_axes(c);
  cfg.axes.kind = tp_backend_kind(backend, "layer");
  cfg.axes.backend = tp_backend_axis(backend);
  /* Names were checked while resolving: this cannot fail. */
  if (backend != TP_BACKEND_COMM_ONLY)
    TP_EXPECT_OK(tp_layer_flops(c->model, tp_layer_name(c->layer), c->batch, c->seqlen,
                                tp_pass_has_backward(c->pass), &cfg.flops));
  cfg.rejected = case_rejection(c, cfg.reason, sizeof cfg.reason);
  if (!cfg.rejected && backend == TP_BACKEND_COMM_ONLY && c->tp == 1) {
    snprintf(cfg.reason, sizeof cfg.reason, "TP 1 has no collective to time");
    cfg.rejected = 1;
  }
  if (!cfg.rejected && backend != TP_BACKEND_DIST)
    cfg.rejected = placement_rejection(c, 0, cfg.reason, sizeof cfg.reason);
  return cfg;
}

/* The stock layer or the collectives alone of one stock variant (window:
 * schedule "nccl-window", the same collectives on NCCL symmetric windows). */
static tp_layer_config make_stock_variant(const tp_layer_case *c, int case_index,
                                          tp_backend backend, tp_stock_variant variant) {
  tp_layer_config cfg = make_config(c, case_index, backend);
  cfg.schedule = tp_stock_schedule(variant);
  cfg.axes.schedule = tp_stock_schedule_axis(variant);
  if (!cfg.rejected && variant == TP_STOCK_WINDOW)
    cfg.rejected =
        tp_recipe_window_rejection(c->dtype, TP_RECIPE_FOR_LAYER, cfg.reason, sizeof cfg.reason);
  return cfg;
}

static tp_layer_config make_dist_gemm(const tp_layer_case *c, int case_index, tp_schedule schedule,
                                      int chunks, tp_symm_transport symm) {
  tp_layer_config cfg = make_config(c, case_index, TP_BACKEND_DIST);
  cfg.schedule = schedule;
  cfg.symm = symm;
  cfg.axes.symm = tp_symm_transport_name(symm); /* keyed only away from ipc */
  cfg.axes.schedule = tp_schedule_name(schedule);
  cfg.axes.chunks = chunks;
  if (!cfg.rejected)
    cfg.rejected = dist_gemm_rejection(c, schedule, chunks, cfg.reason, sizeof cfg.reason);
  if (!cfg.rejected)
    cfg.rejected =
        recipe_dist_gemm_rejection(c, schedule, chunks, symm, cfg.reason, sizeof cfg.reason);
  if (!cfg.rejected) cfg.rejected = placement_rejection(c, 1, cfg.reason, sizeof cfg.reason);
  if (!cfg.rejected)
    cfg.rejected = sm_chunk_rejection(c, schedule, chunks, cfg.reason, sizeof cfg.reason);
  return cfg;
}

/* Axis indices, by the order of axes[]. */
enum {
  A_MODEL,
  A_LAYER,
  A_BACKEND,
  A_SCHEDULE,
  A_CHUNKS,
  A_TP,
  A_BATCH,
  A_SEQLEN,
  A_DTYPE,
  A_SP,
  A_PASS,
  A_GRAPH,
  A_SAVE,
  A_DP,
  A_AC,
  A_STOCK,
  A_SYMM,
  A_FSDP_TRAFFIC,
  A_COMM
};

static int has_backend(const resolved *r, const char *backend) {
  return index_of(r->names[A_BACKEND], r->count[A_BACKEND], backend) >= 0;
}

/* Stock (if asked for) and the collectives alone, once per stock variant. */
static int configs_per_case(const resolved *r) {
  return (has_backend(r, "stock") + 1) * r->count[A_STOCK] +
         (has_backend(r, "dist_gemm") ? r->count[A_SCHEDULE] * r->count[A_CHUNKS] * r->count[A_SYMM]
                                      : 0) +
         1;
}

static tp_stock_variant stock_variant(const resolved *r, int i) {
  return (tp_stock_variant)vocab_value(&tp_stock_vocab, r->names[A_STOCK][i]);
}

static void expand_case(const resolved *r, tp_layer_case *c, int ci, tp_layer_config *configs,
                        int *next) {
  c->first_config = *next;
  for (int v = 0; has_backend(r, "stock") && v < r->count[A_STOCK]; ++v)
    configs[(*next)++] = make_stock_variant(c, ci, TP_BACKEND_STOCK, stock_variant(r, v));
  if (has_backend(r, "dist_gemm"))
    for (int s = 0; s < r->count[A_SCHEDULE]; ++s)
      for (int k = 0; k < r->count[A_CHUNKS]; ++k)
        for (int t = 0; t < r->count[A_SYMM]; ++t)
          configs[(*next)++] =
              make_dist_gemm(c, ci, vocab_value(&tp_schedule_vocab, r->names[A_SCHEDULE][s]),
                             (int)r->numbers[A_CHUNKS][k],
                             (tp_symm_transport)vocab_value(&tp_symm_vocab, r->names[A_SYMM][t]));
  configs[(*next)++] = make_config(c, ci, TP_BACKEND_GEMM_ONLY);
  for (int v = 0; v < r->count[A_STOCK]; ++v)
    configs[(*next)++] = make_stock_variant(c, ci, TP_BACKEND_COMM_ONLY, stock_variant(r, v));
  c->n_configs = *next - c->first_config;
}

/* The case axes, outermost first; each index runs over that axis's list. */
static const int case_axis_order[] = {A_MODEL, A_LAYER,  A_DTYPE, A_TP,          A_COMM,
                                      A_BATCH, A_SEQLEN, A_SP,    A_PASS,        A_SAVE,
                                      A_GRAPH, A_DP,     A_AC,    A_FSDP_TRAFFIC};
enum { N_CASE_AXES = COUNT_OF(case_axis_order) };

static int is_on(const char *v) { return strcmp(v, "on") == 0; }

/* Whether comm_dtype is an axis of the case: an fp8 layer at TP > 1 with
 * sp on, whose gathering projections move the fp8 shard or the bf16 one (as
 * ops' comm_applies). Elsewhere nothing quantized travels: one case, none. */
static int comm_applies(const tp_layer_case *c) {
  return tp_dtype_is_fp8(c->dtype) && c->tp > 1 && c->sp;
}

/* A point of the odometer the matrix leaves out: a comm_dtype value past
 * the first where comm_dtype does not apply (the case it would repeat). */
static int comm_repeat(const int *at, const tp_layer_case *c) {
  return at[A_COMM] > 0 && !comm_applies(c);
}

/* The odometer's next point, innermost axis fastest. */
static void advance(const resolved *r, int *at) {
  for (int k = N_CASE_AXES - 1; k >= 0; --k) {
    const int ax = case_axis_order[k];
    if (++at[ax] < r->count[ax]) return;
    at[ax] = 0;
  }
}

static void fill_case(const resolved *r, const tp_model_preset *models, const int *at,
                      tp_layer_case *c) {
  memset(c, 0, sizeof *c);
  c->model = &models[at[A_MODEL]];
  c->layer = (tp_layer)vocab_value(&tp_layer_vocab, r->names[A_LAYER][at[A_LAYER]]);
  c->dtype = (tp_dtype)vocab_value(&tp_dtype_vocab, r->names[A_DTYPE][at[A_DTYPE]]);
  c->pass = (tp_pass)vocab_value(&tp_pass_vocab, r->names[A_PASS][at[A_PASS]]);
  c->tp = (int)r->numbers[A_TP][at[A_TP]];
  c->batch = (int)r->numbers[A_BATCH][at[A_BATCH]];
  c->seqlen = (int)r->numbers[A_SEQLEN][at[A_SEQLEN]];
  c->tokens = (int64_t)c->batch * c->seqlen;
  c->sp = is_on(r->names[A_SP][at[A_SP]]);
  c->graph_mixed = strcmp(r->names[A_GRAPH][at[A_GRAPH]], "mixed") == 0;
  c->graph = c->graph_mixed || is_on(r->names[A_GRAPH][at[A_GRAPH]]);
  c->save_gathered = is_on(r->names[A_SAVE][at[A_SAVE]]);
  c->dp = (int)r->numbers[A_DP][at[A_DP]];
  c->ac = (tp_ac)index_of(ac_values, COUNT_OF(ac_values), r->names[A_AC][at[A_AC]]);
  c->fsdp_traffic = is_on(r->names[A_FSDP_TRAFFIC][at[A_FSDP_TRAFFIC]]);
  const int fp8_travels = strcmp(r->names[A_COMM][at[A_COMM]], "fp8") == 0;
  c->comm = !comm_applies(c) ? TP_COMM_NONE : fp8_travels ? TP_COMM_FP8 : TP_COMM_BF16;
}

/* The case's place in the odometer with seqlen left out: the cases of one
 * mix (graph=mixed, differing in seqlen alone) share it. */
static int mix_key(const resolved *r, const int *at) {
  int key = 0;
  for (int k = 0; k < N_CASE_AXES; ++k)
    if (case_axis_order[k] != A_SEQLEN)
      key = key * r->count[case_axis_order[k]] + at[case_axis_order[k]];
  return key;
}

/* Walks every case like an odometer, innermost axis fastest. */
static tp_rc fill_matrix(const resolved *r, tp_layer_matrix *m) {
  int at[N_AXES];
  memset(at, 0, sizeof at);
  int next = 0;
  for (int ci = 0; ci < m->n_cases; advance(r, at)) {
    tp_layer_case *c = &m->cases[ci];
    fill_case(r, m->models, at, c);
    if (comm_repeat(at, c)) continue;
    c->mix_group = c->graph_mixed ? mix_key(r, at) : -1; /* numbered by group_mixes */
    if (c->tokens > MAX_TOKENS)
      return TP_FAIL(TP_EUSAGE, "batch %d x seqlen %d is more than %lld tokens", c->batch,
                     c->seqlen, MAX_TOKENS);
    expand_case(r, c, ci, m->configs, &next);
    ++ci;
  }
  return TP_OK;
}

/* ---- graph=mixed: the sizes of a mix, measured together ---------------------------------- */

/* A mixed case's place among its mix's: by mix, then seqlen ascending. */
typedef struct mix_place {
  int group, seqlen, index;
} mix_place;

static int by_mix_then_seqlen(const void *a, const void *b) {
  const mix_place *x = a, *y = b;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  if (x->seqlen != y->seqlen) return x->seqlen < y->seqlen ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The new place of every case: each mix's sizes adjacent, ascending in
 * seqlen, where its first size stood; every other case keeps its order.
 * (By key, not by odometer strides: the comm_dtype values the matrix
 * leaves out make the strides uneven.) */
static tp_rc mix_order(const tp_layer_matrix *m, int *order) {
  mix_place *places = calloc((size_t)m->n_cases, sizeof *places);
  int *run_at = malloc((size_t)m->n_cases * sizeof *run_at); /* first case of a run: its start */
  if (!places || !run_at) {
    free(places);
    free(run_at);
    return TP_FAIL(TP_EOOM, "no memory to order the graph mixes");
  }
  int n_mixed = 0;
  for (int ci = 0; ci < m->n_cases; ++ci) {
    run_at[ci] = -1;
    if (m->cases[ci].graph_mixed)
      places[n_mixed++] = (mix_place){m->cases[ci].mix_group, m->cases[ci].seqlen, ci};
  }
  qsort(places, (size_t)n_mixed, sizeof *places, by_mix_then_seqlen);
  for (int i = 0; i < n_mixed;) {
    int end = i, first = places[i].index;
    for (; end < n_mixed && places[end].group == places[i].group; ++end)
      if (places[end].index < first) first = places[end].index;
    run_at[first] = i;
    i = end;
  }
  int n = 0;
  for (int ci = 0; ci < m->n_cases; ++ci) {
    if (!m->cases[ci].graph_mixed) order[n++] = ci;
    for (int i = run_at[ci]; i >= 0 && i < n_mixed && places[i].group == m->cases[ci].mix_group;
         ++i)
      order[n++] = places[i].index;
  }
  free(places);
  free(run_at);
  return TP_OK;
}

/* Rebuilds cases and configurations in order[] (their indices renumbered). */
static tp_rc reorder_cases(tp_layer_matrix *m, const int *order) {
  /* zeroed: every slot is copied below, which the analyzer cannot see */
  tp_layer_case *cases = calloc((size_t)m->n_cases, sizeof *cases);
  tp_layer_config *configs = calloc((size_t)m->n_configs, sizeof *configs);
  if (!cases || !configs) {
    free(cases);
    free(configs);
    return TP_FAIL(TP_EOOM, "no memory to order the graph mixes");
  }
  int next = 0;
  for (int k = 0; k < m->n_cases; ++k) {
    tp_layer_case c = m->cases[order[k]];
    for (int i = c.first_config; i < c.first_config + c.n_configs; ++i) {
      configs[next] = m->configs[i];
      configs[next++].case_index = k;
    }
    c.first_config = next - c.n_configs;
    cases[k] = c;
  }
  free(m->cases);
  free(m->configs);
  m->cases = cases;
  m->configs = configs;
  return TP_OK;
}

/* A rule's rejection of a mix's configuration (it overrides a plan). */
static void reject_in_mix(tp_layer_config *cfg, const char *why) {
  if (cfg->rejected && !cfg->planned) return;
  const size_t len = strnlen(why, sizeof cfg->reason - 1); /* cut where the reason ends */
  memcpy(cfg->reason, why, len);
  cfg->reason[len] = '\0';
  cfg->rejected = 1;
  cfg->planned = 0;
}

/* Whether a rule (not a plan) rejects cfg. */
static int rule_rejects(const tp_layer_config *cfg) { return cfg->rejected && !cfg->planned; }

/* NCCL symmetric windows a nccl-window configuration of case c holds while
 * its case is measured (bench/gpu/layer_worker.c): the stock layer its
 * tensors' one; the collectives alone that one and a scratch window per
 * projection (the layers' 2 or 4). */
static int config_windows(const tp_layer_case *c, const tp_layer_config *cfg) {
  if (cfg->rejected || cfg->schedule != TP_SCHED_NCCL_WINDOW) return 0;
  if (cfg->backend != TP_BACKEND_COMM_ONLY) return 1;
  return 1 + (c->layer == TP_LAYER_BLOCK ? 4 : 2);
}

/* A mix's nccl-window configurations live at once (its sizes are one case):
 * their windows and the group's window scratch must fit the group's table
 * (TP_LAYER_MAX_WINDOWS), or the last of them would fail at prepare. */
static void mix_window_rule(tp_layer_matrix *m, int first, int n, const char *sizes) {
  int windows = 1; /* the group's window scratch */
  for (int k = 0; k < n; ++k) {
    const tp_layer_case *c = &m->cases[first + k];
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i)
      windows += config_windows(c, &m->configs[i]);
  }
  if (windows <= TP_LAYER_MAX_WINDOWS) return;
  char why[320];
  snprintf(why, sizeof why,
           "graph=mixed among %s: the mix's nccl-window configurations need %d NCCL symmetric "
           "windows at once (their tensors, the collectives' scratches, the group's), more than "
           "%d a group holds (fewer sizes, or stock=plain)",
           sizes, windows, TP_LAYER_MAX_WINDOWS);
  for (int k = 0; k < n; ++k) {
    const tp_layer_case *c = &m->cases[first + k];
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i)
      if (m->configs[i].schedule == TP_SCHED_NCCL_WINDOW) reject_in_mix(&m->configs[i], why);
  }
}

/* The rules of one mix: cases first..first+n-1 (every one laid out alike). */
static void mix_rules(tp_layer_matrix *m, int first, int n, const char *sizes) {
  const int per_case = m->cases[first].n_configs;
  char why[768]; /* the sizes and a counterpart's whole reason; cut to a reason's length */
  why[0] = '\0';
  if (n < 2)
    snprintf(why, sizeof why,
             "graph=mixed captures one graph per size on one workspace: it needs 2 or more sizes "
             "(seqlen values), this mix has 1 (%s tokens)",
             sizes);
  else if (n > TP_LAYER_MAX_GRAPH_SIZES)
    snprintf(why, sizeof why, "graph=mixed takes at most %d sizes; this mix has %d",
             TP_LAYER_MAX_GRAPH_SIZES, n);
  else if (n * per_case > TP_LAYER_MAX_MIX_CONFIGS)
    snprintf(why, sizeof why,
             "graph=mixed measures a mix's configurations together: %d sizes x %d configurations "
             "is more than %d (fewer sizes, schedules or chunks)",
             n, per_case, TP_LAYER_MAX_MIX_CONFIGS);
  if (why[0]) {
    for (int i = 0; i < n * per_case; ++i)
      reject_in_mix(&m->configs[m->cases[first].first_config + i], why);
    return;
  }
  /* A size a rule rejects takes its counterparts (same place in their case:
   * the same backend, schedule and chunks) at the other sizes with it. */
  int rejected_at[TP_LAYER_MAX_MIX_CONFIGS]; /* case of the mix whose rule rejects place j, -1 */
  for (int j = 0; j < per_case; ++j) {
    rejected_at[j] = -1;
    for (int k = 0; k < n && rejected_at[j] < 0; ++k)
      if (rule_rejects(&m->configs[m->cases[first + k].first_config + j])) rejected_at[j] = k;
  }
  for (int j = 0; j < per_case; ++j) {
    if (rejected_at[j] < 0) continue;
    const tp_layer_case *bad = &m->cases[first + rejected_at[j]];
    snprintf(why, sizeof why, "graph=mixed among %s: its %lld-token size is rejected: %s", sizes,
             (long long)bad->tokens, m->configs[bad->first_config + j].reason);
    for (int k = 0; k < n; ++k)
      reject_in_mix(&m->configs[m->cases[first + k].first_config + j], why);
  }
  mix_window_rule(m, first, n, sizes);
}

/* "2048,4096": the token counts of cases first..first+n-1. */
static void join_tokens(const tp_layer_matrix *m, int first, int n, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int k = 0; k < n && used < cap; ++k) {
    int w = snprintf(buf + used, cap - used, "%s%lld", k ? "," : "",
                     (long long)m->cases[first + k].tokens);
    if (w > 0) used += (size_t)w;
  }
}

/* Brings each mix's cases together, numbers the mixes, writes their sizes
 * into the configurations' axes and applies the mixes' rules. */
static tp_rc group_mixes(const resolved *r, tp_layer_matrix *m) {
  if (index_of(r->names[A_GRAPH], r->count[A_GRAPH], "mixed") < 0) return TP_OK;
  /* zeroed, so an index mix_order did not write is case 0, never garbage */
  int *order = calloc(m->n_cases > 0 ? (size_t)m->n_cases : 1, sizeof *order);
  if (!order) return TP_FAIL(TP_EOOM, "no memory to order the graph mixes");
  tp_rc rc = mix_order(m, order);
  if (rc == TP_OK) rc = reorder_cases(m, order);
  free(order);
  TP_TRY(rc);
  int n_mixes = 0;
  for (int ci = 0; ci < m->n_cases; ++ci)
    n_mixes += m->cases[ci].graph_mixed &&
               (ci == 0 || m->cases[ci - 1].mix_group != m->cases[ci].mix_group);
  m->mix_sizes = calloc(n_mixes > 0 ? (size_t)n_mixes : 1, sizeof *m->mix_sizes);
  if (!m->mix_sizes) return TP_FAIL(TP_EOOM, "no memory for %d graph mixes", n_mixes);
  for (int ci = 0; ci < m->n_cases;) {
    if (!m->cases[ci].graph_mixed) {
      ++ci;
      continue;
    }
    int end = ci + 1;
    while (end < m->n_cases && m->cases[end].mix_group == m->cases[ci].mix_group) ++end;
    char *sizes = m->mix_sizes[m->n_mixes];
    join_tokens(m, ci, end - ci, sizes, TP_LAYER_SIZES_TEXT);
    for (int k = ci; k < end; ++k) {
      m->cases[k].mix_group = m->n_mixes;
      for (int i = 0; i < m->cases[k].n_configs; ++i)
        m->configs[m->cases[k].first_config + i].axes.graph_sizes = sizes;
    }
    mix_rules(m, ci, end - ci, sizes);
    m->n_mixes++;
    ci = end;
  }
  return TP_OK;
}

/* The odometer's points less the comm_dtype repeats (comm_repeat): the
 * other axes' product times, over dtype x tp x sp, comm_dtype's count
 * where it applies and 1 elsewhere. */
static int64_t count_cases(const resolved *r) {
  int64_t others = 1, inner = 0;
  for (int k = 0; k < N_CASE_AXES; ++k) {
    const int ax = case_axis_order[k];
    if (ax != A_DTYPE && ax != A_TP && ax != A_SP && ax != A_COMM) others *= r->count[ax];
  }
  for (int d = 0; d < r->count[A_DTYPE]; ++d)
    for (int t = 0; t < r->count[A_TP]; ++t)
      for (int p = 0; p < r->count[A_SP]; ++p) {
        tp_layer_case c;
        memset(&c, 0, sizeof c);
        c.dtype = (tp_dtype)vocab_value(&tp_dtype_vocab, r->names[A_DTYPE][d]);
        c.tp = (int)r->numbers[A_TP][t];
        c.sp = is_on(r->names[A_SP][p]);
        inner += comm_applies(&c) ? r->count[A_COMM] : 1;
      }
  return others * inner;
}

tp_rc tp_layer_expand(const tp_layer_spec *spec, int tp_default, tp_layer_matrix *out) {
  memset(out, 0, sizeof *out);
  resolved *r = calloc(1, sizeof *r);
  if (!r) return TP_FAIL(TP_EOOM, "no memory to expand the matrix");
  tp_rc rc = resolve(spec, tp_default, r);
  const int64_t n_cases = rc == TP_OK ? count_cases(r) : 0;
  int64_t n_configs = rc == TP_OK ? n_cases * configs_per_case(r) : 0;
  if (rc == TP_OK && n_configs > MAX_CONFIGS)
    rc = TP_FAIL(TP_EUSAGE, "the axes make %lld configurations, more than the %d accepted",
                 (long long)n_configs, MAX_CONFIGS);
  tp_layer_matrix m = {NULL, 0, NULL, (int)n_cases, NULL, (int)n_configs, NULL, 0};
  if (rc == TP_OK) {
    m.n_models = r->count[A_MODEL];
    m.models = calloc((size_t)m.n_models, sizeof *m.models);
    m.cases = calloc((size_t)m.n_cases, sizeof *m.cases);
    m.configs = calloc((size_t)m.n_configs, sizeof *m.configs);
    if (!m.models || !m.cases || !m.configs)
      rc = TP_FAIL(TP_EOOM, "no memory for %d configurations", m.n_configs);
  }
  /* Copies: the cases and their axes' model names must not point into spec. */
  for (int i = 0; rc == TP_OK && i < m.n_models; ++i) m.models[i] = *r->models[i];
  if (rc == TP_OK) rc = fill_matrix(r, &m);
  if (rc == TP_OK) rc = group_mixes(r, &m);
  free(r);
  if (rc != TP_OK) {
    tp_layer_matrix_free(&m);
    return rc;
  }
  *out = m;
  return TP_OK;
}

void tp_layer_matrix_free(tp_layer_matrix *matrix) {
  free(matrix->models);
  free(matrix->cases);
  free(matrix->configs);
  free(matrix->mix_sizes);
  memset(matrix, 0, sizeof *matrix);
}

int tp_layer_runnable(const tp_layer_matrix *matrix) {
  int n = 0;
  for (int i = 0; i < matrix->n_configs; ++i) n += !matrix->configs[i].rejected;
  return n;
}

int tp_layer_rejected(const tp_layer_matrix *matrix) {
  int n = 0;
  for (int i = 0; i < matrix->n_configs; ++i)
    n += matrix->configs[i].rejected && !matrix->configs[i].planned;
  return n;
}

int tp_layer_planned(const tp_layer_matrix *matrix) {
  int n = 0;
  for (int i = 0; i < matrix->n_configs; ++i) n += matrix->configs[i].planned;
  return n;
}

/* ---- host rules ---------------------------------------------------------------------------- */

static int mesh_gpus(const tp_layer_matrix *m, const tp_layer_config *cfg) {
  return m->cases[cfg->case_index].dp * cfg->axes.tp;
}

/* Plans cfg for a host of gpus GPUs when its mesh needs more; 1 if it did. */
static int plan_gpus(const tp_layer_matrix *m, tp_layer_config *cfg, int gpus, const char *has) {
  const int need = mesh_gpus(m, cfg);
  if (need <= gpus || (cfg->rejected && !cfg->planned)) return 0;
  char why[160];
  snprintf(why, sizeof why, "needs %d GPUs (dp %d x tp %d); %s %d", need,
           m->cases[cfg->case_index].dp, cfg->axes.tp, has, gpus);
  /* The GPU count comes first: it is what this host lacks whatever runtime exists. */
  const int had_plan = cfg->planned;
  size_t len = strlen(why), rest = had_plan ? strlen(cfg->reason) : 0;
  if (len + 2 + rest >= sizeof cfg->reason) rest = sizeof cfg->reason - len - 3;
  memmove(cfg->reason + len + (had_plan ? 2 : 0), cfg->reason, rest);
  memcpy(cfg->reason, why, len);
  if (had_plan) memcpy(cfg->reason + len, "; ", 2);
  cfg->reason[len + (had_plan ? 2 + rest : 0)] = '\0';
  cfg->rejected = cfg->planned = 1;
  return 1;
}

int tp_layer_plan_host(tp_layer_matrix *m, int gpus) {
  int n = 0;
  for (int i = 0; i < m->n_configs; ++i) n += plan_gpus(m, &m->configs[i], gpus, "the host has");
  return n;
}

int tp_layer_reject_world(tp_layer_matrix *m, int world) {
  int n = 0;
  for (int i = 0; i < m->n_configs; ++i) {
    tp_layer_config *cfg = &m->configs[i];
    if (plan_gpus(m, cfg, world, "this job has")) {
      ++n;
      continue;
    }
    const int need = mesh_gpus(m, cfg);
    if (cfg->rejected || need == world) continue;
    cfg->rejected = 1;
    snprintf(cfg->reason, sizeof cfg->reason,
             "dp %d x tp %d needs a job of %d workers; this one has %d (--gpus %d)",
             m->cases[cfg->case_index].dp, cfg->axes.tp, need, world, need);
    ++n;
  }
  return n;
}

int tp_layer_reject_no_peer_access(tp_layer_matrix *m) {
  int n = 0;
  for (int i = 0; i < m->n_configs; ++i) {
    tp_layer_config *cfg = &m->configs[i];
    if (cfg->rejected || cfg->backend != TP_BACKEND_DIST) continue;
    cfg->rejected = 1;
    snprintf(cfg->reason, sizeof cfg->reason,
             "dist_gemm needs peer access: the GPUs of this job cannot all read and write each "
             "other's memory (cudaDeviceCanAccessPeer)");
    ++n;
  }
  return n;
}

int tp_layer_drop_planned(tp_layer_matrix *m, FILE *out) {
  int kept = 0, cases = 0;
  for (int ci = 0; ci < m->n_cases; ++ci) {
    tp_layer_case c = m->cases[ci];
    const int first = kept;
    for (int i = c.first_config; i < c.first_config + c.n_configs; ++i) {
      tp_layer_config cfg = m->configs[i];
      if (cfg.planned) {
        if (out)
          fprintf(out, "planned, not run: %s %s tp %d dp %d ac %s %s %s: %s\n", cfg.axes.model,
                  cfg.axes.op_or_layer, cfg.axes.tp, c.dp, tp_ac_name(c.ac), cfg.axes.kind,
                  cfg.axes.backend, cfg.reason);
        continue;
      }
      cfg.case_index = cases;
      m->configs[kept++] = cfg;
    }
    if (kept == first) continue;
    c.first_config = first;
    c.n_configs = kept - first;
    m->cases[cases++] = c;
  }
  const int dropped = m->n_configs - kept;
  m->n_configs = kept;
  m->n_cases = cases;
  return dropped;
}

/* ---- printing ------------------------------------------------------------------------------ */

static void describe(const tp_layer_config *cfg, char *buf, size_t cap) {
  if (cfg->backend == TP_BACKEND_DIST)
    snprintf(buf, cap, "dist_gemm %s chunks=%d%s", cfg->axes.schedule, cfg->axes.chunks,
             cfg->symm == TP_SYMM_NCCL ? " symm=nccl" : "");
  else if (cfg->axes.schedule)
    snprintf(buf, cap, "%s %s %s", cfg->axes.kind, cfg->axes.backend, cfg->axes.schedule);
  else snprintf(buf, cap, "%s %s", cfg->axes.kind, cfg->axes.backend);
}

/* Configurations the worker accepts or refuses at prepare time, by the host: the nccl-window
 * variant and symm=nccl, as NCCL's runtime answers for the communicator. */
static int decided_at_prepare_time(const tp_layer_config *cfg) {
  return (cfg->backend == TP_BACKEND_DIST && cfg->symm == TP_SYMM_NCCL) ||
         cfg->schedule == TP_SCHED_NCCL_WINDOW;
}

/* The configuration column's text: what runs, with the case's FSDP traffic and the
 * configuration's wire type when they apply. */
static void configuration_text(const tp_layer_matrix *m, const tp_layer_config *cfg, char *buf,
                               size_t cap) {
  describe(cfg, buf, cap);
  if (m->cases[cfg->case_index].fsdp_traffic) strncat(buf, " +fsdp_traffic", cap - strlen(buf) - 1);
  if (cfg->axes.comm_dtype) {
    strncat(buf, " comm=", cap - strlen(buf) - 1);
    strncat(buf, cfg->axes.comm_dtype, cap - strlen(buf) - 1);
  }
}

enum { CONFIGURATION_TEXT_MAX = 128, CONFIGURATION_MIN_WIDTH = 32 };

/* The configuration column's width: its longest text, at least the usual 32, so that a long
 * one (dist_gemm's schedule and symm with +fsdp_traffic and comm=) never pushes the columns
 * after it out of line. */
static int configuration_width(const tp_layer_matrix *m) {
  int width = CONFIGURATION_MIN_WIDTH;
  for (int i = 0; i < m->n_configs; ++i) {
    char what[CONFIGURATION_TEXT_MAX];
    configuration_text(m, &m->configs[i], what, sizeof what);
    if ((int)strlen(what) > width) width = (int)strlen(what);
  }
  return width;
}

/* Widths of the columns a value can outgrow: at least the usual ones (a model name past 11,
 * a tp or dp past 999) so that the columns after them stay in line. */
typedef struct matrix_widths {
  int model, layer, tp, dp;
} matrix_widths;

static int digits(long long v) {
  int n = 1;
  for (; v >= 10 || v <= -10; v /= 10) ++n;
  return v < 0 ? n + 1 : n;
}

static int at_least(int width, int len) { return len > width ? len : width; }

static matrix_widths matrix_column_widths(const tp_layer_matrix *m) {
  matrix_widths w = {11, 9, 3, 3};
  for (int i = 0; i < m->n_configs; ++i) {
    const tp_config_axes *a = &m->configs[i].axes;
    w.model = at_least(w.model, (int)strlen(a->model));
    w.layer = at_least(w.layer, (int)strlen(a->op_or_layer));
    w.tp = at_least(w.tp, digits(a->tp));
    w.dp = at_least(w.dp, digits(m->cases[m->configs[i].case_index].dp));
  }
  return w;
}

void tp_layer_matrix_print(const tp_layer_matrix *m, int gpus, FILE *out) {
  const int width = configuration_width(m);
  const matrix_widths w = matrix_column_widths(m);
  fprintf(out, "%-5s %-*s %-*s %*s %*s %-10s %7s %-5s %-3s %-7s %-5s %-5s %-9s %-*s %10s  %s\n",
          "case", w.model, "model", w.layer, "layer", w.tp, "tp", w.dp, "dp", "BxS", "tokens",
          "dtype", "sp", "pass", "graph", "saved", "ac", width, "configuration", "GFLOP", "status");
  int prepare_time = 0;
  for (int i = 0; i < m->n_configs; ++i) {
    const tp_layer_config *cfg = &m->configs[i];
    const tp_layer_case *c = &m->cases[cfg->case_index];
    const tp_config_axes *a = &cfg->axes;
    char what[CONFIGURATION_TEXT_MAX], bxs[32];
    configuration_text(m, cfg, what, sizeof what);
    snprintf(bxs, sizeof bxs, "%dx%d", a->batch, a->seqlen);
    const char *status = cfg->planned ? "planned: " : cfg->rejected ? "rejected: " : "run";
    const char *note = cfg->rejected ? cfg->reason : "";
    char among[TP_LAYER_SIZES_TEXT + 96];
    /* both said where both hold: a mix's configuration the kernels may still refuse */
    const int at_prepare = !cfg->rejected && decided_at_prepare_time(cfg);
    prepare_time += at_prepare;
    static const char nccl_decides[] =
        "NCCL's runtime decides at prepare time whether this host runs it";
    if (at_prepare && a->graph_sizes)
      snprintf(among, sizeof among, " (%s; replayed among %s tokens)", nccl_decides,
               a->graph_sizes);
    else if (at_prepare) snprintf(among, sizeof among, " (%s)", nccl_decides);
    else if (!cfg->rejected && a->graph_sizes)
      snprintf(among, sizeof among, " (replayed among %s tokens)", a->graph_sizes);
    if (at_prepare || (!cfg->rejected && a->graph_sizes)) note = among;
    fprintf(out,
            "%-5d %-*s %-*s %*d %*d %-10s %7lld %-5s %-3s %-7s %-5s %-5s %-9s %-*s %10.1f  %s%s\n",
            cfg->case_index, w.model, a->model, w.layer, a->op_or_layer, w.tp, a->tp, w.dp, c->dp,
            bxs, (long long)a->tokens, a->dtype, a->sp ? "on" : "off", a->pass,
            tp_layer_graph_name(c), a->save_gathered ? "on" : "off", tp_ac_name(c->ac), width, what,
            cfg->flops / 1e9, status, note);
  }
  fprintf(out,
          "%d cases, %d configurations: %d to run, %d rejected, %d planned (host of %d GPU%s)\n",
          m->n_cases, m->n_configs, tp_layer_runnable(m), tp_layer_rejected(m), tp_layer_planned(m),
          gpus, gpus == 1 ? "" : "s");
  fprintf(out,
          "tpbench run also rejects, with the reason: dist_gemm without peer access between the "
          "GPUs%s.\n",
          prepare_time ? ", and nccl-window or symm=nccl where NCCL's runtime offers no symmetric "
                         "memory on that host (asked at prepare time)"
                       : "");
  for (int i = 0; i < m->n_cases; ++i)
    if (tp_dtype_is_fp8(m->cases[i].dtype)) {
      fprintf(out, "decided on the GPU: whether cuBLASLt runs an fp8 format's scale modes there "
                   "(mxfp8 needs sm_100); the worker's plan rejects it with cuBLASLt's answer\n");
      break;
    }
}
