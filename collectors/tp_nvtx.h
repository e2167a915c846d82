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
 * While a tpbench collector runs in the process, tp_nvtx_push/pop reach
 * NVTX only inside its traced windows (the collector opens and closes the
 * gate: tp_nvtx_gate, tp_nvtx_window), so an untraced window makes no NVTX
 * call at all and NVTX recording cannot slow it. Without a tpbench collector
 * the gate stays open and every range goes to whatever tool is attached
 * (Nsight Systems, say): profiling tpbench from outside keeps working.
 *
 * Built without CUDA (TPBENCH_WITH_CUDA=OFF) no NVTX call is made; the
 * bookkeeping (used, gate, open ranges) works the same.
 */
#ifndef TP_NVTX_H
#define TP_NVTX_H

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a range named `name` on the calling thread (nested ranges are fine).
 * The name is copied by the tool; NULL is treated as "". Recorded only while
 * tp_nvtx_recording() is 1; a skipped push is remembered so that its pop is
 * skipped too, even if a window opened in between. */
void tp_nvtx_push(const char *name);

/* Closes the innermost range pushed by this thread (if that push reached NVTX). */
void tp_nvtx_pop(void);

/* The gate, owned by this module and driven by the collector:
 * tp_nvtx_gate(1) when a collector starts (ranges only inside its windows),
 * tp_nvtx_gate(0) when it stops; tp_nvtx_window(1/0) at window begin/end. */
void tp_nvtx_gate(int collector_attached);
void tp_nvtx_window(int open);

/* 1 when a push now would reach NVTX: no collector attached, or its window open. */
int tp_nvtx_recording(void);

/* Ranges of the calling thread that reached NVTX and are not yet popped. */
int tp_nvtx_open_ranges(void);

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
