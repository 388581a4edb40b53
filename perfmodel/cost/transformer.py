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

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .ops import Block, Collective, FusedAttention, Gemm, Pointwise, Transfer, tag


@dataclass(frozen=True)
class LayerShape:
    """The numbers of a model that its layers' shapes are made of (SPEC 2, SPEC 11)."""

    hidden: int                  # h
    heads: int                   # a
    groups: int                  # g, key/value heads (GQA); = a for MHA
    ffn: int                     # f, inner size of the dense MLP
    vocab: int                   # V
    gated: bool                  # SwiGLU/GeGLU: gate and up projections (3 MLP GEMMs), else 2
    bias: bool                   # linear layers carry biases
    norm: Literal["layernorm", "rmsnorm"]
    learned_positions: bool      # learned position embedding (s h parameters), else RoPE
    tied: bool                   # the LM head shares the word embedding
    head_dim: int = 0            # d; 0: h / a
    activation: str = ""         # gelu, squared-relu, swiglu, geglu ("": gelu or swiglu by `gated`)
    experts: int = 0             # routed experts e (0: dense model)
    top_k: int = 1
    moe_ffn: int = 0             # f_e
    shared_ffn: int = 0          # inner size of the shared experts, all together
    imbalance: float = 1.0       # busiest expert rank's tokens over the mean
    q_lora: int = 0              # MLA (DeepSeek-V2/V3); kv_lora > 0 means MLA
    kv_lora: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head: int = 0
    qk_norm: bool = False        # a norm on each head's queries and keys
    sandwich: bool = False       # post-attention and post-MLP norms too (Gemma 2)
    window: int = 0              # sliding-window keys (0: none)
    window_share: float = 0.0    # share of the layers with the window
    chunk: int = 0               # chunked attention (Llama 4): keys only within a chunk of this many tokens
    chunk_share: float = 0.0

    @classmethod
    def of(cls, model) -> "LayerShape":
        """From a specs.Model (read by attribute, so cost/ stays free of the specs)."""
        moe = model.num_moe_experts is not None
        return cls(hidden=model.hidden_size, heads=model.num_attention_heads, groups=model.groups,
                   ffn=model.ffn, vocab=model.vocab_size, gated=model.gated, bias=model.has_bias,
                   norm=model.norm, learned_positions=model.position_embedding == "learned",
                   tied=model.tied_embeddings, head_dim=model.head_dim, activation=model.mlp,
                   experts=model.num_moe_experts or 0, top_k=model.moe_router_topk if moe else 1,
                   moe_ffn=(model.moe_ffn_hidden_size or model.ffn) if moe else 0,
                   shared_ffn=(model.moe_shared_expert_intermediate_size or 0) if moe else 0,
                   imbalance=model.moe_load_imbalance if moe else 1.0, q_lora=model.q_lora_rank or 0,
                   kv_lora=model.kv_lora_rank or 0, qk_nope=model.qk_head_dim or 0,
                   qk_rope=model.qk_pos_emb_head_dim or 0, v_head=model.v_head_dim or 0,
                   qk_norm=model.qk_layernorm, sandwich=model.sandwich_norm, window=model.sliding_window or 0,
                   window_share=model.sliding_window_fraction if model.sliding_window else 0.0,
                   chunk=model.attention_chunk_size or 0,
                   chunk_share=model.chunked_attention_fraction if model.attention_chunk_size else 0.0)

    @property
    def d(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of the attention output (a x d; MLA: a x v_head_dim)."""
        return self.heads * (self.v_head if self.kv_lora else self.d)

    @property
    def kv_dim(self) -> int:
        return self.groups * self.d

    @property
    def norm_params(self) -> int:
        """gamma and beta (LayerNorm) or gamma alone (RMSNorm), per norm."""
        return (2 if self.norm == "layernorm" else 1) * self.hidden

    def executed_attention(self, s: int, causal: bool) -> float:
        """Share of the s x s score blocks a fused kernel runs: half under a causal mask; a causal window
        of w keys runs w/s - w^2/(2 s^2) of them (every query sees min(position, w) keys); causal chunks
        of c tokens run c/(2 s) of them. Averaged over the layers of each kind of attention."""
        if not causal:
            return 1.0
        w = min(self.window, s) if self.window else s
        windowed = w / s - w * w / (2.0 * s * s)
        c = min(self.chunk, s) if self.chunk else s
        chunked = c / (2.0 * s)
        full = 1 - self.window_share - self.chunk_share
        return full * 0.5 + self.window_share * windowed + self.chunk_share * chunked

    @property
    def act_name(self) -> str:
        return self.activation or ("swiglu" if self.gated else "gelu")


@dataclass(frozen=True)
class Options:
    """Kernel choices that change the op list: byte widths, the framework's fusions, CP's exchange."""

    gemm_bytes: int = 2              # bytes per GEMM operand element
    act_bytes: int = 2               # stored activations and elementwise kernels (>= 16-bit)
    flash: bool = False              # fused attention kernel
    causal: bool = True              # a fused kernel skips the masked half of a causal attention
    persist_ln: bool = True          # single-pass layernorm backward
    grad_accum_bytes: float = 0.0    # bytes per weight of an unfused gradient accumulation, 0 if fused
    cp_comm: Literal["p2p", "a2a"] = "p2p"
    dispatcher: Literal["alltoall", "allgather", "deepep"] = "alltoall"
    a2a_overlap: bool = False        # EP all-to-alls hidden under another micro-batch's expert GEMMs
    dropout: bool = True             # hidden and attention dropout (GPT's 0.1; Llama-style runs use none)
    bias_fused: bool = False         # biases added in the GEMM epilogue (Transformer Engine)
    fused_ce: bool = False           # fused vocab-parallel cross-entropy on 16-bit logits
    tp_overlap_ub: bool = False      # every TP collective under its GEMM (TE userbuffers)
    fp8_param_gather: bool = False   # FP8 weights cast once per step, not per micro-batch


@dataclass(frozen=True)
class Split:
    """How one rank's share of a micro-batch is cut: b sequences of s tokens, TP degree t (SP on or
    off), CP degree cp, EP degree ep and expert-TP degree etp (arrays over configurations)."""

    b: np.ndarray
    s: int
    t: np.ndarray
    sp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray

    @classmethod
    def of(cls, b, s, t, sp, cp=1, ep=1, etp=1) -> "Split":
        f = lambda x: np.asarray(x, dtype=float)  # noqa: E731
        return cls(f(b), s, f(t), np.asarray(sp, dtype=bool), f(cp), f(ep), f(etp))

    @property
    def tokens(self):
        """Tokens of the micro-batch on this rank's CP shard: b s / cp."""
        return self.b * self.s / self.cp

    @property
    def tok(self):
        """Token-wise regions are split t ways under SP."""
        return np.where(self.sp, self.t, 1.0)


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


