"""The decoder layers, the embedding and the LM head, described as data (cost/ops.py).

Megatron tensor parallelism (Shoeybi et al. 2019; seed 000, 2.3): QKV and MLP-up are
column-parallel (N split t ways), the output projection and MLP-down row-parallel (K split
t ways); forward one all-reduce of b s h elements after attention and one after the MLP,
backward two more at the column-parallel inputs. With SP (Korthikanti et al. 2022; seed 002)
each all-reduce becomes a reduce-scatter plus an all-gather, and the token-wise regions
(norms, dropout, residual) work on s/t tokens. Context parallelism (Megatron-Core CP; SPEC 11)
gives each rank s/cp tokens; experts (Megatron-Core MoE; SPEC 11) receive their tokens by
all-to-all over the EP group.

Memory-bound kernels follow Megatron-LM's GPT layer (megatron/model/transformer.py,
2021-2022): besides the fused norm, softmax, dropout and bias-activation kernels, the QKV bias
is a separate add (F.linear on a 3-D input), the attention context is made contiguous with a
copy, the backward concatenates the q, k, v gradients back into the fused QKV gradient,
autograd adds the two gradients that reach each residual branch point, and every bias
gradient is a reduction over the tokens. Bytes per element are stated at each op.

Every shape is per rank and per micro-batch of b sequences of s tokens, numpy arrays over
configurations. A new layer kind is a new function here returning a Block.
"""

from __future__ import annotations

from dataclasses import replace

from perfmodel.cost import Num

from .attention import attention_ops
from .layer_kernels import (
    activation,
    fp8_casts,
    hidden_norm,
    residual_add,
    residual_gradient_add,
    symm_mem_passes,
    symm_mem_window,
    tp_collective,
)
from .moe_layer import moe_ops
from .ops import Block, Collective, Gemm, OpDesc, Pointwise, Transfer, tag
from .shapes import (
    LayerShape,
    Options,
    Split,
    flat_gradient_bytes,
    gathered_bytes,
    grad_accumulation_bytes,
    layernorm_backward_bytes,
)

__all__ = [
    "LayerShape",
    "Options",
    "Split",
    "decoder_layer",
    "embedding",
    "flat_gradient_bytes",
    "grad_accumulation_bytes",
    "layernorm_backward_bytes",
    "lm_head",
]


def decoder_layer(
    m: LayerShape,
    o: Options,
    b: Num,
    s: int,
    t: Num,
    sp: Num,
    cp: Num = 1,
    ep: Num = 1,
    etp: Num = 1,
    moe: bool = False,
) -> Block:
    """One transformer layer on one rank for a micro-batch of b sequences (SPEC 5): attention
    (MHA/GQA or MLA) and a dense MLP, or a mixture-of-experts FFN when ``moe``."""
    x = Split.of(b, s, t, sp, cp, ep, etp)
    act, h = o.act_bytes, m.hidden
    M, tok = x.tokens, x.tok
    ops = attention_ops(m, o, x)
    ops += tag([hidden_norm(m, o, "layernorm 2", M * h / tok)], "layernorm")
    ops += moe_ops(m, o, x) if moe else tag(mlp_ops(m, o, x), "mlp")
    if m.sandwich:
        ops.append(hidden_norm(m, o, "post-MLP norm", M * h / tok))
    ops.append(residual_add(m, o, "2", M * h / tok))
    ops.append(residual_gradient_add(o, "2", M * h / tok))
    if o.gemm_bytes < 2:
        # Transformer Engine keeps the low-precision copy of each weight GEMM's input for its
        # weight gradient: 1 B an element for FP8 (with block scales for MXFP8, 0.56 for NVFP4)
        ops = [
            (
                replace(
                    op,
                    saved=op.saved * (o.gemm_bytes + o.scale_bytes) / 2,
                    # a copy of its own, which the norm's recompute does not free
                    rebuilt=("", 0.0) if op.rebuilt[0] == "layernorm" else op.rebuilt,
                ) if isinstance(op, Gemm) and op.params and not op.sixteen_bit else op
            ) for op in ops
        ]
        ops += fp8_casts(ops, o, x)
        if o.attn_out_bytes:
            # the output projection reads the attention core's cached output for its weight
            # gradient; no copy of its own (DeepSeek-V3 report Sec. 3.3.3)
            ops = [replace(op, saved=0.0) if op.name == "output projection" else op for op in ops]
    weights = (
        sum(op.K * op.N * op.batch for op in ops if isinstance(op, Gemm) and op.params) + 0 * x.b
    )
    if o.grad_accum_bytes:
        # unfused weight-gradient accumulation: main_grad += grad over every weight of the layer,
        # once per micro-batch in backward (read the new gradient and the buffer, write the buffer)
        ops.append(
            Pointwise("weight-gradient accumulation", weights, 0.0, o.grad_accum_bytes, 1, "column")
        )
    if o.flat_grad_bytes:
        # FSDP1: the layer's unit gradient concatenated, cast and pre-divided every micro-batch
        # (shapes.flat_gradient_bytes)
        ops.append(
            Pointwise("FSDP flat-gradient copy", weights, 0.0, o.flat_grad_bytes, 1, "column")
        )
    return Block("MoE layer" if moe else "decoder layer", tuple(ops), input_bytes=act * M * h / tok)


