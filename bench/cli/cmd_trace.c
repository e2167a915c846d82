/*
 * cmd_trace.c — `tpbench trace`: one configuration's GPU timeline as Chrome
 * trace JSON, for Perfetto or chrome://tracing (report/tp_trace_export.h
 * writes it), or with --format kineto as one Kineto trace per rank in a
 * folder, for Holistic Trace Analysis and other Kineto readers
 * (report/tp_trace_kineto.h). Needs no GPU.
 *
 * Exit status (tp_exit_for): 2 when the database cannot be read as one, the
 * configuration does not exist (a wrong id or key is the user's mistake) or
 * --out names something that may not be replaced (a device, a FIFO, a
 * folder, the database) or a folder that is missing; 1 when it exists but
 * has no trace (saying why: its run ran without tracing, or the database
 * holds only some of the run's traces) or writing the file fails; 0
 * otherwise.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "report/tp_keys.h"
#include "report/tp_output.h"
#include "report/tp_trace_export.h"
#include "report/tp_trace_kineto.h"

typedef struct trace_args {
  const char *db;
  const char *key;
  const char *out;
  const char *format;
  long long config;
  long long run;
} trace_args;

static tp_rc parse_args(int argc, char **argv, trace_args *a, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"config", TP_OPT_INT64, &a->config, "ID", "configuration id", 0, INT64_MAX, NULL},
      {"key", TP_OPT_STRING, &a->key, "KEY",
       "configuration key or a unique prefix of its short key: its latest traced configuration", 0,
       0, NULL},
      {"run", TP_OPT_INT64, &a->run, "ID", "with --key: within this run; 0 = any", 0, INT64_MAX,
       NULL},
      {"out", TP_OPT_STRING, &a->out, "FILE|DIR",
       "where to write: chrome, a file (- = standard output); kineto, a folder of "
       "rank<N>.json",
       0, 0, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT",
       "chrome (one file, every rank) or kineto (one file per rank)", 0, 0, NULL},
  };
  const tp_command cmd = {
      .name = "trace",
      .usage = "tpbench trace (--config ID | --key KEY) [options]",
      .summary = "Writes the traced window of one configuration as Chrome trace JSON, which\n"
                 "Perfetto (ui.perfetto.dev) and chrome://tracing open: a process per rank, a\n"
                 "track per CUDA stream, NVTX ranges on their own track, events coloured by\n"
                 "category with bytes, copy kind, correlation id and schedule in their args;\n"
                 "NVTX ranges also projected onto the GPU work launched in them, with arrows\n"
                 "from range to work. --format kineto writes one Kineto trace per rank\n"
                 "(DIR/rank0.json, ...) with distributedInfo, for Holistic Trace Analysis.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help);
}

/* Writes through a private temporary renamed into place when whole
 * (report/tp_output.h): a failed export never leaves half a file, and a
 * target that is a device, a FIFO, a folder or the database is refused. */
static tp_rc write_to_file(tp_store *store, int64_t id, const char *path, const char *db) {
  tp_output out;
  TP_TRY(tp_output_open(path, db, &out));
  tp_rc rc = tp_report_chrome_trace(store, id, out.file);
  if (rc != TP_OK) {
    tp_output_abort(&out);
    return rc;
  }
  return tp_output_commit(&out, db);
}

static int to_stdout(const trace_args *a) { return !a->out || !strcmp(a->out, "-"); }

static int is_kineto(const trace_args *a) { return !strcmp(a->format, "kineto"); }

/* The folder of the Kineto files: made (one level) when missing. */
static tp_rc make_folder(const char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0)
    return S_ISDIR(st.st_mode) ? TP_OK
                               : TP_FAIL(TP_EUSAGE,
                                         "%s: not a folder (kineto writes one file "
                                         "per rank into a folder)",
                                         dir);
  if (mkdir(dir, 0777) != 0)
    return TP_FAIL(TP_EUSAGE, "%s: cannot create the folder: %s", dir, strerror(errno));
  return TP_OK;
}

/* Opens DIR/rank<N>.json (through tp_output) and writes rank N's trace into it. */
static tp_rc write_rank(tp_store *store, int64_t id, const trace_args *a, int rank,
                        tp_output *out) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/rank%d.json", a->out, rank) >= sizeof path)
    return TP_FAIL(TP_EUSAGE, "%s: path too long", a->out);
  TP_TRY(tp_output_open(path, a->db, out));
  tp_rc rc = tp_report_kineto_trace(store, id, rank, out->file);
  if (rc != TP_OK) tp_output_abort(out);
  return rc;
}

/* After a whole set is in place: removes DIR/rank<N>.json files of ranks this
 * trace does not have (an earlier trace of more ranks), since a reader of the
 * folder takes every rank file in it. Only regular files of that exact name. */