def _tp_collective(name: str, message, column_gemm: str, row_gemm: str = "", ub: bool = False) -> Collective:
    """Forward g after a row-parallel GEMM, backward f at the column-parallel input, overlapped with
    that GEMM's weight gradient (Megatron's asynchronous TP all-reduce; Korthikanti 2022, Sec. 6.2).
    SP: reduce-scatter here and all-gather before the next GEMM; backward the gradient's all-gather
    (exposed), the input's re-gather under dgrad, the reduce-scatter under wgrad. With ``ub``
    (Transformer Engine's userbuffers, --tp-comm-overlap) the forward collectives and the exposed
    backward all-gather are split into chunks pipelined with the row- and column-parallel GEMMs."""
    under_row = (row_gemm, "fwd") if ub and row_gemm else None
    under_col = (column_gemm, "fwd") if ub else None
    under_dgrad = (row_gemm, "dgrad") if ub and row_gemm else None
    return Collective(name, "tp", message,
                      fwd=(Transfer("all-reduce", "no_sp", under_row), Transfer("reduce-scatter", "sp", under_row),
                           Transfer("all-gather", "sp", under_col)),
                      bwd=(Transfer("all-reduce", "no_sp", (column_gemm, "wgrad")),
                           Transfer("all-gather", "sp", under_dgrad),
                           Transfer("all-gather", "sp", (column_gemm, "dgrad")),
                           Transfer("reduce-scatter", "sp", (column_gemm, "wgrad"))))


