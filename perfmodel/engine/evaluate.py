"""Compose cost/* into the time and memory of one training step (SPEC sections 5-8, 11).

``evaluate`` works on numpy arrays of configurations (one entry per configuration); the
single-configuration report (perfmodel/estimate.py) is the same function on a one-entry array,
so the report and the vectorized search share every formula (STYLE.md "One formula, one place").

Step time of one pipeline (SPEC 8; Narayanan 2021, Sec. 2.2):
    m * T_slowest + (p-1)/v * T_mean        (compute, TP/CP/EP comm and recompute per stage)
  + PP point-to-point, + DP gradient reduction not hidden behind the last
    micro-batch's backward, + ZeRO-3 gathers, + the optimizer step (HBM-bound).
T of a stage is the forward and backward of one micro-batch through its layers, plus the
embedding on the stage that holds it and the LM head and loss on the stage that holds it:
stages are not equal, and the slowest sets the pace (cost/stages.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.cost import flops as fl
from perfmodel.cost import memory as mem
from perfmodel.cost import pipeline as pipe
from perfmodel.cost import step as stp
from perfmodel.cost.layer import Hardware, Op, time_block
from perfmodel.cost.ops import in_modules
from perfmodel.cost.stages import Stages, build_stages, split_layers
from perfmodel.cost.transformer import (
    LayerShape,
    Options,
    decoder_layer,
    embedding,
    grad_accumulation_bytes,
    lm_head,
)
from perfmodel.engine.knobs import CP_COMM_NAMES, Knobs
from perfmodel.engine.mesh import Mesh
from perfmodel.specs import Plan, Precision
from perfmodel.specs.framework import PROFILES

BREAKDOWN_KEYS = (
    "forward",
    "backward",
    "recompute",
    "bubble",
    "tp_comm",
    "pp_comm",
    "dp_comm",
    "zero_comm",
    "optimizer",
    "overhead",
)
MEMORY_KEYS = (
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "other_bytes",
    "total_bytes",
    "capacity_bytes",
    "fits",
    "params_per_gpu",
    "model_states_mean_bytes",
)
_COMPUTE = ("gemm", "attention", "elementwise")
_KEY = ("tp", "micro_batch_size", "sequence_parallel", "cp", "ep", "etp", "cp_comm_type")


@dataclass(frozen=True)
class Setting:
    """What every cost of a plan reads besides the knobs: shapes, precision, GPU numbers,
    kernels."""

    plan: Plan
    shape: LayerShape
    precision: Precision
    hw: Hardware
    options: Options
    moe_pattern: tuple[int, ...]

    @classmethod
    def of(cls, plan: Plan) -> "Setting":
        tr = plan.training
        p = Precision.of(tr.dtype, tr.grad_accum_fp32, tr.optimizer, tr.mfu_peak)
        opts = Options(
            gemm_bytes=p.gemm_bytes,
            act_bytes=p.activation_bytes,
            flash=tr.flash_attention,
            persist_ln=tr.persist_layer_norm,
            dispatcher=tr.moe_token_dispatcher_type,
            a2a_overlap=tr.moe_a2a_overlap,
            dropout=plan.model.has_dropout,
            bias_fused=tr.bias_gemm_fusion,
            fused_ce=tr.fused_cross_entropy,
            tp_overlap_ub=tr.tp_comm_overlap_ub,
            fp8_param_gather=tr.fp8_param_gather,
            grad_accum_bytes=grad_accumulation_bytes(
                p.activation_bytes, tr.grad_accumulation_fusion, p.gradient_bytes
            ),
        )
        return cls(
            plan,
            LayerShape.of(plan.model),
            p,
            Hardware.from_gpu(plan.system.gpu, p.compute),
            opts,
            tuple(plan.model.moe_pattern()),
        )

    @property
    def moe_layers(self) -> int:
        return sum(self.moe_pattern)

    def kinds(self) -> list[str]:
        """The layer kinds this model has (cost/stages.KINDS order)."""
        return [
            k
            for k, n in (
                ("dense", len(self.moe_pattern) - self.moe_layers),
                ("moe", self.moe_layers),
            )
            if n
        ]


@dataclass(frozen=True)
class BlockCost:
    """One block on one GPU per micro-batch: seconds of compute and communication, forward and
    backward, and of the attention core's forward (what selective recompute repeats); activation
    bytes kept under no, selective and full recompute; parameters on the rank (all, and those of the
    routed experts).
    """

    fwd: np.ndarray
    bwd: np.ndarray
    comm_fwd: np.ndarray
    comm_bwd: np.ndarray
    core_fwd: np.ndarray  # compute of the selectively recomputed modules' forward
    core_comm: np.ndarray  # their communication
    activations: np.ndarray  # (3, n): recompute none, selective, full
    params: np.ndarray
    expert_params: np.ndarray

    @classmethod
    def of(cls, ops: list[Op], block, t, ep, etp, modules=("core_attn",)) -> "BlockCost":
        zero = 0.0 * ops[0].fwd_s
        repeat = {o.name for o in block.ops if in_modules(o, modules)}

        def total(attr, kinds, core_only=False):
            return sum(
                (
                    getattr(o, attr)
                    for o in ops
                    if o.kind in kinds and (o.name in repeat or not core_only)
                ),
                zero,
            )

        acts = np.stack(
            [np.broadcast_to(block.activation_bytes(rc) + zero, np.shape(zero)) for rc in (0, 1, 2)]
        )
        expert = sum(op.params for op in block.ops if getattr(op, "shard", "") == "experts")
        params = (block.params() - expert) / t + expert / (ep * etp) + zero
        return cls(
            total("fwd_s", _COMPUTE),
            total("bwd_s", _COMPUTE),
            total("fwd_s", ("comm",)),
            total("bwd_s", ("comm",)),
            total("fwd_s", _COMPUTE, core_only=True),
            total("fwd_s", ("comm",), core_only=True),
            acts,
            params,
            expert / (ep * etp) + zero,
        )

    def seconds(self, recompute=0):
        """(forward, backward) seconds per micro-batch, communication included; the backward
        includes what ``recompute`` (a RECOMPUTE_CODES code) repeats of the forward."""
        rec, rec_comm = stp.layer_recompute(
            self.fwd, self.comm_fwd, self.core_fwd, recompute, self.core_comm
        )
        return self.fwd + self.comm_fwd, self.bwd + self.comm_bwd + rec + rec_comm

    def kept(self, recompute):
        """Activation bytes kept per micro-batch under each configuration's recompute code."""
        return np.take_along_axis(self.activations, np.asarray(recompute)[None, :], axis=0)[0]

    def take(self, idx) -> "BlockCost":
        pick = lambda x: np.asarray(x)[..., idx]  # noqa: E731
        return BlockCost(*(pick(getattr(self, f)) for f in self.__dataclass_fields__))


