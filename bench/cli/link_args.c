/*
 * link_args.c — the option table of `tpbench link` (see link_args.h).
 */
#include "bench/cli/link_args.h"

#include <math.h>
#include <stdio.h>

void tp_link_args_defaults(tp_link_args *args) {
  *args = (tp_link_args){.db = "tpbench.db",
                         .small_kib = 64,
                         .iters = 20,
                         .warmup = 3,
                         .sm_blocks = 16,
                         .settle_ms = 300};
  TP_EXPECT_OK(tp_int_list_set(&args->sizes_mib, "8,32,128,256", 1, 4096));
  TP_EXPECT_OK(tp_int_list_set(&args->gemm_gaps, "25,50,100,200", 0, 1000));
}

/* A size (or gap) listed twice would be measured twice and stored under one key, which the
 * store refuses only after the GPUs are set up: refused here, before anything touches CUDA. */
static tp_rc reject_repeated(const char *option, const tp_int_list *list) {
  for (int i = 1; i < list->count; ++i)
    for (int j = 0; j < i; ++j)
      if (list->items[i] == list->items[j]) {
        fprintf(stderr, "tpbench link: --%s: %lld is listed twice\nTry 'tpbench link --help'.\n",
                option, (long long)list->items[i]);
        return TP_FAIL(TP_EUSAGE, "--%s: %lld is listed twice", option, (long long)list->items[i]);
      }
  return TP_OK;
}

tp_rc tp_link_args_parse(int argc, char **argv, tp_link_args *args, int *help_shown) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &args->db, "PATH", "SQLite database to write", 0, 0, NULL},
      {"gpus", TP_OPT_INT, &args->gpus, "N", "workers, one per GPU (0: every visible GPU)", 0, 64,
       NULL},
      {"sizes", TP_OPT_INT_LIST, &args->sizes_mib, "LIST", "MiB each rank sends", 1, 4096, NULL},
      {"small-kib", TP_OPT_INT, &args->small_kib, "N",
       "KiB of one more, small point of every transport: the per-call latency; 0 to 1023 (0: "
       "none; 1 MiB and up: --sizes)",
       0, 1023, NULL},
      {"iters", TP_OPT_INT, &args->iters, "N", "timed transfers per point", 1, 10000, NULL},
      {"warmup", TP_OPT_INT, &args->warmup, "N", "untimed transfers per point", 0, 10000, NULL},
      {"sm-blocks", TP_OPT_INT, &args->sm_blocks, "N", "blocks of the copy kernel", 1, 1024, NULL},
      {"gemm-gaps", TP_OPT_INT_LIST, &args->gemm_gaps, "LIST",
       "GEMMs between gaps: idle gaps before each GEMM, % of its back-to-back time (0 to 1000; "
       "back to back is always measured)",
       0, 1000, NULL},
      {"settle-ms", TP_OPT_INT, &args->settle_ms, "N",
       "GEMMs between gaps: least time of each point's warm-up and of its timed calls", 1, 10000,
       NULL},
  };
  const tp_command cmd = {"link", "tpbench link [options]",
                          "Measures peer bandwidth of the copy engine, an SM copy kernel and "
                          "NCCL's all-gather and reduce-scatter, and a copy within one GPU, over "
                          "a sweep of sizes (a small one for the per-call latency), then the "
                          "per-call latency of a fused op's barrier, a flag round trip and a "
                          "met flag wait, and last how much faster a GEMM runs after an idle "
                          "gap than back to back; stores every point. On one GPU only the "
                          "last.",
                          options, (int)(sizeof options / sizeof options[0])};
  TP_TRY(tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help_shown));
  if (*help_shown) return TP_OK;
  TP_TRY(reject_repeated("sizes", &args->sizes_mib));
  return reject_repeated("gemm-gaps", &args->gemm_gaps);
}

int tp_link_pacing_calls(double settle_ms, double per_call_us, int least, int most) {
  double n = per_call_us > 0 ? ceil(settle_ms * 1000.0 / per_call_us) : (double)most;
  if (!(n >= least)) n = least; /* NaN too */
  if (n > most) n = most;
  return (int)n;
}
