"""The planning answer of a plan with `training.tokens` (issue 23): how long the run takes, its
GPU-hours, energy and cost, and what failures and checkpoints take from it (cost/goodput.py),
each assumption named."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfmodel.cost import goodput as gp
from perfmodel.cost import memory as mem
from perfmodel.cost.shapes import LayerShape
from perfmodel.specs import Plan, Precision
from perfmodel.specs.run import DEFAULTS_SOURCE


@dataclass
class TrainingRun:
    """A whole run at the predicted step time: seconds, hours, joules, USD."""

    tokens: float
    tokens_per_step: int
    steps: int
    ideal_s: float  # steps x step time, nothing lost
    wall_s: float  # with checkpoints, interruptions and restarts
    gpu_hours: float  # over the wall time
    energy_j: float | None  # the facility's: GPUs, the rest of the nodes, PUE
    gpu_energy_j: float | None  # the GPUs' alone (what model cards report)
    cost_usd: float | None
    interruptions: float
    checkpoint_s: float  # training paused per save
    checkpoint_interval_s: float
    restart_s: float  # per interruption, the checkpoint's read included
    job_mtbf_s: float
    goodput: float  # ideal / wall
    assumptions: list[str] = field(default_factory=list)

    @property
    def days(self) -> float:
        return self.wall_s / 86400

    @property
    def ideal_days(self) -> float:
        return self.ideal_s / 86400

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ideal_days"], out["days"] = self.ideal_days, self.days
        out["energy_mwh"] = None if self.energy_j is None else self.energy_j / 3.6e9
        out["gpu_energy_mwh"] = None if self.gpu_energy_j is None else self.gpu_energy_j / 3.6e9
        return {k: None if isinstance(v, float) and math.isinf(v) else v for k, v in out.items()}


# What the goodput counts, and what published fleets lost beside it. Llama 3 405B's pretraining had
# 466 job interruptions in a 54-day snapshot, 47 of them planned (firmware, configuration and
# dataset updates) and 419 unexpected, and reached "higher than 90% effective training time"
# (Dubey et al. 2024, sec. 3.3.4). The model's goodput counts the unexpected interruptions, the
# checkpoint saves, the work lost since the last one and the restarts; it leaves out planned
# maintenance, stragglers and slow nodes, evaluation and data-pipeline stalls, loss spikes rolled
# back, and warm-up. Its own uncertainty is taken as that gap: from its goodput down to the
# published fleet's 90% (where its own is higher). Meta's model card for Llama 3.1 reports 1.46M,
# 7.0M and 30.84M H100 GPU-hours for 8B, 70B and 405B (meta-llama/Llama-3.1-8B model card,
# "Training Energy Use"), which include all of it.
FLEET_GOODPUT = 0.90
GOODPUT_BASIS = (
    "goodput counts unexpected interruptions (Llama 3's rate), checkpoint saves, lost work and"
    " restarts; it leaves out planned maintenance, stragglers, evaluation and data stalls, loss"
    " spikes rolled back and warm-up. Published fleets: Llama 3 405B had 466 interruptions in 54"
    " days (47 planned) and >90% effective training time (Dubey et al. 2024, sec. 3.3.4); Llama"
    " 3.1 used 1.46M / 7.0M / 30.84M H100 GPU-hours for 8B / 70B / 405B (Meta model card). The"
    " range runs from the step band's lower edge at the model's goodput to its upper edge at"
    f" {100 * FLEET_GOODPUT:.0f}%."
)


def run_range(run: dict[str, Any], low: float, high: float) -> dict[str, Any]:
    """The run's figures over the step band (``low`` and ``high``: the band's edges over the step
    time) and the goodput's own uncertainty (GOODPUT_BASIS): each figure's [low, high]. Wall time,
    GPU-hours, energy and cost scale with the steps' time at a given goodput (the interruptions
    and checkpoints of cost/goodput.py scale with it too)."""
    good = run["goodput"]
    worst = min(good, FLEET_GOODPUT) if good else good
    fast = low
    slow = high * (good / worst) if worst else math.inf
    out: dict[str, Any] = {"step_band": [low, high], "goodput": [worst, good]}
    for key in ("days", "gpu_hours", "energy_mwh", "gpu_energy_mwh", "cost_usd"):
        v = run.get(key)
        out[key] = None if v is None else [v * fast, v * slow]
    out["basis"] = GOODPUT_BASIS
    return out


def checkpoint_bytes(plan: Plan) -> float:
    """What a checkpoint holds: the 16-bit weights and the optimizer's fp32 master and moments (in
    their dtypes) of every parameter (Megatron's distributed checkpoint, PyTorch DCP), bytes."""
    tr, m = plan.training, plan.model
    p = Precision.of(
        tr.dtype,
        tr.grad_accum_fp32,
        tr.optimizer,
        moments=(tr.exp_avg_dtype, tr.exp_avg_sq_dtype),
        main_params=tr.main_params_dtype,
    )
    params = mem.total_params(LayerShape.of(m), m.num_layers, plan.seq_length, sum(m.moe_pattern()))
    return params * (p.weight_bytes + p.optimizer_bytes)


def training_run(plan: Plan, step_time_s: float) -> TrainingRun | None:
    """The run of ``plan.training.tokens`` tokens at ``step_time_s`` a step (None without
    tokens)."""
    tr, run = plan.training, plan.run
    if tr.tokens is None:
        return None
    given = plan.run.model_fields_set
    notes: list[str] = []
    steps = math.ceil(tr.tokens / (tr.global_batch_size * plan.seq_length))
    ideal = steps * step_time_s
    n = plan.system.num_gpus
    nodes = math.ceil(n / plan.system.gpus_per_node)
    size = checkpoint_bytes(plan)
    save = size / (nodes * run.checkpoint_bandwidth_per_node)
    pause = size / n / run.host_bandwidth if run.async_checkpoint else save
    restart = run.restart_s + save  # the checkpoint is read back at the bandwidth it was written
    mtbf = gp.job_mtbf(run.failure_rate_per_gpu_hour, n)
    interval = run.checkpoint_interval_s or gp.optimal_interval(pause, mtbf)
    wall = gp.wall_time(ideal, pause, interval, mtbf, restart)
    for key in ("failure_rate_per_gpu_hour", "checkpoint_bandwidth_per_node", "restart_s"):
        if key not in given:
            notes.append(DEFAULTS_SOURCE[key])
    if run.async_checkpoint and "host_bandwidth" not in given:
        notes.append(DEFAULTS_SOURCE["host_bandwidth"])
    if run.checkpoint_interval_s is None:
        notes.append("checkpoint interval: the Young/Daly optimum")
    energy = _energy(plan, wall, notes)
    gpu_w = run.gpu_power_w or plan.system.gpu.tdp_w
    gpu_energy = None if gpu_w is None else gp.energy_joules(wall, n, gpu_w, 0.0, 1.0)
    cost = None if run.price_per_gpu_hour is None else run.price_per_gpu_hour * n * wall / 3600
    if cost is None:
        notes.append("no cost: set run.price_per_gpu_hour")
    return TrainingRun(
        tokens=tr.tokens,
        tokens_per_step=tr.global_batch_size * plan.seq_length,
        steps=steps,
        ideal_s=ideal,
        wall_s=wall,
        gpu_hours=n * wall / 3600,
        energy_j=energy,
        gpu_energy_j=gpu_energy,
        cost_usd=cost,
        interruptions=wall / mtbf,
        checkpoint_s=pause,
        checkpoint_interval_s=interval,
        restart_s=restart,
        job_mtbf_s=mtbf,
        goodput=0.0 if math.isinf(wall) else ideal / wall,
        assumptions=notes,
    )


def _energy(plan: Plan, wall: float, notes: list[str]) -> float | None:
    """The facility's energy over the wall time, J, in one scope on every GPU: the GPUs at their
    TDP, the rest of their node or rack (CPUs, NICs, switches, fans) at the system's listed
    maximum less its GPUs, times PUE. None (and a note) where the GPU has no power or its system
    no figure: the GPUs' energy alone is then the one given (gpu_energy_j), never a facility
    figure of a narrower scope."""
    run, gpu = plan.run, plan.system.gpu
    gpu_w = run.gpu_power_w or gpu.tdp_w
    if gpu_w is None:
        notes.append(f"no energy: {gpu.name} has no TDP; set run.gpu_power_w")
        return None
    if run.gpu_power_w is None:
        notes.append(f"GPU power: {gpu.name}'s TDP, {gpu_w:.0f} W, under load")
    other = run.node_power_w_per_gpu
    if other is None and gpu.system_power_w_per_gpu and gpu.tdp_w:
        other = gpu.system_power_w_per_gpu - gpu.tdp_w
        notes.append(
            f"energy: the GPUs, the rest of the node or rack ({other:.0f} W a GPU: the system's"
            " listed maximum less its GPUs, an upper bound), times PUE"
        )
    elif other is None:
        notes.append(
            f"no facility energy: {gpu.name}'s system has no power figure (set"
            " run.node_power_w_per_gpu); the GPUs' energy alone is given"
        )
        return None
    if "pue" not in run.model_fields_set:
        notes.append(DEFAULTS_SOURCE["pue"])
    return gp.energy_joules(wall, plan.system.num_gpus, gpu_w, other, run.pue)
