/*
 * plan_info.c — the name of a plan's engine (see plan_info.h).
 */
#include "bench/gpu/plan_info.h"

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
