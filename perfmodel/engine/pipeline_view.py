"""An estimate's pipeline as the schedule simulator runs it, every block kept: what `schedule PLAN`
draws and the report's Gantt chart shows (engine/schedule.py; the search and `estimate` simulate
without the blocks, engine/estimate.py)."""

from __future__ import annotations

from dataclasses import replace

from perfmodel.engine.estimate import Estimate, estimate, resolve_config
from perfmodel.engine.schedule import Simulation, simulate
from perfmodel.specs import Plan


def pipeline(plan: Plan, est: Estimate) -> Simulation:
    """One simulated step of an estimate's pipeline (its schedule, per-stage times and p2p time),
    blocks kept for a Gantt chart: what `schedule PLAN` draws and the report shows."""
    c = est.config
    return simulate(
        c.pp,
        c.num_micro_batches,
        c.vp,
        c.schedule,
        est.stage_fwd_s,
        est.stage_bwd_s,
        est.values["p2p_s"],
        blocking=not plan.training.p2p_overlap,
        t_w=est.stage_wgrad_s or 0.0,
    )


def plan_pipeline(
    plan: Plan,
    m: int | None = None,
    pp: int | None = None,
    vp: int | None = None,
    schedule: str | None = None,
) -> Simulation:
    """`schedule PLAN`: the plan's pipeline simulated, with m, pp, vp or the schedule changed where
    given (m changes the global batch: m x dp x micro-batch)."""
    over = {
        k: val for k, val in (("pp", pp), ("vp", vp), ("schedule", schedule)) if val is not None
    }
    cfg = resolve_config(plan, **over)
    if m is not None:
        cfg = replace(cfg, global_batch_size=m * cfg.dp * cfg.micro_batch_size)
        plan = plan.with_training(global_batch_size=cfg.global_batch_size)
    return pipeline(plan, estimate(plan, cfg))
