"""What the search keeps of the configurations its walk reaches (engine/search.py): a candidate
each, priced on demand, and the pool of results it returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from perfmodel.engine.estimate import Batch, Estimate


@dataclass
class Candidate:
    """A configuration the search's walk reached: its step time, and its Estimate, made only when
    asked for (one whose pipeline is not simulated has its closed form's step: most need none)."""

    step: float
    batch: Batch
    row: int
    est: Estimate | None = None

    def estimate(self) -> Estimate:
        if self.est is None:
            self.est = self.batch[self.row]
        return self.est


@dataclass(frozen=True)
class Pool:
    """What search() returns: ``size`` results at most, the first ``exact`` the exact fastest, the
    rest only those whose step time is within ``horizon`` (given the fastest) when one is given."""

    size: int
    exact: int
    horizon: Callable[[Estimate], float] | None = None
    alternatives: bool = True  # also the fastest that fits with margin (fastest_safe, plain_safe)

    def limit(self, found: list[Candidate]) -> float:
        """The step time past which no configuration can join the pool, given those ``found``
        (sorted by step time): the size-th best; with a horizon, the larger of the exact-th best
        and the horizon of the fastest, if that is less."""

        def nth(n: int) -> float:
            return found[n - 1].step if len(found) >= n else np.inf

        if self.horizon is None or not found:
            return nth(self.size)
        return min(nth(self.size), max(nth(self.exact), self.horizon(found[0].estimate())))

    def trim(self, found: list[Candidate]) -> list[Estimate]:
        """The pool out of ``found`` (sorted by step time, the walk done): the first ``size``; with
        a horizon, of those past the first ``exact`` only the ones within it (the walk may have
        simulated others on its way, which are not the next fastest)."""
        found = found[: self.size]
        if self.horizon is not None and found:
            edge = self.horizon(found[0].estimate())
            found = found[: self.exact] + [c for c in found[self.exact :] if c.step <= edge]
        return [c.estimate() for c in found]