def _residual(m: LayerShape, o: Options, which: str, elements) -> Pointwise:
    """The residual add after a block. With dropout, Megatron's fused bias-dropout-add: read x and the
    residual, write the sum and a 1-byte mask; backward reads dy and the mask, writes dx (the residual's
    gradient is dy itself), plus the bias-gradient reduction. Without dropout a plain add (read two,
    write one) whose backward passes dy straight through."""
    act = o.act_bytes
    if not o.dropout:
        return Pointwise(f"residual add {which}", elements, 3 * act, 0.0, 1, "tokens")
    bwd = 2 * act + 1 + (act if m.bias and not o.bias_fused else 0)
    return Pointwise(f"bias-dropout-add {which}", elements, 3 * act + 1, bwd, 3, "tokens", saved=elements)


def _activation(m: LayerShape, act: int, name: str, elements, bias: bool, saved) -> Pointwise:
    """The MLP's activation kernel on ``elements`` outputs of its first GEMM. Gated (SwiGLU, GeGLU): read
    gate and up, write the product; backward reads both and dy, writes both gradients. GELU (fused
    with the bias) and squared ReLU: read x, write y; backward reads dy and x, writes dx, plus the
    bias-gradient reduction."""
    if m.gated:
        return Pointwise(name or m.act_name, elements, 3 * act, 5 * act, 4, "column", saved=saved)
    label = name or ("bias-gelu" if m.act_name == "gelu" else m.act_name)
    return Pointwise(label, elements, 2 * act, 3 * act + (act if bias else 0), 8, "column", saved=saved)


def decoder_layer(m: LayerShape, o: Options, b, s: int, t, sp, cp=1, ep=1, etp=1, moe: bool = False) -> Block:
    """One transformer layer on one rank for a micro-batch of b sequences (SPEC 5): attention (MHA/GQA
    or MLA) and a dense MLP, or a mixture-of-experts FFN when ``moe``."""
    x = Split.of(b, s, t, sp, cp, ep, etp)
    act, h = o.act_bytes, m.hidden
    M, tok = x.tokens, x.tok
    ops = attention_ops(m, o, x)
    ops += tag([Pointwise("layernorm 2", M * h / tok, 2 * act, layernorm_backward_bytes(act, o.persist_ln), 8,
                          "tokens", m.norm_params, saved=act * M * h / tok)], "layernorm")
    ops += moe_ops(m, o, x) if moe else tag(mlp_ops(m, o, x), "mlp")
    if m.sandwich:
        ops.append(Pointwise("post-MLP norm", M * h / tok, 2 * act, layernorm_backward_bytes(act, o.persist_ln), 8,
                             "tokens", m.norm_params, saved=act * M * h / tok))
    ops.append(_residual(m, o, "2", M * h / tok))
    ops.append(Pointwise("residual gradient add 2", M * h / tok, 0.0, 3 * act, 1, "tokens"))
    if o.gemm_bytes == 1:
        # Transformer Engine keeps the FP8 copy of each weight GEMM's input for its weight gradient: 1 B an
        # element, not 2
        ops = [replace(op, saved=op.saved * 0.5) if isinstance(op, Gemm) and op.params and op.shard != "tokens"
               else op for op in ops]
        ops += fp8_casts(ops, o, x)
    if o.grad_accum_bytes:
        # unfused weight-gradient accumulation: main_grad += grad over every weight of the layer,
        # once per micro-batch in backward (read the new gradient and the buffer, write the buffer)
        weights = sum(op.K * op.N * op.batch for op in ops if isinstance(op, Gemm) and op.params) + 0 * x.b
        ops.append(Pointwise("weight-gradient accumulation", weights, 0.0, o.grad_accum_bytes, 1, "column"))
    return Block("MoE layer" if moe else "decoder layer", tuple(ops), input_bytes=act * M * h / tok)


