/*
 * tp_symm.c — symmetric workspace and signal pads over CUDA IPC (see
 * tp_symm.h). An IPC handle cannot be opened in the process that made it,
 * so each rank keeps its own raw pointer and opens only its peers' handles.
 * The ranks agree on each allocation and mapping (tp_agree.h) before the
 * next exchange, so one rank's failure fails them all, at the same step.
 */
#include "kernels/tp_symm.h"

#include <stdlib.h>
#include <string.h>

#include "common/tp_log.h"
#include "kernels/tp_agree.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"

enum { SYMM_GRANULE = 2 << 20 }; /* grow in 2 MiB steps */

typedef struct symm_region {
  void *ptr[TP_MAX_WORLD]; /* own allocation at [rank], IPC mappings elsewhere */
  size_t bytes;
} symm_region;

struct tp_symm {
  int rank, world;
  tp_exchange_fn exchange;
  void *ctx;
  symm_region pads;
  symm_region work;
  int grow_count;
  int frozen;
  tp_fail_alloc test_fail_alloc; /* test only: TPBENCH_TEST_FAIL_ALLOC (tp_agree.h) */
};

static void region_unmap(tp_symm *s, symm_region *r) {
  for (int p = 0; p < s->world; ++p) {
    if (!r->ptr[p]) continue;
    if (p == s->rank) {
      tp_device_release(r->ptr[p]);
    } else if (cudaIpcCloseMemHandle(r->ptr[p]) != cudaSuccess) {
      (void)cudaGetLastError();
    }
    r->ptr[p] = NULL;
  }
  r->bytes = 0;
}

/* The ranks' agreement on one step of mapping a region (tp_agree.h). */
static tp_rc agree(const tp_symm *s, tp_rc local, const char *what, size_t bytes) {
  return tp_agree_alloc(s->exchange, s->ctx, s->rank, s->world, local, what, bytes);
}

/* This rank's part of a region: allocated (the workspace may meet the
 * planted failure), zeroed, its IPC handle in *mine. */
static tp_rc region_local(tp_symm *s, symm_region *r, size_t bytes, int workspace,
                          cudaIpcMemHandle_t *mine) {
  if (workspace)
    TP_TRY(tp_fail_alloc_check(&s->test_fail_alloc, s->rank, "symmetric workspace", bytes));
  TP_TRY(tp_device_malloc_as(TP_ALLOC_OWNER(TP_ALLOC_GROUP, 0), &r->ptr[s->rank], bytes));
  r->bytes = bytes;
  TP_CUDA(cudaMemset(r->ptr[s->rank], 0, bytes));
  TP_CUDA(cudaIpcGetMemHandle(mine, r->ptr[s->rank]));
  return TP_OK;
}

static tp_rc open_peers(tp_symm *s, symm_region *r, const cudaIpcMemHandle_t *all) {
  for (int p = 0; p < s->world; ++p) {
    if (p == s->rank) continue;
    TP_CUDA(cudaIpcOpenMemHandle(&r->ptr[p], all[p], cudaIpcMemLazyEnablePeerAccess));
  }
  return TP_OK;
}

/* Collective: allocates `bytes` here and maps every peer's allocation. The
 * ranks agree on their allocations before the handles are exchanged, and on
 * the mappings after: a failure on any rank fails every rank alike (each
 * freeing its own) instead of leaving its peers in the next exchange. */
static tp_rc region_map(tp_symm *s, symm_region *r, size_t bytes, int workspace) {
  const char *what = workspace ? "symmetric workspace" : "signal pads";
  cudaIpcMemHandle_t mine, all[TP_MAX_WORLD];
  memset(&mine, 0, sizeof mine);
  tp_rc rc = agree(s, region_local(s, r, bytes, workspace, &mine), what, bytes);
  if (rc == TP_OK) rc = s->exchange(s->ctx, &mine, sizeof mine, all);
  if (rc == TP_OK) rc = agree(s, open_peers(s, r, all), "mapping the peers' memory", bytes);
  if (rc != TP_OK) region_unmap(s, r);
  return rc;
}