def block_ops(
    st: Setting, builder, tp, b, sp, cp=1, ep=1, etp=1, cp_comm: str = "p2p", **kw
) -> list[Op]:
    """A block (decoder_layer, lm_head or embedding) described and timed for arrays of the split."""
    plan = st.plan
    mesh = Mesh(
        np.asarray(tp), 1, 1, plan.system, cp=np.asarray(cp), ep=np.asarray(ep), etp=np.asarray(etp)
    )
    o = Options(**{**st.options.__dict__, "cp_comm": cp_comm})
    if builder is decoder_layer:
        block = builder(st.shape, o, b, plan.seq_length, tp, sp, cp, ep, etp, **kw)
    else:
        block = builder(st.shape, o, b, plan.seq_length, tp, sp, cp)
    sizes = {"tp": tp, "cp": cp, "ep": ep, "etp": etp}
    links = {d: mesh.link(d) for d in sizes}
    return (
        time_block(
            st.hw,
            block,
            gemm_bytes=st.precision.gemm_bytes,
            sizes=sizes,
            sp=sp,
            links=links,
            overlap=plan.training.tp_comm_overlap,
        ),
        block,
    )


def block_costs(st: Setting, k: Knobs) -> dict[str, BlockCost]:
    """Dense layer, MoE layer, LM head and embedding costs per micro-batch. They depend on the split
    of a micro-batch only (tp, b, sp, cp, ep, etp, CP's exchange), so each is computed once per
    distinct split and broadcast back to every configuration."""
    key = np.zeros(len(k), dtype=np.int64)
    radix = 1
    for name in _KEY:  # mixed-radix code of the split, column by column (np.unique on rows is slow)
        col = np.asarray(getattr(k, name), dtype=np.int64)
        top = int(col.max(initial=0)) + 1
        if (
            radix * top >= 2**62
        ):  # too wide for one int64: renumber the column by its distinct values
            values, col = np.unique(col, return_inverse=True)
            col, top = col.ravel(), len(values)
        key, radix = key * top + col, radix * top
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    u = {name: np.asarray(getattr(k, name), dtype=np.int64)[first] for name in _KEY}
    builders = [("embedding", embedding, {}), ("head", lm_head, {})]
    builders += [(kind, decoder_layer, {"moe": kind == "moe"}) for kind in st.kinds()]
    out: dict[str, BlockCost] = {}
    for name, builder, kw in builders:
        parts = []
        for code in np.unique(u["cp_comm_type"]):
            rows = np.flatnonzero(u["cp_comm_type"] == code)
            f = {n: u[n][rows].astype(float) for n in ("tp", "micro_batch_size", "cp", "ep", "etp")}
            sp = u["sequence_parallel"][rows].astype(bool)
            ops, block = block_ops(
                st,
                builder,
                f["tp"],
                f["micro_batch_size"],
                sp,
                f["cp"],
                f["ep"],
                f["etp"],
                CP_COMM_NAMES[int(code)],
                **kw,
            )
            parts.append(
                (
                    rows,
                    BlockCost.of(
                        ops, block, f["tp"], f["ep"], f["etp"], st.plan.training.recompute_modules
                    ),
                )
            )
        out[name] = _merge(parts, len(first)).take(inverse)
    return out


