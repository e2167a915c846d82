/*
 * composition.c — the supported-composition table (see composition.h).
 *
 * Each configuration becomes a point: one value index per axis and a
 * verdict. A point is a cube of single values; cubes of one verdict that
 * differ in one axis only merge into one (that axis's sets united), axis by
 * axis, until nothing merges. Merging keeps the cover exact: a cube only
 * ever holds points of its verdict.
 */
#include "bench/matrix/composition.h"

#include <stdlib.h>
#include <string.h>

#include "bench/matrix/layer_matrix.h"
#include "bench/matrix/ops_matrix.h"

#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* MAX_VALUES: room for a vocabulary that grows (a cube holds one mask bit per value: 32 at most) */
enum { MAX_AXES = 13, MAX_VALUES = 16, MAX_VERDICTS = 256, VERDICT_TEXT = 440 };

/* The schedule column: "-" (plain stock's empty schedule), dist_gemm's asked schedules and
 * nccl-window (the stock variant's); the dtype column: every asked dtype. Both in the order of
 * their one list (common/tp_vocab.h), so a new schedule or dtype needs nothing here. */
#define SCHEDULE_VALUES                                                                            \
  { "-", TP_SCHEDULE_LIST(TP_VOCAB_ASKED_NAME) "nccl-window" }
#define N_SCHEDULE_VALUES (2 + TP_VOCAB_N_ASKED(TP_SCHEDULE_LIST))
#define DTYPE_VALUES                                                                               \
  { TP_DTYPE_LIST(TP_VOCAB_ASKED_NAME) }
#define N_DTYPE_VALUES TP_VOCAB_N_ASKED(TP_DTYPE_LIST)
_Static_assert(N_SCHEDULE_VALUES <= MAX_VALUES && N_DTYPE_VALUES <= MAX_VALUES,
               "composition.c: MAX_VALUES too small for the schedules or the dtypes");

/* The axes of one table: names and, per axis, its values in print order. */
typedef struct table_axes {
  int n;
  const char *name[MAX_AXES];
  const char *values[MAX_AXES][MAX_VALUES];
  int n_values[MAX_AXES];
} table_axes;

typedef struct cube {
  int verdict;             /* index into the table's verdicts */
  unsigned mask[MAX_AXES]; /* bit v: value v of the axis */
} cube;

typedef struct table {
  const table_axes *axes;
  char (*verdicts)[VERDICT_TEXT];
  int n_verdicts;
  cube *cubes;
  int n_cubes, cap;
} table;

static int value_index(const table_axes *a, int axis, const char *value) {
  for (int v = 0; v < a->n_values[axis]; ++v)
    if (strcmp(a->values[axis][v], value) == 0) return v;
  return -1;
}

static tp_rc verdict_index(table *t, const char *text, int *out) {
  for (int i = 0; i < t->n_verdicts; ++i)
    if (strcmp(t->verdicts[i], text) == 0) {
      *out = i;
      return TP_OK;
    }
  if (t->n_verdicts == MAX_VERDICTS)
    return TP_FAIL(TP_EINTERNAL, "more than %d verdicts", MAX_VERDICTS);
  snprintf(t->verdicts[t->n_verdicts], VERDICT_TEXT, "%s", text);
  *out = t->n_verdicts++;
  return TP_OK;
}

/* Adds one configuration: its value on every axis (by name) and its verdict. */
static tp_rc add_point(table *t, const char *const *values, const char *verdict) {
  cube c;
  memset(&c, 0, sizeof c);
  TP_TRY(verdict_index(t, verdict, &c.verdict));
  for (int a = 0; a < t->axes->n; ++a) {
    int v = value_index(t->axes, a, values[a]);
    if (v < 0)
      return TP_FAIL(TP_EINTERNAL, "axis %s has no value '%s'", t->axes->name[a], values[a]);
    c.mask[a] = 1u << v;
  }
  if (t->n_cubes == t->cap) return TP_FAIL(TP_EINTERNAL, "more than %d points", t->cap);
  t->cubes[t->n_cubes++] = c;
  return TP_OK;
}

