"""Measure GEMM, attention and HBM throughput on a real GPU, to set and check a GPU preset's
efficiency fields. Needs PyTorch with CUDA; perfmodel itself never needs a GPU.

Run: python benchmarks/device/hopper_kernels.py OUT.json
Then: python benchmarks/device/compare.py OUT.json h200   (model vs measurement, on any machine)
"""

from __future__ import annotations

import json
import sys
import time

import torch

# (label, M, K, N): one TP8 rank's GEMMs of real layers, forward and the two backward orientations,
# plus the SPEC 9 roofline example (K=4096, N=2048) across M.
LAYER_SHAPES = {
    "gpt3-175b-tp8-b1": dict(tokens=2048, h=12288, qkv=3 * 12288 // 8, f=4 * 12288 // 8),
    "gpt-1t-tp8-b1": dict(tokens=2048, h=25600, qkv=3 * 25600 // 8, f=4 * 25600 // 8),
    "llama2-70b-tp8-s4096": dict(
        tokens=4096, h=8192, qkv=(8192 + 2 * 8 * 128) // 8, f=2 * 28672 // 8
    ),
    "gpt-22b-tp8-b4": dict(tokens=8192, h=6144, qkv=3 * 6144 // 8, f=4 * 6144 // 8),
}


def shapes():
    out = []
    for name, d in LAYER_SHAPES.items():
        t, h = d["tokens"], d["h"]
        fwd = {
            "qkv": (t, h, d["qkv"]),
            "proj": (t, h // 8, h),
            "up": (t, h, d["f"]),
            "down": (t, d["f"] // (2 if "llama" in name else 1), h),
        }
        for g, (M, K, N) in fwd.items():
            out.append((f"{name}:{g}:fwd", M, K, N))
            out.append((f"{name}:{g}:dgrad", M, N, K))
            out.append((f"{name}:{g}:wgrad", K, M, N))
    for M in (64, 256, 1024, 2048, 8192):
        out.append((f"spec9-mlp:M{M}", M, 4096, 2048))
    out.append(("square-8192", 8192, 8192, 8192))
    return out


def timed(fn, iters=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def main(path: str) -> None:
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    result = {
        "device": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "gemm": [],
        "hbm": [],
        "attention": [],
    }
    t0 = time.time()
    for label, M, K, N in shapes():
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
        s = timed(lambda: torch.matmul(a, b))
        result["gemm"].append(
            {
                "label": label,
                "M": M,
                "K": K,
                "N": N,
                "time_s": s,
                "tflops": 2 * M * K * N / s / 1e12,
            }
        )
    n = 1 << 30  # 2 GiB of bf16 per tensor: many times the L2
    x = torch.randn(n, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    z = torch.randn(n, device=dev, dtype=torch.bfloat16)
    s = timed(lambda: y.copy_(x), iters=10)
    result["hbm"].append(
        {"label": "copy", "bytes": 4 * n, "time_s": s, "gb_per_s": 4 * n / s / 1e9}
    )
    s = timed(lambda: torch.add(x, z, out=y), iters=10)
    result["hbm"].append(
        {
            "label": "add (2 reads, 1 write)",
            "bytes": 6 * n,
            "time_s": s,
            "gb_per_s": 6 * n / s / 1e9,
        }
    )
    x = y = z = None  # free 6 GiB before the attention runs
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    for seq, heads, causal in (
        (2048, 12, False),
        (4096, 8, False),
        (8192, 8, False),
        (4096, 8, True),
    ):
        q, k, v = (
            torch.randn(1, heads, seq, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        flops = 4 * heads * seq * seq * 128 / (2 if causal else 1)
        fwd = timed(lambda: sdpa(q, k, v, is_causal=causal))
        out = sdpa(q, k, v, is_causal=causal)
        g = torch.randn_like(out)

        def fb():
            o = sdpa(q, k, v, is_causal=causal)
            o.backward(g)

        both = timed(fb, iters=10)
        result["attention"].append(
            {
                "seq": seq,
                "heads": heads,
                "causal": causal,
                "fwd_s": fwd,
                "fwd_tflops": flops / fwd / 1e12,
                "bwd_s": both - fwd,
                "bwd_tflops": 2.5 * flops / (both - fwd) / 1e12,
            }
        )
    result["elapsed_s"] = time.time() - t0
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("device", "sms", "elapsed_s")}))
    for r in result["gemm"]:
        print(f"{r['label']:40s} {r['M']:6d}x{r['K']:6d}x{r['N']:6d} {r['tflops']:7.1f} TFLOP/s")
    for r in result["hbm"] + result["attention"]:
        print(r)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "hopper.json")
