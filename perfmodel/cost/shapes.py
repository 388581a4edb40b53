"""The shape of a transformer layer, the knobs that change its kernels, the per-rank split of a
configuration, and the kernels every layer part shares (TP collectives, residual adds, activations,
FP8 casts): what transformer.py and attention.py build layers from.

Shapes are per rank and per micro-batch of b sequences of s tokens, numpy arrays over
configurations; transformer.py gives the conventions and their sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from perfmodel.cost import Array, Num

from .ops import Collective, Gemm, OpDesc, Pointwise, Transfer

if TYPE_CHECKING:
    from perfmodel.specs.model import Model


@dataclass(frozen=True)
class LayerShape:
    """The numbers of a model that its layers' shapes are made of (SPEC 2, SPEC 11)."""

    hidden: int  # h
    heads: int  # a
    groups: int  # g, key/value heads (GQA); = a for MHA
    ffn: int  # f, inner size of the dense MLP
    vocab: int  # V
    gated: bool  # SwiGLU/GeGLU: gate and up projections (3 MLP GEMMs), else 2
    bias: bool  # linear layers carry biases
    norm: Literal["layernorm", "rmsnorm"]
    learned_positions: bool  # learned position embedding (s h parameters), else RoPE
    tied: bool  # the LM head shares the word embedding
    head_dim: int = 0  # d; 0: h / a
    activation: str = ""  # gelu, squared-relu, swiglu, geglu ("": gelu or swiglu by `gated`)
    experts: int = 0  # routed experts e (0: dense model)
    top_k: int = 1
    # group-limited routing: the experts in `route_groups` groups, a token within `route_topk`
    route_groups: int = 0
    route_topk: int = 0
    moe_ffn: int = 0  # f_e
    shared_ffn: int = 0  # inner size of the shared experts, all together
    imbalance: float = 1.0  # busiest expert rank's tokens over the mean
    padded: bool = False  # every expert's input padded to its capacity (token dropping)
    q_lora: int = 0  # MLA (DeepSeek-V2/V3); kv_lora > 0 means MLA
    kv_lora: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head: int = 0
    qk_norm: bool = False  # a norm on each head's queries and keys
    sandwich: bool = False  # post-attention and post-MLP norms too (Gemma 2)
    window: int = 0  # sliding-window keys (0: none)
    window_share: float = 0.0  # share of the layers with the window
    chunk: int = 0  # chunked attention (Llama 4): keys only within a chunk of this many tokens
    chunk_share: float = 0.0
    rope: bool = False  # rotary position embedding applied to q and k in every layer
    yarn: bool = False  # the RoPE is YaRN-scaled (an mscale and per-band frequencies)

    @classmethod
    def of(cls, model: Model) -> LayerShape:
        """From a specs.Model (read by attribute, so cost/ stays free of the specs)."""
        moe = model.num_moe_experts is not None
        return cls(
            hidden=model.hidden_size,
            heads=model.num_attention_heads,
            groups=model.groups,
            ffn=model.ffn,
            vocab=model.vocab_size,
            gated=model.gated,
            bias=model.has_bias,
            norm=model.norm,
            learned_positions=model.position_embedding == "learned",
            rope=model.position_embedding in ("rope", "yarn"),
            yarn=model.position_embedding == "yarn",
            tied=model.tied_embeddings,
            head_dim=model.head_dim,
            activation=model.mlp,
            experts=model.num_moe_experts or 0,
            top_k=model.moe_router_topk if moe else 1,
            route_groups=(model.moe_router_num_groups or 0) if moe else 0,
            route_topk=(model.moe_router_group_topk or 0) if moe else 0,
            moe_ffn=(model.moe_ffn_hidden_size or model.ffn) if moe else 0,
            shared_ffn=(model.moe_shared_expert_intermediate_size or 0) if moe else 0,
            imbalance=model.load_imbalance if moe else 1.0,
            padded=bool(moe and model.moe_pad_expert_input_to_capacity),
            q_lora=model.q_lora_rank or 0,
            kv_lora=model.kv_lora_rank or 0,
            qk_nope=model.qk_head_dim or 0,
            qk_rope=model.qk_pos_emb_head_dim or 0,
            v_head=model.v_head_dim or 0,
            qk_norm=model.qk_layernorm,
            sandwich=model.sandwich_norm,
            window=model.sliding_window or 0,
            window_share=model.sliding_window_fraction if model.sliding_window else 0.0,
            chunk=model.attention_chunk_size or 0,
            chunk_share=model.chunked_attention_fraction if model.attention_chunk_size else 0.0,
        )

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
        """Share of the s x s score blocks a fused kernel runs: half under a causal mask; a causal
        window of w keys runs w/s - w^2/(2 s^2) of them (every query sees min(position, w) keys);
        causal chunks of c tokens run c/(2 s) of them. Averaged over the layers of each kind of
        attention."""
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
    """Kernel choices that change the op list: byte widths, the framework's fusions, CP's
    exchange."""

    gemm_bytes: float = 2  # bytes per GEMM operand element (0.5 for NVFP4)
    scale_bytes: float = 0.0  # block-scale bytes per quantized element (MXFP8, NVFP4)
    act_bytes: int = 2  # stored activations and elementwise kernels (>= 16-bit)
    flash: bool = False  # fused attention kernel
    causal: bool = True  # a fused kernel skips the masked half of a causal attention
    persist_ln: bool = True  # single-pass layernorm backward
    # bytes per weight of an unfused gradient accumulation, 0 if fused
    grad_accum_bytes: float = 0.0
    # q, k, v gathered into flash-attn's varlen layout and the output scattered back (attention.py
    # varlen_copies)
    unpad: bool = False
    # HBM bytes per weight, every micro-batch, of FSDP1's flat-gradient preparation
    # (flat_gradient_bytes; 0: none)
    flat_grad_bytes: float = 0.0
    cp_comm: Literal["p2p", "a2a"] = "p2p"
    # deepep and hybridep: Megatron-Core's flex dispatcher, each token sent once per node (NVLink
    # domain for HybridEP) and fanned out there (cost/transformer.py _ep_exchange)
    dispatcher: Literal["alltoall", "allgather", "deepep", "hybridep"] = "alltoall"
    a2a_overlap: bool = False  # EP all-to-alls hidden under another micro-batch's expert GEMMs
    # bytes a dispatched element takes over the 16-bit act_bytes (FP8 dispatch: (1 + 4/128) / 2)
    dispatch_scale: float = 1.0
    dropout: bool = True  # hidden and attention dropout (GPT's 0.1; Llama-style runs use none)
    bias_fused: bool = False  # biases added in the GEMM epilogue (Transformer Engine)
    fused_ce: bool = False  # fused vocab-parallel cross-entropy on 16-bit logits
    # under FP8 the experts' SwiGLU input is cached in FP8 and its output recomputed (DeepSeek-V3
    # report Sec. 3.3.2)
    fp8_swiglu_cache: bool = False
    # bytes an element of the attention output cached once for both the core's backward and the
    # output projection's weight gradient (DeepSeek-V3 report Sec. 3.3.3: E5M6, 12 bits); 0: the
    # 16-bit output with the projection's own low-precision copy
    attn_out_bytes: float = 0.0
    # the column-wise (transposed) FP8 copy made in a pass of its own from the row-wise one
    fp8_transpose_pass: bool = False
    tp_overlap_ub: bool = False  # every TP collective under its GEMM (TE userbuffers)
    # FP8 weights cast once per step, not per micro-batch (FP8 parameter gather, or TE's weight
    # cache across a step's micro-batches)
    fp8_param_gather: bool = False
    # host time per local expert of a grouped GEMM pass (framework profile, fitted)
    expert_call_s: float = 0.0
    # Megatron-Core's MoE module: the alltoall dispatcher's sort by local expert, Transformer
    # Engine's FP8 row padding of the grouped GEMMs, the experts' fc2 bias added expert by expert
    # (cost/moe_kernels.py)
    megatron_moe: bool = False
    # YaRN RoPE in one fused kernel (False: Megatron-Core's PyTorch ops, cost/moe_kernels.py)
    yarn_rope_fused: bool = True
    # FP8 with current (tensorwise) scaling, Transformer Engine's Float8CurrentScalingQuantizer
    fp8_current: bool = False
    # fused: hand-fused kernels (Megatron, TE); eager: PyTorch ops one kernel each; compiled:
    # Inductor's fusion of each pointwise chain between GEMMs (torch.compile)
    pointwise: Literal["fused", "eager", "compiled"] = "fused"


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
    def of(cls, b: Num, s: int, t: Num, sp: Num, cp: Num = 1, ep: Num = 1, etp: Num = 1) -> Split:
        def f(x: Num) -> Array:
            return np.asarray(x, dtype=float)

        return cls(f(b), s, f(t), np.asarray(sp, dtype=bool), f(cp), f(ep), f(etp))

    @property
    def tokens(self) -> Num:
        """Tokens of the micro-batch on this rank's CP shard: b s / cp."""
        return np.asarray(self.b * self.s / self.cp)

    @property
    def tok(self) -> Num:
        """Token-wise regions are split t ways under SP."""
        return np.asarray(np.where(self.sp, self.t, 1.0))


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


