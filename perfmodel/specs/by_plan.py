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
