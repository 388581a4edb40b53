"""The expert- and context-parallel rules of `perfmodel check` (PM207, PM208): the all-to-all or
K/V ring a layer runs on its group's link, read off the same ops the estimate charges, and the
fastest change that fits where one helps."""

from __future__ import annotations

from typing import Any

from perfmodel.engine.estimate import Estimate, estimate, per_layer_ops, resolve_config
from perfmodel.engine.mesh import Mesh
from perfmodel.errors import PerfModelError
from perfmodel.review.catalogue import Finding
from perfmodel.specs import Config, Plan
from perfmodel.units import fmt_time


def _op_seconds(plan: Plan, cfg: Config, kind: str | None = None) -> dict[str, float]:
    return {o.name: float(o.fwd_s + o.bwd_s) for o in per_layer_ops(plan, cfg, kind)}


def rule_ep_across_nodes(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    """PM207: the expert all-to-all's share of a MoE layer, from the layer's own ops; under
    DualPipe, the exposed share of the step (its F&B pairs hide the rest)."""
    if not plan.model.is_moe or cfg.ep == 1:
        return []
    mesh = Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system, cfg.cp, cfg.ep, cfg.etp)
    if mesh.crossing("ep") == "intra":
        return []
    ops = _op_seconds(plan, cfg, "moe")
    a2a = sum(v for k, v in ops.items() if k.startswith("EP "))
    share = a2a / sum(ops.values())
    what = (
        f"the dispatch and combine all-to-alls take {fmt_time(a2a)} of the MoE layer's"
        f" {fmt_time(sum(ops.values()))} ({100 * share:.0f}%) per micro-batch"
    )
    if cfg.schedule == "dualpipe":
        v = est.values
        share = v["ep_comm"] / (v["ep_comm"] + v["forward"] + v["backward"] + v["recompute"])
        what = (
            f"the all-to-alls DualPipe's F&B pairs leave exposed take {fmt_time(v['ep_comm'])}"
            f" a step ({100 * share:.0f}% of the slowest rank's compute and EP time)"
        )
    if share <= 0.25:
        return []
    gpn = plan.system.domain
    fixes = [f"keep ep x etp <= {gpn} (one NVLink domain)"]
    # the configuration's switches (the plan's, or the search's choice)
    fixes += (
        []
        if cfg.moe_token_dispatcher_type in ("deepep", "hybridep")
        else ["dispatch with DeepEP (moe_token_dispatcher_type: deepep)"]
    )
    fixes += (
        []
        if cfg.moe_a2a_overlap or cfg.schedule == "dualpipe"
        else ["overlap the all-to-all (moe_a2a_overlap)"]
    )
    # the NVLink domains the group spans: nodes, or racks where one domain holds several nodes
    spans = -(-cfg.ep * cfg.etp // gpn)
    unit = "nodes" if gpn == plan.system.gpus_per_node else "NVLink domains"
    return [
        Finding(
            "PM207",
            f"ep({cfg.ep}) * etp({cfg.etp}) spans {spans} {unit}: {what} on"
            f" {plan.system.inter_node_link.name}",
            ", or ".join([", ".join(fixes[:-1]), fixes[-1]] if len(fixes) > 1 else fixes),
            {"a2a_s": a2a, "share": share},
        )
    ]


def best_fix(
    plan: Plan, est: Estimate, variants: list[tuple[str, dict[str, Any]]]
) -> tuple[str, Estimate] | None:
    """The fastest of ``variants`` (a label, and the parallel knobs that change) that runs and fits
    and beats the plan's step time by more than 0.5%, with its estimate; None when none does. A
    rule names a fix only when it helps."""
    best: tuple[str, Estimate] | None = None
    limit = est.values["step_time_s"] * 0.995
    for label, knobs in variants:
        try:
            alt = plan.with_parallel(**knobs)
            alt_est = estimate(alt, resolve_config(alt))
        except PerfModelError:
            continue
        v = alt_est.values
        better = best is None or v["step_time_s"] < best[1].values["step_time_s"]
        if v["fits"] and v["step_time_s"] < limit and better:
            best = (label, alt_est)
    return best


def rule_cp_exposed(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    """PM208: the K/V ring's exposed time, read off the same ops the estimate charges; a warning
    when lowering cp (dp taking its ranks) or Ulysses' all-to-all is faster and fits, with the
    saving; information when neither is (the exposed ring is then the price of what CP buys, e.g.
    the memory of halved activations)."""
    if cfg.cp == 1 or cfg.cp_comm_type != "p2p":
        return []
    ops = _op_seconds(plan, cfg)
    ring = ops.get("CP ring exchange of K, V", 0.0) + ops.get(
        "CP ring merge of partial outputs", 0.0
    )
    ring += ops.get("CP ring accumulation of dK, dV", 0.0)
    core = next((v for k, v in ops.items() if k.startswith("attention core")), 0.0) or ops.get(
        "attention scores QK^T", 0.0
    ) + ops.get("attention x V", 0.0)
    if core <= 0 or ring <= 0.10 * core:
        return []
    variants: list[tuple[str, dict[str, Any]]] = [
        (f"cp: {c}, dp: {cfg.dp * cfg.cp // c}", {"cp": c, "dp": cfg.dp * cfg.cp // c})
        for c in range(1, cfg.cp)
        if cfg.cp % c == 0
    ]
    if plan.model.num_attention_heads % (cfg.tp * cfg.cp) == 0:
        variants.append(("cp_comm_type: a2a", {"cp_comm_type": "a2a", "cp": cfg.cp}))
    fix = best_fix(plan, est, variants)
    tokens = plan.seq_length // cfg.cp
    seen = (
        f"cp({cfg.cp}) leaves {tokens:,} tokens per rank: the K/V ring and its merges take"
        f" {fmt_time(ring)} per layer and micro-batch, {100 * ring / core:.0f}% of the attention"
        " it runs beside"
    )
    figures = {"exposed_s": ring, "attention_s": core}
    if fix is None:
        return [
            Finding(
                "PM208",
                seen
                + "; no lower cp or all-to-all variant is faster and fits, so it is the price"
                " of what CP buys here (1/cp of the activations)",
                "none needed",
                figures,
                demoted=True,
            )
        ]
    label, alt = fix
    saved = est.values["step_time_s"] - alt.values["step_time_s"]
    return [
        Finding(
            "PM208",
            seen,
            f"{label} saves {fmt_time(saved)} per step"
            f" ({100 * saved / est.values['step_time_s']:.1f}%) and fits",
            {**figures, "saving_s": saved},
        )
    ]
