/*
 * ops_worker.c — one rank's side of `tpbench ops` (see ops_worker.h).
 *
 * Every rank walks the same matrix in the same order; the ranks meet over
 * the rendezvous after each step that can fail (prepare, the timed window,
 * numerics) so they agree on the outcome before anyone enters the next
 * collective. Rank 0 alone touches the database.
 */
#include "ops_worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/tp_log.h"
#include "../../kernels/tp_cuda_check.h"
#include "../../kernels/tp_device.h"
#include "../../kernels/tp_linear.h"
#include "../../report/tp_report.h"
#include "../../store/tp_store.h"
#include "../stats.h"
#include "ops_trace.h"
#include "tp_buildinfo.h"

enum { OUTCOME_MSG = 400 };

/* What one rank says about a step; all ranks exchange it. */
typedef struct rank_outcome {
  int32_t rc;
  char msg[OUTCOME_MSG];
} rank_outcome;

/* This rank's tensors of one case, with a copy of stock's outputs (y, dx,
 * dw) to check dist_gemm against. */
typedef struct case_buffers {
  void *x, *w[TP_MAX_WEIGHTS], *y[TP_MAX_WEIGHTS], *dy[TP_MAX_WEIGHTS], *dx, *dw[TP_MAX_WEIGHTS];
  void *saved;
  void *stock_y[TP_MAX_WEIGHTS], *stock_dx, *stock_dw[TP_MAX_WEIGHTS];
  int have_stock;
  double *acc; /* 5 doubles per compared tensor, device: compare accumulators */
} case_buffers;

enum { MAX_COMPARED = 2 * TP_MAX_WEIGHTS + 1 };

typedef struct worker_state {
  tp_worker_ctx *ctx;
  tp_collector *collector; /* NULL: no traced windows */
  const tp_ops_options *opts;
  tp_store *store; /* rank 0 only */
  int64_t run_id;
  cudaEvent_t *events;
  double *samples_us;     /* measure_iters, this rank */
  double *all_samples_us; /* world * measure_iters, gathered */
  int done, total;
} worker_state;

/* ---- agreement between ranks ------------------------------------------------ */

static tp_config_status status_of(tp_rc rc) {
  switch (rc) {
  case TP_OK: return TP_STATUS_OK;
  case TP_EREJECT: return TP_STATUS_REJECTED;
  case TP_EOOM: return TP_STATUS_OOM;
  case TP_ETIMEOUT: return TP_STATUS_TIMEOUT;
  default: return TP_STATUS_FAILED;
  }
}

/* Exchanges each rank's outcome of a step. On return *agreed is TP_OK only if
 * every rank succeeded; otherwise the first failing rank's code, and reason
 * names that rank and its message. */
static tp_rc agree(worker_state *ws, tp_rc local, tp_rc *agreed, char *reason, size_t cap) {
  rank_outcome mine, all[TP_MAX_WORLD];
  memset(&mine, 0, sizeof mine);
  mine.rc = (int32_t)local;
  if (local != TP_OK) snprintf(mine.msg, sizeof mine.msg, "%s", tp_last_error());
  TP_TRY(tp_rdzv_allgather(ws->ctx->rdzv, &mine, sizeof mine, all));
  *agreed = TP_OK;
  for (int r = 0; r < ws->ctx->world; ++r) {
    if (all[r].rc == TP_OK) continue;
    *agreed = (tp_rc)all[r].rc;
    if (ws->ctx->world > 1 && all[r].rc != TP_EREJECT)
      snprintf(reason, cap, "rank %d: %s", r, all[r].msg);
    else snprintf(reason, cap, "%s", all[r].msg);
    break;
  }
  return TP_OK;
}

/* ---- run header -------------------------------------------------------------- */

static void read_driver_version(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (!f) return;
  char line[512];
  if (fgets(line, sizeof line, f)) {
    /* "NVRM version: NVIDIA UNIX [Open Kernel Module for] x86_64 ... 580.159.04  <date>":
     * the version is the first word made of digits and dots with a dot in it. */
    for (char *word = strtok(line, " \t\n"); word; word = strtok(NULL, " \t\n")) {
      if (strspn(word, "0123456789.") == strlen(word) && strchr(word, '.') && word[0] != '.') {
        snprintf(buf, cap, "%s", word);
        break;
      }
    }
  }
  fclose(f);
}

