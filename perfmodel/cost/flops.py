"""FLOP counts of a transformer (SPEC section 5).

Forward GEMM FLOPs per layer and micro-batch (b sequences of s tokens), whole
layer (divide by t under TP):
    QKV 2bsh(h + 2gd); scores 2bs^2h; attention x V 2bs^2h; output projection
    2bsh^2; MLP 4bshf (gelu) or 6bshf (swiglu); logits 2bshV (last stage).
Backward = 2 x forward. For GPT (f = 4h, g = a), per step of B sequences:
    model FLOPs         72 B s L h^2 (1 + s/(6h) + V/(12hL))   Korthikanti et al. 2022, eq. 7
    full recompute      96 B s L h^2 (1 + s/(6h) + V/(16hL))   Narayanan et al. 2021, eq. 3
    selective recompute 72 B s L h^2 (1 + s/(3h) + V/(12hL))   Korthikanti et al. 2022, eq. 8
The general functions below reduce to these closed forms for GPT shapes (tested).
"""

from __future__ import annotations

import numpy as np


def layer_forward_flops(b, s, h, g, d, f, swiglu: bool) -> dict[str, object]:
    """Forward GEMM FLOPs of one layer for b sequences, by GEMM (SPEC 5)."""
    bs = np.asarray(b, dtype=float) * s
    return {
        "qkv": 2.0 * bs * h * (h + 2 * g * d),
        "scores": 2.0 * bs * s * h,
        "attn_v": 2.0 * bs * s * h,
        "proj": 2.0 * bs * h * h,
        "mlp": (6.0 if swiglu else 4.0) * bs * h * f,
    }


def logits_forward_flops(b, s, h, V):
    """Output layer: 2 b s h V FLOPs forward (SPEC 5)."""
    return 2.0 * np.asarray(b, dtype=float) * s * h * V


def model_flops(B, s, L, h, g, d, f, V, swiglu: bool):
    """Model FLOPs per step: 3 x forward (forward + 2x backward), no recompute (generalizes eq. 7)."""
    fwd = sum(layer_forward_flops(B, s, h, g, d, f, swiglu).values())
    return 3.0 * (L * fwd + logits_forward_flops(B, s, h, V))


def hardware_flops(B, s, L, h, g, d, f, V, swiglu: bool, recompute: str):
    """Hardware FLOPs per step under each paper's convention (SPEC 5).

    full: model + one more forward of every layer (Narayanan eq. 3: 4x forward).
    selective: model + the attention core's forward and backward again
    (Korthikanti eq. 8 counts it so: its s/(3h) term is twice eq. 7's s/(6h)).
    none: model FLOPs.
    """
    parts = layer_forward_flops(B, s, h, g, d, f, swiglu)
    base = model_flops(B, s, L, h, g, d, f, V, swiglu)
    if recompute == "full":
        return base + L * sum(parts.values())
    if recompute == "selective":
        return base + 3.0 * L * (parts["scores"] + parts["attn_v"])
    return base


def korthikanti_model_flops(B, s, L, h, V):
    """72 B s L h^2 (1 + s/(6h) + V/(12hL)): Korthikanti et al. 2022, eq. 7. FLOPs per step."""
    return 72.0 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * h * L))


def narayanan_hardware_flops(B, s, L, h, V):
    """96 B s L h^2 (1 + s/(6h) + V/(16hL)): Narayanan et al. 2021, eq. 3 (full recompute). FLOPs per step."""
    return 96.0 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * h * L))


def korthikanti_selective_flops(B, s, L, h, V):
    """72 B s L h^2 (1 + s/(3h) + V/(12hL)): Korthikanti et al. 2022, eq. 8. FLOPs per step."""
    return 72.0 * B * s * L * h**2 * (1 + s / (3 * h) + V / (12 * h * L))
