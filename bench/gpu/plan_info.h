/*
 * plan_info.h — how a TP projection's plan is named in records: the engine
 * that moves its data (what its trace must show follows from the recorded
 * schedule and engine: bench/gpu/ops_trace.c), and an fp8 projection's
 * judgement as a recorded check. Shared by the op benchmark (ops_worker.c)
 * and the layers (layer_worker.c).
 */
#ifndef TP_BENCH_PLAN_INFO_H
#define TP_BENCH_PLAN_INFO_H

#include "bench/gpu/harness.h"
#include "kernels/tp_linear.h"
#include "kernels/tp_linear_fp8.h"

/* "copy-engine", "sm-kernel", "nccl", "cublaslt" (the GEMM alone), "none". */
const char *tp_plan_engine(const tp_linear_plan *plan);

/* out, zeroed, holds k's judgement against float64 products of the
 * dequantized operands under the name "NAME:fp64": failed where an element
 * is not finite or outside its bound; the caller writes the reason. */
void tp_fp8_check_as_item(const tp_fp8_check *k, const char *name, tp_item_check *out);

/* out, zeroed, holds w (a gathered fp8 operand against quantizing the
 * whole, tp_fp8_linear_check_wholes) as an exact check: named PREFIX + w's
 * name (prefix "" or a projection's "qkv "), failed where a byte differs,
 * the reason written (what dtype names the format). */
void tp_fp8_whole_check_as_item(const tp_fp8_whole_check *w, const char *prefix, tp_dtype dtype,
                                tp_item_check *out);

#endif
