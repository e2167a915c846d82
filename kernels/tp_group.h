/*
 * tp_group.h — everything one rank of a TP group holds on its GPU: the
 * device, two streams (compute, and a higher-priority communication stream
 * for the fused schedules), the NCCL communicator, the symmetric heaps of
 * the fused schedules (CUDA IPC, and on first use NCCL windows), the
 * cuBLASLt context, a private scratch buffer for the stock path, the NCCL
 * symmetric windows of its window variant (kernels/tp_window.h), and a pool
 * of events to order chunks between the two streams.
 *
 * A group can also be split from another (tp_group_split): the TP group of
 * a dp × tp mesh inside the job's world group. It has its own NCCL
 * communicator (ncclCommSplit), symmetric heap, events and private buffers,
 * and borrows its parent's streams and cuBLASLt context, so whatever runs on
 * it is ordered and timed on the parent's main stream.
 */
#ifndef TP_GROUP_H
#define TP_GROUP_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/tp_error.h"
#include "kernels/tp_agree.h"
#include "kernels/tp_device.h"
#include "kernels/tp_gemm.h"
#include "kernels/tp_gemm_scaled.h"
#include "kernels/tp_symm.h"

enum { TP_EVENT_POOL = 2 * TP_MAX_WORLD * TP_MAX_CHUNKS + 4, TP_MAX_WINDOWS = 32 };

/* One NCCL symmetric window (kernels/tp_window.h): ncclMemAlloc'd, registered. */
typedef struct tp_group_window {
  void *base;
  size_t bytes;
  ncclWindow_t handle;
} tp_group_window;

typedef struct tp_group {
  int rank, world, device;
  ncclComm_t nccl;
  tp_exchange_fn exchange; /* the all-gather the group was made with (tp_group_create; a split
                              group's: tp_group_exchange), through which the heaps and windows
                              agree */
  void *exchange_ctx;
  cudaStream_t main_stream; /* compute; the stock path runs everything here */
  cudaStream_t comm_stream; /* transfers of the fused schedules, highest priority */
  tp_symm *symm;            /* the CUDA-IPC heap (symm=ipc), made with the group */
  tp_symm *symm_nccl;       /* the heap on NCCL windows (symm=nccl): tp_group_symm makes it */
  tp_gemm *gemm;
  /* the scaled fp8 GEMMs' context on gemm's handle and workspace (tp_gemm_scaled_create_on):
   * one cuBLASLt context and one workspace for every recipe */
  tp_gemm_scaled *gemm_scaled;
  void *scratch; /* private (not symmetric) buffer: the stock path's gathered input or partials */
  size_t scratch_bytes;
  float *bias_scratch; /* private fp32 partial sums of bias gradients */
  size_t bias_scratch_bytes;
  /* NCCL symmetric windows (kernels/tp_window.h): every registered one, the
   * window scratch (the stock path's buffers in its nccl-window variant) among them */
  tp_group_window windows[TP_MAX_WINDOWS];
  int n_windows;
  void *window_scratch;
  size_t window_scratch_bytes;
  int window_support;       /* 0: not asked yet; 1: supported; -1: refused (window_refusal) */
  char window_refusal[512]; /* NCCL's reason */
  cudaEvent_t events[TP_EVENT_POOL];
  int sm_count;
  int multicast_supported;  /* the device reports NVLink multicast */
  int multicast_disabled;   /* the environment turns it off (NCCL_NVLS_ENABLE=0, ...) */
  uint64_t wait_timeout_ns; /* device-side waits trap after this long */
  void *write_value32;      /* cuStreamWriteValue32 / cuStreamWaitValue32 from the driver, */
  void *wait_value32;       /* NULL where the driver lacks them */
  char device_name[256];
  /* Test only: every fused op spins this long on the main stream, and at TP 1 (where nothing
   * fuses) every stock op of tp_linear (from TPBENCH_TEST_DIST_DELAY_US; 0 = off). The run
   * records it (runs.test_knobs). */
  uint64_t test_delay_ns;
  /* Test only: rank test_withhold_rank issues no work in the windows of
   * configuration test_withhold_config, so its peers' collectives hang (from
   * TPBENCH_TEST_WITHHOLD=RANK:CONFIG; -1 = off). Recorded in the run too. */
  int test_withhold_rank, test_withhold_config;
  /* Test only: that rank's window allocations fail (from TPBENCH_TEST_FAIL_ALLOC,
   * kernels/tp_agree.h; rank -1 = off; the symmetric heap reads the same knob
   * for its workspace growths). Recorded in the run too. */
  tp_fail_alloc test_fail_alloc;
  int aborted; /* tp_group_abort ran: the group can only be destroyed */
  /* tp_group_split: the group it was split from, whose streams and cuBLASLt
   * context it borrows (NULL: it owns them) */
  const struct tp_group *parent;
  int frozen; /* tp_group_freeze: neither the workspace nor the private buffers may grow */
} tp_group;

