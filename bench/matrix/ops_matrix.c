/*
 * ops_matrix.c — expansion and validity rules of the op benchmark's
 * configurations (see ops_matrix.h).
 *
 * Expansion runs in two steps: resolve every user list against the tool's
 * tables (aliases become canonical static names, mistakes become usage
 * errors), then walk the cases and attach each configuration's shapes and,
 * where it cannot run, the reason.
 */
#include "bench/matrix/ops_matrix.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matrix/matrix_file.h"
#include "common/tp_chunk_rule.h"
#include "kernels/tp_quant.h"
#include "kernels/tp_recipe_rules.h"

static const char *const on_off_table[] = {"off", "on"};

/* Bounds that keep every product below (bytes, FLOPs, counts) far from overflow. */
#define MAX_TOKENS (1LL << 30)
#define MAX_CONFIGS 1000000

#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One bare projection of `ops --shape`. */
typedef struct shape_item {
  int64_t m, n, k;
  tp_op op;
} shape_item;

/* The user's lists, resolved to canonical names and checked numbers. */
typedef struct resolved_spec {
  shape_item shapes[TP_LIST_MAX]; /* n_shapes > 0: shape cases, models/projs/tokens unused */
  int n_shapes;
  const tp_model_preset *models[TP_LIST_MAX];
  const char *projs[TP_LIST_MAX];
  tp_dtype dtypes[TP_LIST_MAX];
  tp_schedule schedules[TP_LIST_MAX];
  tp_pass passes[TP_LIST_MAX];
  int64_t tokens[TP_LIST_MAX];
  int tp[TP_LIST_MAX];
  int chunks[TP_LIST_MAX];
  const char *save_gathered[TP_LIST_MAX];
  tp_stock_variant stocks[TP_LIST_MAX];
  tp_symm_transport symms[TP_LIST_MAX];
  tp_comm_dtype comms[TP_LIST_MAX];
  int n_models, n_projs, n_dtypes, n_schedules, n_passes, n_tokens, n_tp, n_chunks, n_save,
      n_stocks, n_symms, n_comms;
} resolved_spec;

void tp_ops_spec_defaults(tp_ops_spec *spec) {
  /* The defaults are well-formed literals: these calls cannot fail. */
  memset(spec, 0, sizeof *spec);
  TP_EXPECT_OK(tp_str_list_set(&spec->models, "8b,70b"));
  TP_EXPECT_OK(tp_str_list_set(&spec->projs, "qkv,wo,w13,w2"));
  TP_EXPECT_OK(tp_int_list_set(&spec->tokens, "4096,8192,16384", 1, INT64_MAX));
  TP_EXPECT_OK(tp_str_list_set(&spec->dtypes, "bf16"));
  TP_EXPECT_OK(tp_int_list_set(&spec->tp, "2", 1, INT32_MAX));
  TP_EXPECT_OK(tp_str_list_set(&spec->schedules, "auto"));
  TP_EXPECT_OK(tp_int_list_set(&spec->chunks, "0", 0, INT32_MAX));
  TP_EXPECT_OK(tp_str_list_set(&spec->passes, "fwd"));
  TP_EXPECT_OK(tp_str_list_set(&spec->save_gathered, "off"));
  TP_EXPECT_OK(tp_str_list_set(&spec->stocks, "plain,window"));
  TP_EXPECT_OK(tp_str_list_set(&spec->symms, "ipc"));
  TP_EXPECT_OK(tp_str_list_set(&spec->comm_dtypes, "fp8"));
}

/* ---- the axes ------------------------------------------------------------- */

typedef struct ops_axis {
  const char *name;
  size_t offset;      /* of its tp_str_list or tp_int_list in tp_ops_spec */
  int is_int;         /* 1: a tp_int_list */
  long long min, max; /* of a number axis: the matching flag's range */
} ops_axis;

static const ops_axis ops_axes[] = {
    {"model", offsetof(tp_ops_spec, models), 0, 0, 0},
    {"proj", offsetof(tp_ops_spec, projs), 0, 0, 0},
    {"tokens", offsetof(tp_ops_spec, tokens), 1, 1, 1 << 24},
    {"dtype", offsetof(tp_ops_spec, dtypes), 0, 0, 0},
    {"tp", offsetof(tp_ops_spec, tp), 1, 1, TP_MAX_DEGREE},
    {"schedule", offsetof(tp_ops_spec, schedules), 0, 0, 0},
    {"chunks", offsetof(tp_ops_spec, chunks), 1, 0, 64},
    {"pass", offsetof(tp_ops_spec, passes), 0, 0, 0},
    {"save_gathered", offsetof(tp_ops_spec, save_gathered), 0, 0, 0},
    {"shape", offsetof(tp_ops_spec, shapes), 0, 0, 0},
    {"stock", offsetof(tp_ops_spec, stocks), 0, 0, 0},
    {"symm", offsetof(tp_ops_spec, symms), 0, 0, 0},
    {"comm_dtype", offsetof(tp_ops_spec, comm_dtypes), 0, 0, 0},
};
enum { N_OPS_AXES = COUNT_OF(ops_axes) };
/* Bits of tp_ops_spec.given. */
enum { GIVEN_MODEL = 1u << 0, GIVEN_PROJ = 1u << 1, GIVEN_TOKENS = 1u << 2 };

