/*
 * tp_system_report.h — the system block of a run's markdown header: who
 * launched it (and the Slurm job and array task), each rank's host and GPU
 * (UUID, PCI bus id, SM clocks, power limit), the NCCL_/CUDA_/TORCH_
 * environment and the topology matrix of rank 0's host, as recorded by
 * schemas/004_system.sql.
 */
#ifndef TP_SYSTEM_REPORT_H
#define TP_SYSTEM_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "common/tp_error.h"
#include "store/tp_store.h"

/* The block as markdown list items (each line ending in '\n') in a
 * malloc'd string *out; NULL when the run has no system record (a run
 * measured before it was kept, or a link probe of an older build). Stored
 * text is escaped (tp_md_text, tp_md_code; the topology in a fenced block
 * whose fence no line can close). TP_ESQLITE naming the query on a read
 * failure, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_system_report_markdown(tp_store *store, int64_t run_id, char **out);

#endif /* TP_SYSTEM_REPORT_H */
