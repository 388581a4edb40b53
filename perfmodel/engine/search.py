"""Enumerate every valid configuration and evaluate them as numpy arrays (SPEC 8; issue 3).

The space: tp dividing the GPU count and the heads (inside a node unless
allowed), pp dividing the layers with tp * pp dividing the GPUs, dp = N / (tp
pp), micro-batch sizes dividing global_batch / dp, vp dividing layers / pp
(interleaving needs pp > 1 and m a multiple of pp), SP on/off when tp > 1,
recompute none/selective/full, ZeRO 0-3 when dp > 1, schedule gpipe/1f1b
(vp = 1) or interleaved (vp > 1). Knobs fixed in the plan or on the command
line restrict the space. Evaluation runs through evaluate.evaluate, the same
function a single estimate uses, in chunks so memory stays bounded.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost.memory import RECOMPUTE_CODES
from perfmodel.cost.pipeline import SCHEDULE_CODES
from perfmodel.engine.estimate import Estimate, estimate, evaluate, resolve_config
from perfmodel.engine.knobs import CP_COMM_CODES, Knobs
from perfmodel.engine.rule_table import Facts
from perfmodel.engine.rules import Reason, apply_masks, facts, knob_contradictions
from perfmodel.engine.uncertainty import Band
from perfmodel.errors import PerfModelError
from perfmodel.specs import Parallel, Plan

CHUNK = 65536


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, from its prime factors (trial division stops once the rest is
    prime)."""
    factors: dict[int, int] = {}
    rest, d = n, 2
    while d * d <= rest:
        while rest % d == 0:
            factors[d] = factors.get(d, 0) + 1
            rest //= d
        d += 1 if d == 2 else 2
    if rest > 1:
        factors[rest] = factors.get(rest, 0) + 1
    out = [1]
    for prime, power in factors.items():
        out = [x * prime**k for x in out for k in range(power + 1)]
    return sorted(out)


@dataclass
class Space:
    knobs: Knobs
    rejected: Counter[str] = field(default_factory=Counter)


def _fixed_contradictions(fx: Parallel) -> None:
    problems = knob_contradictions(fx.tp, fx.pp, fx.vp, fx.sequence_parallel, fx.schedule)
    if problems:
        raise PerfModelError("fixed knobs contradict: " + "; ".join(msg for _, msg in problems))


def _keep(cols: dict[str, Array], mask: Array) -> dict[str, Array]:
    return {k: v[mask] for k, v in cols.items()}


def _expand(cols: dict[str, Array], name: str, values: Iterable[int]) -> dict[str, Array]:
    """Every row of ``cols`` once for each value of a new column (rows stay in order)."""
    values = np.asarray(values)
    out = {k: np.repeat(v, values.size) for k, v in cols.items()}
    out[name] = np.tile(values, len(next(iter(cols.values()))) if cols else 0)
    return out


CP_MIN_TOKENS = 1024  # cp is searched while each rank keeps at least this many tokens of a sequence


def enumerate_space(plan: Plan, allow_cross_node_tp: bool = False) -> Space:
    """Every valid configuration as Knobs arrays, and what was rejected, by reason.

    Candidates are built stage by stage as arrays (tp; (tp, cp, pp); (ep, etp); (mbs, vp); then SP,
    recompute, ZeRO and schedule), and each stage drops what the rules (perfmodel/engine/rules.py)
    reject, counted by reason in that stage's unit. The rest hold by construction: dp is num_gpus /
    (tp cp pp), SP only with tp > 1 (and always with MoE and tp > 1), ZeRO only with dp > 1,
    interleaving only with vp > 1. cp is searched when attention is fused (Megatron-Core's CP needs
    it) while each rank keeps CP_MIN_TOKENS tokens; ep and etp (1 or tp) only for mixture-of-experts
    models.
    """
    _fixed_contradictions(plan.parallel)
    b = _Builder(plan)
    c = b.layouts(allow_cross_node_tp)
    c = b.experts(c)
    c = b.micro(c)
    knobs = _categorical(c, plan.parallel, b.experts_n > 0, b.facts_of, b.counts)
    return Space(Knobs(**knobs), Counter(b.counts))


_FACT_KNOBS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "vp",
    "micro_batch_size",
    "first_stage_layers",
    "last_stage_layers",
    "zero_stage",
)


