/*
 * fsdp.c — FSDP's side-stream all-gather and reduce-scatter beside a
 * block's step (see fsdp.h): buffers, the step's hooks, the checks.
 */
#include "bench/gpu/fsdp.h"

#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"

static ncclDataType_t nccl_type(tp_dtype dt) { return dt == TP_BF16 ? ncclBfloat16 : ncclFloat32; }

static size_t count_of(const tp_block_param *p) { return (size_t)(p->rows * p->cols); }
static size_t shard_count(const tp_fsdp *f, int i) {
  return count_of(&f->params[i]) / (size_t)f->ranks;
}
static size_t elem_bytes(const tp_fsdp *f) { return tp_dtype_bytes(f->dtype); }

/* Where this rank's shard starts in the parameter (elements). */
static size_t shard_offset(const tp_fsdp *f, int i) { return (size_t)f->index * shard_count(f, i); }

static tp_rc check_divisible(const tp_fsdp *f) {
  for (int i = 0; i < f->n_params; ++i)
    if (f->params[i].rows % f->ranks != 0)
      return TP_FAIL(TP_EREJECT,
                     "FSDP: %s's %lld rows (its TP shard's dim 0) do not divide over %d ranks",
                     f->params[i].name, (long long)f->params[i].rows, f->ranks);
  return TP_OK;
}

static tp_rc alloc_buffers(tp_fsdp *f) {
  const size_t es = elem_bytes(f);
  for (int i = 0; i < f->n_params; ++i) {
    TP_TRY(tp_device_malloc(&f->shard[i], shard_count(f, i) * es));
    TP_TRY(tp_device_malloc(&f->gathered[i], count_of(&f->params[i]) * es));
    if (!f->backward) continue;
    TP_TRY(tp_device_malloc(&f->prev_grad[i], count_of(&f->params[i]) * es));
    TP_TRY(tp_device_malloc(&f->grad_shard[i], shard_count(f, i) * es));
  }
  return TP_OK;
}

/* Shards cut from the weights; the gathered buffer poisoned, so a gather
 * that writes nothing fails its check; the previous gradients copied. */
static tp_rc fill_buffers(tp_group *g, tp_fsdp *f) {
  const size_t es = elem_bytes(f);
  cudaStream_t s = g->main_stream;
  for (int i = 0; i < f->n_params; ++i) {
    const tp_block_param *p = &f->params[i];
    const char *w = p->weight;
    /* the test knob: the shard cut that many elements late, its tail left poisoned */
    size_t shift = (size_t)f->test_shard_shift, n = shard_count(f, i);
    if (shift > n) shift = n;
    if (shift) TP_CUDA(tp_launch_poison(f->dtype, f->shard[i], n, s));
    TP_CUDA(cudaMemcpyAsync(f->shard[i], w + (shard_offset(f, i) + shift) * es, (n - shift) * es,
                            cudaMemcpyDeviceToDevice, s));
    TP_CUDA(tp_launch_poison(f->dtype, f->gathered[i], count_of(p), s));
    if (f->backward)
      TP_CUDA(
          cudaMemcpyAsync(f->prev_grad[i], p->grad, count_of(p) * es, cudaMemcpyDeviceToDevice, s));
  }
  TP_CUDA(cudaStreamSynchronize(s));
  return TP_OK;
}

static void add_traffic(tp_fsdp *f) {
  f->traffic_bytes = 0;
  for (int i = 0; i < f->n_params; ++i)
    f->traffic_bytes += (int64_t)(count_of(&f->params[i]) * elem_bytes(f)) * (f->backward ? 2 : 1);
}

static tp_rc prepare(tp_group *g, const tp_block_plan *plan, const tp_block_tensors *t,
                     tp_fsdp *f) {
  TP_NCCL(ncclCommCount(f->comm, &f->ranks), f->comm);
  TP_NCCL(ncclCommUserRank(f->comm, &f->index), f->comm);
  f->n_params = tp_block_params(plan, t, f->params);
  TP_TRY(check_divisible(f));
  TP_CUDA(cudaStreamCreateWithFlags(&f->side, cudaStreamNonBlocking));
  TP_CUDA(cudaEventCreateWithFlags(&f->forward_begins, cudaEventDisableTiming));
  TP_CUDA(cudaEventCreateWithFlags(&f->backward_begins, cudaEventDisableTiming));
  TP_CUDA(cudaEventCreateWithFlags(&f->side_done, cudaEventDisableTiming));
  TP_TRY(alloc_buffers(f));
  TP_TRY(fill_buffers(g, f));
  add_traffic(f);
  return TP_OK;
}

