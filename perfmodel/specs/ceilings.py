"""Physical ceilings of a GPU: the best published measured rates, each with its source (issue 39).

A ceiling is what the part has been measured to reach at best, not what a run reaches: the
maximum achievable matmul rate by format (Bekman, ml-engineering, "Maximum Achievable Matmul
FLOPS": the best torch.matmul over a search of shapes), HBM bandwidth, and NCCL/RCCL bus bandwidth
of an all-reduce and an all-to-all within a node and across nodes. No prediction, calibrated or
not, runs a kernel or a collective faster (cost/roofline.kernel_time and engine/mesh.py clamp the
rates they form), and `perfmodel calibrate` refuses factors or measurements that would
(review/calibrate_ceilings.py). The figures live in configs/hardware/ceilings.yaml beside the GPU
presets, read into GPU.ceilings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, Field

from ..units import QuantityError, parse_quantity
from .base import Spec

if TYPE_CHECKING:
    from .hardware import GPU
    from .plan import Plan

# formats that run on the tensor cores of another (fp16 on bf16's; MXFP8 on FP8's: the MX scales
# are applied in the epilogue)
SAME_RATE = {"fp16": "bf16", "mxfp8": "fp8"}
TOL = 1e-3  # the rounding of factors in CAL.yaml (4 decimals)
LINK_CEILINGS = ("all_reduce_intra", "all_reduce_inter", "all_to_all_intra", "all_to_all_inter")


def _rate(v: Any) -> Any:
    """A FLOP/s (794.5 TFLOPS) or bytes/s (480 GB/s) quantity, or a number in SI units."""
    if not isinstance(v, str):
        return v
    try:
        return parse_quantity(v, "flops_per_s")
    except QuantityError:
        return parse_quantity(v, "bytes_per_s")


Rate = Annotated[float, BeforeValidator(_rate), Field(gt=0, le=1e21)]


class Ceiling(Spec):
    """One measured best rate, in SI units (FLOP/s or bytes/s), and where it comes from."""

    rate: Rate = Field(description="The best measured rate, FLOP/s or bytes/s.")
    over: Rate | None = Field(
        None,
        description=(
            "For a collective: the data-sheet bandwidth of the link it was measured over, bytes/s"
            " (per GPU, unidirectional; across nodes a node's NICs per GPU of the ring), so that"
            " rate / over is the ceiling's share of any link of that tier."
        ),
    )
    source: str = Field(min_length=1, description="Where the figure comes from, or how derived.")

    @property
    def fraction(self) -> float | None:
        """rate / over: the most of its link's data-sheet bandwidth the collective reaches."""
        return None if self.over is None else self.rate / self.over


class Ceilings(Spec):
    """A GPU's ceilings (module docstring)."""

    gemm: dict[str, Ceiling] = Field(
        description="Maximum achievable dense matmul FLOP/s by format (bf16, fp8, nvfp4, ...)."
    )
    hbm: Ceiling = Field(description="HBM bandwidth a streaming kernel reaches at best, bytes/s.")
    all_reduce_intra: Ceiling | None = Field(
        None, description="All-reduce bus bandwidth inside the NVLink domain, bytes/s."
    )
    all_reduce_inter: Ceiling | None = Field(
        None, description="All-reduce bus bandwidth of a ring across nodes, bytes/s."
    )
    all_to_all_intra: Ceiling | None = Field(
        None, description="Expert all-to-all throughput inside a node, bytes/s per GPU."
    )
    all_to_all_inter: Ceiling | None = Field(
        None, description="Expert all-to-all throughput across nodes, bytes/s per GPU."
    )

    def gemm_rate(self, dtype: str) -> Ceiling | None:
        """The matmul ceiling of ``dtype`` (fp16 as bf16, MXFP8 as FP8), or None where none is
        known (fp32, tf32: the model runs no GEMM of theirs in a training step it checks)."""
        return self.gemm.get(dtype) or self.gemm.get(SAME_RATE.get(dtype, ""))

    def link_fraction(self, tier: str) -> float | None:
        """The most of a link's data-sheet bandwidth any collective of ``tier`` (intra, inter)
        reaches: the largest rate / over of its all-reduce and all-to-all ceilings (NVLink SHARP
        reductions in the switch let an all-reduce's bus bandwidth pass the link's own rate)."""
        found = [
            c.fraction
            for name in (f"all_reduce_{tier}", f"all_to_all_{tier}")
            if (c := getattr(self, name)) is not None and c.fraction is not None
        ]
        return max(found) if found else None


