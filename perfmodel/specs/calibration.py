"""A calibration: factors fitted on a team's own measured runs, and how a plan takes them.

Each factor multiplies the time of one class of work, by dividing the achieved efficiency the
model reads for it (specs/hardware.py GPU and Link fields), so every formula, the search and the
pipeline simulator see the calibrated rates with no second code path:

    gemm_bf16   GPU.gemm_efficiency                 (BF16/FP16 GEMMs; time x factor)
    gemm_fp8    GPU.fp8_gemm_efficiency             (FP8 and MXFP8 GEMMs)
    gemm_fp4    GPU.fp4_gemm_efficiency             (NVFP4 GEMMs)
    attention   GPU.attention_efficiency, fa2_attention_efficiency, unfused_attention_efficiency
    memory      GPU.hbm_efficiency                  (elementwise, norms, optimizer: HBM-bound)
    comm        Link.efficiency of the intra- and inter-node links (bandwidth term of every
                collective, Thakur et al. 2005 alpha-beta; latency untouched)
    comm_intra  Link.efficiency of the intra-node link alone (on top of comm; nccl-tests)
    comm_inter  Link.efficiency of the inter-node link alone (on top of comm; nccl-tests)
    latency_intra, latency_inter
                Link.latency_s of that link (alpha; time x factor; nccl-tests' small messages)
    gemm_k      GPU.gemm_k_overhead (a tile's fixed cost in K elements; a GEMM sweep's shapes)
    compute     all of gemm_*, attention and memory at once (what one step time fits)
    rate        compute and comm at once (fitted only when asked for by name)
    overhead_s  seconds added to Training.step_overhead_s (host time per step; not a factor)

A factor above 1 says the stack is slower than the preset; below 1, faster, and a calibrated
efficiency may then exceed 1: it is kept as the effective rate it is (the preset's other figures
are pessimistic for this stack). perfmodel/review/calibrate.py fits the factors; this module only
applies them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from .base import Spec

if TYPE_CHECKING:
    from .plan import Plan

FACTORS = (
    "rate",
    "compute",
    "gemm_bf16",
    "gemm_fp8",
    "gemm_fp4",
    "attention",
    "memory",
    "comm",
    "comm_intra",
    "comm_inter",
    "latency_intra",
    "latency_inter",
    "gemm_k",
    "overhead_s",
)
# what microbenchmarks fit (review/calibrate_micro.py): per link tier, and the GEMM surface
MICRO_FACTORS = (
    "gemm_bf16",
    "gemm_fp8",
    "gemm_fp4",
    "gemm_k",
    "comm_intra",
    "comm_inter",
    "latency_intra",
    "latency_inter",
)
# what a group factor stands for
GROUPS = {
    "rate": ("gemm_bf16", "gemm_fp8", "gemm_fp4", "attention", "memory", "comm"),
    "compute": ("gemm_bf16", "gemm_fp8", "gemm_fp4", "attention", "memory"),
}
CHANGES = ("scale", "layout", "model", "format")
CAL_VERSION = 1  # CAL.yaml's format (inputs/calibration_checks.py refuses a newer one)


class CalibrationRun(Spec):
    """One measured run a calibration was fitted on, and what the calibrated model says of it."""

    name: str = Field(description="The run's plan, as RUNS.yaml names it.")
    measured_step_time_s: float = Field(gt=0, description="Measured seconds per step.")
    predicted_step_time_s: float = Field(gt=0, description="Uncalibrated prediction, seconds.")
    calibrated_step_time_s: float = Field(gt=0, description="Calibrated prediction, seconds.")
    measured_peak_memory_gb: float | None = Field(
        None, description="Measured peak memory of one GPU, GB (1e9 bytes), where given."
    )
    predicted_peak_memory_gb: float | None = Field(
        None, description="The model's peak memory of one GPU, GB (not calibrated)."
    )
    residual: float = Field(description="log(calibrated / measured) after the fit.")
    kind: dict[str, Any] = Field(
        default_factory=dict,
        description="What the run was: num_gpus, layout, model size, format (to tell changes).",
    )


class Calibration(Spec):
    """What `perfmodel calibrate` writes (CAL.yaml), and what a plan's `calibration:` names."""

    version: int = Field(CAL_VERSION, description="The CAL.yaml format's version.")
    gpu: str = Field(
        "", description="The GPU the runs ran on (a plan on another GPU says it is applied there)."
    )
    factors: dict[str, float] = Field(
        description="Fitted factors by name (module docstring): time multipliers, overhead_s in s."
    )
    fitted_from: str = Field(description="step_times or trace: what the factors were fitted on.")
    runs: list[CalibrationRun] = Field(description="The runs fitted on, with their residuals.")
    not_fitted: dict[str, str] = Field(
        default_factory=dict, description="Factors the data could not identify, and why."
    )
    out_of_sample: dict[str, float] = Field(
        default_factory=dict,
        description=(
            "Mean |error| of leave-one-run-out predictions, by the kind of change between the"
            " run left out and the runs fitted (scale, layout, model, format; 'all')."
        ),
    )
    out_of_sample_max: dict[str, float] = Field(
        default_factory=dict, description="Largest |error| of those, by kind of change."
    )
    band_basis: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Where each out_of_sample figure comes from: leave-one-run-out (the runs' own), or"
            " one-run transfer (a calibration on one run of a published stack, predicting that"
            " stack's other runs: configs/calibration_bands.yaml), for a change the runs cannot"
            " leave out."
        ),
    )
    trace: dict[str, Any] = Field(
        default_factory=dict, description="Per kernel class: measured and modelled seconds."
    )
    microbenchmarks: dict[str, Any] = Field(
        default_factory=dict,
        description="Per nccl-tests file and GEMM format: what was measured and what was fitted.",
    )
    notes: list[str] = Field(default_factory=list, description="What the fit assumed.")
    source: str = Field("", description="The file the calibration was read from.")

    def expanded(self) -> dict[str, float]:
        """Every elementary factor (gemm_bf16 ... comm, overhead_s) the fitted ones imply."""
        out = {f: 1.0 for f in FACTORS if f not in GROUPS and f != "overhead_s"}
        out["overhead_s"] = 0.0
        for name, value in self.factors.items():
            for f in GROUPS.get(name, (name,)):
                out[f] = out[f] + value if f == "overhead_s" else out[f] * value
        return out

    def summary(self) -> str:
        """One line: which factors, from how many runs."""
        shown = ", ".join(
            f"{k} {v * 1e3:.1f} ms" if k == "overhead_s" else f"{k} x{v:.3f}"
            for k, v in self.factors.items()
        )
        n = len(self.runs)
        where = f" ({self.source})" if self.source else ""
        if not n and self.microbenchmarks:
            k = len(self.microbenchmarks)
            return (
                f"calibrated{where}: {shown}, fitted on {k} microbenchmark{'s' if k != 1 else ''}"
            )
        return f"calibrated{where}: {shown}, fitted on {n} run{'s' if n != 1 else ''}"


