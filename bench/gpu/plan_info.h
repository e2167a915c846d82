/*
 * plan_info.h — how a TP projection's plan is named in records: the engine
 * that moves its data and the schedule a trace of it must show. Shared by
 * the op benchmark (ops_worker.c) and the layers (run_worker.c).
 */
#ifndef TP_BENCH_PLAN_INFO_H
#define TP_BENCH_PLAN_INFO_H

#include "../../kernels/tp_linear.h"

/* "copy-engine", "sm-kernel", "nccl", "cublaslt" (the GEMM alone), "none". */
const char *tp_plan_engine(const tp_linear_plan *plan);

/* What the collectors' schedule evidence must find ("ce", "sm", "nccl"), or
 * NULL where nothing moves (the GEMM alone). */
const char *tp_plan_evidence(const tp_linear_plan *plan);

#endif
