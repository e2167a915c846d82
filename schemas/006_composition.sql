-- 006_composition.sql — the axes a layer composes with beyond TP, what a
-- configuration holds in memory, and the training steps `tpbench drift` runs.
--
-- configs gains the composition axes. dp: the data-parallel degree of the
-- dp × tp mesh (ranks tp-innermost). ac: activation checkpointing ('none',
-- 'selective': the projections' and the attention core's outputs kept, the
-- rest recomputed in the backward; 'full': the block's whole forward, its
-- all-gathers included, recomputed). graph_sizes: a CUDA-graph configuration
-- replayed among graphs of several token counts captured on one workspace,
-- the counts comma-separated ('2048,4096,8192'); NULL: one graph of its own
-- size. rs_sum: how dist_gemm's reduce-scatter sums the ranks' partials
-- ('epilogue': the received partial is the GEMM's C operand, one fp32
-- rounding; 'nccl': partials rounded to the dtype and summed in NCCL's order
-- and precision); NULL where no fused reduce-scatter runs. Rows before 006
-- read dp 1, ac 'none', graph_sizes NULL, rs_sum NULL (the epilogue for
-- dist_gemm). Config keys name these axes only where they differ from those
-- values, so a configuration keeps the key it had before 006.
ALTER TABLE configs ADD COLUMN dp INTEGER NOT NULL DEFAULT 1 CHECK (dp >= 1);
ALTER TABLE configs ADD COLUMN ac TEXT NOT NULL DEFAULT 'none'
  CHECK (ac IN ('none', 'selective', 'full'));
ALTER TABLE configs ADD COLUMN graph_sizes TEXT;
ALTER TABLE configs ADD COLUMN rs_sum TEXT CHECK (rs_sum IS NULL OR rs_sum IN ('epilogue', 'nccl'));

-- activation_bytes: per rank, the bytes the forward leaves for the backward
-- (what a stack of such layers multiplies by its depth): every tensor the
-- backward reads that the forward wrote and the ac mode keeps. alloc_peak_bytes:
-- rank 0, the high-water mark of tpbench's own device allocations that the
-- configuration holds over its timed step (its share of the case's tensors,
-- its own buffers, the workspace it asks for); peak_mem_bytes stays the
-- driver's reading of all memory in use, which counts every configuration
-- of the case. NULL: not recorded (before 006, or not known).
ALTER TABLE results ADD COLUMN activation_bytes INTEGER;
ALTER TABLE results ADD COLUMN alloc_peak_bytes INTEGER;

-- One training step of a `tpbench drift` configuration (kind 'drift'): the
-- loss and the global gradient norm after the step's backward, before its
-- optimizer update, as float64 from the device's fp32 reductions.
CREATE TABLE drift_steps (
  config_id INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  step      INTEGER NOT NULL CHECK (step >= 0),
  loss      REAL,         -- NULL: not finite (a diverged step is kept, not dropped)
  grad_norm REAL,
  PRIMARY KEY (config_id, step)
) WITHOUT ROWID;

-- config_results gains the new columns (views cannot be altered).
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
       r.alloc_peak_bytes
FROM configs c LEFT JOIN results r ON r.config_id = c.id;
