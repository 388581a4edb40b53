"""How sure a result is: the model's error on the published runs nearest in kind, as a band on a
step time.

`perfmodel validate` measures the error per table of runs; benchmarks/refresh_error_bands.py stores
it in configs/error_bands.yaml with what the runs were (framework, GPU family, dtype, dense or MoE).
A plan is matched to the table that shares the most of those, in that order of weight; a plan that
shares neither the framework nor the GPU of any table gets the widest band known, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.specs import Plan


@dataclass(frozen=True)
class Band:
    """Typical (mean) and worst (max) relative error, and the runs they come from."""

    mean: float
    max: float
    basis: str

    def to_json(self) -> dict[str, Any]:
        return {"mean_abs_error": self.mean, "max_abs_error": self.max, "basis": self.basis}


def gpu_family(name: str) -> str:
    low = name.lower()
    return next((f for f in ("a100", "h100", "h200", "b200", "v100", "mi300") if f in low), low)


def kind(plan: Plan) -> dict[str, Any]:
    """What a plan's runs are, in the terms the error table is keyed by."""
    return {
        "framework": plan.training.framework,
        "gpu": gpu_family(plan.system.gpu.name),
        "dtype": plan.training.dtype,
        "moe": plan.model.is_moe,
    }


def bands_from_report(report: Any) -> dict[str, Any]:
    """{table: {kind of its runs, mean and max |error| (fractions), runs}} from a validate
    Report."""
    out = {}
    for table, t in report.tables.items():
        case = next(c for c in report.cases if c.table == table)
        out[table] = {
            **kind(case.plan),
            "mean_abs_error": round(t["mean_abs_error_pct"] / 100, 4),
            "max_abs_error": round(t["max_abs_error_pct"] / 100, 4),
            "runs": t["cases"],
        }
    return out


WEIGHTS = {"framework": 4, "gpu": 2, "moe": 1.5, "dtype": 1}


def band(plan: Plan, bands: dict[str, Any], zero_stage: int = 0) -> Band:
    """The error band of the validation table nearest in kind to ``plan``. A configuration that
    shards parameters (ZeRO-3 / FSDP, ``zero_stage`` 3) spends its step on gathers no table without
    such runs measured: it gets the widest band known, and says so."""
    k = kind(plan)
    if zero_stage >= 3 and not any(t.get("zero3") for t in bands.values()):
        widest = max(bands.values(), key=lambda t: t["max_abs_error"])
        return Band(
            widest["mean_abs_error"],
            widest["max_abs_error"],
            "ZeRO-3: no published run that shards parameters is validated: the widest band of"
            " any table",
        )
    scored = [
        (sum(w for f, w in WEIGHTS.items() if t.get(f) == k[f]), name, t)
        for name, t in bands.items()
        if t.get("framework") == k["framework"] or t.get("gpu") == k["gpu"]
    ]
    if not scored:  # neither the framework nor the GPU of any validated run
        widest = max(bands.values(), key=lambda t: t["max_abs_error"])
        return Band(
            widest["mean_abs_error"],
            widest["max_abs_error"],
            "no published run of this kind: the widest band of any table",
        )
    _, name, t = max(scored, key=lambda x: (x[0], x[2]["max_abs_error"]))
    shared = ", ".join(
        ("MoE" if k[f] else "dense") if f == "moe" else f"{f} {k[f]}"
        for f in WEIGHTS
        if t.get(f) == k[f]
    )
    return Band(
        t["mean_abs_error"], t["max_abs_error"], f"{name} ({t['runs']} runs; same {shared})"
    )
