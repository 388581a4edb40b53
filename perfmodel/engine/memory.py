"""The memory of every configuration on its most loaded GPU (SPEC 6): model states sharded as the
ZeRO stage says, activations at the schedule's peak, and what the framework reserves; composed from
the blocks' descriptions (perfmodel/engine/blocks.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.cost import Array, offload, optimizer_offload
from perfmodel.cost import memory as mem
from perfmodel.cost import pipeline as pipe
from perfmodel.cost.ops import Gemm, Pointwise
from perfmodel.cost.stages import Stages
from perfmodel.cost.transformer import Options, decoder_layer
from perfmodel.engine import memory_switches
from perfmodel.engine.block_cost import BlockCost
from perfmodel.engine.blocks import Setting
from perfmodel.engine.knobs import Knobs
from perfmodel.engine.memory_verdict import fits_mask, host_fits, tight_mask
from perfmodel.engine.mesh import Mesh, expert_shard
from perfmodel.engine.offloading import Offload, offloads
from perfmodel.engine.reserve import reserve_bytes
from perfmodel.engine.sharding_buffers import sharding_buffers
from perfmodel.specs.by_plan import ByPlan, batchless
from perfmodel.specs.framework import PROFILES

if TYPE_CHECKING:
    from perfmodel.specs import Plan, System

MEMORY_KEYS = (
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "optimizer_host_bytes",
    "activations_host_bytes",
    "host_bytes",
    "host_capacity_bytes",
    "activations_bytes",
    "reserve_bytes",
    "usable_bytes",
    "total_bytes",
    "capacity_bytes",
    "fits",
    "tight",
    "params_per_gpu",
    "model_states_mean_bytes",
)


def memory_terms(
    st: Setting, k: Knobs, stages: Stages, c: dict[str, BlockCost], m: Array, off: Offload
) -> dict[str, Any]:
    """Memory on the most loaded GPU (SPEC 6): model states and activations of each stage class at
    the peak of the schedule; the class with the largest total is reported (Korthikanti 2022, Sec.
    4.3). Activations are read off the layer descriptions; the routed experts' states are sharded
    over the expert-data-parallel ranks, the rest over dp x cp (Megatron-Core's distributed
    optimizer). ``off``: what each row sends to host memory (engine/offloading.offload_terms)."""
    sh, gpu = st.shape, st.plan.system.gpu
    tp, pp = k.tp.astype(float), k.pp.astype(float)
    s = st.plan.seq_length
    layers = [c.get(kind) for kind in ("dense", "moe")]
    acts, host_acts = _activations(st, k, stages, layers, m, off)
    # DualPipe: a rank holds two stages' parameters, and each stage's states are sharded over the
    # 2 dp ranks that hold it (DeepSeek-V3 report Table 2: "2x" parameters)
    dual = pipe.dualpipe_rows(k.schedule, k.pp)
    copies = np.where(dual, 2.0, 1.0)
    ends = mem.end_params(sh, s, tp, pp, st.mtp)
    params = stages.dualpipe(
        stages.total([x.params if x else None for x in layers], *ends), dual, "sum"
    )
    params = stages.v_ends(params, ends[1], v_rows(k))
    mesh = _mesh(k, st.plan.system)
    z = k.zero_stage[:, None]
    # ZeRO shards over dp x cp, or under HSDP over dp_shard x cp
    sharded_over = np.where(k.dp_shard > 0, k.dp_shard, k.dp) * k.cp * copies
    moe_cost = layers[1]
    moe = bool(st.moe_layers) and moe_cost is not None
    experts = np.zeros_like(params)
    if moe and moe_cost is not None:
        experts = stages.dualpipe(
            stages.total([None, moe_cost.expert_params], 0.0, 0.0), dual, "sum"
        )
    e_over = (expert_shard(mesh.edp, k.dp, k.dp_shard, k.zero_stage) * copies)[:, None]
    parts = (params, experts if moe else None, sharded_over[:, None], e_over, z)
    states = _states(st, *parts)
    states[0] = states[0] + sharding_buffers(st, k, stages, params, m)
    total = sum(states) + acts
    top = stages.slowest(total)
    reserve = reserve_bytes(st.plan.system)
    usable = gpu.hbm_capacity_bytes - reserve

    def pick(x: Array) -> Array:
        return stages.pick(x, top)

    whole = _PARAMS.get(st.plan, None, lambda: _model_params(st))[0]
    mean_states = _mean_states(st, k, whole, moe_cost, sharded_over, mesh, copies)
    host = _host_terms(st, parts, pick, pick(host_acts))
    return {
        "weights_bytes": pick(states[0]),
        "gradients_bytes": pick(states[1]),
        "optimizer_bytes": pick(states[2]),
        **host,
        "activations_bytes": pick(acts),
        "total_bytes": pick(total),
        "capacity_bytes": np.full(tp.shape, gpu.hbm_capacity_bytes),
        "reserve_bytes": np.full(tp.shape, reserve),
        "usable_bytes": np.full(tp.shape, usable),
        # the verdicts against the memory model's own band (MEMORY_BAND, issue 37): fits unless
        # even the band's lower edge passes the usable line ("does not fit"); tight where the
        # line lies within the band (a launch there is a bet the model cannot back either way)
        # and what is offloaded fits in the host's DRAM (host_fits)
        "fits": fits_mask(pick(total), usable) & host_fits(host),
        "tight": tight_mask(pick(total), usable),
        "params_per_gpu": pick(params),
        # the seed's figure (000, Q3): all parameters spread evenly over the tp x pp model-parallel
        # GPUs
        "model_states_mean_bytes": mean_states,
        # a layer's kept activations per micro-batch: what offloading one more layer sheds
        "layer_activations_bytes": pick(off.kept),
        "_params_max": stages.present_max(params - experts),
        "_experts_max": stages.present_max(experts),
        "_mesh": mesh,
    }


def _host_terms(
    st: Setting,
    parts: tuple[Any, Any, Any, Any, Any],
    pick: Callable[[Array], Array],
    activations: Array,
) -> dict[str, Array]:
    """What is offloaded to the host's DRAM, bytes on the reported stage: the optimizer's share
    (--optimizer-cpu-offload; not in the HBM total), the offloaded ``activations`` (of every
    micro-batch in flight: _activations), their sum and the GPU's share of that DRAM (0: not
    known, not checked)."""
    capacity = st.plan.system.host_memory_bytes or 0.0
    optimizer = (
        pick(_states(st, *parts, host=True)[2])
        if st.plan.training.optimizer_cpu_offload
        else np.zeros(len(activations))
    )
    return {
        "optimizer_host_bytes": optimizer,
        "activations_host_bytes": activations,
        "host_bytes": optimizer + activations,
        "host_capacity_bytes": np.full(np.shape(optimizer), capacity),
    }


def _mesh(k: Knobs, system: System) -> Mesh:
    """The device mesh of the configurations ``k`` (arrays of floats)."""
    f = {d: getattr(k, d).astype(float) for d in ("tp", "pp", "dp", "cp", "ep", "etp")}
    return Mesh(f["tp"], f["pp"], f["dp"], system, cp=f["cp"], ep=f["ep"], etp=f["etp"])


def _states(
    st: Setting,
    params: Any,
    experts: Any,
    over: Any,
    expert_over: Any,
    zero: Any,
    host: bool = False,
) -> list[Array]:
    """Weights, gradients, optimizer (_state_bytes): the dense part sharded over ``over``, the
    routed experts (None: no MoE layer) over their expert-data-parallel ranks ``expert_over``;
    ``host``: the optimizer's offloaded share instead."""
    if experts is None:
        return list(_state_bytes(st, params, over, zero, host))
    dense = _state_bytes(st, params - experts, over, zero, host)
    expert = _state_bytes(st, experts, expert_over, zero, host)
    return [d + e for d, e in zip(dense, expert)]