# Transformer Engine fuses the FP8 cast of these GEMMs' inputs into the op before them (LayerNormLinear,
# LayerNormMLP: the norm or the activation writes FP8 directly)
_FP8_FUSED_INPUTS = {"QKV projection", "MLP up", "MLP gate+up", "MLP down", "Q down-projection",
                     "KV down-projection", "shared expert up", "shared expert down"}


def fp8_casts(ops: list, o: Options, x: Split) -> list:
    """The memory-bound casts FP8 GEMMs need (Micikevicius et al. 2022; Transformer Engine): each GEMM
    input not already written in FP8 by the op before it is read in 16-bit and written in FP8 with a
    transposed copy for the weight gradient (2 + 1 + 1 B per element); in the backward every output
    gradient is cast the same way; the weights are cast (with their transposes) once per micro-batch, or
    once per step with the FP8 parameter gather. The router stays in 16/32-bit. Delayed scaling's amax
    bookkeeping rides in these kernels."""
    weights = [g for g in ops if isinstance(g, Gemm) and g.params and g.shard != "tokens"]
    if not weights:
        return []
    inputs = sum((g.M * g.K * g.batch for g in weights if g.name not in _FP8_FUSED_INPUTS), 0.0 * x.b)
    grads = sum((g.M * g.N * g.batch for g in weights), 0.0 * x.b)
    params = sum((g.K * g.N * g.batch for g in weights), 0.0 * x.b)
    out = [Pointwise("FP8 cast of GEMM inputs", inputs, 4.0, 0.0, 1, "column"),
           Pointwise("FP8 cast of output gradients", grads, 0.0, 4.0, 1, "column")]
    if not o.fp8_param_gather:
        out.append(Pointwise("FP8 cast of weights", params, 4.0, 0.0, 1, "column"))
    return out


def attention_ops(m: LayerShape, o: Options, x: Split) -> list:
    """The attention half of a layer: norm, projections, core, TP communication, residual."""
    act, h = o.act_bytes, m.hidden
    M, t, tok = x.tokens, x.t, x.tok
    ln_bwd = layernorm_backward_bytes(act, o.persist_ln)
    ops: list = tag([Pointwise("layernorm 1", M * h / tok, 2 * act, ln_bwd, 8, "tokens", m.norm_params,
                               saved=act * M * h / tok)], "layernorm")
    if m.kv_lora:
        ops += _mla_projections(m, o, x)
        first = "KV up-projection"
    else:
        qkv_n = m.q_dim + 2 * m.kv_dim
        ops.append(Gemm("QKV projection", M, h, qkv_n / t, 1, "column", h * qkv_n + (qkv_n if m.bias else 0),
                        saved=act * M * h / tok))
        if m.bias and not o.bias_fused:  # output += bias after the GEMM; backward: bias gradient, a reduction
            ops.append(Pointwise("QKV bias add", M * qkv_n / t, 2 * act, act, 1, "column"))
        if m.qk_norm:  # RMSNorm over each head's d channels of Q and of K (gamma: d each)
            qk_el = M * (m.q_dim + m.kv_dim) / t
            ops.append(Pointwise("Q and K norms", qk_el, 2 * act, ln_bwd, 8, "heads", 2 * m.d, saved=act * qk_el))
        first = "QKV projection"
    ops += attention_core(m, o, x)
    if not m.kv_lora:
        # backward: the q, k, v gradients are concatenated into the fused QKV gradient (split's backward)
        ops.append(Pointwise("QKV gradient concat", M * (m.q_dim + 2 * m.kv_dim) / t, 0.0, 2 * act, 0, "column"))
    ops.append(Gemm("output projection", M, m.q_dim / t, h, 1, "row", m.q_dim * h + (h if m.bias else 0),
                    saved=act * M * m.q_dim / t))
    ops.append(_tp_collective("TP comm after attention", M * h * act, first, "output projection", o.tp_overlap_ub))
    if m.sandwich:  # Gemma 2: the attention output is normed before the residual add
        ops.append(Pointwise("post-attention norm", M * h / tok, 2 * act, ln_bwd, 8, "tokens", m.norm_params,
                             saved=act * M * h / tok))
    ops.append(_residual(m, o, "1", M * h / tok))
    # the residual branch point's two gradients (through the norm, and straight) are summed
    ops.append(Pointwise("residual gradient add 1", M * h / tok, 0.0, 3 * act, 1, "tokens"))
    return ops