def flat_gradient_bytes(act_bytes: int, reduce_bytes: int, flat: bool) -> float:
    """HBM bytes per weight that PyTorch FSDP1 (FullyShardedDataParallel, flat parameters) moves
    every micro-batch to ready a unit's unsharded gradient for its reduce-scatter, PyTorch 2.1
    (torch/distributed/fsdp): the original parameters are views of the flat parameter cut by
    torch.split (flat_param.py _get_unflat_views_aligned), whose backward concatenates their
    gradients into the flat gradient (read and write at the gradient's width, the activation
    dtype under mixed precision); _runtime_utils._post_backward_hook casts that gradient to the
    reduce dtype when they differ (read it, write the reduce width); the reduce-scatter hook
    divides it in place by the gradient pre-divide factor, which is above 1 for any group of 2
    or more ranks (algorithms/_comm_hooks/default_hooks.py reduce_scatter_hook and
    DefaultState._get_gradient_predivide_factor): read and write the reduce width. 18 B a
    weight with an fp32 reduction, 8 B with a bf16 one. Megatron's fused weight-gradient
    accumulation writes its fp32 buffer from the GEMM and reduces it in buckets: none
    (``flat`` False)."""
    if not flat:
        return 0.0
    cast = act_bytes + reduce_bytes if reduce_bytes != act_bytes else 0
    return float(2 * act_bytes + cast + 2 * reduce_bytes)


