/*
 * tp_system_report.c — a run's system record as markdown header lines
 * (contract in tp_system_report.h).
 */
#include "report/tp_system_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/tp_text.h"
#include "report/tp_report_util.h"

typedef struct run_system {
  char *launcher, *job, *array_job, *array_task, *topology, *topology_source, *environment;
} run_system;

static char *dup_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? strdup((const char *)t) : NULL;
}

static void free_system(run_system *s) {
  free(s->launcher);
  free(s->job);
  free(s->array_job);
  free(s->array_task);
  free(s->topology);
  free(s->topology_source);
  free(s->environment);
}

static tp_rc read_fail(sqlite3 *db, const char *what) {
  return TP_FAIL(TP_ESQLITE, "%s: %s: %s", "system report", what, sqlite3_errmsg(db));
}

/* The run's 004 columns; *found = 0 when they are all NULL. */
static tp_rc load_system(sqlite3 *db, int64_t run_id, run_system *s, int *found) {
  static const char sql[] =
      "SELECT launcher, slurm_job_id, slurm_array_job_id, slurm_array_task_id, topology, "
      "topology_source, environment FROM runs WHERE id = ?";
  sqlite3_stmt *st = NULL;
  memset(s, 0, sizeof *s);
  *found = 0;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return read_fail(db, "preparing the run's system query");
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, run_id);
  if (step == SQLITE_OK) step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    char **cols[] = {&s->launcher,   &s->job,      &s->array_job,
                     &s->array_task, &s->topology, &s->topology_source,
                     &s->environment};
    for (int i = 0; i < 7; i++) {
      *cols[i] = dup_text(st, i);
      if (*cols[i]) *found = 1;
      else if (sqlite3_column_type(st, i) != SQLITE_NULL) rc = TP_FAIL(TP_EOOM, "out of memory");
    }
  } else if (step != SQLITE_DONE) {
    rc = read_fail(db, "reading the run's system");
  }
  sqlite3_finalize(st);
  return rc;
}

static void md_launcher(FILE *out, const run_system *s) {
  fputs("- **launcher** ", out);
  tp_md_text(out, s->launcher ? s->launcher : "?");
  if (s->job) {
    fputs(", Slurm job ", out);
    tp_md_text(out, s->job);
  }
  if (s->array_job || s->array_task) {
    fputs(" (array ", out);
    tp_md_text(out, s->array_job ? s->array_job : "?");
    fputs(", task ", out);
    tp_md_text(out, s->array_task ? s->array_task : "?");
    fputc(')', out);
  }
  fputc('\n', out);
}

/* One nested item per rank. */
static tp_rc md_ranks(FILE *out, sqlite3 *db, int64_t run_id) {
  static const char sql[] = "SELECT rank, local_rank, host, gpu_uuid, pci_bus_id, sm_clock_mhz, "
                            "max_sm_clock_mhz, power_limit_w FROM run_ranks WHERE run_id = ? "
                            "ORDER BY rank";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return read_fail(db, "preparing the ranks query");
  int step = sqlite3_bind_int64(st, 1, run_id);
  int any = 0;
  while (step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (!any++) fputs("- **ranks**\n", out);
    fprintf(out, "  - rank %lld", (long long)sqlite3_column_int64(st, 0));
    if (sqlite3_column_type(st, 1) != SQLITE_NULL)
      fprintf(out, " (local %lld)", (long long)sqlite3_column_int64(st, 1));
    fputs(": ", out);
    tp_md_text(out, sqlite3_column_type(st, 2) != SQLITE_NULL
                        ? (const char *)sqlite3_column_text(st, 2)
                        : "?");
    fputs(", ", out);
    tp_md_text(out, sqlite3_column_type(st, 3) != SQLITE_NULL
                        ? (const char *)sqlite3_column_text(st, 3)
                        : "GPU ?");
    fputs(", PCI ", out);
    tp_md_text(out, sqlite3_column_type(st, 4) != SQLITE_NULL
                        ? (const char *)sqlite3_column_text(st, 4)
                        : "?");
    if (sqlite3_column_type(st, 5) != SQLITE_NULL || sqlite3_column_type(st, 6) != SQLITE_NULL) {
      fputs(", SM clock ", out);
      if (sqlite3_column_type(st, 5) != SQLITE_NULL)
        fprintf(out, "%lld", (long long)sqlite3_column_int64(st, 5));
      else fputs("?", out);
      if (sqlite3_column_type(st, 6) != SQLITE_NULL)
        fprintf(out, " of %lld", (long long)sqlite3_column_int64(st, 6));
      fputs(" MHz", out);
    }
    if (sqlite3_column_type(st, 7) != SQLITE_NULL)
      fprintf(out, ", power limit %.0f W", sqlite3_column_double(st, 7));
    fputc('\n', out);
    step = SQLITE_OK;
  }
  tp_rc rc = step == SQLITE_DONE ? TP_OK : read_fail(db, "reading the ranks");
  sqlite3_finalize(st);
  return rc;
}