static const char *ops_axis_names_table[N_OPS_AXES];

const char *const *tp_ops_axis_names(int *count) {
  for (int i = 0; i < N_OPS_AXES; i++) ops_axis_names_table[i] = ops_axes[i].name;
  *count = N_OPS_AXES;
  return ops_axis_names_table;
}

tp_rc tp_ops_spec_set_axis(tp_ops_spec *spec, const char *axis, const char *values) {
  for (int i = 0; i < N_OPS_AXES; i++) {
    const ops_axis *a = &ops_axes[i];
    if (strcmp(a->name, axis) != 0) continue;
    void *list = (char *)spec + a->offset;
    tp_rc rc =
        a->is_int ? tp_int_list_set(list, values, a->min, a->max) : tp_str_list_set(list, values);
    if (rc != TP_OK) {
      char text[512];
      snprintf(text, sizeof text, "%s", tp_cli_last_message());
      return TP_FAIL(TP_EUSAGE, "axis %s: %s", axis, text);
    }
    spec->given |= 1u << i;
    return TP_OK;
  }
  char valid[256];
  int n = 0;
  const char *const *names = tp_ops_axis_names(&n);
  size_t used = 0;
  valid[0] = '\0';
  for (int i = 0; i < n && used < sizeof valid; i++) {
    int w = snprintf(valid + used, sizeof valid - used, "%s%s", i ? ", " : "", names[i]);
    if (w > 0) used += (size_t)w;
  }
  return TP_FAIL(TP_EUSAGE, "unknown axis '%s' for ops (valid: %s)", axis, valid);
}

static tp_rc ops_axis_hook(void *spec, const char *axis, const char *values) {
  return tp_ops_spec_set_axis(spec, axis, values);
}

tp_rc tp_ops_spec_load(const char *path, tp_ops_spec *spec) {
  tp_ops_spec *loaded = malloc(sizeof *loaded);
  if (!loaded) return TP_FAIL(TP_EOOM, "no memory for the matrix");
  *loaded = *spec;
  const tp_matrix_file_target target = {"ops", loaded, NULL, NULL, ops_axis_hook, &loaded->defined};
  tp_rc rc = tp_matrix_file_load(path, NULL, &target);
  if (rc == TP_OK) *spec = *loaded;
  free(loaded);
  return rc;
}

/* ---- resolving the user's lists ------------------------------------------ */

/* "a, b, c" from a table of names, for messages. */
static void join_names(const char *const *names, int n, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
}

static int index_of(const char *const *table, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(table[i], name) == 0) return i;
  return -1;
}

static tp_rc check_nonempty(int count, const char *what) {
  if (count < 1) return TP_FAIL(TP_EUSAGE, "no %s given", what);
  return TP_OK;
}

/* Resolves a list of names against a table of canonical ones; out receives
 * the table's own strings. */
static tp_rc resolve_names(const tp_str_list *list, const char *const *table, int n_table,
                           const char *what, const char **out, int *n_out) {
  TP_TRY(check_nonempty(list->count, what));
  for (int i = 0; i < list->count; i++) {
    const char *name = tp_str_list_at(list, i);
    int at = index_of(table, n_table, name);
    if (at < 0) {
      char valid[256];
      join_names(table, n_table, valid, sizeof valid);
      return TP_FAIL(TP_EUSAGE, "unknown %s '%s' (valid: %s)", what, name, valid);
    }
    if (index_of(out, i, table[at]) >= 0)
      return TP_FAIL(TP_EUSAGE, "%s '%s' is listed twice", what, table[at]);
    out[i] = table[at];
  }
  *n_out = list->count;
  return TP_OK;
}

/* The same against one of the shared vocabulary's tables: out receives the enum values. */
static tp_rc resolve_vocab(const tp_str_list *list, const tp_vocab_table *table, int *out,
                           int *n_out) {
  const char *names[TP_LIST_MAX];
  TP_TRY(resolve_names(list, table->names, table->n, table->what, names, n_out));
  for (int i = 0; i < *n_out; i++) out[i] = index_of(table->names, table->n, names[i]);
  return TP_OK;
}

static tp_rc resolve_models(const tp_str_list *list, const tp_model_set *defined,
                            resolved_spec *r) {
  TP_TRY(check_nonempty(list->count, "models"));
  for (int i = 0; i < list->count; i++) {
    const tp_model_preset *model = NULL;
    TP_TRY(tp_model_find(defined, tp_str_list_at(list, i), &model));
    for (int j = 0; j < i; j++)
      if (r->models[j] == model)
        return TP_FAIL(TP_EUSAGE, "model '%s' is listed twice", model->name);
    r->models[i] = model;
  }
  r->n_models = list->count;
  return TP_OK;
}

