/*
 * plan_info.c — names of a plan's engine and evidence (see plan_info.h).
 */
#include "plan_info.h"

const char *tp_plan_engine(const tp_linear_plan *p) {
  if (p->backend == TP_BACKEND_GEMM_ONLY) return "cublaslt";
  switch (p->schedule) {
  case TP_SCHED_CE:
  case TP_SCHED_RING: return "copy-engine"; /* at TP 2 the ring's pushes are copy-engine ones */
  case TP_SCHED_SM: return "sm-kernel";
  case TP_SCHED_NCCL: return "nccl";
  default: return "none";
  }
}

const char *tp_plan_evidence(const tp_linear_plan *p) {
  if (p->backend == TP_BACKEND_GEMM_ONLY) return NULL;
  if (p->backend == TP_BACKEND_DIST) return tp_schedule_name(p->schedule);
  return "nccl";
}