static tp_rc begin_run(worker_state *ws) {
  TP_TRY(tp_store_open(ws->opts->db_path, 1, &ws->store));
  char cuda[32], driver_api[32], nccl[32], cublas[32], driver[64], host[256];
  tp_versions(cuda, sizeof cuda, driver_api, sizeof driver_api, nccl, sizeof nccl, cublas,
              sizeof cublas);
  read_driver_version(driver, sizeof driver);
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  tp_run_info info = {0};
  info.commit = TP_BUILD_COMMIT;
  info.dirty = TP_BUILD_DIRTY;
  info.host = host;
  info.gpu_name = ws->ctx->group->device_name;
  info.gpu_count = ws->ctx->world;
  info.driver_version = driver;
  info.cuda_version = cuda;
  info.nccl_version = nccl;
  info.cublas_version = cublas;
  info.command_line = ws->opts->command_line;
  info.command = "ops";
  info.warmup_iters = ws->opts->warmup_iters;
  info.measure_iters = ws->opts->measure_iters;
  return tp_store_begin_run(ws->store, &info, &ws->run_id);
}

/* ---- tensors ------------------------------------------------------------------ */

static tp_linear_kind linear_kind(tp_op_kind op) {
  switch (op) {
  case TP_OP_AG_LINEAR: return TP_LINEAR_AG;
  case TP_OP_AG_LINEAR_MULTI: return TP_LINEAR_AG_MULTI;
  case TP_OP_LINEAR_RS: return TP_LINEAR_RS;
  }
  return TP_LINEAR_AG;
}

static tp_linear_desc case_desc(const tp_ops_case *c) {
  tp_linear_desc d;
  memset(&d, 0, sizeof d);
  d.kind = linear_kind(c->proj.op);
  d.dtype = strcmp(c->dtype, "fp32") == 0 ? TP_FP32 : TP_BF16;
  d.tokens = c->tokens;
  d.in_features = c->proj.k;
  d.out_features = c->proj.n;
  d.n_weights = c->proj.n_weights;
  d.backward = strcmp(c->pass, "fwd") != 0;
  return d;
}

static void free_buffers(case_buffers *b) {
  void *all[] = {b->x, b->dx, b->saved, b->stock_dx, b->acc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) cudaFree(all[i]);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    void *per[] = {b->w[i], b->y[i], b->dy[i], b->dw[i], b->stock_y[i], b->stock_dw[i]};
    for (size_t j = 0; j < sizeof per / sizeof per[0]; ++j) cudaFree(per[j]);
  }
  memset(b, 0, sizeof *b);
}

static tp_rc alloc_random(void **buf, tp_dtype dt, size_t count, uint64_t seed, float scale,
                          cudaStream_t s) {
  TP_CUDA(cudaMalloc(buf, count * tp_dtype_bytes(dt)));
  TP_CUDA(tp_launch_fill_random(dt, *buf, count, seed, scale, s));
  return TP_OK;
}

/* Allocates the case's tensors and fills inputs and weights with random
 * values (never zeros), seeded per case, rank and tensor. */
