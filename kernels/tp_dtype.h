/*
 * tp_dtype.h — the element types tpbench runs (bf16 and fp32) and their
 * names and sizes, shared by the kernels and the host code that drives them.
 */
#ifndef TP_DTYPE_H
#define TP_DTYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TP_BF16 = 0, TP_FP32 = 1 } tp_dtype;

static inline size_t tp_dtype_bytes(tp_dtype dt) { return dt == TP_BF16 ? 2u : 4u; }
static inline const char *tp_dtype_name(tp_dtype dt) { return dt == TP_BF16 ? "bf16" : "fp32"; }

#ifdef __cplusplus
}
#endif

#endif /* TP_DTYPE_H */
