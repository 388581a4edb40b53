"""The pipeline-layout rules of `perfmodel check` that need no estimate: a pipeline degree that does
not divide the layers (PM209), and the bubble's closed form for a plan the errors beside it keep
from being estimated (PM202)."""

from __future__ import annotations

from perfmodel.cost import pipeline as pipe
from perfmodel.engine.estimate import Estimate
from perfmodel.engine.split import megatron_needs, split_text, uneven
from perfmodel.review.catalogue import Finding
from perfmodel.specs import Config, Plan
from perfmodel.specs.framework import PROFILES


def rule_uneven_split(
    plan: Plan, cfg: Config, est: Estimate | None, searched: bool = False
) -> list[Finding]:
    """PM209: pp does not divide the layers and the plan gives neither end's layers. With an
    estimate, the split it assumed; Megatron-Core's flags for one it can launch, or a pp that
    divides. A framework that splits evenly only is PM110's (an error) instead. ``searched``: pp
    is the search's choice (the plan leaves it free), so the split is the fastest configuration's
    own, not the plan's oversight: information (the flags to launch it with), not a warning."""
    L, p = plan.model.num_layers, cfg.pp
    if not uneven(L, p, cfg.first_stage_layers, cfg.last_stage_layers):
        return []
    if not PROFILES[plan.training.framework]["uneven_stages"]:
        return []
    layers = list(est.stage_layers) if est is not None and len(est.stage_layers) == p else None
    assumed = (
        f"the estimate assumes {split_text(layers)}"
        if layers
        else f"{L} = {p} x {L // p} + {L % p}: the stages cannot hold equal layers"
    )
    chose = (
        "; pp is the search's choice (the plan leaves it free): launch it with the split below"
        if searched
        else ""
    )
    return [
        Finding(
            "PM209",
            f"pp({p}) does not divide num_layers({L}): {assumed}, a split Megatron-Core does not"
            f" make unless told (it splits evenly by default){chose}",
            megatron_needs(L, p, cfg.vp, layers, plan.system.num_gpus // (cfg.tp * cfg.cp)),
            {"stage_layers": layers or [], "pp_searched": searched},
            demoted=searched,
        )
    ]


def rule_bubble_closed_form(cfg: Config) -> list[Finding]:
    """PM202 from the closed form, for a plan that cannot be estimated (no step time to give the
    bubble in seconds): (p-1)/(m v + p-1) (Narayanan et al. 2021, Sec. 2.2)."""
    m, p, v = cfg.num_micro_batches, cfg.pp, cfg.vp
    b = float(pipe.bubble_over_step(p, m, v))
    if p == 1 or b <= pipe.BUBBLE_LIMIT:
        return []
    need_m = pipe.min_microbatches_for_target(p, pipe.BUBBLE_LIMIT, v)
    few = f"; m({m}) < pp({p}): fewer micro-batches than stages" if m < p else ""
    return [
        Finding(
            "PM202",
            f"wall-clock bubble {100 * b:.1f}% ((p-1)/(m v + p-1) with p={p}, m={m}, v={v}){few}"
            " (the closed form: the errors above leave no step time to price it in seconds)",
            f"m >= {need_m} (global batch {need_m * cfg.dp * cfg.micro_batch_size})",
            {"bubble_over_step": b},
        )
    ]