static tp_rc remove_other_ranks(const char *dir, const int *ranks, size_t n) {
  DIR *d = opendir(dir);
  if (!d) return TP_FAIL(TP_EIO, "%s: cannot list the folder: %s", dir, strerror(errno));
  tp_rc rc = TP_OK;
  for (struct dirent *e = readdir(d); e && rc == TP_OK; e = readdir(d)) {
    if (strncmp(e->d_name, "rank", 4) != 0 || !isdigit((unsigned char)e->d_name[4])) continue;
    char *end = NULL;
    const long rank = strtol(e->d_name + 4, &end, 10);
    if (strcmp(end, ".json") != 0) continue;
    int ours = 0;
    for (size_t i = 0; i < n; i++) ours |= ranks[i] == rank;
    char path[4096];
    struct stat st;
    if (ours || (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path ||
        lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (unlink(path) != 0) rc = TP_FAIL(TP_EIO, "%s: cannot remove: %s", path, strerror(errno));
  }
  closedir(d);
  return rc;
}

/* DIR/rank<N>.json for every rank of the trace, each through tp_output.
 * Every file is written before any is put in place: a rank that cannot be
 * written (its name taken by a folder, say) leaves the others' files as they
 * were, not one new rank beside old ones. */
static tp_rc write_kineto(tp_store *store, int64_t id, const trace_args *a) {
  int *ranks = NULL;
  size_t n = 0;
  TP_TRY(tp_report_trace_ranks(store, id, &ranks, &n));
  tp_output *outs = calloc(n ? n : 1, sizeof *outs);
  tp_rc rc = outs ? make_folder(a->out) : TP_FAIL(TP_EOOM, "trace: out of memory");
  size_t written = 0;
  while (rc == TP_OK && written < n) {
    rc = write_rank(store, id, a, ranks[written], &outs[written]);
    if (rc == TP_OK) written++;
  }
  for (size_t i = 0; i < written; i++) {
    if (rc == TP_OK) rc = tp_output_commit(&outs[i], a->db);
    else tp_output_abort(&outs[i]);
  }
  if (rc == TP_OK) rc = remove_other_ranks(a->out, ranks, n);
  free(outs);
  free(ranks);
  return rc;
}

static tp_rc write_trace(tp_store *store, int64_t id, const trace_args *a) {
  if (is_kineto(a)) return write_kineto(store, id, a);
  return to_stdout(a) ? tp_report_chrome_trace(store, id, stdout)
                      : write_to_file(store, id, a->out, a->db);
}

/* The configuration exists and the database holds no trace of it: says why,
 * as far as the database can tell. A run made with --trace can still lack a
 * configuration's trace (a copy trimmed to keep it small, as the sample is):
 * "it ran without tracing" would be false there. */
static tp_rc say_why_no_trace(tp_store *store, int64_t id) {
  tp_trace_absence why;
  tp_rc rc = tp_store_trace_absence(store, id, &why);
  if (rc != TP_OK) {
    tp_print_error("trace");
    return rc;
  }
  const long long run = (long long)why.run_id;
  if (!why.run_asked_trace)
    fprintf(stderr,
            "tpbench trace: configuration %lld has no trace: its run %lld ran without tracing "
            "(traces are recorded by 'tpbench ops' or 'tpbench run' with --trace)\n",
            (long long)id, run);
  else if (why.traced_in_run == 0)
    fprintf(stderr,
            "tpbench trace: configuration %lld has no trace: its run %lld was made with --trace, "
            "but this database holds no trace of that run (left out when it was copied or "
            "trimmed)\n",
            (long long)id, run);
  else
    fprintf(stderr,
            "tpbench trace: configuration %lld has no trace: its run %lld was made with --trace, "
            "but this database holds traces of %lld of that run's configurations, not of this "
            "one; 'tpbench report --run %lld --columns config_id,traced' lists them\n",
            (long long)id, run, (long long)why.traced_in_run, run);
  return TP_OK;
}

static int export_trace(const trace_args *a) {
  tp_rc rc = to_stdout(a) || is_kineto(a) ? TP_OK : tp_check_output_folder(a->out);
  if (rc != TP_OK) {
    tp_print_error("trace");
    return tp_exit_for(rc);
  }
  tp_store *store = NULL;
  rc = tp_open_for_reading("trace", a->db, &store);
  if (rc != TP_OK) return tp_exit_for(rc);
  int64_t id = 0;
  int found = 0;
  tp_trace_info info;
  int status = TP_EXIT_OK;
  /* --key takes a full key or a unique prefix of its short key (report/tp_keys.h) */
  char *key = NULL;
  rc = a->key ? tp_config_key_resolve(store, a->key, &key) : TP_OK;
  if (rc == TP_OK) rc = tp_store_find_config(store, a->config, key, a->run, 1, &id);
  free(key);
  if (rc == TP_OK) rc = tp_store_trace_info(store, id, &found, &info);
  if (rc != TP_OK) {
    tp_print_error("trace");
    status = tp_exit_for(rc);
  } else if (!found) {
    rc = say_why_no_trace(store, id);
    status = rc == TP_OK ? TP_EXIT_FAILURE : tp_exit_for(rc);
  } else {
    rc = write_trace(store, id, a);
    if (rc != TP_OK) tp_print_error("trace");
    status = tp_exit_for(rc);
  }
  tp_store_close(store);
  return status;
}

int tp_cmd_trace(int argc, char **argv) {
  trace_args a = {.db = "tpbench.db", .out = "-", .format = "chrome"};
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &a, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  if ((a.key != NULL) == (a.config > 0)) {
    fprintf(stderr, "tpbench trace: give exactly one of --config and --key\n"
                    "Try 'tpbench trace --help'.\n");
    return tp_exit_for(TP_EUSAGE);
  }
  if (strcmp(a.format, "chrome") != 0 && !is_kineto(&a)) {
    fprintf(stderr,
            "tpbench trace: --format must be chrome or kineto, not '%s'\n"
            "Try 'tpbench trace --help'.\n",
            a.format);
    return tp_exit_for(TP_EUSAGE);
  }
  if (is_kineto(&a) && to_stdout(&a)) {
    fprintf(stderr, "tpbench trace: --format kineto writes one file per rank: give --out DIR\n"
                    "Try 'tpbench trace --help'.\n");
    return tp_exit_for(TP_EUSAGE);
  }
  return export_trace(&a);
}
