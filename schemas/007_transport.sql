-- 007_transport.sql — how a configuration's operands travel: the type an
-- all-gathered quantized activation crosses the links in, the competing
-- FSDP traffic a TP layer runs under, and dist_gemm's symmetric-memory
-- transport.
--
-- configs.comm_dtype: the type of the all-gathered activation of an fp8
-- configuration at TP > 1 ('fp8': the quantized shard and its scales travel;
-- 'bf16': the bf16 shard travels and the gathered whole is quantized); NULL
-- where no quantized operand is gathered (bf16 and fp32 configurations, TP 1,
-- sequence parallelism off). The reduce-scatter side reduces in bf16/fp32
-- whatever comm_dtype says. fsdp_traffic: 1 where the layer ran while the
-- next block's weight all-gather (and, in a backward, the gradient
-- reduce-scatter) of FSDP ran beside it on the same GPUs, 0 for a quiet
-- layer. symm: dist_gemm's symmetric memory ('ipc': tpbench's CUDA-IPC heap;
-- 'nccl': NCCL symmetric windows and their peer pointers); NULL for every
-- other backend, and for dist_gemm rows before 007 (which ran on 'ipc').
-- Keys name these axes only where they differ from NULL / 0 / 'ipc', so a
-- configuration keeps the key it had before 007; comm_dtype and
-- fsdp_traffic belong to the case (stock and dist_gemm share them), symm to
-- the whole configuration only.
ALTER TABLE configs ADD COLUMN comm_dtype TEXT CHECK (comm_dtype IS NULL OR comm_dtype IN ('bf16', 'fp8'));
ALTER TABLE configs ADD COLUMN fsdp_traffic INTEGER NOT NULL DEFAULT 0 CHECK (fsdp_traffic IN (0, 1));
ALTER TABLE configs ADD COLUMN symm TEXT CHECK (symm IS NULL OR symm IN ('ipc', 'nccl'));

-- traffic_bytes: per rank and step, the bytes the competing FSDP collectives
-- moved (fsdp_traffic = 1, or dp > 1); NULL: none ran, or not recorded.
ALTER TABLE results ADD COLUMN traffic_bytes INTEGER;

DROP VIEW config_results;
CREATE VIEW config_results AS
SELECT c.id AS config_id, c.run_id, c.config_key, c.case_key, c.kind, c.model, c.layer, c.proj,
       c.backend, c.schedule, c.chunks, c.tp, c.batch, c.seqlen, c.tokens, c.m, c.n, c.k,
       c.n_weights, c.dtype, c.sp, c.pass, c.graph, c.save_gathered, c.status, c.reason,
       r.config_id IS NOT NULL AS has_result, r.n_samples, r.median_us, r.p10_us, r.p90_us,
       r.mean_us, r.min_us, r.max_us, r.cv, r.tokens_per_s, r.tflops, r.flops, r.bytes_moved,
       r.workspace_bytes, r.peak_mem_bytes, r.max_abs_err, r.rel_err, r.numerics_ref,
       r.n_rounds, r.ci_lo_us, r.ci_hi_us, r.rank_skew, r.host_stall_frac, r.numerics,
       r.numerics_reason, r.fused, c.dp, c.ac, c.graph_sizes, c.rs_sum, r.activation_bytes,
       r.alloc_peak_bytes, c.comm_dtype, c.fsdp_traffic, c.symm, r.traffic_bytes
FROM configs c LEFT JOIN results r ON r.config_id = c.id;
