"""The times the schedule simulator reads (engine/schedule.py), one per virtual stage: a scalar,
per-stage times split evenly over a rank's chunks, or per-chunk times, checked finite and
non-negative."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from perfmodel.cost import Array, Num
from perfmodel.engine.schedule_zb import rank_of
from perfmodel.errors import PerfModelError


def virtual_times(x: Num | Sequence[float], p: int, v: int, name: str) -> tuple[float, ...]:
    """per_virtual as a tuple; p per-stage times given as Python floats (an estimate's) are split
    in Python, the same divisions numpy makes, without its set-up for a handful of numbers."""
    if isinstance(x, (list, tuple)) and len(x) == p and all(type(t) is float for t in x):
        out = tuple(t / v for t in x) * v  # virtual stage u = c p + s
        if all(0.0 <= t < math.inf for t in out):
            return out
    return tuple(per_virtual(x, p, v, name).tolist())


def per_virtual(x: Num | Sequence[float], p: int, v: int, name: str) -> Array:
    """Times per virtual stage (p v entries): a scalar, p per-stage times (split evenly over
    chunks), or p v."""
    a = np.atleast_1d(np.asarray(x, dtype=float))
    if a.size == 1:
        a = np.full(p, float(a[0]))
    if a.size == p:
        a = np.tile(a / v, v)  # virtual stage u = c p + s
    if a.size != p * v:
        raise PerfModelError(
            f"{name}: give one time, {p} per-stage times or {p * v} per-chunk times; got {a.size}"
        )
    if (a < 0).any() or not np.isfinite(a).all():
        raise PerfModelError(f"{name}: times must be finite and non-negative")
    return a


def per_rank(
    x: Num | Sequence[float], p: int, v: int, name: str, looped: bool = False
) -> tuple[float, ...]:
    """Times per virtual stage of a zero-bubble schedule: per-stage times are a rank's, split
    evenly over its chunks, virtual stage u on rank schedule_zb.rank_of(u) (the V folds back; a
    looped schedule's chunk c of rank s is u = c p + s)."""
    a = np.atleast_1d(np.asarray(x, dtype=float))
    if a.size in (1, p):
        a = np.broadcast_to(a, (p,)) / v
        a = np.array([a[rank_of(u, p, v, looped)] for u in range(p * v)])
    return tuple(per_virtual(a, p, v, name).tolist())