/* Checks a list of whole numbers against [min, max] and for repeats. */
static tp_rc check_numbers(const tp_int_list *list, long long min, long long max,
                           const char *what) {
  TP_TRY(check_nonempty(list->count, what));
  for (int i = 0; i < list->count; i++) {
    long long v = list->items[i];
    if (v < min || v > max)
      return TP_FAIL(TP_EUSAGE, "%s: %lld is out of range [%lld, %lld]", what, v, min, max);
    for (int j = 0; j < i; j++)
      if (list->items[j] == v) return TP_FAIL(TP_EUSAGE, "%s: %lld is listed twice", what, v);
  }
  return TP_OK;
}

/* One whole number of a shape, in [1, max]; *text moves past it. */
static tp_rc shape_number(const char *item, const char **text, long long max, int64_t *out) {
  const char *p = *text;
  if (*p < '0' || *p > '9') return TP_FAIL(TP_EUSAGE, "shape '%s': expected a number", item);
  errno = 0;
  char *end = NULL;
  long long v = strtoll(p, &end, 10);
  /* the number alone (its digits), not the rest of the item after it */
  if (errno != 0 || v < 1 || v > max)
    return TP_FAIL(TP_EUSAGE, "shape '%s': %.*s is out of range [1, %lld]", item,
                   (int)strspn(p, "0123456789"), p, max);
  *text = end;
  *out = v;
  return TP_OK;
}

#define SHAPE_SYNTAX "MxNxK or MxNxK:OP with OP ag_linear, ag_linear_multi or linear_rs"

/* "MxNxK" or "MxNxK:op" → *out. */
static tp_rc parse_shape(const char *item, shape_item *out) {
  const char *p = item;
  int64_t dims[3];
  for (int i = 0; i < 3; i++) {
    if (i > 0 && *p++ != 'x')
      return TP_FAIL(TP_EUSAGE, "shape '%s': expected %s", item, SHAPE_SYNTAX);
    TP_TRY(shape_number(item, &p, i == 0 ? MAX_TOKENS : 1 << 24, &dims[i]));
  }
  int op = TP_OP_AG_LINEAR;
  if (*p == ':' && tp_vocab_parse(&tp_op_vocab, p + 1, &op) != TP_OK)
    return TP_FAIL(TP_EUSAGE,
                   "shape '%s': unknown op '%s' (valid: ag_linear, ag_linear_multi, "
                   "linear_rs)",
                   item, p + 1);
  if (*p != '\0' && *p != ':')
    return TP_FAIL(TP_EUSAGE, "shape '%s': expected %s", item, SHAPE_SYNTAX);
  *out = (shape_item){dims[0], dims[1], dims[2], (tp_op)op};
  return TP_OK;
}

static int same_shape(const shape_item *a, const shape_item *b) {
  return a->m == b->m && a->n == b->n && a->k == b->k && a->op == b->op;
}

static tp_rc resolve_shapes(const tp_ops_spec *spec, resolved_spec *r) {
  if ((spec->given & (GIVEN_MODEL | GIVEN_PROJ | GIVEN_TOKENS)) != 0)
    return TP_FAIL(TP_EUSAGE, "a shape (--shape, the shape axis) replaces the model, proj and "
                              "tokens axes: give either");
  for (int i = 0; i < spec->shapes.count; i++) {
    TP_TRY(parse_shape(tp_str_list_at(&spec->shapes, i), &r->shapes[i]));
    for (int j = 0; j < i; j++)
      if (same_shape(&r->shapes[j], &r->shapes[i]))
        return TP_FAIL(TP_EUSAGE, "shape '%s' is listed twice", tp_str_list_at(&spec->shapes, i));
  }
  r->n_shapes = spec->shapes.count;
  return TP_OK;
}

static tp_rc resolve_numbers(const tp_ops_spec *spec, resolved_spec *r) {
  if (r->n_shapes == 0) TP_TRY(check_numbers(&spec->tokens, 1, MAX_TOKENS, "tokens"));
  TP_TRY(check_numbers(&spec->tp, 1, TP_MAX_DEGREE, "tp"));
  TP_TRY(check_numbers(&spec->chunks, 0, 1 << 20, "chunks"));
  r->n_tokens = spec->tokens.count;
  r->n_tp = spec->tp.count;
  r->n_chunks = spec->chunks.count;
  for (int i = 0; i < r->n_tokens; i++) r->tokens[i] = spec->tokens.items[i];
  for (int i = 0; i < r->n_tp; i++) r->tp[i] = (int)spec->tp.items[i];
  for (int i = 0; i < r->n_chunks; i++) r->chunks[i] = (int)spec->chunks.items[i];
  return TP_OK;
}