def gathered_bytes(o: Options) -> float:
    """What a TP all-gather moves per element over the 16-bit activation: under FP8 and MXFP8,
    Transformer Engine quantizes a column-parallel GEMM's input before sequence parallelism
    gathers it, and casts the row-parallel GEMM's output gradient before gathering it (TE 1.8
    module/layernorm_linear.py: the norm writes ln_out in FP8, then gather_along_first_dim;
    module/base.py grad_output_preprocess: "cast, transpose for efficient gather"), so those
    all-gathers move 1 B an element (and MXFP8's block scales); the reduce-scatters and
    all-reduces move the 16-bit GEMM outputs. NVFP4 recipes gather 16-bit (not shown otherwise)."""
    return (o.gemm_bytes + o.scale_bytes) / o.act_bytes if o.gemm_bytes == 1 else 1.0


def _tp_collective(
    name: str,
    message: Num,
    column_gemm: str,
    row_gemm: str = "",
    ub: bool = False,
    gathered: float = 1.0,
) -> Collective:
    """Forward g after a row-parallel GEMM, backward f at the column-parallel input, overlapped with
    that GEMM's weight gradient (Megatron's asynchronous TP all-reduce; Korthikanti 2022, Sec. 6.2).
    SP: reduce-scatter here and all-gather before the next GEMM; backward the gradient's all-gather
    (exposed), the input's re-gather under dgrad, the reduce-scatter under wgrad. With ``ub``
    (Transformer Engine's userbuffers, --tp-comm-overlap) the forward collectives and the exposed
    backward all-gather are split into chunks pipelined with the row- and column-parallel GEMMs.
    ``gathered``: the all-gathers' bytes an element over the message's (gathered_bytes)."""
    under_row = (row_gemm, "fwd") if ub and row_gemm else None
    under_col = (column_gemm, "fwd") if ub else None
    under_dgrad = (row_gemm, "dgrad") if ub and row_gemm else None
    return Collective(
        name,
        "tp",
        message,
        fwd=(
            Transfer("all-reduce", "no_sp", under_row),
            Transfer("reduce-scatter", "sp", under_row),
            Transfer("all-gather", "sp", under_col, scale=gathered),
        ),
        bwd=(
            Transfer("all-reduce", "no_sp", (column_gemm, "wgrad")),
            Transfer("all-gather", "sp", under_dgrad, scale=gathered),
            Transfer("all-gather", "sp", (column_gemm, "dgrad"), scale=gathered),
            Transfer("reduce-scatter", "sp", (column_gemm, "wgrad")),
        ),
    )


