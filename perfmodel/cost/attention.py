"""Attention as data: the QKV and output projections (or MLA's low-rank ones), the attention core
(fused FlashAttention or its two GEMMs), and context parallelism's K/V exchange.

Sources: Vaswani et al. 2017 (attention); Dao et al. 2022 (FlashAttention: Q, K, V and the output
through HBM once); DeepSeek-AI 2024, DeepSeek-V2 Sec. 2.1 (multi-head latent attention); Liu et al.
2023 (Ring Attention) and Jacobs et al. 2023 (DeepSpeed-Ulysses) for the cp exchange (SPEC 11).
Conventions and the per-kernel sources are in transformer.py's docstring.
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Num

from .layer_kernels import (
    hidden_norm,
    residual_add,
    residual_gradient_add,
    rope,
    symm_mem_passes,
    symm_mem_window,
    tp_collective,
)
from .moe_kernels import mla_assembly
from .ops import Collective, FusedAttention, Gemm, OpDesc, Pointwise, Shard, Transfer, tag
from .shapes import LayerShape, Options, Split, gathered_bytes, layernorm_backward_bytes


def attention_ops(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """The attention half of a layer: norm, projections, core, TP communication, residual."""
    act, h = o.act_bytes, m.hidden
    M, t, tok = x.tokens, x.t, x.tok
    ln_bwd = layernorm_backward_bytes(act, o.persist_ln)
    ops: list[OpDesc] = tag([hidden_norm(m, o, "layernorm 1", M * h / tok)], "layernorm")
    projections, first = _input_projections(m, o, x, ln_bwd)
    ops += projections
    ops += varlen_copies(m, o, x)
    ops += attention_core(m, o, x)
    if not m.kv_lora:
        # backward: the q, k, v gradients are concatenated into the fused QKV gradient (split's
        # backward)
        ops.append(
            Pointwise(
                "QKV gradient concat", M * (m.q_dim + 2 * m.kv_dim) / t, 0.0, 2 * act, 0, "column"
            )
        )
    ops.append(
        Gemm(
            "output projection",
            M,
            m.q_dim / t,
            h,
            1,
            "row",
            m.q_dim * h + (h if m.bias else 0),
            saved=act * M * m.q_dim / t,
        )
    )
    ops.append(
        tp_collective(
            "TP comm after attention",
            M * h * act,
            first,
            "output projection",
            o.tp_overlap_ub,
            gathered_bytes(o),
            symm_mem_window(o, t),
        )
    )
    ops += symm_mem_passes(o, "attention", x, h)
    if m.sandwich:  # Gemma 2: the attention output is normed before the residual add
        ops.append(hidden_norm(m, o, "post-attention norm", M * h / tok))
    ops.append(residual_add(m, o, "1", M * h / tok))
    # the residual branch point's two gradients (through the norm, and straight) are summed
    ops.append(residual_gradient_add(o, "1", M * h / tok))
    return ops


def varlen_copies(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """flash-attn's packed (varlen) layout as llm-foundry's flash_attn_fn reaches it, every layer
    (llmfoundry/models/layers/attention.py, 2024-01; flash_attn/bert_padding.py): q, k and v are
    each gathered into the packed rows (IndexFirstAxis: torch.gather, read and write an element;
    backward, a zeroed gradient and a scatter into it: write, then read and write), and the output
    is scattered back into the padded shape (IndexPutFirstAxis: zeros, then index_put; backward a
    gather). Unpadded input (pretraining, no padding) is copied all the same. None without
    ``o.unpad``."""
    if not o.unpad:
        return []
    act = o.act_bytes
    M, t = x.tokens, x.t
    return [
        Pointwise(
            "unpad q, k, v (varlen)",
            M * (m.q_dim + 2 * m.kv_dim) / t,
            2 * act,
            3 * act,
            0,
            "column",
        ),
        Pointwise("pad attention output (varlen)", M * m.q_dim / t, 3 * act, 2 * act, 0, "column"),
    ]


def _mla_projections(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """Multi-head latent attention (DeepSeek-V2, Sec. 2.1; Megatron-Core MLA): queries and
    keys/values pass through low-rank latents. The down-projections are small and replicated over TP
    (each rank runs them on all its tokens); the up-projections are column-parallel by heads. The
    keys' RoPE part (qk_rope) is shared by all heads and comes straight from the KV down-projection.
    A projection of the normed input saves that input, which the norm's recompute frees.
    """
    act, h, a = o.act_bytes, m.hidden, m.heads
    M, t = x.tokens, x.t
    qk = m.qk_nope + m.qk_rope
    normed = act * M * h

    def from_norm(name: str, n: Num, split: Shard, div: Num = 1) -> Gemm:
        return Gemm(
            name, M, h, n / div, 1, split, h * n, saved=normed, rebuilt=("layernorm", normed)
        )

    def latent_norm(name: str, rank: int) -> Pointwise:
        return Pointwise(
            name, M * rank, 2 * act, 3 * act, 8, "replicated", rank, saved=act * M * rank
        )

    def up(name: str, rank: int, n: Num) -> Gemm:
        return Gemm(
            name,
            M,
            rank,
            n / t,
            1,
            "column",
            rank * n,
            saved=act * M * rank,
            modules=("mla_up_proj",),
        )

    ops: list[OpDesc] = []
    if m.q_lora:
        ops += [
            from_norm("Q down-projection", m.q_lora, "replicated"),
            latent_norm("Q norm", m.q_lora),
            up("Q up-projection", m.q_lora, a * qk),
        ]
    else:
        ops.append(from_norm("Q projection", a * qk, "column", t))
    ops += [
        from_norm("KV down-projection", m.kv_lora + m.qk_rope, "replicated"),
        latent_norm("KV norm", m.kv_lora),
        up("KV up-projection", m.kv_lora, a * (m.qk_nope + m.v_head)),
    ]
    return ops + mla_assembly(m, o, x)


def attention_core(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """softmax(Q K^T / sqrt(d)) V over a/t heads per rank: the part selective recompute repeats.

    Unfused (Megatron's CoreAttention): batched QK^T and attention x V GEMMs over the head
    dimension, the fused scale-mask-softmax (reads and writes s^2 per head; backward reads y and dy,
    writes dx), dropout on the probabilities (1-byte mask), and the context's permute + contiguous
    copy [b a/t, s, d] -> [s, b, h/t]. Fused (flash): one kernel with the same GEMM FLOPs, the
    masked half skipped when causal, that reads Q, K, V and writes the output (and keeps the fp32
    softmax statistics for its backward).

    Context parallelism: each rank's queries are its s/cp tokens and its keys the whole sequence,
    met chunk by chunk; with causal load balancing (each rank holds chunks i and 2cp-1-i) every rank
    does 1/cp of the work. The ring (p2p) variant passes K and V around the cp ranks in cp-1 steps,
    each overlapped with the attention on the chunk at hand; the all-to-all (Ulysses) variant trades
    the sequence split for a head split before the core and back after it (Jacobs et al. 2023)."""
    act, b, s, t, cp = o.act_bytes, x.b, x.s, x.t, x.cp
    qk_d = (m.qk_nope + m.qk_rope) if m.kv_lora else m.d
    v_d = m.v_head if m.kv_lora else m.d
    k_width = m.heads * qk_d if m.kv_lora else m.kv_dim  # per-token width of K and of V
    v_width = m.heads * v_d if m.kv_lora else m.kv_dim
    M = x.tokens
    nb = b * m.heads / t  # independent (s x d)(d x s) products
    sq = s / cp
    q_bytes, k_bytes, v_bytes = (
        act * M * m.heads * qk_d / t,
        act * M * k_width / t,
        act * M * v_width / t,
    )
    scores = Gemm(
        "attention scores QK^T",
        sq,
        qk_d,
        s,
        nb,
        "heads",
        attention_core=True,
        saved=q_bytes + k_bytes,
    )
    context = Gemm(
        "attention x V",
        sq,
        s,
        v_d,
        nb,
        "heads",
        attention_core=True,
        saved=v_bytes,
        # the dropout output (else the softmax's)
        saved_core=act * nb * sq * s if o.dropout else 0.0,
    )
    exchange = _cp_exchange(m, o, x, q_bytes + k_bytes + v_bytes, k_bytes + v_bytes)
    before, after = list(exchange[:1]), list(exchange[1:]) + _cp_ring_merges(m, o, x, v_d, k_width)
    if o.flash:
        io = act * M * (2 * m.heads * qk_d + 2 * v_width) / t
        lse = 4.0 * nb * sq  # fp32 log-sum-exp per query row and head
        # its backward reads its own 16-bit output O (flash_attn_bwd's `out`; cuDNN's O): in 16
        # bits O is the output projection's saved input, the same tensor; under FP8 and MXFP8 the
        # projection keeps a quantized copy instead (transformer.decoder_layer), and O stays too
        # (Transformer Engine DotProductAttention saves out in the 16-bit dtype; issue 29)
        # (DeepSeek caches it once, in E5M6, for both: Options.attn_out_bytes)
        out16 = (o.attn_out_bytes or act) * M * m.heads * v_d / t if o.gemm_bytes < 2 else 0.0
        core = FusedAttention(
            "attention core (flash)",
            (scores, context),
            io,
            m.executed_attention(s, o.causal),
            saved=q_bytes + k_bytes + v_bytes + lse + out16,
            # MLA: Q, K and V are the up-projections' outputs (with RoPE applied), which their
            # recompute rebuilds (Megatron-Core --recompute-modules mla_up_proj; DeepSeek-V3
            # report Sec. 3.2.3)
            rebuilt=("mla_up_proj", q_bytes + k_bytes + v_bytes) if m.kv_lora else ("", 0.0),
        )
        return before + [core] + after
    return before + _unfused_core(o, x, m, scores, context, nb * sq * s) + after


def _cp_exchange(
    m: LayerShape, o: Options, x: Split, qkv_bytes: Num, kv_bytes: Num
) -> tuple[OpDesc, ...]:
    """(before the core, after it): the CP ring's K/V passes, or Ulysses' two all-to-alls. Empty
    lists' worth of time at cp = 1 (a ring of one rank has no step; an all-to-all of one rank moves
    nothing).
    """
    core = "attention core (flash)" if o.flash else "attention scores QK^T"
    if not np.any(x.cp > 1):
        return ()
    if o.cp_comm == "a2a":
        out_bytes = o.act_bytes * x.tokens * m.q_dim / x.t
        return (
            Collective(
                "CP all-to-all of Q, K, V",
                "cp",
                qkv_bytes,
                fwd=(Transfer("all-to-all"),),
                bwd=(Transfer("all-to-all"),),
            ),
            Collective(
                "CP all-to-all of the output",
                "cp",
                out_bytes,
                fwd=(Transfer("all-to-all"),),
                bwd=(Transfer("all-to-all"),),
            ),
        )
    steps = x.cp - 1
    ring = Collective(
        "CP ring exchange of K, V",
        "cp",
        kv_bytes,
        fwd=(Transfer("p2p", behind=(core, "fwd"), repeat=steps, share=1 / x.cp),),
        bwd=(Transfer("p2p", behind=(core, "bwd"), repeat=steps, share=1 / x.cp, scale=2.0),),
    )
    return (ring,)


def _input_projections(
    m: LayerShape, o: Options, x: Split, ln_bwd: float
) -> tuple[list[OpDesc], str]:
    """Q, K and V from the normed input: MLA's low-rank projections, or one fused column-parallel
    QKV GEMM with its bias and the per-head Q and K norms where the model has them; and the GEMM
    whose input the TP collective feeds."""
    if m.kv_lora:
        return _mla_projections(m, o, x), "KV up-projection"
    act, h, M, t, tok = o.act_bytes, m.hidden, x.tokens, x.t, x.tok
    qkv_n = m.q_dim + 2 * m.kv_dim
    ops: list[OpDesc] = []
    ops.append(
        Gemm(
            "QKV projection",
            M,
            h,
            qkv_n / t,
            1,
            "column",
            h * qkv_n + (qkv_n if m.bias else 0),
            saved=act * M * h / tok,
            rebuilt=("layernorm", act * M * h / tok),
        )
    )
    # output += bias after the GEMM; backward: bias gradient, a reduction
    if m.bias and not o.bias_fused:
        ops.append(Pointwise("QKV bias add", M * qkv_n / t, 2 * act, act, 1, "column"))
    ops += rope(m, o, M * (m.q_dim + m.kv_dim) / t)
    if m.qk_norm:  # RMSNorm over each head's d channels of Q and of K (gamma: d each)
        qk_el = M * (m.q_dim + m.kv_dim) / t
        ops.append(
            Pointwise(
                "Q and K norms", qk_el, 2 * act, ln_bwd, 8, "heads", 2 * m.d, saved=act * qk_el
            )
        )
    return ops, "QKV projection"


def _unfused_core(
    o: Options, x: Split, m: LayerShape, scores: Gemm, context: Gemm, elements: Num
) -> list[OpDesc]:
    """Megatron's CoreAttention without flash: the scores GEMM, the fused scale-mask-softmax,
    dropout on the probabilities (a 1-byte mask), attention x V and the context's transpose;
    ``elements`` scores per rank."""
    act, M, t = o.act_bytes, x.tokens, x.t
    return [
        scores,
        Pointwise(
            "softmax",
            elements,
            2 * act,
            3 * act,
            5,
            "heads",
            attention_core=True,
            saved_core=act * elements,
        ),
        *(
            [
                Pointwise(
                    "attention dropout",
                    elements,
                    2 * act + 1,
                    2 * act + 1,
                    1,
                    "heads",
                    attention_core=True,
                    saved_core=elements,
                )
            ]
            if o.dropout
            else []
        ),
        context,
        Pointwise(
            "context transpose",
            M * m.q_dim / t,
            2 * act,
            2 * act,
            0,
            "heads",
            attention_core=True,
        ),
    ]


def _cp_ring_merges(m: LayerShape, o: Options, x: Split, v_d: int, k_width: int) -> list[OpDesc]:
    """The memory-bound work of the CP ring (Transformer Engine, attention/dot_product_attention/
    context_parallel.py, AttnFuncWithCPAndKVP2P), which grows with tokens x steps while the
    attention it hides behind grows with the square of the tokens, so it is what makes a short
    sequence a poor case for CP: in the forward each of the cp steps yields a partial output that
    is rescaled by its softmax statistics and added into an fp32 output (flash_attn_fwd_out_
    correction: read the step's output, read and write the fp32 sum); in the backward each step's
    dQ is added into dQ, and its dK, dV into the buffers that travel the ring with K and V (read,
    read, write). Part of the attention core: selective recompute repeats it with the core."""
    if o.cp_comm == "a2a" or not np.any(x.cp > 1):
        return []
    act = o.act_bytes
    steps = np.where(x.cp > 1, x.cp, 0.0)
    out_el = steps * x.tokens * m.heads * v_d / x.t
    kv_el = steps * x.tokens * (k_width + (m.heads * v_d if m.kv_lora else m.kv_dim)) / x.t
    return [
        Pointwise("CP ring merge of partial outputs", out_el, act + 8.0, 3.0 * act, 3, "heads",
                  attention_core=True),
        Pointwise("CP ring accumulation of dK, dV", kv_el, 0.0, 3.0 * act, 1, "heads",
                  attention_core=True),
    ]  # fmt: skip