static tp_rc resolve_spec(const tp_ops_spec *spec, resolved_spec *r) {
  memset(r, 0, sizeof *r);
  int n_proj_names = 0;
  const char *const *proj_names = tp_projection_names(&n_proj_names);

  if (spec->shapes.count > 0) {
    TP_TRY(resolve_shapes(spec, r));
  } else {
    TP_TRY(resolve_models(&spec->models, &spec->defined, r));
    TP_TRY(resolve_names(&spec->projs, proj_names, n_proj_names, "proj", r->projs, &r->n_projs));
  }
  int values[TP_LIST_MAX];
  TP_TRY(resolve_vocab(&spec->dtypes, &tp_dtype_vocab, values, &r->n_dtypes));
  for (int i = 0; i < r->n_dtypes; i++) r->dtypes[i] = (tp_dtype)values[i];
  TP_TRY(resolve_vocab(&spec->schedules, &tp_schedule_vocab, values, &r->n_schedules));
  for (int i = 0; i < r->n_schedules; i++) r->schedules[i] = (tp_schedule)values[i];
  TP_TRY(resolve_vocab(&spec->passes, &tp_pass_vocab, values, &r->n_passes));
  for (int i = 0; i < r->n_passes; i++) r->passes[i] = (tp_pass)values[i];
  TP_TRY(resolve_names(&spec->save_gathered, on_off_table, COUNT_OF(on_off_table), "save_gathered",
                       r->save_gathered, &r->n_save));
  TP_TRY(resolve_vocab(&spec->stocks, &tp_stock_vocab, values, &r->n_stocks));
  for (int i = 0; i < r->n_stocks; i++) r->stocks[i] = (tp_stock_variant)values[i];
  TP_TRY(resolve_vocab(&spec->symms, &tp_symm_vocab, values, &r->n_symms));
  for (int i = 0; i < r->n_symms; i++) r->symms[i] = (tp_symm_transport)values[i];
  TP_TRY(resolve_vocab(&spec->comm_dtypes, &tp_comm_dtype_vocab, values, &r->n_comms));
  /* the table names bf16 and fp8, the enum's values after NONE */
  for (int i = 0; i < r->n_comms; i++) r->comms[i] = (tp_comm_dtype)(values[i] + 1);
  return resolve_numbers(spec, r);
}

/* ---- validity rules -------------------------------------------------------- */

/* The case as the recipe's rules see it (kernels/tp_recipe_rules.h). */
static tp_recipe_case recipe_case_of(const tp_ops_case *c) {
  const tp_recipe_case r = {c->dtype,  c->proj.op, c->tokens, c->proj.n,
                            c->proj.k, c->tp,      c->pass,   c->comm};
  return r;
}

/* Why no configuration of the case can run; 0 if they can. */
static int case_rejection(const tp_ops_case *c, char *reason, size_t cap) {
  char what[32];
  snprintf(what, sizeof what, "TP %d", c->tp);
  if (tp_group_size_rejection(what, c->tp, reason, cap)) return 1;
  const int attention_proj = strcmp(c->proj.name, "qkv") == 0 || strcmp(c->proj.name, "wo") == 0;
  if (attention_proj && c->model->no_attention) {
    snprintf(reason, cap, "%s: %s", c->model->name, c->model->no_attention);
    return 1;
  }
  if (c->tokens % c->tp != 0) {
    snprintf(reason, cap, "tokens %lld not divisible by TP %d", (long long)c->tokens, c->tp);
    return 1;
  }
  /* The column-parallel side splits out features, the row-parallel side in features. */
  if (c->proj.op == TP_OP_LINEAR_RS && c->proj.k % c->tp != 0) {
    snprintf(reason, cap, "in features %lld not divisible by TP %d", (long long)c->proj.k, c->tp);
    return 1;
  }
  if (c->proj.op != TP_OP_LINEAR_RS && c->proj.n % c->tp != 0) {
    snprintf(reason, cap, "out features %lld not divisible by TP %d", (long long)c->proj.n, c->tp);
    return 1;
  }
  if (c->save_gathered && c->proj.op == TP_OP_LINEAR_RS) {
    snprintf(reason, cap,
             "save_gathered=on applies to the backward of an all-gather op (qkv, w13): a "
             "reduce-scatter op gathers nothing to save");
    return 1;
  }
  if (c->save_gathered && c->pass == TP_PASS_FWD) {
    snprintf(reason, cap,
             "save_gathered=on keeps the forward's gathered input for the backward; pass fwd has "
             "no backward");
    return 1;
  }
  if (c->save_gathered && tp_recipe_save_gathered_rejection(c->dtype, reason, cap)) return 1;
  const tp_recipe_case rc = recipe_case_of(c);
  return tp_recipe_rejection(&rc, NULL, reason, cap);
}

static int dist_gemm_rejection(const tp_ops_case *c, tp_schedule schedule, int chunks, char *reason,
                               size_t cap) {
  if (tp_dist_rejection(schedule, c->tp, c->tokens / c->tp, chunks, reason, cap)) return 1;
  const tp_recipe_case rc = recipe_case_of(c);
  return tp_recipe_dist_rejection(&rc, schedule, chunks, reason, cap);
}

/* sm's copy kernel pushes 16-byte vectors: the plan refuses sm where a chunk is not a whole
 * number of them (common/tp_chunk_rule.h). An fp8 dtype's schedule is its bf16 base plan's
 * (kernels/tp_linear_fp8_comm.c): the forward's shard of bf16 rows in one chunk. */
