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

import bisect
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from perfmodel.engine import hints, memory_switches, practice, uncertainty
from perfmodel.engine.estimate import Batch, Estimate, estimate, estimates
from perfmodel.engine.evaluate import KEEP, evaluate_chunked
from perfmodel.engine.knobs import Knobs
from perfmodel.engine.memory import memory_lower_bound
from perfmodel.engine.memory_verdict import fits_mask, margin_mask
from perfmodel.engine.reserve import usable_bytes
from perfmodel.engine.rules import Reason
from perfmodel.engine.search_pool import Candidate, Pool
from perfmodel.engine.space import CP_FLOOR_TOKENS, CP_MIN_TOKENS, enumerate_space
from perfmodel.engine.switch_rows import with_switches
from perfmodel.errors import PerfModelError
from perfmodel.specs import Plan


def _evaluate_what_can_fit(
    plan: Plan, knobs: Knobs, progress: Callable[[int, int], None] | None
) -> dict[str, np.ndarray]:
    """evaluate_chunked over the configurations whose memory bound leaves room in HBM (the model
    states and the loss's logits: engine/memory.memory_lower_bound, a bound every priced total
    reaches); the rest are recorded as not fitting, at that bound, and not priced. When the bound
    leaves nothing, everything is priced, so what is reported about the leanest configuration is
    its real memory."""
    usable = usable_bytes(plan.system)
    bound = memory_lower_bound(plan, knobs)
    keep = np.flatnonzero(fits_mask(bound, usable))
    if keep.size in (0, len(knobs)):
        return evaluate_chunked(plan, knobs, progress)
    part = evaluate_chunked(plan, knobs.take(keep), progress)
    n = len(knobs)
    out = {
        "step_time_s": np.full(n, np.inf),
        "total_bytes": bound.astype(float),
        "fits": np.zeros(n, dtype=bool),
        "simulated_step_lower_bound_s": np.full(n, np.inf),
        "switchable_s": np.zeros(n),
        "activations_bytes": np.zeros(n),
        "layer_activations_bytes": np.zeros(n),
        "recompute": np.zeros(n),
    }
    for key in KEEP:
        out[key][keep] = part[key]
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
    # configurations inside the fastest one's band, among those annotate() ranked (issue 28)
    equivalents: int | None = None
    # where the first result is tight: the fastest configuration that fits with margin (issue 37)
    safest: Estimate | None = None
    # where every result is tight, that one as the search found it (annotate ranks it with them)
    fastest_safe: Estimate | None = None
    # where the results turn memory switches on and none fits with margin without them: the
    # fastest that does (annotate ranks it with them, fewer switches first among equivalents)
    plain_safe: Estimate | None = None

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
        if self.equivalents is not None:
            # how many of the ranked pool lie inside the fastest one's band (issue 28)
            out["equivalent_to_fastest"] = self.equivalents
        if self.hint:
            out["hint"] = self.hint
        if self.safest is not None:
            out["fastest_that_fits"] = self.safest.to_json()
        return out


def search(
    plan: Plan,
    top: int = 5,
    sort: str = "step_time",
    allow_cross_node_tp: bool = False,
    progress: Callable[[int, int], None] | None = None,
    keep_points: bool = False,
    exact: int | None = None,
    horizon: Callable[[Estimate], float] | None = None,
    alternatives: bool = True,
    cp_for_offload: bool = True,
) -> SearchResult:
    """Rank every feasible configuration by step time (or memory) and detail the top ones. CP is
    tried while each rank keeps CP_MIN_TOKENS of a sequence; where nothing fits so, or only by
    offloading activations to the host at a cost in time, the search is run again with CP down to
    CP_FLOOR_TOKENS, as memory needs it, and taken where its answer is faster (``cp_for_offload``
    False: only where nothing fits); each result whose CP chunk is below what any published run
    used says so.

    With ``horizon`` (the step time, given the fastest configuration, up to which another may be
    equivalent to it: the upper edge of its band), the ``top`` results are a pool: its first
    ``exact`` (default all) are the exact fastest, and beyond them it holds only the ones within
    the horizon of the fastest (annotate ranks those by practice); the others are not simulated.
    ``alternatives``: look for fastest_safe and plain_safe (_nearer_practice's pools need none)."""
    if top < 1:
        raise PerfModelError(f"--top must be at least 1, got {top}")
    if sort not in ("step_time", "memory"):
        raise PerfModelError(f"--sort must be step_time or memory, got {sort!r}")
    pool = Pool(top, top if exact is None else min(exact, top), horizon, alternatives)
    args = (plan, pool, sort, allow_cross_node_tp, progress, keep_points)
    first = _search(*args, CP_MIN_TOKENS)
    if plan.parallel.cp is not None or not plan.training.flash_attention:
        return first
    if first.results and not (cp_for_offload and _offload_costs(plan, first.results[0])):
        return first
    try:
        wider = _search(*args, CP_FLOOR_TOKENS)
    except PerfModelError:
        return first
    if not wider.results or (
        first.results
        and wider.results[0].values["step_time_s"] >= first.results[0].values["step_time_s"]
    ):
        return first
    for e in wider.results:
        chunk = plan.seq_length // e.config.cp
        if chunk < CP_MIN_TOKENS:
            e.warnings.append(
                f"cp({e.config.cp}) leaves {chunk:,} tokens a rank, fewer than any published run's"
                f" CP chunk ({CP_MIN_TOKENS:,}): searched because nothing fits without it"
            )
    return wider


