/*
 * tp_project_columns.c — the columns of `tpbench project`'s predictions (tp_project.h): one
 * registry names every column once (its CSV header, JSON key and --columns name, its markdown
 * header with the unit, how to read it), and the markdown table, the CSV and the JSON's flat
 * rows all render through it, so --columns works alike in each, as `report`'s does
 * (tp_report_columns.c; the list is read by the same parser, tp_columns_parse).
 *
 * The registry's order is the CSV's: its 47 columns are those of earlier versions, in their
 * order, with three markdown-only ones (shard, volume_mib, chunk_mib) between them. Markdown's
 * full table (--columns all) is the columns flagged PCOL_MD, exactly the 32 columns it always
 * had; its default is the compact list below the registry, the predictions without their
 * inputs, because 32 columns do not fit a terminal.
 */
#include <math.h>
#include <string.h>

#include "report/tp_project_internal.h"
#include "report/tp_report_util.h"
#include "report/tp_table_cell.h"

static const double MIB = 1048576.0;

enum {
  PCOL_MD = 1,     /* in markdown's full table (--columns all) */
  PCOL_CSV = 2,    /* in the CSV by default */
  PCOL_NUMBER = 4, /* right-aligned in markdown */
};

/* What a column holds on the CSV's error summary lines (every other column is empty there). */
typedef enum { SUM_NONE, SUM_RESULT, SUM_TP, SUM_NOTE, SUM_STOCK_ERR, SUM_DIST_ERR } summary_role;

/* Reads a column's value of a row; markdown is set for the markdown table, which hides a
 * shard's GEMM figures when no shard was formed, as it always did. */
typedef void (*pcell_getter)(const tp_projected *p, int markdown, tp_cell *out);

typedef struct {
  const char *name;      /* CSV header, JSON key, --columns name */
  const char *md_header; /* markdown header, with the unit */
  int flags;
  int md_decimals, csv_decimals;
  summary_role summary;
  pcell_getter get;
} pcolumn;

/* ---- getters ---------------------------------------------------------------- */

static int ran(const tp_projected *p) { return p->row.pipe.chunks > 0; }

/* A figure of the fused pipeline, blank where it did not run (auto's stock path). */
static double if_ran(const tp_projected *p, double value) { return ran(p) ? value : NAN; }

/* A figure of the shard's GEMM; markdown blanks it where no shard was formed. */
static double if_shard(const tp_projected *p, int markdown, double value) {
  return !markdown || p->row.m ? value : NAN;
}

static void get_result(const tp_projected *p, int md, tp_cell *c) {
  (void)p, (void)md;
  tp_cell_set_text(c, "predicted");
}

static void get_model(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, p->row.shape.model);
}

static void get_proj(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, p->row.shape.proj);
}

static void get_op(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, tp_op_name(p->row.shape.op));
}

static void get_tokens(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.shape.tokens);
}

static void get_dtype(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, tp_dtype_name(p->row.shape.dtype));
}

static void get_tp(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.tp);
}

static void get_m(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.m);
}

static void get_n(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.n);
}

static void get_k(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.k);
}

/* "4096×3072×4096": the rank's shard; none where the degree does not divide the shape. */
static void get_shard(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  const tp_project_row *r = &p->row;
  if (!r->m) {
    c->type = TP_CELL_NONE;
    return;
  }
  snprintf(c->buf, sizeof c->buf, "%lld×%lld×%lld", (long long)r->m, (long long)r->n,
           (long long)r->k);
  tp_cell_set_own_text(c);
}

static void get_gemm_gflop(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.gemm.flops / 1e9);
}

static void get_gemm_us(const tp_projected *p, int md, tp_cell *c) {
  tp_cell_set_num(c, if_shard(p, md, p->row.gemm.us));
}

static void get_gemm_tflops(const tp_projected *p, int md, tp_cell *c) {
  tp_cell_set_num(c, if_shard(p, md, p->row.gemm.tflops));
}

static void get_gemm_exact(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.gemm.exact);
}

static void get_gemm_source(const tp_projected *p, int md, tp_cell *c) {
  tp_cell_set_text(c, !md || p->row.m ? p->row.gemm.source : "");
}

static void get_gemm_lo(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.gemm.lo_id);
}

static void get_gemm_hi(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.gemm.hi_id);
}

static void get_volume_bytes(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.coll.bytes);
}

static void get_volume_mib(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.coll.bytes / MIB);
}

static void get_nccl_gbps(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.coll.gbps);
}

static void get_nccl_latency(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.coll.latency_us);
}

