"""One answer (issue 37): the configuration `plan` recommends, and every command that resolves a
plan's free knobs (estimate, memory, sweep, check, report, compare) takes it from here, so they
agree with `plan` on the configuration and its step time.

plan_search is `plan`'s search: a pool of RANK_POOL (the exact fastest --top and every
configuration within the fastest one's step-time band), each with its band, the ones the model
cannot rank by time ranked by memory verdict (a configuration that fits before a tight one) and
then by validated practice (engine/search.annotate, engine/practice.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from perfmodel.engine import memory_switches
from perfmodel.engine.estimate import Estimate, estimate, resolve_config
from perfmodel.engine.search import RANK_POOL, SearchResult, annotate, band_edge, search
from perfmodel.errors import PerfModelError
from perfmodel.specs import Plan

CHOSEN_AS_PLAN = "chosen as `perfmodel plan` chooses them (the same configuration and step time)"


def plan_search(
    plan: Plan,
    bands: dict[str, Any],
    top: int = 5,
    sort: str = "step_time",
    allow_cross_node_tp: bool = False,
    progress: Callable[[int, int], None] | None = None,
    keep_points: bool = False,
) -> SearchResult:
    """`perfmodel plan`'s search: under --sort step_time a pool larger than ``top``, so that the
    configurations the model cannot rank are counted and ranked among all of them (issue 28)."""
    by_time = sort == "step_time"
    result = search(
        plan,
        max(top, RANK_POOL) if by_time else top,
        sort,
        allow_cross_node_tp,
        progress,
        keep_points=keep_points,
        exact=top,
        horizon=band_edge(plan, bands) if by_time else None,
    )
    annotate(plan, result, bands, rank=by_time, keep=top)
    return result


FREE = (
    "tp",
    "pp",
    "vp",
    "micro_batch_size",
    "sequence_parallel",
    "recompute",
    "zero_stage",
    "cp",
    "cp_comm_type",
    "ep",
    "etp",
)


# knobs the memory does not depend on (engine/memory.py reads no CP exchange): a configuration
# that does not fit with one value fits with none, so `estimate` prices it with the fastest value
MEMORY_NEUTRAL = ("cp_comm_type",)


def _fastest_unfitting(plan: Plan, free: list[str]) -> tuple[Estimate, dict[str, Any]]:
    """A configuration that fits with no value of its free memory-neutral knobs, priced with the
    fastest of their values the framework runs (its output says it does not fit)."""
    from perfmodel.specs.framework import PROFILES

    values = {"cp_comm_type": PROFILES[plan.training.framework]["cp_comm_types"] or ("p2p",)}
    priced = [
        estimate(plan, resolve_config(plan, **dict(zip(free, combo, strict=True))))
        for combo in itertools.product(*(values[k] for k in free))
    ]
    best = min(priced, key=lambda e: e.values["step_time_s"])
    return best, {k: getattr(best.config, k) for k in free}


def _cp_fixed_at_one(plan: Plan) -> bool:
    """cp is fixed at 1: then CP's exchange is no choice at all."""
    return plan.parallel.cp == 1


def estimate_or_search(plan: Plan, bands: dict[str, Any]) -> tuple[Estimate, dict[str, Any]]:
    """The plan's configuration, or, where it leaves knobs free, `plan`'s answer with them
    (plan_search, its first result): (estimate, {knob: the value chosen}). A TP degree the plan
    fixes is taken as given even across nodes (check PM201 says what it costs); only a free one is
    kept inside a node."""
    free = [k for k in FREE if getattr(plan.parallel, k) is None]
    relevant = [k for k in free if not (k in ("ep", "etp") and not plan.model.is_moe)]
    relevant = [k for k in relevant if k != "cp_comm_type" or not _cp_fixed_at_one(plan)]
    if not relevant:
        return _switched_if_needed(plan, bands)
    result = plan_search(plan, bands, top=1, allow_cross_node_tp=plan.parallel.tp is not None)
    if not result.results and all(k in MEMORY_NEUTRAL for k in relevant):
        return _fastest_unfitting(plan, relevant)
    if not result.results:
        raise PerfModelError(
            f"with {', '.join(relevant)} free: {result.hint or 'no configuration fits'}"
        )
    best = result.results[0]
    if result.safest is not None:  # a tight answer names the safe one, as plan's does
        best.warnings.append(tight_pick_text(best, result.safest))
    chosen = {k: getattr(best.config, k) for k in relevant}
    if best.config.memory_switch:  # the memory switches plan's answer turns on (issue 37)
        chosen["memory_switch"] = best.config.memory_switch
    return best, chosen


