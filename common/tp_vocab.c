/*
 * tp_vocab.c — the name tables of the shared vocabulary (see tp_vocab.h).
 */
#include "common/tp_vocab.h"

#include <stdio.h>
#include <string.h>

#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *const tp_dtype_names[TP_N_DTYPES] = {TP_DTYPE_LIST(TP_VOCAB_NAME)};
const char *const tp_schedule_names[TP_N_SCHEDULES] = {TP_SCHEDULE_LIST(TP_VOCAB_NAME)};
static const char *const pass_names[] = {"fwd", "bwd", "fwd+bwd"};
static const char *const stock_names[] = {"plain", "window"};
static const char *const op_names[] = {"ag_linear", "ag_linear_multi", "linear_rs"};
static const char *const layer_names[] = {"attention", "ffn", "block"};
static const char *const rs_sum_names[] = {"epilogue", "nccl"};
static const char *const symm_names[] = {"ipc", "nccl"};
static const char *const comm_dtype_names[] = {"none", "bf16", "fp8"};
static const char *const backend_names[] = {"stock", "dist_gemm", "gemm_only", "comm_only"};
static const char *const backend_axes[] = {"stock", "dist_gemm", "cublaslt", "nccl"};

/* A parsed name's index is its enum value, so the values a user asks for must be the list's
 * first A. A distinct values are 0..A-1 exactly when they sum to A(A-1)/2 (any other set of A
 * distinct non-negative values sums to more). */
#define TP_VOCAB_ASKED_VALUE(value, name, class)                                                   \
  +(TP_VOCAB_ASKED_##class * (value)) /* NOLINT(bugprone-macro-parentheses): a term of a sum */
#define TP_VOCAB_ASKED_FIRST(list)                                                                 \
  _Static_assert((0 list(TP_VOCAB_ASKED_VALUE)) ==                                                 \
                     TP_VOCAB_N_ASKED(list) * (TP_VOCAB_N_ASKED(list) - 1) / 2,                    \
                 #list ": the asked values come first")
TP_VOCAB_ASKED_FIRST(TP_DTYPE_LIST);
TP_VOCAB_ASKED_FIRST(TP_SCHEDULE_LIST);

const tp_vocab_table tp_dtype_vocab = {"dtype", tp_dtype_names, TP_VOCAB_N_ASKED(TP_DTYPE_LIST)};
const tp_vocab_table tp_pass_vocab = {"pass", pass_names, COUNT_OF(pass_names)};
/* dist_gemm's schedules, the names a user asks for (TP_SCHEDULE_LIST's ASKED class) */
const tp_vocab_table tp_schedule_vocab = {"schedule", tp_schedule_names,
                                          TP_VOCAB_N_ASKED(TP_SCHEDULE_LIST)};
const tp_vocab_table tp_stock_vocab = {"stock", stock_names, COUNT_OF(stock_names)};
const tp_vocab_table tp_symm_vocab = {"symm", symm_names, COUNT_OF(symm_names)};
const tp_vocab_table tp_op_vocab = {"op", op_names, COUNT_OF(op_names)};
const tp_vocab_table tp_layer_vocab = {"layer", layer_names, COUNT_OF(layer_names)};
const tp_vocab_table tp_rs_sum_vocab = {"rs_sum", rs_sum_names, COUNT_OF(rs_sum_names)};
/* what a user asks for: bf16 or fp8 ("none" is what a configuration without either records) */
const tp_vocab_table tp_comm_dtype_vocab = {"comm_dtype", comm_dtype_names + 1,
                                            COUNT_OF(comm_dtype_names) - 1};

static const char *name_at(const char *const *names, int n, int value) {
  return value >= 0 && value < n ? names[value] : "?";
}

const char *tp_backend_name(tp_backend backend) {
  return name_at(backend_names, COUNT_OF(backend_names), (int)backend);
}

const char *tp_backend_axis(tp_backend backend) {
  return name_at(backend_axes, COUNT_OF(backend_axes), (int)backend);
}

const char *tp_backend_kind(tp_backend backend, const char *unit_kind) {
  if (backend == TP_BACKEND_GEMM_ONLY) return "gemm";
  if (backend == TP_BACKEND_COMM_ONLY) return "comm";
  return unit_kind;
}

const char *tp_dtype_name(tp_dtype dt) { return name_at(tp_dtype_names, TP_N_DTYPES, (int)dt); }

const char *tp_pass_name(tp_pass pass) {
  return name_at(pass_names, COUNT_OF(pass_names), (int)pass);
}

const char *tp_schedule_name(tp_schedule schedule) {
  return name_at(tp_schedule_names, TP_N_SCHEDULES, (int)schedule);
}

const char *tp_stock_variant_name(tp_stock_variant variant) {
  return name_at(stock_names, COUNT_OF(stock_names), (int)variant);
}

int tp_group_size_rejection(const char *what, long long ranks, char *reason, size_t cap) {
  if (ranks <= TP_MAX_GROUP_RANKS) return 0;
  snprintf(reason, cap,
           "%s: a tpbench group holds at most %d ranks (a job's world is one group; its symmetric "
           "heap and signal pads map every peer: kernels/tp_device.h)",
           what, TP_MAX_GROUP_RANKS);
  return 1;
}

const char *tp_symm_transport_name(tp_symm_transport transport) {
  return name_at(symm_names, COUNT_OF(symm_names), (int)transport);
}

const char *tp_op_name(tp_op op) { return name_at(op_names, COUNT_OF(op_names), (int)op); }

const char *tp_layer_name(tp_layer layer) {
  return name_at(layer_names, COUNT_OF(layer_names), (int)layer);
}

const char *tp_rs_sum_name(tp_rs_sum sum) {
  return name_at(rs_sum_names, COUNT_OF(rs_sum_names), (int)sum);
}

const char *tp_comm_dtype_name(tp_comm_dtype c) {
  return name_at(comm_dtype_names, COUNT_OF(comm_dtype_names), (int)c);
}

int tp_model_is_toy(const char *model) {
  static const char *const toys[] = {"debug"};
  for (int i = 0; model && i < COUNT_OF(toys); i++)
    if (strcmp(model, toys[i]) == 0) return 1;
  return 0;
}

tp_rc tp_vocab_parse(const tp_vocab_table *table, const char *name, int *out) {
  for (int i = 0; i < table->n; i++)
    if (strcmp(name, table->names[i]) == 0) {
      *out = i;
      return TP_OK;
    }
  char valid[256];
  size_t used = 0;
  valid[0] = '\0';
  for (int i = 0; i < table->n && used < sizeof valid; i++)
    used +=
        (size_t)snprintf(valid + used, sizeof valid - used, "%s%s", i ? ", " : "", table->names[i]);
  return TP_FAIL(TP_EUSAGE, "unknown %s '%s' (valid: %s)", table->what, name, valid);
}
