"""`perfmodel check`: the design rules of 3D parallelism as a linter (issue 5).

Each rule has a stable ID, a severity and a one-line title; a finding quantifies
the cost in numbers and names the cheapest fix. Every figure comes from the
same estimate/cost functions the rest of perfmodel uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from perfmodel.cost import memory as mem
from perfmodel.cost import pipeline as pipe
from perfmodel.cost import sp as spc
from perfmodel.cost.transformer import LayerShape
from perfmodel.errors import PerfModelError
from perfmodel.engine.estimate import (
    Estimate,
    Knobs,
    estimate,
    evaluate,
    layer_seconds,
    per_layer_ops,
    resolve_config,
)
from perfmodel.engine.evaluate import Setting
from perfmodel.engine.mesh import Mesh
from perfmodel.engine.rules import config_problems
from perfmodel.engine.calculators import roofline_report
from perfmodel.specs import Config, Plan
from perfmodel.units import fmt_bytes, fmt_time

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    title: str
    why: str


RULES = {
    r.id: r
    for r in (
        Rule(
            "PM101",
            ERROR,
            "the plan does not fit in HBM",
            "Model states (16-18 B per parameter) plus activations must fit on the most loaded GPU "
            "(Rajbhandari et al. 2020, ZeRO, Sec. 3.1; Korthikanti et al. 2022, Table 2).",
        ),
        Rule(
            "PM102",
            ERROR,
            "tp x pp x dp != number of GPUs",
            "Every GPU belongs to exactly one TP, PP and DP group (Narayanan et al. 2021, Sec. 3:"
            " 512 = 8 x 8 x 8).",
        ),
        Rule(
            "PM103",
            ERROR,
            "attention heads not divisible by TP",
            "Megatron splits attention by heads: each TP rank needs whole heads (Shoeybi et al."
            " 2019, Megatron-LM, Sec. 3).",
        ),
        Rule(
            "PM104",
            ERROR,
            "layers do not fill the pipeline stages",
            "Each pipeline stage, and each virtual chunk, holds whole layers (Narayanan 2021, Sec."
            " 2.2); Megatron-Core splits them unevenly when asked"
            " (decoder_first/last_pipeline_num_layers).",
        ),
        Rule(
            "PM105",
            ERROR,
            "global batch not divisible by DP x micro-batch",
            "Each replica runs a whole number m = B / (dp b) of micro-batches (Narayanan 2021, Sec."
            " 2.2).",
        ),
        Rule(
            "PM106",
            ERROR,
            "interleaving with m not a multiple of PP",
            "The interleaved 1F1B schedule cycles through the stages in groups of p micro-batches "
            "(Narayanan 2021, Sec. 2.2.2).",
        ),
        Rule(
            "PM107",
            ERROR,
            "knobs that contradict one another",
            "SP needs TP > 1; interleaving needs PP > 1, VP > 1 and the interleaved schedule.",
        ),
        Rule(
            "PM108",
            ERROR,
            "context parallelism cannot split this sequence",
            "Causal load balancing cuts each sequence into 2 cp chunks, inside fused attention;"
            " Ulysses all-to-all splits heads over tp x cp (Megatron-Core CP; Jacobs et al. 2023).",
        ),
        Rule(
            "PM109",
            ERROR,
            "experts cannot be split this way",
            "Each EP rank holds whole experts, EP x ETP folds into the tp x cp x dp ranks of a"
            " stage, and MoE with TP needs sequence parallelism (Megatron-Core MoE).",
        ),
        Rule(
            "PM110",
            ERROR,
            "the named framework cannot run this configuration",
            "Megatron's distributed optimizer is ZeRO-1 and Megatron-FSDP has no pipeline;"
            " DeepSpeed's PipelineEngine accepts ZeRO-1 only; Megatron-LM before Megatron-Core"
            " splits layers evenly and has neither context nor expert parallelism (each profile's"
            " facts: specs/framework.py).",
        ),
        Rule(
            "PM201",
            WARNING,
            "TP group crosses the node boundary",
            "TP runs 4 collectives per layer on the critical path: off NVLink it slows every layer "
            "several-fold (Narayanan et al. 2021, Sec. 3.2 and Fig. 13).",
        ),
        Rule(
            "PM202",
            WARNING,
            "pipeline bubble above 15% of the step",
            "The fill and drain of the pipeline, (p-1)/(m+p-1) of the step, is idle time (Narayanan"
            " et al. 2021, Sec. 2.2).",
        ),
        Rule(
            "PM203",
            WARNING,
            "a layer GEMM is memory-bound at this micro-batch",
            "Below the ridge point the GEMM waits on HBM, so more micro-batches cost compute"
            " efficiency (Williams et al. 2009, the roofline model: on A100, AI 61 vs ridge 153 at"
            " 64 tokens).",
        ),
        Rule(
            "PM204",
            WARNING,
            "communication-frequency rule broken",
            "The most frequent communication goes on the fastest link: TP on NVLink, PP across"
            " nodes, DP outermost (Narayanan et al. 2021, Sec. 3.2).",
        ),
        Rule(
            "PM205",
            WARNING,
            "GPipe where 1F1B needs less activation memory",
            "GPipe keeps all m micro-batches' activations, 1F1B about p, for the same bubble"
            " (Narayanan et al. 2021, Sec. 2.2.1).",
        ),
        Rule(
            "PM206",
            WARNING,
            "pipeline stages unbalanced by the embedding or output layer",
            "Every stage waits for the slowest: an extra output layer and loss on the last stage"
            " stretch each of the m steps (Narayanan et al. 2021, Sec. 3).",
        ),
        Rule(
            "PM207",
            WARNING,
            "expert all-to-all crosses nodes and dominates the MoE layer",
            "Token dispatch and combine move k copies of every token four times a layer; across"
            " nodes they run at NIC speed, not NVLink's (Megatron-Core MoE; DeepSeek-V3 report,"
            " Sec. 3.2.2).",
        ),
        Rule(
            "PM208",
            WARNING,
            "context-parallel K/V exchange not hidden",
            "The ring passes K and V cp-1 times, each under 1/cp of the attention; a short s/cp"
            " leaves too little attention to hide it (Liu et al. 2023, Ring Attention).",
        ),
        Rule(
            "PM301",
            INFO,
            "TP > 1 without sequence parallelism",
            "SP shards LayerNorm/dropout activations t ways for the same communication volume"
            " (Korthikanti et al. 2022, Sec. 4.2.2).",
        ),
        Rule(
            "PM302",
            INFO,
            "DP > 1 without ZeRO-1",
            "Each DP replica keeps the same 12 B/param of optimizer state; ZeRO-1 shards it"
            " (Rajbhandari et al. 2020, ZeRO, Sec. 5).",
        ),
        Rule(
            "PM303",
            INFO,
            "TP communication above 30% of compute",
            "TP comm / compute = 8(t-1)P / (24 h BW), independent of batch: only h, t or the link"
            " change it (Narayanan et al. 2021, Sec. 3.2; alpha-beta ring costs).",
        ),
    )
}


@dataclass
class Finding:
    rule: str
    message: str
    fix: str
    figures: dict = field(default_factory=dict)

    @property
    def severity(self) -> str:
        return RULES[self.rule].severity

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "title": RULES[self.rule].title,
            "message": self.message,
            "fix": self.fix,
            "figures": self.figures,
        }


def _config_or_problem(plan: Plan) -> tuple[Config | None, list[Finding]]:
    try:
        cfg = resolve_config(plan)
    except PerfModelError as e:
        return None, [Finding("PM102", str(e), "pick tp and pp whose product divides num_gpus")]
    return cfg, [
        Finding(rule, f"{fld}: {msg}", msg.split("; ")[-1] if "; " in msg else f"fix {fld}")
        for rule, fld, msg in config_problems(plan, cfg)
    ]


def _evaluate_variants(plan: Plan, cfgs: list[Config]) -> list[dict]:
    valid = [c for c in cfgs if not config_problems(plan, c)]
    if not valid:
        return []
    raw = evaluate(plan, Knobs.from_configs(valid))
    raw.pop("stages")
    return [{"config": c, **{k: v[i] for k, v in raw.items()}} for i, c in enumerate(valid)]


def _fits_fixes(plan: Plan, cfg: Config) -> list[tuple[str, Config]]:
    n, gpn, L, heads = (
        plan.system.num_gpus,
        plan.system.gpus_per_node,
        plan.model.num_layers,
        plan.model.num_attention_heads,
    )
    out = []
    if cfg.tp > 1 and not cfg.sequence_parallel:
        out.append(("enable sequence_parallel", replace(cfg, sequence_parallel=True)))
    if cfg.recompute == "none":
        out.append(("recompute: selective", replace(cfg, recompute="selective")))
        if cfg.tp > 1 and not cfg.sequence_parallel:
            out.append(
                (
                    "sequence_parallel + selective recompute",
                    replace(cfg, sequence_parallel=True, recompute="selective"),
                )
            )
    if cfg.recompute != "full":
        out.append(("recompute: full", replace(cfg, recompute="full")))
    for z in range(cfg.zero_stage + 1, 4):
        if cfg.dp > 1:
            out.append((f"zero_stage: {z}", replace(cfg, zero_stage=z)))
    if cfg.schedule == "gpipe":
        out.append(("schedule: 1f1b", replace(cfg, schedule="1f1b")))
    if cfg.micro_batch_size > 1:
        out.append(
            (
                f"micro_batch_size: {cfg.micro_batch_size // 2}",
                replace(cfg, micro_batch_size=cfg.micro_batch_size // 2),
            )
        )
    if 2 * cfg.tp <= gpn and heads % (2 * cfg.tp) == 0 and cfg.dp % 2 == 0:
        out.append(
            (f"tp: {2 * cfg.tp} (dp {cfg.dp // 2})", replace(cfg, tp=2 * cfg.tp, dp=cfg.dp // 2))
        )
    if L % (2 * cfg.pp * cfg.vp) == 0 and cfg.dp % 2 == 0:
        out.append(
            (f"pp: {2 * cfg.pp} (dp {cfg.dp // 2})", replace(cfg, pp=2 * cfg.pp, dp=cfg.dp // 2))
        )
    return [(label, c) for label, c in out if c.tp * c.pp * c.dp == n]


def _rule_memory(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    v = est.values
    if v["fits"]:
        return []
    over = v["total_bytes"] - v["capacity_bytes"]
    parts = ", ".join(
        f"{k.replace('_bytes', '')} {fmt_bytes(v[k])}"
        for k in (
            "weights_bytes",
            "gradients_bytes",
            "optimizer_bytes",
            "activations_bytes",
            "other_bytes",
        )
    )
    options = _fits_fixes(plan, cfg)
    results = _evaluate_variants(plan, [c for _, c in options])
    labels = {id(c): label for label, c in options}
    fitting = sorted((r for r in results if r["fits"]), key=lambda r: r["step_time_s"])
    if fitting:
        best = fitting[0]
        delta = 100 * (best["step_time_s"] / v["step_time_s"] - 1)
        fix = (
            f"{labels[id(best['config'])]}: {fmt_bytes(best['total_bytes'])} per GPU, step time "
            f"{delta:+.1f}% (the fastest single change that fits)"
        )
    else:
        total = mem.total_params(LayerShape.of(plan.model), plan.model.num_layers, plan.seq_length)
        states = sum(mem.model_state_bytes(total, 1, 0, Setting.of(plan).precision))
        need = int(np.ceil(states / v["capacity_bytes"]))
        fix = (
            f"no single change fits: the model states alone ({fmt_bytes(states)}) need at least"
            f" {need} GPUs of {fmt_bytes(v['capacity_bytes'])} before activations; add GPUs"
            " (`perfmodel plan` finds the layout) or shard the states with ZeRO over data"
            " parallelism"
        )
    return [
        Finding(
            "PM101",
            f"needs {fmt_bytes(v['total_bytes'])} per GPU, {fmt_bytes(over)} over the "
            f"{fmt_bytes(v['capacity_bytes'])} of HBM ({parts})",
            fix,
            {
                "total_bytes": v["total_bytes"],
                "capacity_bytes": v["capacity_bytes"],
                "over_bytes": over,
            },
        )
    ]


def _rule_tp_cross_node(plan: Plan, cfg: Config) -> list[Finding]:
    gpn = plan.system.gpus_per_node
    if Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system).crossing("tp") == "intra":
        return []
    on_ib = sum(layer_seconds(plan, cfg, "none"))
    on_nv = sum(layer_seconds(plan.with_system(gpus_per_node=cfg.tp), cfg, "none"))
    return [
        Finding(
            "PM201",
            f"tp({cfg.tp}) > gpus_per_node({gpn}): TP collectives run on "
            f"{plan.system.inter_node_link.name}; one layer takes {fmt_time(on_ib)} instead of "
            f"{fmt_time(on_nv)} on {plan.system.intra_node_link.name} ({on_ib / on_nv:.1f}x)",
            f"keep tp <= {gpn} and move the rest to pp or dp",
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
    mesh = Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system)
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
    return [
        Finding(
            "PM204",
            f"{a} (more frequent) runs on {links[a][1]} ({links[a][0] / 1e9:.0f} GB/s) while "
            f"{b} (less frequent) has {links[b][1]} ({links[b][0] / 1e9:.0f} GB/s)",
            f"placement: {other} (step time {fmt_time(t_now)} -> {fmt_time(t_alt)}, "
            f"{100 * (t_alt / t_now - 1):+.1f}%)",
            {"step_time_s": t_now, "step_time_other_placement_s": t_alt},
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
            f" {fmt_bytes(alt['activations_bytes'])} with 1F1B (p={cfg.pp} in flight)",
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


def _op_seconds(plan: Plan, cfg: Config, kind: str | None = None) -> dict[str, float]:
    return {o.name: float(o.fwd_s + o.bwd_s) for o in per_layer_ops(plan, cfg, kind)}


def _rule_ep_across_nodes(plan: Plan, cfg: Config) -> list[Finding]:
    if not plan.model.is_moe or cfg.ep == 1:
        return []
    mesh = Mesh(cfg.tp, cfg.pp, cfg.dp, plan.system, cfg.cp, cfg.ep, cfg.etp)
    if mesh.crossing("ep") == "intra":
        return []
    ops = _op_seconds(plan, cfg, "moe")
    a2a = sum(v for k, v in ops.items() if k.startswith("EP "))
    share = a2a / sum(ops.values())
    if share <= 0.25:
        return []
    gpn = plan.system.gpus_per_node
    return [
        Finding(
            "PM207",
            f"ep({cfg.ep}) * etp({cfg.etp}) spans {cfg.ep * cfg.etp // gpn} nodes: the dispatch and"
            f" combine all-to-alls take {fmt_time(a2a)} of the MoE layer's"
            f" {fmt_time(sum(ops.values()))} ({100 * share:.0f}%) per micro-batch on"
            f" {plan.system.inter_node_link.name}",
            f"keep ep x etp <= {gpn} (one node), dispatch with DeepEP (moe_token_dispatcher_type:"
            " deepep), or overlap the all-to-all (moe_a2a_overlap)",
            {"a2a_s": a2a, "share": share},
        )
    ]


def _rule_cp_exposed(plan: Plan, cfg: Config) -> list[Finding]:
    if cfg.cp == 1 or cfg.cp_comm_type != "p2p":
        return []
    ops = _op_seconds(plan, cfg)
    ring = ops.get("CP ring exchange of K, V", 0.0)
    core = next((v for k, v in ops.items() if k.startswith("attention core")), 0.0) or ops.get(
        "attention scores QK^T", 0.0
    ) + ops.get("attention x V", 0.0)
    if core <= 0 or ring <= 0.10 * core:
        return []
    tokens = plan.seq_length // cfg.cp
    return [
        Finding(
            "PM208",
            f"cp({cfg.cp}) leaves {tokens:,} tokens per rank: the K/V ring exposes {fmt_time(ring)}"
            f" per layer and micro-batch, {100 * ring / core:.0f}% of the attention it should hide"
            " under",
            "lower cp (more tokens per rank), or cp_comm_type: a2a (Ulysses) where the heads split"
            " over tp x cp",
            {"exposed_s": ring, "attention_s": core},
        )
    ]


def check(plan: Plan, ignore: list[str] | None = None) -> list[Finding]:
    """Every finding for a plan, errors first; rules in ``ignore`` (and the plan's) are silenced."""
    silenced = {r.upper() for r in ignore or []} | {r.upper() for r in plan.ignore}
    unknown = sorted(silenced - set(RULES))
    if unknown:
        raise PerfModelError(
            f"unknown rule ID(s) {', '.join(unknown)}; see `perfmodel check --list-rules`"
        )
    cfg, findings = _config_or_problem(plan)
    if cfg is not None and not findings:
        est = estimate(plan, cfg)
        findings += _rule_memory(plan, cfg, est)
        findings += _rule_tp_cross_node(plan, cfg)
        findings += _rule_bubble(plan, cfg, est)
        findings += _rule_memory_bound_gemm(plan, cfg)
        findings += _rule_comm_frequency(plan, cfg, est)
        findings += _rule_gpipe(plan, cfg, est)
        findings += _rule_stage_balance(plan, cfg, est)
        findings += _rule_sp(plan, cfg, est)
        findings += _rule_zero(plan, cfg, est)
        findings += _rule_tp_ratio(plan, cfg)
        findings += _rule_ep_across_nodes(plan, cfg)
        findings += _rule_cp_exposed(plan, cfg)
    rank = {ERROR: 0, WARNING: 1, INFO: 2}
    return sorted(
        (f for f in findings if f.rule not in silenced), key=lambda f: (rank[f.severity], f.rule)
    )


def exit_code(findings: list[Finding], strict: bool = False) -> int:
    """0 when no errors; 1 with errors (and, with strict, with warnings)."""
    bad = {ERROR, WARNING} if strict else {ERROR}
    return 1 if any(f.severity in bad for f in findings) else 0
