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
are pessimistic for this stack). perfmodel/review/calibrate.py fits the factors; this module
describes them, and specs/calibrated_plan.py applies them to a plan.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import Spec

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
            "Typical |error| out of sample (the 68% split conformal quantile, or the largest"
            " where the errors are too few), by the kind of change between the configuration"
            " predicted and the runs fitted (scale, layout, model, format, gpu; 'none', a"
            " calibration run's own; 'all'): the runs' own leave-one-run-out errors, or the"
            " one-run transfer on published stacks (band_basis)."
        ),
    )
    out_of_sample_max: dict[str, float] = Field(
        default_factory=dict,
        description=(
            "Worst |error| of those (the 95% quantile, or the largest where too few), by kind of"
            " change."
        ),
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