def apply_factors(plan: Plan, factors: dict[str, float]) -> Plan:
    """``plan`` with the efficiencies divided by the factors (time multipliers; ``factors`` holds
    elementary names, Calibration.expanded). Pydantic's bounds on efficiencies (at most 1) are not
    re-checked: a calibrated efficiency is an effective rate, which may exceed the data sheet's
    share when the preset's other figures are pessimistic for this stack."""
    gpu = plan.system.gpu
    f = {k: float(factors.get(k, 1.0)) for k in (*GROUPS["rate"], *MICRO_FACTORS)}
    fp8 = gpu.fp8_gemm_efficiency or gpu.gemm_efficiency
    fp4 = gpu.fp4_gemm_efficiency or fp8
    fa2 = gpu.fa2_attention_efficiency
    # a format without its own figure keeps falling back to the one it shares, where the factors
    # agree (so the outputs still say the figure is carried over)
    same8 = gpu.fp8_gemm_efficiency is None and f["gemm_fp8"] == f["gemm_bf16"]
    same4 = gpu.fp4_gemm_efficiency is None and f["gemm_fp4"] == f["gemm_fp8"]
    new_gpu = gpu.model_copy(
        update={
            "gemm_efficiency": gpu.gemm_efficiency / f["gemm_bf16"],
            "fp8_gemm_efficiency": None if same8 else fp8 / f["gemm_fp8"],
            "fp4_gemm_efficiency": None if same4 and same8 else fp4 / f["gemm_fp4"],
            "attention_efficiency": gpu.attention_efficiency / f["attention"],
            "fa2_attention_efficiency": None if fa2 is None else fa2 / f["attention"],
            "unfused_attention_efficiency": gpu.unfused_attention_efficiency / f["attention"],
            "hbm_efficiency": gpu.hbm_efficiency / f["memory"],
            "gemm_k_overhead": gpu.gemm_k_overhead * f["gemm_k"],
        }
    )
    s = plan.system
    tiers = {"intra_node_link": "intra", "inter_node_link": "inter"}
    links = {
        name: (
            getattr(s, name).model_copy(
                update={
                    "efficiency": getattr(s, name).efficiency / (f["comm"] * f[f"comm_{tier}"]),
                    "latency_s": getattr(s, name).latency_s * f[f"latency_{tier}"],
                }
            )
        )
        for name, tier in tiers.items()
    }
    system = s.model_copy(update={"gpu": new_gpu, **links})
    tr = plan.training
    training = tr.model_copy(
        update={"step_overhead_s": tr.step_overhead_s + float(factors.get("overhead_s", 0.0))}
    )
    return plan.model_copy(update={"system": system, "training": training})