static int sm_chunk_rejection(const tp_ops_case *c, tp_schedule schedule, int chunks, char *reason,
                              size_t cap) {
  if (schedule != TP_SCHED_SM || c->tp < 2) return 0;
  const int fp8 = tp_dtype_is_fp8(c->dtype), gather = tp_op_gathers(c->proj.op);
  const tp_dtype dtype = fp8 ? TP_BF16 : c->dtype;
  const size_t row_bytes = (size_t)(gather ? c->proj.k : c->proj.n) * tp_dtype_bytes(dtype);
  const size_t bad = tp_sm_unaligned_chunk(gather, fp8 ? 0 : tp_pass_has_backward(c->pass), c->tp,
                                           c->tokens / c->tp, row_bytes, fp8 ? 1 : chunks,
                                           c->proj.n, c->proj.k, c->proj.n_weights, dtype);
  if (!bad) return 0;
  snprintf(reason, cap, "sm: chunk size not a multiple of %d bytes (%zu bytes)", TP_SM_CHUNK_ALIGN,
           bad);
  return 1;
}

static int comm_rejection(const tp_ops_case *c, char *reason, size_t cap) {
  if (c->tp > 1) return 0;
  snprintf(reason, cap, "TP 1 has no collective to time");
  return 1;
}

/* ---- building configurations ----------------------------------------------- */

static double pass_flop_factor(tp_pass pass) {
  /* Backward computes two GEMMs of the forward's size (dX and dW). */
  if (pass == TP_PASS_BWD) return 2.0;
  if (pass == TP_PASS_FWD_BWD) return 3.0;
  return 1.0;
}

/* The axes every configuration of a case shares (the report pairs on them). */
static tp_config_axes case_axes(const tp_ops_case *c) {
  tp_config_axes a = {0};
  a.model = c->model->name;
  a.op_or_layer = tp_op_name(c->proj.op);
  a.proj = c->proj.name;
  a.tp = c->tp;
  a.tokens = c->tokens;
  a.m = c->tokens;
  a.n = c->proj.op == TP_OP_LINEAR_RS ? c->proj.n : c->proj.n / c->tp;
  a.k = c->proj.op == TP_OP_LINEAR_RS ? c->proj.k / c->tp : c->proj.k;
  a.n_weights = c->proj.n_weights;
  a.dtype = tp_dtype_name(c->dtype);
  a.sp = 1; /* the ops take and give sequence-sharded activations */
  a.pass = tp_pass_name(c->pass);
  a.save_gathered = c->save_gathered;
  a.comm_dtype = tp_comm_dtype_axis(c->comm);
  return a;
}

/* The whole collective buffer: on the all-gather side the gathered input,
 * in fp8 (1 byte per element plus every rank's shard scales) for an fp8
 * dtype with comm_dtype fp8 (or at TP 1, where nothing travels), bf16 with
 * comm_dtype bf16; on the reduce-scatter side the partial output, bf16 for
 * the fp8 dtypes too (the partials are reduced in bf16). */
static int64_t collective_bytes(const tp_ops_case *c) {
  if (c->proj.op == TP_OP_LINEAR_RS)
    return c->tokens * c->proj.n * (int64_t)tp_dtype_bytes(c->dtype);
  if (c->comm == TP_COMM_BF16) return c->tokens * c->proj.k * 2;
  tp_quant_format f;
  tp_scale_gather g;
  if (tp_dtype_is_fp8(c->dtype) && tp_quant_format_of(c->dtype, &f) == TP_OK &&
      c->tokens % c->tp == 0 &&
      tp_scale_gather_shape(f, c->tokens / c->tp, c->proj.k, c->tp, &g) == TP_OK)
    return c->tokens * c->proj.k + (int64_t)tp_scale_gather_bytes(&g);
  return c->tokens * c->proj.k * (int64_t)tp_dtype_bytes(c->dtype);
}

static tp_ops_config make_config(const tp_ops_case *c, int case_index, tp_backend backend) {
  tp_ops_config cfg = {.backend = backend, .schedule = TP_SCHED_AUTO, .case_index = case_index};
  cfg.axes = case_axes(c);
  cfg.axes.kind = tp_backend_kind(backend, "op");
  cfg.axes.backend = tp_backend_axis(backend);
  if (backend != TP_BACKEND_COMM_ONLY)
    cfg.flops = tp_projection_flops(&c->proj, c->tokens) * pass_flop_factor(c->pass);
  cfg.comm_bytes = collective_bytes(c);
  cfg.rejected = case_rejection(c, cfg.reason, sizeof cfg.reason);
  if (!cfg.rejected && backend == TP_BACKEND_COMM_ONLY)
    cfg.rejected = comm_rejection(c, cfg.reason, sizeof cfg.reason);
  return cfg;
}

/* The stock op or the collective alone of one stock variant. */
static tp_ops_config make_stock_variant(const tp_ops_case *c, int case_index, tp_backend backend,
                                        tp_stock_variant variant) {
  tp_ops_config cfg = make_config(c, case_index, backend);
  cfg.schedule = tp_stock_schedule(variant);
  cfg.axes.schedule = tp_stock_schedule_axis(variant);
  if (!cfg.rejected && variant == TP_STOCK_WINDOW)
    cfg.rejected =
        tp_recipe_window_rejection(c->dtype, TP_RECIPE_FOR_OP, cfg.reason, sizeof cfg.reason);
  return cfg;
}

