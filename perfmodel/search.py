"""Enumerate every valid configuration and evaluate them as numpy arrays (SPEC 8; issue 3).

The space: tp dividing the GPU count and the heads (inside a node unless
allowed), pp dividing the layers with tp * pp dividing the GPUs, dp = N / (tp
pp), micro-batch sizes dividing global_batch / dp, vp dividing layers / pp
(interleaving needs pp > 1 and m a multiple of pp), SP on/off when tp > 1,
recompute none/selective/full, ZeRO 0-3 when dp > 1, schedule gpipe/1f1b
(vp = 1) or interleaved (vp > 1). Knobs fixed in the plan or on the command
line restrict the space. Evaluation runs through estimate.evaluate, the same
function a single estimate uses, in chunks so memory stays bounded.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import PerfModelError
from .estimate import RECOMPUTE_CODES, SCHEDULE_CODES, Estimate, Knobs, estimate, evaluate
from .specs import Plan, knob_contradictions

CHUNK = 65536


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass
class Space:
    knobs: Knobs
    rejected: Counter = field(default_factory=Counter)


def _fixed_contradictions(fx) -> None:
    problems = knob_contradictions(fx.tp, fx.pp, fx.vp, fx.sequence_parallel, fx.schedule)
    if problems:
        raise PerfModelError("fixed knobs contradict: " + "; ".join(msg for _, msg in problems))


def enumerate_space(plan: Plan, allow_cross_node_tp: bool = False) -> Space:
    """Every valid configuration as Knobs arrays, and what was rejected, by reason."""
    fx = plan.parallel
    _fixed_contradictions(fx)
    model, n, gbs = plan.model, plan.system.num_gpus, plan.training.global_batch_size
    gpn, L = plan.system.gpus_per_node, model.num_layers
    rejected: Counter = Counter()
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("tp", "pp", "dp", "vp", "mbs", "sp", "rc", "zero", "sched")}

    def pick(values, fixed):
        return [v for v in values if fixed is None or v == fixed]

    rcs = [RECOMPUTE_CODES[fx.recompute]] if fx.recompute else [0, 1, 2]
    for tp in pick(divisors(n), fx.tp):
        if model.num_attention_heads % tp or (model.groups % tp and tp % model.groups):
            rejected["tp does not divide the attention heads / query groups (tp values)"] += 1
            continue
        if tp > gpn and not allow_cross_node_tp:
            rejected["tp group would cross the node boundary (tp values; --allow-cross-node-tp)"] += 1
            continue
        for pp in pick(divisors(n // tp), fx.pp):
            if L % pp:
                rejected["pp does not divide the layers ((tp, pp) pairs)"] += 1
                continue
            dp = n // (tp * pp)
            if fx.dp is not None and dp != fx.dp:
                continue
            if gbs % dp:
                rejected["global batch not divisible by dp ((tp, pp) pairs)"] += 1
                continue
            sps = [False, True] if tp > 1 else [False]
            if fx.sequence_parallel is not None:
                sps = [s for s in sps if s == fx.sequence_parallel]
            zeros = pick([0, 1, 2, 3] if dp > 1 else [0], fx.zero_stage)
            for mbs in pick(divisors(gbs // dp), fx.micro_batch_size):
                m = gbs // (dp * mbs)
                for vp in pick(divisors(L // pp), fx.vp):
                    if vp > 1 and (pp == 1 or m % pp):
                        rejected["interleaving needs pp > 1 and m a multiple of pp ((mbs, vp) pairs)"] += 1
                        continue
                    scheds = [SCHEDULE_CODES["interleaved"]] if vp > 1 else [SCHEDULE_CODES["gpipe"],
                                                                              SCHEDULE_CODES["1f1b"]]
                    if fx.schedule is not None:
                        scheds = [s for s in scheds if s == SCHEDULE_CODES[fx.schedule]]
                    if not (scheds and sps and zeros):
                        continue
                    grid = np.array(np.meshgrid(sps, rcs, zeros, scheds, indexing="ij")).reshape(4, -1)
                    k = grid.shape[1]
                    for name, val in (("tp", tp), ("pp", pp), ("dp", dp), ("vp", vp), ("mbs", mbs)):
                        cols[name].append(np.full(k, val))
                    cols["sp"].append(grid[0].astype(bool))
                    cols["rc"].append(grid[1])
                    cols["zero"].append(grid[2])
                    cols["sched"].append(grid[3])
    if not cols["tp"]:
        knobs = Knobs(*(np.zeros(0, dtype=int) for _ in range(9)))
        knobs.sp = knobs.sp.astype(bool)
        return Space(knobs, rejected)
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    return Space(Knobs(cat["tp"], cat["pp"], cat["dp"], cat["vp"], cat["mbs"], cat["sp"], cat["rc"],
                       cat["zero"], cat["sched"]), rejected)


KEEP = ("step_time_s", "total_bytes", "fits")


def evaluate_chunked(plan: Plan, knobs: Knobs, progress: Callable[[int, int], None] | None = None,
                     chunk: int = CHUNK) -> dict[str, np.ndarray]:
    """evaluate() over chunks of configurations, keeping only what ranking needs."""
    n = len(knobs)
    out = {k: np.empty(n, dtype=bool if k == "fits" else float) for k in KEEP}
    for start in range(0, n, chunk):
        idx = slice(start, min(n, start + chunk))
        res = evaluate(plan, knobs.take(idx))
        for k in KEEP:
            out[k][idx] = res[k]
        if progress:
            progress(min(n, start + chunk), n)
    return out


@dataclass
class SearchResult:
    evaluated: int
    feasible: int
    rejected: dict[str, int]
    search_time_s: float
    results: list[Estimate]
    hint: str = ""
    points: dict[str, np.ndarray] | None = None  # step time and memory of feasible configurations (plots)

    def to_json(self) -> dict:
        out = {"evaluated": self.evaluated, "feasible": self.feasible, "rejected": self.rejected,
               "search_time_s": self.search_time_s, "results": [r.to_json() for r in self.results]}
        if self.hint:
            out["hint"] = self.hint
        return out


def search(plan: Plan, top: int = 5, sort: str = "step_time", allow_cross_node_tp: bool = False,
           progress: Callable[[int, int], None] | None = None, keep_points: bool = False) -> SearchResult:
    """Rank every feasible configuration by step time (or memory) and detail the top ones."""
    if top < 1:
        raise PerfModelError(f"--top must be at least 1, got {top}")
    if sort not in ("step_time", "memory"):
        raise PerfModelError(f"--sort must be step_time or memory, got {sort!r}")
    t0 = time.perf_counter()
    space = enumerate_space(plan, allow_cross_node_tp)
    knobs = space.knobs
    rejected = dict(space.rejected)
    if len(knobs) == 0:
        raise PerfModelError(_no_valid_space(plan, rejected))
    res = evaluate_chunked(plan, knobs, progress)
    fits = res["fits"]
    n_fail = int((~fits).sum())
    if n_fail:
        rejected["does not fit in HBM (configurations)"] = n_fail
    idx = np.flatnonzero(fits)
    if idx.size == 0:
        elapsed = time.perf_counter() - t0
        return SearchResult(len(knobs), 0, rejected, elapsed, [], _nothing_fits(plan, knobs, res))
    key = res["step_time_s"][idx] if sort == "step_time" else res["total_bytes"][idx]
    # rank by the vectorized closed form, then re-rank the leaders by estimate(), whose pipeline
    # term comes from the schedule simulator (exact for unequal stages)
    order = idx[np.argsort(key, kind="stable")[:2 * top + 8]]
    gbs = plan.training.global_batch_size
    results = [estimate(plan, knobs.config(int(i), gbs)) for i in order]
    if sort == "step_time":
        results.sort(key=lambda e: e.values["step_time_s"])
    results = results[:top]
    points = ({"step_time_s": res["step_time_s"][idx], "total_bytes": res["total_bytes"][idx]}
              if keep_points else None)
    return SearchResult(len(knobs), int(idx.size), rejected, time.perf_counter() - t0, results, "", points)


def _no_valid_space(plan: Plan, rejected: dict) -> str:
    n = plan.system.num_gpus
    why = "; ".join(f"{k}: {v}" for k, v in rejected.items()) or "the fixed knobs leave nothing"
    return (f"no valid configuration for {n} GPUs ({why}). Use a GPU count that tp x pp x dp can fill "
            f"(e.g. a multiple of {plan.system.gpus_per_node}) or relax the fixed knobs")


def _nothing_fits(plan: Plan, knobs: Knobs, res: dict) -> str:
    i = int(np.argmin(res["total_bytes"]))
    need, cap = res["total_bytes"][i], plan.system.gpu.hbm_capacity_bytes
    cfg = knobs.config(i, plan.training.global_batch_size)
    msg = (f"nothing fits in {cap / 1e9:.0f} GB of HBM: the leanest configuration (tp={cfg.tp} pp={cfg.pp} "
           f"dp={cfg.dp} mbs={cfg.micro_batch_size} sp={cfg.sequence_parallel} recompute={cfg.recompute} "
           f"zero={cfg.zero_stage}) needs {need / 1e9:.1f} GB")
    n = plan.system.num_gpus
    for factor in (2, 4, 8, 16):
        bigger = plan.with_system(num_gpus=n * factor)
        space = enumerate_space(bigger)
        if len(space.knobs) and evaluate_chunked(bigger, space.knobs)["fits"].any():
            return msg + f"; the smallest change that fits: {n * factor} GPUs (x{factor}), or a GPU with more HBM"
    return msg + "; even 16x the GPUs does not fit: use a GPU with more HBM or a shorter sequence"