/* Orders cubes by verdict, then by their sets, ignoring the index slot. */
static int compare_cubes_but_index(const void *pa, const void *pb) {
  const cube *a = pa, *b = pb;
  if (a->verdict != b->verdict) return a->verdict < b->verdict ? -1 : 1;
  for (int i = 0; i < MAX_AXES - 1; ++i)
    if (a->mask[i] != b->mask[i]) return a->mask[i] < b->mask[i] ? -1 : 1;
  return 0;
}

/* The last mask slot carries a cube's index through the sort: the tables use fewer axes. */
enum { INDEX_SLOT = MAX_AXES - 1 };

/* Merges the cubes of one verdict that agree on every axis but axis; 1 if any merged. */
static int merge_axis(table *t, int axis) {
  if (t->n_cubes < 2) return 0;
  unsigned *aside = malloc((size_t)t->n_cubes * sizeof *aside);
  cube *sorted = malloc((size_t)t->n_cubes * sizeof *sorted);
  if (!aside || !sorted) {
    free(aside);
    free(sorted);
    return 0; /* no memory: the cover stays exact, only less compact */
  }
  /* The axis's sets are put aside, so that sorting brings together the cubes equal elsewhere. */
  for (int i = 0; i < t->n_cubes; ++i) {
    aside[i] = t->cubes[i].mask[axis];
    sorted[i] = t->cubes[i];
    sorted[i].mask[axis] = 0;
    sorted[i].mask[INDEX_SLOT] = (unsigned)i;
  }
  qsort(sorted, (size_t)t->n_cubes, sizeof *sorted, compare_cubes_but_index);
  int out = 0, merged = 0;
  for (int i = 0; i < t->n_cubes;) {
    cube c = sorted[i];
    unsigned set = aside[c.mask[INDEX_SLOT]];
    int j = i + 1;
    for (; j < t->n_cubes && compare_cubes_but_index(&sorted[j], &c) == 0; ++j)
      set |= aside[sorted[j].mask[INDEX_SLOT]];
    merged |= j - i > 1;
    c.mask[axis] = set;
    c.mask[INDEX_SLOT] = 0;
    t->cubes[out++] = c;
    i = j;
  }
  t->n_cubes = out;
  free(sorted);
  free(aside);
  return merged;
}

static void merge_all(table *t) {
  for (int changed = 1; changed;) {
    changed = 0;
    for (int a = 0; a < t->axes->n; ++a) changed |= merge_axis(t, a);
  }
}

/* The order verdicts are tried in: rejections, then plans, then runs (what
 * no rule stops), each in the order the expansion met them. */
static int verdict_group(const table *t, int v) {
  const char *text = t->verdicts[v];
  return strncmp(text, "rejected", 8) == 0 ? 0 : strncmp(text, "planned", 7) == 0 ? 1 : 2;
}

/* 1 when the box holds the point (a single value on every axis). */
static int box_holds(const table_axes *a, const cube *box, const cube *point) {
  for (int i = 0; i < a->n; ++i)
    if (!(box->mask[i] & point->mask[i])) return 0;
  return 1;
}

/* The smallest box holding every live point of verdict v; 1 if it holds
 * no live point of another verdict. */
static int verdict_box(const table *t, const cube *points, const char *alive, int n, int v,
                       cube *box) {
  memset(box, 0, sizeof *box);
  box->verdict = v;
  for (int p = 0; p < n; ++p)
    if (alive[p] && points[p].verdict == v)
      for (int i = 0; i < t->axes->n; ++i) box->mask[i] |= points[p].mask[i];
  for (int p = 0; p < n; ++p)
    if (alive[p] && points[p].verdict != v && box_holds(t->axes, box, &points[p])) return 0;
  return 1;
}