def _merge(parts: list[tuple[np.ndarray, BlockCost]], n: int) -> BlockCost:
    if len(parts) == 1:
        return parts[0][1]
    fields = {}
    for name in BlockCost.__dataclass_fields__:
        first = np.asarray(getattr(parts[0][1], name))
        arr = np.zeros(first.shape[:-1] + (n,))
        for rows, c in parts:
            arr[..., rows] = getattr(c, name)
        fields[name] = arr
    return BlockCost(**fields)


def stage_costs(
    st: Setting, stages: Stages, c: dict[str, BlockCost], recompute
) -> dict[str, np.ndarray]:
    """Per stage class, seconds per micro-batch: forward, backward, recompute and TP/CP/EP comm (the
    four sum to the stage's time), and the forward share the schedule simulator needs."""
    layers = [c.get(kind) for kind in ("dense", "moe")]
    head, emb = c["head"], c["embedding"]
    rec = [
        stp.layer_recompute(x.fwd, x.comm_fwd, x.core_fwd, recompute, x.core_comm) if x else None
        for x in layers
    ]
    per = lambda f: [f(x, r) if x else None for x, r in zip(layers, rec)]  # noqa: E731
    out = {
        "fwd": stages.total(per(lambda x, r: x.fwd), emb.fwd, head.fwd),
        "bwd": stages.total(per(lambda x, r: x.bwd), emb.bwd, head.bwd),
        "rec": stages.total(per(lambda x, r: r[0]), 0.0, 0.0),
        "comm": stages.total(
            per(lambda x, r: x.comm_fwd + x.comm_bwd + r[1]),
            emb.comm_fwd + emb.comm_bwd,
            head.comm_fwd + head.comm_bwd,
        ),
    }
    out["time"] = out["fwd"] + out["bwd"] + out["rec"] + out["comm"]
    out["fwd_share"] = stages.total(
        per(lambda x, r: x.fwd + x.comm_fwd), emb.fwd + emb.comm_fwd, head.fwd + head.comm_fwd
    )
    return out