def _state_bytes(
    st: Setting, params: Any, over: Any, zero: Any, host: bool = False
) -> tuple[Array, Array, Array]:
    """(weights, gradients, optimizer) bytes of ``params`` parameters sharded over ``over`` ranks
    at ZeRO stage ``zero``, as the run's framework keeps them: FSDP's sharded parameter is the
    optimizer's fp32 master (counted in its states), so under ZeRO-3 the 16-bit weights exist only
    in the gathered units (sharding_buffers); Megatron-Core's fp8_param_gather keeps the weights
    in FP8 only (FSDP's float8 all-gather leaves its fp32 shard as it is). With ``host``, the
    optimizer's share the CPU offload keeps in host memory instead (optimizer only)."""
    tr = st.plan.training
    master = PROFILES[tr.framework]["params_are_master"]
    w, g, o = mem.model_state_bytes(
        params, over, zero, st.precision, bool(tr.fp8_param_gather) and not master
    )
    if master:
        w = np.where(np.asarray(zero) >= 3, 0.0, w)
    # the optimizer's CPU offload keeps its fraction of the states in host memory
    gpu = optimizer_offload.gpu_state_bytes(o, tr.optimizer_cpu_offload)
    if host:
        return np.zeros_like(gpu), np.zeros_like(gpu), np.asarray(o, dtype=float) - gpu
    return np.asarray(w), g, gpu


