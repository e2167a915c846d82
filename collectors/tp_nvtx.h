/*
 * tp_nvtx.h — NVTX ranges in the "tpbench" domain, for the bench and kernels.
 *
 * Ranges mark iterations, ops and schedule steps so the collector can cut the
 * trace into windows and a timeline viewer can label it. They cost almost
 * nothing when no tool is attached. The first NVTX call of the process
 * decides whether a tool is attached (NVTX initialises once, lazily), so the
 * collector must be started before the first tp_nvtx_push when tracing; the
 * collector checks this and refuses to start otherwise.
 *
 * Built without CUDA (TPBENCH_WITH_CUDA=OFF) these functions do nothing.
 */
#ifndef TP_NVTX_H
#define TP_NVTX_H

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a range named `name` on the calling thread (nested ranges are fine).
 * The name is copied by the tool; NULL is treated as "". */
void tp_nvtx_push(const char *name);

/* Closes the innermost range opened by this thread. */
void tp_nvtx_pop(void);

/* 1 once any tp_nvtx_* function (or tp_nvtx_attach) has initialised NVTX. */
int tp_nvtx_used(void);

/* Initialises NVTX now and creates the "tpbench" domain. Returns 1 when a tool
 * is attached (the domain handle is real), 0 when NVTX calls are no-ops. Used
 * by the collector right after it set up the injection; idempotent. */
int tp_nvtx_attach(void);

#ifdef __cplusplus
}
#endif

#endif /* TP_NVTX_H */
