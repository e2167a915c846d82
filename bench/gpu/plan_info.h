/*
 * plan_info.h — how a TP projection's plan is named in records: the engine
 * that moves its data, as its recipe's plan named it (kernels/tp_linear.h;
 * what its trace must show follows from the recorded schedule and engine:
 * bench/gpu/ops_trace.c). Shared by the op benchmark (ops_worker.c) and the
 * layers (layer_worker.c).
 */
#ifndef TP_BENCH_PLAN_INFO_H
#define TP_BENCH_PLAN_INFO_H

#include "kernels/tp_linear.h"

/* "copy-engine", "sm-kernel", "nccl", "cublaslt" (the GEMM alone), "none". */
const char *tp_plan_engine(const tp_linear_plan *plan);

#endif