static tp_rc alloc_buffers(tp_group *g, const tp_linear_plan *p, int case_index, case_buffers *b) {
  const tp_dtype dt = p->desc.dtype;
  const size_t e = tp_dtype_bytes(dt);
  const uint64_t seed = ((uint64_t)case_index << 20) ^ ((uint64_t)g->rank << 8);
  const size_t nx = tp_linear_x_elems(p), nw = tp_linear_w_elems(p), ny = tp_linear_y_elems(p);
  cudaStream_t s = g->main_stream;
  TP_TRY(alloc_random(&b->x, dt, nx, seed + 1, 1.0f, s));
  /* Weights scaled by 1/sqrt(K) keep outputs near unit size. */
  const float w_scale = 1.0f / sqrtf((float)p->gemm_k);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(alloc_random(&b->w[i], dt, nw, seed + 2 + (uint64_t)i, w_scale, s));
    TP_CUDA(cudaMalloc(&b->y[i], ny * e));
    TP_CUDA(cudaMalloc(&b->stock_y[i], ny * e));
    if (!p->desc.backward) continue;
    TP_TRY(alloc_random(&b->dy[i], dt, ny, seed + 10 + (uint64_t)i, 1.0f, s));
    TP_CUDA(cudaMalloc(&b->dw[i], nw * e));
    TP_CUDA(cudaMalloc(&b->stock_dw[i], nw * e));
  }
  if (p->desc.backward) {
    TP_CUDA(cudaMalloc(&b->dx, nx * e));
    TP_CUDA(cudaMalloc(&b->stock_dx, nx * e));
  }
  TP_CUDA(cudaMalloc((void **)&b->acc, (size_t)5 * MAX_COMPARED * sizeof(double)));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

/* ---- timing -------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for an event without blocking forever: a hung peer or collective
 * becomes TP_ETIMEOUT after timeout_s. */
static tp_rc wait_event(cudaEvent_t ev, int timeout_s, const char *what) {
  double deadline = now_s() + timeout_s;
  for (;;) {
    cudaError_t st = cudaEventQuery(ev);
    if (st == cudaSuccess) return TP_OK;
    if (st != cudaErrorNotReady) TP_CUDA(st);
    if (now_s() > deadline)
      return TP_FAIL(TP_ETIMEOUT, "%s did not finish within %d s", what, timeout_s);
    usleep(200);
  }
}

static tp_linear_tensors tensors_of(const tp_linear_plan *p, case_buffers *b) {
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  t.x = b->x;
  t.dx = b->dx;
  t.saved = p->desc.save_gathered ? b->saved : NULL;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    t.w[i] = b->w[i];
    t.y[i] = b->y[i];
    t.dy[i] = b->dy[i];
    t.dw[i] = b->dw[i];
  }
  return t;
}

/* One timed iteration is the pass the case names: the forward, the backward
 * alone (its forward ran once before the window), or both. */
static tp_rc run_iters(tp_group *g, const tp_linear_plan *p, case_buffers *b, int bwd_only, int n,
                       cudaEvent_t *marks) {
  tp_linear_tensors t = tensors_of(p, b);
  for (int i = 0; i < n; ++i) {
    if (bwd_only) TP_TRY(tp_linear_backward(g, p, &t));
    else TP_TRY(tp_linear_step(g, p, &t));
    if (marks) TP_CUDA(cudaEventRecord(marks[i + 1], g->main_stream));
  }
  return TP_OK;
}

/* Warm-up, a host barrier so every rank starts the window together, then the
 * timed window: one event before the first iteration and one after each. */
static tp_rc time_window(worker_state *ws, const tp_linear_plan *p, case_buffers *b, int bwd_only) {
  tp_group *g = ws->ctx->group;
  const int iters = ws->opts->measure_iters;
  if (bwd_only) {
    tp_linear_tensors t = tensors_of(p, b);
    TP_TRY(tp_linear_forward(g, p, &t));
  }
  TP_TRY(run_iters(g, p, b, bwd_only, ws->opts->warmup_iters, NULL));
  TP_CUDA(cudaEventRecord(ws->events[0], g->main_stream));
  TP_TRY(wait_event(ws->events[0], ws->opts->window_timeout_s, "the warm-up window"));
  TP_TRY(tp_rdzv_barrier(ws->ctx->rdzv));
  TP_CUDA(cudaEventRecord(ws->events[0], g->main_stream));
  TP_TRY(run_iters(g, p, b, bwd_only, iters, ws->events));
  TP_TRY(wait_event(ws->events[iters], ws->opts->window_timeout_s, "the measurement window"));
  for (int i = 0; i < iters; ++i) {
    float ms = 0.0f;
    TP_CUDA(cudaEventElapsedTime(&ms, ws->events[i], ws->events[i + 1]));
    ws->samples_us[i] = 1000.0 * (double)ms;
  }
  return TP_OK;
}

