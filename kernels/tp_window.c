/*
 * tp_window.c — the NCCL symmetric windows of a TP group (tp_window.h):
 * NCCL's support asked once, windows allocated with ncclMemAlloc and
 * registered collectively, the group's window scratch grown monotonically,
 * every window deregistered and freed before the communicator goes.
 */
#include "kernels/tp_window.h"

#include <stdio.h>
#include <string.h>

#include "common/tp_log.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_window_probe.h"

static size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

tp_rc tp_window_check_support(tp_group *g) {
  if (g->window_support == 0) {
    char why[256];
    ncclResult_t r = tp_window_probe_nccl(g->nccl, why, sizeof why);
    g->window_support = r == ncclSuccess ? 1 : -1;
    if (r != ncclSuccess)
      snprintf(g->window_refusal, sizeof g->window_refusal,
               "no NCCL symmetric windows on this communicator of %d rank(s): ncclDevCommCreate "
               "(NCCL's check that a communicator supports symmetric memory, which "
               "ncclCommWindowRegister needs) failed: %s%s%s",
               g->world, ncclGetErrorString(r), why[0] ? ": " : "", why);
    if (r == ncclSuccess) TP_LOGI("window", "rank %d: NCCL symmetric memory supported", g->rank);
    else
      TP_LOGI("window", "rank %d: NCCL symmetric memory refused: %s", g->rank, g->window_refusal);
  }
  if (g->window_support > 0) return TP_OK;
  return TP_FAIL(TP_EREJECT, "nccl-window: %s", g->window_refusal);
}

/* NCCL's failure of call as a tp_rc: out of memory, or code with NCCL's text. */
static tp_rc nccl_failure(const tp_group *g, ncclResult_t r, tp_rc code, const char *call) {
  const char *last = ncclGetLastError(g->nccl);
  if (!last) last = "";
  if (strstr(last, "out of memory")) code = TP_EOOM;
  return TP_FAIL(code, "nccl-window: %s failed: %s%s%s", call, ncclGetErrorString(r),
                 last[0] ? ": " : "", last);
}

/* Registers [base, +bytes) as a symmetric window of the group (collective). */
static tp_rc register_window(tp_group *g, void *base, size_t bytes, ncclWindow_t *handle) {
  *handle = NULL;
  ncclResult_t r = ncclCommWindowRegister(g->nccl, base, bytes, handle, NCCL_WIN_COLL_SYMMETRIC);
  if (r != ncclSuccess)
    return nccl_failure(g, r, TP_EREJECT, "ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)");
  if (!*handle)
    return TP_FAIL(TP_EREJECT, "nccl-window: ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC) "
                               "returned no window (NCCL skipped the registration)");
  return TP_OK;
}

tp_rc tp_window_alloc(tp_group *g, size_t bytes, void **out) {
  *out = NULL;
  TP_TRY(tp_window_check_support(g));
  if (g->n_windows == TP_MAX_WINDOWS)
    return TP_FAIL(TP_EINTERNAL, "nccl-window: more than %d windows at once", TP_MAX_WINDOWS);
  const size_t size = round_up(bytes ? bytes : 1, NCCL_WIN_REQUIRED_ALIGNMENT);
  void *base = NULL;
  ncclResult_t r = ncclMemAlloc(&base, size);
  if (r != ncclSuccess) return nccl_failure(g, r, TP_ENCCL, "ncclMemAlloc");
  ncclWindow_t handle = NULL;
  tp_rc rc = register_window(g, base, size, &handle);
  const cudaError_t zeroed = rc == TP_OK ? cudaMemset(base, 0, size) : cudaSuccess;
  if (zeroed != cudaSuccess) {
    (void)cudaGetLastError();
    rc = TP_FAIL(TP_ECUDA, "nccl-window: cudaMemset of a new window of %zu bytes failed: %s", size,
                 cudaGetErrorString(zeroed));
  }
  if (rc != TP_OK) {
    if (handle && ncclCommWindowDeregister(g->nccl, handle) != ncclSuccess)
      TP_LOGW("window", "ncclCommWindowDeregister after a failure: %s", ncclGetLastError(g->nccl));
    if (ncclMemFree(base) != ncclSuccess) TP_LOGW("window", "ncclMemFree after a failure");
    return rc;
  }
  g->windows[g->n_windows++] = (tp_group_window){base, size, handle};
  *out = base;
  return TP_OK;
}

static int find_window(const tp_group *g, const void *ptr) {
  for (int i = 0; i < g->n_windows; ++i)
    if (g->windows[i].base == ptr) return i;
  return -1;
}

void tp_window_free(tp_group *g, void *ptr) {
  const int i = ptr ? find_window(g, ptr) : -1;
  if (i < 0) return;
  tp_group_window w = g->windows[i];
  g->windows[i] = g->windows[--g->n_windows];
  if (ptr == g->window_scratch) {
    g->window_scratch = NULL;
    g->window_scratch_bytes = 0;
  }
  /* after an abort the device may never drain: the process's exit frees it */
  if (g->aborted || !g->nccl) return;
  if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
  ncclResult_t r = ncclCommWindowDeregister(g->nccl, w.handle);
  if (r != ncclSuccess)
    TP_LOGW("window", "ncclCommWindowDeregister: %s: %s", ncclGetErrorString(r),
            ncclGetLastError(g->nccl));
  r = ncclMemFree(w.base);
  if (r != ncclSuccess) TP_LOGW("window", "ncclMemFree: %s", ncclGetErrorString(r));
}

tp_rc tp_window_scratch(tp_group *g, size_t bytes, void **out) {
  TP_TRY(tp_window_check_support(g));
  if (bytes > g->window_scratch_bytes) {
    tp_window_free(g, g->window_scratch); /* synchronises the device first */
    void *base = NULL;
    TP_TRY(tp_window_alloc(g, bytes, &base));
    g->window_scratch = base;
    g->window_scratch_bytes = g->windows[g->n_windows - 1].bytes;
  }
  *out = g->window_scratch;
  return TP_OK;
}

int tp_window_covers(const tp_group *g, const void *ptr, size_t bytes) {
  const char *p = ptr;
  for (int i = 0; p && i < g->n_windows; ++i) {
    const char *base = g->windows[i].base;
    if (p >= base && bytes <= g->windows[i].bytes &&
        (size_t)(p - base) <= g->windows[i].bytes - bytes)
      return 1;
  }
  return 0;
}

void tp_window_release_all(tp_group *g) {
  /* newest first, the same order on every rank */
  while (g->n_windows > 0) tp_window_free(g, g->windows[g->n_windows - 1].base);
}
