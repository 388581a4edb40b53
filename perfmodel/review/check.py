"""`perfmodel check`: the design rules of 3D parallelism as a linter (issue 5).

Each rule has a stable ID, a severity and a one-line title; a finding quantifies
the cost in numbers and names the cheapest fix. Every figure comes from the
same estimate/cost functions the rest of perfmodel uses.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perfmodel.cost import pipeline as pipe
from perfmodel.cost import sp as spc
from perfmodel.cost.transformer import LayerShape
from perfmodel.engine.answer import estimate_or_search, fixed
from perfmodel.engine.calculators import roofline_report
from perfmodel.engine.estimate import (
    Estimate,
    estimate,
    layer_seconds,
)
from perfmodel.engine.mesh import Mesh
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.review.catalogue import ERROR, INFO, RULES, WARNING, Finding
from perfmodel.review.check_comm import rule_cp_exposed, rule_ep_across_nodes
from perfmodel.review.check_layout import rule_bubble_closed_form, rule_uneven_split
from perfmodel.review.check_memory import config_or_problem, rule_memory
from perfmodel.specs import Config, Plan
from perfmodel.specs.framework import PROFILES
from perfmodel.units import fmt_bytes, fmt_time


def _rule_tp_cross_node(plan: Plan, cfg: Config) -> list[Finding]:
    gpn = plan.system.domain
    if Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system).crossing("tp") == "intra":
        return []
    on_ib = sum(layer_seconds(plan, cfg, "none"))
    on_nv = sum(
        layer_seconds(plan.with_system(gpus_per_node=cfg.tp, nvlink_domain=None), cfg, "none")
    )
    return [
        Finding(
            "PM201",
            (
                f"tp({cfg.tp}) > {gpn} GPUs on one NVLink domain"
                if cfg.tp > gpn
                else (
                    f"tp({cfg.tp}) does not divide the {gpn} GPUs of an NVLink domain (some"
                    " groups straddle two)"
                )
            )
            + ": TP collectives run on "
            f"{plan.system.inter_node_link.name}; one layer takes {fmt_time(on_ib)} instead of "
            f"{fmt_time(on_nv)} on {plan.system.intra_node_link.name} ({on_ib / on_nv:.1f}x)",
            f"keep tp {'<=' if cfg.tp > gpn else 'a divisor of'} {gpn} and move the rest to pp"
            " or dp",
            {"layer_s": on_ib, "layer_on_intra_s": on_nv},
        )
    ]


def _rule_bubble(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    b = est.values["bubble_over_step"]
    if b <= pipe.BUBBLE_LIMIT or cfg.pp == 1:
        return []
    m, p, v = cfg.num_micro_batches, cfg.pp, cfg.vp
    need_m = pipe.min_microbatches_for_target(p, pipe.BUBBLE_LIMIT, v)
    fixes = [f"m >= {need_m} (global batch {need_m * cfg.dp * cfg.micro_batch_size})"]
    for vp in range(v + 1, plan.model.num_layers // p + 1):
        if (
            (plan.model.num_layers // p) % vp == 0
            and m % p == 0
            and pipe.bubble_over_step(p, m, vp) < pipe.BUBBLE_LIMIT
        ):
            fixes.append(f"vp = {vp} (interleaved)")
            break
    return [
        Finding(
            "PM202",
            f"wall-clock bubble {100 * b:.1f}% ((p-1)/(m v + p-1) with p={p}, m={m}, v={v}): "
            f"{fmt_time(est.values['bubble'])} idle per step",
            " or ".join(fixes),
            {"bubble_over_step": b, "bubble_s": est.values["bubble"]},
        )
    ]


def _rule_memory_bound_gemm(plan: Plan, cfg: Config) -> list[Finding]:
    r = roofline_report(
        plan.system.gpu,
        plan.training.dtype,
        LayerShape.of(plan.model),
        cfg.tp,
        cfg.micro_batch_size,
        plan.seq_length,
        cfg.ep,
    )
    # the attention core's GEMMs (split by heads) have an AI set by the head dimension, and the
    # router's (tokens x h x e) by the expert count, not by the micro-batch
    bound = [
        g for g in r["gemms"] if g["bound"] == "memory" and g["shard"] not in ("heads", "tokens")
    ]
    if not bound:
        return []
    worst = min(bound, key=lambda g: g["arithmetic_intensity"])
    return [
        Finding(
            "PM203",
            f"{len(bound)} layer GEMM(s) memory-bound at {r['tokens']} tokens per micro-batch:"
            f" {worst['name']} has AI {worst['arithmetic_intensity']:.0f} FLOP/B < ridge"
            f" {r['ridge_point']:.0f}",
            "raise micro_batch_size (or sequence length) until M = b s puts AI above the ridge",
            {
                "arithmetic_intensity": worst["arithmetic_intensity"],
                "ridge_point": r["ridge_point"],
            },
        )
    ]


def _group_links(plan: Plan, cfg: Config) -> dict[str, tuple[float, str]]:
    # the whole mesh (cp, ep and etp included): a DP group's neighbours sit tp x cp ranks apart
    mesh = Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system, cp=cfg.cp, ep=cfg.ep, etp=cfg.etp)
    out = {}
    for group, dim, size in (("TP", "tp", None), ("PP", "pp", 2), ("DP", "dp", None)):
        if getattr(cfg, dim) > 1:
            spans = bool(mesh.crosses_nodes(dim, size))
            link = plan.system.inter_node_link if spans else plan.system.intra_node_link
            out[group] = (link.bandwidth_bytes_per_s, link.name)
    return out


def _rule_comm_frequency(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    links = _group_links(plan, cfg)
    order = [g for g in ("TP", "PP", "DP") if g in links]  # most frequent first
    broken = [
        (a, b) for i, a in enumerate(order) for b in order[i + 1 :] if links[a][0] < links[b][0]
    ]
    if not broken:
        return []
    a, b = broken[0]
    other = "tp-pp-dp" if plan.system.placement == "tp-dp-pp" else "tp-dp-pp"
    alt = plan.with_system(placement=other)
    t_alt = estimate(alt, cfg).values["step_time_s"]
    t_now = est.values["step_time_s"]
    seen = (
        f"{a} (more frequent) runs on {links[a][1]} ({links[a][0] / 1e9:.0f} GB/s) while "
        f"{b} (less frequent) has {links[b][1]} ({links[b][0] / 1e9:.0f} GB/s)"
    )
    figures = {"step_time_s": t_now, "step_time_other_placement_s": t_alt}
    if t_alt >= 0.995 * t_now:  # the other rank order does not help: say what was seen, no more
        return [
            Finding(
                "PM204",
                f"{seen}; placement {other} would not be faster ({fmt_time(t_alt)})",
                "none needed",
                figures,
                demoted=True,
            )
        ]
    return [
        Finding(
            "PM204",
            seen,
            f"placement: {other} (Megatron-LM --use-tp-pp-dp-mapping; step time"
            f" {fmt_time(t_now)} -> {fmt_time(t_alt)}, {100 * (t_alt / t_now - 1):+.1f}%)",
            figures,
        )
    ]


def _rule_gpipe(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    if cfg.schedule != "gpipe" or cfg.pp == 1 or cfg.num_micro_batches <= cfg.pp:
        return []
    alt = estimate(plan, replace(cfg, schedule="1f1b")).values
    saved = est.values["activations_bytes"] - alt["activations_bytes"]
    return [
        Finding(
            "PM205",
            f"GPipe keeps all m={cfg.num_micro_batches} micro-batches of activations:"
            f" {fmt_bytes(est.values['activations_bytes'])} vs"
            f" {fmt_bytes(alt['activations_bytes'])} with 1F1B (p={cfg.pp} in flight)"
            + (
                f"; {plan.training.framework} has no GPipe schedule to run"
                if "gpipe" not in PROFILES[plan.training.framework]["schedules"]
                else ""
            ),
            f"schedule: 1f1b saves {fmt_bytes(saved)} per GPU, same bubble",
            {"saved_bytes": saved},
        )
    ]


def _rule_stage_balance(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    v = est.values
    if cfg.pp == 1:
        return []
    slow = max(v["stage_time_first_s"], v["stage_time_last_s"])
    excess = slow / v["stage_time_middle_s"] - 1
    if excess <= 0.05:
        return []
    which = (
        "first (embedding)"
        if v["stage_time_first_s"] >= v["stage_time_last_s"]
        else "last (output layer, loss)"
    )
    per_step = cfg.num_micro_batches * (slow - v["stage_time_middle_s"])
    return [
        Finding(
            "PM206",
            f"the {which} stage takes {100 * excess:.1f}% longer per micro-batch than a middle "
            f"stage: {fmt_time(per_step)} per step",
            "give the first and last stages fewer layers "
            "(uneven split), or more stages so each layer matters less",
            {"excess": excess, "per_step_s": per_step},
        )
    ]


def _rule_sp(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    if cfg.tp == 1 or cfg.sequence_parallel:
        return []
    alt = estimate(plan, replace(cfg, sequence_parallel=True)).values
    saved = est.values["activations_bytes"] - alt["activations_bytes"]
    return [
        Finding(
            "PM301",
            f"tp({cfg.tp}) without SP keeps LayerNorm/dropout activations unsharded",
            f"sequence_parallel: true saves {fmt_bytes(saved)} per GPU, same TP bytes",
            {"saved_bytes": saved},
        )
    ]


def _rule_zero(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    if cfg.dp == 1 or cfg.zero_stage >= 1:
        return []
    opt = est.values["optimizer_bytes"]
    saved = opt * (1 - 1 / cfg.dp)
    return [
        Finding(
            "PM302",
            f"dp({cfg.dp}) replicas each keep {fmt_bytes(opt)} of optimizer state",
            f"zero_stage: 1 saves {fmt_bytes(saved)} per GPU",
            {"saved_bytes": saved},
        )
    ]


def _rule_tp_ratio(plan: Plan, cfg: Config) -> list[Finding]:
    if cfg.tp == 1:
        return []
    gpu = plan.system.gpu
    link = Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system).link_spec("tp")
    flops = gpu.peak(plan.training.dtype) * gpu.gemm_efficiency
    ratio = float(
        spc.tp_comm_compute_ratio(
            cfg.tp, flops, plan.model.hidden_size, link.bandwidth_bytes_per_s * link.efficiency
        )
    )
    if ratio <= 0.30:
        return []
    # as the other rules write ratios
    share = f"{ratio:.1f}x" if ratio >= 1 else f"{100 * ratio:.0f}%"
    return [
        Finding(
            "PM303",
            f"TP comm / compute = 8(t-1)P/(24 h BW) = {share} "
            f"(t={cfg.tp}, h={plan.model.hidden_size}, {link.name})",
            "lower tp (move the factor to pp), or a faster TP link",
            {"ratio": ratio},
        )
    ]


def _unestimated_rules(plan: Plan, cfg: Config) -> list[Finding]:
    """The rules that need no estimate, for a configuration the errors found keep from being
    estimated: a design review lists every problem in one pass, the blocking ones first. Each
    rule that cannot price its finding on this configuration is left out, not guessed."""
    out = rule_uneven_split(plan, cfg, None) + rule_bubble_closed_form(cfg)
    for rule in (_rule_tp_cross_node, _rule_memory_bound_gemm, _rule_tp_ratio):
        try:
            out += rule(plan, cfg)
        except PerfModelError:
            continue
    return out


def check(plan: Plan, ignore: list[str] | None = None) -> list[Finding]:
    """Every finding for a plan, errors first; rules in ``ignore`` (and the plan's) are silenced."""
    return check_resolved(plan, ignore)[0]


def resolve_free_knobs(plan: Plan) -> tuple[Plan, dict[str, Any]]:
    """The plan as `estimate` and `plan` read it: knobs it leaves free are the search's fastest
    configuration that fits, then fixed, so a finding speaks of the configuration the estimate
    beside it describes. (plan, {knob: value chosen}); the plan unchanged when nothing is free or
    nothing fits (the rules then say why)."""
    try:
        _, chosen = estimate_or_search(plan, presets.error_bands())
    except PerfModelError:
        return plan, {}
    if not chosen:
        return plan, {}
    return fixed(plan, chosen), chosen


def check_resolved(
    plan: Plan, ignore: list[str] | None = None
) -> tuple[list[Finding], dict[str, Any]]:
    """check(), with the knobs the search chose for the plan's free ones."""
    silenced = {r.upper() for r in ignore or []} | {r.upper() for r in plan.ignore}
    unknown = sorted(silenced - set(RULES))
    if unknown:
        raise PerfModelError(
            f"unknown rule ID(s) {', '.join(unknown)}; see `perfmodel check --list-rules`"
        )
    plan, chosen = resolve_free_knobs(plan)
    cfg, findings = config_or_problem(plan)
    if cfg is not None and not findings:
        est = estimate(plan, cfg)
        findings += rule_memory(plan, cfg, est)
        findings += _rule_tp_cross_node(plan, cfg)
        findings += _rule_bubble(plan, cfg, est)
        findings += _rule_memory_bound_gemm(plan, cfg)
        findings += _rule_comm_frequency(plan, cfg, est)
        findings += _rule_gpipe(plan, cfg, est)
        findings += _rule_stage_balance(plan, cfg, est)
        findings += _rule_sp(plan, cfg, est)
        findings += _rule_zero(plan, cfg, est)
        findings += _rule_tp_ratio(plan, cfg)
        findings += rule_ep_across_nodes(plan, cfg, est)
        findings += rule_cp_exposed(plan, cfg, est)
        findings += rule_uneven_split(plan, cfg, est, searched="pp" in chosen)
    elif cfg is not None:
        findings += _unestimated_rules(plan, cfg)
    rank = {ERROR: 0, WARNING: 1, INFO: 2}
    ordered = sorted(
        (f for f in findings if f.rule not in silenced), key=lambda f: (rank[f.severity], f.rule)
    )
    return ordered, chosen


def exit_code(findings: list[Finding], strict: bool = False) -> int:
    """0 when no errors; 1 with errors (and, with strict, with warnings)."""
    bad = {ERROR, WARNING} if strict else {ERROR}
    return 1 if any(f.severity in bad for f in findings) else 0
