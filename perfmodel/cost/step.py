"""Per-step terms outside the layers: recompute, pipeline sends, data-parallel gradient traffic,
ZeRO gathers and the optimizer step (SPEC 6-8). Seconds and bytes; arrays or floats."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.cost import Array, Num

from ..specs.precision import Precision
from . import collectives as coll
from .layer import Link
from .sharded import Group, Sharding, sharded_step, zero1_traffic


def layer_recompute(
    fwd_compute: Num,
    fwd_comm: Num,
    selective_compute: Num,
    recompute: Num,
    selective_comm: Num = 0.0,
) -> tuple[Array, Array]:
    """(compute, comm) seconds one layer spends recomputing in backward (Korthikanti 2022, Sec. 5).

    Full recompute repeats the whole forward, its collectives included; selective repeats the
    forward of the chosen modules: by default the attention core (scores, softmax, dropout,
    attention x V), which has no collective (Megatron-Core --recompute-modules may add, e.g., the
    MoE layer and its all-to-alls). ``recompute`` is a code of RECOMPUTE_CODES (array or scalar): 0
    none, 1 selective, 2 full.
    """
    rc = np.asarray(recompute)
    compute = np.where(rc == 2, fwd_compute, np.where(rc == 1, selective_compute, 0.0))
    return np.asarray(compute), np.asarray(
        np.where(rc == 2, fwd_comm, np.where(rc == 1, selective_comm, 0.0))
    )


def p2p_time(message: Num, tp: Num, sp: Num, pp_link: Link, tp_link: Link) -> Num:
    """One pipeline crossing of a b s h activation (``message`` bytes) with the scatter/gather
    optimization (Narayanan 2021, Sec. 4.1): each TP rank sends 1/t of it to the next stage, which
    all-gathers it over the TP link. Under SP each rank already holds its s/t slice and sends it as
    is: no all-gather (Megatron-LM p2p_communication.py skips scatter/gather with
    sequence_parallel).
    """
    send = sum(coll.collective_time("p2p", message / tp, 2, pp_link.bandwidth, pp_link.latency))
    gather = sum(
        coll.collective_time("all-gather", message, tp, tp_link.ring_bandwidth, tp_link.latency)
    )
    return send + np.where(sp, 0.0, gather)


def pipeline_comm(p2p_s: Num, pp: Num, m: Num, vp: Num) -> Num:
    """2 v crossings per micro-batch sit on the 1F1B critical path (forward activation and backward
    gradient; with equal stages even when the sends overlap compute, as the schedule simulator
    shows). Seconds per step."""
    return np.where(pp > 1, 2.0 * m * vp * p2p_s, 0.0)


@dataclass(frozen=True)
class Windows:
    """Compute that data-parallel traffic can hide behind, seconds: the last micro-batch's backward
    (the gradient reduction's), the first micro-batch's forward (the next step's parameter gather),
    one micro-batch's backward (ZeRO-2's per-micro-batch reduce-scatter), and one layer's forward
    and backward (ZeRO-3's per-layer traffic)."""

    last_backward: Num
    first_forward: Num
    backward: Num
    layer_forward: Num
    layer_backward: Num


@dataclass(frozen=True)
class Overlap:
    """How the framework runs data-parallel traffic (specs/framework.py flags) and the SM/HBM
    contention share an overlapped collective still costs (GPU.comm_overlap_penalty)."""

    grad_reduce: bool
    param_gather: bool
    bucket_params: object
    penalty: float
    sharding: Sharding


def _ring(kind: str, nbytes: Num, n: Num, link: Link) -> Num:
    """One data-parallel collective over the group's link (NCCL's ring, or its tree for an
    all-reduce across many nodes: Link.seconds), seconds."""
    return link.seconds(kind, nbytes, n)


def data_parallel_comm(
    groups: list[Group],
    zero: Num,
    m: Num,
    recompute: Num,
    layers: Num,
    w: Windows,
    ov: Overlap,
    precision: Precision,
    once: Num = False,
    tensors: Num = 1.0,
    unprefetched: Num = 0.0,
) -> tuple[Num, Num]:
    """(exposed DP gradient and parameter traffic per step, exposed sharded per-layer traffic per
    step), s. ``once``: rows whose sharded parameters stay gathered from the step's first forward
    to its last backward, and whose gradients are reduced once (see Sharding.pipeline_once).

    ``groups``: each set of parameters reduced over its own data-parallel group (cost/sharded.py
    Group): the dense ones over dp x cp, the routed experts' over the expert-data-parallel ranks
    (Megatron-Core). Gradients at ``precision.reduce_bytes`` each, ring collectives (SPEC 3):
    - ZeRO-0: an all-reduce per step; ZeRO-1 (Megatron's distributed optimizer): a reduce-scatter,
      then the updated 16-bit parameters all-gathered (Rajbhandari et al. 2020). Bucketed and
      overlapped with the last micro-batch's backward, they expose max(0, comm - window) plus the
      contention share, plus the last bucket, which only starts when the backward ends; the
      parameter all-gather, overlapped with the next step's first forward, likewise exposes what
      that forward cannot hide plus the first bucket.
    - ZeRO-2 as DeepSpeed stage 2: gradients are sharded as they are produced, a reduce-scatter for
      every micro-batch under its backward, and the 16-bit parameters stay replicated.
    - ZeRO-3 and FSDP, and ZeRO-2 as FSDP's SHARD_GRAD_OP (sharding.zero2_per_microbatch): per
      layer, cost/sharded.py (SHARD_GRAD_OP gathers once a micro-batch, not again for the
      backward)."""
    reduce: Num = 0.0
    gather: Num = 0.0
    zero3: Num = 0.0
    sh = ov.sharding
    per_layer_rows = (zero >= 3) | ((zero == 2) & sh.zero2_per_microbatch)
    rows = np.broadcast(m, *(g.params for g in groups)).shape
    for g in groups:
        active = (g.n > 1) & (g.params > 0)
        if not np.any(active):  # nothing to reduce (a dense model's experts; dp 1 everywhere)
            continue
        t_reduce, t_gather = _bucketed(g, zero, m, w, ov, precision)
        reduce = reduce + np.where(active & ~per_layer_rows, t_reduce, 0.0)
        gather = gather + np.where(active & (zero >= 1) & ~per_layer_rows, t_gather, 0.0)
        if not np.any(active & per_layer_rows):
            continue
        sharded = sharded_step(
            g,
            (zero >= 3) & sh.reshard_after_forward & ~np.asarray(once, dtype=bool),
            np.where(once, 1.0, m),
            recompute,
            layers,
            (w.layer_forward, w.layer_backward),
            sh,
            ov.penalty,
            precision,
            tensors,
            unprefetched,
        )
        zero3 = zero3 + np.where(active & per_layer_rows, sharded, 0.0)
    total = np.asarray(reduce + gather) + np.zeros(rows)
    return total, np.zeros_like(total, dtype=float) + zero3


def _bucketed(
    g: Group, zero: Num, m: Num, w: Windows, ov: Overlap, precision: Precision
) -> tuple[Num, Num]:
    """(gradient reduction, parameter gather) seconds a step of one group's bucketed collectives
    (data_parallel_comm's ZeRO 0-2), each less what its window hides: the reduction once a step
    (ZeRO-2: once a micro-batch), the gather once a step."""
    params, n, sh = g.params, g.n, ov.sharding
    grads, weights = params * precision.reduce_bytes, params * precision.weight_bytes
    t_ar = _ring("all-reduce", grads, n, g.link)
    # ZeRO-1's reduce-scatter and all-gather, over its shard group (cost/sharded.py)
    t_rs, t_ag = zero1_traffic(g, grads, weights, sh)
    # the last (first) bucket's share
    last = np.minimum(1.0, ov.bucket_params / np.maximum(params, 1.0))
    step_reduce = np.where(zero >= 1, t_rs, t_ar)
    if ov.grad_reduce:
        step_reduce = (
            coll.overlapped_time(step_reduce, w.last_backward, ov.penalty) + last * step_reduce
        )
    per_mb_rs = coll.overlapped_time(t_rs, w.backward, ov.penalty) if ov.grad_reduce else t_rs
    t_gather = (
        (coll.overlapped_time(t_ag, w.first_forward, ov.penalty) + last * t_ag)
        if ov.param_gather
        else t_ag
    )
    return np.where(zero == 2, m * per_mb_rs, step_reduce), t_gather


def optimizer_step_bytes(p: Precision, fp8_param_gather: bool = False) -> float:
    """HBM bytes per parameter of one optimizer step, as Megatron-LM's mixed-precision optimizer
    runs it (megatron/optimizer/optimizer.py, apex multi-tensor kernels), each pass a separate
    kernel: 16-bit gradients are first copied into fp32 main gradients (2 + 4); fp16 unscales them
    and checks for inf/nan in place (4 + 4); the global grad norm reads them (4); the update reads
    them (4) and reads and writes the fp32 states; the fp32 master is copied to the 16-bit weights
    (4 + 2); the gradient buffer is zeroed (its width). fp32 training has no master copy. Before all
    that, the data-parallel reduction divides the whole gradient buffer by the DP size in its own
    pass, read and write at the buffer's width, even at dp = 1 (megatron/model/distributed.py,
    allreduce_gradients: `buffer_.data /= dp`; Megatron Core scales each bucket the same way unless
    the collective averages; PyTorch DDP fuses the division into its copy into the buckets). With
    FP8 parameter gather the weights' FP8 copies (and transposes) are written once here, 2 + 2 B a
    parameter.
    """
    grad = float(p.gradient_bytes)
    copy_in = 6.0 if grad == 2 else 0.0
    unscale = 8.0 if p.loss_scaling else 0.0
    master_out = 4.0 + p.weight_bytes if p.master_weights else 0.0
    states = 2 * p.optimizer_bytes  # read and write every fp32 state
    # one cast a step
    fp8 = 2.0 + p.fp8_weight_bytes if p.fp8_weight_bytes and fp8_param_gather else 0.0
    return gradient_buffer_bytes(p) + states + copy_in + unscale + 4.0 + 4.0 + master_out + fp8


def gradient_buffer_bytes(p: Precision) -> float:
    """HBM bytes per parameter of the passes over the whole gradient buffer each step, whichever
    optimizer updates the parameter (optimizer_step_bytes): the division by the DP size, read and
    write at the buffer's width, and the zeroing, a write."""
    return 3.0 * p.gradient_bytes


def optimizer_time(
    local_params: Num,
    p: Precision,
    hbm_bandwidth: float,
    hbm_efficiency: float,
    fp8_param_gather: bool = False,
) -> Num:
    """The optimizer step over this GPU's shard: HBM-bound, seconds."""
    return (
        local_params * optimizer_step_bytes(p, fp8_param_gather) / (hbm_bandwidth * hbm_efficiency)
    )


def weight_cast_time(
    params_on_rank: Num, p: Precision, hbm_bandwidth: float, hbm_efficiency: float
) -> Num:
    """Transformer Engine's weight cache (is_first_microbatch): a rank's weights are cast to the
    low-precision format with their transposes on the step's first micro-batch and reused by the
    others, read 2 B and written twice at the format's width with its block scales, seconds a
    step (cost/layer_kernels.fp8_casts charges the same cast per micro-batch without the cache)."""
    each = 2.0 + 2.0 * p.fp8_weight_bytes
    return params_on_rank * each / (hbm_bandwidth * hbm_efficiency)


def fixed_overheads(
    per_step: Num, per_microbatch: Num, per_hop: Num, m: Num, pp: Num, vp: Num
) -> Num:
    """Fixed costs a framework adds outside the kernels, on the critical path, seconds per step:
    once per step, once per micro-batch, and once per pipeline chunk pass (each micro-batch's
    forward and backward through each of the v chunks of a stage, when p > 1). The values are a
    profile's, fitted on published runs (benchmarks/calibrate_overheads.py)."""
    return per_step + m * per_microbatch + np.where(np.asarray(pp) > 1, 2.0 * m * vp * per_hop, 0.0)
