"""The GPT/Llama decoder layer, the embedding and the LM head, described as data (cost/ops.py).

Megatron tensor parallelism (Shoeybi et al. 2019; seed 000, 2.3): QKV and MLP-up are
column-parallel (N split t ways), the output projection and MLP-down row-parallel (K split
t ways); forward one all-reduce of b s h elements after attention and one after the MLP,
backward two more at the column-parallel inputs. With SP (Korthikanti et al. 2022; seed 002)
each all-reduce becomes a reduce-scatter plus an all-gather, and the token-wise regions
(norms, dropout, residual) work on s/t tokens.

Memory-bound kernels follow Megatron-LM's GPT layer (megatron/model/transformer.py,
2021-2022): besides the fused norm, softmax, dropout and bias-activation kernels, the QKV bias
is a separate add (F.linear on a 3-D input), the attention context is made contiguous with a
copy, the backward concatenates the q, k, v gradients back into the fused QKV gradient,
autograd adds the two gradients that reach each residual branch point, and every bias
gradient is a reduction over the tokens. Bytes per element are stated at each op.

Every shape is per rank and per micro-batch of b sequences of s tokens, numpy arrays over
configurations of (b, t, sp). A new layer kind (an MoE FFN, MLA attention) is a new function
here returning a Block; nothing downstream changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .ops import Block, Collective, FusedAttention, Gemm, Pointwise, Transfer


@dataclass(frozen=True)
class LayerShape:
    """The numbers of a model that its layers' shapes are made of (SPEC 2)."""

    hidden: int                  # h
    heads: int                   # a
    groups: int                  # g, key/value heads (GQA); = a for MHA
    ffn: int                     # f
    vocab: int                   # V
    gated: bool                  # SwiGLU: gate and up projections (3 MLP GEMMs), else GELU (2)
    bias: bool                   # linear layers carry biases
    norm: Literal["layernorm", "rmsnorm"]
    learned_positions: bool      # learned position embedding (s h parameters), else RoPE
    tied: bool                   # the LM head shares the word embedding

    @classmethod
    def of(cls, model) -> "LayerShape":
        """From a specs.Model (read by attribute, so cost/ stays free of the specs)."""
        return cls(hidden=model.hidden_size, heads=model.num_attention_heads, groups=model.groups,
                   ffn=model.ffn, vocab=model.vocab_size, gated=model.mlp == "swiglu", bias=model.has_bias,
                   norm=model.norm, learned_positions=model.position_embedding == "learned",
                   tied=model.tied_embeddings)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def norm_params(self) -> int:
        """gamma and beta (LayerNorm) or gamma alone (RMSNorm), per norm."""
        return (2 if self.norm == "layernorm" else 1) * self.hidden


@dataclass(frozen=True)
class Options:
    """Kernel choices that change the op list: byte widths and the framework's fusions."""

    gemm_bytes: int = 2              # bytes per GEMM operand element
    act_bytes: int = 2               # stored activations and elementwise kernels (>= 16-bit)
    flash: bool = False              # fused attention kernel
    persist_ln: bool = True          # single-pass layernorm backward
    grad_accum_bytes: float = 0.0    # bytes per weight of an unfused gradient accumulation, 0 if fused


def layernorm_backward_bytes(act: int, persistent: bool) -> float:
    """HBM bytes per element of a layernorm backward. The persistent kernel (apex contrib
    FastLayerNorm, Megatron's default since late 2021) reads x and dy once and writes dx; the
    earlier two-pass kernel (apex fused_layer_norm_cuda, used by Megatron before it) reads x and
    dy once for the gamma/beta partial sums (cuComputePartGradGammaBeta) and again for dx
    (cuComputeGradInput)."""
    return 3 * act if persistent else 5 * act


def grad_accumulation_bytes(act_bytes: int, fused: bool, gradient_bytes: int) -> float:
    """HBM bytes per weight of an unfused gradient accumulation: read the new gradient (activation
    width), read and write the buffer (its width). Fused (wgrad GEMM into the buffer): none."""
    return 0.0 if fused else act_bytes + 2 * gradient_bytes


def _tp_layer_collective(name: str, message, column_gemm: str) -> Collective:
    """Forward g after a row-parallel GEMM, backward f at the column-parallel input, overlapped with
    that GEMM's weight gradient (Megatron's asynchronous TP all-reduce; Korthikanti 2022, Sec. 6.2).
    SP: reduce-scatter here and all-gather before the next GEMM; backward the gradient's all-gather
    (exposed), the input's re-gather under dgrad, the reduce-scatter under wgrad."""
    return Collective(name, "tp", message,
                      fwd=(Transfer("all-reduce", "no_sp"), Transfer("reduce-scatter", "sp"),
                           Transfer("all-gather", "sp")),
                      bwd=(Transfer("all-reduce", "no_sp", (column_gemm, "wgrad")),
                           Transfer("all-gather", "sp"), Transfer("all-gather", "sp", (column_gemm, "dgrad")),
                           Transfer("reduce-scatter", "sp", (column_gemm, "wgrad"))))


