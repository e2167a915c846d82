/*
 * numerics.h — how a compared output is judged, apart from the GPU that
 * measured it, so every rule can be tested on the CPU with planted faults.
 *
 * The benchmark poisons every compared output (NaN) before each
 * configuration's numerics step, so an element a backend never wrote stays
 * non-finite. Per output, the GPU accumulates (summed over ranks): the
 * squared difference to the reference, the reference's squared norm, the
 * largest absolute difference, the elements whose bits differ and the
 * non-finite elements (tp_launch_compare). From those:
 *
 *   reference (stock)  'finite': no non-finite element, else failed. A
 *                      reference that failed (or did not run) leaves the
 *                      case's checks 'not checked', with that reason.
 *   exact              outputs no rank sums (the gather side's y, dW from a
 *                      gathered operand, the scatter side's dx): bit for bit,
 *                      differ == 0.
 *   tolerance          outputs where ranks' partials are summed (the order
 *                      differs between NCCL and the fused op) or that pass
 *                      through a layer's later ops: rel_err = ||out - ref|| /
 *                      ||ref|| <= tol, where
 *                        tol = depth * (2 u sqrt(W) + 4 u32 sqrt(K))
 *                      u the output dtype's unit roundoff (bf16 2^-8, fp32
 *                      2^-24), W the ranks summed, u32 = 2^-24 the fp32
 *                      accumulator's, K the reduction length, depth 1 for an
 *                      op's own output and 5 through a layer (RMSNorm and
 *                      softmax backward amplify a rounding difference). A
 *                      NaN error never passes; a zero reference with a
 *                      non-zero difference fails.
 *   any rule           a non-finite element fails the output.
 */
#ifndef TP_BENCH_NUMERICS_H
#define TP_BENCH_NUMERICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_vocab.h"

typedef enum {
  TP_RULE_TOLERANCE = 0,
  TP_RULE_EXACT,
  TP_RULE_SKIP /* this configuration does not compute the output (a reference's half) */
} tp_output_rule;

/* What the GPU measured of one output against the reference, all ranks summed. */
typedef struct tp_output_measure {
  double diff2, ref2, max_abs, differ, nonfinite;
  double elements;
} tp_output_measure;

/* The verdict on one output. status: "ok", "failed", "not checked". */
typedef struct tp_output_verdict {
  const char *status;
  const char *rule;          /* "exact", "tolerance", "finite" */
  double rel_err, tolerance; /* NaN where they do not apply */
  char reason[192];
} tp_output_verdict;

/* tol above. summed_ranks < 1 and depth < 1 count as 1. */
double tp_numerics_tolerance(tp_dtype dtype, int64_t reduction_len, int summed_ranks, int depth);

/* ||out - ref|| / ||ref||: NaN when anything is not finite; +inf when the
 * reference is zero and the difference is not. */
double tp_numerics_rel_err(const tp_output_measure *m);

/* The reference's own output: 'finite' or failed. */
void tp_numerics_judge_reference(const char *name, const tp_output_measure *m,
                                 tp_output_verdict *out);

/* A checked output against a reference that passed. */
void tp_numerics_judge(const char *name, tp_output_rule rule, double tolerance,
                       const tp_output_measure *m, tp_output_verdict *out);

/* An output that could not be checked, with why. */
void tp_numerics_not_checked(tp_output_rule rule, const char *why, tp_output_verdict *out);

#endif /* TP_BENCH_NUMERICS_H */
