"""The reference for `sextant calibrate --comm`: the same collectives, sizes
and timing (warm-up, then repeats of N iterations between two CUDA events,
median repeat, slowest rank) through PyTorch's own NCCL, so that our table can
be checked against what NCCL reaches without our code around it.

    NCCL_NVLS_ENABLE=0 python3 tests/gpu/nccl_reference.py [--max-bytes 4G]
"""
import argparse
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def bus_factor(op, n):
    return {"all_reduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_gather": (n - 1) / n, "sendrecv": 1.0}[op]


def run(rank, n, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    sizes = []
    b = args.min_bytes
    while b <= args.max_bytes:
        sizes.append(b)
        b *= 2
    if rank == 0:
        print(f"# torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {n} ranks, "
              f"{torch.cuda.get_device_name(0)}, NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
        print(f"{'op':>15} {'size (B)':>12} {'time (us)':>10} {'algbw':>8} {'busbw':>8}")
    for op in ("all_reduce", "reduce_scatter", "all_gather", "sendrecv"):
        for size in sizes:
            elems = size // 2
            if op == "all_reduce" or op == "sendrecv":
                send = torch.ones(elems, dtype=torch.bfloat16, device="cuda")
                recv = torch.empty_like(send)
            elif op == "reduce_scatter":
                send = torch.ones(elems, dtype=torch.bfloat16, device="cuda")
                recv = torch.empty(elems // n, dtype=torch.bfloat16, device="cuda")
            else:
                recv = torch.empty(elems, dtype=torch.bfloat16, device="cuda")
                send = torch.ones(elems // n, dtype=torch.bfloat16, device="cuda")

            def once():
                if op == "all_reduce":
                    dist.all_reduce(send)
                elif op == "reduce_scatter":
                    dist.reduce_scatter_tensor(recv, send)
                elif op == "all_gather":
                    dist.all_gather_into_tensor(recv, send)
                else:
                    ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
                    for w in dist.batch_isend_irecv(ops):
                        w.wait()

            for _ in range(5):
                once()
            torch.cuda.synchronize()
            reps = []
            for _ in range(5):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(args.iters):
                    once()
                stop.record()
                stop.synchronize()
                reps.append(start.elapsed_time(stop) * 1e-3 / args.iters)
            t = torch.tensor([statistics.median(reps)], dtype=torch.float64, device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            t = t.item()
            if rank == 0:
                algbw = size / t / 1e9
                print(f"{op:>15} {size:>12} {t * 1e6:>10.2f} {algbw:>8.2f} {algbw * bus_factor(op, n):>8.2f}", flush=True)
            del send, recv
    dist.destroy_process_group()


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--min-bytes", type=parse_bytes, default=1 << 20)
    p.add_argument("--max-bytes", type=parse_bytes, default=4 << 30)
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, a), nprocs=world)