def _mla_projections(m: LayerShape, o: Options, x: Split) -> list:
    """Multi-head latent attention (DeepSeek-V2, Sec. 2.1; Megatron-Core MLA): queries and keys/values
    pass through low-rank latents. The down-projections are small and replicated over TP (each rank
    runs them on all its tokens); the up-projections are column-parallel by heads. The keys' RoPE part
    (qk_rope) is shared by all heads and comes straight from the KV down-projection."""
    act, h, a = o.act_bytes, m.hidden, m.heads
    M, t = x.tokens, x.t
    qk = m.qk_nope + m.qk_rope
    ops: list = []
    if m.q_lora:
        ops += [Gemm("Q down-projection", M, h, m.q_lora, 1, "replicated", h * m.q_lora, saved=act * M * h),
                Pointwise("Q norm", M * m.q_lora, 2 * act, 3 * act, 8, "replicated", m.q_lora,
                          saved=act * M * m.q_lora),
                Gemm("Q up-projection", M, m.q_lora, a * qk / t, 1, "column", m.q_lora * a * qk,
                     saved=act * M * m.q_lora, modules=("mla_up_proj",))]
    else:
        ops.append(Gemm("Q projection", M, h, a * qk / t, 1, "column", h * a * qk, saved=act * M * h))
    kv_down = m.kv_lora + m.qk_rope
    ops += [Gemm("KV down-projection", M, h, kv_down, 1, "replicated", h * kv_down, saved=act * M * h),
            Pointwise("KV norm", M * m.kv_lora, 2 * act, 3 * act, 8, "replicated", m.kv_lora,
                      saved=act * M * m.kv_lora),
            Gemm("KV up-projection", M, m.kv_lora, a * (m.qk_nope + m.v_head) / t, 1, "column",
                 m.kv_lora * a * (m.qk_nope + m.v_head), saved=act * M * m.kv_lora, modules=("mla_up_proj",))]
    return ops


def attention_core(m: LayerShape, o: Options, x: Split) -> list:
    """softmax(Q K^T / sqrt(d)) V over a/t heads per rank: the part selective recompute repeats.

    Unfused (Megatron's CoreAttention): batched QK^T and attention x V GEMMs over the head dimension,
    the fused scale-mask-softmax (reads and writes s^2 per head; backward reads y and dy, writes dx),
    dropout on the probabilities (1-byte mask), and the context's permute + contiguous copy
    [b a/t, s, d] -> [s, b, h/t]. Fused (flash): one kernel with the same GEMM FLOPs, the masked half
    skipped when causal, that reads Q, K, V and writes the output (and keeps the fp32 softmax
    statistics for its backward).

    Context parallelism: each rank's queries are its s/cp tokens and its keys the whole sequence, met
    chunk by chunk; with causal load balancing (each rank holds chunks i and 2cp-1-i) every rank does
    1/cp of the work. The ring (p2p) variant passes K and V around the cp ranks in cp-1 steps, each
    overlapped with the attention on the chunk at hand; the all-to-all (Ulysses) variant trades the
    sequence split for a head split before the core and back after it (Jacobs et al. 2023)."""
    act, b, s, t, cp = o.act_bytes, x.b, x.s, x.t, x.cp
    qk_d = (m.qk_nope + m.qk_rope) if m.kv_lora else m.d
    v_d = m.v_head if m.kv_lora else m.d
    k_width = m.heads * qk_d if m.kv_lora else m.kv_dim     # per-token width of K and of V
    v_width = m.heads * v_d if m.kv_lora else m.kv_dim
    M = x.tokens
    nb = b * m.heads / t                                    # independent (s x d)(d x s) products
    sq = s / cp
    q_bytes, k_bytes, v_bytes = act * M * m.heads * qk_d / t, act * M * k_width / t, act * M * v_width / t
    scores = Gemm("attention scores QK^T", sq, qk_d, s, nb, "heads", attention_core=True,
                  saved=q_bytes + k_bytes)
    context = Gemm("attention x V", sq, s, v_d, nb, "heads", attention_core=True, saved=v_bytes,
                   saved_core=act * nb * sq * s if o.dropout else 0.0)  # the dropout output (else the softmax's)
    exchange = _cp_exchange(m, o, x, q_bytes + k_bytes + v_bytes, k_bytes + v_bytes)
    before, after = list(exchange[:1]), list(exchange[1:])
    if o.flash:
        io = act * M * (2 * m.heads * qk_d + 2 * v_width) / t
        lse = 4.0 * nb * sq  # fp32 log-sum-exp per query row and head
        core = FusedAttention("attention core (flash)", (scores, context), io, m.executed_attention(s, o.causal),
                              saved=q_bytes + k_bytes + v_bytes + lse)
        return before + [core] + after
    return before + [scores,
                      Pointwise("softmax", nb * sq * s, 2 * act, 3 * act, 5, "heads", attention_core=True,
                                saved_core=act * nb * sq * s),
                      *([Pointwise("attention dropout", nb * sq * s, 2 * act + 1, 2 * act + 1, 1, "heads",
                                   attention_core=True, saved_core=nb * sq * s)] if o.dropout else []),
                      context,
                      Pointwise("context transpose", M * m.q_dim / t, 2 * act, 2 * act, 0, "heads",
                                attention_core=True)] + after


