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
