/*
 * tp_window.c — the NCCL symmetric windows of a TP group (tp_window.h):
 * NCCL's support asked once, windows allocated with ncclMemAlloc (adopted
 * by the device ledger, tp_device_alloc.h, so a configuration's
 * alloc_peak_bytes counts them), agreed on by every rank and registered
 * collectively, the group's window scratch grown monotonically, every
 * window deregistered and freed before the communicator goes.
 */
#include "kernels/tp_window.h"

#include <stdio.h>
#include <string.h>

#include "common/tp_log.h"
#include "kernels/tp_agree.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_window_probe.h"

static size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

tp_rc tp_window_check_support(tp_group *g) {
  if (g->window_support == 0) {
    char why[256];
    ncclResult_t r = tp_window_probe_nccl(g->nccl, NULL, why, sizeof why);
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

/* The ranks' agreement on one step of a new window (tp_agree.h). */
static tp_rc agree(const tp_group *g, tp_rc local, const char *what, size_t size) {
  if (!g->exchange)
    return TP_FAIL(TP_EINTERNAL, "nccl-window: the group has no exchange to agree with");
  return tp_agree_alloc(g->exchange, g->exchange_ctx, g->rank, g->world, local, what, size);
}

/* This rank's memory of a new window: NCCL's (or the planted failure),
 * adopted by the device ledger for owner (NULL: its current owner). */
static tp_rc alloc_local(const tp_group *g, const tp_alloc_owner *owner, size_t size, void **base) {
  *base = NULL;
  TP_TRY(tp_fail_alloc_check(&g->test_fail_alloc, g->rank, "nccl-window: ncclMemAlloc", size));
  void *got = NULL;
  ncclResult_t r = ncclMemAlloc(&got, size);
  if (r != ncclSuccess) return nccl_failure(g, r, TP_ENCCL, "ncclMemAlloc");
  tp_rc rc = owner ? tp_device_adopt_as(*owner, got, size) : tp_device_adopt(got, size);
  if (rc != TP_OK) {
    if (ncclMemFree(got) != ncclSuccess) TP_LOGW("window", "ncclMemFree after a failure");
    return rc;
  }
  *base = got;
  return TP_OK;
}

/* Gives back what alloc_local got (NULL: nothing): the ledger's record, then NCCL's memory. */
static void free_local(void *base) {
  if (!base) return;
  tp_rc rc = tp_device_disown(base);
  if (rc != TP_OK) TP_LOGW("window", "%s", tp_last_error());
  if (ncclMemFree(base) != ncclSuccess) TP_LOGW("window", "ncclMemFree of %p failed", base);
}

/* Registers [base, +size) and zero-fills it (collective). */
static tp_rc register_and_zero(tp_group *g, void *base, size_t size, ncclWindow_t *handle) {
  TP_TRY(register_window(g, base, size, handle));
  const cudaError_t zeroed = cudaMemset(base, 0, size);
  if (zeroed == cudaSuccess) return TP_OK;
  (void)cudaGetLastError();
  return TP_FAIL(TP_ECUDA, "nccl-window: cudaMemset of a new window of %zu bytes failed: %s", size,
                 cudaGetErrorString(zeroed));
}

/* A new window charged to owner (NULL: the ledger's current owner). Every
 * rank's memory is agreed on before the collective registration (a rank
 * without it would leave its peers there), and the registration after it,
 * so all ranks keep the window or none does. */
static tp_rc window_alloc(tp_group *g, const tp_alloc_owner *owner, size_t bytes, void **out) {
  *out = NULL;
  TP_TRY(tp_window_check_support(g));
  if (g->n_windows == TP_MAX_WINDOWS)
    return TP_FAIL(TP_EINTERNAL, "nccl-window: more than %d windows at once", TP_MAX_WINDOWS);
  const size_t size = round_up(bytes ? bytes : 1, NCCL_WIN_REQUIRED_ALIGNMENT);
  void *base = NULL;
  tp_rc rc = agree(g, alloc_local(g, owner, size, &base), "nccl-window: ncclMemAlloc", size);
  ncclWindow_t handle = NULL;
  if (rc == TP_OK)
    rc = agree(g, register_and_zero(g, base, size, &handle), "nccl-window: registration", size);
  if (rc != TP_OK) {
    if (handle && ncclCommWindowDeregister(g->nccl, handle) != ncclSuccess)
      TP_LOGW("window", "ncclCommWindowDeregister after a failure: %s", ncclGetLastError(g->nccl));
    free_local(base);
    return rc;
  }
  g->windows[g->n_windows++] = (tp_group_window){base, size, handle};
  *out = base;
  return TP_OK;
}

tp_rc tp_window_alloc(tp_group *g, size_t bytes, void **out) {
  return window_alloc(g, NULL, bytes, out);
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
  if (g->aborted || !g->nccl) {
    if (tp_device_disown(w.base) != TP_OK) TP_LOGW("window", "%s", tp_last_error());
    return;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
  ncclResult_t r = ncclCommWindowDeregister(g->nccl, w.handle);
  if (r != ncclSuccess)
    TP_LOGW("window", "ncclCommWindowDeregister: %s: %s", ncclGetErrorString(r),
            ncclGetLastError(g->nccl));
  free_local(w.base);
}

tp_rc tp_window_scratch(tp_group *g, size_t bytes, void **out) {
  TP_TRY(tp_window_check_support(g));
  /* the asker's share, grown or not; the window itself is the group's */
  TP_TRY(tp_device_claim(TP_SHARED_WINDOW, bytes));
  if (bytes > g->window_scratch_bytes) {
    tp_window_free(g, g->window_scratch); /* synchronises the device first */
    void *base = NULL;
    const tp_alloc_owner group = TP_ALLOC_OWNER(TP_ALLOC_GROUP, 0);
    TP_TRY(window_alloc(g, &group, bytes, &base));
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
