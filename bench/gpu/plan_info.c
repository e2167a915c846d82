/*
 * plan_info.c — the name of a plan's engine and an fp8 projection's checks as
 * a record's (see plan_info.h).
 */
#include "bench/gpu/plan_info.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *tp_plan_engine(const tp_linear_plan *p) {
  if (p->backend == TP_BACKEND_GEMM_ONLY) return "cublaslt";
  switch (p->schedule) {
  case TP_SCHED_CE:
  case TP_SCHED_RING: return "copy-engine"; /* at TP 2 the ring's pushes are copy-engine ones */
  case TP_SCHED_SM: return "sm-kernel";
  case TP_SCHED_NCCL:
  case TP_SCHED_NCCL_WINDOW: return "nccl";
  default: return "none";
  }
}

void tp_fp8_check_as_item(const tp_fp8_check *k, const char *name, tp_item_check *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s:fp64", name);
  out->failed = k->nonfinite > 0 || k->outside > 0;
  out->elements = (double)k->elements;
  out->nonfinite = (double)k->nonfinite;
  out->differ = (double)k->outside;
  out->rel_err = k->rel_err;
  out->max_abs_err = k->max_abs_err;
  out->tolerance = k->rel_tol;
}

void tp_fp8_whole_check_as_item(const tp_fp8_whole_check *w, const char *prefix, tp_dtype dtype,
                                tp_item_check *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%.7s%.23s", prefix, w->name);
  out->exact = 1;
  out->elements = (double)(w->bytes + w->scale_bytes);
  out->differ = (double)(w->differ + w->scale_differ);
  out->failed = out->differ > 0;
  out->rel_err = NAN;
  out->max_abs_err = NAN;
  snprintf(out->reason, sizeof out->reason,
           "%sthe gathered %s operand against quantizing the whole (gathered in bf16 for the "
           "check): %lld of %lld bytes and %lld of %lld scale bytes differ",
           out->failed ? "failed: " : "", tp_dtype_name(dtype), (long long)w->differ,
           (long long)w->bytes, (long long)w->scale_differ, (long long)w->scale_bytes);
}