def with_calibration(plan: Plan, cal: Calibration) -> Plan:
    """``plan`` calibrated: its efficiencies divided by ``cal``'s factors, ``cal`` kept on it (so
    outputs say so and the error band is the calibration's). A plan already calibrated is refused:
    two calibrations would compound."""
    from ..errors import PerfModelError
    from .ceilings import past, say_past

    if plan.calibration is not None:
        raise PerfModelError(
            f"calibration: the plan is already calibrated ({plan.calibration.source or 'its own'}"
            " calibration: key); give one calibration, in the plan or as --calibration"
        )
    factors = cal.expanded()
    calibrated = apply_factors(plan, factors)
    hit = past(calibrated, factors)
    if hit is not None:  # no calibration runs the hardware faster than it goes (issue 39)
        raise PerfModelError(
            f"calibration{f' {cal.source}' if cal.source else ''}: {say_past(hit, factors, cal)}"
            f" on the {plan.system.gpu.name}; refit with `perfmodel calibrate`"
        )
    read_as = plan.read_as
    other = other_gpu(plan, cal)
    if other and other not in read_as:
        read_as = [*read_as, other]
    return calibrated.model_copy(update={"calibration": cal, "read_as": read_as})


def other_gpu(plan: Plan, cal: Calibration) -> str | None:
    """The assumption a calibration fitted on another GPU makes (None on its own GPU or where it
    does not say which): its factors are that GPU's kernels' and links'."""
    gpu = plan.system.gpu.name
    if not cal.gpu or cal.gpu == gpu:
        return None
    where = f" ({cal.source})" if cal.source else ""
    return (
        f"calibration{where} fitted on {cal.gpu}, applied to {gpu} as it is: its factors are of"
        f" the {cal.gpu} runs' kernels and links"
    )


def without_calibration(plan: Plan) -> Plan:
    """``plan`` as the presets have it: its calibration's factors undone (to change a field, a GPU
    or the framework, and calibrate the changed plan again)."""
    cal = plan.calibration
    if cal is None:
        return plan
    f = cal.expanded()
    inverse = {k: -v if k == "overhead_s" else 1.0 / v for k, v in f.items()}
    read_as = [n for n in plan.read_as if n != other_gpu(plan, cal)]
    return apply_factors(plan, inverse).model_copy(update={"calibration": None, "read_as": read_as})