def _residual(m: LayerShape, o: Options, which: str, elements: Num) -> Pointwise:
    """The residual add after a block. With dropout, Megatron's fused bias-dropout-add: read x and
    the residual, write the sum and a 1-byte mask; backward reads dy and the mask, writes dx (the
    residual's gradient is dy itself), plus the bias-gradient reduction. Without dropout a plain add
    (read two, write one) whose backward passes dy straight through. Compiled, Inductor fuses the
    add into the norm that reads its sum: the sum is written once and never read back (one act an
    element fewer)."""
    act = o.act_bytes
    if not o.dropout:
        fwd = 2 * act if o.pointwise == "compiled" else 3 * act
        return Pointwise(f"residual add {which}", elements, fwd, 0.0, 1, "tokens")
    bwd = 2 * act + 1 + (act if m.bias and not o.bias_fused else 0)
    return Pointwise(
        f"bias-dropout-add {which}", elements, 3 * act + 1, bwd, 3, "tokens", saved=elements
    )


def residual_gradient_add(o: Options, which: str, elements: Num) -> Pointwise:
    """The residual branch point's two gradients (through the norm, and straight) summed: read two,
    write one; compiled, fused into the norm's backward (its dx is added as it is written)."""
    act = o.act_bytes
    bwd = 2 * act if o.pointwise == "compiled" else 3 * act
    return Pointwise(f"residual gradient add {which}", elements, 0.0, bwd, 1, "tokens")


# PyTorch 2.5's rms_norm is a composite op (aten/src/ATen/native/layer_norm.cpp rms_norm): in eager
# mode it runs as separate kernels on an fp32 copy: to(fp32) (read 2, write 4 B), pow (4 + 4),
# mean (4), mul by the rsqrt (4 + 4), type_as (4 + 2), times gamma (2 + 2): 36 B an element of a
# bf16 input, 18 activation widths; autograd's backward of those kernels reads and writes about 62
# B (31 widths), and it keeps the fp32 copy and the unweighted output (3 widths) for the backward
EAGER_RMSNORM = (18.0, 31.0, 3.0)


def hidden_norm(m: LayerShape, o: Options, name: str, elements: Num) -> Pointwise:
    """A LayerNorm/RMSNorm over the hidden size on ``elements`` values (h per token): read x, write
    y (2 x act bytes an element); backward as layernorm_backward_bytes; 8 FLOPs an element; the
    input saved for the backward; gamma (and beta) as parameters. PyTorch's LayerNorm is one ATen
    kernel in eager mode too; its RMSNorm is not (EAGER_RMSNORM)."""
    act = o.act_bytes
    fwd, bwd, saved = 2.0 * act, layernorm_backward_bytes(act, o.persist_ln), 1.0 * act
    if o.pointwise == "eager" and m.norm == "rmsnorm":
        fwd, bwd, saved = (x * act for x in EAGER_RMSNORM)
    return Pointwise(name, elements, fwd, bwd, 8, "tokens", m.norm_params, saved=saved * elements)