/* ---- numerics ------------------------------------------------------------------- */

typedef struct numerics {
  double diff2, ref2, max_abs, differ, nonfinite;
} numerics;

/* Compares this rank's outputs with the stock outputs of the same inputs and
 * sums the comparison over all ranks. */
static tp_rc compare_with_stock(worker_state *ws, const tp_linear_plan *p, case_buffers *b,
                                numerics *out) {
  tp_group *g = ws->ctx->group;
  double host[5 * MAX_COMPARED];
  const void *ours[MAX_COMPARED], *theirs[MAX_COMPARED];
  size_t counts[MAX_COMPARED];
  int n = 0;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    ours[n] = b->y[i], theirs[n] = b->stock_y[i], counts[n++] = tp_linear_y_elems(p);
    if (p->desc.backward)
      ours[n] = b->dw[i], theirs[n] = b->stock_dw[i], counts[n++] = tp_linear_w_elems(p);
  }
  if (p->desc.backward)
    ours[n] = b->dx, theirs[n] = b->stock_dx, counts[n++] = tp_linear_x_elems(p);
  TP_CUDA(cudaMemsetAsync(b->acc, 0, sizeof host, g->main_stream));
  for (int i = 0; i < n; ++i)
    TP_CUDA(tp_launch_compare(p->desc.dtype, ours[i], theirs[i], counts[i],
                              b->acc + (size_t)5 * (size_t)i, g->main_stream));
  TP_CUDA(cudaMemcpyAsync(host, b->acc, sizeof host, cudaMemcpyDeviceToHost, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  numerics mine = {0};
  for (int i = 0; i < n; ++i) {
    mine.diff2 += host[(size_t)5 * (size_t)i];
    mine.ref2 += host[(size_t)5 * (size_t)i + 1];
    mine.max_abs = fmax(mine.max_abs, host[(size_t)5 * (size_t)i + 2]);
    mine.differ += host[(size_t)5 * (size_t)i + 3];
    mine.nonfinite += host[(size_t)5 * (size_t)i + 4];
  }
  numerics all[TP_MAX_WORLD];
  TP_TRY(tp_rdzv_allgather(ws->ctx->rdzv, &mine, sizeof mine, all));
  memset(out, 0, sizeof *out);
  for (int r = 0; r < ws->ctx->world; ++r) {
    out->diff2 += all[r].diff2;
    out->ref2 += all[r].ref2;
    out->max_abs = fmax(out->max_abs, all[r].max_abs);
    out->differ += all[r].differ;
    out->nonfinite += all[r].nonfinite;
  }
  return TP_OK;
}

/* Copies stock's outputs aside: the dist_gemm runs of the case are checked against them. */
static tp_rc keep_stock_outputs(tp_group *g, const tp_linear_plan *p, case_buffers *b) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  cudaStream_t s = g->main_stream;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_CUDA(cudaMemcpyAsync(b->stock_y[i], b->y[i], tp_linear_y_elems(p) * e,
                            cudaMemcpyDeviceToDevice, s));
    if (p->desc.backward)
      TP_CUDA(cudaMemcpyAsync(b->stock_dw[i], b->dw[i], tp_linear_w_elems(p) * e,
                              cudaMemcpyDeviceToDevice, s));
  }
  if (p->desc.backward)
    TP_CUDA(
        cudaMemcpyAsync(b->stock_dx, b->dx, tp_linear_x_elems(p) * e, cudaMemcpyDeviceToDevice, s));
  TP_CUDA(cudaStreamSynchronize(s));
  b->have_stock = 1;
  return TP_OK;
}

/* Bounds for dist_gemm against stock: bf16 rounds the output to 2^-9. */
static double numerics_tolerance(tp_dtype dt) { return dt == TP_BF16 ? 1e-2 : 1e-5; }

/* ---- one configuration ------------------------------------------------------------ */