/* The live points of verdict v as exact cubes (merged), appended to rows. */
static int exact_rows(const table *t, const cube *points, char *alive, int n, int v, cube *rows,
                      int n_rows) {
  table part = *t;
  part.cubes = rows + n_rows;
  part.n_cubes = 0;
  for (int p = 0; p < n; ++p)
    if (alive[p] && points[p].verdict == v) {
      part.cubes[part.n_cubes++] = points[p];
      alive[p] = 0;
    }
  merge_all(&part);
  return n_rows + part.n_cubes;
}

/* Replaces the points by rows read top-down, first match wins: each verdict,
 * in verdict_group order, as one box when that box holds no configuration
 * left to a later row, else as its exact cubes. Every configuration then gets
 * from the first row holding it the verdict the rules gave it. */
static tp_rc order_rows(table *t) {
  const int n = t->n_cubes;
  if (n < 1) return TP_OK;
  cube *points = malloc((size_t)n * sizeof *points);
  char *alive = malloc((size_t)n);
  if (!points || !alive) {
    free(points);
    free(alive);
    return TP_FAIL(TP_EOOM, "no memory for the composition table");
  }
  memcpy(points, t->cubes, (size_t)n * sizeof *points);
  memset(alive, 1, (size_t)n);
  int n_rows = 0, left = n;
  while (left > 0) {
    int chosen = -1, fallback = -1;
    for (int g = 0; g < 3 && chosen < 0; ++g)
      for (int v = 0; v < t->n_verdicts && chosen < 0; ++v) {
        int present = 0;
        for (int p = 0; p < n && !present; ++p) present = alive[p] && points[p].verdict == v;
        if (!present || verdict_group(t, v) != g) continue;
        if (fallback < 0) fallback = v;
        cube box;
        if (!verdict_box(t, points, alive, n, v, &box)) continue;
        chosen = v;
        t->cubes[n_rows++] = box;
        for (int p = 0; p < n; ++p)
          if (points[p].verdict == v) alive[p] = 0;
      }
    if (chosen < 0) n_rows = exact_rows(t, points, alive, n, fallback, t->cubes, n_rows);
    left = 0;
    for (int p = 0; p < n; ++p) left += alive[p];
  }
  t->n_cubes = n_rows;
  free(points);
  free(alive);
  return TP_OK;
}

static void print_set(const table_axes *a, int axis, unsigned mask, FILE *out) {
  if (mask == (1u << a->n_values[axis]) - 1u) {
    fputs(" * |", out);
    return;
  }
  const char *sep = " ";
  for (int v = 0; v < a->n_values[axis]; ++v)
    if (mask & (1u << v)) {
      fprintf(out, "%s%s", sep, a->values[axis][v]);
      sep = ", ";
    }
  fputs(" |", out);
}

/* The verdict in markdown: '|' escaped. */
static void print_verdict(const char *text, FILE *out) {
  fputc(' ', out);
  for (const char *p = text; *p; ++p) {
    if (*p == '|') fputc('\\', out);
    fputc(*p, out);
  }
  fputs(" |", out);
}

static void print_table(table *t, FILE *out) {
  const table_axes *a = t->axes;
  fputs("| verdict |", out);
  for (int i = 0; i < a->n; ++i) fprintf(out, " %s |", a->name[i]);
  fputs("\n|---|", out);
  for (int i = 0; i < a->n; ++i) fputs("---|", out);
  fputc('\n', out);
  for (int r = 0; r < t->n_cubes; ++r) {
    fputc('|', out);
    print_verdict(t->verdicts[t->cubes[r].verdict], out);
    for (int i = 0; i < a->n; ++i) print_set(a, i, t->cubes[r].mask[i], out);
    fputc('\n', out);
  }
}

static void table_close(table *t) {
  free(t->verdicts);
  free(t->cubes);
  memset(t, 0, sizeof *t);
}