static tp_ops_config make_dist_gemm(const tp_ops_case *c, int case_index, tp_schedule schedule,
                                    int chunks, tp_symm_transport symm) {
  tp_ops_config cfg = make_config(c, case_index, TP_BACKEND_DIST);
  cfg.schedule = schedule;
  cfg.symm = symm;
  cfg.axes.symm = tp_symm_transport_name(symm); /* keyed only away from ipc */
  cfg.axes.schedule = tp_schedule_name(schedule);
  cfg.axes.chunks = chunks;
  if (!cfg.rejected)
    cfg.rejected = dist_gemm_rejection(c, schedule, chunks, cfg.reason, sizeof cfg.reason);
  if (!cfg.rejected)
    cfg.rejected =
        tp_recipe_symm_rejection(c->dtype, symm, TP_RECIPE_FOR_OP, cfg.reason, sizeof cfg.reason);
  if (!cfg.rejected)
    cfg.rejected = sm_chunk_rejection(c, schedule, chunks, cfg.reason, sizeof cfg.reason);
  return cfg;
}

/* Appends the configurations of case c (index ci) at *next. */
static void expand_case(const resolved_spec *r, tp_ops_case *c, int ci, tp_ops_config *configs,
                        int *next) {
  c->first_config = *next;
  for (int v = 0; v < r->n_stocks; v++)
    configs[(*next)++] = make_stock_variant(c, ci, TP_BACKEND_STOCK, r->stocks[v]);
  for (int s = 0; s < r->n_schedules; s++)
    for (int k = 0; k < r->n_chunks; k++)
      for (int t = 0; t < r->n_symms; t++)
        configs[(*next)++] = make_dist_gemm(c, ci, r->schedules[s], r->chunks[k], r->symms[t]);
  configs[(*next)++] = make_config(c, ci, TP_BACKEND_GEMM_ONLY);
  for (int v = 0; v < r->n_stocks; v++)
    configs[(*next)++] = make_stock_variant(c, ci, TP_BACKEND_COMM_ONLY, r->stocks[v]);
  c->n_configs = *next - c->first_config;
}

/* Whether comm_dtype is an axis of the case: an fp8 dtype's all-gather
 * side at TP > 1, where either the fp8 shard or the bf16 one can travel.
 * Elsewhere nothing quantized travels (comm_dtype none, one case). */
static int comm_applies(tp_dtype dtype, int tp, tp_op op) {
  return tp_dtype_is_fp8(dtype) && tp > 1 && tp_op_gathers(op);
}

/* Walks dtypes > tp > comm_dtype > passes × save_gathered for one (model,
 * proj, tokens) or shape, filling cases from *ci on (m->cases NULL: only
 * counting them). */
static void fill_variants(const resolved_spec *r, const tp_model_preset *model,
                          const tp_projection *proj, int64_t tokens, tp_ops_matrix *m, int *ci,
                          int *next) {
  for (int di = 0; di < r->n_dtypes; di++)
    for (int wi = 0; wi < r->n_tp; wi++) {
      const int comm = comm_applies(r->dtypes[di], r->tp[wi], proj->op);
      for (int cv = 0; cv < (comm ? r->n_comms : 1); cv++)
        for (int pass_save = 0; pass_save < r->n_passes * r->n_save; pass_save++, (*ci)++) {
          if (!m->cases) continue;
          tp_ops_case *c = &m->cases[*ci];
          c->model = model;
          c->proj = *proj;
          c->tokens = tokens;
          c->dtype = r->dtypes[di];
          c->tp = r->tp[wi];
          c->pass = r->passes[pass_save / r->n_save];
          c->save_gathered = strcmp(r->save_gathered[pass_save % r->n_save], "on") == 0;
          c->comm = comm ? r->comms[cv] : TP_COMM_NONE;
          expand_case(r, c, *ci, m->configs, next);
        }
    }
}

/* Fills the cases in the order models > projs > tokens > dtypes > tp >
 * comm_dtype > passes, or shapes > dtypes > tp > comm_dtype > passes (m->cases
 * NULL: only counts them); returns how many. */
static int fill_cases(const resolved_spec *r, tp_ops_matrix *m) {
  int ci = 0, next = 0;
  for (int si = 0; si < r->n_shapes; si++) {
    const shape_item *sh = &r->shapes[si];
    snprintf(m->shape_names[si], sizeof m->shape_names[si], "%lldx%lld", (long long)sh->n,
             (long long)sh->k);
    const tp_projection proj = {m->shape_names[si], sh->op, sh->n, sh->k,
                                sh->op == TP_OP_AG_LINEAR_MULTI ? 2 : 1};
    fill_variants(r, &m->models[m->n_models - 1], &proj, sh->m, m, &ci, &next);
  }
  for (int mi = 0; mi < r->n_models; mi++)
    for (int pi = 0; pi < r->n_projs; pi++)
      for (int ti = 0; ti < r->n_tokens; ti++) {
        tp_projection proj;
        /* Names were checked while resolving: this cannot fail. */
        TP_EXPECT_OK(tp_preset_projection(&m->models[mi], r->projs[pi], &proj));
        fill_variants(r, &m->models[mi], &proj, r->tokens[ti], m, &ci, &next);
      }
  return ci;
}

