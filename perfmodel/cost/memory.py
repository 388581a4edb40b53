"""Parameters, model states and activation memory (SPEC sections 5-6).

Model states, mixed precision with Adam (ZeRO paper, Rajbhandari et al. 2020, Sec. 3.1):
2 (bf16 weights) + 2 (bf16 grads) + 12 (fp32 master, m, v) = 16 bytes per
parameter, 18 with fp32 gradient accumulation. ZeRO-1 divides the optimizer
states by DP, ZeRO-2 also the gradients, ZeRO-3 also the weights.

Activations per layer, bytes, 16-bit (Korthikanti et al. 2022, Table 2):
    no parallelism          s b h (34 + 5 a s / h)
    TP                      s b h (10 + 24/t + 5 a s / (h t))
    TP + SP                 s b h / t (34 + 5 a s / h)
    TP + selective          s b h (10 + 24/t)
    TP + SP + selective     34 s b h / t
    full recompute          2 s b h (layer input only; / t with SP)
All functions take floats or numpy arrays; recompute is a code 0 none,
1 selective, 2 full (RECOMPUTE_CODES).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from perfmodel.cost import Array, Num

from ..specs.precision import Precision
from .transformer import LayerShape, Options, decoder_layer, embedding, lm_head

BF16_ADAM = Precision.of("bf16", False, "adam")

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}


def layer_params(shape: LayerShape) -> Num:
    """Parameters of one layer, read off its description (cost/transformer.decoder_layer).

    GPT (gelu, biases, LayerNorm): 12h^2 + 13h (Narayanan 2021, Sec. 5.1); Llama (SwiGLU, no
    biases, RMSNorm): h(h + 2gd) + h^2 + 3hf + 2h."""
    return decoder_layer(shape, Options(), 1, 1, 1, False).params()


def embedding_params(shape: LayerShape, s: int) -> Num:
    """Word embedding V h, plus s h learned position embedding."""
    return embedding(shape, Options(), 1, s, 1, False).params()


def head_params(shape: LayerShape) -> Num:
    """Final norm, plus the output layer V h when it is not tied to the word embedding."""
    return lm_head(shape, Options(), 1, 1, 1, False).params()


@lru_cache(maxsize=256)
def total_params(
    shape: LayerShape, L: int, s: int, moe_layers: int = 0, mtp: int = 0, mtp_moe: bool = False
) -> float:
    """All parameters of the model (Narayanan 2021: 12lh^2(1 + 13/(12h) + (V+s)/(12lh)) for GPT,
    plus the final norm's); a MoE layer counts every routed expert; each multi-token prediction
    layer a layer of its kind and its projection and norms (mtp_extra_params). A property of the
    model, so computed once per model."""
    any_moe = moe_layers or (mtp and mtp_moe)
    moe = decoder_layer(shape, Options(), 1, 1, 1, False, moe=True).params() if any_moe else 0
    n_moe = moe_layers + (mtp if mtp_moe else 0)
    return float(
        (L + mtp - n_moe) * layer_params(shape)
        + n_moe * moe
        + embedding_params(shape, s)
        + head_params(shape)
        + mtp * mtp_extra_params(shape)
    )


def mtp_extra_params(shape: LayerShape) -> float:
    """Besides its transformer layer, an MTP layer's own weights: the 2h -> h input projection
    and its two input norms and final norm (Megatron-Core MultiTokenPredictionLayer: enorm, hnorm,
    eh_proj, final_layernorm); the embedding and output layer are the main model's."""
    h = shape.hidden
    return float(2 * h * h + 3 * h)


def end_params(shape: LayerShape, s: int, tp: Num, pp: Num, mtp: int = 0) -> tuple[Array, Array]:
    """(embedding, head) parameters per GPU on the stages that hold them (SPEC 6): the word
    embedding (V h / t) and the learned positions (not split); the output layer (V h / t), a copy
    even when tied if p > 1 (Megatron keeps it there and all-reduces its gradients), with the final
    norm counted as h there; and the MTP layers' projections and norms, beside the head (their
    transformer layers are counted as layers of the last stage)."""
    tp, pp = np.asarray(tp, dtype=float), np.asarray(pp, dtype=float)
    word = shape.vocab * shape.hidden / tp
    positions = shape.hidden * s if shape.learned_positions else 0
    head = np.where((pp > 1) | (not shape.tied), word, 0.0) + np.where(pp > 1, shape.hidden, 0.0)
    head = head + mtp * mtp_extra_params(shape) / tp
    return np.asarray(word + positions), np.asarray(head)


def model_state_bytes(
    params: Num,
    dp: Num = 1,
    zero_stage: Num = 0,
    precision: Precision = BF16_ADAM,
    fp8_params: bool = False,
) -> tuple[Array, Array, Array]:
    """(weights, gradients, optimizer) bytes per GPU for ``params`` parameters on it.

    Mixed precision with Adam: 2 + 2 + 12 = 16 B/param, 18 with fp32 gradients (ZeRO paper,
    Sec. 3.1); ZeRO-1 shards the optimizer states over dp, ZeRO-2 also the gradients, ZeRO-3
    also the weights. A low-precision run keeps an FP8 (MXFP8, NVFP4) copy beside the 16-bit
    weights; with ``fp8_params`` (Megatron-Core --fp8-param-gather: "keep the compute param in
    fp8 (do not use any other intermediate dtype)") that copy is the only one."""
    params = np.asarray(params, dtype=float)
    dp = np.asarray(dp, dtype=float)
    z = np.asarray(zero_stage)
    per_param = precision.weight_bytes + precision.fp8_weight_bytes
    if fp8_params and precision.fp8_weight_bytes:
        per_param = precision.fp8_weight_bytes
    weights = per_param * params / np.where(z >= 3, dp, 1.0)
    grads = precision.gradient_bytes * params / np.where(z >= 2, dp, 1.0)
    optim = precision.optimizer_bytes * params / np.where(z >= 1, dp, 1.0)
    return weights, grads, optim


def activation_bytes_per_layer(
    s: Num, b: Num, h: Num, a: Num, t: Num, sp: Num, recompute: Num
) -> Array:
    """Activation bytes one layer keeps for backward, per micro-batch (Korthikanti 2022, Table
    2)."""
    s = np.asarray(s, dtype=float)
    sbh = s * b * h
    t = np.asarray(t, dtype=float)
    sp = np.asarray(sp, dtype=bool)
    rc = np.asarray(recompute)
    attn_scores = 5.0 * a * s / h
    none = np.where(sp, sbh / t * (34 + attn_scores), sbh * (10 + 24 / t + attn_scores / t))
    selective = np.where(sp, 34.0 * sbh / t, sbh * (10 + 24 / t))
    full = np.where(sp, 2.0 * sbh / t, 2.0 * sbh)
    return np.asarray(np.where(rc == 2, full, np.where(rc == 1, selective, none)))


def activation_terms(
    s: Num,
    b: Num,
    h: Num,
    a: Num,
    V: Num,
    t: Num,
    sp: Num,
    recompute: Num,
    logit_bytes: float = 4.0,
    gathered_head_input: bool = False,
) -> tuple[Array, Array, Array, Array]:
    """Activation bytes per micro-batch that a stage's peak is made of (per configuration):

    - per layer kept for backward (Korthikanti 2022, Table 2);
    - working: full recompute also needs one layer's full activations while it recomputes;
    - embedding: the dropout output on the embedding's stage, s b h (/ t with SP), per
      micro-batch in flight (Korthikanti 2022, Sec. 4.3);
    - head: on the LM head's stage the final norm and output-layer input (4 s b h / t) and the
      logits the loss holds at its peak, ``logit_bytes`` s b V / t for one micro-batch: 4 for
      Megatron's fp32 vocab-parallel cross-entropy (Korthikanti 2022, Sec. 4.1), 12 for
      F.cross_entropy on an fp32 copy (the framework profile's loss_logit_bytes). With SP, Megatron
      saves the output layer's sequence-sharded input and gathers it again in the backward;
      ``gathered_head_input`` (DTensor's ColwiseParallel with a Shard(1) input, torchtitan)
      saves it gathered, 2 s b h.
    """
    t = np.asarray(t, dtype=float)
    per_layer = activation_bytes_per_layer(s, b, h, a, t, sp, recompute)
    working = np.where(
        np.asarray(recompute) == 2, activation_bytes_per_layer(s, b, h, a, t, sp, 0), 0.0
    )
    embed, head = end_terms(s, b, h, V, t, sp, logit_bytes, gathered_head_input)
    return per_layer, np.asarray(working), embed, head


def end_terms(
    s: Num,
    b: Num,
    h: Num,
    V: Num,
    t: Num,
    sp: Num,
    logit_bytes: float = 4.0,
    gathered_head_input: bool = False,
) -> tuple[Array, Array]:
    """activation_terms' embedding and head terms alone, bytes per micro-batch."""
    t = np.asarray(t, dtype=float)
    sbh = np.asarray(s, dtype=float) * b * h
    embed = sbh / np.where(np.asarray(sp, dtype=bool), t, 1.0)
    head_input = np.where(
        np.asarray(sp, dtype=bool) & gathered_head_input, 2.0 * sbh, 2.0 * sbh / t
    )
    head = 2.0 * sbh / t + head_input + logit_bytes * np.asarray(s, dtype=float) * b * V / t
    return np.asarray(embed), np.asarray(head)
