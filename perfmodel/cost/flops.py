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

from dataclasses import dataclass
from functools import lru_cache

from perfmodel.cost import Num

from .transformer import LayerShape, Options, decoder_layer, lm_head


def layer_forward_flops(shape: LayerShape, b: Num, s: int, moe: bool = False) -> dict[str, Num]:
    """Forward FLOPs of one whole layer (before any parallelism) for b sequences, by GEMM, read off
    the layer's description (cost/transformer.decoder_layer; SPEC 5). A MoE layer counts the k
    experts each token is routed to, the router and the shared experts: the active FLOPs."""
    block = decoder_layer(shape, Options(), b, s, 1, False, moe=moe)
    out: dict[str, Num] = {}
    for g in block.gemms():
        out[g.name] = out.get(g.name, 0.0) + g.flops
    return out


def logits_forward_flops(shape: LayerShape, b: Num, s: int) -> Num:
    """Output layer: 2 b s h V FLOPs forward (SPEC 5), read off the LM head's description (linear in
    b, described once per model)."""
    return b * _logits_per_sequence(shape, s)


@lru_cache(maxsize=256)
def _logits_per_sequence(shape: LayerShape, s: int) -> float:
    return float(lm_head(shape, Options(), 1, s, 1, False).matmul_flops())


@lru_cache(maxsize=256)
def _per_sequence(shape: LayerShape, s: int, moe: bool, core_only: bool = False) -> float:
    """Forward matmul FLOPs of one layer for one sequence of s tokens. Every GEMM's rows (and the
    attention core's batch) are b s or b heads, so the FLOPs of b sequences are b times these: the
    layer is described once per model, not once per configuration."""
    block = decoder_layer(shape, Options(), 1, s, 1, False, moe=moe)
    return float(block.matmul_flops(attention_core_only=core_only))


def _forward(shape: LayerShape, B: Num, s: int, L: Num, moe_layers: int, core_only: bool) -> Num:
    """Forward matmul FLOPs of all L layers for B sequences, moe_layers of them MoE layers."""
    fwd = (L - moe_layers) * _per_sequence(shape, s, False, core_only)
    if moe_layers:
        fwd = fwd + moe_layers * _per_sequence(shape, s, True, core_only)
    return B * fwd


@dataclass(frozen=True)
class Depth:
    """The layers one step runs, as the FLOP counts below read them: ``layers`` decoder layers (a
    number or an array), ``moe_layers`` of them MoE, and ``mtp`` multi-token prediction layers
    (MoE ones where ``mtp_moe``; DeepSeek-V3 report Sec. 2.2)."""

    layers: Num
    moe_layers: int = 0
    mtp: int = 0
    mtp_moe: bool = False


def mtp_forward_flops(shape: LayerShape, B: Num, s: int, mtp: int, moe: bool) -> Num:
    """Forward FLOPs of the multi-token prediction layers (DeepSeek-AI 2024, DeepSeek-V3 report,
    Sec. 2.2; Megatron-Core multi_token_prediction.py): per MTP layer one transformer layer (of
    the last layer's kind), its input projection 2 B s (2h) h, and another pass through the
    shared output head, 2 B s h V. 0 without MTP."""
    if not mtp:
        return 0.0
    h = shape.hidden
    return _forward(shape, B, s, mtp, mtp if moe else 0, False) + mtp * (
        logits_forward_flops(shape, B, s) + 2.0 * B * s * 2 * h * h
    )


def model_flops(shape: LayerShape, B: Num, s: int, depth: Depth) -> Num:
    """Model FLOPs per step: 3 x forward (forward + 2x backward), no recompute, active experts only
    (generalizes Korthikanti eq. 7; the attention core is counted over the whole s x s, as eq. 7
    does), the multi-token prediction layers included.
    """
    d = depth
    fwd = _forward(shape, B, s, d.layers, d.moe_layers, False)
    return 3.0 * (
        fwd + logits_forward_flops(shape, B, s) + mtp_forward_flops(shape, B, s, d.mtp, d.mtp_moe)
    )


