"""symm_mem_tp.py — a small PyTorch tensor-parallel program for `tpbench profile`.

Each step runs one column-parallel projection (all-gather of the sequence-sharded
activation, then a GEMM) and one row-parallel projection (a GEMM, then a
reduce-scatter) twice: through PyTorch's fused symmetric-memory ops
(torch.ops.symm_mem.fused_all_gather_matmul and fused_matmul_reduce_scatter)
and through the plain NCCL collectives beside cuBLAS GEMMs. Every step and every
op is an NVTX range, so `tpbench profile` can say per step how long it took and
per op which transport its communication used (copy-engine peer copies, SM
kernels, NCCL kernels, or none: a fallback to a local path).

    tpbench profile --steps 2:8 -- torchrun --nproc-per-node 2 examples/symm_mem_tp.py

It also runs with one process (torchrun --nproc-per-node 1): a world of one has
nothing to communicate, which the profile then shows as transport "none".
The fused and plain outputs are compared at the end; a mismatch exits 1.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed import _symmetric_memory as symm_mem


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=10, help="steps to run (ProfilerStep#0..N-1)")
    p.add_argument("--tokens", type=int, default=8192, help="tokens of the whole sequence")
    p.add_argument("--hidden", type=int, default=4096, help="model dimension")
    p.add_argument("--ffn", type=int, default=14336, help="FFN dimension (sharded over ranks)")
    return p.parse_args()


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    world = dist.get_world_size()
    rank = dist.get_rank()
    group_name = dist.group.WORLD.group_name
    symm_mem.enable_symm_mem_for_group(group_name)
    if args.tokens % world or args.ffn % world:
        sys.exit(f"--tokens and --ffn must divide by the world size {world}")

    torch.manual_seed(1234 + rank)
    dtype = torch.bfloat16
    x_shard = torch.randn(args.tokens // world, args.hidden, device="cuda", dtype=dtype)
    w_col = torch.randn(args.ffn // world, args.hidden, device="cuda", dtype=dtype) / 64
    w_row = torch.randn(args.hidden, args.ffn // world, device="cuda", dtype=dtype) / 64
    gathered = torch.empty(args.tokens, args.hidden, device="cuda", dtype=dtype)
    scattered = torch.empty(args.tokens // world, args.hidden, device="cuda", dtype=dtype)
    nvtx = torch.cuda.nvtx

    for step in range(args.steps):
        nvtx.range_push(f"ProfilerStep#{step}")
        nvtx.range_push("symm_mem.fused_all_gather_matmul")
        _, (h_fused,) = torch.ops.symm_mem.fused_all_gather_matmul(
            x_shard, [w_col.t()], gather_dim=0, group_name=group_name
        )
        nvtx.range_pop()
        nvtx.range_push("symm_mem.fused_matmul_reduce_scatter")
        y_fused = torch.ops.symm_mem.fused_matmul_reduce_scatter(
            h_fused, w_row.t(), "sum", scatter_dim=0, group_name=group_name
        )
        nvtx.range_pop()
        nvtx.range_push("nccl.all_gather+matmul")
        dist.all_gather_into_tensor(gathered, x_shard)
        h_plain = gathered @ w_col.t()
        nvtx.range_pop()
        nvtx.range_push("nccl.matmul+reduce_scatter")
        dist.reduce_scatter_tensor(scattered, h_plain @ w_row.t())
        nvtx.range_pop()
        torch.cuda.synchronize()  # the step ends when its GPU work has
        nvtx.range_pop()

    err = (y_fused.float() - scattered.float()).norm() / scattered.float().norm()
    print(f"rank {rank}: world {world}, {args.steps} steps, fused vs plain rel. error {err:.2e}")
    dist.destroy_process_group()
    if not torch.isfinite(err) or err > 2e-2:
        sys.exit(f"rank {rank}: the fused output differs from the plain one ({err:.2e})")


if __name__ == "__main__":
    main()
