"""Calibration from the cluster's own microbenchmarks, before any training run (issue 39 item 4).

MICRO.yaml names the cluster (a plan, whose system is calibrated) and what was measured on it::

    plan: my-cluster-plan.yaml           # a plan file (relative to MICRO.yaml) or a bundled plan
    nccl_tests:                          # nccl-tests / rccl-tests standard output
      - all_reduce_perf_8gpu.txt         # collective from the name, ranks and nodes from the file
      - {file: ag.txt, collective: all_gather, ranks: 16, nodes: 2}
    gemm_sweep: {file: gemm.csv, dtype: bf16}   # M, N, K, dtype, tflops or time (a CSV)

Links (SPEC 3, the alpha-beta model): for each file the measured time t(S) of a message of S bytes
is read as A + S c: A, the latency, is the median time of the three smallest messages (64 KiB or
less); c, seconds per byte, the median of (t - A) / S over the large messages (an eighth of the
largest and up, 1 MiB and up), where NCCL's bus bandwidth has reached its plateau. The model's
own A and c for the same collective on the plan's links (cost/collectives.py: ring steps times
the link's alpha, NCCL's count of network steps across nodes; bandwidth x efficiency x the mesh
share, and the rings over every NIC of a node across nodes, cost/layer.Link.ring_bandwidth) turn
them into time multipliers per link tier: comm_intra and comm_inter on the bandwidth term,
latency_intra and latency_inter on alpha. Files of one tier combine by their geometric mean.

GEMMs (SPEC 4, cost/roofline.gemm_efficiency): each measured GEMM against the model's time for its
shape; per format, the factor is the FLOP-weighted geometric mean of measured / modelled over the
compute-bound shapes, and gemm_k (the tile's fixed cost in K elements) is the value on a grid
from x0.25 to x4 that leaves the smallest FLOP-weighted squared log error, fitted only where the
sweep varies K.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel import inputs
from perfmodel.cost import collectives as coll
from perfmodel.cost.layer import Hardware
from perfmodel.cost.roofline import gemm_bytes, gemm_efficiency, is_memory_bound, kernel_time
from perfmodel.errors import PerfModelError
from perfmodel.inputs import gemm_sweep, nccl_tests, presets
from perfmodel.inputs.nccl_tests import NcclTest, bus_factor
from perfmodel.review.calibrate_checks import resolve
from perfmodel.specs import Plan
from perfmodel.specs.calibration import Calibration
from perfmodel.specs.precision import DTYPE_BYTES

TOP_KEYS = ("plan", "nccl_tests", "gemm_sweep", "description")
FORMAT_FACTOR = {
    "bf16": "gemm_bf16",
    "fp16": "gemm_bf16",
    "fp8": "gemm_fp8",
    "mxfp8": "gemm_fp8",
    "nvfp4": "gemm_fp4",
}
K_GRID = np.geomspace(0.25, 4.0, 33)
SMALL = 64 * 1024  # bytes: a message this small is latency-bound on every link
PLATEAU = 1 << 20  # bytes: bandwidth is read from messages of at least this size
SPREAD = 0.3  # files of one tier more than 30% apart are named


def is_micro(data: Any) -> bool:
    """Whether a calibrate input is MICRO.yaml (microbenchmarks) rather than RUNS.yaml."""
    return isinstance(data, dict) and ("nccl_tests" in data or "gemm_sweep" in data)


# what an entry of each list may say beside file:, and of what kind
ENTRY_KEYS: dict[str, dict[str, type]] = {
    "nccl_tests": {"collective": str, "ranks": int, "nodes": int},
    "gemm_sweep": {"dtype": str},
}


def _entries(value: Any, where: str, kind: str) -> list[dict[str, Any]]:
    """The entries of MICRO.yaml's ``kind`` list (a file name, or a mapping with file: and the
    keys of ENTRY_KEYS), each key checked: a name is text, a count a whole number of 1 or more."""
    items = value if isinstance(value, list) else [value]
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(value, list) else where
        if isinstance(item, str):
            item = {"file": item}
        if not isinstance(item, dict) or not isinstance(item.get("file"), str):
            raise PerfModelError(f"{at}: a file name, or a mapping with file:")
        allowed = ENTRY_KEYS[kind]
        for key, v in item.items():
            if key != "file" and key not in allowed:
                keys = ", ".join(["file", *allowed])
                raise PerfModelError(f"{at}: unknown key {key!r}; allowed: {keys}")
            if allowed.get(key) is str and not isinstance(v, str):
                raise PerfModelError(f"{at}.{key}: a name, got {v!r}")
            if allowed.get(key) is int and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise PerfModelError(f"{at}.{key}: a whole number of 1 or more, got {v!r}")
        out.append({**item, "_where": at})
    return out


def load(path: str) -> tuple[Plan, list[NcclTest], list[gemm_sweep.GemmPoint]]:
    """The cluster's plan and the microbenchmarks MICRO.yaml names (paths relative to it)."""
    data = presets.parse_yaml(presets.read_text(path, path), path)
    if not is_micro(data):
        raise PerfModelError(f"{path}: give nccl_tests: or gemm_sweep: (microbenchmarks)")
    if "runs" in data:
        raise PerfModelError(
            f"{path}: runs: and microbenchmarks (nccl_tests:, gemm_sweep:) go in separate files:"
            " calibrate each, then the plan takes one of them"
        )
    for key in data:
        if key not in TOP_KEYS:
            raise PerfModelError(f"{path}: unknown key {key!r}; allowed: {', '.join(TOP_KEYS)}")
    if not isinstance(data.get("plan"), str):
        raise PerfModelError(f"{path}: plan: the cluster's plan file (or a bundled plan)")
    folder = Path(path).parent
    plan = inputs.load(resolve(folder, data["plan"], f"{path}: plan", True)).plan
    tests = []
    for e in _entries(data.get("nccl_tests", []), f"{path}: nccl_tests", "nccl_tests"):
        t = nccl_tests.read(folder / e["file"], e.get("collective"), e.get("ranks"), e["file"])
        if e.get("nodes"):
            t = NcclTest(**{**t.__dict__, "nodes": int(e["nodes"])})
        elif t.nodes == 1 and t.ranks > plan.system.gpus_per_node:
            t = NcclTest(**{**t.__dict__, "nodes": math.ceil(t.ranks / plan.system.gpus_per_node)})
        tests.append(t)
    gemms = []
    for e in _entries(data.get("gemm_sweep", []), f"{path}: gemm_sweep", "gemm_sweep"):
        gemms += gemm_sweep.read(folder / e["file"], e.get("dtype"), e["file"])
    return plan, tests, gemms


