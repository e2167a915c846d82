/*
 * cmd_ops.c — `tpbench ops`: the op-level benchmark of the TP projections,
 * stock against dist_gemm, with the GEMM alone and the collective alone on
 * the same shapes, every sample kept in the database.
 *
 * The parent process parses and validates everything (options, matrix,
 * database path) and counts GPUs in a child, without touching CUDA itself;
 * then the launcher forks one worker per GPU (or this process joins an
 * external launcher's job) and each worker runs ops_worker.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/tp_store.h"
#include "../cli.h"
#include "../commands.h"
#include "../launcher.h"
#include "../ops_matrix.h"
#include "ops_worker.h"
#include "worker_group.h"

enum { EXIT_USAGE = 2, RENDEZVOUS_TIMEOUT_MS = 120000 };

typedef struct ops_job {
  tp_ops_matrix matrix;
  tp_ops_options opts;
} ops_job;

static int ops_worker_main(const tp_launch_env *env, void *arg) {
  ops_job *job = arg;
  tp_worker_ctx ctx;
  tp_rc rc = tp_worker_join(env->master_addr, env->master_port, env->rank, env->world,
                            env->local_rank, RENDEZVOUS_TIMEOUT_MS, &ctx);
  if (rc == TP_OK) rc = tp_ops_worker_run(&ctx, &job->matrix, &job->opts);
  if (rc != TP_OK)
    fprintf(stderr, "tpbench ops: rank %d: %s: %s\n", env->rank, tp_rc_name(rc), tp_last_error());
  tp_worker_leave(&ctx);
  return rc == TP_OK ? 0 : 1;
}

/* Configurations whose TP degree differs from the job's worker count cannot
 * run in this job: say so on each of them. */
static void reject_other_tp(tp_ops_matrix *m, int world) {
  for (int i = 0; i < m->n_configs; ++i) {
    tp_ops_config *cfg = &m->configs[i];
    if (cfg->rejected || cfg->axes.tp == world) continue;
    cfg->rejected = 1;
    snprintf(cfg->reason, sizeof cfg->reason,
             "TP %d needs a job of %d workers; this one has %d (--gpus %d)", cfg->axes.tp,
             cfg->axes.tp, world, cfg->axes.tp);
  }
}

static char *join_args(int argc, char **argv) {
  size_t len = strlen("tpbench") + 1;
  for (int i = 0; i < argc; ++i) len += strlen(argv[i]) + 1;
  char *line = malloc(len);
  if (!line) return NULL;
  strcpy(line, "tpbench");
  for (int i = 0; i < argc; ++i) {
    strcat(line, " ");
    strcat(line, argv[i]);
  }
  return line;
}

/* The database must be writable and tpbench's before any GPU time is spent. */
static int check_database(const char *path) {
  tp_store *store = NULL;
  tp_rc rc = tp_store_open(path, 1, &store);
  if (rc != TP_OK) {
    fprintf(stderr, "tpbench ops: database %s: %s\n", path, tp_last_error());
    return rc == TP_EFOREIGN || rc == TP_EIO || rc == TP_EUSAGE ? EXIT_USAGE : 1;
  }
  tp_store_close(store);
  return 0;
}

static int external_launcher(void) { return getenv("RANK") && getenv("WORLD_SIZE"); }

