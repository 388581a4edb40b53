"""The kernels every part of a layer shares: the TP collectives, residual adds and their
gradients, the hidden-size norms, rotary embedding, the MLP activation and the FP8 casts, as
ops (cost/ops.py) on the shapes of cost/shapes.py. Per rank and per micro-batch of b sequences
of s tokens, numpy arrays over configurations; bytes per element are stated at each op.
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Num

from .ops import Collective, Gemm, OpDesc, Pointwise, Transfer
from .shapes import LayerShape, Options, Split, gathered_bytes, layernorm_backward_bytes


def tp_collective(
    name: str,
    message: Num,
    column_gemm: str,
    row_gemm: str = "",
    ub: bool = False,
    gathered: float = 1.0,
    window: Num = 1.0,
) -> Collective:
    """Forward g after a row-parallel GEMM, backward f at the column-parallel input, overlapped with
    that GEMM's weight gradient (Megatron's asynchronous TP all-reduce; Korthikanti 2022, Sec. 6.2).
    SP: reduce-scatter here and all-gather before the next GEMM; backward the gradient's all-gather
    (exposed), the input's re-gather under dgrad, the reduce-scatter under wgrad. With ``ub``
    (Transformer Engine's userbuffers, --tp-comm-overlap) the forward collectives and the exposed
    backward all-gather are split into chunks pipelined with the row- and column-parallel GEMMs.
    torchtitan's async TP (enable_async_tensor_parallel, with torch.compile: Inductor's
    _micro_pipeline_tp pass) does the same with torch's fused_all_gather_matmul and
    fused_matmul_reduce_scatter (torch/distributed/_symmetric_memory): the SP all-gather and
    reduce-scatter run as tp chunk copies over NVLink, each behind the GEMM of the chunk before, in
    the forward and in the compiled backward; it needs no asynchronous all-reduce, so ``ub``
    overlaps even where that is off (engine/blocks.py). Measured: torchtitan's Llama 3.1 70B on 256
    H100, 5.6% (2024-12, FP8) and 9.2% (2025-06, BF16) faster with it; what that pipeline costs
    besides is symm_mem_window and symm_mem_passes.
    ``gathered``: the all-gathers' bytes an element over the message's (gathered_bytes);
    ``window``: the share of each GEMM pass a collective can hide behind (symm_mem_window)."""
    under_row = (row_gemm, "fwd") if ub and row_gemm else None
    under_col = (column_gemm, "fwd") if ub else None
    under_dgrad = (row_gemm, "dgrad") if ub and row_gemm else None
    w = window
    return Collective(
        name,
        "tp",
        message,
        fwd=(
            Transfer("all-reduce", "no_sp", under_row, share=w),
            Transfer("reduce-scatter", "sp", under_row, share=w),
            Transfer("all-gather", "sp", under_col, share=w, scale=gathered),
        ),
        bwd=(
            Transfer("all-reduce", "no_sp", (column_gemm, "wgrad"), share=w),
            Transfer("all-gather", "sp", under_dgrad, share=w, scale=gathered),
            Transfer("all-gather", "sp", (column_gemm, "dgrad"), share=w, scale=gathered),
            Transfer("reduce-scatter", "sp", (column_gemm, "wgrad"), share=w),
        ),
    )


def symm_mem_window(o: Options, t: Num) -> Num:
    """The share of a GEMM a micro-pipelined TP collective hides behind: (t - 1) / t under torch's
    symmetric-memory async TP (``o.tp_overlap_symm``), else 1. Its all-gather-matmul consumes the
    local shard while the first remote shard is copied and the last shard's matmul has no copy
    left to hide; its matmul-reduce-scatter computes the first chunk before any copy can start
    (torch/distributed/_symmetric_memory/__init__.py, _pipelined_multi_all_gather_and_consume and
    _pipelined_produce_and_all2all): t - 1 chunk copies behind t - 1 of the t chunk GEMMs.
    Dimensionless."""
    t = np.asarray(t, dtype=float)
    return (t - 1) / t if o.tp_overlap_ub and o.tp_overlap_symm else np.ones(t.shape)


def symm_mem_passes(o: Options, where: str, x: Split, h: int) -> list[Pointwise]:
    """The memory-bound passes torch's symmetric-memory async TP adds to each micro-pipelined pair
    (a matmul-reduce-scatter and an all-gather-matmul) in each pass: forward, the row-parallel
    output reduce-scattered and the column-parallel input gathered; backward, the column-parallel
    input gradient reduce-scattered and the row-parallel output gradient gathered
    (torch/distributed/_symmetric_memory/__init__.py):
    - _fused_matmul_reduce_scatter_impl writes each chunk's partial sums for the peers to copy,
      then reduce_partials sums this rank's t partials in a kernel of its own after the pipeline
      (NCCL's ring reduces as it goes): read t shards, write one, in the 16-bit GEMM output (act
      bytes an element): M h (1 + 1/t) elements;
    - _pipelined_multi_all_gather_and_consume copies the local shard into its symmetric buffer
      and barriers before the first matmul ("we are giving up the chance to overlap mv and b with
      the first shard_consumer"): read and write M h / t elements of the gathered width
      (gathered_bytes).
    M: the micro-batch's tokens, h: hidden size, t: TP degree. ``where``: the block, for the ops'
    names. Zero elements (no kernel) without SP or at t = 1; no op without the overlap."""
    if not (o.tp_overlap_ub and o.tp_overlap_symm):
        return []
    act, t = o.act_bytes, x.t
    shard = np.where(x.sp & (t > 1), x.tokens * h / t, 0.0)
    staged = 2.0 * act * gathered_bytes(o)
    return [
        Pointwise(f"TP partial sums, {where}", shard * (t + 1), act, act, 1, "tokens"),
        Pointwise(f"TP shard staging, {where}", shard, staged, staged, 0, "tokens"),
    ]


def residual_add(m: LayerShape, o: Options, which: str, elements: Num) -> Pointwise:
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


def activation(
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


def _cast(name: str, elements: Num, fwd: float, bwd: float, kernels: Num = 1.0) -> Pointwise:
    """A quantizing kernel: bytes an element read and written forward and backward, 1 FLOP an
    element, split with the GEMM's columns."""
    return Pointwise(name, elements, fwd, bwd, 1, "column", kernels=kernels, cast=True)


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
    scaling only, cast.cpp multi_tensor_quantize_impl), each expert a launch of its own.

    MXFP4 (``o.quant_unfused``): TE quantizes every input in a kernel of its own, the norm's output
    too (precision.UNFUSED_NORM_QUANT). Its 16-point Hadamard rotation rides in the cast: as a fast
    Walsh-Hadamard transform 4 add stages an element a copy, about 8 FLOP against the 3 B moved,
    far below the MI355X's vector-to-HBM ridge (157 TFLOP/s / 8 TB/s, about 20 FLOP/B)."""
    weights = [g for g in ops if isinstance(g, Gemm) and g.params and not g.sixteen_bit]
    if not weights:
        return []
    # torchao's Float8Linear in eager mode: every input is cast on its own, after a separate amax
    # pass over it (tensorwise dynamic scaling: read 2 B more an element); compiled, Inductor
    # fuses the amax and the cast into the op that writes the tensor, as TE does
    eager = o.pointwise == "eager"
    current = o.fp8_current and o.pointwise == "fused"
    # ROCm TE's MXFP4 quantizers are never fused into the norm or activation
    fused = () if eager or o.quant_unfused else _FP8_FUSED_INPUTS
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
        _cast("FP8 cast of GEMM inputs", inputs, each, 0.0, tensors(unfused)),
        _cast("FP8 cast of output gradients", grads, 0.0, each, tensors(weights)),
    ]
    if normed:
        name = "FP8 cast of normed GEMM inputs (current scaling)"
        normed_el = sum((g.M * g.K * g.batch for g in normed), 0.0 * x.b)
        out.append(_cast(name, normed_el, cast, 0.0, 2.0 * len(normed)))
    if not o.fp8_param_gather:
        out.append(_cast("FP8 cast of weights", params, each, 0.0))
    return out
