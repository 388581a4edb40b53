"""A least-recently-used cache bounded by the size of what it holds, not by a count of entries: the
pipeline simulator's walks (engine/schedule.py) range from a few blocks to two million, so a
count that holds a sweep's few hundred small ones would let a few large ones fill the memory."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import update_wrapper
from typing import Any, Generic, NamedTuple, TypeVar

R = TypeVar("R")


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    size: int  # what the entries held weigh, in the caller's units
    entries: int


class SizedCache(Generic[R]):
    """``fn`` with its results remembered by its (hashable) arguments, the least recently used
    dropped while what the entries weigh (``weight(*args)`` each) passes ``budget``; an entry
    heavier than the budget alone is computed and not kept. cache_info() and cache_clear() as
    functools.lru_cache's."""

    def __init__(self, fn: Callable[..., R], budget: int, weight: Callable[..., int]) -> None:
        self.fn, self.budget, self.weight = fn, budget, weight
        self._entries: OrderedDict[Hashable, tuple[R, int]] = OrderedDict()
        self._size = self._hits = self._misses = 0
        self._lock = threading.Lock()  # fn runs outside it
        update_wrapper(self, fn)

    def __call__(self, *args: Any) -> R:
        with self._lock:
            hit = self._entries.get(args)
            if hit is not None:
                self._entries.move_to_end(args)
                self._hits += 1
                return hit[0]
            self._misses += 1
        value, size = self.fn(*args), self.weight(*args)
        if size > self.budget:
            return value
        with self._lock:
            if args not in self._entries:
                self._entries[args] = (value, size)
                self._size += size
            while self._size > self.budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._size -= dropped
        return value

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, self._size, len(self._entries))

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = self._hits = self._misses = 0


def sized_cache(
    budget: int, weight: Callable[..., int]
) -> Callable[[Callable[..., R]], SizedCache[R]]:
    """Decorator: SizedCache(fn, budget, weight)."""

    def wrap(fn: Callable[..., R]) -> SizedCache[R]:
        return SizedCache(fn, budget, weight)

    return wrap