/* NAME=value lines as code spans on one line. */
static void md_environment(FILE *out, const char *env) {
  fputs("- **environment** ", out);
  if (!env || !env[0]) {
    fputs("no NCCL\\_\\*, CUDA\\_\\* or TORCH\\_\\* variable set\n", out);
    return;
  }
  const char *p = env;
  int first = 1;
  while (*p) {
    size_t n = strcspn(p, "\n");
    char *one = strndup(p, n);
    if (one) {
      if (!first) fputs(", ", out);
      tp_md_code(out, one);
      first = 0;
      free(one);
    }
    p += n;
    if (*p == '\n') p++;
  }
  fputc('\n', out);
}

/* The bytes of the terminal escape sequence at s (0 when none starts there):
 * ESC [ or the C1 CSI (0xC2 0x9B) with its parameters and final byte, ESC ]
 * up to BEL or ESC \\, or ESC and one more byte. nvidia-smi underlines the
 * header of `topo -m` this way when it writes to a terminal, and the record
 * keeps what it wrote: shown raw, a reader sees "[4m". */
static size_t escape_sequence(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i;
  if ((p[0] == 0xC2 && p[1] == 0x9B) || (p[0] == 0x1b && p[1] == '[')) i = 2;
  else if (p[0] == 0x1b && p[1] == ']') {
    for (i = 2; p[i] && p[i] != 0x07 && !(p[i] == 0x1b && p[i + 1] == '\\'); i++) continue;
    return i + (p[i] == 0x07 ? 1 : p[i] ? 2 : 0);
  } else return p[0] == 0x1b ? (p[1] ? 2 : 1) : 0;
  while (p[i] >= 0x20 && p[i] <= 0x3f) i++; /* parameters and intermediates */
  return p[i] >= 0x40 && p[i] <= 0x7e ? i + 1 : i;
}

/* The topology without its escape sequences (malloc'd; NULL out of memory). */
static char *without_escapes(const char *text) {
  char *plain = malloc(strlen(text) + 1), *to = plain;
  for (const char *c = text; plain && *c;) {
    size_t skip = escape_sequence(c);
    if (skip) c += skip;
    else *to++ = *c++;
  }
  if (plain) *to = '\0';
  return plain;
}

/* One line of the fenced block: a line that starts with tildes gets a space
 * so it cannot close the fence; the other control characters and ill-formed
 * bytes are U+FFFD (tabs kept: the table is tab-aligned). */
static void fenced_line(FILE *out, const char *line, size_t len) {
  if (len && line[0] == '~') fputc(' ', out);
  const unsigned char *s = (const unsigned char *)line;
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t n; (n = tp_text_char(s, len, &cls)) > 0; s += n, len -= n) {
    if (cls == TP_CHAR_PLAIN || cls == TP_CHAR_TAB) fwrite(s, 1, n, out);
    else fputs("\xEF\xBF\xBD", out);
  }
}

/* The topology in a fenced block inside the list item, tildes as the fence.
 * Text holding a '<' (nvidia-smi never writes one) is written as escaped
 * lines instead, as a code span would be (report/tp_report_util.h). */
static void md_topology(FILE *out, const char *topology, const char *source) {
  if (!topology || !topology[0]) return;
  fputs("- **topology**", out);
  if (source) {
    fputs(" (", out);
    tp_md_text(out, source);
    fputc(')', out);
  }
  char *plain = without_escapes(topology);
  const char *text = plain ? plain : "(out of memory)";
  int fenced = strchr(text, '<') == NULL;
  fputs(fenced ? "\n\n  ~~~~text\n" : "\n\n", out);
  for (const char *line = text; *line;) {
    size_t len = strcspn(line, "\n");
    fputs("  ", out);
    if (fenced) fenced_line(out, line, len);
    else {
      char *one = strndup(line, len);
      tp_md_text(out, one ? one : "");
      fputs("  ", out); /* a hard line break */
      free(one);
    }
    fputc('\n', out);
    line += len + (line[len] == '\n');
  }
  if (fenced) fputs("  ~~~~\n", out);
  free(plain);
}

tp_rc tp_system_report_markdown(tp_store *store, int64_t run_id, char **out) {
  *out = NULL;
  sqlite3 *db = tp_store_db(store);
  run_system s;
  int found = 0;
  tp_rc rc = load_system(db, run_id, &s, &found);
  if (rc != TP_OK || !found) {
    free_system(&s);
    return rc;
  }
  size_t len = 0;
  char *text = NULL;
  FILE *mem = open_memstream(&text, &len);
  if (!mem) {
    free_system(&s);
    return TP_FAIL(TP_EOOM, "system report: out of memory");
  }
  md_launcher(mem, &s);
  rc = md_ranks(mem, db, run_id);
  md_environment(mem, s.environment);
  md_topology(mem, s.topology, s.topology_source);
  if (fclose(mem) != 0 && rc == TP_OK) rc = TP_FAIL(TP_EOOM, "system report: out of memory");
  free_system(&s);
  if (rc != TP_OK) {
    free(text);
    return rc;
  }
  *out = text;
  return TP_OK;
}