def memory_lower_bound(plan: Plan, k: Knobs) -> Array:
    """A lower bound on every configuration's memory per GPU, bytes, that no block's timing is
    needed for. The model states' mean over the stages (_mean_states) the most loaded stage's
    states reach at least. The stage holding the LM head also holds its input and the loss's
    logits for a micro-batch in flight (_ends), which no memory switch sheds (engine/
    memory_switches.py: they move the optimizer's states or the layers' activations). At pp 1 one
    stage holds both; else the bound is the larger. The search sets aside, unpriced, what this
    proves cannot fit (engine/search.py); a micro-batch of 8 sequences of 4,096 tokens holds some
    17 GB of Llama 3's logits at tp 1, so most large micro-batches go unpriced. The rows carry one
    memory switch set (engine/memory_switches.py). It never reads the global batch, so plans that
    differ in it alone share one plan's switched copies and setting (by_plan.batchless)."""
    return _lower_bound(batchless(plan), k)


def _lower_bound(plan: Plan, k: Knobs) -> Array:
    plan = memory_switches.uniform_plan(plan, k.memory_switch)
    st = Setting.of(plan)
    n_moe = st.moe_layers + (st.mtp if st.mtp_kind else 0)
    whole, expert_layer = _PARAMS.get(plan, None, lambda: _model_params(st))
    tp, pp = k.tp.astype(float), k.pp.astype(float)
    sharded_over = np.where(k.dp_shard > 0, k.dp_shard, k.dp) * k.cp
    experts_whole = expert_layer * n_moe
    dense = (whole - experts_whole) / (tp * pp)
    states: Array = np.asarray(sum(_state_bytes(st, dense, sharded_over, k.zero_stage)))
    if n_moe:
        rank = experts_whole / (pp * k.ep.astype(float) * k.etp.astype(float))
        e_shard = expert_shard(_mesh(k, plan.system).edp, k.dp, k.dp_shard, k.zero_stage)
        states = states + np.asarray(sum(_state_bytes(st, rank, e_shard, k.zero_stage)))
    head = _ends(st, k)[1]
    return np.where(k.pp == 1, states + head, np.maximum(states, head))


def switchless_bytes(plan: Plan, k: Knobs) -> Array:
    """What no memory switch sheds of each configuration's memory per GPU, bytes: the LM head's
    input and the loss's logits for a micro-batch, on the head's stage (_ends; the switch sets
    move the optimizer's states or the layers' activations: engine/memory_switches.py). A row
    this alone does not fit fits under no set, and memory_lower_bound holds it under every set."""
    return _ends(Setting.of(batchless(plan)), k)[1]


# each recent plan's parameters: the whole model's, and a MoE layer's routed experts' (the search
# bounds its rows' states some ten times a plan)
_PARAMS: ByPlan[tuple[float, float]] = ByPlan(1024)