def _offload_costs(plan: Plan, best: Estimate) -> bool:
    """Whether a search's answer fits by sending activations to the host (layer-wise or by
    module) at a cost in time: the copy its passes do not hide. CP is the other way to shed
    activations, which the wider search tries."""
    switch = best.config.memory_switch
    if not memory_switches.ROW_BY_ROW[memory_switches.SET_CODES[switch]]:
        return False
    plain = estimate(plan, replace(best.config, memory_switch=""))
    return bool(best.values["step_time_s"] > plain.values["step_time_s"] * (1 + 1e-9))


def _search(
    plan: Plan,
    pool: Pool,
    sort: str,
    allow_cross_node_tp: bool,
    progress: Callable[[int, int], None] | None,
    keep_points: bool,
    cp_min_tokens: int,
) -> SearchResult:
    """search() over the space whose CP chunks keep ``cp_min_tokens`` tokens."""
    t0 = time.perf_counter()
    space = enumerate_space(plan, allow_cross_node_tp, cp_min_tokens)
    knobs = space.knobs
    rejected = dict(space.rejected)
    if len(knobs) == 0:
        raise PerfModelError(space.batch_text or hints.no_valid_space(plan, rejected))
    res = _evaluate_what_can_fit(plan, knobs, progress)
    finite = np.isfinite(res["step_time_s"]) & np.isfinite(res["total_bytes"])
    if not finite.any():
        raise PerfModelError(
            "every configuration's estimate overflows: check the link bandwidths and latencies, the"
            " GPU's peak and HBM figures and the batch for values off by orders of magnitude"
        )
    knobs, res = with_switches(plan, knobs, res)
    finite = np.isfinite(res["step_time_s"]) & np.isfinite(res["total_bytes"])
    fits = res["fits"] & finite
    n_fail = int((~fits).sum())
    if n_fail:
        rejected[Reason("does not fit in memory (configurations)", "PM101")] = n_fail
    idx = np.flatnonzero(fits)
    if idx.size == 0 and not np.isfinite(res["step_time_s"]).all():
        # nothing fits: price the configurations the bound set aside too, so that what the
        # message says of the leanest is its real memory
        res = evaluate_chunked(plan, knobs, progress)
    if idx.size == 0:
        elapsed = time.perf_counter() - t0
        return SearchResult(
            len(knobs), 0, rejected, elapsed, [], hints.nothing_fits(plan, knobs, res)
        )
    gbs = plan.training.global_batch_size
    safe: list[Estimate] = []
    plain: list[Estimate] = []
    if sort == "memory":  # memory does not depend on the simulation
        order = idx[np.argsort(res["total_bytes"][idx], kind="stable")[: pool.size]]
        results = [estimate(plan, knobs.config(int(i), gbs)) for i in order]
    else:
        results = _exact_top(plan, knobs, res, idx, pool)
        if pool.alternatives:
            safe = _safest(plan, knobs, res, idx, results)
            plain = _plain_safe(plan, knobs, res, idx, results)
    points = (
        {"step_time_s": res["step_time_s"][idx], "total_bytes": res["total_bytes"][idx]}
        if keep_points
        else None
    )
    out = SearchResult(
        len(knobs), int(idx.size), rejected, time.perf_counter() - t0, results, "", points
    )
    out.fastest_safe = safe[0] if safe else None
    out.plain_safe = plain[0] if plain else None
    return out


