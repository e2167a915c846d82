-- 005_profile.sql — what `tpbench profile` found in a program it watched:
-- the profile itself (its window selection, processes, overhead), the
-- breakdown of each selected step per rank, and which transport each of the
-- program's NVTX ranges used for its communication. One profile per
-- configuration of kind 'profile'; the events themselves are in `events`.

CREATE TABLE profiles (
  config_id        INTEGER PRIMARY KEY REFERENCES configs (id) ON DELETE CASCADE,
  selector         TEXT NOT NULL,     -- 'whole process', '--steps A:B' or '--range REGEX'
  processes        INTEGER NOT NULL CHECK (processes >= 0), -- event files read
  ranks            INTEGER NOT NULL CHECK (ranks >= 0),
  windows          INTEGER NOT NULL CHECK (windows >= 0),   -- rows of profile_steps
  exit_status      INTEGER NOT NULL,  -- the command's (128 + N: killed by signal N)
  gpu_name         TEXT,              -- the first process's device, as the driver names it
  baseline_method  TEXT,              -- how the step time without the profiler was taken
  baseline_step_us REAL,              -- median step time without device recording; NULL: not run
  profiled_step_us REAL,              -- the same steps' median with the profiler, same clock
  overhead_pct     REAL               -- 100 * (profiled / baseline - 1)
);

-- One selected window (a step, a matching range, or the whole process) of one rank.
CREATE TABLE profile_steps (
  config_id     INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  rank          INTEGER NOT NULL,
  step          INTEGER NOT NULL,     -- the step number its range names, or its order
  name          TEXT NOT NULL,        -- the NVTX range, or 'process'
  host_start_ns INTEGER NOT NULL,     -- the range on the CPU (tracer clock)
  host_end_ns   INTEGER NOT NULL,
  start_ns      INTEGER NOT NULL,     -- the device work launched inside it, first start
  end_ns        INTEGER NOT NULL,     -- ... and last end
  comm_ns       INTEGER NOT NULL,
  compute_ns    INTEGER NOT NULL,
  sync_ns       INTEGER NOT NULL,
  other_ns      INTEGER NOT NULL,     -- memsets and local copies
  idle_ns       INTEGER NOT NULL,     -- the window minus all device work
  overlap_ns    INTEGER NOT NULL,
  exposed_ns    INTEGER NOT NULL,     -- comm_ns - overlap_ns
  kernels       INTEGER NOT NULL,
  empty         INTEGER NOT NULL CHECK (empty IN (0, 1)), -- launched no device work
  PRIMARY KEY (config_id, rank, step, host_start_ns)
);

-- Per rank and NVTX range name of the program: how its communication ran.
CREATE TABLE profile_schedules (
  config_id         INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  rank              INTEGER NOT NULL,
  range_name        TEXT NOT NULL,
  ranges            INTEGER NOT NULL, -- instances inside the selected windows
  nccl_kernels      INTEGER NOT NULL,
  ce_copies         INTEGER NOT NULL, -- copy-engine peer copies
  sm_copy_kernels   INTEGER NOT NULL,
  multicast_kernels INTEGER NOT NULL,
  comm_ns           INTEGER NOT NULL,
  gemm_ns           INTEGER NOT NULL,
  transport         TEXT NOT NULL
                    CHECK (transport IN ('nccl', 'copy-engine', 'sm-copy', 'multicast', 'mixed',
                                         'none')),
  PRIMARY KEY (config_id, rank, range_name)
);

-- The kernel summary of the selected windows, every rank together.
CREATE TABLE profile_kernels (
  config_id INTEGER NOT NULL REFERENCES configs (id) ON DELETE CASCADE,
  name      TEXT NOT NULL,             -- as CUPTI reported it (mangled)
  category  TEXT NOT NULL,
  count     INTEGER NOT NULL CHECK (count > 0),
  total_ns  INTEGER NOT NULL,
  PRIMARY KEY (config_id, name)
);