static void get_collective_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.coll.us);
}

static void get_collective_line(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, p->row.coll.source);
}

static void get_pace_factor(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.pace.factor);
}

static void get_pace_gap(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.pace.gap_pct);
}

static void get_pace_source(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, p->row.pace.source);
}

static void get_chunks(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.pipe.chunks);
}

static void get_chunk_rows(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.pipe.chunk_rows);
}

static void get_chunk_gemm_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.chunk_gemm.us));
}

static void get_chunk_gemm_source(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, ran(p) ? p->row.pipe.chunk_gemm.source : "");
}

static void get_chunk_bytes(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.push.bytes));
}

static void get_chunk_mib(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.push.bytes / MIB));
}

static void get_push_gbps(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.push.gbps));
}

static void get_push_latency(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.push.latency_us));
}

static void get_push_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.push.us));
}

static void get_push_line(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, ran(p) ? p->row.pipe.push.source : "");
}

static void get_gemms(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.pipe.gemms);
}

static void get_pushes(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->row.pipe.pushes);
}

static void get_local_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.local_us));
}

static void get_stall_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.stall_us));
}

static void get_drain_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, if_ran(p, p->row.pipe.drain_us));
}

static void get_stock_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.stock_us);
}

static void get_dist_us(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.dist_us);
}

static void get_speedup(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->row.speedup);
}

static void get_note(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_text(c, p->row.note);
}

static void get_stock_measured(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->stock_id ? p->stock_measured_us : NAN);
}

static void get_stock_config(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->stock_id);
}

static void get_stock_error(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->stock_err_pct);
}

static void get_dist_measured(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->dist_id ? p->dist_measured_us : NAN);
}

static void get_dist_config(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->dist_id);
}

static void get_dist_error(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_num(c, p->dist_err_pct);
}

static void get_dist_stock_path(const tp_projected *p, int md, tp_cell *c) {
  (void)md;
  tp_cell_set_int(c, p->dist_stock_path);
}

/* ---- the registry --------------------------------------------------------------------- */

#define MD_CSV (PCOL_MD | PCOL_CSV)
#define NUM(name, header, flags, md_dec, csv_dec, get)                                             \
  { name, header, (flags) | PCOL_NUMBER, md_dec, csv_dec, SUM_NONE, get }
#define TEXT(name, header, flags, get)                                                             \
  { name, header, flags, 0, 0, SUM_NONE, get }