tp_rc tp_fsdp_prepare(tp_group *g, const tp_block_plan *plan, const tp_block_tensors *t,
                      tp_fsdp_mode mode, ncclComm_t comm, tp_fsdp *out) {
  const int64_t shift = out->test_shard_shift;
  memset(out, 0, sizeof *out);
  out->test_shard_shift = shift;
  out->mode = mode;
  out->comm = comm;
  out->dtype = plan->shape.dtype;
  out->backward = plan->shape.backward;
  if (!comm) return TP_FAIL(TP_EINTERNAL, "FSDP without a communicator");
  return prepare(g, plan, t, out);
}

void tp_fsdp_release(tp_fsdp *f) {
  if (f->side && cudaStreamSynchronize(f->side) != cudaSuccess) (void)cudaGetLastError();
  for (int i = 0; i < TP_BLOCK_MAX_PARAMS; ++i) {
    tp_device_release(f->shard[i]);
    tp_device_release(f->gathered[i]);
    tp_device_release(f->prev_grad[i]);
    tp_device_release(f->grad_shard[i]);
  }
  if (f->forward_begins) (void)cudaEventDestroy(f->forward_begins);
  if (f->backward_begins) (void)cudaEventDestroy(f->backward_begins);
  if (f->side_done) (void)cudaEventDestroy(f->side_done);
  if (f->side) (void)cudaStreamDestroy(f->side);
  const int64_t shift = f->test_shard_shift;
  memset(f, 0, sizeof *f);
  f->test_shard_shift = shift;
}

/* ---- the step ----------------------------------------------------------------------------- */

/* The side stream starts once the main stream reaches this point. */
static tp_rc fork_side(tp_group *g, tp_fsdp *f, cudaEvent_t at) {
  TP_CUDA(cudaEventRecord(at, g->main_stream));
  TP_CUDA(cudaStreamWaitEvent(f->side, at, 0));
  return TP_OK;
}

/* The next block's weights from every rank's shards, one NCCL group. */
static tp_rc gather_next(tp_fsdp *f) {
  TP_NCCL(ncclGroupStart(), f->comm);
  for (int i = 0; i < f->n_params; ++i)
    TP_NCCL(ncclAllGather(f->shard[i], f->gathered[i], shard_count(f, i), nccl_type(f->dtype),
                          f->comm, f->side),
            f->comm);
  TP_NCCL(ncclGroupEnd(), f->comm);
  return TP_OK;
}

/* The previous block's gradients summed over the ranks, this rank's shard kept. */
static tp_rc scatter_previous(tp_fsdp *f) {
  TP_NCCL(ncclGroupStart(), f->comm);
  for (int i = 0; i < f->n_params; ++i)
    TP_NCCL(ncclReduceScatter(f->prev_grad[i], f->grad_shard[i], shard_count(f, i),
                              nccl_type(f->dtype), ncclSum, f->comm, f->side),
            f->comm);
  TP_NCCL(ncclGroupEnd(), f->comm);
  return TP_OK;
}

static tp_rc at_point(void *ctx, tp_group *g, tp_step_point point) {
  tp_fsdp *f = ctx;
  switch (point) {
  case TP_STEP_FORWARD: TP_TRY(fork_side(g, f, f->forward_begins)); return gather_next(f);
  case TP_STEP_BACKWARD: TP_TRY(fork_side(g, f, f->backward_begins)); return scatter_previous(f);
  case TP_STEP_END:
    TP_CUDA(cudaEventRecord(f->side_done, f->side));
    TP_CUDA(cudaStreamWaitEvent(g->main_stream, f->side_done, 0));
    return TP_OK;
  }
  return TP_FAIL(TP_EINTERNAL, "unknown step point %d", (int)point);
}

tp_step_hooks tp_fsdp_hooks(tp_fsdp *f) { return (tp_step_hooks){at_point, f}; }

tp_rc tp_fsdp_step(tp_group *g, const tp_block_plan *plan, tp_block_tensors *t, tp_fsdp *f) {
  const tp_step_hooks hooks = tp_fsdp_hooks(f);
  return tp_block_step_hooked(g, plan, t, &hooks);
}