def decoder_layer(m: LayerShape, o: Options, b, s: int, t, sp) -> Block:
    """One transformer layer on one rank for a micro-batch of b sequences (SPEC 5)."""
    h, g, d, f = m.hidden, m.groups, m.head_dim, m.ffn
    act = o.act_bytes
    b, t, sp = np.asarray(b, dtype=float), np.asarray(t, dtype=float), np.asarray(sp, dtype=bool)
    M = b * s
    tok = np.where(sp, t, 1.0)                  # token-wise regions hold s/t tokens under SP
    qkv_n = h + 2 * g * d
    mlp_n = (2 if m.gated else 1) * f           # SwiGLU: gate and up projections fused
    bias = m.bias
    ln_bwd = layernorm_backward_bytes(act, o.persist_ln)
    qkv = Gemm("QKV projection", M, h, qkv_n / t, 1, "column", h * qkv_n + (qkv_n if bias else 0))
    up_name = "MLP gate+up" if m.gated else "MLP up"
    ops: list = [Pointwise("layernorm 1", M * h / tok, 2 * act, ln_bwd, 8, "tokens", m.norm_params), qkv]
    if bias:  # output += bias after the GEMM (read and write); backward: bias gradient, a reduction
        ops.append(Pointwise("QKV bias add", M * qkv_n / t, 2 * act, act, 1, "column"))
    ops += attention_core(m, o, b, s, t)
    # backward: the q, k, v gradients are concatenated into the fused QKV gradient (split's backward)
    ops.append(Pointwise("QKV gradient concat", M * qkv_n / t, 0.0, 2 * act, 0, "column"))
    ops.append(Gemm("output projection", M, h / t, h, 1, "row", h * h + (h if bias else 0)))
    ops.append(_tp_layer_collective("TP comm after attention", M * h * act, qkv.name))
    # fused bias-dropout-add: read x, residual, write out, 1-byte mask; backward reads dy and the
    # mask, writes dx (the residual's gradient is dy itself), plus the bias-gradient reduction
    bda_bwd = 2 * act + 1 + (act if bias else 0)
    ops.append(Pointwise("bias-dropout-add 1", M * h / tok, 3 * act + 1, bda_bwd, 3, "tokens"))
    # the residual branch point's two gradients (through the norm, and straight) are summed
    ops.append(Pointwise("residual gradient add 1", M * h / tok, 0.0, 3 * act, 1, "tokens"))
    ops.append(Pointwise("layernorm 2", M * h / tok, 2 * act, ln_bwd, 8, "tokens", m.norm_params))
    ops.append(Gemm(up_name, M, h, mlp_n / t, 1, "column", h * mlp_n + (mlp_n if bias else 0)))
    if m.gated:
        ops.append(Pointwise("swiglu", M * f / t, 3 * act, 5 * act, 4, "column"))
    else:  # fused bias-gelu; backward reads dy and x, writes dx, plus the bias-gradient reduction
        ops.append(Pointwise("bias-gelu", M * f / t, 2 * act, 3 * act + (act if bias else 0), 8, "column"))
    ops.append(Gemm("MLP down", M, f / t, h, 1, "row", f * h + (h if bias else 0)))
    ops.append(_tp_layer_collective("TP comm after MLP", M * h * act, up_name))
    ops.append(Pointwise("bias-dropout-add 2", M * h / tok, 3 * act + 1, bda_bwd, 3, "tokens"))
    ops.append(Pointwise("residual gradient add 2", M * h / tok, 0.0, 3 * act, 1, "tokens"))
    if o.grad_accum_bytes:
        # unfused weight-gradient accumulation: main_grad += grad over every weight of the layer,
        # once per micro-batch in backward (read the new gradient and the buffer, write the buffer)
        weights = sum(op.K * op.N for op in ops if isinstance(op, Gemm) and op.params) + 0 * b
        ops.append(Pointwise("weight-gradient accumulation", weights, 0.0, o.grad_accum_bytes, 1, "column"))
    return Block("decoder layer", tuple(ops))