static tp_backend backend_of(tp_ops_role role) {
  switch (role) {
  case TP_OPS_STOCK: return TP_BACKEND_STOCK;
  case TP_OPS_DIST_GEMM: return TP_BACKEND_DIST;
  case TP_OPS_GEMM: return TP_BACKEND_GEMM_ONLY;
  case TP_OPS_COMM: return TP_BACKEND_COMM_ONLY;
  }
  return TP_BACKEND_STOCK;
}

static const char *engine_of(const tp_linear_plan *p) {
  if (p->backend == TP_BACKEND_GEMM_ONLY) return "cublaslt";
  switch (p->schedule) {
  case TP_SCHED_CE: return "copy-engine";
  case TP_SCHED_SM: return "sm-kernel";
  case TP_SCHED_NCCL: return "nccl";
  default: return "none";
  }
}

typedef struct config_outcome {
  tp_ops_trace trace;
  int have_trace;
  tp_config_status status;
  char reason[OUTCOME_MSG + 32];
  tp_result result;
  int have_result;
  tp_linear_plan plan;
  int have_plan;
} config_outcome;

static tp_rc fill_result(worker_state *ws, const tp_ops_config *cfg, config_outcome *oc) {
  double *slowest = malloc(sizeof(double) * (size_t)ws->opts->measure_iters);
  if (!slowest) return TP_FAIL(TP_EOOM, "no host memory for samples");
  const double *per_rank[TP_MAX_WORLD];
  for (int r = 0; r < ws->ctx->world; ++r)
    per_rank[r] = ws->all_samples_us + (size_t)r * (size_t)ws->opts->measure_iters;
  tp_rc rc = tp_stats_slowest_rank(per_rank, ws->ctx->world, ws->opts->measure_iters, slowest);
  tp_stats st;
  if (rc == TP_OK) rc = tp_stats_compute(slowest, ws->opts->measure_iters, &st);
  free(slowest);
  TP_TRY(rc);
  tp_result *res = &oc->result;
  res->n_samples = st.n;
  res->median_us = st.median;
  res->p10_us = st.p10;
  res->p90_us = st.p90;
  res->mean_us = st.mean;
  res->min_us = st.min;
  res->max_us = st.max;
  res->cv = st.cv;
  res->tokens_per_s = (double)cfg->axes.tokens / (st.median * 1e-6);
  res->flops = cfg->flops;
  res->tflops =
      cfg->flops > 0 ? cfg->flops / (double)ws->ctx->world / (st.median * 1e-6) / 1e12 : NAN;
  res->bytes_moved = (double)oc->plan.comm_bytes;
  /* the symmetric workspace (or stock scratch) plus a saved gathered input */
  res->workspace_bytes = (int64_t)(oc->plan.workspace_bytes + oc->plan.saved_bytes);
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    res->peak_mem_bytes = (int64_t)(total_b - free_b);
  res->max_abs_err = NAN;
  res->rel_err = NAN;
  oc->have_result = 1;
  return TP_OK;
}

static void set_failure(config_outcome *oc, tp_rc rc, const char *reason) {
  oc->status = status_of(rc);
  snprintf(oc->reason, sizeof oc->reason, "%s", reason);
  oc->have_result = 0;
}

static tp_rc alloc_saved(case_buffers *b, size_t bytes) {
  TP_CUDA(cudaMalloc(&b->saved, bytes));
  return TP_OK;
}

typedef struct traced_step {
  tp_group *g;
  const tp_linear_plan *p;
  case_buffers *b;
  int bwd_only;
} traced_step;

static tp_rc one_step(void *arg) {
  traced_step *s = arg;
  return run_iters(s->g, s->p, s->b, s->bwd_only, 1, NULL);
}

/* The schedule a trace must show, or NULL where nothing moves (GEMM alone). */
static const char *evidence_schedule(const tp_linear_plan *p) {
  if (p->backend == TP_BACKEND_GEMM_ONLY) return NULL;
  if (p->backend == TP_BACKEND_DIST) return tp_schedule_name(p->schedule);
  return "nccl";
}

/* The traced window after the measured one; a schedule the trace does not
 * confirm turns the configuration into a failure, its timing kept. */