def _model_params(st: Setting) -> tuple[float, float]:
    """(the model's parameters, a MoE layer's routed experts' parameters; 0 without MoE)."""
    sh = st.shape
    whole = mem.total_params(
        sh, len(st.moe_pattern), st.plan.seq_length, st.moe_layers, st.mtp, bool(st.mtp_kind)
    )
    if not st.moe_layers + (st.mtp if st.mtp_kind else 0):
        return whole, 0.0
    moe = decoder_layer(sh, Options(), 1, 1, 1, False, moe=True)
    routed = (op for op in moe.ops if isinstance(op, (Gemm, Pointwise)) and op.shard == "experts")
    return whole, float(sum(op.params for op in routed))


def _mean_states(
    st: Setting,
    k: Knobs,
    whole: float,
    moe: BlockCost | None,
    sharded_over: Array,
    mesh: Mesh,
    copies: Array | float = 1.0,
) -> Array:
    """The seed's figure (000, Q3): the model's states spread evenly over the pipeline stages,
    bytes a GPU. The dense parameters split over tp x pp and their states over the ZeRO group;
    the routed experts split over pp x ep x etp and their states over the expert-data-parallel
    ranks (so a mixture of experts' mean never exceeds its most loaded stage by counting every
    expert on every GPU). ``copies``: the model copies the schedule keeps (DualPipe: 2), each
    stage's states sharded over that many more ranks (``sharded_over`` includes them)."""
    tp, pp = k.tp.astype(float), k.pp.astype(float)
    n_moe = st.moe_layers + (st.mtp if st.mtp_kind else 0)
    experts_rank = (
        np.asarray(moe.expert_params) * n_moe / pp if moe is not None and n_moe else 0.0 * tp
    )
    experts_whole = (
        np.asarray(moe.expert_params) * k.ep * k.etp * n_moe if moe is not None else 0.0 * tp
    )
    dense = copies * (whole - experts_whole) / (tp * pp)
    total: Array = np.asarray(sum(_state_bytes(st, dense, sharded_over, k.zero_stage)))
    e_shard = expert_shard(mesh.edp, k.dp, k.dp_shard, k.zero_stage)
    if n_moe and moe is not None:
        total = total + np.asarray(
            sum(_state_bytes(st, experts_rank * copies, e_shard * copies, k.zero_stage))
        )
    return total


def loss_logit_bytes(plan: Plan) -> float:
    """Bytes a logit the loss holds at its peak (times s b V / t): the framework's unfused or fused
    loss (specs/framework_memory.py); Transformer Engine's fused kernel writes the gradient into
    the 16-bit logits it saved, 2 B (transformer_engine/pytorch/cross_entropy.py at v2.14:
    save_for_backward(inp), the Triton forward storing the gradient in its input)."""
    tr = plan.training
    profile = PROFILES[tr.framework]
    if not tr.fused_cross_entropy:
        return float(profile["loss_logit_bytes"])
    if tr.cross_entropy_fusion_impl == "te":
        return 2.0
    return float(profile["fused_loss_logit_bytes"])


def v_rows(k: Knobs) -> Array:
    """Where a configuration runs a V-shaped schedule over more than one stage (rank 0 holds the
    embedding and the LM head: Stages.v_ends)."""
    return np.asarray(np.isin(k.schedule, pipe.V_SHAPED) & (k.pp > 1))