/* Collective over the group. The parent launcher must not have touched CUDA.
 * exchange is an all-gather over the ranks (the bench's rendezvous). */
TP_MUST_CHECK tp_rc tp_group_create(int rank, int world, int device, const ncclUniqueId *nccl_id,
                                    tp_exchange_fn exchange, void *exchange_ctx, tp_group **out);
void tp_group_destroy(tp_group *group);

/* Collective over parent: the ranks of one color form a group, ranked by
 * key (ncclCommSplit; every rank of parent calls it with the same order of
 * splits). Destroy the result before its parent. */
TP_MUST_CHECK tp_rc tp_group_split(const tp_group *parent, int color, int key, tp_group **out);

/* Collective over group: an all-gather of bytes from every rank into recv
 * (world · bytes) through its NCCL communicator, synchronous on the main
 * stream; the exchange a split group's symmetric heap rendezvous through. */
TP_MUST_CHECK tp_rc tp_group_exchange(void *group, const void *send, size_t bytes, void *recv);

/* After a hung window: aborts the NCCL communicator (ncclCommAbort, which
 * also ends NCCL kernels in flight) so no rank blocks in a collective, and
 * marks the group so tp_group_destroy frees only host memory instead of
 * synchronising a device that may never drain. Not collective. */
void tp_group_abort(tp_group *group);

/* Grows the private scratch buffer to at least bytes (not collective). The
 * request is claimed for the device ledger's current owner (tp_device_alloc.h);
 * the buffer, like every buffer the group makes, is the group's. While the
 * group is frozen a growth fails with TP_EREJECT instead. */
TP_MUST_CHECK tp_rc tp_group_scratch(tp_group *group, size_t bytes, void **out);

/* Grows the private fp32 buffer of the bias-gradient sums to at least bytes
 * (claimed likewise; TP_EREJECT while frozen, likewise). */
TP_MUST_CHECK tp_rc tp_group_bias_scratch(tp_group *group, size_t bytes, float **out);

/* The group's symmetric heap of transport (collective the first time
 * symm=nccl is asked for: every rank, in the same order). The NCCL heap is
 * made then, once the communicator's support for symmetric memory is asked
 * (tp_window_check_support): TP_EREJECT with NCCL's text where it has none
 * (NCCL up to 2.28.6 at one rank), never the IPC heap instead. */
TP_MUST_CHECK tp_rc tp_group_symm(tp_group *group, tp_symm_transport transport, tp_symm **out);

/* The heap of transport if the group has it (not collective), else NULL. */
tp_symm *tp_group_symm_of(const tp_group *group, tp_symm_transport transport);

/* Freezes (1) or thaws (0) every buffer a captured CUDA graph points into:
 * the symmetric workspace (tp_symm_freeze) and the private scratch buffers.
 * Growing any of them frees the old buffer, so while graphs of it exist a
 * request for more fails with TP_EREJECT and the reason; requests within
 * the current sizes go on as before. */
void tp_group_freeze(tp_group *group, int frozen);

/* Stream memory operations: a flag written or waited for by the stream's
 * front end, with no kernel launch and no SM (cuStreamWriteValue32 with its
 * default system-wide fence before the write; cuStreamWaitValue32 >=).
 * tp_group_memops_usable is 0 where the driver lacks them or while `stream`
 * is being captured into a CUDA graph (the kernel flags serve then). */
int tp_group_memops_usable(const tp_group *group, cudaStream_t stream);
TP_MUST_CHECK tp_rc tp_group_write_flag(const tp_group *group, cudaStream_t stream, uint32_t *flag,
                                        uint32_t value);
TP_MUST_CHECK tp_rc tp_group_wait_flag(const tp_group *group, cudaStream_t stream, uint32_t *flag,
                                       uint32_t at_least);

/* Counts CUDA devices in a forked child, so the caller stays free of CUDA
 * (its workers are forked later, and a CUDA context does not survive a
 * fork). 0 when there is no device or no driver. */
int tp_count_devices_in_child(void);

/* Library versions as strings, for the run's record. */
void tp_versions(char *cuda, size_t cuda_cap, char *driver, size_t driver_cap, char *nccl,
                 size_t nccl_cap, char *cublas, size_t cublas_cap);

#endif /* TP_GROUP_H */
