/*
 * link_latency.c — one call of each per-call latency probe of `tpbench link` (see
 * link_latency.h), on the comm stream, over the flag slots of the CUDA-IPC heap's pads.
 */
#include "bench/gpu/link_latency.h"

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_symm.h"

const char *tp_latency_name(tp_latency_kind kind) {
  static const char *const names[TP_LATENCY_KINDS] = {"barrier", "flag_round_trip", "flag_wait"};
  return kind < TP_LATENCY_KINDS ? names[kind] : "?";
}

size_t tp_latency_bytes(tp_latency_kind kind) { return kind == TP_LATENCY_BARRIER ? 0 : 4; }

/* The probe's flag slot raised by rank src: the last chunk slot of src, which a fused op only
 * uses at its 64th chunk and never while the probe runs. */
static int probe_slot(int src) { return TP_SIG_FLAGS + src * TP_MAX_CHUNKS + TP_MAX_CHUNKS - 1; }

/* Raises slot in rank dst's pad, as a fused op raises a chunk's flag. */
static tp_rc raise_flag(tp_group *g, int dst, int slot) {
  tp_pad_set pads = tp_symm_pads(g->symm);
  if (tp_group_memops_usable(g, g->comm_stream))
    return tp_group_write_flag(g, g->comm_stream, pads.pad[dst] + slot, 1);
  TP_CUDA(tp_launch_signal(pads.pad[dst], slot, g->comm_stream));
  return TP_OK;
}

/* Waits for slot of this rank's pad (raised by src) and lowers it, then launches an empty
 * kernel: what a chunk's consumer does before its GEMM starts. */
static tp_rc await_flag(tp_group *g, int src, int slot) {
  tp_pad_set pads = tp_symm_pads(g->symm);
  uint32_t *flag = pads.pad[g->rank] + slot;
  if (tp_group_memops_usable(g, g->comm_stream)) {
    TP_TRY(tp_group_wait_flag(g, g->comm_stream, flag, 1));
    TP_TRY(tp_group_write_flag(g, g->comm_stream, flag, 0));
  } else {
    TP_CUDA(tp_launch_wait(pads.pad[g->rank], slot, src, g->wait_timeout_ns, g->comm_stream));
  }
  TP_CUDA(tp_launch_delay(0, g->comm_stream));
  return TP_OK;
}

/* Ranks in pairs (0-1, 2-3, ...): the even one raises first and awaits the answer, the odd
 * one awaits and answers. A rank without a partner (an odd world's last) sits it out. */
static tp_rc flag_round_trip(tp_group *g) {
  const int partner = g->rank ^ 1;
  if (partner >= g->world) return TP_OK;
  if (g->rank % 2 == 0) {
    TP_TRY(raise_flag(g, partner, probe_slot(g->rank)));
    return await_flag(g, partner, probe_slot(partner));
  }
  TP_TRY(await_flag(g, partner, probe_slot(partner)));
  return raise_flag(g, partner, probe_slot(g->rank));
}

tp_rc tp_latency_call(tp_group *g, tp_latency_kind kind) {
  switch (kind) {
  case TP_LATENCY_BARRIER:
    TP_CUDA(tp_launch_barrier(tp_symm_pads(g->symm), g->rank, g->world, g->wait_timeout_ns,
                              g->comm_stream));
    return TP_OK;
  case TP_LATENCY_FLAG_ROUND_TRIP: return flag_round_trip(g);
  case TP_LATENCY_FLAG_WAIT:
    TP_TRY(raise_flag(g, g->rank, probe_slot(g->rank)));
    return await_flag(g, g->rank, probe_slot(g->rank));
  case TP_LATENCY_KINDS: break;
  }
  return TP_FAIL(TP_EINTERNAL, "unknown latency probe %d", (int)kind);
}
