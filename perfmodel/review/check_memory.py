"""The memory rule of `perfmodel check` (PM101): how far over the line a plan is, and the cheapest
changes that make it fit, each evaluated with the same estimate the plan gets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from perfmodel.cost import memory as mem
from perfmodel.cost.memory import RECOMPUTE_CODES as RC
from perfmodel.cost.transformer import LayerShape
from perfmodel.engine import memory_switches
from perfmodel.engine.blocks import Setting
from perfmodel.engine.estimate import (
    Estimate,
    Knobs,
    evaluate,
    resolve_config,
)
from perfmodel.engine.memory_verdict import MEMORY_BAND, host_fits
from perfmodel.engine.rules import config_problems
from perfmodel.errors import PerfModelError
from perfmodel.review.catalogue import Finding
from perfmodel.specs import Config, Plan
from perfmodel.units import fmt_bytes


def config_or_problem(plan: Plan) -> tuple[Config | None, list[Finding]]:
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
    k = Knobs.from_configs(valid)
    out: list[dict] = [{} for _ in valid]
    for _, rows in memory_switches.groups(k.memory_switch):  # evaluate prices a set at a time
        raw = evaluate(plan, k.take(rows))
        raw.pop("stages")
        for j, i in enumerate(rows):
            out[i] = {"config": valid[i], **{key: v[j] for key, v in raw.items()}}
    return out


def _fits_fixes(plan: Plan, cfg: Config) -> list[tuple[str, Config]]:
    n, gpn, L, heads = (
        plan.system.num_gpus,
        plan.system.domain,
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
    # each memory switch the framework runs and the plan leaves free, one at a time (a single
    # change; engine/memory_switches.py)
    singles = [s for s in memory_switches.usable_sets(plan) if "+" not in s]
    for name in singles if not cfg.memory_switch else []:
        row = (np.array(cfg.zero_stage), np.array(RC[cfg.recompute]), np.array(cfg.pp))
        if memory_switches.runs_with(name, *row):
            words = memory_switches.describe(name, plan.model.num_layers)
            out.append((words, replace(cfg, memory_switch=name)))
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


def _host_memory(plan: Plan, v: dict) -> list[Finding]:
    """PM101 for the host: what is offloaded must fit, with the memory band's margin, in the GPU's
    share of its host's DRAM (memory_verdict.host_fits)."""
    if host_fits(v):
        return []
    host, cap = float(v["host_bytes"]), float(v["host_capacity_bytes"])
    tr = plan.training
    fix = "offload less (cpu_offloading_num_layers, offload_modules, optimizer_cpu_offload)"
    per_layer = float(v["activations_host_bytes"]) / max(tr.cpu_offloading_num_layers, 1)
    if tr.cpu_offloading_num_layers and per_layer > 0:
        room = cap / (1 + MEMORY_BAND) - float(v["optimizer_host_bytes"])
        fix = f"cpu_offloading_num_layers: {max(int(room // per_layer), 0)} at most"
    return [
        Finding(
            "PM101",
            f"offloads {fmt_bytes(host)} a GPU to host memory, over the {fmt_bytes(cap)} share"
            f" of its host's DRAM with the memory model's +-{100 * MEMORY_BAND:g}% margin"
            " (system.host_memory_bytes)",
            f"{fix}, or state system.host_memory_bytes if the nodes have more DRAM",
            {"host_bytes": host, "host_capacity_bytes": cap},
        )
    ]


def rule_memory(plan: Plan, cfg: Config, est: Estimate) -> list[Finding]:
    v = est.values
    # over the usable line (HBM less the reserve): the excess is over the usable HBM. Inside the
    # memory model's band it is tight (the search keeps it), beyond it it does not fit (issue 37)
    over = v["total_bytes"] - v["usable_bytes"]
    if over <= 0:
        return _host_memory(plan, v)
    parts = ", ".join(
        f"{k.replace('_bytes', '')} {fmt_bytes(v[k])}"
        for k in (
            "weights_bytes",
            "gradients_bytes",
            "optimizer_bytes",
            "activations_bytes",
        )
    )
    options = _fits_fixes(plan, cfg)
    results = _evaluate_variants(plan, [c for _, c in options])
    labels = {id(c): label for label, c in options}
    # a change that leaves it tight is no fix: fits with margin (issue 37)
    fitting = sorted(
        (r for r in results if r["fits"] and not r["tight"]), key=lambda r: r["step_time_s"]
    )
    if fitting:
        best = fitting[0]
        # the variants' closed-form steps against the plan's own (not its simulated one)
        delta = 100 * (best["step_time_s"] / v["closed_form_step_time_s"] - 1)
        fix = (
            f"{labels[id(best['config'])]}: {fmt_bytes(best['total_bytes'])} per GPU, step time "
            f"{delta:+.1f}% (the fastest single change that fits)"
        )
    else:
        total = mem.total_params(LayerShape.of(plan.model), plan.model.num_layers, plan.seq_length)
        states = float(sum(mem.model_state_bytes(total, 1, 0, Setting.of(plan).precision)))
        need = int(np.ceil(states / v["usable_bytes"]))
        fix = (
            f"no single change fits: the model states alone ({fmt_bytes(states)}) need at least"
            f" {need} GPUs of {fmt_bytes(v['usable_bytes'])} usable before activations; add GPUs"
            " (`perfmodel plan` finds the layout) or shard the states with ZeRO over data"
            " parallelism"
        )
    return [
        Finding(
            "PM101",
            f"needs {fmt_bytes(v['total_bytes'])} per GPU, {fmt_bytes(over)} over the "
            f"{fmt_bytes(v['usable_bytes'])} usable ({fmt_bytes(v['capacity_bytes'])} HBM less a"
            f" {fmt_bytes(v['reserve_bytes'])} reserve; --memory-reserve) ({parts}); "
            + (
                f"tight: inside the memory model's +-{100 * MEMORY_BAND:g}% band, a launch there"
                " is a bet"
                if v["fits"]
                else f"beyond the memory model's +-{100 * MEMORY_BAND:g}% band"
            ),
            fix,
            {
                "total_bytes": v["total_bytes"],
                "capacity_bytes": v["capacity_bytes"],
                "usable_bytes": v["usable_bytes"],
                "over_bytes": over,
            },
        )
    ] + _host_memory(plan, v)