static tp_rc trace_config(worker_state *ws, const tp_ops_case *c, case_buffers *b,
                          config_outcome *oc) {
  const int bwd_only = strcmp(c->pass, "bwd") == 0, fwd = !bwd_only,
            bwd = strcmp(c->pass, "fwd") != 0;
  traced_step step = {ws->ctx->group, &oc->plan, b, bwd_only};
  tp_ops_trace *t = &oc->trace;
  memset(t, 0, sizeof *t);
  t->iters = ws->opts->trace_iters;
  t->schedule = evidence_schedule(&oc->plan);
  t->transfers_per_iter = tp_linear_transfers(&oc->plan, fwd, bwd);
  if (t->transfers_per_iter == 0) t->schedule = NULL;
  t->untraced_median_us = oc->result.median_us;
  TP_TRY(tp_ops_trace_window(ws->ctx, ws->collector, one_step, &step, t));
  oc->have_trace = ws->ctx->rank == 0;
  if (oc->have_trace && !t->record.evidence_ok) {
    oc->status = TP_STATUS_FAILED;
    snprintf(oc->reason, sizeof oc->reason, "schedule evidence: %s", t->record.evidence_message);
  }
  return TP_OK;
}

/* Runs one configuration on every rank. Returns an error only when the
 * worker must stop (the outcome is still filled for recording). */
static tp_rc run_config(worker_state *ws, const tp_ops_case *c, const tp_ops_config *cfg,
                        case_buffers *b, config_outcome *oc) {
  tp_group *g = ws->ctx->group;
  char reason[OUTCOME_MSG + 16];
  tp_rc agreed = TP_OK;
  memset(oc, 0, sizeof *oc);
  if (cfg->rejected) {
    set_failure(oc, TP_EREJECT, cfg->reason);
    return TP_OK;
  }
  tp_schedule requested = TP_SCHED_AUTO;
  if (cfg->role == TP_OPS_DIST_GEMM && cfg->axes.schedule)
    TP_TRY(tp_schedule_parse(cfg->axes.schedule, &requested));
  tp_linear_desc desc = case_desc(c);
  desc.save_gathered = cfg->axes.save_gathered;
  tp_rc rc =
      tp_linear_plan_make(g, &desc, backend_of(cfg->role), requested, cfg->axes.chunks, &oc->plan);
  oc->have_plan = rc == TP_OK;
  if (rc == TP_OK) rc = tp_linear_prepare(g, &oc->plan);
  if (rc == TP_OK && oc->plan.saved_bytes && !b->saved) rc = alloc_saved(b, oc->plan.saved_bytes);
  TP_TRY(agree(ws, rc, &agreed, reason, sizeof reason));
  if (agreed != TP_OK) {
    set_failure(oc, agreed, reason);
    return TP_OK;
  }
  rc = time_window(ws, &oc->plan, b, strcmp(c->pass, "bwd") == 0);
  if (rc == TP_ETIMEOUT || rc == TP_ECUDA) {
    /* The device may be wedged: record and stop this worker. */
    set_failure(oc, rc, tp_last_error());
    return rc;
  }
  TP_TRY(agree(ws, rc, &agreed, reason, sizeof reason));
  if (agreed != TP_OK) {
    set_failure(oc, agreed, reason);
    return TP_OK;
  }
  TP_TRY(tp_rdzv_allgather(ws->ctx->rdzv, ws->samples_us,
                           sizeof(double) * (size_t)ws->opts->measure_iters, ws->all_samples_us));
  TP_TRY(fill_result(ws, cfg, oc));
  oc->status = TP_STATUS_OK;
  if (cfg->role == TP_OPS_STOCK) {
    TP_TRY(keep_stock_outputs(g, &oc->plan, b));
  } else if (cfg->role == TP_OPS_DIST_GEMM && b->have_stock) {
    numerics nm;
    TP_TRY(compare_with_stock(ws, &oc->plan, b, &nm));
    oc->result.rel_err = sqrt(nm.diff2 / (nm.ref2 > 0 ? nm.ref2 : 1.0));
    oc->result.max_abs_err = nm.max_abs;
    oc->result.numerics_ref = "stock";
    double tol = numerics_tolerance(desc.dtype);
    if (nm.nonfinite > 0 || oc->result.rel_err > tol) {
      oc->status = TP_STATUS_FAILED;
      snprintf(oc->reason, sizeof oc->reason,
               "numerics: %.0f non-finite outputs, rel err %.3e against stock (tolerance %.0e)",
               nm.nonfinite, oc->result.rel_err, tol);
    }
  }
  if (ws->collector) {
    rc = trace_config(ws, c, b, oc);
    if (rc != TP_OK) {
      set_failure(oc, rc, tp_last_error());
      return rc; /* a tracer that fails mid-run leaves the ranks out of step */
    }
  }
  return TP_OK;
}