# Megatron-Core rope_utils._apply_rotary_pos_emb_bshd as PyTorch ops, per 16-bit element:
# rotate_half (neg of a half, cat: 1 + 2 widths), t * cos and rotate_half(t) * sin (2 + 2, the
# YaRN mscale folded into cos and sin), their sum (3) and the cat with the pass-through part (2):
# 12 widths in 6 kernels forward; autograd's backward reads and writes about as much
UNFUSED_ROPE = (12.0, 12.0, 6.0)


def rope(m: LayerShape, o: Options, elements: Num) -> list[Pointwise]:
    """Rotary embedding of q and k (``elements`` values on this rank). Fused (Transformer Engine's
    fused RoPE, Megatron's apply_rope_fusion) or compiled: read and write once, forward and
    backward. Eager, as torchtitan's apply_rotary_emb: to(fp32) (2 + 4 B), the complex multiply
    (4 + 4), type_as (4 + 2): 20 B an element each way. YaRN where the framework does not fuse it
    (``o.yarn_rope_fused``): Megatron-Bridge turns apply_rope_fusion off for any position
    embedding but plain RoPE (src/megatron/bridge/utils/fusions.py,
    validate_rope_fusion_compatibility, at v0.4.2), so gpt-oss's YaRN runs as UNFUSED_ROPE."""
    if not m.rope:
        return []
    act = o.act_bytes
    if m.yarn and not o.yarn_rope_fused and o.pointwise == "fused":
        fwd, bwd, k = UNFUSED_ROPE
        return [
            Pointwise("RoPE on q and k (YaRN, PyTorch ops)", elements, fwd * act, bwd * act, 6,
                      "heads", kernels=k)
        ]  # fmt: skip
    each = 10.0 * act if o.pointwise == "eager" else 2.0 * act
    return [Pointwise("RoPE on q and k", elements, each, each, 6, "heads")]


def _activation(
    m: LayerShape,
    act: int,
    name: str,
    elements: Num,
    bias: bool,
    saved: Num,
    pointwise: str = "fused",
) -> Pointwise:
    """The MLP's activation kernel on ``elements`` outputs of its first GEMM. Gated (SwiGLU, GeGLU):
    read gate and up, write the product; backward reads both and dy, writes both gradients. In
    PyTorch eager mode (F.silu(w1 x) * w3 x) that is two kernels: silu (read 1, write 1) and the
    product (read 2, write 1), whose backward reads dy, the silu output and up, writes both
    gradients, then silu's backward reads its gradient and the gate, writes dx (8 widths), keeping
    the silu output too. GELU (fused with the bias) and squared ReLU: read x, write y; backward
    reads dy and x, writes dx, plus the bias-gradient reduction."""
    if m.gated:
        if pointwise == "eager":
            return Pointwise(
                name or m.act_name, elements, 5 * act, 8 * act, 4, "column", saved=saved * 1.5
            )
        return Pointwise(name or m.act_name, elements, 3 * act, 5 * act, 4, "column", saved=saved)
    label = name or ("bias-gelu" if m.act_name == "gelu" else m.act_name)
    return Pointwise(
        label, elements, 2 * act, 3 * act + (act if bias else 0), 8, "column", saved=saved
    )


# Transformer Engine fuses the FP8 cast of these GEMMs' inputs into the op before them
# (LayerNormLinear, LayerNormMLP: the norm or the activation writes FP8 directly)
_FP8_FUSED_INPUTS = {
    "QKV projection",
    "MLP up",
    "MLP gate+up",
    "MLP down",
    "Q down-projection",
    "KV down-projection",
    "shared expert up",
    "shared expert down",
}