def hardware_flops(shape: LayerShape, B: Num, s: int, depth: Depth, recompute: str) -> Num:
    """Hardware FLOPs per step under each paper's convention (SPEC 5).

    full: model + one more forward of every layer (Narayanan eq. 3: 4x forward).
    selective: model + the attention core's forward and backward again
    (Korthikanti eq. 8 counts it so: its s/(3h) term is twice eq. 7's s/(6h)).
    none: model FLOPs.
    """
    base = model_flops(shape, B, s, depth)
    d = depth
    layers, moe = d.layers + d.mtp, d.moe_layers + (d.mtp if d.mtp_moe else 0)
    if recompute == "full":
        return base + _forward(shape, B, s, layers, moe, False)
    if recompute == "selective":
        return base + 3.0 * _forward(shape, B, s, layers, moe, True)
    return base


def megatron_core_flops(shape: LayerShape, B: Num, s: int, depth: Depth) -> Num:
    """FLOPs per step as Megatron-Core prints them (megatron/training/training.py,
    num_floating_point_operations, 2025) and Megatron-Bridge counts them (training/utils/
    flop_utils.py): 6 B s per token-weight product over the attention projections, the dense MLPs,
    the k routed and the shared experts (the router not counted), the attention core with the
    causal mask halving it (QK^T and AV: 2 x 2 B s^2 a d / 2 each pass), and the logits. MLA counts
    its down- and up-projections and its core the same way. Each MTP layer adds a layer of its
    kind, its 2h x h input projection and one more logits pass (DeepSeek-V3 at s = 4096: 260.0
    GFLOP a token, as the Megatron-Bridge tables' TFLOP/s over tokens/s give)."""
    L, moe_layers, mtp = depth.layers, depth.moe_layers, depth.mtp
    if mtp:
        h = shape.hidden
        inner = Depth(L + mtp, moe_layers + (mtp if depth.mtp_moe else 0))
        return megatron_core_flops(shape, B, s, inner) + 6.0 * B * s * mtp * (
            h * shape.vocab + 2 * h * h
        )
    h, a, V = shape.hidden, shape.heads, shape.vocab
    n = 3.0 if shape.gated else 2.0
    if shape.kv_lora:
        qk = shape.qk_nope + shape.qk_rope
        q = shape.q_lora * (h + a * qk + 1) if shape.q_lora else h * a * qk
        attn = (
            q
            + shape.kv_lora * (h + a * (shape.qk_nope + shape.v_head) + 1)
            + h * shape.qk_rope
            + a * shape.v_head * h
            + s * a * qk / 2
            + s * a * shape.v_head / 2
        )
    else:
        qd, kd = shape.heads * shape.d, shape.groups * shape.d
        attn = h * (qd + 2 * kd) + qd * s / 2 * 2 + qd * h
    mlp = h * (
        shape.ffn * n * (L - moe_layers)
        + (shape.moe_ffn * shape.top_k * n + shape.shared_ffn * n) * moe_layers
    )
    return B * s * (6.0 * mlp + 6.0 * attn * L + 6.0 * h * V)


def korthikanti_model_flops(B: Num, s: Num, L: Num, h: Num, V: Num) -> Num:
    """72 B s L h^2 (1 + s/(6h) + V/(12hL)): Korthikanti et al. 2022, eq. 7. FLOPs per step."""
    return 72.0 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * h * L))


def narayanan_hardware_flops(B: Num, s: Num, L: Num, h: Num, V: Num) -> Num:
    """96 B s L h^2 (1 + s/(6h) + V/(16hL)): Narayanan et al. 2021, eq. 3 (full recompute). FLOPs
    per step."""
    return 96.0 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * h * L))


def korthikanti_selective_flops(B: Num, s: Num, L: Num, h: Num, V: Num) -> Num:
    """72 B s L h^2 (1 + s/(3h) + V/(12hL)): Korthikanti et al. 2022, eq. 8. FLOPs per step."""
    return 72.0 * B * s * L * h**2 * (1 + s / (3 * h) + V / (12 * h * L))
