"""The data-parallel part of a step (SPEC 8): the gradient reduction and ZeRO-3 gathers each
configuration exposes, what they hide under, and the optimizer's shard (engine/evaluate.py calls
it; the traffic itself is cost/step.py's)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost import pipeline as pipe
from perfmodel.cost import step as stp
from perfmodel.cost.sharded import ZERO3_HBM_PASSES, Group, Sharding
from perfmodel.cost.stages import Stages
from perfmodel.engine.block_cost import BlockCost
from perfmodel.engine.blocks import Setting
from perfmodel.engine.knobs import Knobs
from perfmodel.engine.mesh import Mesh, expert_shard
from perfmodel.specs.framework import PROFILES


@dataclass(frozen=True)
class Priced:
    """What engine/evaluate.py has priced of each configuration before its step is put together:
    the setting, the knobs, the stages, the per-stage costs ``sc`` (stage_costs), the slowest
    stage's index ``slow`` and the block costs; the data-parallel part and the stage figures read
    them."""

    st: Setting
    k: Knobs
    stages: Stages
    sc: dict[str, Any]
    slow: Array
    costs: dict[str, BlockCost]


def _main_layer(c: dict[str, BlockCost]) -> BlockCost:
    """The cost of the model's main layer kind (MoE where it has MoE layers)."""
    return c.get("moe") or c["dense"]


def _windows(
    stages: Stages, sc: dict[str, Any], slow: Array, layer: tuple[Array, Array]
) -> stp.Windows:
    """What data-parallel traffic hides under: the slowest stage's micro-batch passes and one
    layer's."""
    backward = stages.pick(sc["bwd"], slow) + stages.pick(sc["rec"], slow)
    return stp.Windows(
        last_backward=backward,
        first_forward=stages.pick(sc["fwd_share"], slow),
        backward=backward,
        layer_forward=layer[0],
        layer_backward=layer[1],
    )


def _overlap(st: Setting, n: Array) -> stp.Overlap:
    """The profile's bucket, parameters: its fixed size or its size per data-parallel rank times
    the ranks, the larger (Megatron-Core: max(40M, 1M x dp)), and the overlap flags."""
    tr = st.plan.training
    profile = PROFILES[tr.framework]
    gpu = st.plan.system.gpu
    staged = bool(profile["zero3_hbm_passes"])
    bucket = np.maximum(
        profile["grad_bucket_params"], profile["grad_bucket_params_per_dp_rank"] * n
    )
    return stp.Overlap(
        tr.overlap_grad_reduce,
        tr.overlap_param_gather,
        bucket,
        st.plan.system.gpu.comm_overlap_penalty,
        Sharding(
            reshard_after_forward=tr.zero3_reshard_after_forward,
            zero2_per_microbatch=tr.zero2_gathers_per_microbatch,
            reduce_every_microbatch=tr.reduce_every_microbatch,
            recompute_regathers=profile["recompute_regathers"],
            reduce_bucket_params=profile["zero3_reduce_bucket_params"],
            fp8_gather=tr.fp8_param_gather,
            pipeline_once=profile["sharded_pipeline"],
            zero1_grad_reduce=profile["zero1_grad_reduce"],
            zero1_param_sync=profile["zero1_param_sync"],
            per_tensor=profile["zero3_per_tensor"],
            rank_host_s=tr.collective_rank_host_s,
            gather_hbm_passes=ZERO3_HBM_PASSES["gather"] if staged else (0.0, 0.0),
            reduce_hbm_passes=ZERO3_HBM_PASSES["reduce"] if staged else (0.0, 0.0),
            hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s * gpu.hbm_efficiency,
        ),
    )


def _data_parallel(priced: Priced, memory: dict[str, Any], mesh: Mesh, m: Array) -> tuple[Any, ...]:
    """(exposed DP traffic, exposed ZeRO-3 traffic, parameters the optimizer updates on this GPU) of
    each configuration: the dense parameters reduced over dp x cp, the routed experts' over the
    expert-data-parallel ranks (Megatron-Core), each on its group's link (cost/step.py)."""
    st, k, stages, sc, slow, costs = (
        priced.st, priced.k, priced.stages, priced.sc, priced.slow, priced.costs
    )  # fmt: skip
    dp, cp = k.dp.astype(float), k.cp.astype(float)
    shard = np.where(k.dp_shard > 0, k.dp_shard, k.dp).astype(float)
    replicas = dp / shard
    dense, experts = memory.pop("_params_max"), memory.pop("_experts_max")
    # the dp_shard x cp ranks (all dp x cp without HSDP) are one block of the order, tp apart;
    # HSDP's replicas sit tp x cp x dp_shard apart (torchtitan's mesh: dp_replicate outermost)
    # (with placement tp-pp-dp the pipeline sits between them: the group is as spread as dp's)
    tp = k.tp.astype(float)
    order = mesh.order
    adjacent = order.index("dp") == order.index("cp") + 1
    block = tp if adjacent else mesh.stride("dp") / np.maximum(cp, 1.0)
    groups = [
        Group(
            dense,
            shard * cp,
            mesh.group_link(shard * cp, block),
            replicas,
            mesh.group_link(replicas, tp * cp * shard),
            mesh.group_link(dp * cp, block),
        ),
        _expert_group(k, mesh, experts, mesh.group_link(replicas, tp * cp * shard)),
    ]
    ov = _overlap(st, dp * cp)
    dp_comm, zero3 = stp.data_parallel_comm(
        groups,
        k.zero_stage,
        m,
        k.recompute,
        stages.pick(stages.layer_total, slow),
        _windows(stages, sc, slow, _main_layer(costs).seconds(k.recompute)),
        ov,
        st.precision,
        once=ov.sharding.pipeline_once & (k.pp > 1),
        tensors=_main_layer(costs).tensors,
        unprefetched=_main_layer(costs).unprefetched,
    )
    # DualPipe's two copies of each stage share its optimizer shards (engine/memory.py)
    copies = np.where(pipe.dualpipe_rows(k.schedule, k.pp), 2.0, 1.0)
    # the optimizer's shard: over dp_shard x cp where the states are sharded over a group (HSDP,
    # a ZeRO-1 sharding group), else over dp x cp (shard is dp then)
    e_shard = expert_shard(mesh.edp, dp, k.dp_shard, k.zero_stage)
    local = dense / np.where(k.zero_stage >= 1, shard * cp * copies, 1.0) + experts / np.where(
        k.zero_stage >= 1, e_shard * copies, 1.0
    )
    return dp_comm, zero3, local


def _expert_group(k: Knobs, mesh: Mesh, experts: Array, replica_link: Any) -> Group:
    """The routed experts' group: their expert-data-parallel ranks (Megatron-Core), or under HSDP
    the part of them in the shard group, replicated over the dense parameters' replicas
    (torchtitan's dp_shard_in_ep x dp_replicate; engine/mesh.expert_shard)."""
    link = replace(mesh.link("edp"), multi_rail=True)
    n = expert_shard(mesh.edp, k.dp.astype(float), k.dp_shard, k.zero_stage)
    return Group(experts, n, link, mesh.edp / np.maximum(n, 1.0), replica_link, link)