def _cp_exchange(m: LayerShape, o: Options, x: Split, qkv_bytes, kv_bytes) -> tuple:
    """(before the core, after it): the CP ring's K/V passes, or Ulysses' two all-to-alls. Empty lists'
    worth of time at cp = 1 (a ring of one rank has no step; an all-to-all of one rank moves nothing)."""
    core = "attention core (flash)" if o.flash else "attention scores QK^T"
    if not np.any(x.cp > 1):
        return ()
    if o.cp_comm == "a2a":
        out_bytes = o.act_bytes * x.tokens * m.q_dim / x.t
        return (Collective("CP all-to-all of Q, K, V", "cp", qkv_bytes, fwd=(Transfer("all-to-all"),),
                           bwd=(Transfer("all-to-all"),)),
                Collective("CP all-to-all of the output", "cp", out_bytes, fwd=(Transfer("all-to-all"),),
                           bwd=(Transfer("all-to-all"),)))
    steps = x.cp - 1
    ring = Collective("CP ring exchange of K, V", "cp", kv_bytes,
                      fwd=(Transfer("p2p", behind=(core, "fwd"), repeat=steps, share=1 / x.cp),),
                      bwd=(Transfer("p2p", behind=(core, "bwd"), repeat=steps, share=1 / x.cp, scale=2.0),))
    return (ring,)


def mlp_ops(m: LayerShape, o: Options, x: Split) -> list:
    """Dense MLP: column-parallel up (gate+up when gated), the activation, row-parallel down, the TP
    collective after it."""
    act, h, f = o.act_bytes, m.hidden, m.ffn
    M, t, tok = x.tokens, x.t, x.tok
    n = (2 if m.gated else 1) * f
    up = "MLP gate+up" if m.gated else "MLP up"
    return [Gemm(up, M, h, n / t, 1, "column", h * n + (n if m.bias else 0), saved=act * M * h / tok),
            _activation(m, act, "", M * f / t, m.bias, saved=act * M * n / t),
            Gemm("MLP down", M, f / t, h, 1, "row", f * h + (h if m.bias else 0), saved=act * M * f / t),
            _tp_collective("TP comm after MLP", M * h * act, up, "MLP down", o.tp_overlap_ub)]


