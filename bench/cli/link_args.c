/*
 * link_args.c — the option table of `tpbench link` (see link_args.h).
 */
#include "bench/cli/link_args.h"

#include <stdio.h>

void tp_link_args_defaults(tp_link_args *args) {
  *args = (tp_link_args){
      .db = "tpbench.db", .small_kib = 64, .iters = 20, .warmup = 3, .sm_blocks = 16};
  TP_EXPECT_OK(tp_int_list_set(&args->sizes_mib, "8,32,128,256", 1, 4096));
}

/* A size listed twice would be measured twice and stored under one key, which the store
 * refuses only after the GPUs are set up: refused here, before anything touches CUDA. */
static tp_rc reject_repeated_sizes(const tp_int_list *sizes) {
  for (int i = 1; i < sizes->count; ++i)
    for (int j = 0; j < i; ++j)
      if (sizes->items[i] == sizes->items[j]) {
        fprintf(stderr, "tpbench link: --sizes: %lld is listed twice\nTry 'tpbench link --help'.\n",
                (long long)sizes->items[i]);
        return TP_FAIL(TP_EUSAGE, "--sizes: %lld is listed twice", (long long)sizes->items[i]);
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
  };
  const tp_command cmd = {"link", "tpbench link [options]",
                          "Measures peer bandwidth of the copy engine, an SM copy kernel and "
                          "NCCL's all-gather and reduce-scatter, and a copy within one GPU, over "
                          "a sweep of sizes (a small one for the per-call latency), then the "
                          "per-call latency of a fused op's barrier, a flag round trip and a "
                          "met flag wait; stores every point.",
                          options, (int)(sizeof options / sizeof options[0])};
  TP_TRY(tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help_shown));
  return *help_shown ? TP_OK : reject_repeated_sizes(&args->sizes_mib);
}
