/*
 * tp_symm.c — symmetric workspace and signal pads over CUDA IPC or NCCL
 * symmetric windows (see tp_symm.h). An IPC handle cannot be opened in the
 * process that made it, so each rank keeps its own raw pointer and opens
 * only its peers' handles; an NCCL window hands back every rank's address
 * (its own an alias of the buffer ncclMemAlloc gave), of which the peers'
 * are kept and the own buffer stays the one allocated. On either transport
 * the ranks agree on each allocation and mapping (tp_agree.h) before the
 * next collective step, so one rank's failure fails them all, at the same
 * step, instead of leaving its peers in an exchange or a registration.
 */
#include "kernels/tp_symm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tp_log.h"
#include "kernels/tp_agree.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_symm_nccl.h"
#include "kernels/tp_window_probe.h"

enum { SYMM_GRANULE = 2 << 20 }; /* grow in 2 MiB steps */

/* The word rank r writes at byte 0 of each new window, read back by every
 * rank through NCCL's pointers ("TPSYMM" and the rank). */
#define WINDOW_COOKIE(r) (0x545053594d4d0000ull + (uint64_t)(r) + 1u)

typedef struct symm_region {
  void *ptr[TP_MAX_WORLD];    /* own allocation at [rank], peers' mappings elsewhere */
  void *mapped[TP_MAX_WORLD]; /* NCCL: every rank's address in the window, own included */
  ncclWindow_t window;        /* NCCL: the registration of ptr[rank] */
  int adopted;                /* NCCL: ptr[rank] is recorded in the device ledger */
  size_t bytes;
} symm_region;

struct tp_symm {
  int rank, world;
  tp_symm_transport transport;
  ncclComm_t nccl; /* NCCL transport: the communicator the windows are registered with */
  tp_exchange_fn exchange;
  void *ctx;
  symm_region pads;
  symm_region work;
  int grow_count;
  int frozen;
  tp_fail_alloc test_fail_alloc; /* test only: TPBENCH_TEST_FAIL_ALLOC (tp_agree.h) */
};

static void region_unmap_ipc(tp_symm *s, symm_region *r) {
  for (int p = 0; p < s->world; ++p) {
    if (!r->ptr[p]) continue;
    if (p == s->rank) {
      tp_device_release(r->ptr[p]);
    } else if (cudaIpcCloseMemHandle(r->ptr[p]) != cudaSuccess) {
      (void)cudaGetLastError();
    }
  }
}

static void region_unmap_nccl(tp_symm *s, symm_region *r) {
  if (r->window) {
    ncclResult_t res = ncclCommWindowDeregister(s->nccl, r->window);
    if (res != ncclSuccess)
      TP_LOGW("symm", "ncclCommWindowDeregister: %s: %s", ncclGetErrorString(res),
              ncclGetLastError(s->nccl));
  }
  void *own = r->ptr[s->rank];
  if (own && r->adopted && tp_device_disown(own) != TP_OK) TP_LOGW("symm", "%s", tp_last_error());
  if (own && ncclMemFree(own) != ncclSuccess) TP_LOGW("symm", "ncclMemFree of a heap window");
}

static void region_unmap(tp_symm *s, symm_region *r) {
  if (s->transport == TP_SYMM_NCCL) region_unmap_nccl(s, r);
  else region_unmap_ipc(s, r);
  memset(r, 0, sizeof *r);
}

/* The ranks' agreement on one step of mapping a region (tp_agree.h). */
static tp_rc agree(const tp_symm *s, tp_rc local, const char *what, size_t bytes) {
  return tp_agree_alloc(s->exchange, s->ctx, s->rank, s->world, local, what, bytes);
}

/* The planted failure (test only) of a workspace growth; the pads never meet it. */
static tp_rc planted_failure(const tp_symm *s, int workspace, size_t bytes) {
  if (!workspace) return TP_OK;
  return tp_fail_alloc_check(&s->test_fail_alloc, s->rank, "symmetric workspace", bytes);
}

/* This rank's part of an IPC region: allocated, zeroed, its IPC handle in *mine. */
static tp_rc region_local_ipc(tp_symm *s, symm_region *r, size_t bytes, int workspace,
                              cudaIpcMemHandle_t *mine) {
  TP_TRY(planted_failure(s, workspace, bytes));
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
  for (int p = 0; p < s->world; ++p) r->mapped[p] = r->ptr[p];
  return TP_OK;
}

/* Collective: allocates `bytes` here and maps every peer's allocation; the
 * ranks agree on their allocations before the handles are exchanged, and on
 * the mappings after. */
static tp_rc region_map_ipc(tp_symm *s, symm_region *r, size_t bytes, int workspace,
                            const char *what) {
  cudaIpcMemHandle_t mine, all[TP_MAX_WORLD];
  memset(&mine, 0, sizeof mine);
  TP_TRY(agree(s, region_local_ipc(s, r, bytes, workspace, &mine), what, bytes));
  TP_TRY(s->exchange(s->ctx, &mine, sizeof mine, all));
  return agree(s, open_peers(s, r, all), "mapping the peers' memory", bytes);
}

