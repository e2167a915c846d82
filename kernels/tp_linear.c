/*
 * tp_linear.c — the entry points of the TP projections (tp_linear.h), the
 * same for every recipe (tp_recipe.h): checks that a plan's buffers are
 * ready, opens the plan's NVTX range, applies the test knob that slows every
 * fused op, and hands the pass to the recipe — for the identity recipe the
 * stock path (tp_linear_stock.c) or the fused one (tp_linear_fused_fwd.c,
 * tp_linear_fused_bwd.c). Planning is in tp_linear_plan.c;
 * tp_linear_internal.h maps the rest.
 */
#include "collectors/tp_nvtx.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_linear_internal.h"
#include "kernels/tp_recipe.h"
#include "kernels/tp_window.h"

/* One buffer a window plan's collectives touch, outside every window. */
static tp_rc outside_window(const tp_linear_plan *p, const char *what, size_t bytes) {
  return TP_FAIL(TP_EINTERNAL,
                 "%s nccl-window: %s (%zu bytes) is not in an NCCL symmetric window "
                 "(tp_window_alloc): NCCL would run its plain collectives on it",
                 tp_op_name(p->desc.op), what, bytes);
}

/* A window plan's buffers of one pass: what its collectives send and
 * receive (tp_linear.h lists them). */
static tp_rc check_windows(const tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                           int backward) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  const size_t x_bytes = tp_linear_x_elems(p) * e, y_bytes = tp_linear_y_elems(p) * e;
  const int gather = tp_op_gathers(p->desc.op), sp = p->desc.sp;
  if (t->scratch && !tp_window_covers(g, t->scratch, p->workspace_bytes))
    return outside_window(p, "the caller's scratch", p->workspace_bytes);
  if (!t->scratch && g->window_scratch_bytes < p->workspace_bytes)
    return TP_FAIL(TP_EINTERNAL,
                   "window scratch of %zu bytes, plan needs %zu: call tp_linear_prepare",
                   g->window_scratch_bytes, p->workspace_bytes);
  if (t->saved && !tp_window_covers(g, t->saved, p->saved_bytes))
    return outside_window(p, "saved", p->saved_bytes);
  if (gather) {
    /* x is gathered in the forward (sp) and, unless saved, again in the backward */
    if (sp && (!backward || !t->saved) && !tp_window_covers(g, t->x, x_bytes))
      return outside_window(p, "x", x_bytes);
    if (backward && !tp_window_covers(g, t->dx, x_bytes)) return outside_window(p, "dx", x_bytes);
    return TP_OK;
  }
  if (!backward && !tp_window_covers(g, t->y[0], y_bytes)) return outside_window(p, "y", y_bytes);
  if (backward && sp && !tp_window_covers(g, t->dy[0], y_bytes))
    return outside_window(p, "dy", y_bytes);
  return TP_OK;
}

static tp_rc check_ready(const tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                         int backward) {
  if (p->desc.bias && g->bias_scratch_bytes < linear_bias_partial_floats(p) * sizeof(float))
    return TP_FAIL(TP_EINTERNAL, "bias scratch too small: call tp_linear_prepare");
  if (p->desc.save_gathered && !t->saved)
    return TP_FAIL(TP_EINTERNAL, "plan saves the gathered input but no buffer was given");
  if (linear_is_window(p)) return check_windows(g, p, t, backward);
  if (linear_is_fused(p)) {
    const tp_symm *heap = linear_heap(g, p);
    if (!heap)
      return TP_FAIL(TP_EINTERNAL, "no symm=%s heap in the group: call tp_linear_prepare",
                     tp_symm_transport_name(p->desc.symm));
    if (tp_symm_size(heap) < p->workspace_bytes)
      return TP_FAIL(TP_EINTERNAL,
                     "symm=%s workspace of %zu bytes, plan needs %zu: call tp_linear_prepare",
                     tp_symm_transport_name(p->desc.symm), tp_symm_size(heap), p->workspace_bytes);
  } else if (!t->scratch && g->scratch_bytes < p->workspace_bytes) {
    return TP_FAIL(TP_EINTERNAL, "scratch of %zu bytes, plan needs %zu: call tp_linear_prepare",
                   g->scratch_bytes, p->workspace_bytes);
  }
  return TP_OK;
}

