/*
 * tp_dashboard_links.h — the `tpbench link` probes of a database as the
 * dashboard shows them (internal to dashboards/): per link run, every
 * stored point with its bandwidth in nccl-tests' terms.
 *
 * A point of transfer kind t (the configuration's layer: ce_push, sm_push,
 * nccl_all_gather, nccl_reduce_scatter) moves `bytes` per rank (the
 * configuration's m) in median_us. Like nccl-tests: size is the whole
 * buffer of a collective (tp × bytes) and the bytes pushed for a push;
 * count is size in bf16 elements; algbw = size / time; busbw = algbw ×
 * (tp − 1) / tp for a collective (what each link carries) and algbw for a
 * push. GB/s are 10^9 bytes per second.
 */
#ifndef TP_DASHBOARD_LINKS_H
#define TP_DASHBOARD_LINKS_H

#include <jansson.h>

#include "store/tp_store.h"

/*
 * *out = [{"run": {id, commit, started_at, host, gpu_name, gpu_count,
 * command_line}, "points": [{config_id, transfer, engine, tp, bytes, size,
 * count, dtype, median_us, p10_us, p90_us, algbw_gbps, busbw_gbps}, ...]},
 * ...], oldest run first, points by transfer and size; [] when the database
 * holds no link probe. TP_ESQLITE, TP_EOOM.
 */
TP_MUST_CHECK tp_rc tp_dashboard_links(tp_store *store, json_t **out);

#endif /* TP_DASHBOARD_LINKS_H */