def fp8_casts(ops: list[OpDesc], o: Options, x: Split) -> list[OpDesc]:
    """The memory-bound casts FP8 (and MXFP8, NVFP4) GEMMs need (Micikevicius et al. 2022;
    Transformer Engine): each GEMM input not already written in FP8 by the op before it is read
    in 16-bit and written in FP8 with a transposed copy for the weight gradient (2 + 1 + 1 B per
    element); in the backward every output gradient is cast the same way; the weights are cast
    (with their transposes) once per micro-batch, or once per step with the FP8 parameter
    gather. The router stays in 16/32-bit. Delayed scaling's amax bookkeeping rides in these
    kernels. Where the transposed copy is made in a pass of its own (``o.fp8_transpose_pass``),
    that pass reads the row-wise copy back, one quantized element more a cast.

    Current (tensorwise) scaling in Transformer Engine (``o.fp8_current``; csrc/quantizer.cpp,
    Float8CurrentScalingQuantizer::quantize at the commit Megatron-Bridge v0.4.2 pins, 366798e)
    runs three kernels a tensor: the amax (a read of the 16-bit input), the scale, the cast; a
    normed input is written in 16 bits with its amax by the norm and cast after it
    (csrc/extensions/normalization.cpp, FUSED_NORM_AMAX_FP8). Megatron-Core's grouped experts are
    quantized expert by expert (split_quantize: one fused kernel for all of them under delayed
    scaling only, cast.cpp multi_tensor_quantize_impl), each expert a launch of its own."""
    weights = [g for g in ops if isinstance(g, Gemm) and g.params and not g.sixteen_bit]
    if not weights:
        return []
    # torchao's Float8Linear in eager mode: every input is cast on its own, after a separate amax
    # pass over it (tensorwise dynamic scaling: read 2 B more an element); compiled, Inductor
    # fuses the amax and the cast into the op that writes the tensor, as TE does
    eager = o.pointwise == "eager"
    current = o.fp8_current and o.pointwise == "fused"
    fused = () if eager else _FP8_FUSED_INPUTS
    # read the 16-bit tensor, write it quantized row-wise and column-wise (the backward GEMMs read
    # the transpose), each with its block scales: FP8 2 + 2 x 1 = 4 B an element, MXFP8 4.06,
    # NVFP4 3.125 (its per-tensor amax rides in the same pass, as TE's delayed scaling's does)
    cast = 2.0 + 2.0 * (o.gemm_bytes + o.scale_bytes)
    # a separate transposing pass reads the row-wise copy back: one more quantized read
    cast += (o.gemm_bytes + o.scale_bytes) if o.fp8_transpose_pass else 0.0
    each = cast + (2.0 if eager or current else 0.0)
    # launches: a grouped GEMM's experts one by one where TE quantizes them so, three a tensor
    # under current scaling
    per_expert = o.megatron_moe and (current or o.scale_bytes > 0)
    per_tensor = 3.0 if current else 1.0

    def tensors(gs: list[Gemm]) -> Num:
        return per_tensor * sum((g.batch if per_expert else 1.0) + 0 * x.b for g in gs)

    unfused = [g for g in weights if g.name not in fused]
    normed = [g for g in weights if g.name in fused] if current else []
    inputs = sum((g.M * g.K * g.batch for g in unfused), 0.0 * x.b)
    grads = sum((g.M * g.N * g.batch for g in weights), 0.0 * x.b)
    params = sum((g.K * g.N * g.batch for g in weights), 0.0 * x.b)
    out: list[OpDesc] = [
        Pointwise(
            "FP8 cast of GEMM inputs", inputs, each, 0.0, 1, "column", kernels=tensors(unfused)
        ),
        Pointwise(
            "FP8 cast of output gradients", grads, 0.0, each, 1, "column", kernels=tensors(weights)
        ),
    ]
    if normed:
        out.append(
            Pointwise(
                "FP8 cast of normed GEMM inputs (current scaling)",
                sum((g.M * g.K * g.batch for g in normed), 0.0 * x.b),
                cast,
                0.0,
                1,
                "column",
                kernels=2.0 * len(normed),
            )
        )
    if not o.fp8_param_gather:
        out.append(Pointwise("FP8 cast of weights", params, each, 0.0, 1, "column"))
    return out