/* ---- checks ------------------------------------------------------------------------------- */

static tp_rc read_sums(tp_group *g, double *acc, double sums[5]) {
  TP_CUDA(cudaMemcpyAsync(sums, acc, 5 * sizeof(double), cudaMemcpyDeviceToHost, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

static tp_rc compare_gathered(tp_group *g, const tp_fsdp *f, double *acc, double *elements) {
  const size_t es = elem_bytes(f);
  for (int i = 0; i < f->n_params; ++i) {
    const tp_block_param *p = &f->params[i];
    /* traffic mode: only this rank's slice is its own weights' */
    const size_t from = f->mode == TP_FSDP_MESH ? 0 : (size_t)f->index * shard_count(f, i);
    const size_t n = f->mode == TP_FSDP_MESH ? count_of(p) : shard_count(f, i);
    TP_CUDA(tp_launch_compare(f->dtype, (const char *)f->gathered[i] + from * es,
                              (const char *)p->weight + from * es, n, acc, g->main_stream));
    *elements += (double)n;
  }
  return TP_OK;
}

tp_rc tp_fsdp_check_gathered(tp_group *g, const tp_fsdp *f, double sums[5], double *elements) {
  TP_CUDA(cudaStreamSynchronize(f->side));
  double *acc = NULL;
  *elements = 0;
  TP_TRY(tp_device_malloc((void **)&acc, 5 * sizeof(double)));
  tp_rc rc = TP_OK;
  cudaError_t err = cudaMemsetAsync(acc, 0, 5 * sizeof(double), g->main_stream);
  if (err != cudaSuccess) rc = TP_FAIL(TP_ECUDA, "cudaMemsetAsync: %s", cudaGetErrorString(err));
  if (rc == TP_OK) rc = compare_gathered(g, f, acc, elements);
  if (rc == TP_OK) rc = read_sums(g, acc, sums);
  tp_device_release(acc);
  return rc;
}

/* The all-reduce of one parameter's previous gradients into sum, and its
 * slice against the reduce-scattered shard. */
static tp_rc compare_reduced(tp_group *g, const tp_fsdp *f, int i, void *sum, double *acc) {
  const size_t es = elem_bytes(f), n = count_of(&f->params[i]);
  cudaStream_t s = g->main_stream;
  TP_NCCL(ncclAllReduce(f->prev_grad[i], sum, n, nccl_type(f->dtype), ncclSum, f->comm, s),
          f->comm);
  const size_t at = (size_t)f->index * shard_count(f, i);
  TP_CUDA(tp_launch_compare(f->dtype, f->grad_shard[i], (const char *)sum + at * es,
                            shard_count(f, i), acc, s));
  TP_CUDA(cudaStreamSynchronize(s));
  return TP_OK;
}

tp_rc tp_fsdp_check_reduced(tp_group *g, const tp_fsdp *f, double sums[5], double *elements) {
  *elements = 0;
  memset(sums, 0, 5 * sizeof(double));
  if (!f->backward) return TP_OK;
  TP_CUDA(cudaStreamSynchronize(f->side));
  size_t most = 0;
  for (int i = 0; i < f->n_params; ++i)
    if (count_of(&f->params[i]) > most) most = count_of(&f->params[i]);
  void *sum = NULL;
  double *acc = NULL;
  tp_rc rc = tp_device_malloc(&sum, most * elem_bytes(f));
  if (rc == TP_OK) rc = tp_device_malloc((void **)&acc, 5 * sizeof(double));
  cudaError_t err =
      rc == TP_OK ? cudaMemsetAsync(acc, 0, 5 * sizeof(double), g->main_stream) : cudaSuccess;
  if (err != cudaSuccess) rc = TP_FAIL(TP_ECUDA, "cudaMemsetAsync: %s", cudaGetErrorString(err));
  for (int i = 0; rc == TP_OK && i < f->n_params; ++i) {
    rc = compare_reduced(g, f, i, sum, acc);
    *elements += (double)shard_count(f, i);
  }
  if (rc == TP_OK) rc = read_sums(g, acc, sums);
  tp_device_release(sum);
  tp_device_release(acc);
  return rc;
}

int tp_fsdp_reduce_exact(int ranks) { return ranks <= 2; }
