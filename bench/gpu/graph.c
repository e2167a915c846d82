/*
 * graph.c — capture, replay and release of a configuration's CUDA graph
 * (see graph.h).
 */
#include "bench/gpu/graph.h"

#include <stdio.h>

#include "kernels/tp_cuda_check.h"

/* Ends a capture still open on stream (after a failed step) and drops what
 * it recorded; errors of a capture being abandoned are expected and cleared. */
static void abandon_capture(cudaStream_t stream) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) (void)cudaGetLastError();
  if (status == cudaStreamCaptureStatusNone) return;
  cudaGraph_t partial = NULL;
  if (cudaStreamEndCapture(stream, &partial) != cudaSuccess) (void)cudaGetLastError();
  if (partial) cudaGraphDestroy(partial);
}

/* Prefixes this thread's last error, keeping the code. */
static tp_rc capture_failed(tp_rc rc) { return tp_fail_context(rc, "CUDA graph capture"); }

tp_rc tp_graph_capture(tp_group *g, tp_graph_step_fn step, void *ctx, cudaGraphExec_t *out) {
  *out = NULL;
  cudaError_t err = cudaStreamBeginCapture(g->main_stream, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return TP_FAIL(TP_ECUDA, "CUDA graph capture: cudaStreamBeginCapture: %s",
                   cudaGetErrorString(err));
  }
  /* A caller holding graphs already keeps the group frozen after this capture. */
  const int was_frozen = g->frozen;
  tp_group_freeze(g, 1);
  tp_rc rc = step(ctx);
  tp_group_freeze(g, was_frozen);
  cudaGraph_t graph = NULL;
  err = cudaStreamEndCapture(g->main_stream, &graph);
  if (rc != TP_OK || err != cudaSuccess) {
    (void)cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    abandon_capture(g->comm_stream); /* a fork that never joined back */
    abandon_capture(g->main_stream);
    if (rc != TP_OK) return capture_failed(rc);
    return TP_FAIL(TP_ECUDA, "CUDA graph capture: cudaStreamEndCapture: %s (%s)",
                   cudaGetErrorString(err), cudaGetErrorName(err));
  }
  err = cudaGraphInstantiate(out, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    *out = NULL;
    return TP_FAIL(err == cudaErrorMemoryAllocation ? TP_EOOM : TP_ECUDA,
                   "CUDA graph capture: cudaGraphInstantiate: %s (%s)", cudaGetErrorString(err),
                   cudaGetErrorName(err));
  }
  return TP_OK;
}

tp_rc tp_graph_launch(tp_group *g, cudaGraphExec_t exec) {
  TP_CUDA(cudaGraphLaunch(exec, g->main_stream));
  return TP_OK;
}

void tp_graph_destroy(cudaGraphExec_t exec) {
  if (exec && cudaGraphExecDestroy(exec) != cudaSuccess) (void)cudaGetLastError();
}