def _switched_if_needed(plan: Plan, bands: dict[str, Any]) -> tuple[Estimate, dict[str, Any]]:
    """A plan that fixes its layout, priced as stated; where that does not fit with margin and
    `plan`'s answer for the same layout turns a memory switch on (the plan leaves its fields to the
    search), the estimate names it: its only free choice left is the plan's own to make."""
    from perfmodel.engine.memory_verdict import margin_text, verdict_of

    est = estimate(plan, resolve_config(plan))
    if verdict_of(est.values) == "fits" or not memory_switches.usable_sets(plan):
        return est, {}
    result = plan_search(plan, bands, top=1, allow_cross_node_tp=True)
    switched = result.results[0] if result.results else None
    if switched is not None and switched.config.memory_switch:
        v = switched.values
        est.warnings.append(
            "`perfmodel plan` turns on a memory switch for this layout: "
            f"{memory_switches.describe(switched.config.memory_switch, plan.model.num_layers)};"
            f" {v['step_time_s']:.3g} s, {margin_text(v['total_bytes'], v['usable_bytes'])}"
        )
    return est, {}


def fixed(plan: Plan, chosen: dict[str, Any]) -> Plan:
    """The plan with the knobs estimate_or_search chose fixed, and the memory switches its answer
    turns on set in its training section: the plan a review of that answer reads."""
    parallel = {k: v for k, v in chosen.items() if k != "memory_switch"}
    out = plan.with_parallel(**parallel) if parallel else plan
    return memory_switches.applied(out, chosen.get("memory_switch", ""))


# the knobs of a layout, as the outputs list them (what separates two answers, what compare and
# memory show)
LAYOUT_KNOBS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "vp",
    "micro_batch_size",
    "sequence_parallel",
    "recompute",
    "zero_stage",
    "schedule",
)
WORDS = {
    "micro_batch_size": "micro-batch",
    "sequence_parallel": "sp",
    "zero_stage": "ZeRO",
    "memory_switch": "memory switches",
}


def _knobs(config: Any, keys: list[str]) -> str:
    def value(k: str) -> Any:
        v = getattr(config, k)
        return (v or "none") if k == "memory_switch" else v

    return ", ".join(f"{WORDS.get(k, k)} {value(k)}" for k in keys)


def tight_pick_text(first: Estimate, safest: Estimate) -> str:
    """A tight answer beside the fastest configuration that fits with margin, and what separates
    them: "recompute none: 21.1 s, tight (82.4 of 81.2 GB, +-10.2%); fastest that fits with
    margin: recompute full, 28.4 s" (issue 37: production recipes run there; the planner chooses
    the risk)."""
    from perfmodel.engine.memory_verdict import margin_text

    keys = [k for k in LAYOUT_KNOBS if getattr(first.config, k) != getattr(safest.config, k)]
    if first.config.memory_switch != safest.config.memory_switch:
        keys.append("memory_switch")
    a, b = first.values, safest.values
    return (
        f"{_knobs(first.config, keys)}: {a['step_time_s']:.3g} s,"
        f" {margin_text(a['total_bytes'], a['usable_bytes'])}; fastest that fits with margin:"
        f" {_knobs(safest.config, keys)}, {b['step_time_s']:.3g} s"
        f" ({100 * (b['step_time_s'] / a['step_time_s'] - 1):+.0f}%)"
    )