static const pcolumn registry[] = {
    {"result", "result", MD_CSV, 0, 0, SUM_RESULT, get_result},
    TEXT("model", "model", MD_CSV, get_model),
    TEXT("proj", "proj", MD_CSV, get_proj),
    TEXT("op", "op", MD_CSV, get_op),
    NUM("tokens", "tokens", MD_CSV, 0, 0, get_tokens),
    TEXT("dtype", "dtype", MD_CSV, get_dtype),
    {"tp", "tp", MD_CSV | PCOL_NUMBER, 0, 0, SUM_TP, get_tp},
    NUM("m", "M", PCOL_CSV, 0, 0, get_m),
    NUM("n", "N", PCOL_CSV, 0, 0, get_n),
    NUM("k", "K", PCOL_CSV, 0, 0, get_k),
    TEXT("shard", "shard M×N×K", PCOL_MD, get_shard),
    NUM("gemm_gflop", "GEMM GFLOP", PCOL_CSV, 1, 3, get_gemm_gflop),
    NUM("gemm_us", "GEMM (µs)", MD_CSV, 1, 3, get_gemm_us),
    NUM("gemm_tflops", "GEMM TFLOP/s", MD_CSV, 1, 3, get_gemm_tflops),
    NUM("gemm_exact", "GEMM row of the shard", PCOL_CSV, 0, 0, get_gemm_exact),
    TEXT("gemm_source", "GEMM source", MD_CSV, get_gemm_source),
    NUM("gemm_lo_config", "GEMM config below", PCOL_CSV, 0, 0, get_gemm_lo),
    NUM("gemm_hi_config", "GEMM config above", PCOL_CSV, 0, 0, get_gemm_hi),
    NUM("volume_bytes", "V (bytes)", PCOL_CSV, 0, 0, get_volume_bytes),
    NUM("volume_mib", "V (MiB)", PCOL_MD, 2, 3, get_volume_mib),
    NUM("nccl_gbps", "NCCL GB/s", MD_CSV, 1, 3, get_nccl_gbps),
    NUM("nccl_latency_us", "NCCL latency (µs)", MD_CSV, 1, 3, get_nccl_latency),
    NUM("collective_us", "collective (µs)", MD_CSV, 1, 3, get_collective_us),
    TEXT("collective_line", "collective line", MD_CSV, get_collective_line),
    NUM("pace_factor", "stock GEMM pace p", MD_CSV, 3, 4, get_pace_factor),
    NUM("pace_gap_pct", "gap c/G (%)", PCOL_CSV, 1, 1, get_pace_gap),
    TEXT("pace_source", "pace source", MD_CSV, get_pace_source),
    NUM("chunks", "chunks C", MD_CSV, 0, 0, get_chunks),
    NUM("chunk_rows", "chunk rows R", MD_CSV, 0, 0, get_chunk_rows),
    NUM("chunk_gemm_us", "chunk GEMM (µs)", MD_CSV, 1, 3, get_chunk_gemm_us),
    TEXT("chunk_gemm_source", "chunk GEMM source", MD_CSV, get_chunk_gemm_source),
    NUM("chunk_bytes", "push (bytes)", PCOL_CSV, 0, 0, get_chunk_bytes),
    NUM("chunk_mib", "push (MiB)", PCOL_MD, 2, 3, get_chunk_mib),
    NUM("push_gbps", "push GB/s", PCOL_CSV, 1, 3, get_push_gbps),
    NUM("push_latency_us", "push latency (µs)", PCOL_CSV, 1, 3, get_push_latency),
    NUM("push_us", "push (µs)", MD_CSV, 1, 3, get_push_us),
    TEXT("push_line", "push line", MD_CSV, get_push_line),
    NUM("gemms", "GEMMs", MD_CSV, 0, 0, get_gemms),
    NUM("pushes", "pushes", MD_CSV, 0, 0, get_pushes),
    NUM("local_us", "local traffic per chunk (µs)", MD_CSV, 1, 3, get_local_us),
    NUM("stall_us", "stall (µs)", MD_CSV, 1, 3, get_stall_us),
    NUM("drain_us", "drain (µs)", MD_CSV, 1, 3, get_drain_us),
    NUM("stock_us", "stock (µs)", MD_CSV, 1, 3, get_stock_us),
    NUM("dist_us", "dist_gemm (µs)", MD_CSV, 1, 3, get_dist_us),
    NUM("speedup", "speedup", MD_CSV, 3, 4, get_speedup),
    {"note", "note", MD_CSV, 0, 0, SUM_NOTE, get_note},
    NUM("stock_measured_us", "stock measured (µs)", PCOL_CSV, 1, 3, get_stock_measured),
    NUM("stock_config", "stock config", PCOL_CSV, 0, 0, get_stock_config),
    {"stock_error_pct", "stock error %", PCOL_CSV | PCOL_NUMBER, 1, 2, SUM_STOCK_ERR,
     get_stock_error},
    NUM("dist_measured_us", "dist_gemm measured (µs)", PCOL_CSV, 1, 3, get_dist_measured),
    NUM("dist_config", "dist_gemm config", PCOL_CSV, 0, 0, get_dist_config),
    {"dist_error_pct", "dist_gemm error %", PCOL_CSV | PCOL_NUMBER, 1, 2, SUM_DIST_ERR,
     get_dist_error},
    NUM("dist_stock_path", "dist_gemm took the stock path", PCOL_CSV, 0, 0, get_dist_stock_path),
};
enum { N_REGISTRY = sizeof registry / sizeof registry[0] };
_Static_assert((int)N_REGISTRY <= (int)TP_PROJECT_MAX_COLUMNS, "a column set holds every column");

/* Markdown's default: what was predicted, without the inputs (--columns all shows them). */
static const char *const compact[] = {"result", "model",    "proj",    "tokens",  "dtype",
                                      "tp",     "stock_us", "dist_us", "speedup", "note"};

/* ---- choosing ------------------------------------------------------------------------- */

static int find_column(const char *name) {
  for (int i = 0; i < N_REGISTRY; i++)
    if (!strcmp(registry[i].name, name)) return i;
  return -1;
}

/* Every column carrying flag, in the registry's order. */
static void pick_flagged(int flag, tp_project_columns *out) {
  for (int i = 0; i < N_REGISTRY; i++)
    if (registry[i].flags & flag) out->index[out->count++] = i;
}

static tp_rc pick_compact(tp_project_columns *out) {
  for (size_t i = 0; i < sizeof compact / sizeof compact[0]; i++) {
    int index = find_column(compact[i]);
    if (index < 0) return TP_FAIL(TP_EINTERNAL, "project: no column %s", compact[i]);
    out->index[out->count++] = index;
  }
  return TP_OK;
}

