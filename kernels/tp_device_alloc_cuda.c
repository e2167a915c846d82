/*
 * tp_device_alloc_cuda.c — the process's device ledger of
 * tp_device_alloc.h: one tp_alloc_ledger over cudaMalloc/cudaFree, made on
 * first use (pthread_once) and kept until the process exits, and the
 * tp_device_* calls that every tpbench allocation site uses.
 */
#include "kernels/tp_device_alloc.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>

#include "common/tp_log.h"

static tp_alloc_ledger *device_ledger;
static pthread_once_t device_ledger_once = PTHREAD_ONCE_INIT;

static tp_rc cuda_alloc(void *ctx, void **out, size_t bytes) {
  (void)ctx;
  cudaError_t err = cudaMalloc(out, bytes);
  if (err == cudaSuccess) return TP_OK;
  (void)cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
  return TP_FAIL(err == cudaErrorMemoryAllocation ? TP_EOOM : TP_ECUDA,
                 "cudaMalloc of %zu bytes failed: %s (%s)", bytes, cudaGetErrorString(err),
                 cudaGetErrorName(err));
}

static tp_rc cuda_free(void *ctx, void *ptr) {
  (void)ctx;
  cudaError_t err = cudaFree(ptr);
  if (err == cudaSuccess) return TP_OK;
  (void)cudaGetLastError();
  return TP_FAIL(TP_ECUDA, "cudaFree(%p) failed: %s (%s)", ptr, cudaGetErrorString(err),
                 cudaGetErrorName(err));
}

static void make_device_ledger(void) {
  const tp_alloc_backend cuda = {cuda_alloc, cuda_free, NULL};
  if (tp_alloc_ledger_create(&cuda, &device_ledger) != TP_OK) device_ledger = NULL;
}

tp_alloc_ledger *tp_device_ledger(void) {
  pthread_once(&device_ledger_once, make_device_ledger);
  return device_ledger;
}

static tp_rc ledger(tp_alloc_ledger **out) {
  *out = tp_device_ledger();
  if (!*out) return TP_FAIL(TP_EOOM, "no host memory for the device-memory ledger");
  return TP_OK;
}

tp_rc tp_device_set_limit(int64_t limit_bytes, const char *why) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  tp_alloc_set_limit(l, limit_bytes, why);
  return TP_OK;
}

int64_t tp_device_limit(void) {
  tp_alloc_ledger *l = tp_device_ledger();
  return l ? tp_alloc_limit(l) : 0;
}

tp_rc tp_device_limit_to_share(int ranks, int64_t *share_bytes) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  if (ranks < 1) return TP_FAIL(TP_EUSAGE, "tp_device_limit_to_share: %d ranks", ranks);
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (err != cudaSuccess)
    return TP_FAIL(TP_ECUDA, "cudaMemGetInfo: %s (%s)", cudaGetErrorString(err),
                   cudaGetErrorName(err));
  int64_t live = 0, count = 0;
  tp_alloc_totals(l, &live, &count);
  /* 10 % stays free for what the ledger never sees (NCCL's lazily made
   * buffers, cuBLASLt's heuristics, fragmentation) */
  const int64_t share = live + (int64_t)((double)free_bytes * 0.9 / ranks);
  char why[160];
  snprintf(why, sizeof why,
           "ranks sharing one GPU: %d ranks on %.0f MiB free of %.0f MiB, 90 %% split evenly",
           ranks, (double)free_bytes / 1048576.0, (double)total_bytes / 1048576.0);
  tp_alloc_set_limit(l, share, why);
  *share_bytes = share;
  return TP_OK;
}

tp_rc tp_device_malloc(void **out, size_t bytes) {
  *out = NULL;
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_malloc(l, tp_alloc_current(l), out, bytes);
}

tp_rc tp_device_malloc_as(tp_alloc_owner owner, void **out, size_t bytes) {
  *out = NULL;
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_malloc(l, owner, out, bytes);
}

tp_rc tp_device_adopt(void *ptr, size_t bytes) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_adopt(l, tp_alloc_current(l), ptr, bytes);
}

tp_rc tp_device_adopt_as(tp_alloc_owner owner, void *ptr, size_t bytes) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_adopt(l, owner, ptr, bytes);
}

tp_rc tp_device_disown(void *ptr) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_disown(l, ptr);
}

tp_rc tp_device_free(void *ptr) {
  if (!ptr) return TP_OK;
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_free(l, ptr);
}

void tp_device_release(void *ptr) {
  if (tp_device_free(ptr) != TP_OK) TP_LOGW("alloc", "%s", tp_last_error());
}

tp_rc tp_device_claim(tp_alloc_shared shared, size_t bytes) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_claim(l, tp_alloc_current(l), shared, bytes);
}

tp_alloc_owner tp_device_enter(tp_alloc_owner owner) {
  tp_alloc_ledger *l = tp_device_ledger();
  return l ? tp_alloc_enter(l, owner) : TP_ALLOC_OWNER(TP_ALLOC_UNOWNED, 0);
}

void tp_device_leave(tp_alloc_owner previous) {
  tp_alloc_ledger *l = tp_device_ledger();
  if (l) tp_alloc_leave(l, previous);
}

void tp_device_stats(tp_alloc_owner owner, tp_alloc_stats *out) {
  tp_alloc_ledger *l = tp_device_ledger();
  if (l) tp_alloc_stats_of(l, owner, out);
  else *out = (tp_alloc_stats){0, 0, 0, 0, 0};
}

tp_rc tp_device_owner_release(tp_alloc_owner owner) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_release(l, owner);
}

tp_rc tp_device_watch_begin(const tp_alloc_owner *owners, int n) {
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_watch_begin(l, owners, n);
}

tp_rc tp_device_watch_end(int64_t *peak) {
  *peak = 0;
  tp_alloc_ledger *l = NULL;
  TP_TRY(ledger(&l));
  return tp_alloc_watch_end(l, peak);
}