/* NCCL's failure of call as a tp_rc, its last error's text with it. */
static tp_rc nccl_failure(const tp_symm *s, ncclResult_t res, tp_rc code, const char *call,
                          size_t bytes) {
  const char *last = ncclGetLastError(s->nccl);
  if (!last) last = "";
  if (strstr(last, "out of memory")) code = TP_EOOM;
  return TP_FAIL(code, "symm=nccl: %s of %zu bytes failed: %s%s%s", call, bytes,
                 ncclGetErrorString(res), last[0] ? ": " : "", last);
}

static tp_rc register_window(tp_symm *s, symm_region *r) {
  void *own = r->ptr[s->rank];
  ncclResult_t res =
      ncclCommWindowRegister(s->nccl, own, r->bytes, &r->window, NCCL_WIN_COLL_SYMMETRIC);
  if (res != ncclSuccess) {
    r->window = NULL;
    return nccl_failure(s, res, TP_EREJECT, "ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)",
                        r->bytes);
  }
  if (!r->window)
    return TP_FAIL(TP_EREJECT, "symm=nccl: ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC) "
                               "returned no window (NCCL skipped the registration)");
  return TP_OK;
}

/* Every rank's cookie read through NCCL's pointers: the window maps what
 * its ranks wrote. A mismatch means this build's NCCL device headers read
 * the window's descriptor otherwise than the runtime wrote it. */
static tp_rc check_mapping(const tp_symm *s, const uint64_t *words) {
  for (int p = 0; p < s->world; ++p) {
    if (words[p] == WINDOW_COOKIE(p)) continue;
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess) version = 0;
    return TP_FAIL(TP_EINTERNAL,
                   "symm=nccl: rank %d's window read through NCCL's pointer holds %#llx, not the "
                   "%#llx it wrote: the NCCL device headers of this build (%d.%d.%d) and the "
                   "runtime (%d) disagree on the window's layout",
                   p, (unsigned long long)words[p], (unsigned long long)WINDOW_COOKIE(p),
                   NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, version);
  }
  return TP_OK;
}

/* This rank's device idle, or the failing call named (a rank's local step
 * whose result the ranks then agree on). */
static tp_rc device_idle(void) {
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess)
    return TP_FAIL(TP_ECUDA, "cudaDeviceSynchronize: %s", cudaGetErrorString(err));
  return TP_OK;
}

/* Collective: each rank's cookie into its buffer, every rank's read back
 * through the window, then the window zeroed once nobody reads it. The
 * cookie's copy is waited for before the agreement: a copy from pageable
 * memory may return before it lands, and a peer would read the old word. */
static tp_rc map_peers(tp_symm *s, symm_region *r) {
  const uint64_t cookie = WINDOW_COOKIE(s->rank);
  tp_rc rc = TP_OK;
  cudaError_t err = cudaMemcpy(r->ptr[s->rank], &cookie, sizeof cookie, cudaMemcpyHostToDevice);
  if (err != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "cudaMemcpy of the window's cookie: %s", cudaGetErrorString(err));
  if (rc == TP_OK) rc = device_idle();
  TP_TRY(agree(s, rc, "symm=nccl: writing the window's cookie", r->bytes));
  uint64_t words[TP_MAX_WORLD];
  err = tp_symm_nccl_peers(r->window, s->world, r->mapped, words);
  if (err != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "symm=nccl: reading the window's addresses (ncclGetPeerPointer): %s",
                 cudaGetErrorString(err));
  if (rc == TP_OK) rc = check_mapping(s, words);
  TP_TRY(agree(s, rc, "symm=nccl: reading every rank's window through NCCL's pointers", r->bytes));
  for (int p = 0; p < s->world; ++p)
    if (p != s->rank) r->ptr[p] = r->mapped[p];
  /* agreed too: a rank returning here alone would leave its peers in the next exchange */
  err = cudaMemset(r->ptr[s->rank], 0, r->bytes);
  rc = err == cudaSuccess
           ? device_idle()
           : TP_FAIL(TP_ECUDA, "cudaMemset of the window: %s", cudaGetErrorString(err));
  return agree(s, rc, "symm=nccl: zeroing the window", r->bytes);
}

/* This rank's NCCL window memory (or the planted failure), adopted by the
 * device ledger for the group. */
static tp_rc region_local_nccl(tp_symm *s, symm_region *r, size_t size, int workspace) {
  TP_TRY(planted_failure(s, workspace, size));
  void *base = NULL;
  ncclResult_t res = ncclMemAlloc(&base, size);
  if (res != ncclSuccess) return nccl_failure(s, res, TP_ENCCL, "ncclMemAlloc", size);
  r->ptr[s->rank] = base;
  r->bytes = size;
  TP_TRY(tp_device_adopt_as(TP_ALLOC_OWNER(TP_ALLOC_GROUP, 0), base, size));
  r->adopted = 1;
  return TP_OK;
}

/* Collective: `bytes` of NCCL window here and every peer's part mapped;
 * nobody registers (collective) unless every rank has its buffer. */
