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

import numpy as np

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
OPTIMIZER_BYTES_PER_PARAM = {"adam": 12.0, "sgd": 8.0}  # fp32 master + (m, v) or (momentum)


def layer_params(h, f, g, d, swiglu: bool):
    """Parameters of one layer. GPT (gelu, biases, LayerNorm): 12h^2 + 13h (Narayanan 2021, Sec. 5.1).

    swiglu (Llama): no biases, RMSNorm: h(h + 2gd) + h^2 + 3hf + 2h.
    """
    attn = h * (h + 2 * g * d) + h * h
    if swiglu:
        return attn + 3 * h * f + 2 * h
    biases = (h + 2 * g * d) + h + f + h
    return attn + 2 * h * f + biases + 4 * h


def embedding_params(V, h, s, learned_positions: bool):
    """Word embedding V h, plus s h learned position embedding."""
    return V * h + (s * h if learned_positions else 0)


def total_params(L, h, f, g, d, V, s, swiglu: bool, learned_positions: bool, tied: bool):
    """All parameters of the model (Narayanan 2021: 12lh^2(1 + 13/(12h) + (V+s)/(12lh)) for GPT)."""
    final_norm = (1 if swiglu else 2) * h
    out = 0 if tied else V * h
    return L * layer_params(h, f, g, d, swiglu) + embedding_params(V, h, s, learned_positions) + final_norm + out


def stage_params(L, h, f, g, d, V, s, swiglu: bool, learned_positions: bool, tied: bool, tp, pp):
    """(first stage, last stage) parameters per GPU (SPEC 6).

    Each stage holds L/p layers split t ways; the first adds the word
    embedding (V h / t) and position embedding (not split); the last adds the
    output layer (V h / t), which with tied embeddings is still a copy on the
    last stage when p > 1 (Megatron keeps it there and all-reduces its grads).
    """
    tp = np.asarray(tp, dtype=float)
    pp = np.asarray(pp, dtype=float)
    layers = (L / pp) * layer_params(h, f, g, d, swiglu) / tp
    word = V * h / tp
    pos = s * h if learned_positions else 0
    out = np.where(pp > 1, word, 0.0 if tied else word)
    first = layers + word + pos + np.where(pp > 1, 0.0, out)
    last = layers + np.where(pp > 1, out + h, 0.0)
    return first, np.where(pp > 1, last, first)


def model_state_bytes(params, dp=1, zero_stage=0, grad_accum_fp32=False, optimizer="adam"):
    """(weights, gradients, optimizer) bytes per GPU for ``params`` parameters on it."""
    params = np.asarray(params, dtype=float)
    dp = np.asarray(dp, dtype=float)
    z = np.asarray(zero_stage)
    weights = 2.0 * params / np.where(z >= 3, dp, 1.0)
    grads = (4.0 if grad_accum_fp32 else 2.0) * params / np.where(z >= 2, dp, 1.0)
    optim = OPTIMIZER_BYTES_PER_PARAM[optimizer] * params / np.where(z >= 1, dp, 1.0)
    return weights, grads, optim


def activation_bytes_per_layer(s, b, h, a, t, sp, recompute):
    """Activation bytes one layer keeps for backward, per micro-batch (Korthikanti 2022, Table 2)."""
    s = np.asarray(s, dtype=float)
    sbh = s * b * h
    t = np.asarray(t, dtype=float)
    sp = np.asarray(sp, dtype=bool)
    rc = np.asarray(recompute)
    attn_scores = 5.0 * a * s / h
    none = np.where(sp, sbh / t * (34 + attn_scores), sbh * (10 + 24 / t + attn_scores / t))
    selective = np.where(sp, 34.0 * sbh / t, sbh * (10 + 24 / t))
    full = np.where(sp, 2.0 * sbh / t, 2.0 * sbh)
    return np.where(rc == 2, full, np.where(rc == 1, selective, none))


def stage_activation_bytes(s, b, h, a, V, t, sp, recompute, layers_per_stage, in_flight, pp):
    """(first stage, last stage) activation bytes at the peak of the schedule.

    Layers: per-layer bytes x L/p layers x micro-batches in flight. Full
    recompute also needs one layer's full activations while it recomputes.
    Extra terms (Korthikanti 2022, Sec. 4.3): the embedding dropout output on
    the first stage (s b h per micro-batch in flight, / t with SP); on the last
    stage the final norm and output-layer input (4 s b h / t) and the fp32
    logits for the loss (4 s b V / t), for one micro-batch.
    """
    t = np.asarray(t, dtype=float)
    sbh = np.asarray(s, dtype=float) * b * h
    per_layer = activation_bytes_per_layer(s, b, h, a, t, sp, recompute)
    working = np.where(np.asarray(recompute) == 2, activation_bytes_per_layer(s, b, h, a, t, sp, 0), 0.0)
    shard = np.where(np.asarray(sp, dtype=bool), t, 1.0)
    layers = per_layer * layers_per_stage * in_flight + working
    first = layers + sbh / shard * in_flight
    output = 4.0 * sbh / t + 4.0 * np.asarray(s, dtype=float) * b * V / t
    last_in_flight = np.where(np.asarray(pp) > 1, 1.0, in_flight)
    last = per_layer * layers_per_stage * last_in_flight + working + output
    return np.where(np.asarray(pp) > 1, first, first + output), last
