"""Measure the memory-bound kernels of a training step on a real GPU: the passes the layer model
counts besides GEMMs and attention (layernorm backward, residual gradient add, bias-gradient
reduction, the fp32 vocab-parallel cross-entropy) and the mixed-precision optimizer step
(grad norm, Adam update, master-to-model copy, zeroing). Each is timed, and its achieved HBM
bandwidth is computed from the bytes perfmodel assumes for it, so a wrong byte count or a slow
kernel shows as a fraction far from a plain copy's. Needs PyTorch with CUDA.

Not yet run on a GPU: the session that wrote it had no device. It runs on the CPU at toy sizes
as a dry run. On a GPU it needs about 1 minute and 60 GB of device memory.

Run: python benchmarks/device/step_kernels.py OUT.json
"""

from __future__ import annotations

import json
import sys
import time

import torch

CUDA = torch.cuda.is_available()
DEV = (
    "cuda" if CUDA else "cpu"
)  # cpu: a dry run of the script at toy sizes, no figures worth keeping
# one TP8 rank of Korthikanti 2022's 22B layer (micro-batch 4, s 2048, h 6144, V 51200)
TOKENS, H, V_SHARD, LAYERS = (4 * 2048, 6144, 51200 // 8, 48) if CUDA else (64, 256, 512, 2)


def sync():
    if CUDA:
        torch.cuda.synchronize()


def timed(fn, iters=10, warmup=2):
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t0) / iters


def attempt(out: list, name: str, fn) -> None:
    """Run one measurement; a kernel this PyTorch lacks is reported, not fatal."""
    try:
        fn()
    except Exception as e:
        out.append({"name": name, "error": repr(e)[:300]})
        print(f"{name:44s} failed: {e!r}"[:200], flush=True)


def record(out: list, name: str, seconds: float, model_bytes: float, note: str = "") -> None:
    out.append(
        {
            "name": name,
            "s": seconds,
            "model_bytes": model_bytes,
            "bytes_per_s": model_bytes / seconds,
            "note": note,
        }
    )
    print(
        f"{name:44s} {seconds * 1e3:9.3f} ms  {model_bytes / seconds / 1e12:6.2f} TB/s  {note}",
        flush=True,
    )