def layout(st: Setting, k: Knobs, c: dict[str, BlockCost]) -> tuple[Stages, np.ndarray]:
    """The stage classes of every configuration (given first/last stage layers, an even split, or
    the balanced one of cost/stages.split_layers from this configuration's own layer, embedding and
    head times), and the seconds per micro-batch of one layer of the model's dense/MoE mix."""
    L = len(st.moe_pattern)
    moe_share = st.moe_layers / L
    per_layer = [sum(c[kind].seconds(k.recompute)) for kind in ("dense", "moe") if kind in c]
    t_layer = (
        per_layer[0]
        if len(per_layer) == 1
        else (1 - moe_share) * per_layer[0] + moe_share * per_layer[1]
    )
    first, last = split_layers(
        L,
        k.pp,
        k.vp,
        k.first_stage_layers,
        k.last_stage_layers,
        t_layer,
        sum(c["embedding"].seconds()),
        sum(c["head"].seconds()),
    )
    return build_stages(L, st.moe_pattern, k.pp, first, last), t_layer


def memory_terms(
    st: Setting, k: Knobs, stages: Stages, c: dict[str, BlockCost], m
) -> dict[str, np.ndarray]:
    """Memory on the most loaded GPU (SPEC 6): model states and activations of each stage class at
    the peak of the schedule; the class with the largest total is reported (Korthikanti 2022, Sec.
    4.3). Activations are read off the layer descriptions; the routed experts' states are sharded
    over the expert-data-parallel ranks, the rest over dp x cp (Megatron-Core's distributed
    optimizer)."""
    sh, gpu = st.shape, st.plan.system.gpu
    tp, pp, vp, b, cp = (
        k.tp.astype(float),
        k.pp.astype(float),
        k.vp.astype(float),
        k.micro_batch_size.astype(float),
        k.cp.astype(float),
    )
    s = st.plan.seq_length
    layers = [c.get(kind) for kind in ("dense", "moe")]
    present = [x for x in layers if x]
    idx = stages.first_index
    in_flight = np.where(
        idx == 0,
        pipe.in_flight_microbatches(pp, m, vp, k.schedule)[:, None],
        pipe.in_flight_microbatches(
            np.maximum(pp[:, None] - idx, 1), m[:, None], vp[:, None], k.schedule[:, None]
        ),
    )
    in_flight = np.where((idx == pp[:, None] - 1) & (pp[:, None] > 1), 1.0, in_flight)
    kept = [x.kept(k.recompute) if x else None for x in layers]
    working = np.where(k.recompute == 2, np.max([x.activations[0] for x in present], axis=0), 0.0)
    _, _, embed, head = mem.activation_terms(
        s, b, sh.hidden, 0, sh.vocab, tp, k.sequence_parallel, 0
    )
    acts = (
        stages.total(kept, 0.0, 0.0) * in_flight
        + working[:, None]
        + np.where(stages.embedding, (embed / cp)[:, None] * in_flight, 0.0)
        + np.where(stages.head, (head / cp)[:, None], 0.0)
    )
    params = stages.total([x.params if x else None for x in layers], *mem.end_params(sh, s, tp, pp))
    mesh = Mesh(
        tp,
        pp,
        k.dp.astype(float),
        st.plan.system,
        cp=cp,
        ep=k.ep.astype(float),
        etp=k.etp.astype(float),
    )
    z = k.zero_stage[:, None]
    if st.moe_layers:
        experts = stages.total([None, layers[1].expert_params], 0.0, 0.0)
        dense = mem.model_state_bytes(params - experts, (k.dp * k.cp)[:, None], z, st.precision)
        expert = mem.model_state_bytes(experts, mesh.edp[:, None], z, st.precision)
        states = [d + e for d, e in zip(dense, expert)]
    else:
        experts = np.zeros_like(params)
        states = list(mem.model_state_bytes(params, (k.dp * k.cp)[:, None], z, st.precision))
    other = np.full(tp.shape, gpu.reserved_bytes)
    total = sum(states) + acts + other[:, None]
    top = stages.slowest(total)
    pick = lambda x: stages.pick(x, top)  # noqa: E731
    mean_params = mem.total_params(sh, len(st.moe_pattern), s, st.moe_layers) / (tp * pp)
    return {
        "weights_bytes": pick(states[0]),
        "gradients_bytes": pick(states[1]),
        "optimizer_bytes": pick(states[2]),
        "activations_bytes": pick(acts),
        "other_bytes": other,
        "total_bytes": pick(total),
        "capacity_bytes": np.full(tp.shape, gpu.hbm_capacity_bytes),
        "fits": pick(total) <= gpu.hbm_capacity_bytes,
        "params_per_gpu": pick(params),
        # the seed's figure (000, Q3): all parameters spread evenly over the tp x pp model-parallel
        # GPUs
        "model_states_mean_bytes": sum(
            mem.model_state_bytes(mean_params, k.dp * k.cp, k.zero_stage, st.precision)
        ),
        "_params_max": stages.present_max(params - experts),
        "_experts_max": stages.present_max(experts),
        "_mesh": mesh,
    }


