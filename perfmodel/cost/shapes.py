"""The shape of a transformer layer, the knobs that change its kernels, the per-rank split of a
configuration, and the bytes per element of the passes a framework setting adds: what
transformer.py, attention.py and moe_layer.py build layers from (with layer_kernels.py).

Shapes are per rank and per micro-batch of b sequences of s tokens, numpy arrays over
configurations; transformer.py gives the conventions and their sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from perfmodel.cost import Array, Num

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
    # domain for HybridEP) and fanned out there (cost/moe_layer.py _ep_exchange)
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
    # every GEMM input quantized in a kernel of its own: the norm and the activation write 16 bits
    # (MXFP4 in ROCm TE: precision.UNFUSED_NORM_QUANT)
    quant_unfused: bool = False
    tp_overlap_ub: bool = False  # every TP collective under its GEMM (TE userbuffers)
    # that overlap as torch's symmetric-memory async TP runs it (torchtitan): a (t - 1) / t window
    # and passes of its own (cost/layer_kernels.symm_mem_window, symm_mem_passes)
    tp_overlap_symm: bool = False
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
