"""What the sharded data parallelism of ZeRO-3 and FSDP holds gathered beside the sharded model
states (engine/memory.py adds it to a stage's weights): the units gathered, prefetched and
reduced, as each framework profile runs them (specs/framework.py)."""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost.ops import Gemm
from perfmodel.cost.stages import Stages
from perfmodel.cost.transformer import Options, decoder_layer
from perfmodel.engine.blocks import Setting
from perfmodel.engine.knobs import Knobs
from perfmodel.specs.framework import PROFILES


def sharding_buffers(st: Setting, k: Knobs, stages: Stages, params: Array, m: Array) -> Array:
    """Bytes the sharded data parallelism of ZeRO-3 and FSDP holds gathered on each stage class:
    the layer computing and what is prefetched behind it (FSDP1's limit_all_gathers and FSDP2's
    implicit prefetch: one more unit; DeepSpeed: its stage3_prefetch_bucket_size), and one
    layer's unsharded 16-bit gradient with its reduce-dtype copy. Under pipeline parallelism
    FSDP keeps every layer's 16-bit weights and reduce-dtype gradients unsharded from the first
    forward to the last backward (cost/sharded.py, Sharding.pipeline_once). Without a reduction
    every micro-batch (FSDP's no_sync) the unsharded gradients of every layer wait in the gradient
    buffer's width for the last one."""
    z = k.zero_stage[:, None]
    per_layer = params / np.maximum(stages.layer_total, 1.0)
    p = st.precision
    profile = PROFILES[st.plan.training.framework]
    prefetch = profile["zero3_prefetch_params"]
    ahead = per_layer if prefetch is None else np.minimum(prefetch, params)
    unit = per_layer
    if profile["zero3_per_tensor"]:
        # DeepSpeed gathers one sub-module's weights at a time (fetch_sub_module) and prefetches
        # while fewer than stage3_max_live_parameters are live; each gradient is reduce-scattered
        # through a bucket of reduce_bucket_size as it is produced (stage3.py, v0.3.16): the
        # largest weight tensor, what may be prefetched beside it, and one bucket
        unit = np.minimum(per_layer, (_largest_weight(st) / k.tp)[:, None])
        live = profile["zero3_max_live_params"] or np.inf
        ahead = np.clip(np.minimum(ahead, live - unit), 0.0, None)
    grads = unit * (p.weight_bytes + p.reduce_bytes)
    if profile["zero3_per_tensor"]:
        grads = grads + np.minimum(profile["zero3_reduce_bucket_params"], params) * p.reduce_bytes
    buffers = np.where(z >= 3, (unit + ahead) * p.weight_bytes + grads, 0.0)
    once = profile["sharded_pipeline"] & (k.pp > 1)[:, None]
    # fully_shard(reshard_after_forward=False) (FSDP1's SHARD_GRAD_OP, DeepSpeed's
    # stage3 without re-partition) frees no gathered parameters between a layer's forward and its
    # backward: at the forward's end every layer's 16-bit weights are unsharded at once
    # (torch/distributed/fsdp/_fully_shard/_fully_shard.py, reshard_after_forward)
    if not st.plan.training.zero3_reshard_after_forward:
        kept = params * p.weight_bytes + per_layer * (p.weight_bytes + p.reduce_bytes)
        buffers = np.where((z >= 3) & ~once, kept, buffers)
    # under PP the gathered 16-bit weights stay, and each micro-batch's unsharded gradient (run
    # without gradient sync but the last: torch.distributed.pipelining) is accumulated upcast to
    # the reduce dtype (FSDP2 FSDPParam.to_accumulated_grad_if_needed), fp32 in torchtitan
    buffers = np.where(once & (z >= 2), params * (p.weight_bytes + p.reduce_bytes), buffers)
    if not st.plan.training.reduce_every_microbatch:
        waiting = (z >= 2) & (np.asarray(m) > 1)[:, None] & ~once
        buffers = buffers + np.where(waiting, params * p.gradient_bytes, 0.0)
    return np.asarray(buffers)


def _largest_weight(st: Setting) -> float:
    """Parameters of the largest weight tensor of a decoder layer, unsharded (the sub-module
    DeepSpeed's ZeRO-3 gathers at once)."""
    kinds = [
        moe for moe, n in ((True, st.moe_layers), (False, len(st.moe_pattern) - st.moe_layers)) if n
    ]
    return max(
        float(np.max(op.params))
        for moe in kinds
        for op in decoder_layer(st.shape, Options(), 1, 1, 1, False, moe=moe).ops
        if isinstance(op, Gemm)
    )
