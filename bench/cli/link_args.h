/*
 * link_args.h — the options of `tpbench link` in one table, so every build
 * accepts and rejects the same command lines: the CUDA build's command
 * (bench/gpu/cmd_link.c) and the CPU-only stand-in
 * (bench/cli/cmd_ops_unavailable.c), which parses first and only then says that
 * it has no GPU (--help exits 0 and a bad option 2 in both).
 */
#ifndef TP_LINK_ARGS_H
#define TP_LINK_ARGS_H

#include "bench/cli/cli.h"

typedef struct tp_link_args {
  const char *db;        /* database file; default "tpbench.db" */
  int gpus;              /* workers, one per GPU; 0 = every visible GPU */
  tp_int_list sizes_mib; /* MiB each rank sends; default 8,32,128,256 */
  int small_kib;         /* KiB of one more, small point (the per-call latency); 0: none;
                            default 64 */
  int iters;             /* timed transfers per point; default 20 */
  int warmup;            /* untimed transfers per point; default 3 */
  int sm_blocks;         /* blocks of the copy kernel; default 16 */
  tp_int_list gemm_gaps; /* GEMMs between gaps (bench/gpu/link_pacing.h): the gaps, % of the
                            back-to-back time; default 25,50,100,200 */
  int settle_ms;         /* GEMMs between gaps: least time of each warm-up and timed phase;
                            default 300 */
} tp_link_args;

/* Fills args with the defaults above. */
void tp_link_args_defaults(tp_link_args *args);

/* Parses `link` options (argv[0] = "link") into args, which holds the
 * defaults on entry. --help prints them and sets *help_shown (TP_OK, exit
 * 0); a mistake is TP_EUSAGE with the message on stderr (exit 2). */
TP_MUST_CHECK tp_rc tp_link_args_parse(int argc, char **argv, tp_link_args *args, int *help_shown);

/* GEMMs between gaps (bench/gpu/link_pacing.h): the calls of one phase, enough to cover
 * settle_ms at per_call_us each, at least least (--iters, --warmup) and at most most (the
 * events and samples the probe holds, whatever --iters asks); a per-call time that is not
 * positive: most. */
int tp_link_pacing_calls(double settle_ms, double per_call_us, int least, int most);

#endif /* TP_LINK_ARGS_H */
