"""The warnings an Estimate carries (engine/estimate.py): where its TP group runs, its memory
verdict, its bubble."""

from __future__ import annotations

from typing import Any

from perfmodel.cost import pipeline as pipe
from perfmodel.engine.memory_verdict import MEMORY_BAND, margin_text
from perfmodel.engine.mesh import Mesh
from perfmodel.engine.reserve import usable_text
from perfmodel.specs import Config, Plan
from perfmodel.specs.by_plan import ByPlan

# each recent system's TP crossing by (tp, pp, dp): the walk asks it of every configuration
_CROSSINGS: ByPlan[str] = ByPlan(4096)


def _tp_crossing(plan: Plan, cfg: Config) -> str:
    """Where the configuration's TP group runs (engine/mesh.Mesh.crossing)."""
    return _CROSSINGS.get(
        plan.system,
        (cfg.tp, cfg.pp, cfg.dp),
        lambda: Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system).crossing("tp"),
    )


def warnings_of(plan: Plan, cfg: Config, v: dict[str, Any]) -> list[str]:
    """What an Estimate of ``cfg`` warns of, from its figures ``v``: a TP group leaving its NVLink
    domain, memory that does not fit or is tight, a bubble past pipeline.BUBBLE_LIMIT."""
    out = []
    if _tp_crossing(plan, cfg) != "intra":
        out.append(
            f"TP group of {cfg.tp} leaves its NVLink domain ({plan.system.domain} GPUs):"
            f" TP collectives run on {plan.system.inter_node_link.name}"
        )
    if not v["fits"]:
        out.append(
            f"does not fit beyond the memory band (+-{100 * MEMORY_BAND:g}%): "
            + usable_text(v["total_bytes"], v["capacity_bytes"], v["reserve_bytes"])
        )
    elif v["tight"]:
        out.append(
            "memory "
            + margin_text(v["total_bytes"], v["usable_bytes"])
            + ": the usable line lies inside the memory model's band; a launch there is a bet"
        )
    if v["bubble_over_step"] > pipe.BUBBLE_LIMIT:
        out.append(f"pipeline bubble is {100 * v['bubble_over_step']:.1f}% of the step")
    return out