def attention_core(m: LayerShape, o: Options, b, s: int, t) -> list:
    """softmax(Q K^T / sqrt(d)) V over a/t heads per rank: the part selective recompute repeats.

    Unfused (Megatron's CoreAttention): batched QK^T and attention x V GEMMs over the head dimension,
    the fused scale-mask-softmax (reads and writes s^2 per head; backward reads y and dy, writes dx),
    dropout on the probabilities (1-byte mask), and the context's permute + contiguous copy
    [b a/t, s, d] -> [s, b, h/t]. Fused (flash): one kernel with the same GEMM FLOPs that reads Q, K, V
    and writes the output."""
    act, d = o.act_bytes, m.head_dim
    nb = b * (m.heads / t)                      # independent (s x d)(d x s) products
    scores = Gemm("attention scores QK^T", s, d, s, nb, "heads", attention_core=True)
    context = Gemm("attention x V", s, s, d, nb, "heads", attention_core=True)
    if o.flash:
        io = act * b * s * (2 * m.hidden + 2 * m.groups * d) / t
        return [FusedAttention("attention core (flash)", (scores, context), io)]
    return [scores,
            Pointwise("softmax", nb * s * s, 2 * act, 3 * act, 5, "heads", attention_core=True),
            Pointwise("attention dropout", nb * s * s, 2 * act + 1, 2 * act + 1, 1, "heads", attention_core=True),
            context,
            Pointwise("context transpose", b * s * m.hidden / t, 2 * act, 2 * act, 0, "heads", attention_core=True)]


def lm_head(m: LayerShape, o: Options, b, s: int, t, sp) -> Block:
    """Last stage: final norm, the TP collective at the logits input, logits GEMM 2bshV/t and the fp32
    vocab-parallel loss. The logits GEMM is a column-parallel linear (Megatron-LM parallel_lm_logits):
    without SP its input gradient is all-reduced over TP in the backward, behind the weight gradient;
    under SP its input is all-gathered in the forward (exposed) and, in the backward, gathered again
    behind the input-gradient GEMM and reduce-scattered behind the weight gradient."""
    act, h, V = o.act_bytes, m.hidden, m.vocab
    b, t, sp = np.asarray(b, dtype=float), np.asarray(t, dtype=float), np.asarray(sp, dtype=bool)
    M = b * s
    logits = Gemm("logits", M, h, V / t, 1, "column", 0 if m.tied else V * h)
    comm = Collective("TP comm at the logits input", "tp", M * h * act,
                      fwd=(Transfer("all-gather", "sp"),),
                      bwd=(Transfer("all-gather", "sp", (logits.name, "dgrad")),
                           Transfer("reduce-scatter", "sp", (logits.name, "wgrad")),
                           Transfer("all-reduce", "no_sp", (logits.name, "wgrad"))))
    return Block("LM head", (
        Pointwise("final layernorm", M * h / np.where(sp, t, 1.0), 2 * act,
                  layernorm_backward_bytes(act, o.persist_ln), 8, "tokens", m.norm_params),
        comm, logits,
        # vocab-parallel cross-entropy on fp32 logits, HBM passes over the [b s, V/t] tensor as
        # Megatron-LM runs them (gpt_model: output.float(); mpu/cross_entropy.py): forward cast 2+4,
        # max 4, sub_ 4+4, exp 4+4, sum 4, div_ 4+4 = 38 B per logit; backward mul_ 4+4 and the
        # cast's backward 4+2 = 14 B per logit
        Pointwise("cross-entropy (fp32)", M * V / t, 38.0, 14.0, 6, "column")))


def embedding(m: LayerShape, o: Options, b, s: int, t, sp) -> Block:
    """First stage: the vocab-parallel lookup, its TP reduction, dropout (memory-bound), backward
    scatter-add. Each rank looks up only its vocabulary shard and zeroes the other rows, so the b s h
    output is summed over TP: an all-reduce in the forward (its backward is the identity), or under
    SP a reduce-scatter whose backward is an all-gather (Megatron-LM VocabParallelEmbedding and
    language_model.Embedding). Parameters: V h word embedding, plus s h learned positions."""
    act, h = o.act_bytes, m.hidden
    b, t, sp = np.asarray(b, dtype=float), np.asarray(t, dtype=float), np.asarray(sp, dtype=bool)
    M = b * s
    comm = Collective("TP reduction of the embedding", "tp", M * h * act,
                      fwd=(Transfer("all-reduce", "no_sp"), Transfer("reduce-scatter", "sp")),
                      bwd=(Transfer("all-gather", "sp"),))
    params = m.vocab * h + (s * h if m.learned_positions else 0)
    return Block("embedding", (comm, Pointwise("embedding + dropout", M * h / np.where(sp, t, 1.0),
                                               3 * act + 1, 3 * act + 1, 1, "tokens", params)))
