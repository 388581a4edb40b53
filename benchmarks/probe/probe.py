"""Measure a GPU node's GEMM rates and collectives for `perfmodel calibrate` (issue 39 item 4).

Run on the cluster, with PyTorch and its GPUs (perfmodel itself needs neither):

    python benchmarks/probe/probe.py gemm --out gemm.csv                  # one GPU, BF16 and FP8
    torchrun --nproc_per_node 8 benchmarks/probe/probe.py comm --collective all_reduce \\
        --out all_reduce_perf.txt                                         # one node's NVLink
    torchrun --nnodes 2 --nproc_per_node 8 ... probe.py comm ...          # across nodes

`gemm` times torch.matmul (BF16, FP16) and torch._scaled_mm (FP8 E4M3, per-tensor scales, on GPUs
that have it) over a grid of shapes, best of a few runs each after warm-up, and writes the CSV
perfmodel reads (M, N, K, dtype, tflops, time_us). `comm` times torch.distributed collectives
over message sizes from 8 B to --max-bytes, doubling, and prints nccl-tests' own table
(size count type redop root time algbw busbw #wrong, out of place and in place, busbw as
nccl-tests computes it, doc/PERFORMANCE.md), with one '#  Rank' line per rank naming its host,
so `perfmodel calibrate` reads either tool's output alike. nccl-tests itself
(NVIDIA/nccl-tests) measures the same with less overhead and is preferred where it is built.

--device cpu runs both at toy sizes (gloo for the collectives, 2 local processes with --world
2): that is how the project's tests run this script without a GPU. The figures are then the
CPU's, good for nothing but checking the script.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

SHAPES = {
    # (M, N, K): large squares (the ceiling), the skinny and small shapes of real layers
    "full": [
        (m, n, k)
        for m in (1024, 4096, 8192, 16384)
        for n in (1024, 4096, 8192, 16384)
        for k in (256, 1024, 4096, 8192, 16384)
    ],
    "toy": [(m, n, k) for m in (16, 64) for n in (16, 64) for k in (16, 32, 64)],
}
BUS = {"all_reduce": lambda n: 2 * (n - 1) / n, "sendrecv": lambda n: 1.0}


def _bus(collective: str, n: int) -> float:
    return BUS.get(collective, lambda n: (n - 1) / n)(n)


def gemm(args: argparse.Namespace) -> None:
    import torch

    dev = torch.device(args.device)
    shapes = SHAPES["toy" if args.device == "cpu" else args.shapes]
    lines = ["# " + (torch.cuda.get_device_name() if dev.type == "cuda" else "cpu")]
    lines.append("M,N,K,dtype,tflops,time_us")
    for dtype in args.dtypes.split(","):
        if dtype == "fp8" and (dev.type != "cuda" or not hasattr(torch, "_scaled_mm")):
            print(f"skipped fp8: no torch._scaled_mm on {dev.type}", file=sys.stderr)
            continue
        for M, N, K in shapes:
            seconds = _time_gemm(torch, dev, dtype, M, N, K, args.repeat)
            tflops = 2 * M * N * K / seconds / 1e12
            lines.append(f"{M},{N},{K},{dtype},{tflops:.6g},{seconds * 1e6:.6g}")
    _write(args.out, lines)


def _write(path: str, lines: list[str]) -> None:
    """The lines to ``path``, or to standard output without one."""
    text = "\n".join(lines) + "\n"
    if path:
        with open(path, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def _time_gemm(torch, dev, dtype: str, M: int, N: int, K: int, repeat: int) -> float:
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}[dtype]
    a = torch.randn(M, K, device=dev, dtype=tdt)
    b = torch.randn(N, K, device=dev, dtype=tdt)
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev)

        def op():
            return torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    else:

        def op():
            return a @ b.t()

    return _best(torch, dev, op, repeat)


def _best(torch, dev, op, repeat: int) -> float:
    """Best seconds of ``op`` over ``repeat`` timed runs after two warm-ups."""
    for _ in range(2):
        op()
    best = float("inf")
    for _ in range(repeat):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        op()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def _collective(torch, dist, name: str, x, out, n: int):
    if name == "all_reduce":
        return lambda: dist.all_reduce(x)
    if name == "all_gather":
        return lambda: dist.all_gather_into_tensor(out, x)
    if name == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(out, x)
    if name == "alltoall":
        return lambda: dist.all_to_all_single(out, x)
    raise SystemExit(
        f"probe: collective {name!r}: use all_reduce, all_gather, reduce_scatter or alltoall"
    )


def comm_worker(rank: int, args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", args.world))
    rank = int(os.environ.get("RANK", rank))
    cpu = args.device == "cpu"
    if "MASTER_ADDR" not in os.environ:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    dist.init_process_group("gloo" if cpu else "nccl", rank=rank, world_size=world)
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cpu" if cpu else f"cuda:{local}")
    if not cpu:
        torch.cuda.set_device(dev)
    name = torch.cuda.get_device_name(dev) if not cpu else "cpu"
    hosts = [None] * world
    dist.all_gather_object(hosts, (rank, socket.gethostname(), os.getpid(), local, name))
    lines = _comm_table(torch, dist, args, world, dev)
    if rank == 0:
        head = [f"# nThread 1 nGpus 1 minBytes 8 maxBytes {args.max_bytes} step: 2(factor)"]
        head += ["#", "# Using devices"]
        head += [
            f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host} device {i:2d} [0] {dev_name}"
            for r, host, pid, i, dev_name in hosts
        ]
        head += ["#", "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place"]
        head.append(
            "#       size         count      type   redop    root     time   algbw   busbw"
            " #wrong     time   algbw   busbw #wrong"
        )
        head.append(
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
            "            (us)  (GB/s)  (GB/s)"
        )
        _write(args.out, head + lines)
    dist.destroy_process_group()


def _comm_table(torch, dist, args, world: int, dev) -> list[str]:
    lines = []
    size = 8
    while size <= args.max_bytes:
        count = max(1, size // 4)
        if args.collective in ("all_gather", "reduce_scatter", "alltoall"):
            count = max(world, count - count % world)
        nbytes = count * 4
        x = torch.ones(count if args.collective != "all_gather" else count // world, device=dev)
        out = torch.empty(
            count if args.collective != "reduce_scatter" else count // world, device=dev
        )
        op = _collective(torch, dist, args.collective, x, out, world)
        seconds = _best(torch, dev, lambda: (op(), dist.barrier()), args.repeat)
        alg = nbytes / seconds / 1e9
        bus = alg * _bus(args.collective, world)
        us = seconds * 1e6
        redop = "sum" if args.collective in ("all_reduce", "reduce_scatter") else "none"
        # torch.distributed runs these in place of its own buffers: one timing, the in-place
        # columns left N/A (nccl-tests times both)
        row = f"{us:8.1f} {alg:7.2f} {bus:7.2f}      0"
        na = f"{'N/A':>8} {'N/A':>7} {'N/A':>7}    N/A"
        lines.append(f"{nbytes:12d}  {count:12d}     float  {redop:>6}      -1 {row} {na}")
        size *= 2
    return lines


def comm(args: argparse.Namespace) -> None:
    if "RANK" in os.environ:  # under torchrun
        comm_worker(int(os.environ["RANK"]), args)
        return
    import torch.multiprocessing as mp

    mp.spawn(comm_worker, args=(args,), nprocs=args.world, join=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    g = sub.add_parser("gemm", help="time GEMMs over shapes; write the CSV perfmodel reads")
    g.add_argument("--dtypes", default="bf16,fp8")
    g.add_argument("--shapes", default="full", choices=sorted(SHAPES))
    c = sub.add_parser("comm", help="time a collective over sizes; print nccl-tests' table")
    c.add_argument("--collective", default="all_reduce")
    c.add_argument("--max-bytes", type=int, default=1 << 30)
    c.add_argument("--world", type=int, default=2, help="local processes without torchrun")
    c.add_argument("--port", type=int, default=29533)
    for q in (g, c):
        q.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
        q.add_argument("--repeat", type=int, default=5)
        q.add_argument("--out", default="")
    args = p.parse_args(argv)
    gemm(args) if args.what == "gemm" else comm(args)


if __name__ == "__main__":
    main()
