-- 001_init.sql — the first tpbench schema: runs, their configurations, the
-- results and per-iteration samples of those that ran, the schedule each fused
-- op chose, and the views the throughput report reads.
--
-- Migrations are applied in order by store/tp_store.c, each inside the one
-- transaction that also sets PRAGMA user_version, so they must not contain
-- BEGIN/COMMIT themselves. Tables for the trace (events, strings) and the
-- overlap per rank and window arrive in later migrations (002_...): never edit
-- a migration that has shipped, add the next one.
--
-- Conventions: times of day are ISO 8601 UTC text; durations are
-- microseconds (REAL); NULL means "not measured / not applicable" (the store
-- writes NaN and infinities as NULL).

-- One invocation of tpbench on one machine.
CREATE TABLE runs (
  id             INTEGER PRIMARY KEY,
  commit_sha     TEXT,                 -- git commit the binary was built from
  dirty          INTEGER NOT NULL DEFAULT 0 CHECK (dirty IN (0, 1)),
  host           TEXT,
  gpu_name       TEXT,
  gpu_count      INTEGER,
  driver_version TEXT,
  cuda_version   TEXT,
  nccl_version   TEXT,
  cublas_version TEXT,
  cupti_version  TEXT,
  command_line   TEXT,
  command        TEXT,                 -- subcommand: ops, run, link
  warmup_iters   INTEGER,
  measure_iters  INTEGER,
  started_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  finished_at    TEXT                  -- NULL: interrupted or still running
);
CREATE INDEX runs_by_commit ON runs (commit_sha);

-- One point of the composition matrix, whatever became of it.
CREATE TABLE configs (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  config_key    TEXT NOT NULL,         -- every axis, canonical: matches across commits
  case_key      TEXT NOT NULL,         -- every axis but kind/backend/schedule/chunks
  kind          TEXT NOT NULL,         -- op, gemm, comm, layer
  model         TEXT,
  layer         TEXT,
  proj          TEXT,
  backend       TEXT,                  -- stock, dist_gemm; cublaslt, nccl
  schedule      TEXT,                  -- requested; what ran is in schedules
  chunks        INTEGER NOT NULL DEFAULT 0,
  tp            INTEGER NOT NULL,
  batch         INTEGER NOT NULL,
  seqlen        INTEGER NOT NULL,
  tokens        INTEGER NOT NULL,
  m             INTEGER NOT NULL,
  n             INTEGER NOT NULL,
  k             INTEGER NOT NULL,
  n_weights     INTEGER NOT NULL,
  dtype         TEXT,
  sp            INTEGER NOT NULL,
  pass          TEXT,
  graph         INTEGER NOT NULL,
  save_gathered INTEGER NOT NULL,
  status        TEXT NOT NULL CHECK (status IN ('ok', 'rejected', 'failed', 'oom', 'timeout')),
  reason        TEXT,
  recorded_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  -- A configuration that did not run must say why: the report shows it.
  CHECK (status = 'ok' OR (reason IS NOT NULL AND reason <> ''))
);
CREATE INDEX configs_by_key ON configs (config_key);
CREATE INDEX configs_by_run_case ON configs (run_id, case_key, kind);

-- The statistics of a configuration's measurement window: every ok
-- configuration has one; one that ran but failed afterwards (numerics out of
-- tolerance) may keep its own, so the failure can be inspected.
CREATE TABLE results (
  config_id       INTEGER PRIMARY KEY REFERENCES configs (id) ON DELETE CASCADE,
  n_samples       INTEGER NOT NULL,
  median_us       REAL,
  p10_us          REAL,
  p90_us          REAL,
  mean_us         REAL,
  min_us          REAL,
  max_us          REAL,
  cv              REAL,                -- stddev / mean
  tokens_per_s    REAL,
  tflops          REAL,
  flops           REAL,                -- per iteration, whole TP group
  bytes_moved     REAL,                -- communication per iteration, per rank
  workspace_bytes INTEGER,
  peak_mem_bytes  INTEGER,
  max_abs_err     REAL,
  rel_err         REAL,
  numerics_ref    TEXT
);

-- Every per-iteration time of every rank, kept for noise-aware comparisons.
CREATE TABLE samples (
  config_id INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  rank      INTEGER NOT NULL,
  iter      INTEGER NOT NULL,
  time_us   REAL,
  PRIMARY KEY (config_id, rank, iter)
) WITHOUT ROWID;

