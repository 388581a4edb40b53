"""Reports for the small commands: cost/* formulas gathered into JSON-ready dicts.

Pure functions (no printing); the CLI renders what they return.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from perfmodel.cost import Num
from perfmodel.cost import collectives as coll
from perfmodel.cost import pipeline as pipe
from perfmodel.cost import roofline as rl
from perfmodel.cost import sp as spc
from perfmodel.cost.ops import Gemm
from perfmodel.cost.transformer import LayerShape, Options, decoder_layer
from perfmodel.errors import PerfModelError
from perfmodel.specs.precision import DTYPE_BYTES

if TYPE_CHECKING:
    from perfmodel.specs import GPU, Link, Model


def _f(x: Num) -> float:
    return float(x)


def schedule_bubbles(p: int, m: int) -> list[dict[str, Any]]:
    """Each schedule's closed-form bubble over the ideal compute and its activations in flight,
    at equal F, B and W (the papers' own assumption: Qi et al. 2023 and 2024, sail-sg's tables;
    cost/pipeline.zero_bubble_bubble): 1F1B (p-1)/m, interleaved at v 2 (p-1)/(2m), ZB-H1
    (p-1)/(3m), ZB-H2 the same synchronous ramp (its zero needs optimizer post-validation),
    ZB-V 0, V-Half p/(2m), V-Min 2p/(3m), interleaved zero-bubble at v 2 (p-1)/(6m); DualPipe
    (p/2-1)(F&B+B-3W) with F&B = F+B+W (no overlap gain) and DualPipeV the same over 2p stages of
    half a rank's layers."""
    ideal = 3.0 * m  # m (F + B + W) at F = B = W = 1
    out = []
    for name, code in pipe.SCHEDULE_CODES.items():
        if name == "gpipe":
            continue
        v = 2 if code in pipe.V_SHAPED or code in pipe.LOOPED else 1
        if code in pipe.SPLIT_BACKWARD:
            idle = float(pipe.zero_bubble_bubble(p, 1.0, 1.0, 1.0, m, code, v))
        elif name == "dualpipe":
            idle = float(pipe.dualpipe_bubble(p, 3.0, 2.0, 1.0))
        elif name == "dualpipev":
            idle = float(pipe.dualpipe_bubble(2 * p, 1.5, 1.0, 0.5))
        else:
            idle = float(pipe.bubble_over_ideal(p, m, v)) * ideal
        out.append(
            {
                "schedule": name,
                "vp": v,
                "bubble_over_ideal": idle / ideal,
                "in_flight_microbatches": float(pipe.in_flight_microbatches(p, m, v, name)),
            }
        )
    return out


def bubble_report(
    p: int, m: int, v: int = 1, target: float = 0.10, sweep: bool = False, schedules: bool = False
) -> dict[str, Any]:
    """Both bubble denominators, utilization, step time units, smallest m for a target (SPEC 7);
    with ``schedules``, each schedule's closed form (schedule_bubbles)."""
    if p < 1 or m < 1 or v < 1:
        raise PerfModelError("-p, -m and -v must be positive integers")
    if not 0 < target < 1:
        raise PerfModelError(f"--target must lie strictly between 0 and 1, got {target}")
    out: dict[str, Any] = {
        "p": p,
        "m": m,
        "v": v,
        "bubble_over_ideal": _f(pipe.bubble_over_ideal(p, m, v)),
        "bubble_over_step": _f(pipe.bubble_over_step(p, m, v)),
        "utilization": _f(pipe.utilization(p, m, v)),
        "step_time_units": _f(pipe.step_time_units(p, m, v)),
        "target": target,
        "min_m_for_target": pipe.min_microbatches_for_target(p, target, v),
    }
    if schedules:
        out["schedules"] = schedule_bubbles(p, m)
    if sweep:
        ms = sorted({1, 2, 4, 8, 16, 32, 48, 64, 128, 256, m, out["min_m_for_target"]})
        # the interleaved schedule runs m a multiple of p only (Narayanan 2021, Sec. 2.2.2)
        if v > 1:
            ms = sorted({k for k in ms if k % p == 0} | {p * j for j in (1, 2, 4, 8, 16, 32)})
        out["sweep"] = [
            {
                "m": k,
                "bubble_over_ideal": _f(pipe.bubble_over_ideal(p, k, v)),
                "bubble_over_step": _f(pipe.bubble_over_step(p, k, v)),
                "utilization": _f(pipe.utilization(p, k, v)),
            }
            for k in ms
        ]
    return out


