/*
 * drift_args.c — the option table of `tpbench drift` and the checks that
 * turn it into enums (see drift_args.h).
 */
#include "bench/cli/drift_args.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tp_drift_args_defaults(tp_drift_args *a) {
  memset(a, 0, sizeof *a);
  a->model_name = "8b";
  a->layer_name = "block";
  a->dtype_name = "bf16";
  a->optimizer_name = "adamw";
  a->depth = 1;
  a->seqlen = 4096;
  a->batch = 1;
  a->steps = 10;
  a->timeout_s = 120;
  a->repeat = 2;
  a->seed = 1;
  a->db = "tpbench.db";
  a->format = "md";
  TP_EXPECT_OK(tp_str_list_set(&a->schedule_names, "ce"));
  TP_EXPECT_OK(tp_str_list_set(&a->rs_sum_names, "epilogue,nccl"));
}

static tp_rc usage(const char *fmt, const char *detail) {
  char msg[1024];
  snprintf(msg, sizeof msg, fmt, detail);
  fprintf(stderr, "tpbench drift: %s\nTry 'tpbench drift --help'.\n", msg);
  return TP_FAIL(TP_EUSAGE, "%s", msg);
}

static tp_rc parse_lr(tp_drift_args *a) {
  if (!a->lr_text) {
    if (a->optimizer == TP_DRIFT_ARG_SGD)
      return usage("%s", "--optimizer sgd needs --lr: plain SGD's step size depends on the "
                         "loss's scale (a mean over T·D elements), so it has no default");
    a->lr = TP_DRIFT_ADAMW_DEFAULT_LR;
    return TP_OK;
  }
  double lr = 0;
  if (!tp_cli_decimal(a->lr_text, &lr) || lr <= 0 || lr > 1e6)
    return usage("--lr: '%s' is not a learning rate (a number in (0, 1e6])", a->lr_text);
  a->lr = lr;
  return TP_OK;
}

static tp_rc parse_show(tp_drift_args *a) {
  if (!a->show_text) return TP_OK;
  a->show = 1;
  if (!strcmp(a->show_text, "latest")) return TP_OK;
  long long run = 0;
  if (tp_parse_int("--show", a->show_text, 1, INT64_MAX, &run) != TP_OK)
    return usage("--show: '%s' is not a run id (a whole number from 1) or 'latest'", a->show_text);
  a->show_run = run;
  return TP_OK;
}

/* A name listed twice would train the same configuration twice under one key (as `run` and
 * `ops`, refused; --repeat is how stock is trained again). */
static tp_rc reject_repeats(const char *option, const tp_str_list *list) {
  for (int i = 1; i < list->count; ++i)
    for (int j = 0; j < i; ++j)
      if (!strcmp(tp_str_list_at(list, i), tp_str_list_at(list, j))) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: '%.64s' is listed twice", option, tp_str_list_at(list, i));
        return usage("%s", msg);
      }
  return TP_OK;
}

/* Every list item through its vocabulary (the table's choices let only its names through:
 * these parses cannot fail). */
static tp_rc resolve_lists(tp_drift_args *a) {
  TP_TRY(reject_repeats("--schedules", &a->schedule_names));
  TP_TRY(reject_repeats("--rs-sum", &a->rs_sum_names));
  a->n_schedules = a->schedule_names.count;
  for (int i = 0; i < a->n_schedules; ++i) {
    int v = 0;
    TP_EXPECT_OK(tp_vocab_parse(&tp_schedule_vocab, tp_str_list_at(&a->schedule_names, i), &v));
    a->schedules[i] = (tp_schedule)v;
  }
  a->n_rs_sums = a->rs_sum_names.count;
  for (int i = 0; i < a->n_rs_sums; ++i) {
    int v = 0;
    TP_EXPECT_OK(tp_vocab_parse(&tp_rs_sum_vocab, tp_str_list_at(&a->rs_sum_names, i), &v));
    a->rs_sums[i] = (tp_rs_sum)v;
  }
  if (tp_drift_args_variants(a) > TP_DRIFT_MAX_VARIANTS) {
    char num[64];
    snprintf(num, sizeof num, "%d", tp_drift_args_variants(a));
    return usage("%s configurations asked for (--repeat + schedules x rs_sum), at most 16", num);
  }
  return TP_OK;
}

static tp_rc resolve(tp_drift_args *a) {
  TP_TRY(parse_show(a));
  if (tp_preset_find(a->model_name, &a->model) != TP_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return usage("--model: %s", msg);
  }
  int v = 0;
  TP_EXPECT_OK(tp_vocab_parse(&tp_layer_vocab, a->layer_name, &v));
  a->layer = (tp_layer)v;
  TP_EXPECT_OK(tp_vocab_parse(&tp_dtype_vocab, a->dtype_name, &v));
  a->dtype = (tp_dtype)v;
  a->optimizer = !strcmp(a->optimizer_name, "sgd") ? TP_DRIFT_ARG_SGD : TP_DRIFT_ARG_ADAMW;
  if (a->model->no_attention && a->layer != TP_LAYER_FFN) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s has no attention tpbench runs (%.400s)", a->layer_name,
             a->model->name, a->model->no_attention);
    return usage("--layer %s; train --layer ffn", msg);
  }
  TP_TRY(parse_lr(a));
  return resolve_lists(a);
}

