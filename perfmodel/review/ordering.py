"""How well predictions order the layouts of one family, on arrays (issue 38): runs of one model,
hardware, sequence and batch whose layouts (or GPU counts) differ. A planner acts on the order,
not on the step time, so the fraction of pairs the model orders as measured is the figure that
says whether a search's pick can be trusted.

A pair whose measured times differ by less than ``tie`` (a fraction of the faster one) is a tie:
run-to-run noise orders it, and it is not counted. Top-1 agreement: the layout the model
predicts fastest is measured within ``tie`` of the family's measured fastest.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from perfmodel.review.ranking import TIE, pair_order


@dataclass(frozen=True)
class Ordering:
    families: int  # families of two runs or more
    pairs: int  # pairs whose measured gap is at least the tie
    right: int  # of those, ordered as measured
    top1: int  # families whose predicted fastest is measured within the tie of the fastest
    tie: float

    @property
    def accuracy(self) -> float:
        return self.right / self.pairs if self.pairs else float("nan")

    @property
    def top1_share(self) -> float:
        return self.top1 / self.families if self.families else float("nan")

    def to_json(self) -> dict:
        return {
            "families": self.families,
            "pairs": self.pairs,
            "pairs_ordered_right": self.right,
            "pair_accuracy": self.accuracy,
            "top1_agreement": self.top1_share,
            "tie_below_gap": self.tie,
        }


def ordering(
    family: Sequence[Hashable],
    measured: ArrayLike,
    predicted: ArrayLike,
    tie: float = TIE,
) -> Ordering:
    """Pairwise ordering within each family (runs sharing a ``family`` key)."""
    keys = list(family)
    m_all = np.asarray(measured, dtype=float)
    p_all = np.asarray(predicted, dtype=float)
    groups: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    families = pairs = right = top1 = 0
    for rows in groups.values():
        if len(rows) < 2:
            continue
        m, p = m_all[rows], p_all[rows]
        families += 1
        # every pair i < j, counted and judged as review/ranking.py judges a validation family's
        a, b = np.triu_indices(len(rows), k=1)
        gap, ok = pair_order(m[a], m[b], p[a], p[b])
        counted = gap >= tie
        pairs += int(counted.sum())
        right += int((counted & ok).sum())
        top1 += int(m[np.argmin(p)] <= m.min() * (1 + tie))
    return Ordering(families, pairs, right, top1, tie)