def _in_flight(k: Knobs, stages: Stages, m: Array) -> Array:
    """Micro-batches whose activations each stage class holds at its peak (1F1B: p - i on stage i,
    Narayanan 2021 Sec. 2.2; the last stage 1; the balanced schedules the first stage's count)."""
    pp, vp = k.pp.astype(float), k.vp.astype(float)
    idx = stages.first_index
    in_flight = np.where(
        idx == 0,
        np.asarray(pipe.in_flight_microbatches(pp, m, vp, k.schedule))[:, None],
        np.asarray(
            pipe.in_flight_microbatches(
                np.maximum(pp[:, None] - idx, 1), m[:, None], vp[:, None], k.schedule[:, None]
            )
        ),
    )
    in_flight = np.where((idx == pp[:, None] - 1) & (pp[:, None] > 1), 1.0, in_flight)
    # the V-shaped schedules balance the activations over the ranks (Qi et al. 2024, Sec. 3: a
    # V-shaped building block's lifespan is the same on every rank): the first rank's figure; so
    # does ZB-H1, whose deferred W passes hold each stage's inputs to 1F1B's first-stage count
    # (Qi et al. 2023, Sec. 2.1; Primus's simulator of its zero-bubble schedule, p = 8, m = 32:
    # 8 micro-batches on every rank)
    # interleaved zero-bubble holds p micro-batches on every rank too (cost/pipeline.py)
    balanced = (*pipe.V_SHAPED, pipe.SCHEDULE_CODES["zb-h1"], pipe.SCHEDULE_CODES["interleaved-zb"])
    v_shaped = np.isin(k.schedule, balanced)[:, None]
    if v_shaped.any():
        first = np.asarray(pipe.in_flight_microbatches(pp, m, vp, k.schedule))[:, None]
        in_flight = np.where(v_shaped, first, in_flight)
    return np.asarray(in_flight)


def _activations(
    st: Setting,
    k: Knobs,
    stages: Stages,
    layers: list[Any],
    m: Array,
    off: Offload,
) -> tuple[np.ndarray, np.ndarray]:
    """Stored activations of each stage class at the schedule's peak, bytes (Korthikanti 2022, Sec.
    4.2): the layers' kept activations times the micro-batches in flight at that stage (1F1B: p - i
    on stage i, Narayanan 2021 Sec. 2.2; the last stage 1; the V-shaped schedules the same on every
    rank, cost/pipeline.in_flight_microbatches), full recompute's working layer, and the
    embedding and LM head terms where they sit, less what offloading keeps on the host; and that
    host share (``off``: engine/offloading.py)."""
    pp = k.pp.astype(float)
    present = [x for x in layers if x]
    in_flight = _in_flight(k, stages, m)
    working = np.where(k.recompute == 2, np.max([x.activations[0] for x in present], axis=0), 0.0)
    embed, head = _ends(st, k)
    # activation offloading (cost/offload.py): the offloaded layers of the micro-batches in
    # flight wait in host memory (none: 0)
    n = stages.layer_total
    saved = (  # nothing where no row offloads (every row's offloaded layers are 0)
        offload.resident_saving(off.moved, n, off.layers, in_flight)
        if offloads(st.plan, k.memory_switch)
        else 0.0
    )
    host = offload.moved_bytes(off.moved, n, off.layers) * in_flight
    per_microbatch = off.total + np.where(stages.embedding, embed[:, None], 0.0)
    # the LM head's on its stage; a V's on its first rank
    head_term = stages.v_ends(np.where(stages.head, head[:, None], 0.0), head, v_rows(k))
    # DualPipe: p + 1 chunks in flight on every rank, each on one of its two stages (the end
    # ranks': the first and last stages' mean), and the head's logits where either stage has them
    dual = pipe.dualpipe_rows(k.schedule, k.pp)
    flight = np.where(dual[:, None], (pp + 1)[:, None], in_flight)
    acts = np.asarray(
        stages.dualpipe(per_microbatch, dual) * flight
        - saved
        + working[:, None]
        + stages.dualpipe(head_term, dual, "sum")
    )
    return acts, np.asarray(host)


def _ends(st: Setting, k: Knobs) -> tuple[Array, Array]:
    """(the embedding's, the LM head's) activations per micro-batch on the stage that holds each,
    bytes a GPU (cost/memory.end_terms, over cp): the head's input and the logits the loss holds,
    once more for each MTP layer's pass through the head."""
    tp, b, cp = (
        k.tp.astype(float),
        k.micro_batch_size.astype(float),
        k.cp.astype(float),
    )
    embed, head = mem.end_terms(
        st.plan.seq_length,
        b,
        st.shape.hidden,
        st.shape.vocab,
        tp,
        k.sequence_parallel,
        loss_logit_bytes(st.plan),
        PROFILES[st.plan.training.framework]["sp_gathered_head_input"],
    )
    return embed / cp, head / cp * (1 + st.mtp)