def _model_link(plan: Plan, t: NcclTest) -> tuple[str, float, float, float]:
    """(tier, model latency s, model bus bandwidth bytes/s, latency of the intra-node steps s) of
    the collective ``t`` measured, on the plan's links."""
    s = plan.system
    intra, inter = s.intra_node_link, s.inter_node_link
    n, kind = t.ranks, t.collective
    intra_bw = intra.bandwidth_bytes_per_s * intra.efficiency
    steps = float(coll.ring_steps(kind, n)) if kind != "p2p" else 1.0
    if t.nodes <= 1:
        share = float(coll.mesh_share(intra.mesh_links or 0, n))
        return "intra", steps * intra.latency_s, intra_bw * share, steps * intra.latency_s
    r = n / t.nodes
    nic = inter.bandwidth_bytes_per_s * inter.efficiency
    if kind == "all-to-all":
        return "inter", (n - r) * inter.latency_s, bus_factor(kind, n) * n / (n - r) * nic, 0.0
    if kind == "p2p":
        return "inter", inter.latency_s, nic, 0.0
    lat = float(coll.ring_latency(kind, n, r, intra.latency_s, inter.latency_s))
    cross = min(steps, (2.0 if kind == "all-reduce" else 1.0) * (t.nodes - 1))
    bw = min(r * nic, intra_bw) if r * nic < intra_bw else math.inf  # inf: the NVLink bounds it
    return "inter", lat, bw, (steps - cross) * intra.latency_s


