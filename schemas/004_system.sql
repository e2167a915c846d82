-- 004_system.sql — the system a run ran on, beyond rank 0's host and GPU
-- model: who launched it, each rank's host and GPU, how the GPUs connect,
-- their clocks and power limits, the environment that steers NCCL, CUDA and
-- PyTorch, and the Slurm job it belonged to. Written by rank 0 from what
-- every rank sent it over the job's rendezvous; NULL in runs before 004,
-- and where a fact could not be read (no nvidia-smi, not under Slurm).

ALTER TABLE runs ADD COLUMN launcher TEXT;            -- 'tpbench' (its own workers), 'torchrun',
                                                      -- 'Open MPI', 'Slurm'
ALTER TABLE runs ADD COLUMN slurm_job_id TEXT;        -- SLURM_JOB_ID
ALTER TABLE runs ADD COLUMN slurm_array_job_id TEXT;  -- SLURM_ARRAY_JOB_ID
ALTER TABLE runs ADD COLUMN slurm_array_task_id TEXT; -- SLURM_ARRAY_TASK_ID
ALTER TABLE runs ADD COLUMN topology TEXT;            -- rank 0's host: `nvidia-smi topo -m`, or
                                                      -- the CUDA peer-access matrix
ALTER TABLE runs ADD COLUMN topology_source TEXT;     -- 'nvidia-smi topo -m' or 'cuda peer access'
ALTER TABLE runs ADD COLUMN environment TEXT;         -- NCCL_*, CUDA_*, TORCH_* as rank 0 saw
                                                      -- them: NAME=value lines, sorted

-- One row per rank of the run.
CREATE TABLE run_ranks (
  run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  rank             INTEGER NOT NULL CHECK (rank >= 0),
  local_rank       INTEGER,
  host             TEXT,
  gpu_uuid         TEXT,
  pci_bus_id       TEXT,
  sm_clock_mhz     INTEGER,  -- when the run began
  max_sm_clock_mhz INTEGER,
  power_limit_w    REAL,     -- the enforced limit
  PRIMARY KEY (run_id, rank)
);