_SHARD_LABEL = {"column": " (column-parallel)", "row": " (row-parallel)"}


def layer_gemms(
    shape: LayerShape, tp: int, mbs: int, seq: int, flash: bool = False, ep: int = 1
) -> list[Gemm]:
    """Every forward GEMM of one layer on one TP rank (SPEC 4-5), read off the layer's description:
    a MoE layer's (router, grouped experts at ep) for a mixture-of-experts shape. Which tp a model
    admits is rule PM103's business (perfmodel/engine/rules.py), not this function's."""
    return decoder_layer(
        shape,
        Options(flash=flash),
        mbs,
        seq,
        tp,
        tp > 1 and shape.experts > 0,
        1,
        ep,
        1,
        moe=shape.experts > 0,
    ).gemms()


def roofline_shape(
    model: Model | None, hidden: int | None, ffn: int | None, heads: int | None, tp: int
) -> LayerShape:
    """The layer `roofline` draws: the model's shape (any of hidden, ffn, heads given override it),
    or h = 4096, f = 4h, h/128 heads without a model; every split must divide by tp (Megatron's
    rule).
    """
    gated, groups = False, None
    if model is not None:
        hidden, ffn = hidden or model.hidden_size, ffn or model.ffn
        heads = heads or model.num_attention_heads
        gated, groups = model.mlp == "swiglu", model.groups
    hidden = hidden or 4096
    ffn = ffn or 4 * hidden
    heads = heads or max(1, hidden // 128)
    groups = groups or heads
    if hidden % heads:
        raise PerfModelError(f"--hidden({hidden}) is not divisible by --heads({heads})")
    for name, value in (("--heads", heads), ("--ffn", ffn)):
        if value % tp:
            raise PerfModelError(
                f"{name}({value}) is not divisible by --tp({tp}); pick tp dividing it"
            )
    if groups % tp and tp % groups:
        raise PerfModelError(
            f"the model's {groups} query groups and --tp({tp}) do not divide one another"
        )
    return LayerShape(
        hidden=hidden,
        heads=heads,
        groups=groups,
        ffn=ffn,
        vocab=1,
        gated=gated,
        bias=False,
        norm="layernorm",
        learned_positions=False,
        tied=True,
    )


def roofline_report(
    gpu: GPU,
    dtype: str,
    shape: LayerShape,
    tp: int,
    mbs: int,
    seq: int,
    ep: int = 1,
    flash: bool = False,
) -> dict[str, Any]:
    """Each GEMM's FLOPs, bytes, AI, bound, attainable FLOP/s and time on the data-sheet roofline
    (SPEC 4): bound is AI against the ridge point peak / bandwidth (cost/roofline.is_memory_bound).

    With ``flash`` the two attention GEMMs are one fused kernel (Dao et al. 2022, FlashAttention):
    the same FLOPs, but HBM traffic of Q, K, V and the output only, the s x s scores never leaving
    the chip.
    """
    peak, bw = gpu.peak(dtype), gpu.hbm_bandwidth_bytes_per_s
    dt = DTYPE_BYTES[dtype]
    gemms = []
    rows = list(layer_gemms(shape, tp, mbs, seq, ep=ep))
    attention = [g for g in rows if g.name.startswith("attention ")]
    for g in rows:
        flops, nbytes = g.flops, g.bytes(dt)
        if flash and g in attention:
            if g is not attention[0]:
                continue
            scores = attention[
                0
            ]  # M = s, K = d, N = s, batch = b heads/t: Q, K, V, O read or written once
            flops = sum(a.flops for a in attention)
            nbytes = scores.batch * (2 * scores.M * scores.K + 2 * scores.N * scores.K) * dt
            g = dataclasses.replace(g, name="fused attention (flash)")
        ai = rl.arithmetic_intensity(flops, nbytes)
        _, _, waves, util = rl.wave_quantization(g.M, g.N, 128, 128, gpu.num_sms, 1, g.batch)
        gemms.append(
            {
                "name": g.name + _SHARD_LABEL.get(g.shard, ""),
                "shard": g.shard,
                "M": _f(g.M),
                "K": _f(g.K),
                "N": _f(g.N),
                "batch": _f(g.batch),
                "flops": _f(flops),
                "bytes": _f(nbytes),
                "arithmetic_intensity": _f(ai),
                "bound": (
                    "memory" if bool(rl.is_memory_bound(flops, nbytes, peak, bw)) else "compute"
                ),
                "attainable_flops_per_s": _f(rl.attainable_flops(ai, peak, bw)),
                "time_s": _f(rl.roofline_time(flops, nbytes, peak, bw)),
                "waves_128x128": _f(waves),
                "wave_utilization": _f(util),
            }
        )
    return {
        "gpu": gpu.name,
        "dtype": dtype,
        "peak_flops_per_s": peak,
        "hbm_bandwidth_bytes_per_s": bw,
        "ridge_point": _f(rl.ridge_point(peak, bw)),
        "tokens": mbs * seq,
        "tp": tp,
        "hidden": shape.hidden,
        "ffn": shape.ffn,
        "heads": shape.heads,
        "flash_attention": flash,
        "gemms": gemms,
    }


def comm_report(
    kind: str, size_bytes: float, ranks: int, link: Link, use_efficiency: bool = False
) -> dict[str, Any]:
    """Alpha-beta time of one collective, latency and bandwidth terms apart (SPEC 3)."""
    if kind not in coll.COLLECTIVES:
        raise PerfModelError(
            f"unknown collective {kind!r}; use one of {', '.join(coll.COLLECTIVES)}"
        )
    if ranks < 1:
        raise PerfModelError("--ranks must be at least 1")
    if kind == "p2p" and ranks != 2:
        ranks = 2
    share = 1.0
    if link.mesh_links:
        # a full mesh with no switch: one node of mesh_links + 1 GPUs, a group of r of them reaching
        # its r - 1 peers over r - 1 dedicated links (cost/collectives.mesh_share), as the engine
        # prices an intra-node group (engine/mesh.py)
        if ranks > link.mesh_links + 1:
            raise PerfModelError(
                f"--ranks {ranks} exceeds the {link.mesh_links + 1} GPUs that {link.name} joins"
                f" ({link.mesh_links} links a GPU, no switch): a larger group crosses nodes; give"
                f" --ranks {link.mesh_links + 1} or fewer, or price it on the inter-node link"
                " (--link ib-ndr, or `perfmodel estimate` with the cluster)"
            )
        share = float(coll.mesh_share(link.mesh_links, ranks))
    bw = link.bandwidth_bytes_per_s * (link.efficiency if use_efficiency else 1.0) * share
    lat, band = coll.collective_time(kind, size_bytes, ranks, bw, link.latency_s)
    return {
        "collective": kind,
        "size_bytes": size_bytes,
        "ranks": ranks,
        "link": link.name,
        "mesh_share": share,
        "bandwidth_bytes_per_s": bw,
        "latency_per_step_s": link.latency_s,
        "steps": _f(coll.ring_steps(kind, ranks)),
        "bytes_per_rank": _f(coll.bytes_per_rank(kind, size_bytes, ranks)),
        "latency_s": _f(lat),
        "bandwidth_s": _f(band),
        "time_s": _f(lat + band),
    }


def sp_report(
    seq: int, hidden: int, tp: int, batch: int = 1, layers: int = 1, dtype_bytes: int = 2
) -> dict[str, Any]:
    """TP vs TP+SP shape trace, resident and transient peaks, and communication (seed 002)."""
    if seq % tp or hidden % tp:
        raise PerfModelError(f"--seq({seq}) and --hidden({hidden}) must be divisible by --tp({tp})")
    out: dict[str, Any] = {"seq": seq, "hidden": hidden, "tp": tp, "batch": batch, "layers": layers}
    for label, on in (("tp_only", False), ("tp_sp", True)):
        trace = spc.shape_trace(seq, hidden, tp, on)
        out[label] = {
            "trace": [
                {
                    "region": r.region,
                    "s": r.s,
                    "h": r.h,
                    "resident": r.resident,
                    "bytes": batch * r.s * r.h * dtype_bytes,
                }
                for r in trace
            ],
            "resident_peak_bytes": spc.resident_peak_bytes(trace, batch, dtype_bytes),
            "transient_peak_bytes": spc.transient_peak_bytes(trace, batch, dtype_bytes),
            "norm_input_bytes_per_layer": _f(
                spc.norm_input_bytes(seq, hidden, batch, tp, on, dtype_bytes)
            ),
            "norm_input_bytes_all_layers": (
                _f(spc.norm_input_bytes(seq, hidden, batch, tp, on, dtype_bytes)) * layers
            ),
            "comm": spc.block_comm(seq, hidden, batch, tp, on, dtype_bytes),
        }
    out["same_bytes"] = (
        abs(out["tp_only"]["comm"]["bytes_per_rank"] - out["tp_sp"]["comm"]["bytes_per_rank"])
        < 1e-6
    )
    return out
