"""Grid fits cheap enough to rerun in CI (issue 28: every shipped fitted value and every quoted
leave-one-out figure is checked against what its calibration script prints,
tests/test_constants.py).

A calibration fits one scalar (an efficiency, a clock, a host time) by the least mean |error| over
a grid of values: np.argmin of the objective over the whole grid, the first index among ties. Two
things make that cheap without changing its answer:

- each run's error at a grid value is computed once (Errors): a leave-one-out refit reads the
  same runs at the same values, so it costs no new prediction;
- the grid is searched by branch and bound (argmin): a run's predicted step time never grows as
  an efficiency grows (and never shrinks as a host time grows), so between two evaluated grid
  points i < j its error lies between its errors there, and |error| is at least
  max(0, e_j, -e_i) (errors falling with the index). An interval whose bound cannot beat the
  best point found is not evaluated. The bound's premise is checked on every evaluated point; a
  run that breaks it makes the search evaluate the whole grid.

Each fit then evaluates about 2 log2(grid size) values per run instead of the grid.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Sequence

import numpy as np

# the scores of grid fits: a mean of |error| or of squared errors (percent)
SCORES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "squares": np.square,
}


class Errors:
    """Signed errors (percent) of named runs at grid values, each computed once: ``at(name, value)``
    calls ``compute(name, value)`` the first time."""

    def __init__(self, compute: Callable[[str, Hashable], float]) -> None:
        self.compute = compute
        self.table: dict[tuple[str, Hashable], float] = {}

    def at(self, name: str, value: Hashable) -> float:
        key = (name, value)
        if key not in self.table:
            self.table[key] = float(self.compute(name, value))
        return self.table[key]

    def row(self, names: Sequence[str], value: Hashable) -> np.ndarray:
        return np.array([self.at(n, value) for n in names])


def argmin(
    grid: Sequence[Hashable],
    names: Sequence[str],
    errors: Errors,
    score: str = "abs",
    rising: bool = False,
    seed: Hashable | None = None,
) -> tuple[int, float]:
    """(index, score) of np.argmin over ``grid`` of the mean score of ``names``' errors, by branch
    and bound. ``rising``: the errors grow along the grid (a host time) instead of falling (an
    efficiency). ``seed``: a grid value to look at first (a shipped value, the fit on every run
    for a leave-one-out refit): the answer is the same, found with fewer prices when it is near."""
    g = SCORES[score]
    n = len(grid)
    sign = -1.0 if rising else 1.0  # errors as they fall along the grid

    def e(i: int) -> np.ndarray:
        return sign * errors.row(names, grid[i])

    done: dict[int, float] = {}

    def f(i: int) -> float:
        if i not in done:
            done[i] = float(np.mean(g(e(i))))
        return done[i]

    def best() -> tuple[int, float]:
        i = min(done, key=lambda k: (done[k], k))
        return i, done[i]

    def bound(i: int, j: int) -> float:
        """The least mean score any grid point strictly between i and j can have."""
        return float(np.mean(g(np.maximum(0.0, np.maximum(e(j), -e(i))))))

    f(0), f(n - 1)
    cuts = [0, n - 1]
    if seed is not None and seed in grid:
        k = list(grid).index(seed)
        cuts = sorted({0, n - 1, *(i for i in (k - 1, k, k + 1) if 0 <= i < n)})
        for i in cuts:
            f(i)
    heap = [(bound(i, j), i, j) for i, j in itertools.pairwise(cuts)]
    heapq.heapify(heap)
    while heap:
        lb, i, j = heapq.heappop(heap)
        if j - i < 2:
            continue
        k, fk = best()
        if lb > fk or (lb == fk and i + 1 > k):
            continue
        mid = (i + j) // 2
        f(mid)
        heapq.heappush(heap, (bound(i, mid), i, mid))
        heapq.heappush(heap, (bound(mid, j), mid, j))
    evaluated = sorted(done)
    rows = np.array([e(i) for i in evaluated])
    if np.any(np.diff(rows, axis=0) > 1e-9):
        # an error that rises where the bound assumed it falls: no bound holds, search it all
        for i in range(n):
            f(i)
    return best()


def fit(
    grid: Sequence[Hashable],
    names: Sequence[str],
    errors: Errors,
    score: str = "abs",
    rising: bool = False,
    seed: Hashable | None = None,
) -> tuple[Hashable, float]:
    """The grid value with the least mean score over ``names``, and that score."""
    i, s = argmin(grid, names, errors, score, rising, seed)
    return grid[i], s


def leave_one_out(
    grid: Sequence[Hashable],
    names: Sequence[str],
    errors: Errors,
    score: str = "abs",
    rising: bool = False,
) -> list[tuple[str, Hashable, float]]:
    """Each run's error when the value is fitted on the others: (run, the others' value, error);
    each refit looks first at the value fitted on every run."""
    everyone, _ = fit(grid, names, errors, score, rising)
    out = []
    for i, name in enumerate(names):
        rest = [n for k, n in enumerate(names) if k != i]
        v, _ = fit(grid, rest, errors, score, rising, seed=everyone)
        out.append((name, v, errors.at(name, v)))
    return out