static tp_rc table_open(table *t, const table_axes *axes, int cap) {
  memset(t, 0, sizeof *t);
  t->axes = axes;
  t->cap = cap;
  t->verdicts = calloc(MAX_VERDICTS, sizeof *t->verdicts);
  t->cubes = calloc((size_t)cap, sizeof *t->cubes);
  if (!t->verdicts || !t->cubes) {
    table_close(t);
    return TP_FAIL(TP_EOOM, "no memory for the composition table");
  }
  return TP_OK;
}

static const char *role_name(tp_backend backend) {
  switch (backend) {
  case TP_BACKEND_STOCK: return "stock";
  case TP_BACKEND_DIST: return "dist_gemm";
  case TP_BACKEND_GEMM_ONLY: return "gemm alone";
  case TP_BACKEND_COMM_ONLY: return "comm alone";
  }
  return "?";
}

#define WINDOW_AT_PREPARE                                                                          \
  "run if NCCL's runtime has symmetric memory on the communicator (asked at prepare time; NCCL "   \
  "up to 2.28.3: not at TP 1)"

/* What only the GPU side decides about a configuration no rule rejects. */
typedef enum { DECIDED_HERE = 0, DECIDED_BY_NCCL } decided;

/* The verdict text of a configuration. */
static void verdict_of(int rejected, int planned, const char *reason, decided later, char *buf,
                       size_t cap) {
  if (planned) snprintf(buf, cap, "planned: %s", reason);
  else if (rejected) snprintf(buf, cap, "rejected: %s", reason);
  else snprintf(buf, cap, "%s", later == DECIDED_BY_NCCL ? WINDOW_AT_PREPARE : "run");
}

/* dist_gemm's schedule, stock's (and the collective alone's) nccl-window, else "-". */
static const char *schedule_cell(const char *schedule) { return schedule ? schedule : "-"; }

/* Who decides a configuration no rule rejects: NCCL for the window variant, else the rules. */
static decided decider_of(tp_schedule s) {
  return s == TP_SCHED_NCCL_WINDOW ? DECIDED_BY_NCCL : DECIDED_HERE;
}

#define MXFP8_ON_GPU                                                                               \
  "run on sm_100 only: the plan asks cuBLASLt for the MX scales, rejected elsewhere"

/* A configuration the rules let through whose dtype is mxfp8 runs only where
 * cuBLASLt takes its scales (the worker's plan asks). */
static void mxfp8_verdict(int rejected, const char *dtype, char *verdict, size_t cap) {
  if (!rejected && strcmp(dtype, "mxfp8") == 0) snprintf(verdict, cap, "%s", MXFP8_ON_GPU);
}

/* ---- run's layers ------------------------------------------------------------------------- */

static const table_axes run_axes = {
    13,
    {"layer", "backend", "schedule", "tp", "dp", "dtype", "comm_dtype", "sp", "pass", "graph",
     "save_gathered", "ac", "fsdp_traffic"},
    {{"attention", "ffn", "block"},
     {"stock", "dist_gemm", "gemm alone", "comm alone"},
     SCHEDULE_VALUES,
     {"1", "2", "4"},
     {"1", "2"},
     DTYPE_VALUES,
     {"-", "bf16", "fp8"},
     {"off", "on"},
     {"fwd", "fwd+bwd"},
     {"off", "on", "mixed"},
     {"off", "on"},
     {"none", "selective", "full"},
     {"off", "on"}},
    {3, 4, N_SCHEDULE_VALUES, 3, 2, N_DTYPE_VALUES, 3, 2, 2, 3, 2, 3, 2},
};

static const char *const run_assignments[][2] = {
    {"model", "8b"},
    {"layer", "attention,ffn,block"},
    {"backend", "stock,dist_gemm"},
    {"chunks", "0"},
    {"schedule", TP_VOCAB_COMMAS(TP_SCHEDULE_LIST)},
    {"tp", "1,2,4"},
    {"dp", "1,2"},
    {"batch", "2"},
    {"seqlen", "4096,8192"},
    {"dtype", TP_VOCAB_COMMAS(TP_DTYPE_LIST)},
    {"sp", "off,on"},
    {"pass", "fwd,fwd+bwd"},
    {"graph", "off,on,mixed"},
    {"save_gathered", "off,on"},
    {"ac", "none,selective,full"},
    {"comm_dtype", "bf16,fp8"},
};

