"""Pipeline stages as arrays: layers, time and memory per stage (SPEC 7-8; Narayanan 2021, Sec.
2.2).

Stages come in classes of identical stages, run-length encoded: for each configuration (row)
and class (column), how many layers of each kind (dense, MoE) a stage of the class holds, how
many stages the class has, the index of its first stage, and whether it holds the embedding or
the LM head. A search over 100,000 configurations with up to 126 stages then costs four columns,
not 126; ``expand`` gives the plain per-stage list the schedule simulator reads.

The classes are: the first stage (embedding), the middle stages with one layer more, the middle
stages with one layer less, and the last stage (LM head). Megatron's default split is even
(L/p each); Megatron-Core also takes the first and last stage's layer counts
(--decoder-first/last-pipeline-num-layers) or a whole layout (--pipeline-model-parallel-layout),
so a split where p does not divide L is runnable, and ``split_layers`` chooses the one whose
slowest stage is fastest. Where a class's stages hold different mixes of dense and MoE layers, the
class carries their mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from perfmodel.cost import Array, Num

KINDS = ("dense", "moe")


@dataclass(frozen=True)
class Stages:
    """(configurations x classes) arrays; ``layers`` has a trailing axis of layer kinds (KINDS)."""

    layers: np.ndarray
    count: np.ndarray
    first_index: np.ndarray
    embedding: np.ndarray
    head: np.ndarray
    mtp: int = 0  # MTP layers among the head's stage's layers (not decoder layers)

    def total(self, per_layer: Sequence[Num | None], embedding: Num, head: Num) -> Array:
        """Per class: the layers of each kind times that kind's per-layer figure, plus the
        embedding's and the head's share where held. ``per_layer`` is one per-configuration array
        per kind (None for a kind the model does not have)."""

        def col(x: Num) -> Num:
            return np.asarray(x, dtype=float)[..., None] if np.ndim(x) else x

        out: Num = sum(
            (self.layers[..., k] * col(x) for k, x in enumerate(per_layer) if x is not None), 0.0
        )
        return np.asarray(
            out
            + np.where(self.embedding, col(embedding), 0.0)
            + np.where(self.head, col(head), 0.0)
        )

    def slowest(self, per_class: Array) -> Array:
        """Index of the largest present class per configuration (ties: the earlier class)."""
        return np.asarray(np.argmax(np.where(self.count > 0, per_class, -np.inf), axis=1))

    def pick(self, per_class: Num, idx: Array) -> Array:
        """per_class[row, idx[row]]."""
        x, idx = np.asarray(per_class), np.asarray(idx)
        if x.ndim == 2 and x.shape[0] == idx.shape[0]:  # indexing by row: some 3x faster
            return np.asarray(x[np.arange(idx.shape[0]), idx])
        return np.asarray(np.take_along_axis(x, idx[:, None], axis=1)[:, 0])

    def mean(self, per_class: Array, pp: Num) -> Array:
        """Mean over all stages: sum(count x value) / pp."""
        return np.asarray((self.count * per_class).sum(axis=1) / pp)

    def present_max(self, per_class: Array) -> Array:
        return np.asarray(np.where(self.count > 0, per_class, -np.inf).max(axis=1))

    def expand(self, per_class: Array | list[list[float]], row: int = 0) -> list[float]:
        """The per-stage list of one configuration, first stage first (``per_class``: an array,
        or its rows as lists of floats)."""
        values = (
            per_class[row]
            if isinstance(per_class, list)
            else np.asarray(per_class[row], dtype=float).tolist()
        )
        return [values[c] for c in self._classes_of_stages(row)]

    def _classes_of_stages(self, row: int) -> list[int]:
        """The class of each stage of one configuration, first stage first (a row's are asked
        for several figures: the forward, the step, the weight gradients, the layers)."""
        known = self._stage_classes
        if row not in known:
            at = zip(self.count[row].tolist(), self.first_index[row].tolist())
            known[row] = [
                c
                for _, c in sorted(
                    (start + i, c) for c, (n, start) in enumerate(at) for i in range(int(n))
                )
            ]
        return known[row]

    @cached_property
    def _stage_classes(self) -> dict[int, list[int]]:
        return {}

    def dualpipe(self, per_class: Num, rows: Num, how: str = "mean") -> Array:
        """Per class, what a DualPipe rank sees (DeepSeek-V3 report Sec. 3.2.1): rank i holds stage
        i and stage p - 1 - i, so the first and the last stage share the end ranks. ``mean``: a
        figure per micro-batch, which runs on one of the two (the end ranks' is the ends' mean, a
        middle rank's its class's, the slower class's bound); ``sum``: what the rank holds of both
        (the ends' sum, twice a middle stage's). Only where ``rows`` (configurations x 1, or
        configurations); elsewhere per_class as it is."""
        x = np.asarray(per_class, dtype=float)
        x = np.broadcast_to(x, self.count.shape) if x.ndim < 2 else x
        if not np.any(rows):  # no DualPipe row: per_class as it is
            return np.array(x)
        ends = x[:, 0] + x[:, 3]
        out = x * (2.0 if how == "sum" else 1.0)
        out[:, 0] = out[:, 3] = ends / (2.0 if how == "mean" else 1.0)
        rows = np.asarray(rows, dtype=bool)
        return np.asarray(np.where(rows.reshape(-1, 1) if rows.ndim else rows, out, x))

    def v_ends(self, per_class: Num, head: Num, rows: Num) -> Array:
        """Per class, what a rank of a V-shaped schedule holds (ZB-V, V-Half, V-Min, DualPipeV: rank
        r runs virtual stages r and 2p - 1 - r, the dependencies a V: sail-sg's description of ZB-V,
        Qi et al. 2023; so rank 0 holds the first chunk with the embedding and the last with the
        LM head, as Primus's V-schedule patch places them, its embedding group rank 0 alone):
        ``head``, the head's per-configuration share that ``per_class`` carries on the last class,
        moves to the first class where ``rows``."""
        x = np.array(np.broadcast_to(np.asarray(per_class, dtype=float), self.count.shape))
        if not np.any(rows):  # no V-shaped row: per_class as it is
            return x
        h = np.broadcast_to(np.asarray(head, dtype=float).reshape(-1), self.count.shape[:1])
        rows = np.broadcast_to(np.asarray(rows, dtype=bool).reshape(-1), self.count.shape[:1])
        moved = rows & self.head[:, 3] & ~self.head[:, 0]
        x[:, 0] = x[:, 0] + np.where(moved, h, 0.0)
        x[:, 3] = x[:, 3] - np.where(moved, h, 0.0)
        return np.asarray(x)

    def layer_counts(self, row: int = 0) -> list[float]:
        """Decoder layers on each stage of one configuration (all kinds), first stage first: the
        MTP layers the last stage also holds are not among them (Megatron's layer split counts
        decoder layers)."""
        return self.expand(self._decoder_layers, row)

    @cached_property
    def _decoder_layers(self) -> np.ndarray:
        """Per class, the decoder layers a stage holds (layer_counts'), of every configuration."""
        return np.asarray(self.layer_total - np.where(self.head, self.mtp, 0))

    @cached_property
    def layer_total(self) -> np.ndarray:
        """Per class, the layers a stage holds, of every kind: layers.sum(axis=-1), as the two
        kinds' sum (numpy's reduction over a trailing axis of two costs some ten times more)."""
        if self.layers.shape[-1] == 2:
            return np.asarray(self.layers[..., 0] + self.layers[..., 1])
        return np.asarray(self.layers.sum(axis=-1))


def split_layers(
    L: int,
    pp: Array,
    vp: Array,
    first: Array,
    last: Array,
    t_layer: Array,
    t_first_extra: Array,
    t_last_extra: Array,
) -> tuple[Array, Array]:
    """(first, last) stage layer counts per configuration. Given (> 0) counts are kept; otherwise
    the split is even when p divides L (Megatron's default), and else the one that minimizes the
    slowest stage, max(f t + e_first, l t + e_last, ceil(rest/(p-2)) t), over every f, l (the
    search's "uneven stages"); the middle stages share the rest as evenly as it goes.
    """
    pp = np.asarray(pp, dtype=np.int64)
    first, last = np.asarray(first, dtype=np.int64), np.asarray(last, dtype=np.int64)
    even = L % np.maximum(pp, 1) == 0
    q = L // np.maximum(pp, 1)
    f_out = np.where(first > 0, first, np.where(even, q, 0))
    l_out = np.where(last > 0, last, np.where(even, q, 0))
    todo = ~even & (first == 0) & (last == 0) & (pp > 1)
    if todo.any():
        # the best split depends on p and on the ends' extra time in layers only: solve each
        # distinct (p, extras to 1/1000 of a layer) once
        t = np.maximum(np.asarray(t_layer, float)[todo], 1e-30)
        # one int64 key per row (p, and each extra in thousandths of a layer, below 2^21 each):
        # a 1-D unique sorts far faster than a row-wise one
        milli = (1 << 21) - 1
        e_f = np.minimum(np.round(np.asarray(t_first_extra, float)[todo] / t * 1e3), milli)
        e_l = np.minimum(np.round(np.asarray(t_last_extra, float)[todo] / t * 1e3), milli)
        keys = (pp[todo] << 42) | (e_f.astype(np.int64) << 21) | e_l.astype(np.int64)
        uniq, inverse = np.unique(keys, return_inverse=True)
        p_u = uniq >> 42
        ef_u = ((uniq >> 21) & milli) / 1e3
        el_u = (uniq & milli) / 1e3
        f_u, l_u = np.zeros(len(uniq), np.int64), np.zeros(len(uniq), np.int64)
        for p_value in np.unique(p_u):
            rows = np.flatnonzero(p_u == p_value)
            f_u[rows], l_u[rows] = _balanced(
                L, p_u[rows], np.ones(len(rows)), ef_u[rows], el_u[rows]
            )
        f_out, l_out = f_out.copy(), l_out.copy()
        f_out[todo], l_out[todo] = f_u[inverse.ravel()], l_u[inverse.ravel()]
    # one of first/last given: the other takes an even share of what is left
    one = (pp > 1) & ((first > 0) ^ (last > 0))
    share = np.where(first > 0, L - first, L - last) // np.maximum(pp - 1, 1)
    f_out = np.where(one & (first == 0), share, f_out)
    l_out = np.where(one & (last == 0), np.where(pp == 2, L - f_out, share), l_out)
    l_out = np.where((pp == 2) & (last == 0) & (first > 0), L - first, l_out)
    return np.where(pp == 1, L, f_out), np.where(pp == 1, 0, l_out)


def _balanced(L: int, pp: Array, t: Array, e_first: Array, e_last: Array) -> tuple[Array, Array]:
    """The (f, l) minimizing the slowest stage. For each f the span max(f t + e_f, l t + e_l,
    ceil((L - f - l)/(p - 2)) t) is quasi-convex in l (the last stage grows with l, the middle
    ones shrink), so its minimum over l lies where the last stage meets the middle ones, or at the
    largest l the first stage's time still covers (a tie, broken toward the even split as below):
    five l candidates per f instead of every l."""
    top = int(np.max(-(-L // pp))) + 1
    f = np.arange(0, top + 1)[None, :, None]
    p = pp[:, None, None]
    tt, ef, el = t[:, None, None], e_first[:, None, None], e_last[:, None, None]
    q = np.maximum(p - 2, 1)
    rest_f = L - f  # layers for the middle stages and the last one
    # (a millionth of a layer absorbs the rounding of t's products and quotients)
    cross = (rest_f * tt - q * el) / ((q + 1) * tt)  # l t + e_l = (rest_f - l) t / q
    covered = np.floor((f * tt + ef - el) / tt + 1e-6)  # l t + e_l <= f t + e_f
    lc = np.concatenate(
        [
            np.floor(cross + 1e-6),
            np.ceil(cross - 1e-6),
            covered,
            np.ones_like(cross),
            rest_f - q + 0 * cross,
        ],
        axis=2,
    ).astype(np.int64)
    # l over the same range as f (up to one layer past the even share, as the ends hold extra)
    lc = np.where(p == 2, rest_f, np.clip(lc, 1, np.minimum(np.maximum(rest_f - q, 1), top)))
    rest = rest_f - lc
    mid = np.where(p > 2, -(-rest // np.maximum(p - 2, 1)), 0)
    ok = np.where(p > 2, rest >= p - 2, rest == 0) & (f >= 1) & (lc >= 1) & (lc <= top)
    span = np.maximum(np.maximum(f * tt + ef, lc * tt + el), mid * tt)
    span = np.where(ok, span, np.inf)
    flat = span.reshape(len(pp), -1)
    # among equal spans prefer the split closest to even (largest f + l), so ties never starve a
    # stage
    bonus = np.broadcast_to(f + lc, span.shape).reshape(len(pp), -1) / max(L, 1)
    score = np.where(np.isfinite(flat), flat * (1 - 1e-12 * bonus), np.inf)
    best = np.argmin(score, axis=1)
    f_best = best // lc.shape[2]
    l_best = np.take_along_axis(lc.reshape(len(pp), -1), best[:, None], axis=1)[:, 0]
    return f_best, l_best


def build_stages(
    L: int,
    moe_pattern: Sequence[int],
    pp: Array,
    first: Array,
    last: Array,
    mtp: int = 0,
    mtp_kind: int = 0,
) -> Stages:
    """Stage classes for first/last layer counts: first (embedding), middle stages with one layer
    more, middle stages with one layer less, last (LM head); with p = 1 the one stage holds both
    ends. ``moe_pattern`` marks each layer MoE (1) or dense (0). The ``mtp`` multi-token
    prediction layers (of kind ``mtp_kind``) sit with the LM head, as Megatron-Core places them
    on the last pipeline stage."""
    pp = np.asarray(pp, dtype=np.int64)
    n = pp.shape[0]
    first, last = np.asarray(first, dtype=np.int64), np.asarray(last, dtype=np.int64)
    single = pp == 1
    middles = np.maximum(pp - 2, 0)
    rest = np.where(single, 0, L - first - last)
    q = rest // np.maximum(middles, 1)
    r = np.where(middles > 0, rest - q * middles, 0)
    count = np.stack([np.ones(n), r, middles - r, np.where(single, 0, 1)], axis=1).astype(float)
    sizes = np.stack([first, q + 1, q, last], axis=1)
    starts = np.stack([np.zeros(n, np.int64), first, first + r * (q + 1), L - last], axis=1)
    first_index = np.stack(
        [np.zeros(n), np.ones(n), 1 + r, np.where(single, 0, pp - 1)], axis=1
    ).astype(float)
    moe_cum = np.concatenate([[0], np.cumsum(np.asarray(moe_pattern, dtype=float))])
    span = np.stack([sizes[:, 0], r * (q + 1), (middles - r) * q, sizes[:, 3]], axis=1)
    moe_in = moe_cum[np.clip(starts + span, 0, L)] - moe_cum[np.clip(starts, 0, L)]
    moe_per_stage = np.where(count > 0, moe_in / np.maximum(count, 1), 0.0)
    total = sizes.astype(float)
    layers = np.stack([total - moe_per_stage, moe_per_stage], axis=-1)
    embedding = np.zeros((n, 4), bool)
    embedding[:, 0] = True
    head = np.stack([single, np.zeros(n, bool), np.zeros(n, bool), ~single], axis=1)
    if mtp:
        layers[..., mtp_kind] += np.where(head, float(mtp), 0.0)
    return Stages(layers, count, first_index, embedding, head, mtp)
