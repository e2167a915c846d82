-- 003_trust.sql — what a reviewer needs to trust a figure: the rounds a
-- configuration was measured in, the uncertainty of its median, every
-- compared output judged on its own, synchronisation apart from
-- communication, and schedule evidence per op that can say "not checked".
--
-- Measurement from this version on: the configurations of a case run in
-- `runs.rounds` rounds, each round a back-to-back window per configuration,
-- in an order that rotates or is shuffled per round (runs.order_policy,
-- runs.order_seed). Every sample row says its round; `windows` holds each
-- round's position and median. results.ci_lo_us/ci_hi_us bound the median
-- (95 %, a two-stage bootstrap: rounds, then iterations within them).
--
-- results.peak_mem_bytes is the device's high-water mark over the
-- configuration from this version on (rank 0); rows of runs with
-- runs.rounds NULL recorded memory in use after the window instead.

ALTER TABLE runs ADD COLUMN rounds INTEGER;        -- NULL: one window per configuration (before 003)
ALTER TABLE runs ADD COLUMN order_policy TEXT;     -- 'rotate' or 'shuffle'
ALTER TABLE runs ADD COLUMN order_seed INTEGER;    -- seed of the shuffle (NULL for rotate)
ALTER TABLE runs ADD COLUMN test_knobs TEXT;       -- test-only slowdowns in force; NULL: none

ALTER TABLE samples ADD COLUMN round INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples ADD COLUMN host_us REAL;       -- host time spent issuing this step

ALTER TABLE results ADD COLUMN n_rounds INTEGER;
ALTER TABLE results ADD COLUMN ci_lo_us REAL;      -- 95 % interval of median_us
ALTER TABLE results ADD COLUMN ci_hi_us REAL;
ALTER TABLE results ADD COLUMN rank_skew REAL;     -- slowest rank's median / fastest rank's - 1
ALTER TABLE results ADD COLUMN host_stall_frac REAL; -- iterations where a rank's host took longer
                                                     -- to issue the step than the GPU took to run it
ALTER TABLE results ADD COLUMN numerics TEXT
  CHECK (numerics IS NULL OR numerics IN ('ok', 'failed', 'not checked', 'reference'));
ALTER TABLE results ADD COLUMN numerics_reason TEXT;
ALTER TABLE results ADD COLUMN fused INTEGER        -- dist_gemm: 1 every op fused, 0 some took
  CHECK (fused IS NULL OR fused IN (0, 1));         -- the stock path; NULL: not dist_gemm

-- One round of one configuration: where it stood in the round's order and
-- the median of its window (slowest rank per iteration).
CREATE TABLE windows (
  config_id INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  round     INTEGER NOT NULL,
  position  INTEGER NOT NULL,        -- 0: first configuration of the round
  median_us REAL,
  PRIMARY KEY (config_id, round)
) WITHOUT ROWID;

-- Each compared output of a configuration judged on its own: against the
-- case's reference bit for bit ('exact': outputs no rank sums) or within a
-- tolerance derived from the dtype and the reduction length ('tolerance'),
-- or, for the reference itself, written everywhere and finite ('finite').
CREATE TABLE checks (
  config_id   INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  seq         INTEGER NOT NULL,
  output      TEXT NOT NULL,         -- "y", "dw", "dx", "d_attn_in", ...
  rule        TEXT NOT NULL CHECK (rule IN ('exact', 'tolerance', 'finite')),
  status      TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'not checked')),
  elements    INTEGER,
  nonfinite   INTEGER,               -- NaN or infinite elements (a poisoned, unwritten one is NaN)
  differ      INTEGER,               -- elements not bit-identical to the reference
  rel_err     REAL,                  -- ||out - ref|| / ||ref||
  max_abs_err REAL,
  tolerance   REAL,
  reason      TEXT,
  PRIMARY KEY (config_id, seq),
  CHECK (status = 'ok' OR (reason IS NOT NULL AND reason <> ''))
) WITHOUT ROWID;

-- Synchronisation (barriers, waits, signals, stream waits) is its own
-- category: spinning is not communication. SQLite cannot alter a CHECK, so
-- the events table is rebuilt with the wider one.
CREATE TABLE events_003 (
  id          INTEGER PRIMARY KEY,
  config_id   INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  rank        INTEGER NOT NULL,
  device      INTEGER NOT NULL,
  stream      INTEGER,
  kind        TEXT NOT NULL CHECK (kind IN ('kernel', 'memcpy', 'memset', 'sync', 'range')),
  category    TEXT NOT NULL
              CHECK (category IN ('comm', 'sync', 'gemm', 'attention', 'elementwise', 'other',
                                  'range')),
  name_id     INTEGER NOT NULL REFERENCES strings (id),
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER NOT NULL,
  bytes       INTEGER NOT NULL DEFAULT 0,
  correlation INTEGER,
  copy_kind   TEXT,
  peer_device INTEGER,
  CHECK (end_ns >= start_ns)
);
INSERT INTO events_003 SELECT * FROM events;
DROP TABLE events;
ALTER TABLE events_003 RENAME TO events;
CREATE INDEX events_by_config ON events (config_id, rank, start_ns);

-- Time spent synchronising per rank and window, beside comm/compute/overlap.
ALTER TABLE overlap ADD COLUMN sync_ns INTEGER;

-- Evidence in three states; evidence_ok stays for readers of version 2
-- (1 only when evidence = 'ok').
ALTER TABLE traces ADD COLUMN evidence TEXT
  CHECK (evidence IS NULL OR evidence IN ('ok', 'failed', 'not checked'));
UPDATE traces SET evidence = CASE evidence_ok WHEN 1 THEN 'ok' ELSE 'failed' END;

-- Evidence per op of a configuration, from the op's own NVTX range.
ALTER TABLE schedules ADD COLUMN evidence TEXT
  CHECK (evidence IS NULL OR evidence IN ('ok', 'failed', 'not checked'));
ALTER TABLE schedules ADD COLUMN evidence_message TEXT;

-- config_results gains the new result columns (views cannot be altered).
DROP VIEW config_results;
CREATE VIEW config_results AS
SELECT c.id AS config_id, c.run_id, c.config_key, c.case_key, c.kind, c.model, c.layer, c.proj,
       c.backend, c.schedule, c.chunks, c.tp, c.batch, c.seqlen, c.tokens, c.m, c.n, c.k,
       c.n_weights, c.dtype, c.sp, c.pass, c.graph, c.save_gathered, c.status, c.reason,
       r.config_id IS NOT NULL AS has_result, r.n_samples, r.median_us, r.p10_us, r.p90_us,
       r.mean_us, r.min_us, r.max_us, r.cv, r.tokens_per_s, r.tflops, r.flops, r.bytes_moved,
       r.workspace_bytes, r.peak_mem_bytes, r.max_abs_err, r.rel_err, r.numerics_ref,
       r.n_rounds, r.ci_lo_us, r.ci_hi_us, r.rank_skew, r.host_stall_frac, r.numerics,
       r.numerics_reason, r.fused
FROM configs c LEFT JOIN results r ON r.config_id = c.id;