class _Builder:
    """The stages of enumerate_space over one plan: candidates as dicts of arrays, the rules applied
    as masks after each stage, and what each stage rejects counted by reason."""

    def __init__(self, plan: Plan) -> None:
        self.plan, self.fx, self.tr = plan, plan.parallel, plan.training
        self.n, self.gbs = plan.system.num_gpus, plan.training.global_batch_size
        self.experts_n = plan.model.num_moe_experts or 0
        self.counts: dict[str, int] = {}

    def facts_of(self, c: dict[str, Any]) -> Facts:
        knobs = {k: c[k] for k in _FACT_KNOBS if k in c}
        cp_comm = self.fx.cp_comm_type or "p2p"
        p = self.plan
        return facts(p.model, p.system, self.gbs, p.seq_length, self.tr, cp_comm=cp_comm, **knobs)

    def fixed(self, values: Iterable[int], knob: str) -> Array:
        v = getattr(self.fx, knob)
        return np.asarray([x for x in values if v is None or x == v], dtype=np.int64)

    def masked(self, c: dict[str, Any], stage: str, unit: str, **kw: Any) -> dict[str, Any]:
        alive = np.ones(c["tp"].size, bool)
        return _keep(c, apply_masks(stage, self.facts_of(c), alive, self.counts, unit, **kw))

    def layouts(self, allow_cross_node_tp: bool) -> dict[str, Any]:
        """(tp, cp, pp) with dp = num_gpus / (tp cp pp); cp only with fused attention
        (Megatron-Core's CP needs it) while each rank keeps CP_MIN_TOKENS tokens."""
        fx, n, seq = self.fx, self.n, self.plan.seq_length
        c = self.masked(
            {"tp": self.fixed(divisors(n), "tp")},
            "tp",
            "tp values",
            cross_node_tp=allow_cross_node_tp,
        )
        flash = self.tr.flash_attention
        cps = (
            [fx.cp]
            if fx.cp
            else [d for d in divisors(n) if d == 1 or (flash and seq // d >= CP_MIN_TOKENS)]
        )
        c = _expand(_expand(c, "cp", cps), "pp", self.fixed(divisors(n), "pp"))
        c = _keep(c, n % (c["tp"] * c["cp"] * c["pp"]) == 0)
        c["dp"] = n // (c["tp"] * c["cp"] * c["pp"])
        c["first_stage_layers"] = np.full(c["tp"].size, fx.decoder_first_pipeline_num_layers or 0)
        c["last_stage_layers"] = np.full(c["tp"].size, fx.decoder_last_pipeline_num_layers or 0)
        c = self.masked(c, "pair", "(tp, cp, pp) combinations")
        c = _keep(c, (fx.dp is None) | (c["dp"] == (fx.dp or 0)))
        return self.masked(c, "batch", "(tp, cp, pp) combinations")

    def experts(self, c: dict[str, Any]) -> dict[str, Any]:
        """ep over the divisors of the expert count, etp 1 or tp (Megatron's default), for MoE
        only."""
        fx, e = self.fx, self.experts_n
        eps = self.fixed(divisors(e) if e else [1], "ep") if fx.ep is None else [fx.ep]
        c = _expand(c, "ep", eps)
        c = _expand(c, "etp", [fx.etp] if fx.etp is not None else [1, 0] if e else [1])
        c["etp"] = np.where(c["etp"] == 0, c["tp"], c["etp"])  # 0 stands for "etp = tp"
        return self.masked(_dedupe_etp(c), "expert", "(ep, etp) pairs")

    def micro(self, c: dict[str, Any]) -> dict[str, Any]:
        """Micro-batch sizes dividing global batch / dp; vp candidates the divisors of floor(L/p)
        and of ceil(L/p), so chunks are as even as they go."""
        fx, gbs, L = self.fx, self.gbs, self.plan.model.num_layers
        c = _expand(c, "micro_batch_size", self.fixed(divisors(gbs), "micro_batch_size"))
        c = _keep(c, (gbs // c["dp"]) % c["micro_batch_size"] == 0)
        c = _expand(c, "vp", self.fixed(range(1, L + 1), "vp"))
        near = (L // c["pp"]) % c["vp"] == 0
        near |= (-(-L // c["pp"])) % c["vp"] == 0
        given = (fx.vp is not None) & (c["vp"] == (fx.vp or 0))
        c = _keep(c, (c["vp"] == 1) | (near & (c["pp"] * c["vp"] <= L)) | given)
        return self.masked(c, "micro", "(mbs, vp) pairs")


def _dedupe_etp(c: dict[str, Any]) -> dict[str, Any]:
    """etp 1 and etp = tp are the same candidate when tp = 1."""
    key = np.stack([c[k] for k in c], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    keep = np.zeros(len(key), bool)
    keep[first] = True
    return _keep(c, keep)


def _categorical(
    c: dict[str, Any],
    fx: Parallel,
    moe: bool,
    facts_of: Callable[[dict[str, Any]], Facts],
    counts: dict[str, int],
) -> dict[str, Any]:
    """Expand SP, recompute, ZeRO and schedule over the combinations, keeping what is runnable (each
    mask right after its expansion, so the arrays never hold the discarded products)."""
    c = _expand(c, "sequence_parallel", np.array([False, True]))
    sp = c["sequence_parallel"].astype(bool)
    ok = (c["tp"] > 1) | ~sp
    if fx.sequence_parallel is not None:
        ok &= sp == fx.sequence_parallel
    elif moe:
        ok &= sp | (c["tp"] == 1)  # Megatron requires SP for MoE with TP
    c = _keep(c, ok)
    c = _expand(
        c, "recompute", np.array([RECOMPUTE_CODES[fx.recompute]] if fx.recompute else [0, 1, 2])
    )
    c = _expand(
        c, "zero_stage", np.asarray([z for z in (0, 1, 2, 3) if fx.zero_stage in (None, z)])
    )
    c = _keep(c, (c["dp"] * c["cp"] > 1) | (c["zero_stage"] == 0))
    c = _keep(
        c,
        apply_masks(
            "framework", facts_of(c), np.ones(c["tp"].size, bool), counts, "configurations"
        ),
    )
    c = _expand(c, "schedule", np.array(sorted(SCHEDULE_CODES.values())))
    ok = (c["vp"] > 1) == (c["schedule"] == SCHEDULE_CODES["interleaved"])
    if fx.schedule is not None:
        ok &= c["schedule"] == SCHEDULE_CODES[fx.schedule]
    c = _keep(c, ok)
    c["sequence_parallel"] = c["sequence_parallel"].astype(bool)
    c["cp_comm_type"] = np.full(c["tp"].size, CP_COMM_CODES[fx.cp_comm_type or "p2p"])
    return c


KEEP = ("step_time_s", "total_bytes", "fits", "simulated_step_lower_bound_s")


def evaluate_chunked(
    plan: Plan, knobs: Knobs, progress: Callable[[int, int], None] | None = None, chunk: int = CHUNK
) -> dict[str, np.ndarray]:
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
    # step time and memory of feasible configurations (plots)
    points: dict[str, np.ndarray] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "rejected": [
                {"rule": getattr(k, "rule", None), "reason": str(k), "count": v}
                for k, v in self.rejected.items()
            ],
            "search_time_s": self.search_time_s,
            "results": [r.to_json() for r in self.results],
        }
        if self.hint:
            out["hint"] = self.hint
        return out


def search(
    plan: Plan,
    top: int = 5,
    sort: str = "step_time",
    allow_cross_node_tp: bool = False,
    progress: Callable[[int, int], None] | None = None,
    keep_points: bool = False,
) -> SearchResult:
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
    finite = np.isfinite(res["step_time_s"]) & np.isfinite(res["total_bytes"])
    if not finite.any():
        raise PerfModelError(
            "every configuration's estimate overflows: check the link bandwidths and latencies, the"
            " GPU's peak and HBM figures and the batch for values off by orders of magnitude"
        )
    fits = res["fits"] & finite
    n_fail = int((~fits).sum())
    if n_fail:
        rejected[Reason("does not fit in HBM (configurations)", "PM101")] = n_fail
    idx = np.flatnonzero(fits)
    if idx.size == 0:
        elapsed = time.perf_counter() - t0
        return SearchResult(len(knobs), 0, rejected, elapsed, [], _nothing_fits(plan, knobs, res))
    gbs = plan.training.global_batch_size
    if sort == "memory":  # memory does not depend on the simulation
        order = idx[np.argsort(res["total_bytes"][idx], kind="stable")[:top]]
        results = [estimate(plan, knobs.config(int(i), gbs)) for i in order]
    else:
        results = _exact_top(plan, knobs, res, idx, top)
    points = (
        {"step_time_s": res["step_time_s"][idx], "total_bytes": res["total_bytes"][idx]}
        if keep_points
        else None
    )
    return SearchResult(
        len(knobs), int(idx.size), rejected, time.perf_counter() - t0, results, "", points
    )


def _exact_top(
    plan: Plan, knobs: Knobs, res: dict[str, Any], idx: np.ndarray, top: int
) -> list[Estimate]:
    """The top configurations by simulated step time, exactly, whatever ``top`` is (so the best is
    the same for --top 1 and --top 50). The simulation only replaces the pipeline terms, and
    evaluate() gives a lower bound on the simulated step (cost/pipeline.pipeline_lower_bound, exact
    for equal stages): candidates are simulated in the order of that bound until the bound passes
    the top-th best found.
    """
    gbs = plan.training.global_batch_size
    bound = res["simulated_step_lower_bound_s"][idx]
    closed = res["step_time_s"][idx]
    order = np.lexsort((closed, bound))  # by bound, ties by the closed form
    found: list[Estimate] = []
    for j in order:
        if len(found) >= top and bound[j] > found[top - 1].values["step_time_s"] * (1 + 1e-12):
            break
        found.append(estimate(plan, knobs.config(int(idx[j]), gbs)))
        found.sort(key=lambda e: e.values["step_time_s"])
        del found[max(top, 1) * 4 :]  # keep a margin; only the first `top` are returned
    return found[:top]


SLOWER_LINK = 0.8  # robustness probe: the inter-node link at 80% of its bandwidth


def annotate(plan: Plan, result: SearchResult, band: Band) -> None:
    """Attach to each result the expected-error band and its step time with a 20% slower inter-node
    link, and mark the results whose step time lies inside the best one's band as equivalent to it:
    the model cannot tell them apart, so memory and robustness decide (issue 14)."""
    if not result.results:
        return
    link = plan.system.inter_node_link
    slower = plan.with_system(
        inter_node_link=link.model_copy(
            update={"bandwidth_bytes_per_s": link.bandwidth_bytes_per_s * SLOWER_LINK}
        )
    )
    best = result.results[0].values["step_time_s"]
    for e in result.results:
        e.band = band
        e.slower_link_step_s = estimate(slower, e.config).values["step_time_s"]
        e.equivalent_to_best = e.values["step_time_s"] <= best * (1 + band.mean)


def _no_valid_space(plan: Plan, rejected: dict[str, Any]) -> str:
    n = plan.system.num_gpus
    why = "; ".join(f"{k}: {v}" for k, v in rejected.items()) or "the fixed knobs leave nothing"
    return (
        f"no valid configuration for {n} GPUs ({why}). Use a GPU count that tp x pp x dp can fill "
        f"(e.g. a multiple of {plan.system.gpus_per_node}) or relax the fixed knobs"
    )


def _nothing_fits(plan: Plan, knobs: Knobs, res: dict[str, Any]) -> str:
    i = int(np.argmin(res["total_bytes"]))
    need, cap = res["total_bytes"][i], plan.system.gpu.hbm_capacity_bytes
    cfg = knobs.config(i, plan.training.global_batch_size)
    msg = (
        f"nothing fits in {cap / 1e9:.0f} GB of HBM: the leanest configuration (tp={cfg.tp}"
        f" pp={cfg.pp} dp={cfg.dp} mbs={cfg.micro_batch_size} sp={cfg.sequence_parallel}"
        f" recompute={cfg.recompute} zero={cfg.zero_stage}) needs {need / 1e9:.1f} GB"
    )
    n = plan.system.num_gpus
    gpn = plan.system.gpus_per_node
    lean = {
        k: v
        for k, v in (("micro_batch_size", 1), ("recompute", "full"))
        if getattr(plan.parallel, k) is None
    }
    for factor in (2, 4, 8, 16):
        if n * factor > gpn and (n * factor) % gpn:
            continue  # not whole nodes
        # memory only falls with a smaller micro-batch and full recompute: try the leanest of those
        # alone
        bigger = plan.with_system(num_gpus=n * factor).with_parallel(**lean)
        space = enumerate_space(bigger)
        if len(space.knobs) and evaluate_chunked(bigger, space.knobs)["fits"].any():
            return (
                msg
                + f"; the smallest change that fits: {n * factor} GPUs (x{factor}), or a GPU with"
                " more HBM"
            )
    return msg + "; even 16x the GPUs does not fit: use a GPU with more HBM or a shorter sequence"


FREE = (
    "tp",
    "pp",
    "vp",
    "micro_batch_size",
    "sequence_parallel",
    "recompute",
    "zero_stage",
    "cp",
    "ep",
    "etp",
)


def estimate_or_search(plan: Plan) -> tuple[Estimate, dict[str, Any]]:
    """The plan's configuration, or, where it leaves knobs free, the search's best with them:
    (estimate, {knob: the value chosen}). A TP degree the plan fixes is taken as given even across
    nodes (check PM201 says what it costs); only a free one is kept inside a node."""
    free = [k for k in FREE if getattr(plan.parallel, k) is None]
    relevant = [k for k in free if not (k in ("ep", "etp") and not plan.model.is_moe)]
    if not relevant:
        return estimate(plan, resolve_config(plan)), {}
    result = search(plan, top=1, allow_cross_node_tp=plan.parallel.tp is not None)
    if not result.results:
        raise PerfModelError(
            f"with {', '.join(relevant)} free: {result.hint or 'no configuration fits'}"
        )
    best = result.results[0]
    return best, {k: getattr(best.config, k) for k in relevant}
