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
    families = (
        "a100",
        "h100",
        "h200",
        "h800",
        "gb200",
        "gb300",
        "b200",
        "b300",
        "v100",
        "mi300",
        "mi325",
        "mi350",
        "mi355",
    )
    return next((f for f in families if f in low), low)


# GPU generations: the tensor cores, HBM and NVLink a family shares with its siblings
ARCHITECTURES = {
    "v100": "volta",
    "a100": "ampere",
    "h100": "hopper",
    "h200": "hopper",
    "h800": "hopper",
    "b200": "blackwell",
    "b300": "blackwell",
    "gb200": "blackwell",
    "gb300": "blackwell",
    "mi300": "cdna3",
    "mi325": "cdna3",
    "mi350": "cdna4",
    "mi355": "cdna4",
}


def kind(plan: Plan) -> dict[str, Any]:
    """What a plan's runs are, in the terms the error table is keyed by."""
    gpu = gpu_family(plan.system.gpu.name)
    return {
        "framework": plan.training.framework,
        "gpu": gpu,
        "arch": ARCHITECTURES.get(gpu, gpu),
        "dtype": plan.training.dtype,
        "moe": plan.model.is_moe,
    }


def sharded_share(values: dict[str, Any]) -> float:
    """The share of a step its exposed FSDP / ZeRO-3 traffic takes."""
    return float(values.get("zero_comm", 0.0)) / max(float(values["step_time_s"]), 1e-30)


def bands_from_report(report: Any) -> dict[str, Any]:
    """{table: {kind of its runs, whether they shard parameters and the largest share of a step
    their sharded traffic took, mean and max |error| (fractions), runs}} from a validate Report."""
    out = {}
    for table, t in report.tables.items():
        cases = [c for c in report.cases if c.table == table]
        kinds = [kind(c.plan) for c in cases]
        # a table of mixed runs (llm-foundry: A100 and H100, BF16 and FP8) is keyed by what most
        # of its runs were
        out[table] = {
            f: max(sorted({k[f] for k in kinds}, key=str), key=[k[f] for k in kinds].count)
            for f in kinds[0]
        }
        out[table] |= {
            "sharded": all(c.estimate.config.zero_stage >= 2 for c in cases),
            # a table with some sharded runs (Megatron-FSDP among Megatron-Bridge's) speaks for
            # sharded steps too
            # (as published: not where the search chose the ZeRO stage)
            "sharded_some": any(
                c.estimate.config.zero_stage >= 2 and "zero_stage" not in c.searched for c in cases
            ),
            "sharded_share_max": round(max(sharded_share(c.estimate.values) for c in cases), 4),
            "mean_abs_error": round(t["mean_abs_error_pct"] / 100, 4),
            "max_abs_error": round(t["max_abs_error_pct"] / 100, 4),
            "runs": t["cases"],
        }
    return out


WEIGHTS = {"framework": 4, "moe": 3, "gpu": 2, "arch": 1.5, "dtype": 1}


def _score(table: dict[str, Any], k: dict[str, Any]) -> float:
    """How near a table's runs are to a plan: the weights of what they share, the GPU's
    generation counting only where the GPU itself differs (a B200 plan is nearer GB300 runs than
    H100 ones, an A100 plan no nearer A100 runs for it)."""
    same = {f for f in WEIGHTS if table.get(f) == k[f]}
    if "gpu" in same:
        same.discard("arch")
    return sum(WEIGHTS[f] for f in same)


# a sharded step may spend this much more of itself in FSDP/ZeRO traffic than any validated run
# did and still take those runs' band
SHARE_MARGIN = 0.05


def _widest(bands: dict[str, Any], why: str) -> Band:
    widest = max(bands.values(), key=lambda t: t["max_abs_error"])
    return Band(widest["mean_abs_error"], widest["max_abs_error"], why)


def band(plan: Plan, bands: dict[str, Any], zero_stage: int = 0, share: float = 0.0) -> Band:
    """The error band of the validation table nearest in kind to ``plan``, among the tables whose
    runs shard parameters as this configuration does (ZeRO-2/3, FSDP) or do not: a sharded step
    takes the band of the FSDP and ZeRO runs. One that spends more of its step (``share``) in
    FSDP/ZeRO traffic than any of those runs did is outside what was validated: the widest band,
    and it says so."""
    k = kind(plan)
    sharded = zero_stage >= 2

    def speaks_for(t: dict[str, Any]) -> bool:
        if not sharded:
            return not t.get("sharded")
        # a table of some sharded runs among others speaks for sharded steps of its own
        # framework on its own GPU generation only (Megatron-FSDP in Megatron-Bridge's tables)
        mixed = t.get("sharded_some") and t.get("framework") == k["framework"]
        return bool(t.get("sharded") or (mixed and t.get("arch") == k["arch"]))

    pool = {n: t for n, t in bands.items() if speaks_for(t)}
    if sharded and not pool:
        return _widest(
            bands,
            "ZeRO-2/3: no published run that shards parameters is validated: the widest band of"
            " any table",
        )
    pool = pool or bands
    scored = [
        (_score(t, k), name, t)
        for name, t in pool.items()
        if t.get("framework") == k["framework"] or t.get("gpu") == k["gpu"]
    ]
    if not scored:  # neither the framework nor the GPU of any validated run
        return _widest(bands, "no published run of this kind: the widest band of any table")
    _, name, t = max(scored, key=lambda x: (x[0], x[2]["max_abs_error"]))
    if sharded:
        most = max(x.get("sharded_share_max", 0.0) for x in pool.values())
        if share > most + SHARE_MARGIN:
            return _widest(
                bands,
                f"unvalidated: {100 * share:.0f}% of the step is FSDP/ZeRO traffic, more than"
                f" the {100 * most:.0f}% of any validated run: the widest band of any table",
            )
    shared = ", ".join(
        ("MoE" if k[f] else "dense") if f == "moe" else f"{f} {k[f]}"
        for f in WEIGHTS
        if t.get(f) == k[f] and not (f == "arch" and t.get("gpu") == k["gpu"])
    )
    return Band(
        t["mean_abs_error"],
        t["max_abs_error"],
        f"{name} ({t['runs']} run{'s' if t['runs'] != 1 else ''}; same {shared})",
    )


def of_estimate(plan: Plan, bands: dict[str, Any], est: Any) -> Band:
    """The band of one estimate (engine/estimate.Estimate): its ZeRO stage and sharded share."""
    published = band(plan, bands, est.config.zero_stage, sharded_share(est.values))
    if plan.calibration is not None:  # the calibration's out-of-sample error (engine/calibrated)
        from perfmodel.engine.calibrated import band as calibrated_band

        return calibrated_band(plan, est.config, published)
    return published