def throughput(st: Setting, k: Knobs, step) -> dict[str, np.ndarray]:
    """Tokens per second, model and hardware TFLOP/s per GPU, MFU and HFU (SPEC 5), against the peak
    of the precision's MFU dtype. FLOPs are read off the layer descriptions (cost/flops.py), with
    the k active experts of each MoE layer."""
    plan, sh = st.plan, st.shape
    B, s, L, n = (
        plan.training.global_batch_size,
        plan.seq_length,
        plan.model.num_layers,
        plan.system.num_gpus,
    )
    model_fl = fl.model_flops(sh, B, s, L, st.moe_layers)
    rc = k.recompute
    hw_fl = np.where(
        rc == 2,
        fl.hardware_flops(sh, B, s, L, "full", st.moe_layers),
        np.where(rc == 1, fl.hardware_flops(sh, B, s, L, "selective", st.moe_layers), model_fl),
    )
    peak = plan.system.gpu.peak(st.precision.mfu_peak)
    out = {"tokens_per_s": B * s / step}
    out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / n
    out["model_tflops_per_gpu"] = model_fl / step / n / 1e12
    out["hardware_tflops_per_gpu"] = hw_fl / step / n / 1e12
    out["mfu"] = out["model_tflops_per_gpu"] * 1e12 / peak
    out["hfu"] = out["hardware_tflops_per_gpu"] * 1e12 / peak
    return out


def evaluate(plan: Plan, k: Knobs) -> dict[str, np.ndarray]:
    """Step time, breakdown and memory of every configuration in ``k`` (arrays in, arrays out)."""
    st = Setting.of(plan)
    tr, gpu = plan.training, plan.system.gpu
    tp, pp, dp, vp, b, cp = (
        k.tp.astype(float),
        k.pp.astype(float),
        k.dp.astype(float),
        k.vp.astype(float),
        k.micro_batch_size.astype(float),
        k.cp.astype(float),
    )
    costs = block_costs(st, k)
    stages, t_layer = layout(st, k, costs)
    sc = stage_costs(st, stages, costs, k.recompute)
    slow = stages.slowest(sc["time"])
    m = tr.global_batch_size / (dp * b)
    memory = memory_terms(st, k, stages, costs, m)
    mesh = memory.pop("_mesh")
    p2p = stp.p2p_time(
        b * plan.seq_length * st.shape.hidden * st.precision.activation_bytes / cp,
        tp,
        k.sequence_parallel,
        mesh.link("pp", size=2),
        mesh.link("tp"),
    )
    dense, experts = memory.pop("_params_max"), memory.pop("_experts_max")
    grad_dim = np.where(
        dp > 1, 0, 1
    )  # the dp x cp group is bounded by dp's link, or cp's when dp = 1
    groups = [
        (
            dense,
            dp * cp,
            _pick_link(mesh.link("dp", size=dp * cp), mesh.link("cp", size=dp * cp), grad_dim),
        ),
        (experts, mesh.edp, mesh.link("edp")),
    ]
    dp_comm, zero3 = stp.data_parallel_comm(
        groups,
        k.zero_stage,
        m,
        k.recompute,
        stages.pick(stages.layers.sum(axis=-1), slow),
        _windows(stages, sc, slow, _main_layer(costs).seconds(k.recompute)),
        _overlap(st, dp * cp),
        st.precision,
    )
    local = dense / np.where(k.zero_stage >= 1, dp * cp, 1.0) + experts / np.where(
        k.zero_stage >= 1, mesh.edp, 1.0
    )
    t_mean = stages.mean(sc["time"], pp)
    out = {
        "forward": m * stages.pick(sc["fwd"], slow),
        "backward": m * stages.pick(sc["bwd"], slow),
        "recompute": m * stages.pick(sc["rec"], slow),
        "tp_comm": m * stages.pick(sc["comm"], slow),
        "bubble": (pp - 1) / vp * t_mean,
        "pp_comm": stp.pipeline_comm(p2p, pp, m, vp),
        "dp_comm": dp_comm,
        "zero_comm": zero3,
        "optimizer": stp.optimizer_time(
            local,
            st.precision,
            gpu.hbm_bandwidth_bytes_per_s,
            gpu.hbm_efficiency,
            tr.fp8_param_gather,
        ),
        "overhead": stp.fixed_overheads(
            tr.step_overhead_s, tr.microbatch_overhead_s, tr.hop_overhead_s, m, pp, vp
        ),
    }
    step = sum(out[key] for key in BREAKDOWN_KEYS)
    # the slowest middle stage, or (none at p <= 2) an even one: L/p layers of the model's mix
    middle_present = stages.count[:, 1:3] > 0
    t_middle = np.where(
        middle_present.any(axis=1),
        np.where(middle_present, sc["time"][:, 1:3], -np.inf).max(axis=1),
        len(st.moe_pattern) / pp * t_layer,
    )
    out.update(
        step_time_s=step,
        num_micro_batches=m,
        slowest_stage_is_first=slow == 0,
        slowest_stage_class=slow,
        stage_time_first_s=sc["time"][:, 0],
        stage_time_middle_s=t_middle,
        stage_time_last_s=np.where(
            stages.count[:, 3] > 0, sc["time"][:, 3], t_middle + sum(costs["head"].seconds())
        ),
        p2p_s=np.where(pp > 1, p2p, 0.0),
        slowest_stage_s=stages.pick(sc["time"], slow),
        # a lower bound on the simulated step (search.py ranks with it; exact for equal stages)
        simulated_step_lower_bound_s=step
        - out["bubble"]
        - out["pp_comm"]
        - m * stages.pick(sc["time"], slow)
        + pipe.pipeline_lower_bound(stages.count, stages.first_index, sc["time"], m, vp),
        # the schedule's closed-form bubble (equal stages, SPEC 7) and the bubble's share of this
        # step
        bubble_over_ideal=pipe.bubble_over_ideal(pp, m, vp),
        bubble_over_step=pipe.bubble_over_step(pp, m, vp),
        bubble_share_of_step=out["bubble"] / step,
    )
    out.update(memory)
    out.update(throughput(st, k, step))
    out["stages"] = StageArrays(stages, sc["time"], sc["fwd_share"])
    return out