static tp_rc test_delay(tp_group *g) {
  TP_CUDA(tp_launch_delay(g->test_delay_ns, g->main_stream));
  return TP_OK;
}

/* Whether the test knob's fixed slowdown (off unless set) applies to this op: every fused one,
 * and at TP 1, where nothing fuses, every stock one, so that a run on one GPU can plant a
 * regression too (the GEMM alone stays as it is: stock's reference). The run records both. */
static int slowed_by_test_knob(const tp_group *g, const tp_linear_plan *p) {
  if (!g->test_delay_ns) return 0;
  return linear_is_fused(p) || (p->world == 1 && p->backend == TP_BACKEND_STOCK);
}

/* A recipe's pass (tp_recipe.forward, .backward). */
typedef tp_rc (*pass_fn)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t);

/* One pass of the plan's recipe inside the pass's NVTX range; the forward
 * first spins for the test knob where it applies (slowed_by_test_knob). */
static tp_rc run_pass(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                      const char *range, int delay, pass_fn pass) {
  tp_nvtx_push(range);
  tp_rc rc = TP_OK;
  if (delay && slowed_by_test_knob(g, p)) rc = test_delay(g);
  if (rc == TP_OK) rc = pass(g, p, t);
  tp_nvtx_pop(); /* on every path: a failed delay leaves no range open */
  return rc;
}

tp_rc tp_linear_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(check_ready(g, p, t, 0));
  return run_pass(g, p, t, p->nvtx_fwd, 1, p->recipe->forward);
}

tp_rc tp_linear_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (!p->desc.backward) return TP_FAIL(TP_EINTERNAL, "plan was made for the forward only");
  TP_TRY(check_ready(g, p, t, 1));
  return run_pass(g, p, t, p->nvtx_bwd, 0, p->recipe->backward);
}

tp_rc tp_linear_step(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(tp_linear_forward(g, p, t));
  if (p->desc.backward) TP_TRY(tp_linear_backward(g, p, t));
  return TP_OK;
}

/* ---- the identity recipe's passes ------------------------------------------------------- */

tp_rc linear_identity_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  return linear_is_fused(p) ? linear_fused_forward(g, p, t) : linear_stock_forward(g, p, t);
}

tp_rc linear_identity_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  return linear_is_fused(p) ? linear_fused_backward(g, p, t) : linear_stock_backward(g, p, t);
}

/* ---- what every recipe answers ---------------------------------------------------------- */

tp_rc tp_linear_prepare(tp_group *g, const tp_linear_plan *p) {
  return p->recipe->prepare ? p->recipe->prepare(g, p) : TP_OK;
}

tp_rc tp_linear_prepare_weights(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  if (p->twin || !p->recipe->prepare_weights) return TP_OK; /* a twin's state is its source's */
  return p->recipe->prepare_weights(g, p, t);
}

int tp_linear_transfers(const tp_linear_plan *p, int fwd, int bwd) {
  return p->recipe->transfers(p, fwd, bwd);
}

int tp_linear_outputs(const tp_linear_plan *p, const tp_linear_tensors *t, tp_linear_output *out,
                      int max) {
  return p->recipe->outputs(p, t, out, max);
}

tp_rc tp_linear_judge(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t, int forward,
                      tp_judgement *out, int max, int *n) {
  *n = 0;
  return p->recipe->judge ? p->recipe->judge(g, p, t, forward, out, max, n) : TP_OK;
}

size_t tp_linear_own_bytes(const tp_linear_plan *p) {
  return p->recipe->own_bytes ? p->recipe->own_bytes(p) : 0;
}
