"""Physical ceilings of a GPU: the best published measured rates, each with its source (issue 39).

A ceiling is what the part has been measured to reach at best, not what a run reaches: the
maximum achievable matmul rate by format (Bekman, ml-engineering, "Maximum Achievable Matmul
FLOPS": the best torch.matmul over a search of shapes), HBM bandwidth, and NCCL/RCCL bus bandwidth
of an all-reduce and an all-to-all within a node and across nodes. No prediction, calibrated or
not, runs a kernel or a collective faster (cost/roofline.kernel_time and engine/mesh.py clamp the
rates they form), and `perfmodel calibrate` refuses factors or measurements that would
(review/calibrate_ceilings.py, specs/calibrated_plan.py). The figures live in
configs/hardware/ceilings.yaml beside the GPU presets, read into GPU.ceilings.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from ..units import QuantityError, parse_quantity
from .base import Spec

# formats that run on the tensor cores of another (fp16 on bf16's; MXFP8 on FP8's: the MX scales
# are applied in the epilogue)
SAME_RATE = {"fp16": "bf16", "mxfp8": "fp8"}
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