def moe_ops(m: LayerShape, o: Options, x: Split) -> list:
    """Mixture-of-experts FFN (Megatron-Core MoE with the all-to-all dispatcher; SPEC 11): a router GEMM
    h x e on the rank's tokens (s/t of them under SP, which Megatron requires for MoE with TP), the
    tokens permuted by expert and sent to their k experts by an all-to-all over the EP group
    ((ep-1)/ep of them leave the rank), the local experts' grouped GEMMs, and the way back. With
    balanced routing every expert rank receives as many token copies as it sends; the busiest rank
    gets ``imbalance`` times that, which sets the pace of its GEMMs and of the all-to-all. Expert TP
    (etp) splits each expert's inner size and gathers the tokens over its group first. Shared
    experts run on every token as a TP-split dense MLP. The dispatcher may instead all-gather the EP
    group's tokens (Megatron's allgather dispatcher), or send each token once per node (DeepEP)."""
    act, h, E, k, fe = o.act_bytes, m.hidden, m.experts, m.top_k, m.moe_ffn
    M, t, tok, ep, etp = x.tokens, x.t, x.tok, x.ep, x.etp
    n_loc = M / tok                                     # this rank's tokens
    copies = n_loc * k                                  # token copies it dispatches (= receives, balanced)
    imb = m.imbalance
    n_e = (2 if m.gated else 1) * fe
    rows = copies * etp * ep / E                        # rows per local expert, mean
    local = E / ep
    if o.dispatcher == "allgather":  # every EP rank gathers all the group's tokens, keeps its experts' share
        dispatch = Collective("EP dispatch (all-gather)", "ep", act * n_loc * ep * h * imb,
                              fwd=(Transfer("all-gather"),), bwd=(Transfer("reduce-scatter"),))
        combine = Collective("EP combine (reduce-scatter)", "ep", act * n_loc * ep * h * imb,
                             fwd=(Transfer("reduce-scatter"),), bwd=(Transfer("all-gather"),))
    else:
        k_dedup = k if o.dispatcher == "deepep" else 0
        fc1 = "expert fc1 (grouped)"
        # overlapped (Megatron-Core's EP overlap): each all-to-all hides under the expert GEMMs of the
        # micro-batch it is interleaved with, forward under a forward, backward under a backward
        fwd = (Transfer("all-to-all", behind=(fc1, "fwd") if o.a2a_overlap else None),)
        bwd = (Transfer("all-to-all", behind=(fc1, "bwd") if o.a2a_overlap else None),)
        dispatch = Collective("EP dispatch (all-to-all)", "ep", act * copies * h * imb, fwd=fwd, bwd=bwd,
                              dedup_k=k_dedup)
        combine = Collective("EP combine (all-to-all)", "ep", act * copies * h * imb, fwd=fwd, bwd=bwd,
                             dedup_k=k_dedup)
    ops: list = [Gemm("router", n_loc, h, E, 1, "tokens", h * E, saved=act * n_loc * h + 4.0 * n_loc * E),
                 Pointwise("token permute", copies * h * imb, 2 * act, 2 * act, 0, "experts"), dispatch]
    expert_act = tag([_activation(m, act, "expert " + m.act_name, rows * local * fe / etp * imb, False,
                                  saved=act * rows * local * n_e / etp)], "moe_act")
    gathered = act * copies * etp * h * imb
    etp_in = Collective("ETP all-gather of expert tokens", "etp", gathered, fwd=(Transfer("all-gather"),),
                        bwd=(Transfer("reduce-scatter"),))
    etp_out = Collective("ETP reduce-scatter of expert outputs", "etp", gathered,
                         fwd=(Transfer("reduce-scatter"),), bwd=(Transfer("all-gather"),))
    ops += [etp_in,
            Gemm("expert fc1 (grouped)", rows, h, n_e / etp, local, "experts", E * h * n_e,
                 saved=act * rows * local * h, time_rows=rows * imb),
            *expert_act,
            Gemm("expert fc2 (grouped)", rows, fe / etp, h, local, "experts", E * fe * h,
                 saved=act * rows * local * fe / etp, time_rows=rows * imb),
            etp_out, combine,
            Pointwise("token unpermute", copies * h * imb, 2 * act, 2 * act, 1, "experts")]
    ops = tag(ops, "moe")
    if m.shared_ffn:
        fs, n_s = m.shared_ffn, (2 if m.gated else 1) * m.shared_ffn
        ops += tag([Gemm("shared expert up", M, h, n_s / t, 1, "column", h * n_s, saved=act * M * h / tok),
                    _activation(m, act, "shared expert " + m.act_name, M * fs / t, False, saved=act * M * n_s / t),
                    Gemm("shared expert down", M, fs / t, h, 1, "row", fs * h, saved=act * M * fs / t),
                    _tp_collective("TP comm of the shared expert", M * h * act, "shared expert up")],
                   "shared_experts")
    return ops


