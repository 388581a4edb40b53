"""The MoE switches as searched knobs: the token dispatcher (alltoall, allgather, DeepEP, HybridEP)
and Megatron-Core's all-to-all overlap (combined 1F1B). A switch the plan sets is taken as given;
one it leaves out is chosen per configuration among those its framework profile runs
(``moe_dispatchers``, ``moe_a2a_overlaps`` in specs/framework.py) and the configuration allows.

The switches change what one MoE layer costs and nothing else the model prices (memory, the
pipeline's shape, the data-parallel traffic), so for each configuration the choice is the one
whose MoE layer, forward and backward with its exposed communication, is fastest: every candidate
is costed once per distinct micro-batch split (arrays over the splits, one pass per switch value,
never one per configuration), and ties go to the profile's default.
"""

from __future__ import annotations

from dataclasses import fields
from itertools import product
from typing import Any

import numpy as np

from perfmodel.engine.blocks import _KEY, Setting, _block_costs, row_codes
from perfmodel.engine.knobs import DISPATCHER_CODES, Knobs
from perfmodel.engine.rules import Reason
from perfmodel.specs import Plan
from perfmodel.specs.framework import PROFILES

SWITCHES = ("moe_token_dispatcher_type", "moe_a2a_overlap")
_FULL = 2  # RECOMPUTE_CODES["full"]


def free_switches(plan: Plan) -> list[str]:
    """The MoE switches the plan leaves to the search (a dense model has none)."""
    if not plan.model.is_moe:
        return []
    given = plan.training.given()
    return [s for s in SWITCHES if s not in given]


def overlap_allowed(c: dict[str, Any], schedule_names: np.ndarray) -> np.ndarray:
    """Where Megatron-Core runs --overlap-moe-expert-parallel-comm (megatron/training/arguments.py
    asserts each): expert parallelism (ep > 1), no full recompute, a virtual pipeline when pp > 1
    (the combined 1F1B schedule interleaves chunks), and not beside DualPipe, which overlaps in
    its own pairs (rule PM107)."""
    return np.asarray(
        (c["ep"] > 1)
        & (c["recompute"] != _FULL)
        & ((c["pp"] == 1) | (c["vp"] > 1))
        & (schedule_names != "dualpipe"),
        dtype=bool,
    )


def choose(
    plan: Plan, c: dict[str, Any], schedule_names: np.ndarray, counts: dict[str, int]
) -> dict[str, Any]:
    """Set the columns moe_token_dispatcher_type (codes) and moe_a2a_overlap of the candidate
    arrays ``c``: the plan's where it sets them, else the fastest runnable choice per row. Where
    the plan turns the overlap on itself, the rows that cannot run it are dropped and counted in
    ``counts`` (rule PM107)."""
    tr = plan.training
    free = free_switches(plan)
    if plan.model.is_moe and tr.moe_a2a_overlap and "moe_a2a_overlap" not in free:
        ok = overlap_allowed(c, schedule_names)
        if tr.moe_token_dispatcher_type == "allgather" and "moe_token_dispatcher_type" not in free:
            ok &= False
        n_bad = int((~ok).sum())
        if n_bad:
            key = Reason("moe_a2a_overlap cannot run there (configurations)", "PM107")
            counts[key] = counts.get(key, 0) + n_bad
            idx = np.flatnonzero(ok)
            c = {k: v[idx] for k, v in c.items()}
            schedule_names = schedule_names[idx]
    n = c["tp"].size
    c["moe_token_dispatcher_type"] = np.full(n, DISPATCHER_CODES[tr.moe_token_dispatcher_type])
    c["moe_a2a_overlap"] = np.full(n, bool(tr.moe_a2a_overlap))
    if not free or n == 0:
        return c
    profile = PROFILES[tr.framework]
    dispatchers: list[str] = [tr.moe_token_dispatcher_type]
    if "moe_token_dispatcher_type" in free:
        dispatchers += [d for d in profile["moe_dispatchers"] if d not in dispatchers]
    overlaps = [bool(tr.moe_a2a_overlap)]
    if "moe_a2a_overlap" in free and plan.model.is_moe:
        overlaps += [o for o in profile["moe_a2a_overlaps"] if o not in overlaps]
    combos = list(product(dispatchers, overlaps))  # the profile's default first: it wins ties
    if len(combos) == 1:
        return c
    split = [k for k in _KEY if k not in SWITCHES]
    _, first, where = np.unique(
        row_codes([c[k] for k in split]), return_index=True, return_inverse=True
    )
    where = where.ravel()
    uniq = np.stack([np.asarray(c[k], dtype=np.int64)[first] for k in split], axis=1)
    seconds = _layer_seconds(plan, split, uniq, combos)  # (combos, distinct splits)
    can_overlap = overlap_allowed(c, schedule_names)
    best = np.full(n, np.inf)
    pick = np.zeros(n, dtype=np.int64)
    for i, (disp, overlap) in enumerate(combos):
        ok = ~np.asarray(overlap & ((disp == "allgather") | ~can_overlap), dtype=bool)
        t = np.where(ok, seconds[i, where], np.inf)
        better = t < best
        best, pick = np.where(better, t, best), np.where(better, i, pick)
    c["moe_token_dispatcher_type"] = np.array([DISPATCHER_CODES[d] for d, _ in combos])[pick]
    c["moe_a2a_overlap"] = np.array([o for _, o in combos])[pick]
    return c


def _layer_seconds(
    plan: Plan, split: list[str], uniq: np.ndarray, combos: list[tuple[str, bool]]
) -> np.ndarray:
    """Forward plus backward seconds of one MoE layer, communication included, for every switch
    combination (rows) and distinct split (columns)."""
    u, m = len(uniq), len(combos)
    cols: dict[str, np.ndarray] = {f.name: np.zeros(u * m, dtype=np.int64) for f in fields(Knobs)}
    for j, name in enumerate(split):
        cols[name] = np.tile(uniq[:, j], m)
    cols["sequence_parallel"] = cols["sequence_parallel"].astype(bool)
    cols["moe_token_dispatcher_type"] = np.repeat([DISPATCHER_CODES[d] for d, _ in combos], u)
    cols["moe_a2a_overlap"] = np.repeat([o for _, o in combos], u)
    moe = _block_costs(Setting.of(plan), Knobs(**cols), kinds=("moe",))["moe"]
    total = moe.fwd + moe.comm_fwd + moe.bwd + moe.comm_bwd
    return np.asarray(total).reshape(m, u)
