"""When the model cannot choose (issue 28): configurations whose predicted step times lie inside the
fastest one's typical band are equivalent, since the band is what the model gets wrong on runs it
never saw. Among them the one nearest validated practice comes first: the best of many noisy
estimates is biased toward optimism (Smith and Winkler 2006, "The Optimizer's Curse"), and the
further a pick lies from what published runs did, the less its prediction has been checked.

Nearest practice, in this order: fewer memory switches (engine/memory_switches.py); no combination
that no published run of the framework made (the band's `unvalidated`); no context parallelism at a
short sequence (CP splits sequences of 16k tokens and more in the published long-context runs; below
that it only pays where memory needs it, and then every equivalent has it); fewer parallel
dimensions; fewer model chunks per stage; then the predicted step time.
"""

from __future__ import annotations

from typing import Any

from perfmodel.engine import memory_switches
from perfmodel.specs import Plan

SHORT_SEQUENCE = 16384  # tokens: below this, CP is a departure from the published layouts


def dimensions(config: Any) -> list[str]:
    """The parallel dimensions a configuration uses beyond data parallelism."""
    dims = [d for d in ("tp", "pp", "cp", "ep") if getattr(config, d) > 1]
    return dims + (["sharded"] if config.zero_stage >= 2 else [])


def key(plan: Plan, est: Any) -> tuple[int, int, bool, int, int, float]:
    c = est.config
    unvalidated = len(est.band.unvalidated) if est.band is not None else 0
    short_cp = c.cp > 1 and plan.seq_length < SHORT_SEQUENCE
    # fewer memory switches first: each trades the optimizer's numerics, which the band cannot
    # price, for memory (engine/memory_switches.py)
    switches = len(memory_switches.names(c.memory_switch))
    return (switches, unvalidated, short_cp, len(dimensions(c)), c.vp, est.values["step_time_s"])


def rank(plan: Plan, results: list[Any]) -> list[Any]:
    """The results, the equivalent ones first: among them one whose memory fits with margin before
    a tight one (issue 37: the model cannot tell them apart in time, but can in memory), then the
    nearest validated practice."""
    same = [e for e in results if e.equivalent_to_best]
    rest = [e for e in results if not e.equivalent_to_best]
    return sorted(same, key=lambda e: (bool(e.values["tight"]), *key(plan, e))) + rest


def traits(plan: Plan, est: Any) -> dict[str, str]:
    """What may set one equivalent configuration apart from another, in words."""
    c = est.config
    dims = dimensions(c)
    bad = est.band.unvalidated if est.band is not None else ()
    return {
        "dims": (
            f"{len(dims)} dimension{'s' if len(dims) != 1 else ''} ({'+'.join(dims) or 'dp only'})"
        ),
        "chunks": f"{c.vp} chunk{'s' if c.vp > 1 else ''} per stage",
        "cp": (
            f"CP {c.cp} at {plan.seq_length} tokens"
            if c.cp > 1 and plan.seq_length < SHORT_SEQUENCE
            else "no CP at a short sequence"
        ),
        "validated": "unvalidated: " + "; ".join(bad) if bad else "a validated combination",
        "switches": (
            "memory switches " + ", ".join(memory_switches.names(c.memory_switch))
            if c.memory_switch
            else "no memory switch"
        ),
    }


def separates(plan: Plan, same: list[Any]) -> tuple[list[str], list[str]]:
    """For equivalent configurations: what they all share (said once) and, for each, its memory
    margin (the usable memory, HBM less the reserve, above its peak: what "fits" measures against)
    and the traits in which they differ."""
    every = [traits(plan, e) for e in same]
    differ = [k for k in every[0] if len({t[k] for t in every}) > 1]
    # "no memory switch" goes unsaid where none of them has one
    shared = [
        every[0][k]
        for k in every[0]
        if k not in differ and (k != "switches" or every[0][k] != "no memory switch")
    ]
    lines = [
        ", ".join(
            [
                f"{(e.values['usable_bytes'] - e.values['total_bytes']) / 1e9:.0f} GB memory margin"
                + (" (memory tight)" if e.values["tight"] else "")
            ]
            + [t[k] for k in differ]
        )
        for e, t in zip(same, every)
    ]
    return shared, lines