int tp_cmd_ops(int argc, char **argv) {
  tp_ops_spec spec;
  tp_ops_spec_defaults(&spec);
  ops_job job;
  memset(&job, 0, sizeof job);
  job.opts.db_path = "tpbench.db";
  job.opts.warmup_iters = 10;
  job.opts.measure_iters = 50;
  job.opts.window_timeout_s = 120;
  job.opts.format = "md";
  int gpus = 0, list_only = 0;
  spec.tp.count = 0; /* unset: the job's worker count */
  const char *pass_list = NULL;
  tp_option options[] = {
      {"db", TP_OPT_STRING, &job.opts.db_path, "PATH", "SQLite database to write", 0, 0, NULL},
      {"gpus", TP_OPT_INT, &gpus, "N", "workers to start, one per GPU (0: every visible GPU)", 0, 64, NULL},
      {"models", TP_OPT_STR_LIST, &spec.models, "LIST", "model presets (debug,1b,8b,70b,405b)", 0, 0, NULL},
      {"projs", TP_OPT_STR_LIST, &spec.projs, "LIST", "projections (qkv,wo,w13,w2)", 0, 0, NULL},
      {"tokens", TP_OPT_INT_LIST, &spec.tokens, "LIST", "tokens per step, whole TP group", 1, 1 << 24, NULL},
      {"dtype", TP_OPT_STR_LIST, &spec.dtypes, "LIST", "element types", 0, 0, "bf16|fp32"},
      {"tp", TP_OPT_INT_LIST, &spec.tp, "LIST", "TP degrees (default: the number of workers)", 1, 64, NULL},
      {"schedule", TP_OPT_STR_LIST, &spec.schedules, "LIST", "dist_gemm schedules", 0, 0,
       "auto|ce|sm|ring|multimem"},
      {"chunks", TP_OPT_INT_LIST, &spec.chunks, "LIST", "chunks per rank's shard (0: the schedule decides)", 0, 64, NULL},
      {"pass", TP_OPT_STRING, &pass_list, "LIST", "passes (fwd; the backward comes with its issue)", 0, 0, NULL},
      {"warmup", TP_OPT_INT, &job.opts.warmup_iters, "N", "warm-up iterations per configuration", 0, 100000, NULL},
      {"iters", TP_OPT_INT, &job.opts.measure_iters, "N", "measured iterations per configuration", 1, 100000, NULL},
      {"timeout", TP_OPT_INT, &job.opts.window_timeout_s, "S", "seconds before a window counts as hung", 1, 86400, NULL},
      {"format", TP_OPT_STRING, &job.opts.format, "FMT", "table format printed at the end", 0, 0, "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &job.opts.quiet, NULL, "no progress lines on stderr", 0, 0, NULL},
      {"list", TP_OPT_FLAG, &list_only, NULL, "print the expanded matrix and exit (no GPU needed)", 0, 0, NULL},
  };
  tp_command cmd = {"ops", "tpbench ops [options]",
                    "Times the TP projections stock vs dist_gemm, plus the GEMM alone and the "
                    "collective alone on the same shapes, into the database; prints the table.",
                    options, (int)(sizeof options / sizeof options[0])};
  int help = 0, n_pos = 0;
  tp_rc rc = tp_cli_parse(&cmd, argc, argv, NULL, 0, &n_pos, &help);
  if (rc != TP_OK) return EXIT_USAGE;
  if (help) return 0;
  if (pass_list && strcmp(pass_list, "fwd") != 0) {
    fprintf(stderr, "tpbench ops: --pass %s: only fwd is implemented in this build\n", pass_list);
    return EXIT_USAGE;
  }
  if (list_only) {
    if (spec.tp.count == 0) tp_int_list_set(&spec.tp, "2", 1, 64);
    rc = tp_ops_expand(&spec, &job.matrix);
    if (rc != TP_OK) {
      fprintf(stderr, "tpbench ops: %s\n", tp_last_error());
      return EXIT_USAGE;
    }
    tp_ops_matrix_print(&job.matrix, stdout);
    tp_ops_matrix_free(&job.matrix);
    return 0;
  }
  int world = gpus;
  if (external_launcher()) {
    world = atoi(getenv("WORLD_SIZE"));
  } else {
    int devices = tp_count_devices_in_child();
    if (devices == 0) {
      fprintf(stderr, "tpbench ops: no CUDA device found: this command needs at least one GPU\n");
      return 1;
    }
    if (gpus > devices) {
      fprintf(stderr, "tpbench ops: --gpus %d asks for more GPUs than the %d visible\n", gpus, devices);
      return 1;
    }
    if (world == 0) world = devices;
  }
  if (spec.tp.count == 0) {
    spec.tp.count = 1;
    spec.tp.items[0] = world > 0 ? world : 1;
  }
  rc = tp_ops_expand(&spec, &job.matrix);
  if (rc != TP_OK) {
    fprintf(stderr, "tpbench ops: %s\n", tp_last_error());
    return EXIT_USAGE;
  }
  reject_other_tp(&job.matrix, world);
  int check = check_database(job.opts.db_path);
  if (check != 0) {
    tp_ops_matrix_free(&job.matrix);
    return check;
  }
  char *line = join_args(argc, argv);
  job.opts.command_line = line ? line : "tpbench ops";
  int status;
  status = tp_launch(world, ops_worker_main, &job);
  free(line);
  tp_ops_matrix_free(&job.matrix);
  return status;
}
