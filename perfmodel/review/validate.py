"""Accuracy against published measurements (issue 4; SPEC 10).

Each bundled case (configs/validation) is a plan with the measured value of a
paper. Published TFLOP/s are turned into a step time with that source's own
FLOP formula (Narayanan 2021 eq. 3 for Table 1, which counts the recompute
forward), so model and measurement are compared in seconds per iteration.
A case may name where its knobs come from when the paper itself does not
state them (`knobs_from`: Narayanan's micro-batch and interleaving depth are in
the authors' reproduction script); knobs no source states are listed under
`searched` and chosen by the search with the stated knobs fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfmodel.cost import flops as fl
from perfmodel.cost.transformer import LayerShape
from perfmodel.engine.estimate import Estimate, estimate, layer_seconds, resolve_config
from perfmodel.engine.search import search
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.review.ranking import Ranking, Run, rank
from perfmodel.specs import Parallel, Plan
from perfmodel.specs.calibrated_plan import with_calibration
from perfmodel.specs.calibration import Calibration

KNOBS = ("micro_batch_size", "vp", "schedule", "sequence_parallel", "recompute", "zero_stage")
TABLE_TITLES = {
    "narayanan2021-table1": "Narayanan et al. 2021, Table 1 (weak scaling, full recompute)",
    "narayanan2021-table2": (
        "Narayanan et al. 2021, Table 2: DeepSpeed ZeRO-3 without model parallelism, 384-2,240 A100"
    ),
    "korthikanti2022-table5": "Korthikanti et al. 2022, Table 5 (full recompute vs SP + selective)",
    "nemo2407-fp8": "NeMo 24.07 FP8 pre-training on DGX-H100 (megatron-core defaults)",
    "moezoo-qwen3-235b": "Megatron-Core MoE model zoo: Qwen3-235B-A22B on 256 H100 (EP/PP layouts)",
    "moezoo-long-context": (
        "Megatron-Core MoE model zoo: Qwen3-235B-A22B long context on 256 H100 (CP)"
    ),
    "llm-foundry": "MosaicML llm-foundry benchmark tables: MPT on PyTorch FSDP1 (A100, H100)",
    "fms-fsdp": (
        "IBM fms-fsdp (2024): Llama 2 shapes on PyTorch FSDP1, 128 A100 and 96 H100, eager and"
        " compiled"
    ),
    "torchtitan-2412": "torchtitan benchmark notes (2024-12): Llama 3.1 on FSDP2, 8-512 H100",
    "torchtitan-2506": "torchtitan benchmark notes (2025-06): Llama 3.1 70B, 256 H100; 8B, 32 H200",
    "moe-2026": (
        "Mixtures of experts, 2026: Megatron-Bridge 26.04 gpt-oss-120B and Qwen3-30B-A3B (H100)"
    ),
    "primus-pipeline": (
        "Primus-pipeline (AMD, 2026): Llama 2 7B, 16 layers, on 8 MI300X, PP 8, each schedule"
    ),
    "amd-instinct": (
        "MLPerf Training v5.1, AMD: Llama 3.1 8B on 8 MI350X and on 8 MI355X (FP8, Megatron-LM)"
    ),
    "amd-perf-results": (
        "AMD ROCm performance results (2026-01): Llama 3.1 8B and 70B on 64 MI325X (Primus)"
    ),
    "deepseek-v3-report": "DeepSeek-V3 technical report: 2,048 H800, DualPipe, EP 64, FP8",
    "mbridge-moe-blackwell": (
        "Megatron-Bridge 26.04 MoE on Blackwell: DeepSeek-V3, Qwen3 and gpt-oss on B200, GB200 and"
        " GB300 (MXFP8, BF16)"
    ),
    "dgxc-moe-2505": (
        "NVIDIA DGX Cloud benchmarks v25.05: Grok-1, DeepSeek-V3 and Llama 4 Maverick on 512-1,024"
        " H100 and 512 GB200 (NeMo 25.04)"
    ),
    "mbridge-blackwell": (
        "Megatron-Bridge 25.11 and 26.04 on Blackwell: Llama 3 on B200, GB200 and GB300 (FP8,"
        " MXFP8, NVFP4)"
    ),
    "mlperf-llama31": (
        "MLPerf Training v5.0/v5.1, NVIDIA's Llama 3.1 runs on GB200 and GB300 (FP8, NVFP4)"
    ),
    "mlperf51-llama31": (
        "MLPerf Training v5.1, Llama 3.1 8B and 405B of Nebius, University of Florida, HPE, Cisco"
        " and Oracle on H100, H200 and B200 (FP8, NeMo)"
    ),
    "torchtitan-2024": (
        "torchtitan docs/performance.md (2024): Llama 2/3 on 64 A100 (FSDP2, eager); Llama 3.1"
        " 405B on 128 H100 (FSDP2 + TP 8, BF16, Float8, async TP)"
    ),
    "dgxc-2505": (
        "NVIDIA DGX Cloud benchmarks v25.05: Llama 3.1 405B and Nemotron-4 340B on 256-512 H100"
        " and GB200 (NeMo 25.04)"
    ),
}
CONVENTIONS = ("narayanan-eq3", "korthikanti-eq7", "megatron-core")
MOE_SWITCHES = ("moe_token_dispatcher_type", "moe_a2a_overlap")


def measured_step_time(plan: Plan, measured: dict) -> float:
    """Seconds per iteration, from the iteration time or from TFLOP/s with the source's
    convention."""
    if "iteration_time_s" in measured:
        return float(measured["iteration_time_s"])
    # step = tokens per step / (tokens per second per GPU x GPUs)
    if "tokens_per_s_per_gpu" in measured:
        tokens = plan.training.global_batch_size * plan.seq_length
        return tokens / (float(measured["tokens_per_s_per_gpu"]) * plan.system.num_gpus)
    m = plan.model
    B, s, L, h, V = (
        plan.training.global_batch_size,
        plan.seq_length,
        m.num_layers,
        m.hidden_size,
        m.vocab_size,
    )
    conv = measured.get("flop_convention")
    if conv == "narayanan-eq3":
        total = fl.narayanan_hardware_flops(B, s, L, h, V)
    elif conv == "korthikanti-eq7":
        total = fl.korthikanti_model_flops(B, s, L, h, V)
    elif conv == "megatron-core":
        depth = fl.Depth(L, sum(m.moe_pattern()), m.mtp_num_layers, m.mtp_is_moe)
        total = fl.megatron_core_flops(LayerShape.of(m), B, s, depth)
    else:
        raise PerfModelError(
            f"unknown flop_convention {conv!r}; use one of {', '.join(CONVENTIONS)}"
        )
    return float(total / (float(measured["tflops_per_gpu"]) * 1e12 * plan.system.num_gpus))


@dataclass
class CaseResult:
    name: str
    table: str
    description: str
    measured_s: float
    predicted_s: float
    estimate: Estimate
    searched: list[str]
    source: str
    knobs_from: str
    # the plan the case ran (searched knobs left free; the estimate's config holds the choice)
    plan: Plan
    # the knobs `knobs_from` supplies (the paper states the rest)
    knobs_from_fields: tuple[str, ...] = ("micro_batch_size", "vp")

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_s - self.measured_s) / self.measured_s

    def to_json(self) -> dict:
        c = self.estimate.config
        return {
            "case": self.name,
            "table": self.table,
            "description": self.description,
            "measured_step_time_s": self.measured_s,
            "predicted_step_time_s": self.predicted_s,
            "error_pct": self.error_pct,
            "searched": self.searched,
            "chosen": {
                k: getattr(c, k)
                for k in KNOBS
                if k in self.searched or (k == "schedule" and "vp" in self.searched)
            },
            # the layout's knobs, and the framework settings a recipe gave (knobs_from_fields)
            "knobs": (
                {k: getattr(c, k) for k in KNOBS}
                | {
                    k: getattr(self.plan.training, k)
                    for k in self.knobs_from_fields
                    if k not in KNOBS and k in type(self.plan.training).model_fields
                }
            ),
            "knobs_from": self.knobs_from,
            "knobs_from_fields": self.knobs_from_fields,
            "predicted_mfu": self.estimate.values["mfu"],
            "predicted_hfu": self.estimate.values["hfu"],
            "source": self.source,
        }


def run_case(case: dict, calibration: Calibration | None = None) -> CaseResult:
    plan: Plan = case["plan"]
    if calibration is not None:
        plan = with_calibration(plan, calibration)
    searched = list(case.get("searched") or [])
    if "cp_comm_type" not in searched and plan.parallel.cp_comm_type is None:
        # a run that does not name its CP exchange ran Megatron-Core's default, --cp-comm-type p2p
        # (megatron/training/arguments.py); only `searched` knobs are the search's to choose
        plan = plan.with_parallel(cp_comm_type="p2p")
    switches = [k for k in MOE_SWITCHES if k not in searched]
    if searched and plan.model.is_moe and switches:
        # a run that does not name a MoE switch ran its framework's default (the profile's, which
        # Training filled in): the search chooses only what `searched` names
        plan = plan.with_training(**{k: getattr(plan.training, k) for k in switches})
    searched_parallel = [k for k in searched if k not in MOE_SWITCHES]
    if searched:
        # knobs the source leaves unstated are free for the search, whatever the plan says
        unknown = [k for k in searched_parallel if k not in Parallel.model_fields]
        if unknown:
            raise PerfModelError(
                f"{case['name']}: searched knob(s) {', '.join(unknown)} unknown; "
                "use parallel fields such as micro_batch_size, vp, schedule"
            )
        plan = plan.with_parallel(**dict.fromkeys(searched_parallel))
        best = search(plan, top=1)
        if not best.results:
            raise PerfModelError(f"{case['name']}: no configuration of the stated knobs fits")
        est = best.results[0]
    else:
        est = estimate(plan, resolve_config(plan))
    predicted = est.values["step_time_s"]
    if case["measured"].get("whole_run"):
        # a figure averaged over a whole run (GPU-hours for its tokens) is met by the step with
        # what failures, checkpoints and restarts take from it (engine/run.py, the plan's run)
        if est.run is None:
            raise PerfModelError(f"{case['name']}: a whole_run figure needs training.tokens")
        predicted /= est.run.goodput
    return CaseResult(
        case["name"],
        case["table"],
        case.get("description", ""),
        measured_step_time(plan, case["measured"]),
        predicted,
        est,
        searched,
        case.get("source", ""),
        case.get("knobs_from", ""),
        plan,
        tuple(case.get("knobs_from_fields") or ("micro_batch_size", "vp")),
    )


@dataclass
class Report:
    cases: list[CaseResult]
    tables: dict[str, dict] = field(default_factory=dict)
    sp_gain: list[dict] = field(default_factory=list)
    per_layer: list[dict] = field(default_factory=list)

    @property
    def ranking(self) -> Ranking:
        """How the runs of each family (same model, hardware, sequence, precision, batch) are
        ordered against their measurements (review/ranking.py)."""
        return rank([Run(c.name, c.plan, c.measured_s, c.predicted_s) for c in self.cases])

    def to_json(self) -> dict:
        return {
            "cases": [c.to_json() for c in self.cases],
            "tables": self.tables,
            "sp_gain": self.sp_gain,
            "per_layer": self.per_layer,
            "ranking": self.ranking.to_json(),
        }


def _per_layer(case: dict) -> list[dict]:
    """Korthikanti Table 4: one layer's forward and backward (recompute included) vs measured,
    ms."""
    plan: Plan = case["plan"]
    rows = []
    for variant, m in case["per_layer_ms"].items():
        cfg = resolve_config(
            plan, sequence_parallel=m["sequence_parallel"], recompute=m["recompute"]
        )
        fwd, bwd = layer_seconds(plan, cfg)
        rows.append(
            {
                "variant": variant,
                "measured_fwd_ms": m["fwd"],
                "predicted_fwd_ms": 1e3 * fwd,
                "measured_bwd_ms": m["bwd"],
                "predicted_bwd_ms": 1e3 * bwd,
                "fwd_error_pct": 100 * (1e3 * fwd - m["fwd"]) / m["fwd"],
                "bwd_error_pct": 100 * (1e3 * bwd - m["bwd"]) / m["bwd"],
            }
        )
    return rows


def _out_of_sample(table: str, names: list[str]) -> dict:
    """The table's error with its source left out of every fit that touches it, as
    benchmarks/refresh_error_bands.py stored it (issue 28): percent, of the runs it holds."""
    stored = presets.error_bands().get("runs", {})
    runs = [stored[n] for n in names if n in stored and "oos_log_error" in stored[n]]
    if not runs:
        return {"oos_runs": None}
    errs = np.abs(np.expm1([r["oos_log_error"] for r in runs])) * 100
    return {
        "oos_runs": len(runs),
        "oos_mean_abs_error_pct": float(errs.mean()),
        "oos_max_abs_error_pct": float(errs.max()),
        "oos_refit": runs[0].get("refit", ""),
    }


def validate(names: list[str] | None = None, calibration: Calibration | None = None) -> Report:
    """Run the bundled cases (all, or those whose name contains one of ``names`` or whose table is
    one of them), calibrated with ``calibration`` where given."""
    cases = presets.validation_cases()
    if names:

        def picks(n: str, c: dict) -> bool:
            return n.lower() in c["name"] or n.lower() == str(c.get("table", "")).lower()

        unknown = [n for n in names if not any(picks(n, c) for c in cases)]
        if unknown:
            tables = sorted({str(c["table"]) for c in cases if c.get("table")})
            raise PerfModelError(
                f"no validation case or table matches {', '.join(unknown)}: give a table ("
                + ", ".join(tables)
                + ") or part of a case's name (`perfmodel validate --json` lists the cases)"
            )
        cases = [c for c in cases if any(picks(n, c) for n in names)]
    # in each table, smallest model first (as the papers print them), then full recompute before SP
    timed = sorted(
        (c for c in cases if "measured" in c),
        key=lambda c: (
            c["table"],
            c["plan"].model.num_layers * c["plan"].model.hidden_size ** 2,
            c["plan"].seq_length,
            c["name"],
        ),
    )
    results = [run_case(c, calibration) for c in timed]
    report = Report(results)
    for table in sorted({r.table for r in results}):
        signed = np.array([r.error_pct for r in results if r.table == table])
        errs = np.abs(signed)
        # the signed mean says which way the model leans (negative: predictions too fast)
        report.tables[table] = {
            "title": TABLE_TITLES.get(table, table),
            "cases": int(errs.size),
            "mean_abs_error_pct": float(errs.mean()),
            "max_abs_error_pct": float(errs.max()),
            "mean_error_pct": float(signed.mean()),
            "runs_predicted_fast": int((signed < 0).sum()),
            **_out_of_sample(table, [r.name for r in results if r.table == table]),
        }
    by_name = {r.name: r for r in results}
    for r in results:
        if r.name.endswith("-full") and r.name.replace("-full", "-sp-sel") in by_name:
            sel = by_name[r.name.replace("-full", "-sp-sel")]
            report.sp_gain.append(
                {
                    "model": r.name.removesuffix("-full"),
                    "measured_gain_pct": 100 * (r.measured_s / sel.measured_s - 1),
                    "predicted_gain_pct": 100 * (r.predicted_s / sel.predicted_s - 1),
                }
            )
    for c in cases:
        if "per_layer_ms" in c:
            report.per_layer.extend(_per_layer(c))
    return report