tp_rc tp_project_columns_pick(const char *spec, tp_report_format fmt, tp_project_columns *out) {
  memset(out, 0, sizeof *out);
  if (spec && strcmp(spec, "all") != 0) {
    const char *names[N_REGISTRY];
    for (int i = 0; i < N_REGISTRY; i++) names[i] = registry[i].name;
    return tp_columns_parse(spec, names, N_REGISTRY, out->index, &out->count);
  }
  /* the machine formats keep every field unless asked: a reader should never have to know a
   * column exists to get it */
  out->full = spec != NULL || fmt != TP_FMT_MARKDOWN;
  if (!out->full) return pick_compact(out);
  pick_flagged(fmt == TP_FMT_MARKDOWN ? PCOL_MD : PCOL_CSV, out);
  return TP_OK;
}

/* ---- rendering ------------------------------------------------------------------------ */

static void cell_of(const pcolumn *col, const tp_projected *p, int markdown, tp_cell *c) {
  tp_cell_clear(c);
  col->get(p, markdown, c);
}

void tp_project_md_rows(FILE *out, const tp_project_data *data, const tp_project_columns *cols) {
  for (int i = 0; i < cols->count; i++) tp_md_cell(out, registry[cols->index[i]].md_header);
  fputs("|\n", out);
  /* numbers align right so their decimals line up */
  for (int i = 0; i < cols->count; i++)
    fputs(registry[cols->index[i]].flags & PCOL_NUMBER ? "|---:" : "|---", out);
  fputs("|\n", out);
  tp_cell c;
  for (size_t r = 0; r < data->n_rows; r++) {
    for (int i = 0; i < cols->count; i++) {
      const pcolumn *col = &registry[cols->index[i]];
      cell_of(col, &data->rows[r], 1, &c);
      tp_cell_md(out, &c, col->md_decimals, "");
    }
    fputs("|\n", out);
  }
}

void tp_project_csv_header(FILE *out, const tp_project_columns *cols) {
  for (int i = 0; i < cols->count; i++) tp_csv_field(out, registry[cols->index[i]].name, i == 0);
  tp_csv_end_line(out);
}

/* A CSV field of column i (tp_cell_csv writes a line's only field, empty, as ""). */
static void csv_cell(FILE *out, const tp_cell *c, const tp_project_columns *cols, int i) {
  tp_cell_csv(out, c, registry[cols->index[i]].csv_decimals, i, cols->count);
}

void tp_project_csv_row(FILE *out, const tp_projected *p, const tp_project_columns *cols) {
  tp_cell c;
  for (int i = 0; i < cols->count; i++) {
    cell_of(&registry[cols->index[i]], p, 0, &c);
    csv_cell(out, &c, cols, i);
  }
  tp_csv_end_line(out);
}

/* Whether the chosen columns hold the one a summary line is labelled in. */
static int has_summary_label(const tp_project_columns *cols) {
  for (int i = 0; i < cols->count; i++)
    if (registry[cols->index[i]].summary == SUM_RESULT) return 1;
  return 0;
}

void tp_project_csv_summary(FILE *out, const tp_project_csv_summary_line *s,
                            const tp_project_columns *cols) {
  /* unlabelled, its figures would read as one more prediction's */
  if (!has_summary_label(cols)) return;
  tp_cell c;
  for (int i = 0; i < cols->count; i++) {
    const pcolumn *col = &registry[cols->index[i]];
    tp_cell_clear(&c);
    switch (col->summary) {
    case SUM_NONE: break;
    case SUM_RESULT: tp_cell_set_text(&c, s->result); break;
    case SUM_TP: tp_cell_set_int(&c, s->tp); break;
    case SUM_NOTE: tp_cell_set_text(&c, s->note); break;
    case SUM_STOCK_ERR: tp_cell_set_num(&c, s->stock_pct); break;
    case SUM_DIST_ERR: tp_cell_set_num(&c, s->dist_pct); break;
    }
    csv_cell(out, &c, cols, i);
  }
  tp_csv_end_line(out);
}

json_t *tp_project_json_flat_row(tp_json_builder *jb, const tp_projected *p,
                                 const tp_project_columns *cols) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_cell c;
  for (int i = 0; i < cols->count; i++) {
    const pcolumn *col = &registry[cols->index[i]];
    cell_of(col, p, 0, &c);
    tp_json_set(jb, o, col->name, tp_cell_json(&c));
  }
  return o;
}
