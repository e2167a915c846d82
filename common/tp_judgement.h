/*
 * tp_judgement.h — one judgement of one output, as a configuration records it:
 * against the case's reference (the harness's comparison) or against a
 * reference an item computes itself (a numeric recipe's own checks, e.g. the
 * fp8 recipe's float64 product of the dequantized operands: kernels/tp_recipe.h's
 * judge). Plain data: the ranks' judgements are gathered and the worst is kept.
 */
#ifndef TP_JUDGEMENT_H
#define TP_JUDGEMENT_H

typedef struct tp_judgement {
  char name[32];            /* the check's output name, e.g. "y:fp64" */
  int failed;               /* 1: the output fails it */
  int not_checked;          /* 1: the check could not run; reason says why */
  int exact;                /* 1: judged bit for bit (rule "exact"), else within tolerance */
  double elements;          /* elements judged */
  double nonfinite, differ; /* of them: not finite; outside the bound */
  double rel_err, max_abs_err, tolerance;
  char reason[192]; /* required when failed; what was compared otherwise */
} tp_judgement;

#endif /* TP_JUDGEMENT_H */