tp_rc tp_drift_args_parse(int argc, char **argv, tp_drift_args *a, int *help_shown) {
  const tp_option options[] = {
      {"model", TP_OPT_STRING, &a->model_name, "NAME", "model preset (debug, 1b, 8b, 70b, ...)", 0,
       0, NULL},
      {"layer", TP_OPT_STRING, &a->layer_name, "NAME", "the block trained", 0, 0,
       "attention|ffn|block"},
      {"layers", TP_OPT_INT, &a->depth, "N", "blocks stacked, each one's output the next's input",
       1, 64, NULL},
      {"seqlen", TP_OPT_INT, &a->seqlen, "N", "sequence length S", 1, 1 << 20, NULL},
      {"batch", TP_OPT_INT, &a->batch, "N", "batch B (tokens per step T = B·S)", 1, 4096, NULL},
      {"dtype", TP_OPT_STRING, &a->dtype_name, "NAME",
       "element type of weights and activations (fp32 master weights either way)", 0, 0,
       "bf16|fp32"},
      {"gpus", TP_OPT_INT, &a->gpus, "N",
       "workers, one per GPU: the TP degree (0: every visible GPU)", 0, 64, NULL},
      {"schedules", TP_OPT_STR_LIST, &a->schedule_names, "LIST", "dist_gemm schedules to train", 0,
       0, TP_VOCAB_PIPED(TP_SCHEDULE_LIST)},
      {"chunks", TP_OPT_INT, &a->chunks, "N", "dist_gemm chunks per rank's shard (0: auto)", 0, 32,
       NULL},
      {"rs-sum", TP_OPT_STR_LIST, &a->rs_sum_names, "LIST",
       "dist_gemm's reduce-scatter sum: epilogue (fp32, one rounding) or nccl (NCCL's order "
       "and bf16 rounding)",
       0, 0, "epilogue|nccl"},
      {"repeat", TP_OPT_INT, &a->repeat, "N",
       "stock configurations (the second and later show stock's own determinism)", 1, 8, NULL},
      {"steps", TP_OPT_INT, &a->steps, "N", "training steps per configuration", 1, 100000, NULL},
      {"timeout", TP_OPT_INT, &a->timeout_s, "S",
       "seconds before a training step (or a configuration's set-up) counts as hung: the run "
       "ends, the steps finished stored",
       1, 86400, NULL},
      {"optimizer", TP_OPT_STRING, &a->optimizer_name, "NAME",
       "sgd (no momentum) or adamw (0.9, 0.95, eps 1e-8, weight decay 0.1)", 0, 0, "sgd|adamw"},
      {"lr", TP_OPT_STRING, &a->lr_text, "X", "learning rate (default: adamw 1e-4; sgd: required)",
       0, 0, NULL},
      {"seed", TP_OPT_INT64, &a->seed, "N", "seed of the initial weights and the data", 0,
       INT64_MAX, NULL},
      {"same-batch", TP_OPT_FLAG, &a->same_batch, NULL,
       "every step trains on step 0's input and target (a target the block can learn)", 0, 0, NULL},
      {"db", TP_OPT_STRING, &a->db, "PATH", "SQLite database to write (and --show's to read)", 0, 0,
       NULL},
      {"show", TP_OPT_STRING, &a->show_text, "RUN",
       "print the stored drift table of run RUN (an id, or latest) and exit; needs no GPU", 0, 0,
       NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT", "table format", 0, 0, "md|csv"},
      {"quiet", TP_OPT_FLAG, &a->quiet, NULL, "no progress lines on stderr", 0, 0, NULL},
  };
  const tp_command cmd = {
      "drift", "tpbench drift [options]",
      "Trains a block (or a stack of blocks) for N steps - forward, a mean-squared-error loss,\n"
      "backward, the global gradient norm, an optimizer update - stock, then each dist_gemm\n"
      "schedule and reduce-scatter sum, from the same initial weights and the same data; stores\n"
      "every step's loss and gradient norm and prints them against stock's: the difference and\n"
      "whether it is bit-identical. Exits 0 whatever the drift; 1 when something failed or a\n"
      "value is not finite.",
      options, (int)(sizeof options / sizeof options[0])};
  TP_TRY(tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help_shown));
  if (*help_shown) return TP_OK;
  return resolve(a);
}

/* A run of decimal digits at *p below limit, the end in *p; 0 when there is
 * none or it is not below limit (strtol's blanks and sign would let " 3" or
 * "-0" through). */
static int parse_below(const char **p, int limit, int *out) {
  const char *q = *p;
  long long v = 0;
  for (; *q >= '0' && *q <= '9'; ++q) {
    v = v * 10 + (*q - '0');
    if (v >= limit) return 0;
  }
  if (q == *p) return 0;
  *p = q;
  *out = (int)v;
  return 1;
}

tp_rc tp_drift_hang_parse(const char *value, int world, int steps, tp_drift_hang *out) {
  out->step = -1;
  out->rank = 0;
  if (!value || !*value) return TP_OK;
  const char *end = value;
  int step = 0, rank = 0;
  int ok = parse_below(&end, steps, &step);
  if (ok && *end == ':') {
    ++end;
    ok = parse_below(&end, world, &rank);
  }
  if (!ok || *end != '\0')
    return TP_FAIL(TP_EUSAGE,
                   "%s=%s: expected STEP[:RANK] (a step below %d, a rank below %d, that stops "
                   "before the step's collectives; test only)",
                   TP_DRIFT_HANG_ENV, value, steps, world);
  out->step = step;
  out->rank = rank;
  return TP_OK;
}

int tp_drift_args_variants(const tp_drift_args *a) {
  return a->repeat + a->n_schedules * a->n_rs_sums;
}
