"""Does the model order layouts as they measured? (issue 38, item 5)

A family is the validation runs of one model on one hardware (GPU, node, links) at one sequence
length, precision and global batch: they differ only in layout or GPU count, the choice a planner
makes with the search. Runs are compared by per-GPU throughput, tokens / (step x GPUs), which is
the step time's order where the GPU counts are equal.

For each pair of a family the measured order is taken as right; a pair whose measured gap is under
``TIE`` (3%: the run-to-run scatter the sources report, e.g. torchtitan's and MLPerf's repeated
runs) is a tie and is left out. A pair is ordered right when the predicted per-GPU throughputs
order the same way. Top-1 agreement: the fastest run measured is the fastest predicted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from perfmodel.specs import Plan

TIE = 0.03  # measured gaps below this are ties (fraction of the slower run's throughput)
WIDE = 0.10  # pairs with a measured gap at least this are also scored on their own


@dataclass(frozen=True)
class Run:
    """One validation run: its plan, measured and predicted seconds per step."""

    name: str
    plan: Plan
    measured_s: float
    predicted_s: float

    def per_gpu(self, seconds: float) -> float:
        """Tokens per second per GPU at ``seconds`` per step."""
        tokens = self.plan.training.global_batch_size * self.plan.seq_length
        return tokens / (seconds * self.plan.system.num_gpus)

    @property
    def measured(self) -> float:
        return self.per_gpu(self.measured_s)

    @property
    def predicted(self) -> float:
        return self.per_gpu(self.predicted_s)


def family_key(plan: Plan) -> str:
    """What a family's runs share: the model's shape, the hardware, sequence, precision and
    global batch (the name and the layout are left out)."""
    s, t = plan.system, plan.training
    return json.dumps(
        [
            plan.model.model_dump(mode="json", exclude={"name", "source"}),
            s.gpu.name,
            s.gpus_per_node,
            s.domain,
            s.intra_node_link.name,
            s.inter_node_link.name,
            plan.seq_length,
            t.dtype,
            t.fp8_recipe,
            t.global_batch_size,
        ],
        sort_keys=True,
        default=str,
    )


@dataclass
class Family:
    """A family's runs and how well the model orders them."""

    label: str
    runs: list[Run]
    pairs: int = 0  # pairs whose measured gap is at least TIE
    right: int = 0
    wide_pairs: int = 0  # pairs whose measured gap is at least WIDE
    wide_right: int = 0
    ties: int = 0
    top1: bool = False
    wrong: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "family": self.label,
            "runs": [r.name for r in self.runs],
            "pairs": self.pairs,
            "ordered_right": self.right,
            "accuracy_pct": _pct(self.right, self.pairs),
            "pairs_gap_10pct": self.wide_pairs,
            "ordered_right_gap_10pct": self.wide_right,
            "accuracy_gap_10pct_pct": _pct(self.wide_right, self.wide_pairs),
            "ties": self.ties,
            "top1_agrees": self.top1,
            "fastest_measured": max(self.runs, key=lambda r: r.measured).name,
            "fastest_predicted": max(self.runs, key=lambda r: r.predicted).name,
            "misordered": self.wrong,
        }


def _pct(n: int, d: int) -> float | None:
    return None if d == 0 else 100.0 * n / d


def _label(plan: Plan, runs: list[Run]) -> str:
    """A family's name: its runs' shared name prefix, else the model and GPU."""
    names = [r.name for r in runs]
    prefix = names[0]
    for n in names[1:]:
        while not n.startswith(prefix):
            prefix = prefix[:-1]
    prefix = prefix.rstrip("-_. ")
    return prefix if len(prefix) >= 4 else f"{plan.model.name} on {plan.system.gpu.name}"


def pair_order(measured_a: Any, measured_b: Any, predicted_a: Any, predicted_b: Any) -> tuple:
    """(measured gap, ordered right) of pairs of runs, on floats or arrays of rates or times alike:
    the gap is the larger over the smaller less 1; a pair is ordered right when the predictions
    order it as measured, and the same prediction for both orders neither (a model blind to what
    separates them)."""
    ma, mb = np.asarray(measured_a, dtype=float), np.asarray(measured_b, dtype=float)
    pa, pb = np.asarray(predicted_a, dtype=float), np.asarray(predicted_b, dtype=float)
    gap = np.maximum(ma, mb) / np.minimum(ma, mb) - 1.0
    return gap, (pa != pb) & ((ma > mb) == (pa > pb))


def score(label: str, runs: list[Run]) -> Family:
    """Pairwise ordering and top-1 agreement of one family."""
    fam = Family(label, runs)
    for a, b in combinations(runs, 2):
        g, ok = pair_order(a.measured, b.measured, a.predicted, b.predicted)
        gap, right = float(g), bool(ok)
        if gap < TIE:
            fam.ties += 1
            continue
        fam.pairs += 1
        fam.right += right
        if gap >= WIDE:
            fam.wide_pairs += 1
            fam.wide_right += right
        if not right:
            fast, slow = (a, b) if a.measured > b.measured else (b, a)
            fam.wrong.append(
                f"{fast.name} measured {100 * gap:.0f}% faster than {slow.name}, predicted"
                f" {100 * (fast.predicted / slow.predicted - 1):+.1f}%"
            )
    best = max(r.predicted for r in runs)
    leaders = [r for r in runs if r.predicted == best]
    fam.top1 = leaders == [max(runs, key=lambda r: r.measured)]
    return fam


@dataclass
class Ranking:
    families: list[Family]

    def totals(self) -> dict:
        f = self.families
        pairs, right = sum(x.pairs for x in f), sum(x.right for x in f)
        wide, wide_right = sum(x.wide_pairs for x in f), sum(x.wide_right for x in f)
        top1 = sum(x.top1 for x in f)
        return {
            "families": len(f),
            "runs": sum(len(x.runs) for x in f),
            "pairs": pairs,
            "ordered_right": right,
            "accuracy_pct": _pct(right, pairs),
            "pairs_gap_10pct": wide,
            "ordered_right_gap_10pct": wide_right,
            "accuracy_gap_10pct_pct": _pct(wide_right, wide),
            "ties": sum(x.ties for x in f),
            "top1_agree": top1,
            "top1_pct": _pct(top1, len(f)),
        }

    def to_json(self) -> dict:
        return {
            "tie_below_pct": 100 * TIE,
            "wide_from_pct": 100 * WIDE,
            "families": [x.to_json() for x in self.families],
            "totals": self.totals(),
        }


def rank(runs: list[Run]) -> Ranking:
    """Every family of two runs or more among ``runs``, scored."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(family_key(r.plan), []).append(r)
    fams = [
        score(_label(g[0].plan, g), sorted(g, key=lambda r: r.name))
        for g in groups.values()
        if len(g) > 1
    ]
    return Ranking(sorted(fams, key=lambda x: x.label))
