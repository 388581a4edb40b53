"""Figures computed from a plan, remembered by the plan's identity.

Plans are frozen (specs/base.py), so while one lives its identity names its contents. Each entry
holds its plan, so that no other plan can take its id while the entry lasts; an entry is used only
where the plan asked about is that very object. A cache that passes its size is emptied: what it
holds is recomputed on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class ByPlan(Generic[V]):
    """``get(plan, detail, compute)``: compute() the first time (plan, detail) is asked, the
    remembered value after."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[tuple[int, Hashable], tuple[Any, V]] = {}

    def get(self, plan: Any, detail: Hashable, compute: Callable[[], V]) -> V:
        key = (id(plan), detail)
        hit = self._entries.get(key)
        if hit is not None and hit[0] is plan:
            return hit[1]
        value = compute()
        if len(self._entries) > self.size:
            self._entries.clear()
        self._entries[key] = (plan, value)
        return value


# each recent plan's JSON but for its global batch (writing it costs some 20 us)
_BATCHLESS: ByPlan[str] = ByPlan(4096)
# the first plan asked for each such key, while there are no more than this many
_FIRST: dict[str, Any] = {}
FIRST_KEYS = 1024


def batchless_key(plan: Any) -> str:
    """The plan as JSON but for its global batch, and which training fields it set itself (those
    it left out take the framework profile's defaults again in a changed copy, and the assumptions
    name them): equal for plans that differ in the batch alone."""

    def key() -> str:
        given = sorted(k for k in plan.training.given() if k != "global_batch_size")
        return str(plan.model_dump_json(exclude={"training": {"global_batch_size"}})) + repr(given)

    return _BATCHLESS.get(plan, None, key)


def batchless(plan: Any) -> Any:
    """One plan for all those equal to ``plan`` but for the global batch (the first one asked
    for), for figures that never read the batch: what is remembered of that one plan (its
    switched copies, its setting) serves the others, as in a sweep of the batch (issue 40)."""
    key = batchless_key(plan)
    first = _FIRST.get(key)
    if first is None:
        if len(_FIRST) >= FIRST_KEYS:
            _FIRST.clear()
        first = _FIRST[key] = plan
    return first