/* ---- recording ------------------------------------------------------------------- */

static tp_rc record(worker_state *ws, const tp_ops_config *cfg, const config_outcome *oc) {
  if (ws->ctx->rank != 0) return TP_OK;
  tp_samples sets[TP_MAX_WORLD];
  for (int r = 0; r < ws->ctx->world; ++r) {
    sets[r].rank = r;
    sets[r].count = ws->opts->measure_iters;
    sets[r].time_us = ws->all_samples_us + (size_t)r * (size_t)ws->opts->measure_iters;
  }
  tp_schedule_choice choice = {0};
  if (oc->have_plan) {
    choice.op = cfg->axes.layer;
    choice.schedule = tp_schedule_name(oc->plan.schedule);
    choice.engine = engine_of(&oc->plan);
    choice.chunks = oc->plan.chunks;
    choice.reason = oc->plan.reason;
  }
  tp_config_record rec = {0};
  rec.axes = &cfg->axes;
  rec.status = oc->status;
  rec.reason = oc->status == TP_STATUS_OK && !oc->reason[0] ? NULL : oc->reason;
  rec.result = oc->have_result ? &oc->result : NULL;
  rec.samples = oc->have_result ? sets : NULL;
  rec.n_sample_sets = oc->have_result ? ws->ctx->world : 0;
  rec.schedules = oc->have_plan ? &choice : NULL;
  rec.n_schedules = oc->have_plan ? 1 : 0;
  int64_t id = 0;
  TP_TRY(tp_store_put_config(ws->store, ws->run_id, &rec, &id));
  if (oc->have_trace) TP_TRY(tp_store_put_trace(ws->store, id, &oc->trace.record));
  return TP_OK;
}

static void progress(worker_state *ws, const tp_ops_case *c, const tp_ops_config *cfg,
                     const config_outcome *oc) {
  ws->done++;
  if (ws->ctx->rank != 0 || ws->opts->quiet) return;
  char what[128];
  snprintf(what, sizeof what, "%s %s %s T=%lld %s %s", c->model->name, c->proj.name,
           cfg->axes.layer, (long long)c->tokens, c->dtype, cfg->axes.backend);
  if (oc->status == TP_STATUS_OK)
    fprintf(stderr, "[%3d/%d] %-52s %-9s %10.1f us  cv %.3f\n", ws->done, ws->total, what,
            oc->have_plan ? tp_schedule_name(oc->plan.schedule) : "", oc->result.median_us,
            oc->result.cv);
  else
    fprintf(stderr, "[%3d/%d] %-52s %s: %s\n", ws->done, ws->total, what,
            tp_status_name(oc->status), oc->reason);
}

/* ---- the matrix ------------------------------------------------------------------- */