def _main_layer(c: dict[str, BlockCost]) -> BlockCost:
    """The cost of the model's main layer kind (MoE where it has MoE layers)."""
    return c.get("moe") or c["dense"]


def _windows(stages: Stages, sc: dict, slow, layer) -> stp.Windows:
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


def _overlap(st: Setting, n) -> stp.Overlap:
    """The profile's bucket (Megatron-Core: max(40M, 1M x dp) parameters) and the overlap flags."""
    tr = st.plan.training
    bucket = PROFILES[tr.framework]["grad_bucket_params"]
    if tr.framework == "megatron-core":
        bucket = np.maximum(bucket, 1e6 * n)
    return stp.Overlap(
        tr.overlap_grad_reduce,
        tr.overlap_param_gather,
        tr.zero3_reshard_after_forward,
        bucket,
        st.plan.system.gpu.comm_overlap_penalty,
    )


def _pick_link(a, b, which):
    from perfmodel.cost.layer import Link

    sel = lambda x, y: np.where(which == 0, x, y)  # noqa: E731
    return Link(
        sel(a.bandwidth, b.bandwidth),
        sel(a.latency, b.latency),
        a.intra_bandwidth,
        a.intra_latency,
        sel(a.ranks_per_node, b.ranks_per_node),
    )


@dataclass(frozen=True)
class StageArrays:
    """Per stage class: seconds per micro-batch in all and in forward (for the schedule
    simulator)."""

    stages: Stages
    time: np.ndarray
    fwd: np.ndarray

    def per_stage(self, row: int = 0) -> tuple[list[float], list[float]]:
        """Forward and backward seconds per micro-batch of each stage, first stage first."""
        tf, tt = self.stages.expand(self.fwd, row), self.stages.expand(self.time, row)
        return tf, [t - f for t, f in zip(tt, tf)]
