"""A plan with a calibration applied (specs/calibration.py says what the factors are): the
efficiencies divided by the factors, and the checks that no calibrated rate passes the GPU's
measured ceilings (specs/ceilings.py, issue 39). Above both specs/plan.py and specs/calibration.py,
so that a calibration stays data and a plan never imports what transforms it."""

from __future__ import annotations

from typing import Any

from ..errors import PerfModelError
from .calibration import GROUPS, MICRO_FACTORS, Calibration
from .hardware import GPU
from .plan import Plan
from .precision import FP4

TOL = 1e-3  # the rounding of factors in CAL.yaml (4 decimals)


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


def rates(plan: Plan, gpu: GPU) -> list[tuple[str, str, float, float, str]]:
    """(elementary factor, what, calibrated rate, ceiling, source) of every rate a calibrated
    ``plan`` forms on its GPU: the GEMMs of its format, attention (16-bit), HBM and its links."""
    dtype = plan.training.dtype
    fp8 = dtype not in ("bf16", "fp16", "fp32", "tf32")
    name = ("gemm_fp4" if dtype in FP4 else "gemm_fp8") if fp8 else "gemm_bf16"
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
    named = [k for k in (cal.factors if cal else {}) if k == fac or fac in GROUPS.get(k, ())]
    said = ", ".join(f"{k} x{cal.factors[k]:.3f}" for k in named) or f"{fac} x{factors[fac]:.3f}"
    return (
        f"{said}: {what} would run at {_num(rate / div)} {unit}, past the ceiling of"
        f" {_num(ceiling / div)} {unit} ({source or 'an efficiency of 1'}), {rate / ceiling:.2f}x"
        " what the hardware has been measured to reach"
    )


def _num(x: float) -> str:
    """794.5, 21,250, 0.05: a rate as people read it."""
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"