tp_rc tp_symm_create(int rank, int world, tp_exchange_fn exchange, void *ctx, tp_symm **out) {
  if (world < 1 || world > TP_MAX_WORLD || rank < 0 || rank >= world)
    return TP_FAIL(TP_EUSAGE, "TP degree %d (rank %d) outside 1..%d", world, rank, TP_MAX_WORLD);
  tp_fail_alloc planted;
  TP_TRY(tp_fail_alloc_parse(getenv(TP_FAIL_ALLOC_ENV), world, &planted));
  tp_symm *s = calloc(1, sizeof *s);
  if (!s) return TP_FAIL(TP_EOOM, "out of host memory for the symmetric heap");
  s->test_fail_alloc = planted;
  s->rank = rank;
  s->world = world;
  s->exchange = exchange;
  s->ctx = ctx;
  tp_rc rc = region_map(s, &s->pads, TP_SIG_SLOTS * sizeof(uint32_t), 0);
  if (rc != TP_OK) {
    tp_symm_destroy(s);
    return rc;
  }
  /* Every rank's pad is zeroed before anyone may signal into it. */
  rc = TP_OK;
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "cudaDeviceSynchronize: %s", cudaGetErrorString(err));
  char token = 1, tokens[TP_MAX_WORLD];
  if (rc == TP_OK) rc = exchange(ctx, &token, 1, tokens);
  if (rc != TP_OK) {
    tp_symm_destroy(s);
    return rc;
  }
  *out = s;
  return TP_OK;
}

tp_rc tp_symm_reserve(tp_symm *s, size_t bytes) {
  TP_TRY(tp_device_claim(TP_SHARED_SYMM, bytes)); /* the asker's share, grown or not */
  if (bytes <= s->work.bytes) return TP_OK;
  if (s->frozen)
    return TP_FAIL(TP_EREJECT,
                   "symmetric workspace would grow from %zu to %zu bytes while frozen (CUDA graph "
                   "capture): reserve it before capture",
                   s->work.bytes, bytes);
  size_t rounded = (bytes + SYMM_GRANULE - 1) / SYMM_GRANULE * SYMM_GRANULE;
  /* Every rank agrees on the size: a mismatch means the ops diverged. */
  uint64_t mine = rounded, all[TP_MAX_WORLD];
  TP_TRY(s->exchange(s->ctx, &mine, sizeof mine, all));
  for (int p = 0; p < s->world; ++p)
    if (all[p] != mine)
      return TP_FAIL(TP_EINTERNAL,
                     "ranks disagree on the workspace size: rank %d asks %llu, rank %d asks %llu",
                     s->rank, (unsigned long long)mine, p, (unsigned long long)all[p]);
  /* Nobody may still be reading or writing the old buffer. */
  TP_CUDA(cudaDeviceSynchronize());
  char token = 1, tokens[TP_MAX_WORLD];
  TP_TRY(s->exchange(s->ctx, &token, 1, tokens));
  size_t old = s->work.bytes;
  region_unmap(s, &s->work);
  TP_TRY(region_map(s, &s->work, rounded, 1));
  TP_CUDA(cudaDeviceSynchronize());
  TP_TRY(s->exchange(s->ctx, &token, 1, tokens));
  s->grow_count++;
  TP_LOGI("symm", "workspace grew from %zu to %zu bytes (growth %d)", old, rounded, s->grow_count);
  return TP_OK;
}

void *tp_symm_ptr(const tp_symm *s, int rank) { return s->work.ptr[rank]; }

tp_pad_set tp_symm_pads(const tp_symm *s) {
  tp_pad_set set;
  memset(&set, 0, sizeof set);
  for (int p = 0; p < s->world; ++p) set.pad[p] = (uint32_t *)s->pads.ptr[p];
  return set;
}

size_t tp_symm_size(const tp_symm *s) { return s->work.bytes; }
int tp_symm_grow_count(const tp_symm *s) { return s->grow_count; }
void tp_symm_freeze(tp_symm *s, int frozen) { s->frozen = frozen; }

void tp_symm_destroy(tp_symm *s) {
  if (!s) return;
  if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
  region_unmap(s, &s->work);
  region_unmap(s, &s->pads);
  free(s);
}