-- Which schedule each op of a configuration ran, and why the heuristic chose it.
CREATE TABLE schedules (
  config_id INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  seq       INTEGER NOT NULL,          -- order of the op within the configuration
  op        TEXT NOT NULL,
  schedule  TEXT NOT NULL,
  engine    TEXT,
  chunks    INTEGER NOT NULL DEFAULT 0,
  reason    TEXT,
  PRIMARY KEY (config_id, seq)
) WITHOUT ROWID;

-- A configuration with its result columns (NULL where it has none).
CREATE VIEW config_results AS
SELECT c.id AS config_id, c.run_id, c.config_key, c.case_key, c.kind, c.model, c.layer, c.proj,
       c.backend, c.schedule, c.chunks, c.tp, c.batch, c.seqlen, c.tokens, c.m, c.n, c.k,
       c.n_weights, c.dtype, c.sp, c.pass, c.graph, c.save_gathered, c.status, c.reason,
       r.config_id IS NOT NULL AS has_result, r.n_samples, r.median_us, r.p10_us, r.p90_us,
       r.mean_us, r.min_us, r.max_us, r.cv, r.tokens_per_s, r.tflops, r.flops, r.bytes_moved,
       r.workspace_bytes, r.peak_mem_bytes, r.max_abs_err, r.rel_err, r.numerics_ref
FROM configs c LEFT JOIN results r ON r.config_id = c.id;

-- The references a fused op is judged against, one per case and kind in a run:
-- the stock op, the GEMM alone (cuBLASLt) and the collective alone (NCCL). If a
-- case was measured twice, the ok one wins, then the latest.
CREATE VIEW case_references AS
SELECT config_id, run_id, case_key, kind
FROM (SELECT config_id, run_id, case_key, kind,
             row_number() OVER (PARTITION BY run_id, case_key, kind
                                ORDER BY status = 'ok' DESC, config_id DESC) AS pick
      FROM config_results
      WHERE (kind = 'op' AND backend = 'stock') OR (kind = 'gemm' AND backend = 'cublaslt')
         OR (kind = 'comm' AND backend = 'nccl'))
WHERE pick = 1;

-- The rows of the throughput table: each dist_gemm op configuration with the
-- references of its case, then each case that has a stock op but no dist_gemm
-- configuration at all (so the table shows the gap instead of hiding it).
-- order_key keeps cases in the order the matrix ran them.
CREATE VIEW throughput_rows AS
SELECT d.run_id, d.case_key, d.id AS dist_id, s.config_id AS stock_id, g.config_id AS gemm_id,
       cm.config_id AS comm_id, d.model, d.layer, d.pass, d.dtype,
       (SELECT min(x.id) FROM configs x WHERE x.run_id = d.run_id AND x.case_key = d.case_key)
         AS order_key
FROM configs d
LEFT JOIN case_references s ON s.run_id = d.run_id AND s.case_key = d.case_key AND s.kind = 'op'
LEFT JOIN case_references g ON g.run_id = d.run_id AND g.case_key = d.case_key AND g.kind = 'gemm'
LEFT JOIN case_references cm ON cm.run_id = d.run_id AND cm.case_key = d.case_key
                            AND cm.kind = 'comm'
WHERE d.kind = 'op' AND d.backend = 'dist_gemm'
UNION ALL
SELECT s.run_id, s.case_key, NULL, s.config_id, g.config_id, cm.config_id, sc.model, sc.layer,
       sc.pass, sc.dtype,
       (SELECT min(x.id) FROM configs x WHERE x.run_id = s.run_id AND x.case_key = s.case_key)
FROM case_references s
JOIN configs sc ON sc.id = s.config_id
LEFT JOIN case_references g ON g.run_id = s.run_id AND g.case_key = s.case_key AND g.kind = 'gemm'
LEFT JOIN case_references cm ON cm.run_id = s.run_id AND cm.case_key = s.case_key
                            AND cm.kind = 'comm'
WHERE s.kind = 'op'
  AND NOT EXISTS (SELECT 1 FROM configs d
                  WHERE d.run_id = s.run_id AND d.case_key = s.case_key AND d.kind = 'op'
                    AND d.backend = 'dist_gemm');
