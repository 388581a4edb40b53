"""Pipeline stages as arrays: layers, time and memory per stage (SPEC 7-8; Narayanan 2021, Sec. 2.2).

Stages come in classes of identical stages, run-length encoded: for each configuration (row)
and class (column), how many layers each stage of the class holds, how many stages the class
has, the index of its first stage, and whether it holds the embedding or the LM head. A
search over 20,000 configurations with up to 96 stages then costs a few columns, not 96; and
``expand`` gives the plain per-stage list the schedule simulator reads. Today's split is
``equal_stages``: a first stage (embedding), middle stages and a last stage (LM head), L/p
layers each; unequal splits are other constructors, and nothing downstream changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Stages:
    """(configurations x classes) arrays; a class with count 0 is absent."""

    layers: np.ndarray
    count: np.ndarray
    first_index: np.ndarray
    embedding: np.ndarray
    head: np.ndarray

    def total(self, per_layer, embedding, head):
        """Per class: layers x per_layer, plus the embedding's and the head's share where held.
        Arguments are per-configuration arrays (or scalars)."""
        col = lambda x: np.asarray(x, dtype=float)[..., None] if np.ndim(x) else x  # noqa: E731
        return (self.layers * col(per_layer) + np.where(self.embedding, col(embedding), 0.0)
                + np.where(self.head, col(head), 0.0))

    def slowest(self, per_class) -> np.ndarray:
        """Index of the largest present class per configuration (ties: the earlier class)."""
        return np.argmax(np.where(self.count > 0, per_class, -np.inf), axis=1)

    def pick(self, per_class, idx):
        """per_class[row, idx[row]]."""
        return np.take_along_axis(np.asarray(per_class), np.asarray(idx)[:, None], axis=1)[:, 0]

    def mean(self, per_class, pp):
        """Mean over all stages: sum(count x value) / pp."""
        return (self.count * per_class).sum(axis=1) / pp

    def expand(self, per_class, row: int = 0) -> list[float]:
        """The per-stage list of one configuration, first stage first."""
        out: list[tuple[int, float]] = []
        for c in range(self.count.shape[1]):
            n, start = int(self.count[row, c]), int(self.first_index[row, c])
            out += [(start + i, float(per_class[row, c])) for i in range(n)]
        return [v for _, v in sorted(out)]


def equal_stages(L, pp) -> Stages:
    """L/p layers on each of p stages: first (embedding), p-2 middle, last (LM head); with p = 1 the
    one stage holds both (Megatron's default split)."""
    pp = np.asarray(pp, dtype=float)
    n = pp.shape[0]
    per = (L / pp)[:, None] * np.ones((n, 3))
    single = pp == 1
    count = np.stack([np.ones(n), np.maximum(pp - 2, 0), np.where(single, 0.0, 1.0)], axis=1)
    first_index = np.stack([np.zeros(n), np.ones(n), np.where(single, 0.0, pp - 1)], axis=1)
    embedding = np.stack([np.ones(n, bool), np.zeros(n, bool), np.zeros(n, bool)], axis=1)
    head = np.stack([single, np.zeros(n, bool), np.ones(n, bool)], axis=1)
    return Stages(per, count, first_index, embedding, head)
