"""Throughput figures of a step (SPEC 5): tokens per second, model and hardware TFLOP/s per GPU,
MFU and HFU, for arrays of configurations and their step times (engine/evaluate.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from perfmodel.cost import Array, Num
from perfmodel.cost import flops as fl
from perfmodel.engine.blocks import Setting
from perfmodel.engine.knobs import Knobs


def throughput(st: Setting, k: Knobs, step: Array, batch: int | Array) -> dict[str, Any]:
    """Tokens per second, model and hardware TFLOP/s per GPU, MFU and HFU (SPEC 5), against the peak
    of the precision's MFU dtype, for ``batch`` sequences a step (one for all rows, or each row's).
    FLOPs are read off the layer descriptions (cost/flops.py), with the k active experts of each
    MoE layer."""
    plan = st.plan
    s, n = plan.seq_length, plan.system.num_gpus
    flops = _step_flops(st, batch)
    rc = k.recompute
    model_fl = flops("none")
    hw_fl = np.where(rc == 2, flops("full"), np.where(rc == 1, flops("selective"), model_fl))
    peak = plan.system.gpu.peak(st.precision.mfu_peak)
    out = {"tokens_per_s": batch * s / step}
    out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / n
    out["model_tflops_per_gpu"] = model_fl / step / n / 1e12
    out["hardware_tflops_per_gpu"] = hw_fl / step / n / 1e12
    out["mfu"] = out["model_tflops_per_gpu"] * 1e12 / peak
    out["hfu"] = out["hardware_tflops_per_gpu"] * 1e12 / peak
    out["mfu_peak_flops_per_s"] = np.full(np.shape(step), float(peak))
    return out


def _step_flops(st: Setting, batch: int | Array) -> Callable[[str], Num]:
    """FLOPs a step under each recompute convention (cost/flops.hardware_flops; "none": the model
    FLOPs) of ``batch`` sequences. Rows' batches are each priced as the one plan's integer batch
    is, so that a pooled row's figures are the plan's to the bit (engine/pooled.py)."""
    sh, s = st.shape, st.plan.seq_length
    depth = fl.Depth(st.plan.model.num_layers, st.moe_layers, st.mtp, bool(st.mtp_kind))

    def one(B: int, recompute: str) -> Num:
        if recompute == "none":
            return fl.model_flops(sh, B, s, depth)
        return fl.hardware_flops(sh, B, s, depth, recompute)

    if np.ndim(batch) == 0:
        return lambda recompute: one(int(batch), recompute)
    values, at = np.unique(batch, return_inverse=True)

    def per_row(recompute: str) -> Num:
        return np.asarray([float(one(int(v), recompute)) for v in values])[at.ravel()]

    return per_row
