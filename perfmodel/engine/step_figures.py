"""What a step is made of beside its breakdown (engine/evaluate.py): the step time and the figures
`estimate` reports with it (per-stage times, the pipeline lower bound the search ranks with, the
bubble's shares: SPEC 7-8), and the per-stage arrays the schedule simulator reads."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost import pipeline as pipe
from perfmodel.cost.stages import Stages
from perfmodel.engine.data_parallel import Priced

BREAKDOWN_KEYS = (
    "forward",
    "backward",
    "recompute",
    "bubble",
    "tp_comm",
    "cp_comm",
    "ep_comm",
    "pp_comm",
    "dp_comm",
    "zero_comm",
    "optimizer",
    "overhead",
)


@dataclass(frozen=True)
class StageArrays:
    """Per stage class: seconds per micro-batch in all and in forward (for the schedule
    simulator)."""

    stages: Stages
    time: np.ndarray
    fwd: np.ndarray
    wgrad: np.ndarray  # of the backward, the weight-gradient GEMMs (the zero-bubble W)

    def per_stage(self, row: int = 0) -> tuple[list[float], list[float]]:
        """Forward and backward seconds per micro-batch of each stage, first stage first."""
        fwd, time, _ = self._lists
        tf, tt = self.stages.expand(fwd, row), self.stages.expand(time, row)
        return tf, [t - f for t, f in zip(tt, tf)]

    def wgrad_per_stage(self, row: int = 0) -> list[float]:
        """The weight-gradient part of each stage's backward seconds, first stage first."""
        return self.stages.expand(self._lists[2], row)

    @cached_property
    def _lists(self) -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
        """fwd, time and wgrad as Python lists, each row's made once for all the rows an
        Estimate is made of (numpy's indexing of one row costs more than its list)."""
        return self.fwd.tolist(), self.time.tolist(), self.wgrad.tolist()


def stage_figures(
    priced: Priced, t_layer: Array, out: dict[str, Any], p2p: Array, m: Array, full: bool = True
) -> dict[str, Any]:
    """The step time and what `estimate` reports beside the breakdown: per-stage times, the pipeline
    lower bound the search ranks with, and the bubble figures (SPEC 7); not ``full``: the step,
    its bound and its switchable part only (evaluate's ``keep``)."""
    st, k, stages, sc, slow, costs = (
        priced.st, priced.k, priced.stages, priced.sc, priced.slow, priced.costs
    )  # fmt: skip
    pp, vp = k.pp.astype(float), k.vp.astype(float)
    step = sum(out[key] for key in BREAKDOWN_KEYS)
    # DualPipe's, DualPipeV's and the zero-bubble family's bubble figures are their closed forms'
    # over the slowest rank's m micro-batches
    dual = pipe.dualpipe_rows(k.schedule, k.pp) | pipe.dualpipev_rows(k.schedule, k.pp)
    split = pipe.zero_bubble_rows(k.schedule, k.pp)
    slowest = stages.pick(sc["time"], slow)  # the slowest stage's seconds per micro-batch
    ranked = _ranked(priced, out, step, m, m * slowest, dual, split)
    if not full:
        return ranked
    dual_ideal = out["bubble"] / np.maximum(m * slowest, 1e-30)
    # the slowest middle stage, or (none at p <= 2) an even one: L/p layers of the model's mix
    middle_present = stages.count[:, 1:3] > 0
    t_middle = np.where(
        middle_present.any(axis=1),
        np.where(middle_present, sc["time"][:, 1:3], -np.inf).max(axis=1),
        len(st.moe_pattern) / pp * t_layer,
    )
    return dict(
        step_time_s=step,
        switchable_s=ranked["switchable_s"],
        num_micro_batches=m,
        slowest_stage_is_first=slow == 0,
        slowest_stage_class=slow,
        stage_time_first_s=sc["time"][:, 0],
        stage_time_middle_s=t_middle,
        stage_time_last_s=np.where(
            stages.count[:, 3] > 0, sc["time"][:, 3], t_middle + sum(costs["head"].seconds())
        ),
        p2p_s=np.where(pp > 1, p2p, 0.0),
        slowest_stage_s=slowest,
        simulated_step_lower_bound_s=ranked["simulated_step_lower_bound_s"],
        # the schedule's closed-form bubble (equal stages, SPEC 7; DualPipe's over the slowest
        # rank's m chunks) and the bubble's share of this step
        bubble_over_ideal=np.where(dual | split, dual_ideal, pipe.bubble_over_ideal(pp, m, vp)),
        bubble_over_step=np.where(
            dual | split, dual_ideal / (1 + dual_ideal), pipe.bubble_over_step(pp, m, vp)
        ),
        bubble_share_of_step=out["bubble"] / step,
    )


def _ranked(
    priced: Priced,
    out: dict[str, Any],
    step: Array,
    m: Array,
    slowest: Array,
    dual: Array,
    split: Array,
) -> dict[str, Any]:
    """The figures the search ranks with beside the step (evaluate's KEEP): the step's switchable
    part and the lower bound on its simulated step (``slowest``: the slowest stage's m
    micro-batches, seconds)."""
    stages, sc, vp = priced.stages, priced.sc, priced.k.vp.astype(float)
    return dict(
        step_time_s=step,
        # what the memory switches change of the step (engine/memory_switches.py): the
        # data-parallel traffic, the optimizer's pass and the weight cast; the search bounds a
        # switched step by it (engine/switch_rows.py)
        switchable_s=np.broadcast_to(
            out["dp_comm"] + out["zero_comm"] + out["optimizer"], step.shape
        ),
        # a lower bound on the simulated step (search.py ranks with it; exact for equal stages);
        # DualPipe is not simulated: its closed form is the step
        # the zero-bubble schedules' steps reach below the interleaved ramp: the work alone bounds
        simulated_step_lower_bound_s=np.where(
            dual,
            step,
            step
            - out["bubble"]
            - out["pp_comm"]
            - slowest
            + np.where(
                split,
                slowest,
                pipe.pipeline_lower_bound(stages.count, stages.first_index, sc["time"], m, vp),
            ),
        ),
    )
