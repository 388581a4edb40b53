"""The memory-bound kernels a framework's MoE layer and MLA attention run besides the GEMMs, the
all-to-alls and the one permutation each way (cost/transformer.py), where the framework's code runs
them (Options.megatron_moe, Options.yarn_rope_fused). Bytes per element are stated at each op; an
element is one value of a token copy's hidden state on the busiest expert rank, or of Q, K, V.

Megatron-Core's MoE module at the commits the validation runs name (NVIDIA/Megatron-LM 2edffadb,
the submodule of Megatron-Bridge v0.4.2; 7094270, core_r0.12.0, DGX Cloud v25.05.01):

- token_dispatcher.py, MoEAlltoAllTokenDispatcher: after the all-to-all the received tokens are
  sorted by local expert (dispatch_postprocess, "Permutation 2", sort_chunks_by_idxs; with
  capacity padding a transpose and contiguous copy) and unsorted before the way back
  (combine_preprocess), whenever a rank holds more than one expert: one more read and write of every
  token copy each way, forward and backward. The flex dispatchers (DeepEP, HybridEP) permute once.
- experts.py, TEGroupedMLP.forward: under FP8, MXFP8 or NVFP4 each expert's rows are padded to the
  format's alignment (Transformer Engine module/fp8_padding.py, Fp8Padding: a copy whenever any
  expert's count is not a multiple of 16 or 32) and unpadded after fc2; the flex dispatchers pad
  inside their permutation (align_size), token dropping pads to capacity, so neither copies.
- experts.py, TEGroupedMLP._apply_bias: fc2's bias (skip_bias_add=True) is added expert by expert in
  PyTorch, bias times the router's probability in fp32, added, concatenated and cast back.

MLA (Megatron-Core multi_latent_attention.py, get_query_key_value_tensors): RoPE on the rope part of
Q (every head) and of K (one shared head), then Q and K assembled with torch.cat and V made
contiguous for the attention kernel; the profile-data trace (deepseek-ai/profile-data train.json)
runs the same steps in DeepSeek's framework as rotary_kernel and _copy_tensor_kernel.
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Num

from .ops import OpDesc, Pointwise
from .shapes import LayerShape, Options, Split

# Megatron-Core rope_utils._apply_rotary_pos_emb_bshd on MLA's rope part, in PyTorch ops (16-bit
# elements): de-interleave (cat of the even and odd halves: read, write), rotate_half (neg of a
# half, cat: 1 + 2 widths), t * cos, rotate_half(t) * sin (2 + 2), their sum (3), the final cat with
# the empty pass-through part (2): 14 widths forward in 7 kernels; autograd's backward of the same
# ops reads and writes about as much (mul backward twice, neg, two cat backwards, the gradients of
# the two branches summed, the de-interleave's strided scatter), 8 kernels
UNFUSED_MLA_ROPE = (14.0, 14.0, 7.0, 8.0)


def token_sort(m: LayerShape, o: Options, x: Split, el: Num) -> tuple[list[OpDesc], list[OpDesc]]:
    """(after the dispatch, before the combine): the alltoall dispatcher's sort of the received
    token copies by local expert and the unsort back, read and write 2 act bytes an element each
    way, forward and backward. ``el``: the busiest rank's token copies times the hidden size."""
    local = m.experts / np.asarray(x.ep, dtype=float)
    if not (o.megatron_moe and o.dispatcher == "alltoall"):
        return [], []
    el = np.where(local > 1, el, 0.0)
    act = o.act_bytes
    return (
        [Pointwise("token sort by local expert", el, 2 * act, 2 * act, 0, "experts")],
        [Pointwise("token unsort", el, 2 * act, 2 * act, 0, "experts")],
    )


def fp8_row_padding(m: LayerShape, o: Options, el: Num) -> tuple[list[OpDesc], list[OpDesc]]:
    """(before fc1, after fc2): Transformer Engine's Fp8Padding of the experts' rows to the format's
    alignment and the Fp8Unpadding of fc2's output, each a read and write of 2 act bytes an element;
    backward the other way round (fused_multi_row_padding, fused_multi_row_unpadding)."""
    if not (o.megatron_moe and o.gemm_bytes < 2 and not m.padded):
        return [], []
    if o.dispatcher not in ("alltoall", "allgather"):
        return [], []
    act = o.act_bytes
    return (
        [Pointwise("FP8 row padding of expert inputs", el, 2 * act, 2 * act, 0, "experts")],
        [Pointwise("FP8 row unpadding of expert outputs", el, 2 * act, 2 * act, 0, "experts")],
    )


def expert_bias(m: LayerShape, o: Options, el: Num, local: Num) -> list[OpDesc]:
    """TEGroupedMLP._apply_bias, fc2's bias on each local expert's rows: bias x probability in
    fp32 (write 4 bytes an element), the add (read 2 + 4, write 4), torch.cat (4 + 4) and the cast
    back (4 + 2): 28 bytes an element in 2 kernels an expert and 2 more. Backward: the cast's
    (2 + 4), the add's cast of the gradient to the 16-bit output (4 + 2), and the two products'
    gradients, each a multiply and a reduction (bias: over the rows; probability: over the hidden
    size; 4 + 4 + 4 each): 36 bytes an element, about 6 kernels an expert."""
    if not (o.megatron_moe and m.bias and m.experts):
        return []
    k = np.asarray(local, dtype=float)
    return [
        Pointwise(
            "expert fc2 bias (per expert, fp32)", el, 28.0, 36.0, 2, "experts", kernels=2 * k + 2
        )
    ]


def mla_assembly(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """MLA's RoPE and the assembly of Q, K, V for the attention kernel, on this rank's heads:
    RoPE on the rope part of Q and of the shared K head, fused (read and write once each way) or,
    where the framework runs DeepSeek's YaRN unfused, as Megatron-Core's PyTorch ops
    (UNFUSED_MLA_ROPE); then torch.cat of Q's two parts and of K's (the shared rope head expanded
    to every head) and V's contiguous copy, a read and write of each element forward, and backward
    the split gradients concatenated back into the up-projections'. Recomputed with the
    up-projections (mla_up_proj). What the unfused ops keep for their backward is not counted in
    memory (their tensors are the rope part's, a few percent of Q)."""
    if not m.kv_lora:
        return []
    act, M, t = o.act_bytes, x.tokens, x.t
    heads = m.heads / t
    rope_el = M * (heads + 1) * m.qk_rope
    fused = o.yarn_rope_fused or not m.yarn or o.pointwise != "fused"
    fwd, bwd, kf, kb = (2.0, 2.0, 1.0, 1.0) if fused else UNFUSED_MLA_ROPE
    qkv_el = M * heads * (2 * (m.qk_nope + m.qk_rope) + m.v_head)
    rope = Pointwise(
        "MLA RoPE" + ("" if fused else " (YaRN, PyTorch ops)"),
        rope_el,
        fwd * act,
        bwd * act,
        6,
        "heads",
        kernels=np.asarray(kf if kf == kb else (kf + kb) / 2),
        modules=("mla_up_proj",),
    )
    assembly = Pointwise(
        "MLA Q, K assembly and V copy",
        qkv_el,
        2 * act,
        2 * act,
        0,
        "heads",
        kernels=3.0,
        modules=("mla_up_proj",),
    )
    return [rope, assembly]