def rates(plan: Plan, gpu: GPU) -> list[tuple[str, str, float, float, str]]:
    """(elementary factor, what, calibrated rate, ceiling, source) of every rate a calibrated
    ``plan`` forms on its GPU: the GEMMs of its format, attention (16-bit), HBM and its links."""
    dtype = plan.training.dtype
    fp8 = dtype not in ("bf16", "fp16", "fp32", "tf32")
    name = {"nvfp4": "gemm_fp4"}.get(dtype, "gemm_fp8") if fp8 else "gemm_bf16"
    eff = gpu.low_precision_efficiency(dtype) if fp8 else gpu.gemm_efficiency
    clock = gpu.sustained_clock
    out = []
    for fac, what, d, e in (
        (name, f"{dtype.upper()} GEMMs", dtype, eff),
        ("attention", "attention", "bf16" if fp8 else dtype, gpu.attention_fraction("fused")),
    ):
        c = gpu.ceilings.gemm_rate(d) if gpu.ceilings else None
        peak = gpu.peak(d)
        out.append((fac, what, peak * clock * e, c.rate if c else peak, c.source if c else "peak"))
    bw = gpu.hbm_bandwidth_bytes_per_s
    hbm = gpu.ceilings.hbm if gpu.ceilings else None
    out.append(
        (
            "memory",
            "HBM",
            bw * gpu.hbm_efficiency,
            hbm.rate if hbm else bw,
            hbm.source if hbm else "",
        )
    )
    s = plan.system
    for tier, link in (("intra", s.intra_node_link), ("inter", s.inter_node_link)):
        share = (gpu.ceilings.link_fraction(tier) if gpu.ceilings else None) or 1.0
        b = link.bandwidth_bytes_per_s
        out.append(("comm", f"the {link.name}", b * link.efficiency, b * share, f"{tier}-node"))
    return out


def past(plan: Plan, factors: dict[str, float]) -> tuple[str, str, float, float, str] | None:
    """The first rate of ``plan`` (calibrated by ``factors``, elementary names) that a factor below
    1 speeds past its ceiling, as rates() gives it; None where none does. A rate the preset already
    puts past a ceiling is clamped where it is formed (cost/roofline.kernel_time,
    engine/mesh.link_rate), not refused."""
    for row in rates(plan, plan.system.gpu):
        fac, _what, rate, ceiling, _source = row
        if factors.get(fac, 1.0) < 1.0 and rate > ceiling * (1 + TOL):
            return row
    return None


def say_past(
    row: tuple[str, str, float, float, str], factors: dict[str, float], cal: Any = None
) -> str:
    """What past() found, in words: the factor, the rate it makes and the ceiling it passes."""
    fac, what, rate, ceiling, source = row
    unit, div = ("TFLOP/s", 1e12) if fac.startswith(("gemm", "attention")) else ("GB/s", 1e9)
    named = [k for k in (cal.factors if cal else {}) if k == fac or fac in _groups().get(k, ())]
    said = ", ".join(f"{k} x{cal.factors[k]:.3f}" for k in named) or f"{fac} x{factors[fac]:.3f}"
    return (
        f"{said}: {what} would run at {_num(rate / div)} {unit}, past the ceiling of"
        f" {_num(ceiling / div)} {unit} ({source or 'an efficiency of 1'}), {rate / ceiling:.2f}x"
        " what the hardware has been measured to reach"
    )


def _groups() -> dict[str, tuple[str, ...]]:
    from .calibration import GROUPS

    return GROUPS


def _num(x: float) -> str:
    """794.5, 21,250, 0.05: a rate as people read it."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"