/* The matrix's own copies of its models (the last one the shape model) and
 * room for the shapes' names. */
static tp_rc own_models(const resolved_spec *r, tp_ops_matrix *m) {
  m->n_models = r->n_models + 1;
  m->models = calloc((size_t)m->n_models, sizeof *m->models);
  m->shape_names = calloc((size_t)(r->n_shapes > 0 ? r->n_shapes : 1), sizeof *m->shape_names);
  if (!m->models || !m->shape_names) return TP_FAIL(TP_EOOM, "no memory for the models");
  for (int i = 0; i < r->n_models; i++) m->models[i] = *r->models[i];
  snprintf(m->models[r->n_models].name, sizeof m->models[r->n_models].name, "%s", TP_SHAPE_MODEL);
  return TP_OK;
}

tp_rc tp_ops_expand(const tp_ops_spec *spec, tp_ops_matrix *out) {
  memset(out, 0, sizeof *out);
  resolved_spec *r = malloc(sizeof *r);
  if (!r) return TP_FAIL(TP_EOOM, "no memory to expand the matrix");
  tp_rc rc = resolve_spec(spec, r);
  int64_t variants = (int64_t)r->n_dtypes * r->n_tp * r->n_passes * r->n_save;
  int64_t n_cases = r->n_shapes > 0 ? r->n_shapes * variants
                                    : (int64_t)r->n_models * r->n_projs * r->n_tokens * variants;
  int64_t per_case =
      1 + 2 * (int64_t)r->n_stocks + (int64_t)r->n_schedules * r->n_chunks * r->n_symms;
  if (rc == TP_OK && n_cases < 1) rc = TP_FAIL(TP_EUSAGE, "the lists make no configuration");
  tp_ops_matrix m = {0};
  if (rc == TP_OK) rc = own_models(r, &m);
  /* comm_dtype multiplies only the cases it applies to: count them (at most
   * n_comms times the product, so the count loop stays bounded) */
  if (rc == TP_OK && n_cases * per_case <= MAX_CONFIGS) n_cases = fill_cases(r, &m);
  if (rc == TP_OK && n_cases < 1) rc = TP_FAIL(TP_EUSAGE, "the lists make no configuration");
  if (rc == TP_OK && n_cases * per_case > MAX_CONFIGS)
    rc = TP_FAIL(TP_EUSAGE, "the lists make %lld configurations, more than the %d accepted",
                 (long long)(n_cases * per_case), MAX_CONFIGS);
  m.n_cases = (int)n_cases;
  m.n_configs = (int)(n_cases * per_case);
  if (rc == TP_OK) {
    m.cases = calloc((size_t)m.n_cases, sizeof *m.cases);
    m.configs = calloc((size_t)m.n_configs, sizeof *m.configs);
    if (!m.cases || !m.configs)
      rc = TP_FAIL(TP_EOOM, "no memory for %d configurations", m.n_configs);
  }
  if (rc == TP_OK) fill_cases(r, &m);
  free(r);
  if (rc != TP_OK) {
    tp_ops_matrix_free(&m);
    return rc;
  }
  *out = m;
  return TP_OK;
}

void tp_ops_matrix_free(tp_ops_matrix *matrix) {
  free(matrix->models);
  free(matrix->shape_names);
  free(matrix->cases);
  free(matrix->configs);
  memset(matrix, 0, sizeof *matrix);
}

int tp_ops_runnable(const tp_ops_matrix *matrix) {
  int n = 0;
  for (int i = 0; i < matrix->n_configs; i++) n += !matrix->configs[i].rejected;
  return n;
}

/* Plans cfg when its TP group needs more than gpus GPUs; 1 if it did. */
static int plan_gpus(tp_ops_config *cfg, int gpus, const char *has) {
  if (cfg->rejected || cfg->axes.tp <= gpus) return 0;
  snprintf(cfg->reason, sizeof cfg->reason, "needs %d GPUs (tp %d); %s %d", cfg->axes.tp,
           cfg->axes.tp, has, gpus);
  cfg->rejected = cfg->planned = 1;
  return 1;
}

int tp_ops_reject_world(tp_ops_matrix *matrix, int world) {
  int n = 0;
  matrix->host_gpus = world;
  for (int i = 0; i < matrix->n_configs; i++) {
    tp_ops_config *cfg = &matrix->configs[i];
    if (plan_gpus(cfg, world, "this job has")) {
      n++;
      continue;
    }
    if (cfg->rejected || cfg->axes.tp == world) continue;
    cfg->rejected = 1;
    snprintf(cfg->reason, sizeof cfg->reason,
             "TP %d needs a job of %d workers; this one has %d (--gpus %d)", cfg->axes.tp,
             cfg->axes.tp, world, cfg->axes.tp);
    n++;
  }
  return n;
}

int tp_ops_plan_host(tp_ops_matrix *matrix, int gpus) {
  int n = 0;
  for (int i = 0; i < matrix->n_configs; i++)
    n += plan_gpus(&matrix->configs[i], gpus, "the host has");
  matrix->host_gpus = gpus;
  return n;
}

int tp_ops_planned(const tp_ops_matrix *matrix) {
  int n = 0;
  for (int i = 0; i < matrix->n_configs; i++) n += matrix->configs[i].planned;
  return n;
}