/* fsdp_traffic's values, one matrix each: the cross product of every axis
 * at once is more configurations than an expansion takes. */
static const char *const run_fsdp_traffic[] = {"fsdp_traffic=off", "fsdp_traffic=on"};

static tp_rc run_points(table *t, const tp_layer_matrix *m) {
  for (int i = 0; i < m->n_configs; ++i) {
    const tp_layer_config *cfg = &m->configs[i];
    const tp_layer_case *c = &m->cases[cfg->case_index];
    char tp[16], dp[16], verdict[VERDICT_TEXT];
    snprintf(tp, sizeof tp, "%d", c->tp);
    snprintf(dp, sizeof dp, "%d", c->dp);
    const char *values[] = {cfg->axes.op_or_layer,
                            role_name(cfg->backend),
                            schedule_cell(cfg->axes.schedule),
                            tp,
                            dp,
                            cfg->axes.dtype,
                            cfg->axes.comm_dtype ? cfg->axes.comm_dtype : "-",
                            c->sp ? "on" : "off",
                            cfg->axes.pass,
                            tp_layer_graph_name(c),
                            c->save_gathered ? "on" : "off",
                            tp_ac_name(c->ac),
                            c->fsdp_traffic ? "on" : "off"};
    verdict_of(cfg->rejected, cfg->planned, cfg->reason, decider_of(cfg->schedule), verdict,
               sizeof verdict);
    mxfp8_verdict(cfg->rejected, cfg->axes.dtype, verdict, sizeof verdict);
    TP_TRY(add_point(t, values, verdict));
  }
  return TP_OK;
}

static tp_rc run_matrix(int gpus, const char *fsdp_traffic, tp_layer_matrix *m) {
  tp_layer_spec *spec = malloc(sizeof *spec);
  if (!spec) return TP_FAIL(TP_EOOM, "no memory for the run matrix");
  tp_rc rc = tp_layer_spec_preset("quick", spec);
  for (int i = 0; rc == TP_OK && i < COUNT_OF(run_assignments); ++i)
    rc = tp_layer_spec_set_axis(spec, run_assignments[i][0], run_assignments[i][1]);
  if (rc == TP_OK) rc = tp_layer_spec_assign(spec, fsdp_traffic);
  if (rc == TP_OK) rc = tp_layer_expand(spec, gpus, m);
  free(spec);
  return rc;
}

/* The points of every fsdp_traffic value's matrix, planned for the host. */
static tp_rc run_all_points(int gpus, table *t) {
  tp_rc rc = TP_OK;
  for (int v = 0; rc == TP_OK && v < COUNT_OF(run_fsdp_traffic); ++v) {
    tp_layer_matrix m;
    TP_TRY(run_matrix(gpus, run_fsdp_traffic[v], &m));
    tp_layer_plan_host(&m, gpus);
    if (v == 0) rc = table_open(t, &run_axes, m.n_configs * COUNT_OF(run_fsdp_traffic));
    if (rc == TP_OK) rc = run_points(t, &m);
    tp_layer_matrix_free(&m);
  }
  return rc;
}

static tp_rc run_table(int gpus, FILE *out) {
  table t;
  memset(&t, 0, sizeof t);
  tp_rc rc = run_all_points(gpus, &t);
  if (rc == TP_OK) rc = order_rows(&t);
  if (rc == TP_OK) {
    fprintf(
        out,
        "`run` (layers of llama3-8b, batch 2, seqlen 4096 and 8192 (graph=mixed: one mix of "
        "both), a host of %d GPUs; \"*\": every "
        "value; rows read top-down, the first row holding a configuration gives its verdict):\n\n",
        gpus);
    print_table(&t, out);
  }
  table_close(&t);
  return rc;
}

/* ---- ops' projections --------------------------------------------------------------------- */