def _fit_link(plan: Plan, t: NcclTest) -> dict[str, Any]:
    """What one nccl-tests file says of its tier: measured and modelled latency and bus bandwidth,
    and the time multipliers they imply (None where the file cannot tell)."""
    tier, lat_model, bw_model, lat_intra = _model_link(plan, t)
    sizes, times = np.array(t.sizes), np.array(t.times_s)
    w = bus_factor(t.collective, t.ranks)
    out: dict[str, Any] = {"collective": t.collective, "ranks": t.ranks, "nodes": t.nodes}
    out["tier"] = tier
    small = times[sizes <= SMALL][:3]
    A = float(np.median(small)) if small.size else 0.0
    big = (sizes >= sizes.max() / 8) & (sizes >= PLATEAU)
    notes = []
    if small.size:
        out["latency_us"] = round(A * 1e6, 2)
        out["model_latency_us"] = round(lat_model * 1e6, 2)
        excess = A - lat_intra if tier == "inter" else A
        base = lat_model - lat_intra if tier == "inter" else lat_model
        out["latency_factor"] = excess / base if excess > 0 and base > 0 else None
    else:
        notes.append("no message of 64 KiB or less: latency not read")
    if big.any():
        c = float(np.median((times[big] - A) / sizes[big]))
        measured_bw = w / c if c > 0 else math.inf
        out["busbw_GBps"] = round(measured_bw / 1e9, 1)
        sheet = (
            plan.system.intra_node_link if tier == "intra" else plan.system.inter_node_link
        ).bandwidth_bytes_per_s * (1 if tier == "intra" else t.ranks / t.nodes)
        if t.collective == "all-reduce" and measured_bw > sheet:
            notes.append(
                "bus bandwidth above the links' data sheet: NVLS or SHARP in-network reduction,"
                " which perfmodel does not model; bandwidth not used"
            )
        elif measured_bw > sheet * 1.02:
            raise PerfModelError(
                f"{t.path}: {measured_bw / 1e9:.0f} GB/s bus bandwidth is more than the"
                f" {sheet / 1e9:.0f} GB/s the plan's {tier}-node link can carry; is this file"
                " from another cluster, or are ranks/nodes wrong?"
            )
        elif math.isinf(bw_model):
            notes.append("NVLink bounds this collective in the model: the NICs are not measured")
        else:
            out["model_busbw_GBps"] = round(bw_model / 1e9, 1)
            out["bandwidth_factor"] = bw_model / measured_bw
    else:
        notes.append(f"no message of {PLATEAU >> 20} MiB or more: bandwidth not read")
    out["notes"] = notes
    return out


def _gemm_model(plan: Plan, pts: list[gemm_sweep.GemmPoint], k_scale: float) -> np.ndarray:
    """Modelled seconds of each measured GEMM, with the K overhead scaled by ``k_scale``."""
    out = np.empty(len(pts))
    for dtype in {p.dtype for p in pts}:  # one Hardware a format, its GEMMs as arrays
        hw = Hardware.from_gpu(plan.system.gpu, dtype)
        rows = [i for i, p in enumerate(pts) if p.dtype == dtype]
        M, N, K = (np.array([getattr(pts[i], d) for i in rows], dtype=float) for d in "MNK")
        eff = gemm_efficiency(M, N, K, hw.num_sms, hw.gemm_eff, hw.k_overhead * k_scale)
        nbytes = gemm_bytes(M, K, N, DTYPE_BYTES[dtype])
        out[rows] = kernel_time(2.0 * M * N * K, nbytes, hw.peak, hw.hbm_bw, eff, hw.hbm_eff, 0.0)
    return out


def _fit_gemms(plan: Plan, pts: list[gemm_sweep.GemmPoint]) -> dict[str, Any]:
    """Per format: the factor, the K overhead's scale, and the scatter that remains."""
    gpu = plan.system.gpu
    for p in pts:
        rate = p.flops / p.time_s
        if rate > gpu.peak(p.dtype):
            raise PerfModelError(
                f"GEMM sweep, {p.M}x{p.N}x{p.K} {p.dtype}: {rate / 1e12:.0f} TFLOP/s is above the"
                f" {gpu.peak(p.dtype) / 1e12:.0f} TFLOP/s peak of {gpu.name}; a time in other"
                " units, or another GPU?"
            )
    hw = {p.dtype: Hardware.from_gpu(gpu, p.dtype) for p in pts}
    bound = np.array(
        [
            not bool(
                is_memory_bound(
                    p.flops,
                    gemm_bytes(p.M, p.K, p.N, DTYPE_BYTES[p.dtype]),
                    hw[p.dtype].peak,
                    hw[p.dtype].hbm_bw,
                )
            )
            for p in pts
        ]
    )
    fmt = np.array([FORMAT_FACTOR[p.dtype] for p in pts])
    flops = np.array([p.flops for p in pts])
    meas = np.array([p.time_s for p in pts])
    vary_k = len({p.K for p in pts}) > 1
    best: tuple[float, float, dict[str, float]] | None = None
    for k in K_GRID if vary_k else [1.0]:
        x = np.log(meas / _gemm_model(plan, pts, float(k)))
        factors, err = {}, 0.0
        for f in sorted({str(x) for x in fmt[bound]}):
            sel = bound & (fmt == f)
            wts = flops[sel] / flops[sel].sum()
            mu = float(np.sum(wts * x[sel]))
            factors[f] = mu
            err += float(np.sum(wts * (x[sel] - mu) ** 2))
        if best is None or err < best[0] - 1e-12:
            best = (err, float(k), factors)
    if best is None or not best[2]:
        raise PerfModelError("GEMM sweep: no compute-bound GEMM to fit (use larger M, N and K)")
    _, k, logs = best
    x = np.log(meas / _gemm_model(plan, pts, k))
    out: dict[str, Any] = {"gemm_k": k if vary_k else None, "formats": {}}
    for f, mu in logs.items():
        sel = bound & (fmt == f)
        out["formats"][f] = {
            "factor": math.exp(mu),
            "gemms": int(sel.sum()),
            "rms_log_residual": float(np.sqrt(np.mean((x[sel] - mu) ** 2))),
        }
    out["memory_bound_skipped"] = int((~bound).sum())
    return out