static tp_rc region_map_nccl(tp_symm *s, symm_region *r, size_t bytes, int workspace,
                             const char *what) {
  const size_t size = (bytes + NCCL_WIN_REQUIRED_ALIGNMENT - 1) / NCCL_WIN_REQUIRED_ALIGNMENT *
                      NCCL_WIN_REQUIRED_ALIGNMENT;
  TP_TRY(agree(s, region_local_nccl(s, r, size, workspace), what, size));
  TP_TRY(agree(s, register_window(s, r), "symm=nccl: registering the window", size));
  return map_peers(s, r);
}

/* Collective: a region of `bytes` on the heap's transport; a failure on any
 * rank fails every rank alike, each freeing its own. */
static tp_rc region_map(tp_symm *s, symm_region *r, size_t bytes, int workspace) {
  const char *what = workspace ? "symmetric workspace" : "signal pads";
  tp_rc rc = s->transport == TP_SYMM_NCCL ? region_map_nccl(s, r, bytes, workspace, what)
                                          : region_map_ipc(s, r, bytes, workspace, what);
  if (rc != TP_OK) region_unmap(s, r);
  return rc;
}

/* Every rank's pad is zeroed before anyone may signal into it. */
static tp_rc meet_after_pads(tp_symm *s) {
  return agree(s, device_idle(), "zeroing the signal pads", s->pads.bytes);
}

static tp_rc symm_create(int rank, int world, tp_symm_transport transport, ncclComm_t comm,
                         tp_exchange_fn exchange, void *ctx, tp_symm **out) {
  if (world < 1 || world > TP_MAX_WORLD || rank < 0 || rank >= world)
    return TP_FAIL(TP_EUSAGE, "TP degree %d (rank %d) outside 1..%d", world, rank, TP_MAX_WORLD);
  tp_fail_alloc planted;
  TP_TRY(tp_fail_alloc_parse(getenv(TP_FAIL_ALLOC_ENV), world, &planted));
  tp_symm *s = calloc(1, sizeof *s);
  if (!s) return TP_FAIL(TP_EOOM, "out of host memory for the symmetric heap");
  s->test_fail_alloc = planted;
  s->rank = rank;
  s->world = world;
  s->transport = transport;
  s->nccl = comm;
  s->exchange = exchange;
  s->ctx = ctx;
  tp_rc rc = region_map(s, &s->pads, TP_SIG_SLOTS * sizeof(uint32_t), 0);
  if (rc == TP_OK) rc = meet_after_pads(s);
  if (rc != TP_OK) {
    tp_symm_destroy(s);
    return rc;
  }
  *out = s;
  return TP_OK;
}

tp_rc tp_symm_create(int rank, int world, tp_exchange_fn exchange, void *ctx, tp_symm **out) {
  return symm_create(rank, world, TP_SYMM_IPC, NULL, exchange, ctx, out);
}

/* The LSA team must be the whole world: ncclGetPeerPointer reaches only its members. */
static tp_rc check_lsa_team(ncclComm_t comm, int world) {
  int lsa = 0;
  char why[256];
  ncclResult_t res = tp_window_probe_nccl(comm, &lsa, why, sizeof why);
  if (res != ncclSuccess)
    return TP_FAIL(TP_EREJECT, "symm=nccl: ncclDevCommCreate (to read the LSA team) failed: %s%s%s",
                   ncclGetErrorString(res), why[0] ? ": " : "", why);
  if (lsa != world)
    return TP_FAIL(TP_EREJECT,
                   "symm=nccl: the communicator's LSA (NVLink load/store) team has %d of its %d "
                   "ranks; the heap reaches its peers through LSA pointers only",
                   lsa, world);
  return TP_OK;
}

tp_rc tp_symm_create_nccl(int rank, int world, ncclComm_t comm, tp_exchange_fn exchange, void *ctx,
                          tp_symm **out) {
  if (!comm) return TP_FAIL(TP_EUSAGE, "symm=nccl: no NCCL communicator");
  TP_TRY(check_lsa_team(comm, world));
  TP_TRY(symm_create(rank, world, TP_SYMM_NCCL, comm, exchange, ctx, out));
  TP_LOGI("symm", "rank %d/%d: symmetric heap on NCCL windows", rank, world);
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
  /* Nobody may still be reading or writing the old buffer. Both meetings
   * are agreements: a rank whose synchronisation failed returning alone
   * would leave its peers in the exchange. */
  TP_TRY(agree(s, device_idle(), "idling the device before the workspace grows", rounded));
  size_t old = s->work.bytes;
  region_unmap(s, &s->work);
  TP_TRY(region_map(s, &s->work, rounded, 1));
  TP_TRY(agree(s, device_idle(), "the grown workspace zeroed on every rank", rounded));
  s->grow_count++;
  TP_LOGI("symm", "%s workspace grew from %zu to %zu bytes (growth %d)",
          tp_symm_transport_name(s->transport), old, s->work.bytes, s->grow_count);
  return TP_OK;
}

void *tp_symm_ptr(const tp_symm *s, int rank) { return s->work.ptr[rank]; }

void *tp_symm_mapped_ptr(const tp_symm *s, int rank) { return s->work.mapped[rank]; }

tp_symm_transport tp_symm_transport_of(const tp_symm *s) { return s->transport; }

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