def _exact_top(
    plan: Plan, knobs: Knobs, res: dict[str, Any], idx: np.ndarray, pool: Pool
) -> list[Estimate]:
    """The top configurations by simulated step time, exactly, whatever the pool's size is (so the
    best is the same for --top 1 and --top 50). The simulation only replaces the pipeline terms,
    and evaluate() gives a lower bound on the simulated step (cost/pipeline.pipeline_lower_bound,
    exact for equal stages): candidates are simulated in the order of that bound until the bound
    passes the pool's limit (Pool.limit). Every configuration not simulated has a step above that
    limit, and the limit only falls as the walk finds faster ones.
    """
    top = pool.size
    bound = res["simulated_step_lower_bound_s"][idx]
    closed = res["step_time_s"][idx]
    found: list[Candidate] = []
    # candidates are estimated a batch at a time (one vectorized evaluate per batch); they are
    # taken in the same order and the walk stops at the same one as one at a time
    batch = max(2 * top, 32)
    for order in _in_bound_order(bound, closed, 64 * batch):
        for start in range(0, order.size, batch):
            part = order[start : start + batch]
            done = Batch.of_rows(plan, knobs.take(idx[part]))
            for row, j in enumerate(part):
                if bound[j] > pool.limit(found) * (1 + 1e-12):
                    return pool.trim(found)
                step = done.closed_step(row)
                if step is None:  # simulated: the Estimate now
                    est = done[row]
                    new = Candidate(est.values["step_time_s"], done, row, est)
                else:
                    new = Candidate(step, done, row)
                # after those of the same step, as a stable sort of the list with it appended
                bisect.insort(found, new, key=_step)
                del found[max(top, 1) * 4 :]  # keep a margin; only the first `top` are returned
    return pool.trim(found)


def _step(c: Candidate) -> float:
    return c.step


def _safest(
    plan: Plan, knobs: Knobs, res: dict[str, Any], idx: np.ndarray, found: list[Estimate]
) -> list[Estimate]:
    """The fastest configuration whose memory fits with margin (the band's upper edge under the
    usable line), where every one ``found`` is tight and it is not among them (issue 37): the
    alternative a tight answer names, found by the same walk over that mask."""
    if not found or not all(e.values["tight"] for e in found):
        return []
    return _fastest_with_margin(plan, knobs, res, idx)


def _plain_safe(
    plan: Plan, knobs: Knobs, res: dict[str, Any], idx: np.ndarray, found: list[Estimate]
) -> list[Estimate]:
    """The fastest configuration that fits with margin with no memory switch, where some result
    turns one on and none fits so without: the switched variants may fill the pool, yet a
    configuration without them inside the band comes first (engine/practice.py)."""
    if not any(e.config.memory_switch for e in found):
        return []
    if any(not e.config.memory_switch and not e.values["tight"] for e in found):
        return []
    return _fastest_with_margin(plan, knobs, res, idx[knobs.memory_switch[idx] == 0])


def _fastest_with_margin(
    plan: Plan, knobs: Knobs, res: dict[str, Any], rows: np.ndarray
) -> list[Estimate]:
    """The fastest of ``rows`` whose memory fits with margin, by the exact walk (one result)."""
    keep = rows[margin_mask(res["total_bytes"][rows], usable_bytes(plan.system))]
    return _exact_top(plan, knobs, res, keep, Pool(1, 1)) if keep.size else []


def _in_bound_order(bound: np.ndarray, closed: np.ndarray, head: int) -> Iterator[np.ndarray]:
    """Candidate indices by (bound, closed form), ascending, ties in index order (np.lexsort's),
    in pieces: the ``head`` smallest bounds first (from a partition, with every row tied at its
    last bound), and the rest sorted only if the walk reaches them."""
    if head >= bound.size:
        yield np.lexsort((closed, bound))
        return
    cut = np.partition(bound, head)[head]
    near = bound <= cut
    for part in (np.flatnonzero(near), np.flatnonzero(~near)):
        yield part[np.lexsort((closed[part], bound[part]))]


# the configurations `plan` ranks by validated practice when it cannot rank them by step time
RANK_POOL = 50
SLOWER_LINK = 0.8  # robustness probe: the inter-node link at 80% of its bandwidth


def band_edge(plan: Plan, bands: dict[str, Any]) -> Callable[[Estimate], float]:
    """The step time up to which a configuration is equivalent to ``fastest`` (annotate's rule: the
    upper edge of the fastest one's typical band): search()'s horizon for plan's pool."""

    seen: dict[Any, float] = {}  # the walk asks again for the same fastest, candidate by candidate

    def edge(fastest: Estimate) -> float:
        if fastest.config not in seen:
            step = fastest.values["step_time_s"]
            seen[fastest.config] = uncertainty.of_estimate(plan, bands, fastest).range(step)[1]
        return seen[fastest.config]

    return edge