static const table_axes ops_axes = {
    8,
    {"proj", "backend", "schedule", "tp", "dtype", "comm_dtype", "pass", "save_gathered"},
    {{"qkv", "wo", "w13", "w2"},
     {"stock", "dist_gemm", "gemm alone", "comm alone"},
     SCHEDULE_VALUES,
     {"1", "2", "4"},
     DTYPE_VALUES,
     {"-", "bf16", "fp8"},
     {"fwd", "bwd", "fwd+bwd"},
     {"off", "on"}},
    {4, 4, N_SCHEDULE_VALUES, 3, N_DTYPE_VALUES, 3, 3, 2},
};

static const char *const ops_assignments[][2] = {
    {"model", "8b"},
    {"proj", "qkv,wo,w13,w2"},
    {"tokens", "4096"},
    {"dtype", TP_VOCAB_COMMAS(TP_DTYPE_LIST)},
    {"tp", "1,2,4"},
    {"schedule", TP_VOCAB_COMMAS(TP_SCHEDULE_LIST)},
    {"chunks", "0"},
    {"pass", "fwd,bwd,fwd+bwd"},
    {"save_gathered", "off,on"},
    {"comm_dtype", "bf16,fp8"},
};

static tp_rc ops_points(table *t, const tp_ops_matrix *m) {
  for (int i = 0; i < m->n_configs; ++i) {
    const tp_ops_config *cfg = &m->configs[i];
    char tp[16], verdict[VERDICT_TEXT];
    snprintf(tp, sizeof tp, "%d", cfg->axes.tp);
    const char *values[] = {cfg->axes.proj,
                            role_name(cfg->backend),
                            schedule_cell(cfg->axes.schedule),
                            tp,
                            cfg->axes.dtype,
                            cfg->axes.comm_dtype ? cfg->axes.comm_dtype : "-",
                            cfg->axes.pass,
                            cfg->axes.save_gathered ? "on" : "off"};
    verdict_of(cfg->rejected, cfg->planned, cfg->reason, decider_of(cfg->schedule), verdict,
               sizeof verdict);
    mxfp8_verdict(cfg->rejected, cfg->axes.dtype, verdict, sizeof verdict);
    TP_TRY(add_point(t, values, verdict));
  }
  return TP_OK;
}

static tp_rc ops_matrix(tp_ops_matrix *m) {
  tp_ops_spec *spec = malloc(sizeof *spec);
  if (!spec) return TP_FAIL(TP_EOOM, "no memory for the ops matrix");
  tp_ops_spec_defaults(spec);
  tp_rc rc = TP_OK;
  for (int i = 0; rc == TP_OK && i < COUNT_OF(ops_assignments); ++i)
    rc = tp_ops_spec_set_axis(spec, ops_assignments[i][0], ops_assignments[i][1]);
  if (rc == TP_OK) rc = tp_ops_expand(spec, m);
  free(spec);
  return rc;
}

static tp_rc ops_table(int gpus, FILE *out) {
  tp_ops_matrix m;
  TP_TRY(ops_matrix(&m));
  tp_ops_plan_host(&m, gpus);
  table t;
  tp_rc rc = table_open(&t, &ops_axes, m.n_configs);
  if (rc == TP_OK) rc = ops_points(&t, &m);
  tp_ops_matrix_free(&m);
  if (rc == TP_OK) rc = order_rows(&t);
  if (rc == TP_OK) {
    fprintf(
        out,
        "`ops` (projections of llama3-8b, 4096 tokens, a host of %d GPUs; \"*\": every "
        "value; rows read top-down, the first row holding a configuration gives its verdict):\n\n",
        gpus);
    print_table(&t, out);
  }
  table_close(&t);
  return rc;
}

tp_rc tp_composition_table_print(int gpus, FILE *out) {
  if (gpus < 1) return TP_FAIL(TP_EUSAGE, "a host of %d GPUs", gpus);
  TP_TRY(run_table(gpus, out));
  fputc('\n', out);
  return ops_table(gpus, out);
}