def _tier_factors(links: list[dict[str, Any]], key: str, tier: str) -> tuple[float | None, str]:
    """The geometric mean of one tier's file factors, and a note when they disagree."""
    vals = [d[key] for d in links if d["tier"] == tier and d.get(key)]
    if not vals:
        return None, ""
    mean = math.exp(float(np.mean(np.log(vals))))
    spread = max(vals) / min(vals) - 1
    note = (
        f"{key} of the {tier}-node files differ by {100 * spread:.0f}% (x{min(vals):.2f} to"
        f" x{max(vals):.2f}): their geometric mean x{mean:.2f} is used"
        if spread > SPREAD
        else ""
    )
    return mean, note


def fit(plan: Plan, tests: list[NcclTest], gemms: list[gemm_sweep.GemmPoint]) -> Calibration:
    """The factors the microbenchmarks identify, each file's figures beside the model's, and the
    factors they cannot tell, with why."""
    bench: dict[str, Any] = {}
    factors: dict[str, float] = {}
    not_fitted: dict[str, str] = {}
    notes = [
        f"fitted on microbenchmarks of {plan.system.gpu.name} with"
        f" {plan.system.intra_node_link.name} and {plan.system.inter_node_link.name}; no training"
        " run, so the step's own error band stays the model's published one"
    ]
    links = []
    for t in tests:
        d = _fit_link(plan, t)
        links.append(d)
        bench[Path(t.path).name] = d
    for tier in ("intra", "inter"):
        for key, name in (("bandwidth_factor", "comm"), ("latency_factor", "latency")):
            value, note = _tier_factors(links, key, tier)
            if value is None:
                not_fitted[f"{name}_{tier}"] = f"no {tier}-node nccl-tests file measures it"
            else:
                factors[f"{name}_{tier}"] = round(value, 4)
            if note:
                notes.append(note)
    if gemms:
        g = _fit_gemms(plan, gemms)
        bench["gemm_sweep"] = g
        for f, d in g["formats"].items():
            factors[f] = round(d["factor"], 4)
        if g["gemm_k"] is None:
            not_fitted["gemm_k"] = "the GEMM sweep has one K: the tile overhead is not seen"
        else:
            factors["gemm_k"] = round(g["gemm_k"], 4)
    else:
        not_fitted["gemm_bf16"] = "no gemm_sweep"
    if not factors:
        raise PerfModelError(
            "the microbenchmarks identify no factor: "
            + "; ".join(f"{k}: {v}" for k, v in not_fitted.items())
        )
    return Calibration(
        factors=factors,
        fitted_from="microbenchmarks",
        runs=[],
        not_fitted=not_fitted,
        notes=notes,
        microbenchmarks=bench,
        gpu=plan.system.gpu.name,
    )


def describe(name: str, d: dict[str, Any]) -> str:
    """One line of what a microbenchmark measured against the model."""
    if name == "gemm_sweep":
        parts = [
            f"{f} x{v['factor']:.3f} over {v['gemms']} GEMMs (scatter"
            f" {100 * v['rms_log_residual']:.0f}%)"
            for f, v in d["formats"].items()
        ]
        k = "" if d["gemm_k"] is None else f", K overhead x{d['gemm_k']:.2f}"
        return f"GEMM sweep: {', '.join(parts)}{k}"
    lat = (
        f"latency {d['latency_us']:.1f} us (model {d['model_latency_us']:.1f})"
        if "latency_us" in d
        else "latency not read"
    )
    bw = (
        f"busbw {d['busbw_GBps']:.0f} GB/s (model {d['model_busbw_GBps']:.0f})"
        if "model_busbw_GBps" in d
        else (f"busbw {d['busbw_GBps']:.0f} GB/s" if "busbw_GBps" in d else "busbw not read")
    )
    what = f"{d['collective']} {d['ranks']} ranks, {d['nodes']} node{'s' if d['nodes'] > 1 else ''}"
    extra = f"; {'; '.join(d['notes'])}" if d["notes"] else ""
    return f"{name}: {what}: {bw}, {lat}{extra}"