def annotate(
    plan: Plan,
    result: SearchResult,
    bands: dict[str, Any],
    rank: bool = True,
    keep: int | None = None,
) -> None:
    """Attach to each result its out-of-sample error band and its step time with a 20% slower
    inter-node link, and mark the results whose step time lies inside the fastest one's typical
    band as equivalent to it: the model cannot rank them (issue 28). With ``rank`` (results sorted
    by step time), the equivalent ones come first, nearest validated practice first
    (engine/practice.py); then only the first ``keep`` are kept."""
    if not result.results:
        return
    link = plan.system.inter_node_link
    slower = plan.with_system(
        inter_node_link=link.model_copy(
            update={"bandwidth_bytes_per_s": link.bandwidth_bytes_per_s * SLOWER_LINK}
        )
    )
    if rank:
        result.results += _nearer_practice(plan, result.results)
        for safe in (result.fastest_safe, result.plain_safe):
            if safe is not None and all(e.config != safe.config for e in result.results):
                result.results.append(safe)
    for e in result.results:
        e.band = uncertainty.of_estimate(plan, bands, e)
    # the fastest listed (with --sort memory the first row is the leanest, not the fastest)
    fastest = min(result.results, key=lambda e: e.values["step_time_s"])
    upper = band_edge(plan, bands)(fastest)
    for e in result.results:
        # within the fastest's typical band: the model cannot tell them apart
        e.equivalent_to_best = e.values["step_time_s"] <= upper
    result.equivalents = sum(bool(e.equivalent_to_best) for e in result.results)
    if rank:
        result.results = practice.rank(plan, result.results)
        _plain_first(plan, bands, result)
        margin = [e for e in result.results if not e.values["tight"]]
        if result.results[0].values["tight"] and margin:
            # a tight answer faster than every fitting one beyond the band: name the safe one
            result.safest = min(margin, key=lambda e: e.values["step_time_s"])
    result.results = result.results[:keep]
    # one evaluation for all (estimates: each row is what estimate gives for it alone)
    for e, s in zip(result.results, estimates(slower, [e.config for e in result.results])):
        e.slower_link_step_s = s.values["step_time_s"]


def _plain_first(plan: Plan, bands: dict[str, Any], result: SearchResult) -> None:
    """A switched answer gives way to the fastest configuration that fits with margin without a
    memory switch where that one lies inside its band: as a tight answer must beat every fitting
    one by more than the band to come first, a switched one must beat every plain one so (the
    switches trade the optimizer's numerics, which the band cannot price, for memory)."""
    first, plain = result.results[0], result.plain_safe
    if plain is None or not first.config.memory_switch or first.values["tight"]:
        return
    if plain.values["step_time_s"] <= band_edge(plan, bands)(first):
        plain.equivalent_to_best = True
        result.results = [plain] + [e for e in result.results if e.config != plain.config]
        result.equivalents = sum(bool(e.equivalent_to_best) for e in result.results)


PRACTICE_TOP = 5  # the best of each search without a dimension the fastest departs with


def _nearer_practice(plan: Plan, results: list[Estimate]) -> list[Estimate]:
    """The best configurations without each departure from validated practice the fastest makes
    (context parallelism at a short sequence; pipeline parallelism), where the plan leaves that
    dimension free: the pool ranked by step time may hold none of them, though they may lie inside
    the band (engine/practice.py)."""
    fastest = min(results, key=lambda e: e.values["step_time_s"]).config
    seen = {e.config for e in results}
    departs = {
        "cp": fastest.cp > 1 and plan.seq_length < practice.SHORT_SEQUENCE,
        "pp": fastest.pp > 1,
    }
    out = []
    for dim, yes in departs.items():
        if not yes or getattr(plan.parallel, dim) is not None:
            continue
        try:
            # CP below the published chunks is no nearer practice than an offloading answer
            fixed = plan.with_parallel(**{dim: 1})
            alt = search(fixed, PRACTICE_TOP, alternatives=False, cp_for_offload=False)
        except PerfModelError:  # no configuration without it: memory or the space needs it
            continue
        out += [e for e in alt.results if e.config not in seen]
        seen |= {e.config for e in alt.results}
    return out
