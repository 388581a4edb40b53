"""Megatron-Core's fine-grained activation offloading (--fine-grained-activation-offloading
--offload-modules; megatron/core/pipeline_parallel/fine_grained_activation_offload.py and
docs/user-guide/features/fine_grained_activation_offloading.md, Megatron-LM main of 2026-08):
each chosen module's forward runs inside an offload group that captures every tensor autograd
saves for its backward (saved_tensors_hooks), copies them to pinned host memory on a side stream
once the module's forward is done, and reloads them ahead of the module's backward. It runs with
any pipeline schedule and beside selective recompute.

The modules, and the ops of a layer description (cost/transformer.py) each one's group holds:

    attn_norm        the attention's input norm          "layernorm 1"
    qkv_linear       the Q, K, V projections             the ops between it and the attention core
    core_attn        the attention core                  the fused attention (or its unfused ops)
    attn_proj        the attention's output projection   "output projection"
    mlp_norm         the MLP's input norm                "layernorm 2"
    expert_fc1       the experts' first GEMM             "expert fc1 (grouped)"
    moe_act          the experts' activation             "expert swiglu"
    fused_group_mlp  the experts' whole fused MLP        the three above and "expert fc2 (grouped)"

What a group moves is what its ops keep for the backward (cost/ops.Block.kept_by_op: under
selective recompute, less what the recomputed modules rebuild). A tensor below
min_offloaded_tensor_size elements (default 1,048,576) stays on the GPU; it is applied op by op
here, each op's kept bytes taken as one tensor. The dense MLP and the shared experts have no
group: what they keep stays. Bytes per micro-batch on one rank.
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Array, Num

from .ops import Block, FusedAttention

# Megatron-Core's min_offloaded_tensor_size default (TransformerConfig), elements
MIN_TENSOR_ELEMENTS = 1024 * 1024
_BY_NAME = {
    "layernorm 1": "attn_norm",
    "output projection": "attn_proj",
    "layernorm 2": "mlp_norm",
    "expert fc1 (grouped)": "expert_fc1",
    "expert swiglu": "moe_act",
}
_FUSED_MLP = ("expert fc1 (grouped)", "expert swiglu", "expert fc2 (grouped)")


def op_modules(block: Block) -> list[tuple[str, ...]]:
    """The offload groups each op of ``block`` belongs to, in op order (none: ())."""
    core = [i for i, op in enumerate(block.ops) if _is_core(op)]
    names = [op.name for op in block.ops]
    norm = names.index("layernorm 1") if "layernorm 1" in names else -1
    out: list[tuple[str, ...]] = []
    for i, op in enumerate(block.ops):
        groups: tuple[str, ...] = ()
        if i in core:
            groups = ("core_attn",)
        elif op.name in _BY_NAME:
            groups = (_BY_NAME[op.name],)
        elif core and norm < i < core[0]:
            groups = ("qkv_linear",)
        if op.name in _FUSED_MLP:
            groups = (*groups, "fused_group_mlp")
        out.append(groups)
    return out


def _is_core(op: object) -> bool:
    """The attention core's ops: the fused kernel, or the unfused products and softmax."""
    return isinstance(op, FusedAttention) or bool(getattr(op, "attention_core", False))


def present(block: Block) -> set[str]:
    """The offload modules ``block`` has ops for."""
    return {g for groups in op_modules(block) for g in groups}


def offloaded_table(
    block: Block,
    sets: list[tuple[str, ...]],
    recompute_modules: tuple[str, ...],
    act_bytes: float,
) -> list[list[Array]]:
    """Bytes per micro-batch each module set in ``sets`` sends to host memory, under each recompute
    code (0 none, 1 selective of ``recompute_modules``, 2 full: the layer keeps its input only and
    no group saves anything): of each op in a chosen module, its kept bytes that reach the size
    floor; the layer's ops and what each keeps read once for all the sets."""
    floor = MIN_TENSOR_ELEMENTS * act_bytes
    groups = [set(g) for g in op_modules(block)]
    kept = {rc: block.kept_by_op(rc == 1, recompute_modules) for rc in (0, 1)}
    out = []
    for chosen in map(set, sets):
        row: list[Array] = []
        for rc in (0, 1):
            total: Num = 0.0
            for part, g in zip(kept[rc], groups):
                if chosen & g:
                    total = total + np.where(np.asarray(part) >= floor, part, 0.0)
            row.append(np.asarray(total))
        out.append([*row, np.asarray(0.0)])  # full recompute: nothing kept to move
    return out
