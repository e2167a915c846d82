-- 002_trace.sql — what the GPUs did while a configuration was traced, and a
-- stable identity for every run.
--
-- The trace follows Nsight Systems' SQLite export in spirit: kernel, copy and
-- range names live once in a string table and events point at them, so a
-- window of thousands of launches of one kernel stores its long mangled name
-- once. Per configuration there are three parts, written together by
-- tp_store_put_trace in one transaction:
--   events    every activity record of the traced window, every rank;
--   overlap   per rank and iteration window: how much communication hid
--             under compute (collectors/overlap.c's arithmetic);
--   traces    one row: how many iterations were traced, what tracing cost
--             (traced against untraced median), whether the trace shows the
--             schedule that was recorded as run, records CUPTI dropped.
--
-- runs.uuid identifies a run wherever its rows travel (tpbench import), so
-- importing the same file twice adds nothing the second time. Runs recorded
-- from now on get a random RFC 4122 version-4 uuid from a trigger; runs that
-- existed before this migration get a deterministic label built from what
-- identified them before ('v1:' || id || ':' || commit || '@' || host || ':'
-- || started_at), which `tpbench import` computes the same way for runs read
-- from a database still at version 1.

ALTER TABLE runs ADD COLUMN uuid TEXT;

UPDATE runs
SET uuid = 'v1:' || id || ':' || coalesce(commit_sha, '') || '@' || coalesce(host, '') || ':' ||
           started_at
WHERE uuid IS NULL;

CREATE UNIQUE INDEX runs_by_uuid ON runs (uuid);

-- A run inserted without a uuid (tp_store_begin_run) gets a random one.
CREATE TRIGGER runs_random_uuid AFTER INSERT ON runs
FOR EACH ROW WHEN NEW.uuid IS NULL
BEGIN
  UPDATE runs
  SET uuid = lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' ||
             substr(lower(hex(randomblob(2))), 2) || '-' ||
             substr('89ab', 1 + (abs(random()) % 4), 1) ||
             substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6)))
  WHERE id = NEW.id;
END;

-- Names of kernels, copies and NVTX ranges, each once.
CREATE TABLE strings (
  id   INTEGER PRIMARY KEY,
  text TEXT NOT NULL UNIQUE
);

-- One activity record of a traced window. Times are nanoseconds on the
-- tracer's clock (CUPTI: CLOCK_REALTIME unless a tool changed it; see
-- traces.clock_offset_ns); [start_ns, end_ns).
CREATE TABLE events (
  id          INTEGER PRIMARY KEY,
  config_id   INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  rank        INTEGER NOT NULL,
  device      INTEGER NOT NULL,        -- CUDA device ordinal; -1 for host-side ranges
  stream      INTEGER,                 -- CUPTI stream id; NULL: on no stream (NVTX ranges)
  kind        TEXT NOT NULL CHECK (kind IN ('kernel', 'memcpy', 'memset', 'sync', 'range')),
  category    TEXT NOT NULL
              CHECK (category IN ('comm', 'gemm', 'attention', 'elementwise', 'other', 'range')),
  name_id     INTEGER NOT NULL REFERENCES strings (id),
  start_ns    INTEGER NOT NULL,
  end_ns      INTEGER NOT NULL,
  bytes       INTEGER NOT NULL DEFAULT 0,
  correlation INTEGER,                 -- CUPTI correlation id; NVTX: the marker id
  copy_kind   TEXT,                    -- HtoD, DtoD, PtoP, ...; NULL: not a copy
  peer_device INTEGER,                 -- the other device of a peer copy; NULL otherwise
  CHECK (end_ns >= start_ns)
);
CREATE INDEX events_by_config ON events (config_id, rank, start_ns);

-- Communication against compute for one rank in one iteration window
-- (durations in ns; overlap_pct = 100 * overlap / comm, NULL when comm is 0).
CREATE TABLE overlap (
  config_id       INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  rank            INTEGER NOT NULL,
  window          INTEGER NOT NULL,    -- 0, 1, ...: the traced iterations in order
  window_start_ns INTEGER,
  window_end_ns   INTEGER,
  comm_ns         INTEGER NOT NULL,
  compute_ns      INTEGER NOT NULL,
  overlap_ns      INTEGER NOT NULL,
  exposed_ns      INTEGER NOT NULL,    -- comm_ns - overlap_ns
  overlap_pct     REAL,
  PRIMARY KEY (config_id, rank, window),
  CHECK (overlap_ns <= comm_ns AND exposed_ns = comm_ns - overlap_ns)
) WITHOUT ROWID;

-- One traced window of a configuration: its cost and what it proved.
CREATE TABLE traces (
  config_id          INTEGER PRIMARY KEY REFERENCES configs (id) ON DELETE CASCADE,
  traced_iters       INTEGER NOT NULL CHECK (traced_iters >= 0),
  traced_median_us   REAL,             -- median iteration time while tracing
  untraced_median_us REAL,             -- the measurement window's median
  overhead           REAL,             -- traced / untraced - 1; NULL unless both are known
  evidence_ok        INTEGER NOT NULL CHECK (evidence_ok IN (0, 1)),
  evidence_message   TEXT,             -- what was expected and what was seen
  dropped_records    INTEGER NOT NULL DEFAULT 0 CHECK (dropped_records >= 0),
  clock_offset_ns    INTEGER,          -- tracer clock - CLOCK_REALTIME (rank 0), if measured
  recorded_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  -- A schedule the trace contradicts must say how.
  CHECK (evidence_ok = 1 OR (evidence_message IS NOT NULL AND evidence_message <> ''))
);
