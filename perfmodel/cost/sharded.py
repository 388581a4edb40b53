"""Sharded data parallelism, written once for PyTorch FSDP (FSDP1 and FSDP2), DeepSpeed ZeRO-3
and Megatron-FSDP: per layer (one FSDP unit, a transformer block), the parameter all-gather
before its forward, again before its backward when resharded after the forward, and the gradient
reduce-scatter after its backward, each overlapped with the neighbouring layer's compute
(Rajbhandari et al. 2020, ZeRO, Sec. 5.3 and 7; Zhao et al. 2023, PyTorch FSDP, Sec. 3.3-3.4:
forward and backward prefetch issue the next unit's all-gather while this unit computes).

HSDP (Zhao et al. 2023, Sec. 3.2.3; torchtitan's dp_replicate x dp_shard): states are sharded
over the ``n`` ranks of a shard group and each shard's gradient is then all-reduced across the
``replicas`` groups, layer by layer, right after its reduce-scatter.

Units: parameters, bytes, seconds; arrays over configurations or floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.cost import Num

from ..specs.precision import Precision
from . import collectives as coll
from .layer import Link
from .ops import Block, Gemm


@dataclass(frozen=True)
class Sharding:
    """How the framework runs sharded data parallelism (specs/framework.py flags)."""

    reshard_after_forward: bool  # FULL_SHARD: gather again for the backward
    zero2_per_microbatch: bool  # ZeRO-2 as FSDP's SHARD_GRAD_OP: gathered every micro-batch
    reduce_every_microbatch: bool  # no no_sync: every micro-batch reduce-scatters
    recompute_regathers: bool  # full recompute's forward gathers the parameters once more
    # gradients reduce-scattered in buckets of this many (DeepSpeed's reduce_bucket_size), so the
    # last bucket waits for the backward's end; 0: one unit's, as FSDP reduces each unit
    reduce_bucket_params: float = 0.0
    # parameters gathered in FP8 (torchao's enable_fsdp_float8_all_gather, Megatron's
    # --fp8-param-gather): 1 byte each on the wire
    fp8_gather: bool = False
    # under pipeline parallelism the parameters stay gathered across the micro-batches and the
    # gradients are reduced once a step (torch.distributed.pipelining's
    # backward_maybe_with_nosync turns FSDP's gradient sync and resharding off until the last
    # backward; torchtitan's reshard_after_forward "default" is False with PP)
    pipeline_once: bool = False
    # ZeRO-1 whose optimizer states are sharded over a group smaller than dp (the Group's n, with
    # ``replicas`` copies): how the gradients reach the shard's owner and how the updated
    # parameters come back. "reduce-scatter": inside the group, then the shard all-reduced across
    # the replicas (Megatron-Core's --num-distributed-optimizer-instances,
    # distributed/param_and_grad_buffer.py); "all-reduce": over every data-parallel rank, each
    # keeping its slice (InternEvo's HybridZeroOptimizer, reduce_rank None: reduce_tensor
    # all-reduces over ParallelMode.DATA)
    zero1_grad_reduce: str = "reduce-scatter"
    # "all-gather" (Megatron's distributed optimizer); "broadcast": each rank of the group
    # broadcasts its shard to the others, one collective per rank (InternEvo's
    # HybridZeroOptimizer.broadcast_params over ParallelMode.ZERO1)
    zero1_param_sync: str = "all-gather"
    # one collective per weight tensor, not per layer (DeepSpeed ZeRO-3 of 2021 fetches each
    # sub-module's parameters on its own: stage3.py fetch_sub_module, v0.3.16), each paying its own
    # latency
    per_tensor: bool = False
    # host seconds per rank of the group for each collective, on the critical path: DeepSpeed
    # v0.3.16 builds the list of the n ranks' partitions in a Python loop (partition_parameters.py
    # _allgather_param, _reduce_scatter_gradient) and torch.distributed's list API copies each of
    # them in and out of a flat buffer, one copy kernel a rank (PyTorch 1.8 ProcessGroupNCCL
    # allgather, reduce_scatter); each fetch then torch.cuda.synchronize()s, so the GPU waits for
    # the host. 0: the flat-buffer collectives of later frameworks
    rank_host_s: float = 0.0
    # HBM bytes moved outside NCCL per byte of a gathered tensor, (before, beside) the collective:
    # "before" on the compute stream ahead of a host synchronize, so nothing hides it; "beside" on
    # the communication stream, hidden with the collective (ZERO3_HBM_PASSES); and per byte of a
    # reduce-scattered gradient the same pair. 0: NCCL reads and writes the buffers in place
    gather_hbm_passes: tuple[float, float] = (0.0, 0.0)
    reduce_hbm_passes: tuple[float, float] = (0.0, 0.0)
    # the GPU's achievable HBM bandwidth those passes run at (bytes/s)
    hbm_bytes_per_s: float = float("inf")


# DeepSpeed ZeRO-3 v0.3.16 on PyTorch 1.8's list API, HBM passes per byte of the tensor:
# - a gather (partition_parameters.py _allgather_param): torch.zeros of the whole gathered tensor
#   (1 write) on the compute stream, then torch.cuda.synchronize(); after ncclAllGather into a flat
#   buffer, ProcessGroupNCCL::allgather copies each rank's slice out to the list's tensors (a read
#   and a write) on the NCCL stream; once gathered, stage3.py fetch_sub_module formats a debug
#   line for every parameter, print_rank_0(f"... norm {param.norm()}") (built whether printed or
#   not): a norm of the gathered tensor (1 read), which the f-string's .item() waits for;
# - a gradient (stage3.py reduce_independent_p_g_buckets_and_remove_grads with
#   contiguous_gradients): copied into the reduce bucket (a read and a write) by the backward hook
#   on the compute stream; average_tensor's div_ by the world size (a read and a write) and
#   ProcessGroupNCCL::reduce_scatter's copy of each slice into its flat input (a read and a write),
#   both on the reduction stream ahead of ncclReduceScatter
ZERO3_HBM_PASSES = {"gather": (2.0, 2.0), "reduce": (2.0, 4.0)}


@dataclass(frozen=True)
class Group:
    """One set of parameters sharded over its own group: ``params`` on this GPU before sharding,
    sharded over ``n`` ranks on ``link``, replicated ``replicas`` times (HSDP) over
    ``replica_link``."""

    params: Num
    n: Num
    link: Link
    replicas: Num = 1
    replica_link: Link | None = None
    # the whole data-parallel group's link (n x replicas ranks), for a reduction over all of it
    full_link: Link | None = None


def weight_tensors(block: Block, t: Num, ep: Num, max_live: float | None) -> tuple[Num, Num]:
    """(weight tensors, unprefetched share) of a layer: its GEMMs with parameters, which a
    framework gathering tensor by tensor issues a collective each for (Sharding.per_tensor); and
    the share of its weights whose all-gather waits in the open under a cap on the live gathered
    parameters. DeepSpeed's ZeRO-3 prefetches the next sub-module's parameters only while those
    gathered on the rank number fewer than stage3_max_live_parameters (v0.3.16 stage3.py,
    prefetch_next_sub_modules: total_available_parameter_numel <
    max_available_parameters_in_numel), and the sub-module computing holds its own: a tensor's
    gather hides under its predecessor's compute (the layer's tensors in order, cyclically) only
    if that predecessor has fewer on the rank. ``max_live`` None: no cap."""
    gemms = [o for o in block.ops if isinstance(o, Gemm) and np.any(o.params)]

    def on_rank(o: Gemm) -> Num:
        share = {"experts": ep, "replicated": 1.0, "tokens": 1.0}.get(o.shard, t)
        return np.asarray(o.params, dtype=float) / np.maximum(share, 1.0)

    if max_live is None or not gemms:
        return float(len(gemms)), 0.0
    sizes = [on_rank(o) for o in gemms]
    waits = sum(
        np.where(prev >= max_live, cur, 0.0) for prev, cur in zip(sizes[-1:] + sizes, sizes)
    )
    return float(len(gemms)), np.asarray(waits / np.maximum(sum(sizes), 1.0))


def zero1_traffic(g: Group, grads: Num, weights: Num, sh: Sharding) -> tuple[Num, Num]:
    """(gradient reduction, parameter sync) seconds of ZeRO-1 over a shard group of g.n ranks
    replicated g.replicas times (1: the optimizer sharded over all of dp), ``grads`` and
    ``weights`` bytes per rank before sharding, as the framework runs it (Sharding.zero1_*):
    - gradients: a reduce-scatter over the group, then its 1/n shard all-reduced across the
      replicas; or one all-reduce over all n x replicas ranks;
    - parameters: an all-gather over the group; or n broadcasts of a 1/n shard each, every one a
      pipelined ring over the n ranks (collectives.ring_latency: n - 1 steps), so n (n - 1) steps
      in all: at n = 1,024 on a network with microseconds a step, seconds."""
    n, reps = np.asarray(g.n, dtype=float), np.asarray(g.replicas, dtype=float)
    rep_link = g.replica_link or g.link
    full = g.full_link or g.link
    hier = reps > 1
    rs: Num = g.link.seconds("reduce-scatter", grads, n) + np.where(
        hier, rep_link.seconds("all-reduce", grads / np.maximum(n, 1.0), reps), 0.0
    )
    if sh.zero1_grad_reduce == "all-reduce":
        # every data-parallel rank all-reduces, whatever the sharding group (InternEvo's
        # _attach_reduction_hook: reduce_rank None for every parameter)
        rs = full.seconds("all-reduce", grads, n * reps)
    if sh.zero1_param_sync == "broadcast":
        ag: Num = n * g.link.seconds("broadcast", weights / np.maximum(n, 1.0), n)
    else:
        ag = g.link.seconds("all-gather", weights, n)
    return rs, ag


def unit_traffic(
    g: Group, layers: Num, p: Precision, fp8_gather: bool = False, pieces: Num = 1.0
) -> tuple[Num, Num]:
    """(all-gather, gradient reduction) seconds of one layer's unit: the 16-bit weights (FP8 ones
    with ``fp8_gather``) gathered over the shard group; the gradients reduce-scattered in the
    reduce dtype (FSDP's MixedPrecisionPolicy.reduce_dtype), then, under HSDP, the 1/n shard
    all-reduced across the replicas. ``pieces``: collectives the unit's traffic is split into (its
    weight tensors, Sharding.per_tensor), each with its own latency."""
    per_layer = np.asarray(g.params, dtype=float) / np.maximum(layers, 1.0)
    wire = 1 if fp8_gather and p.fp8_weight_bytes else p.weight_bytes
    k = np.maximum(np.asarray(pieces, dtype=float), 1.0)
    ag = k * g.link.seconds("all-gather", per_layer * wire / k, g.n)
    rs = k * g.link.seconds("reduce-scatter", per_layer * p.reduce_bytes / k, g.n)
    if g.replica_link is not None:
        shard = per_layer * p.reduce_bytes / np.maximum(g.n, 1.0)
        rs = rs + np.where(
            np.asarray(g.replicas) > 1, g.replica_link.seconds("all-reduce", shard, g.replicas), 0.0
        )
    return ag, rs


def sharded_step(
    g: Group,
    gather_twice: Num,
    m: Num,
    recompute: Num,
    layers: Num,
    window: tuple[Num, Num],
    sh: Sharding,
    penalty: float,
    p: Precision,
    tensors: Num = 1.0,
    unprefetched: Num = 0.0,
) -> Num:
    """Exposed seconds per step of a sharded group's per-layer traffic.

    Each micro-batch, every layer's all-gather runs under the previous layer's forward, and its
    backward traffic (the re-gather when ``gather_twice``, the reduce-scatter) under its backward
    (``window``: one layer's forward and backward seconds): max(0, comm - compute) is exposed and
    the hidden part still costs ``penalty`` of its time (NCCL's SMs, GPU.comm_overlap_penalty).
    The first layer's gather has nothing to hide under, once per micro-batch; the last
    reduce-scatter (one unit's, or DeepSpeed's last reduce bucket), once per step (the next
    micro-batch's forward hides the others). Without ``reduce_every_microbatch`` only the last
    micro-batch reduces. With ``sh.per_tensor`` each of the layer's ``tensors`` weight tensors is a
    collective of its own; ``sh.rank_host_s`` adds, for each collective, the host's loop over the
    group's ranks, which nothing hides; the ``unprefetched`` share of each gather (a cap on the
    live parameters stopped its prefetch) waits in the open."""
    k = np.where(sh.per_tensor, np.maximum(np.asarray(tensors, dtype=float), 1.0), 1.0)
    ag, rs = unit_traffic(g, layers, p, sh.fp8_gather, k)
    # the HBM passes outside NCCL (Sharding.*_hbm_passes): seconds a byte of a layer's unit
    unit = np.asarray(g.params, dtype=float) / np.maximum(layers, 1.0)
    wire = 1 if sh.fp8_gather and p.fp8_weight_bytes else p.weight_bytes
    ag_pass = unit * wire / sh.hbm_bytes_per_s
    rs_pass = unit * p.reduce_bytes / sh.hbm_bytes_per_s
    ag = ag + sh.gather_hbm_passes[1] * ag_pass
    rs = rs + sh.reduce_hbm_passes[1] * rs_pass
    regathers = np.where(np.asarray(gather_twice, dtype=bool), 1.0, 0.0)
    if sh.recompute_regathers:
        regathers = regathers + np.where(np.asarray(recompute) == 2, 1.0, 0.0)
    again = regathers * ag
    # the host's per-rank loop of one collective of the group, and what runs before the host
    # synchronizes (s): nothing hides either
    host = k * sh.rank_host_s * np.asarray(g.n, dtype=float)
    host_ag = host + sh.gather_hbm_passes[0] * ag_pass
    host_rs = host + sh.reduce_hbm_passes[0] * rs_pass
    fwd, bwd = window
    u = np.asarray(unprefetched, dtype=float)
    gathers = coll.overlapped_time((1 - u) * ag, fwd, penalty) + u * (ag + again)
    gathers = gathers + (1.0 + regathers) * host_ag
    with_rs = gathers + coll.overlapped_time((1 - u) * again + rs, bwd, penalty) + host_rs
    without_rs = gathers + coll.overlapped_time((1 - u) * again, bwd, penalty)
    reducing = m if sh.reduce_every_microbatch else np.minimum(m, 1.0)
    per_layer = reducing * with_rs + (m - reducing) * without_rs
    last = rs
    if sh.reduce_bucket_params:
        params = np.maximum(np.asarray(g.params, dtype=float), 1.0)
        bucket_layers = np.clip(sh.reduce_bucket_params / params * layers, 1.0, layers)
        last = rs * bucket_layers
    return np.asarray(layers * per_layer + m * ag + last)