static tp_rc run_case(worker_state *ws, const tp_ops_matrix *m, int ci) {
  const tp_ops_case *c = &m->cases[ci];
  case_buffers b;
  memset(&b, 0, sizeof b);
  tp_linear_plan shape;
  tp_linear_desc desc = case_desc(c);
  tp_rc rc = tp_linear_plan_make(ws->ctx->group, &desc, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &shape);
  int runnable = 0;
  for (int i = 0; i < c->n_configs; ++i) runnable += !m->configs[c->first_config + i].rejected;
  if (rc == TP_OK && runnable) rc = alloc_buffers(ws->ctx->group, &shape, ci, &b);
  tp_rc agreed = TP_OK;
  char reason[OUTCOME_MSG + 16];
  TP_TRY(agree(ws, rc, &agreed, reason, sizeof reason));
  for (int i = 0; i < c->n_configs; ++i) {
    const tp_ops_config *cfg = &m->configs[c->first_config + i];
    config_outcome oc;
    tp_rc stop = TP_OK;
    if (agreed != TP_OK && !cfg->rejected) {
      memset(&oc, 0, sizeof oc);
      set_failure(&oc, agreed, reason);
    } else {
      stop = run_config(ws, c, cfg, &b, &oc);
    }
    progress(ws, c, cfg, &oc);
    tp_rc stored = record(ws, cfg, &oc);
    tp_ops_trace_free(&oc.trace);
    if (stop != TP_OK) {
      free_buffers(&b);
      return stop;
    }
    if (stored != TP_OK) {
      free_buffers(&b);
      return stored;
    }
  }
  free_buffers(&b);
  return TP_OK;
}

static tp_rc setup_state(worker_state *ws) {
  const int iters = ws->opts->measure_iters;
  ws->events = calloc((size_t)iters + 1, sizeof(cudaEvent_t));
  ws->samples_us = calloc((size_t)iters, sizeof(double));
  ws->all_samples_us = calloc((size_t)iters * (size_t)ws->ctx->world, sizeof(double));
  if (!ws->events || !ws->samples_us || !ws->all_samples_us)
    return TP_FAIL(TP_EOOM, "no host memory for %d iterations", iters);
  for (int i = 0; i <= iters; ++i) TP_CUDA(cudaEventCreate(&ws->events[i]));
  return TP_OK;
}

static void teardown_state(worker_state *ws) {
  if (ws->events)
    for (int i = 0; i <= ws->opts->measure_iters; ++i)
      if (ws->events[i]) cudaEventDestroy(ws->events[i]);
  free(ws->events);
  free(ws->samples_us);
  free(ws->all_samples_us);
  if (ws->store) tp_store_close(ws->store);
}

static tp_rc print_table(worker_state *ws) {
  tp_report_format fmt = TP_FMT_MARKDOWN;
  TP_TRY(tp_report_format_parse(ws->opts->format ? ws->opts->format : "md", &fmt));
  tp_report_filter filter = {0};
  filter.run_id = ws->run_id;
  fflush(stderr);
  TP_TRY(tp_report_throughput(ws->store, &filter, fmt, stdout));
  fflush(stdout);
  return TP_OK;
}

tp_rc tp_ops_worker_run(tp_worker_ctx *ctx, const tp_ops_matrix *matrix, const tp_ops_options *opts,
                        tp_collector *collector) {
  worker_state ws;
  memset(&ws, 0, sizeof ws);
  ws.ctx = ctx;
  ws.collector = collector;
  ws.opts = opts;
  ws.total = matrix->n_configs;
  tp_rc rc = setup_state(&ws);
  tp_rc agreed = TP_OK;
  char reason[OUTCOME_MSG + 16];
  if (rc == TP_OK && ctx->rank == 0) rc = begin_run(&ws);
  /* Every rank learns whether the others could start. */
  tp_rc exch = agree(&ws, rc, &agreed, reason, sizeof reason);
  if (exch != TP_OK) rc = exch;
  else if (agreed != TP_OK) rc = TP_FAIL(agreed, "%s", reason);
  for (int ci = 0; rc == TP_OK && ci < matrix->n_cases; ++ci) rc = run_case(&ws, matrix, ci);
  if (ctx->rank == 0 && ws.store && ws.run_id) {
    tp_rc fin = rc == TP_OK ? tp_store_finish_run(ws.store, ws.run_id) : TP_OK;
    if (rc == TP_OK) rc = fin;
    if (rc == TP_OK) rc = print_table(&ws);
  }
  teardown_state(&ws);
  return rc;
}