int tp_ops_drop_planned(tp_ops_matrix *m, FILE *out) {
  int kept = 0, cases = 0;
  for (int ci = 0; ci < m->n_cases; ci++) {
    tp_ops_case c = m->cases[ci];
    const int first = kept;
    for (int i = c.first_config; i < c.first_config + c.n_configs; i++) {
      tp_ops_config cfg = m->configs[i];
      if (cfg.planned) {
        if (out)
          fprintf(out, "planned, not run: %s %s tp %d %s %s: %s\n", cfg.axes.model, cfg.axes.proj,
                  cfg.axes.tp, cfg.axes.kind, cfg.axes.backend, cfg.reason);
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

int tp_ops_max_tp(const tp_ops_matrix *matrix) {
  int max = 0;
  for (int i = 0; i < matrix->n_configs; i++)
    if (!matrix->configs[i].rejected && matrix->configs[i].axes.tp > max)
      max = matrix->configs[i].axes.tp;
  return max;
}

/* ---- the plan ---------------------------------------------------------------- */

static void describe_config(const tp_ops_config *cfg, char *buf, size_t cap) {
  int n;
  if (cfg->backend == TP_BACKEND_DIST)
    n = snprintf(buf, cap, "dist_gemm %s chunks=%d%s", cfg->axes.schedule, cfg->axes.chunks,
                 cfg->symm == TP_SYMM_NCCL ? " symm=nccl" : "");
  else if (cfg->axes.schedule)
    n = snprintf(buf, cap, "%s %s %s", cfg->axes.kind, cfg->axes.backend, cfg->axes.schedule);
  else n = snprintf(buf, cap, "%s %s", cfg->axes.kind, cfg->axes.backend);
  if (cfg->axes.comm_dtype && n >= 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, " comm=%s", cfg->axes.comm_dtype);
}

/* Whether the matrix holds an fp8 reduce-scatter case at TP > 1 (its note). */
static int has_fp8_scatter_tp(const tp_ops_matrix *m) {
  for (int i = 0; i < m->n_cases; i++)
    if (tp_dtype_is_fp8(m->cases[i].dtype) && m->cases[i].tp > 1 &&
        !tp_op_gathers(m->cases[i].proj.op))
      return 1;
  return 0;
}

void tp_ops_matrix_print(const tp_ops_matrix *matrix, FILE *out) {
  fprintf(out, "%-5s %-11s %-4s %-15s %7s %3s %-9s %-7s %-5s %-32s %7s %6s %6s  %s\n", "case",
          "model", "proj", "layer", "tokens", "tp", "dtype", "pass", "saved", "configuration", "m",
          "n", "k", "status");
  for (int i = 0; i < matrix->n_configs; i++) {
    const tp_ops_config *cfg = &matrix->configs[i];
    const tp_config_axes *a = &cfg->axes;
    char what[64];
    describe_config(cfg, what, sizeof what);
    fprintf(out, "%-5d %-11s %-4s %-15s %7lld %3d %-9s %-7s %-5s %-32s %7lld %6lld %6lld  %s%s\n",
            cfg->case_index, a->model, a->proj, a->op_or_layer, (long long)a->tokens, a->tp,
            a->dtype, a->pass, a->save_gathered ? "on" : "off", what, (long long)a->m,
            (long long)a->n, (long long)a->k,
            cfg->planned    ? "planned: "
            : cfg->rejected ? "rejected: "
                            : "run",
            cfg->rejected ? cfg->reason : "");
  }
  const int planned = tp_ops_planned(matrix), runnable = tp_ops_runnable(matrix);
  fprintf(out, "%d configurations, %d to run, %d rejected, %d planned", matrix->n_configs, runnable,
          matrix->n_configs - runnable - planned, planned);
  if (matrix->host_gpus > 0)
    fprintf(out, " (host of %d GPU%s)", matrix->host_gpus, matrix->host_gpus == 1 ? "" : "s");
  fprintf(out, "\n");
  for (int i = 0; i < matrix->n_configs; i++)
    if (!matrix->configs[i].rejected && matrix->configs[i].symm == TP_SYMM_NCCL) {
      fprintf(out, "decided on the GPU: whether NCCL offers symmetric memory to the symm=nccl "
                   "configurations (ncclDevCommCreate; NCCL up to 2.28.6 refuses at one rank); the "
                   "worker's plan rejects them with NCCL's answer\n");
      break;
    }
  for (int i = 0; i < matrix->n_cases; i++)
    if (tp_dtype_is_fp8(matrix->cases[i].dtype)) {
      fprintf(out, "decided on the GPU: whether cuBLASLt runs an fp8 format's scale modes there "
                   "(mxfp8 needs sm_100); the worker's plan rejects it with cuBLASLt's answer\n");
      break;
    }
  if (has_fp8_scatter_tp(matrix))
    fprintf(out, "fp8 linear_rs at TP > 1: the fp8 GEMM's bf16 partials are reduced in bf16 "
                 "(stock: NCCL; dist_gemm: fp32 sum, one rounding); comm_dtype does not apply\n");
}