def layer_kernels(out: list) -> None:
    dev, bf = DEV, torch.bfloat16
    E = TOKENS * H
    x = torch.randn(TOKENS, H, device=dev, dtype=bf)
    y = torch.empty_like(x)
    record(out, "copy (bf16)", timed(lambda: y.copy_(x)), 4 * E, "read 2 + write 2 per element")

    ln = torch.nn.LayerNorm(H, device=dev, dtype=bf)
    xg = x.clone().requires_grad_(True)
    dy = torch.randn_like(x)
    record(out, "layernorm forward", timed(lambda: ln(xg)), 4 * E, "model: 2 act")

    def ln_bwd():
        o = ln(xg)
        torch.autograd.grad(o, (xg, ln.weight, ln.bias), dy)

    t_both = timed(ln_bwd)
    t_fwd = timed(lambda: ln(xg))
    record(
        out,
        "layernorm backward (torch native)",
        t_both - t_fwd,
        6 * E,
        "bytes at the one-pass count 3 act; two-pass is 5 act",
    )

    a, b = torch.randn_like(x), torch.randn_like(x)
    record(
        out, "residual gradient add", timed(lambda: torch.add(a, b, out=y)), 6 * E, "model: 3 act"
    )

    g4 = torch.randn(TOKENS, 4 * H // 8, device=dev, dtype=bf)
    record(
        out,
        "bias-gradient reduction (MLP up, TP8)",
        timed(lambda: g4.sum(0)),
        2 * g4.numel(),
        "model: 1 act",
    )
    record(out, "bias-gradient reduction (full h)", timed(lambda: x.sum(0)), 2 * E, "model: 1 act")

    logits16 = torch.randn(TOKENS, V_SHARD, device=dev, dtype=bf)
    n = logits16.numel()

    def ce_forward():
        lg = logits16.float()
        mx = lg.max(dim=-1)[0]
        lg.sub_(mx.unsqueeze(-1))
        torch.exp(lg, out=lg)
        s = lg.sum(dim=-1)
        lg.div_(s.unsqueeze(-1))
        return lg

    record(
        out,
        "cross-entropy forward (Megatron passes)",
        timed(ce_forward),
        38 * n,
        "model: 38 B per logit",
    )
    soft = ce_forward()
    go = torch.rand(TOKENS, device=dev)

    def ce_backward():
        soft.mul_(go.unsqueeze(-1))
        return soft.to(bf)

    record(out, "cross-entropy backward", timed(ce_backward), 14 * n, "model: 14 B per logit")


def attention_core(out: list) -> None:
    """The unfused attention core of the 22B layer (8 heads per rank, micro-batch 4, head dim 96):
    Korthikanti Table 4's selective-recompute rows time exactly this forward (1.3 ms on an A100;
    perfmodel's roofline gives 1.08 ms), so its kernels are timed one by one."""
    heads, d, s = (32, 96, 2048) if CUDA else (2, 16, 64)
    bf = torch.bfloat16
    q = torch.randn(heads, s, d, device=DEV, dtype=bf)
    k = torch.randn(heads, d, s, device=DEV, dtype=bf)
    v = torch.randn(heads, s, d, device=DEV, dtype=bf)
    scores = torch.empty(heads, s, s, device=DEV, dtype=bf)
    n = scores.numel()
    record(
        out,
        "QK^T (batched, K = head dim)",
        timed(lambda: torch.baddbmm(scores, q, k, beta=0.0, alpha=0.1, out=scores)),
        2 * n + 2 * 2 * heads * s * d,
        "model: max(compute, memory)",
    )
    record(
        out,
        "softmax over scores",
        timed(lambda: torch.softmax(scores, dim=-1)),
        4 * n,
        "model: 2 act",
    )
    drop = torch.nn.Dropout(0.1)
    record(
        out, "dropout over probabilities", timed(lambda: drop(scores)), 5 * n, "model: 2 act + 1"
    )
    record(
        out,
        "probabilities x V (batched)",
        timed(lambda: torch.bmm(scores, v)),
        2 * n + 4 * heads * s * d,
        "model: max(compute, memory)",
    )

    def whole_core():  # the forward that selective recompute repeats, context copy included
        probs = drop(
            torch.softmax(torch.baddbmm(scores, q, k, beta=0.0, alpha=0.1, out=scores), dim=-1)
        )
        return torch.bmm(probs, v).permute(1, 0, 2).contiguous()

    # its time over perfmodel's roofline for the same GPU is unfused_attention_efficiency's inverse
    record(
        out,
        "attention core forward (whole)",
        timed(whole_core),
        13 * n,
        "A100, Table 4: 1.3 ms; roofline 1.08",
    )


def optimizer_kernels(out: list) -> None:
    """One rank's optimizer over layer-shaped tensors (22B, TP8: 48 layers of 4 weights +
    biases)."""
    dev = DEV
    shapes = []
    for _ in range(LAYERS):
        shapes += [
            (3 * H // 8, H),
            (3 * H // 8,),
            (H, H // 8),
            (H,),
            (4 * H // 8, H),
            (4 * H // 8,),
            (H, 4 * H // 8),
            (H,),
            (H,),
            (H,),
            (H,),
            (H,),
        ]
    master = [torch.randn(s, device=dev) for s in shapes]
    grads = [torch.randn(s, device=dev) for s in shapes]
    exp_avg = [torch.zeros(s, device=dev) for s in shapes]
    exp_sq = [torch.zeros(s, device=dev) for s in shapes]
    model = [torch.empty(s, device=dev, dtype=torch.bfloat16) for s in shapes]
    steps = [torch.tensor(1.0, device=dev) for _ in shapes]
    P = sum(t.numel() for t in master)

    record(
        out,
        "grad norm (foreach, fp32)",
        timed(lambda: torch._foreach_norm(grads)),
        4 * P,
        "model: 4 B/param",
    )

    def adam_fused():
        torch._fused_adamw_(
            master,
            grads,
            exp_avg,
            exp_sq,
            [],
            steps,
            lr=1e-4,
            beta1=0.9,
            beta2=0.95,
            weight_decay=0.1,
            eps=1e-8,
            amsgrad=False,
            maximize=False,
        )

    attempt(
        out,
        "Adam update (torch fused)",
        lambda: record(
            out, "Adam update (torch fused)", timed(adam_fused), 28 * P, "model: 24 states + 4 grad"
        ),
    )

    def adam_foreach():
        torch._foreach_mul_(exp_avg, 0.9)
        torch._foreach_add_(exp_avg, grads, alpha=0.1)
        torch._foreach_mul_(exp_sq, 0.95)
        torch._foreach_addcmul_(exp_sq, grads, grads, value=0.05)
        denom = torch._foreach_sqrt(exp_sq)
        torch._foreach_add_(denom, 1e-8)
        torch._foreach_addcdiv_(master, exp_avg, denom, value=-1e-4)

    record(
        out,
        "Adam update (torch foreach, unfused)",
        timed(adam_foreach),
        28 * P,
        "model: 28 B/param; this path moves more",
    )
    record(
        out,
        "master -> bf16 weights (foreach copy)",
        timed(lambda: torch._foreach_copy_(model, master)),
        6 * P,
        "model: 4 + 2 B/param",
    )
    record(
        out,
        "zero fp32 grads (foreach)",
        timed(lambda: torch._foreach_zero_(grads)),
        4 * P,
        "model: 4 B/param",
    )
    out.append({"name": "params", "value": P})


def main(path: str) -> None:
    name = torch.cuda.get_device_properties(0).name if CUDA else "cpu (dry run)"
    result = {"device": name, "torch": torch.__version__, "kernels": []}
    t0 = time.time()
    attempt(result["kernels"], "layer kernels", lambda: layer_kernels(result["kernels"]))
    attempt(result["kernels"], "attention core", lambda: attention_core(result["kernels"]))
    attempt(result["kernels"], "optimizer kernels", lambda: optimizer_kernels(result["kernels"]))
    result["wall_s"] = time.time() - t0
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path} in {result['wall_s']:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "step_kernels.json")
