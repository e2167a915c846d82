/*
 * gpu_harness.h — runs a test body on every rank of a real TP group.
 *
 * The test process never touches CUDA itself: it counts devices in a forked
 * child, then forks one worker per GPU; each worker joins a loopback
 * rendezvous, builds its tp_group (NCCL, symmetric heap, cuBLASLt) and runs
 * the body. The test passes when every worker exits 0.
 */
#ifndef GPU_HARNESS_H
#define GPU_HARNESS_H

#include "bench/launch/rendezvous.h"
#include "kernels/tp_group.h"

enum { GPU_TEST_SKIP = 77 };

typedef int (*gpu_body_fn)(tp_group *group, tp_rdzv *rdzv, void *ctx);

/* Number of CUDA devices, counted in a child process (0 when none or no
 * driver); with TPBENCH_TEST_SHARE_GPU=1 on a machine of one GPU, 2 (two
 * rank slots on device 0). */
int gpu_device_count(void);

/* TPBENCH_TEST_SHARE_GPU=1 (a test knob, never the benchmark's): every
 * worker of gpu_run_group takes device 0, each with an NCCL host id of its
 * own so NCCL accepts ranks that share a GPU (it carries their traffic over
 * its socket transport on loopback). The code paths of TP > 1 (NCCL
 * collectives, the symmetric heap over CUDA IPC, the fused pushes) then run
 * on a machine of one GPU; their timings mean nothing. */
int gpu_share_one_device(void);

/* With TPBENCH_TEST_SHARE_GPU=1: prints that `what` needs NCCL symmetric
 * windows, which ranks made separate NCCL hosts never have, and returns 1
 * (the caller skips); 0 otherwise. */
int gpu_shared_lacks_windows(const char *what);

/* Forks `world` workers running body; returns 0 when all of them returned 0. */
int gpu_run_group(int world, gpu_body_fn body, void *ctx);

/* An all-gather over the rendezvous, shaped as tp_exchange_fn. */
tp_rc gpu_exchange(void *ctx, const void *send, size_t bytes, void *recv);

/* Host-side helpers for references. */
uint16_t gpu_float_to_bf16(float v);
float gpu_bf16_to_float(uint16_t v);
/* Deterministic uniform values in [-scale, scale), rounded to dt. */
void gpu_fill_host(tp_dtype dt, void *buf, size_t count, uint64_t seed, float scale);
double gpu_host_value(tp_dtype dt, const void *buf, size_t index);

#endif