def mlp_ops(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """Dense MLP: column-parallel up (gate+up when gated), the activation, row-parallel down, the TP
    collective after it."""
    act, h, f = o.act_bytes, m.hidden, m.ffn
    M, t, tok = x.tokens, x.t, x.tok
    n = (2 if m.gated else 1) * f
    up = "MLP gate+up" if m.gated else "MLP up"
    return [
        Gemm(
            up,
            M,
            h,
            n / t,
            1,
            "column",
            h * n + (n if m.bias else 0),
            saved=act * M * h / tok,
            rebuilt=("layernorm", act * M * h / tok),
        ),
        activation(m, act, "", M * f / t, m.bias, saved=act * M * n / t, pointwise=o.pointwise),
        Gemm(
            "MLP down", M, f / t, h, 1, "row", f * h + (h if m.bias else 0), saved=act * M * f / t
        ),
        tp_collective(
            "TP comm after MLP",
            M * h * act,
            up,
            "MLP down",
            o.tp_overlap_ub,
            gathered_bytes(o),
            symm_mem_window(o, t),
        ),
        *symm_mem_passes(o, "MLP", x, h),
    ]


def lm_head(m: LayerShape, o: Options, b: Num, s: int, t: Num, sp: Num, cp: Num = 1) -> Block:
    """Last stage: final norm, the TP collective at the logits input, logits GEMM 2bshV/t and the
    fp32 vocab-parallel loss. The logits GEMM is a column-parallel linear (Megatron-LM
    parallel_lm_logits): without SP its input gradient is all-reduced over TP in the backward,
    behind the weight gradient; under SP its input is all-gathered in the forward (exposed) and, in
    the backward, gathered again behind the input-gradient GEMM and reduce-scattered behind the
    weight gradient."""
    x = Split.of(b, s, t, sp, cp)
    act, h, V = o.act_bytes, m.hidden, m.vocab
    M, t, tok = x.tokens, x.t, x.tok
    logits = Gemm("logits", M, h, V / t, 1, "column", 0 if m.tied else V * h, sixteen_bit=True)
    comm = Collective(
        "TP comm at the logits input",
        "tp",
        M * h * act,
        fwd=(Transfer("all-gather", "sp"),),
        bwd=(
            Transfer("all-gather", "sp", (logits.name, "dgrad")),
            Transfer("reduce-scatter", "sp", (logits.name, "wgrad")),
            Transfer("all-reduce", "no_sp", (logits.name, "wgrad")),
        ),
    )
    return Block(
        "LM head",
        (
            Pointwise(
                "final layernorm",
                M * h / tok,
                2 * act,
                layernorm_backward_bytes(act, o.persist_ln),
                8,
                "tokens",
                m.norm_params,
            ),
            comm,
            logits,
            _cross_entropy(o, M * V / t),
        ),
    )


def mtp_head(m: LayerShape, o: Options, b: Num, s: int, t: Num, sp: Num, cp: Num = 1) -> Block:
    """What one multi-token prediction layer adds on the last stage besides its transformer layer
    (Megatron-Core MultiTokenPredictionLayer; DeepSeek-V3 report, Sec. 2.2): the norms of the
    shifted tokens' embeddings and of the previous depth's hidden states (enorm, hnorm), their
    concatenation projected 2h -> h (eh_proj, column-parallel), and a pass through the shared
    output head and loss (final norm, logits, cross-entropy: the LM head's ops, its weights the
    main model's)."""
    x = Split.of(b, s, t, sp, cp)
    act, h = o.act_bytes, m.hidden
    M, tok = x.tokens, x.tok
    head = lm_head(m, o, b, s, t, sp, cp)
    shared = tuple(
        replace(op, params=0.0) if isinstance(op, Gemm) and op.name == "logits" else op
        for op in head.ops
    )
    return Block(
        "MTP head",
        (
            hidden_norm(m, o, "MTP enorm", M * h / tok),
            hidden_norm(m, o, "MTP hnorm", M * h / tok),
            Gemm("MTP eh_proj", M, 2 * h, h / x.t, 1, "column", 2 * h * h, saved=act * M * 2 * h),
            *shared,
        ),
    )


def _cross_entropy(o: Options, logits: Num) -> Pointwise:
    """Vocab-parallel cross-entropy over the [b s, V/t] logits. Unfused, on fp32 logits as
    Megatron-LM runs it (gpt_model: output.float(); mpu/cross_entropy.py): forward cast 2+4, max 4,
    sub_ 4+4, exp 4+4, sum 4, div_ 4+4 = 38 B per logit; backward mul_ 4+4 and the cast's backward
    4+2 = 14 B per logit. Fused (Megatron-Core --cross-entropy-loss-fusion): the forward reads the
    16-bit logits once (max, sum of exponentials and the target in registers), the backward reads
    them again and writes the gradient: 2 and 4 B per logit."""
    if o.fused_ce:
        return Pointwise("cross-entropy (fused)", logits, 2.0, 4.0, 6, "column")
    return Pointwise("cross-entropy (fp32)", logits, 38.0, 14.0, 6, "column")


def embedding(m: LayerShape, o: Options, b: Num, s: int, t: Num, sp: Num, cp: Num = 1) -> Block:
    """First stage: the vocab-parallel lookup, its TP reduction, dropout (memory-bound), backward
    scatter-add. Each rank looks up only its vocabulary shard and zeroes the other rows, so the b s
    h output is summed over TP: an all-reduce in the forward (its backward is the identity), or
    under SP a reduce-scatter whose backward is an all-gather (Megatron-LM VocabParallelEmbedding
    and language_model.Embedding). Parameters: V h word embedding, plus s h learned positions."""
    x = Split.of(b, s, t, sp, cp)
    act, h = o.act_bytes, m.hidden
    M, tok = x.tokens, x.tok
    comm = Collective(
        "TP reduction of the embedding",
        "tp",
        M * h * act,
        fwd=(Transfer("all-reduce", "no_sp"), Transfer("reduce-scatter", "sp")),
        bwd=(Transfer("all-gather", "sp"),),
    )
    params = m.vocab * h + (s * h if m.learned_positions else 0)
    if o.dropout:
        lookup = Pointwise(
            "embedding + dropout", M * h / tok, 3 * act + 1, 3 * act + 1, 1, "tokens", params
        )
    else:  # read the rows, write the output; backward: scatter-add into the table's gradient
        lookup = Pointwise("embedding", M * h / tok, 2 * act, 3 * act, 1, "tokens", params)
    return Block("embedding", (comm, lookup))
