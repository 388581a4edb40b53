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

from .transformer import LayerShape, Options, decoder_layer, lm_head


def layer_forward_flops(shape: LayerShape, b, s) -> dict[str, object]:
    """Forward FLOPs of one whole layer (before TP) for b sequences, by GEMM, read off the layer's
    description (cost/transformer.decoder_layer; SPEC 5)."""
    block = decoder_layer(shape, Options(), b, s, 1, False)
    return {g.name: g.flops for g in block.gemms()}


def logits_forward_flops(shape: LayerShape, b, s):
    """Output layer: 2 b s h V FLOPs forward (SPEC 5), read off the LM head's description."""
    return lm_head(shape, Options(), b, s, 1, False).matmul_flops()


def model_flops(shape: LayerShape, B, s, L):
    """Model FLOPs per step: 3 x forward (forward + 2x backward), no recompute (generalizes eq. 7)."""
    fwd = decoder_layer(shape, Options(), B, s, 1, False).matmul_flops()
    return 3.0 * (L * fwd + logits_forward_flops(shape, B, s))


def hardware_flops(shape: LayerShape, B, s, L, recompute: str):
    """Hardware FLOPs per step under each paper's convention (SPEC 5).

    full: model + one more forward of every layer (Narayanan eq. 3: 4x forward).
    selective: model + the attention core's forward and backward again
    (Korthikanti eq. 8 counts it so: its s/(3h) term is twice eq. 7's s/(6h)).
    none: model FLOPs.
    """
    layer = decoder_layer(shape, Options(), B, s, 1, False)
    base = model_flops(shape, B, s, L)
    if recompute == "full":
        return base + L * layer.matmul_flops()
    if recompute == "selective":
        return base + 3.0 * L * layer.matmul_flops(attention_core_only=True)
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