def lm_head(m: LayerShape, o: Options, b, s: int, t, sp, cp=1) -> Block:
    """Last stage: final norm, the TP collective at the logits input, logits GEMM 2bshV/t and the fp32
    vocab-parallel loss. The logits GEMM is a column-parallel linear (Megatron-LM parallel_lm_logits):
    without SP its input gradient is all-reduced over TP in the backward, behind the weight gradient;
    under SP its input is all-gathered in the forward (exposed) and, in the backward, gathered again
    behind the input-gradient GEMM and reduce-scattered behind the weight gradient."""
    x = Split.of(b, s, t, sp, cp)
    act, h, V = o.act_bytes, m.hidden, m.vocab
    M, t, tok = x.tokens, x.t, x.tok
    logits = Gemm("logits", M, h, V / t, 1, "column", 0 if m.tied else V * h)
    comm = Collective("TP comm at the logits input", "tp", M * h * act,
                      fwd=(Transfer("all-gather", "sp"),),
                      bwd=(Transfer("all-gather", "sp", (logits.name, "dgrad")),
                           Transfer("reduce-scatter", "sp", (logits.name, "wgrad")),
                           Transfer("all-reduce", "no_sp", (logits.name, "wgrad"))))
    return Block("LM head", (
        Pointwise("final layernorm", M * h / tok, 2 * act, layernorm_backward_bytes(act, o.persist_ln), 8,
                  "tokens", m.norm_params),
        comm, logits,
        _cross_entropy(o, M * V / t)))


def _cross_entropy(o: Options, logits) -> Pointwise:
    """Vocab-parallel cross-entropy over the [b s, V/t] logits. Unfused, on fp32 logits as Megatron-LM
    runs it (gpt_model: output.float(); mpu/cross_entropy.py): forward cast 2+4, max 4, sub_ 4+4, exp 4+4,
    sum 4, div_ 4+4 = 38 B per logit; backward mul_ 4+4 and the cast's backward 4+2 = 14 B per logit.
    Fused (Megatron-Core --cross-entropy-loss-fusion): the forward reads the 16-bit logits once (max,
    sum of exponentials and the target in registers), the backward reads them again and writes the
    gradient: 2 and 4 B per logit."""
    if o.fused_ce:
        return Pointwise("cross-entropy (fused)", logits, 2.0, 4.0, 6, "column")
    return Pointwise("cross-entropy (fp32)", logits, 38.0, 14.0, 6, "column")


def embedding(m: LayerShape, o: Options, b, s: int, t, sp, cp=1) -> Block:
    """First stage: the vocab-parallel lookup, its TP reduction, dropout (memory-bound), backward
    scatter-add. Each rank looks up only its vocabulary shard and zeroes the other rows, so the b s h
    output is summed over TP: an all-reduce in the forward (its backward is the identity), or under
    SP a reduce-scatter whose backward is an all-gather (Megatron-LM VocabParallelEmbedding and
    language_model.Embedding). Parameters: V h word embedding, plus s h learned positions."""
    x = Split.of(b, s, t, sp, cp)
    act, h = o.act_bytes, m.hidden
    M, tok = x.tokens, x.tok
    comm = Collective("TP reduction of the embedding", "tp", M * h * act,
                      fwd=(Transfer("all-reduce", "no_sp"), Transfer("reduce-scatter", "sp")),
                      bwd=(Transfer("all-gather", "sp"),))
    params = m.vocab * h + (s * h if m.learned_positions else 0)
    if o.dropout:
        lookup = Pointwise("embedding + dropout", M * h / tok, 3 * act + 1, 3 * act + 1, 1, "tokens", params)
    else:  # read the rows, write the output; backward: scatter-add into the table's gradient
        lookup = Pointwise("embedding", M * h / tok, 2 * act, 3 * act, 1, "tokens", params)
    return Block("embedding", (comm, lookup))
