"""One configuration: resolve the plan's knobs, evaluate it, refine the pipeline by simulation.

``estimate`` runs the vectorized ``evaluate`` (perfmodel/engine/evaluate.py) on a one-entry array,
so a single report and the search share every formula; with pp > 1 the bubble and the exposed
point-to-point time then come from the schedule simulator, which is exact for unequal stages (the
closed form assumes equal ones; seed 000, 6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from perfmodel.engine import memory_switches
from perfmodel.engine.assumptions import assumptions, config_assumptions
from perfmodel.engine.conventions import flop_convention as flop_convention
from perfmodel.engine.estimate_notes import warnings_of
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.knobs import Columns, Knobs
from perfmodel.engine.memory import MEMORY_KEYS
from perfmodel.engine.memory_verdict import MEMORY_BAND, verdict_of
from perfmodel.engine.per_layer import layer_kind as layer_kind
from perfmodel.engine.per_layer import layer_seconds as layer_seconds
from perfmodel.engine.per_layer import ops_json as ops_json
from perfmodel.engine.per_layer import per_layer_ops
from perfmodel.engine.rules import config_problems
from perfmodel.engine.run import run_range, training_run
from perfmodel.engine.schedule import max_chunk_passes
from perfmodel.engine.step_figures import BREAKDOWN_KEYS
from perfmodel.engine.uncertainty import Band
from perfmodel.errors import PerfModelError
from perfmodel.specs import Config, Plan
from perfmodel.specs.by_plan import ByPlan, batchless
from perfmodel.specs.framework import PROFILES
from perfmodel.specs.parallel import Parallel

__all__ = [
    "Batch",
    "Estimate",
    "Knobs",
    "estimate",
    "estimates",
    "evaluate",
    "per_layer_ops",
    "resolve_config",
    "validate_config",
]


def resolve_config(plan: Plan, **overrides: Any) -> Config:
    """Fill the knobs a plan leaves free with defaults for a single estimate.

    Defaults: tp 1, pp 1, cp 1, ep 1, etp 1, dp = num_gpus / (tp pp cp), vp 1, micro-batch 1 (a
    profile whose framework splits the batch into pp micro-batches under pipeline parallelism,
    as torchtitan does by default, gets that), no SP (always SP for a mixture-of-experts model
    with tp > 1), no recompute, ZeRO 0, schedule 1f1b (interleaved when vp > 1), CP exchange p2p,
    the default layer split.
    """
    fixed = plan.parallel.model_dump()
    fixed.update({k: v for k, v in overrides.items() if v is not None})
    par = Parallel(**fixed)
    n = plan.system.num_gpus
    tp, pp, cp = par.tp or 1, par.pp or 1, par.cp or 1
    if par.dp is not None:
        dp = par.dp
    elif n % (tp * pp * cp):
        cps = f" * cp({cp})" if cp > 1 else ""
        raise PerfModelError(
            f"num_gpus({n}) is not divisible by tp({tp}) * pp({pp}){cps} = {tp * pp * cp}; "
            "pick tp and pp whose product divides the GPU count"
        )
    else:
        dp = n // (tp * pp * cp)
    vp = par.vp or 1
    mbs = par.micro_batch_size or 1
    local = plan.training.global_batch_size // max(dp, 1)
    schedule = par.schedule or _default_schedule(plan, pp, vp, local // mbs)
    if (
        par.micro_batch_size is None
        and pp > 1
        and PROFILES[plan.training.framework]["default_microbatches"] == "pp"
        and local % pp == 0
    ):
        mbs = local // pp
    sp = par.sequence_parallel
    if sp is None:
        sp = plan.model.is_moe and tp > 1
    return Config(
        tp,
        pp,
        dp,
        vp,
        mbs,
        plan.training.global_batch_size,
        bool(sp),
        par.recompute or "none",
        par.zero_stage or 0,
        schedule,
        cp=cp,
        ep=par.ep or 1,
        etp=par.etp or 1,
        # Megatron-Core's default --cp-comm-type is p2p; DeepSpeed's Ulysses is all-to-all
        cp_comm_type=par.cp_comm_type
        or (PROFILES[plan.training.framework]["cp_comm_types"] or ("p2p",))[0],
        dp_shard=0 if par.dp_shard in (None, dp) else par.dp_shard,
        first_stage_layers=par.decoder_first_pipeline_num_layers or 0,
        last_stage_layers=par.decoder_last_pipeline_num_layers or 0,
        moe_token_dispatcher_type=plan.training.moe_token_dispatcher_type,
        moe_a2a_overlap=plan.training.moe_a2a_overlap,
    )


def _default_schedule(plan: Plan, pp: int, vp: int, m: int) -> str:
    """A plan's schedule when it names none: interleaved with vp > 1, else the profile's first
    where it runs (HAI-LLM's DualPipe, report Sec. 3.2.1: even pp, even m >= 2 pp), else 1F1B."""
    if vp > 1:
        return "interleaved"
    first = (PROFILES[plan.training.framework]["schedules"] or ("1f1b",))[0]
    if first == "dualpipe" and not (pp >= 2 and pp % 2 == 0 and m % 2 == 0 and m >= 2 * pp):
        return "1f1b"
    return first


def validate_config(plan: Plan, cfg: Config) -> None:
    """Raise one PerfModelError listing every broken rule of ``cfg``."""
    problems = config_problems(plan, cfg)
    if problems:
        raise PerfModelError("; ".join(f"{fld}: {msg}" for _, fld, msg in problems))


@dataclass
class Estimate:
    """One configuration's figures (floats), its per-stage times, and the warnings to print."""

    config: Config
    values: dict[str, float]
    warnings: list[str] = field(default_factory=list)
    # forward seconds per micro-batch, each stage
    stage_fwd_s: list[float] = field(default_factory=list)
    # backward (recompute and TP comm included)
    stage_bwd_s: list[float] = field(default_factory=list)
    stage_layers: list[float] = field(default_factory=list)  # layers on each stage
    framework: str = ""
    assumed: list[str] = field(default_factory=list)  # what the figures rest on that no one checked
    band: Band | None = None  # the expected error, if attached
    compute_dtype: str = "bf16"  # the dtype the GEMMs run in
    mfu_peak: str = "bf16"  # the dtype whose peak MFU and HFU are measured against
    run: Any = None  # engine/run.TrainingRun of the plan's tokens, if it names them
    slower_link_step_s: float | None = None  # with the inter-node link 20% slower (plan)
    equivalent_to_best: bool | None = None  # inside the best's band (plan)
    mtp: int = 0  # multi-token prediction layers the FLOPs count
    # of stage_bwd_s, the weight-gradient GEMMs (the zero-bubble schedules' W)
    stage_wgrad_s: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        v = self.values
        return {
            "step_time_s": v["step_time_s"],
            "tokens_per_s": v["tokens_per_s"],
            "tokens_per_s_per_gpu": v["tokens_per_s_per_gpu"],
            "model_tflops_per_gpu": v["model_tflops_per_gpu"],
            "hardware_tflops_per_gpu": v["hardware_tflops_per_gpu"],
            "mfu": v["mfu"],
            "hfu": v["hfu"],
            "mfu_peak": self.mfu_peak,
            "mfu_peak_flops_per_s": v["mfu_peak_flops_per_s"],
            "flop_convention": flop_convention(
                self.config.recompute,
                self.mfu_peak,
                self.compute_dtype,
                v["mfu_peak_flops_per_s"],
                self.mtp,
            ),
            "breakdown_s": {key: v[key] for key in BREAKDOWN_KEYS},
            "bubble_over_step": v["bubble_over_step"],
            "bubble_over_ideal": v["bubble_over_ideal"],
            "bubble_share_of_step": v["bubble_share_of_step"],
            "bubble_simulated_over_step": v["bubble_simulated_over_step"],
            "closed_form_step_time_s": v["closed_form_step_time_s"],
            "slowest_stage": ("first", "middle", "middle", "last")[int(v["slowest_stage_class"])],
            "stage_time_s": {
                "first": v["stage_time_first_s"],
                "middle": v["stage_time_middle_s"],
                "last": v["stage_time_last_s"],
            },
            "memory": {
                **{
                    key: bool(v[key]) if key in ("fits", "tight") else v[key] for key in MEMORY_KEYS
                },
                "verdict": verdict_of(v),
                "band": MEMORY_BAND,
            },
            "config": self.config.as_dict(),
            "stage_layers": list(self.stage_layers),
            "framework": self.framework,
            "assumed": list(self.assumed),
            "slower_link_step_time_s": self.slower_link_step_s,
            "equivalent_to_best": self.equivalent_to_best,
            "expected_error": (
                None
                if self.band is None
                else {
                    **self.band.to_json(),
                    "step_time_range_s": list(self.band.range(v["step_time_s"])),
                    "worst_step_time_range_s": list(self.band.range(v["step_time_s"], True)),
                }
            ),
            "warnings": list(self.warnings),
            "training_run": self._run_json(),
        }

    def _run_json(self) -> dict[str, Any] | None:
        """The run at the predicted step time, with its range: the step band's edges and the
        goodput's own uncertainty (engine/run.py run_range; issue 37)."""
        if self.run is None:
            return None
        out: dict[str, Any] = self.run.to_json()
        if out.get("days") is not None:
            step = self.values["step_time_s"]
            lo, hi = (step, step) if self.band is None else self.band.range(step)
            out["range"] = run_range(out, lo / step, hi / step)
        return out


def estimate(plan: Plan, cfg: Config, simulate: bool = True) -> Estimate:
    """Evaluate one configuration through the vectorized path; with ``simulate`` (and pp > 1) the
    pipeline's bubble and exposed point-to-point time come from the schedule simulator."""
    validate_config(memory_switches.applied(plan, cfg.memory_switch), cfg)
    return estimates(plan, [cfg], simulate)[0]


def estimates(plan: Plan, cfgs: list[Config], simulate: bool = True) -> list[Estimate]:
    """``estimate`` of configurations known to be valid (the search's, which its masks checked),
    through one vectorized ``evaluate`` over all of them: each row is what ``estimate`` gives for
    that configuration alone (evaluate's formulas are row by row)."""
    batch = Batch(plan, cfgs, simulate)
    return [batch[row] for row in range(len(cfgs))]


# each recent plan's assumptions (a search's walk makes a batch of its rows some four times)
_ASSUMED: ByPlan[list[str]] = ByPlan(1024)


class Batch:
    """Configurations evaluated together, each made an Estimate (and its pipeline simulated) only
    when asked for: the search's exact top walks a batch and stops where the bound says, so the
    simulations past that point never run. The configurations are given as Configs, or as rows of
    Knobs (``of_rows``: each made a Config only when the walk reaches it)."""

    def __init__(self, plan: Plan, cfgs: list[Config], simulate: bool = True) -> None:
        self._setup(plan, Knobs.from_configs(cfgs), list(cfgs), 0, simulate)

    @classmethod
    def of_rows(cls, plan: Plan, k: Knobs, simulate: bool = True) -> Batch:
        """The configurations of ``k`` under the plan's global batch."""
        out = cls.__new__(cls)
        out._setup(plan, k, [None] * len(k), plan.training.global_batch_size, simulate)
        return out

    def _setup(
        self, plan: Plan, k: Knobs, cfgs: list[Config | None], gbs: int, simulate: bool
    ) -> None:
        self.knobs, self.cfgs, self.gbs, self.simulate = k, cfgs, gbs, simulate
        self.lists: Columns | None = None  # the knobs' columns, once a Config is made of a row
        # one evaluation per memory switch set among the configurations (most batches have one):
        # (the plan with the set applied, evaluate's arrays, its stages, what it assumed)
        self.parts: list[tuple[Plan, dict[str, Any], Any, list[str]]] = []
        self.where: list[tuple[int, int]] = [(0, 0)] * len(k)
        for name, rows in memory_switches.groups(k.memory_switch):
            raw = evaluate(plan, k.take(rows))
            stages = raw.pop("stages", None)
            switched = memory_switches.applied(plan, name)
            for j, i in enumerate(rows):
                self.where[i] = (len(self.parts), j)
            # they never read the global batch: plans that differ in it alone share them
            first = batchless(switched)
            assumed = _ASSUMED.get(first, None, partial(assumptions, first))
            self.parts.append((switched, raw, stages, assumed))
        self.columns: dict[int, tuple[list[str], list[tuple[Any, ...]]]] = {}  # per part: _columns

    def __len__(self) -> int:
        return len(self.cfgs)

    def config(self, row: int) -> Config:
        cfg = self.cfgs[row]
        if cfg is None:
            if self.lists is None:
                self.lists = self.knobs.columns()
            cfg = self.cfgs[row] = self.lists.config(row, self.gbs)
        return cfg

    def __getitem__(self, row: int) -> Estimate:
        part, j = self.where[row]
        plan, _, stages, assumed = self.parts[part]
        values = dict(zip(*self._figures(part, j)))
        return _one(plan, self.config(row), values, stages, j, self.simulate, assumed)

    def _figures(self, part: int, j: int) -> tuple[list[str], tuple[Any, ...]]:
        """The names of a part's figures, and row ``j``'s as plain numbers (_columns)."""
        if part not in self.columns:
            self.columns[part] = _columns(self.parts[part][1])
        keys, rows = self.columns[part]
        return keys, rows[j]

    def closed_step(self, row: int) -> float | None:
        """Row ``row``'s step where its Estimate's is the closed form (none simulated), or None."""
        cfg = self.config(row)
        if self.simulate and _pipelined(cfg) and _walkable(cfg):
            return None
        part, j = self.where[row]
        keys, figures = self._figures(part, j)
        if not _finite(figures):  # _one refuses it (_check_finite)
            return None
        return float(figures[keys.index("step_time_s")])


def _pipelined(cfg: Config) -> bool:  # the simulator runs it: pp > 1, no DualPipe (closed form)
    return cfg.pp > 1 and cfg.schedule not in ("dualpipe", "dualpipev")


def _walkable(cfg: Config) -> bool:  # small enough to walk block by block
    return cfg.pp * cfg.num_micro_batches * cfg.vp <= max_chunk_passes(cfg.schedule)


def _columns(raw: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """An evaluation's figures' names, and each row's figures as plain Python numbers: bool where
    the array is, float else."""
    columns = [
        val.tolist() if val.dtype == bool else val.astype(float).tolist() for val in raw.values()
    ]
    return list(raw), list(zip(*columns))


def _one(
    plan: Plan,
    cfg: Config,
    values: dict[str, Any],
    stages: Any,
    row: int,
    simulate: bool,
    assumed: list[str],
) -> Estimate:
    """Row ``row`` of an evaluation as an Estimate (``values``: its figures, _columns' row), its
    pipeline simulated where it can be."""
    values["closed_form_step_time_s"] = values["step_time_s"]
    values["bubble_simulated_over_step"] = values["bubble_over_step"]
    tf, tb = stages.per_stage(row)
    tw = stages.wgrad_per_stage(row)
    notes = []
    if simulate and _pipelined(cfg):
        if _walkable(cfg):
            _refine_with_simulation(cfg, values, tf, tb, not plan.training.p2p_overlap, tw)
        else:
            notes.append(
                f"pipeline not simulated (p x m x v = {cfg.pp * cfg.num_micro_batches * cfg.vp:,}"
                " blocks): the bubble is the closed form's"
            )
    _check_finite(values)
    est = Estimate(
        cfg,
        values,
        notes + warnings_of(plan, cfg, values),
        tf,
        tb,
        stages.stages.layer_counts(row),
        plan.training.framework,
        list(assumed),
        compute_dtype=plan.training.dtype,
        mfu_peak=plan.training.mfu_peak or plan.training.dtype,
        mtp=plan.model.mtp_num_layers,
        stage_wgrad_s=tw,
    )
    est.assumed += config_assumptions(plan, cfg, est.stage_layers)
    est.run = training_run(plan, values["step_time_s"])
    return est


def _finite(figures: tuple[Any, ...]) -> bool:
    """Whether every figure (floats and bools) is finite: their sum is, unless one is not (or the
    sum overflows: then each is looked at)."""
    return math.isfinite(sum(figures)) or all(
        math.isfinite(v) for v in figures if isinstance(v, float)
    )


def _check_finite(values: dict[str, Any]) -> None:
    """A figure that overflows is an error naming what to look at, never NaN or Infinity in the
    output."""
    try:
        if _finite(tuple(values.values())):
            return
    except TypeError:  # a figure that is not a number: look at each
        pass
    bad = sorted(k for k, v in values.items() if isinstance(v, float) and not math.isfinite(v))
    if bad:
        raise PerfModelError(
            f"the estimate overflows ({', '.join(bad[:4])} not finite): check the link bandwidths"
            " and latencies, the GPU's peak and HBM figures and the batch for values off by orders"
            " of magnitude"
        )


def _refine_with_simulation(
    cfg: Config,
    v: dict[str, Any],
    tf: list[float],
    tb: list[float],
    blocking: bool,
    tw: list[float] | None = None,
) -> None:
    """Replace the closed-form bubble and p2p terms by a simulated step of the schedule (``tw``:
    the weight-gradient part of ``tb``, which the zero-bubble schedules run apart)."""
    from perfmodel.engine.schedule import simulate_pair

    m = cfg.num_micro_batches
    tw = tw if tw is not None else [0.0] * len(tb)
    ideal, real = simulate_pair(cfg.pp, m, cfg.vp, cfg.schedule, tf, tb, v["p2p_s"], blocking, tw)
    old = v["bubble"] + v["pp_comm"]
    # the step is the real walk's; the p2p's share is what it adds to the walk without it (never
    # below 0: the zero-bubble walk's greedy choices may find a shorter step with the latency)
    v["pp_comm"] = max(real.step_time - ideal.step_time, 0.0)
    v["bubble"] = max(0.0, real.step_time - v["pp_comm"] - m * v["slowest_stage_s"])
    scale = v["step_time_s"] / (v["step_time_s"] - old + v["bubble"] + v["pp_comm"])
    v["step_time_s"] /= scale
    for key in (
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "model_tflops_per_gpu",
        "hardware_tflops_per_gpu",
        "mfu",
        "hfu",
    ):
        v[key] *= scale
    v["bubble_simulated_over_step"] = ideal.bubble_over_step
    v["bubble_share_of_step"] = v["bubble"] / v["step_time_s"]
