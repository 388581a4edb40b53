"""Compose cost/* into the time and memory of one training step (SPEC sections 5-8, 11).

``evaluate`` works on numpy arrays of configurations (one entry per configuration); the
single-configuration report (perfmodel/engine/estimate.py) is the same function on a one-entry
array, so the report and the vectorized search share every formula (STYLE.md "One formula, one
place").

Step time of one pipeline (SPEC 8; Narayanan 2021, Sec. 2.2):
    m * T_slowest + (p-1)/v * T_mean        (compute, TP/CP/EP comm and recompute per stage)
  + PP point-to-point, + DP gradient reduction not hidden behind the last
    micro-batch's backward, + ZeRO-3 gathers, + the optimizer step (HBM-bound).
T of a stage is the forward and backward of one micro-batch through its layers, plus the
embedding on the stage that holds it and the LM head and loss on the stage that holds it:
stages are not equal, and the slowest sets the pace (cost/stages.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from perfmodel.cost import Array, offload
from perfmodel.cost import pipeline as pipe
from perfmodel.cost import step as stp
from perfmodel.cost.stages import Stages, build_stages, split_layers
from perfmodel.engine import dualpipe, memory_switches
from perfmodel.engine.block_cost import BlockCost
from perfmodel.engine.blocks import Setting, block_costs
from perfmodel.engine.data_parallel import Priced, _data_parallel
from perfmodel.engine.knobs import Knobs
from perfmodel.engine.memory import memory_terms
from perfmodel.engine.offloading import Offload, offload_terms, offloads
from perfmodel.engine.optimizer_step import optimizer_seconds
from perfmodel.engine.pooled import current_pool
from perfmodel.engine.step_figures import StageArrays, stage_figures
from perfmodel.engine.throughput import throughput
from perfmodel.specs import Plan


def stage_costs(
    st: Setting,
    stages: Stages,
    c: dict[str, BlockCost],
    recompute: Array,
    codes: Array,
    off: Offload | None = None,
) -> dict[str, Any]:
    """Per stage class, seconds per micro-batch: forward, backward, recompute and TP/CP/EP comm (the
    four sum to the stage's time), and the forward share the schedule simulator needs (``codes``:
    each row's memory switch set; ``off``: what it offloads to the host, engine/offloading.py,
    computed here when not given)."""
    layers = [c.get(kind) for kind in ("dense", "moe")]
    head, emb = c["head"], c["embedding"]
    rec = [
        stp.layer_recompute(x.fwd, x.comm_fwd, x.core_fwd, recompute, x.core_comm) if x else None
        for x in layers
    ]

    def per(f: Callable[[BlockCost, tuple[Array, Array]], Array]) -> list[Array | None]:
        return [f(x, r) if x and r else None for x, r in zip(layers, rec)]

    out = {
        "fwd": stages.total(per(lambda x, r: x.fwd), emb.fwd, head.fwd),
        "bwd": stages.total(per(lambda x, r: x.bwd), emb.bwd, head.bwd),
        "rec": stages.total(per(lambda x, r: r[0]), 0.0, 0.0),
        "comm": stages.total(
            per(lambda x, r: x.comm_fwd + x.comm_bwd + r[1]),
            emb.comm_fwd + emb.comm_bwd,
            head.comm_fwd + head.comm_bwd,
        ),
        # the context- and expert-parallel part of comm; a recompute's repeat of the forward's
        # collectives in the forward's proportions
        "cp": stages.total(per(lambda x, r: _group(x.cp_fwd, x.cp_bwd, x, r)), 0.0, 0.0),
        "ep": stages.total(per(lambda x, r: _group(x.ep_fwd, x.ep_bwd, x, r)), 0.0, 0.0),
        "wgrad": stages.total(per(lambda x, r: x.wgrad), emb.wgrad, head.wgrad),
    }
    link = st.plan.system.host_link
    if link is not None and offloads(st.plan, codes):
        if off is None:
            off = offload_terms(st, stages, layers, recompute, codes)
        # activation offloading: the copy that the pass's compute does not hide waits in it
        n = stages.layer_total
        moved = offload.moved_bytes(off.moved, n, off.layers)
        t = offload.transfer_seconds(
            moved,
            n * off.messages,
            off.layers * off.messages,
            link.bandwidth_bytes_per_s,
            link.latency_s,
            link.efficiency,
        )
        out["fwd"] = out["fwd"] + offload.exposed_seconds(t, out["fwd"])
        out["bwd"] = out["bwd"] + offload.exposed_seconds(t, out["bwd"])
    out["time"] = out["fwd"] + out["bwd"] + out["rec"] + out["comm"]
    out["fwd_share"] = stages.total(
        per(lambda x, r: x.fwd + x.comm_fwd), emb.fwd + emb.comm_fwd, head.fwd + head.comm_fwd
    )
    return out


def _weight_cache(
    st: Setting, stages: Stages, layers: list[BlockCost | None], slow: Array
) -> Array | float:
    """Transformer Engine's weight cache: the slowest stage's layer weights cast once a step (the
    embedding and the logits stay 16-bit), seconds; 0 where the weights are cast per micro-batch
    or with the FP8 parameter gather."""
    tr, gpu = st.plan.training, st.plan.system.gpu
    if not (tr.fp8_weight_cache and st.precision.fp8_weight_bytes) or tr.fp8_param_gather:
        return 0.0
    params = stages.pick(stages.total([c.params if c else None for c in layers], 0.0, 0.0), slow)
    return np.asarray(
        stp.weight_cast_time(
            params, st.precision, gpu.hbm_bandwidth_bytes_per_s, gpu.hbm_efficiency
        )
    )


def _group(fwd: Array, bwd: Array, x: BlockCost, r: tuple[Array, Array]) -> Array:
    """One group's collectives in a layer's comm: forward, backward, and its share of what
    recompute repeats."""
    share = np.where(x.comm_fwd > 0, fwd / np.where(x.comm_fwd > 0, x.comm_fwd, 1.0), 0.0)
    return np.asarray(fwd + bwd + share * r[1])


def layout(st: Setting, k: Knobs, c: dict[str, BlockCost]) -> tuple[Stages, Array]:
    """The stage classes of every configuration (given first/last stage layers, an even split, or
    the balanced one of cost/stages.split_layers from this configuration's own layer, embedding and
    head times), and the seconds per micro-batch of one layer of the model's dense/MoE mix."""
    L = len(st.moe_pattern)
    moe_share = st.moe_layers / L
    per_layer = [sum(c[kind].seconds(k.recompute)) for kind in ("dense", "moe") if kind in c]
    t_layer: Array = np.asarray(
        per_layer[0]
        if len(per_layer) == 1
        else (1 - moe_share) * per_layer[0] + moe_share * per_layer[1]
    )
    kinds = [kind for kind in ("dense", "moe") if kind in c]
    # the MTP layers ride with the head on the last stage: part of its extra time
    mtp_s = (
        st.mtp * np.asarray(per_layer[kinds.index(("dense", "moe")[st.mtp_kind])])
        if st.mtp
        else 0.0
    )
    first, last = split_layers(
        L,
        k.pp,
        k.vp,
        k.first_stage_layers,
        k.last_stage_layers,
        t_layer,
        np.asarray(sum(c["embedding"].seconds())),
        np.asarray(sum(c["head"].seconds())) + mtp_s,
    )
    stages = build_stages(L, st.moe_pattern, k.pp, first, last, st.mtp, st.mtp_kind)
    return stages, t_layer


def evaluate(
    plan: Plan, k: Knobs, batch: Array | None = None, keep: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """Step time, breakdown and memory of every configuration in ``k`` (arrays in, arrays out); the
    rows carry one memory switch set (engine/memory_switches.py), priced on the plan with it.
    ``batch``: each row's global batch, sequences (rows of plans that differ in it alone, pooled
    by engine/pooled.py); the plan's where not given. It reaches the step only through the number
    of micro-batches m and the tokens a step: a block is one micro-batch (engine/blocks.py). A
    search run side by side with others (engine/pooled.side_by_side) hands its call to their pool,
    which prices it with theirs through this same function. ``keep``: only these figures (KEEP
    at most: what the search ranks with), which spares the throughput and the bubble's shares."""
    pool = current_pool()
    if pool is not None and batch is None:
        return pool.evaluate(plan, k, evaluate, keep)
    B = plan.training.global_batch_size if batch is None else batch
    out = _evaluate(plan, k, B, keep is None)
    return out if keep is None else {key: out[key] for key in keep}


def _evaluate(plan: Plan, k: Knobs, B: int | Array, full: bool = True) -> dict[str, Any]:
    """evaluate() of rows whose global batch is ``B``, sequences (one for all, or each row's);
    not ``full``: KEEP's figures, and what they are made of."""
    plan = memory_switches.uniform_plan(plan, k.memory_switch)
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
    m = B / (dp * b)
    # what each row sends to host memory: the step's copies and the memory's host share read it
    layers = [costs.get(kind) for kind in ("dense", "moe")]
    off = offload_terms(st, stages, layers, k.recompute, k.memory_switch)
    sc = stage_costs(st, stages, costs, k.recompute, k.memory_switch, off)
    dual = pipe.dualpipe_rows(k.schedule, k.pp)
    dualv = pipe.dualpipev_rows(k.schedule, k.pp)
    paired = dual | dualv
    # DualPipeV on p ranks is DualPipe over 2p stages of half a rank's layers, 2m chunks a rank
    # (deepseek-ai/DualPipe, dualpipev.py: the same phases, num_ranks the stages' half)
    pp_pairs, m_pairs = np.where(dualv, 2 * pp, pp), np.where(dualv, 2 * m, m)
    if paired.any():
        sc = dualpipe.ranks(stages, sc, paired, pp_pairs, m_pairs, dualpipe.contention(gpu.num_sms))
    slow = stages.slowest(sc["time"])
    memory = memory_terms(st, k, stages, costs, m, off)
    mesh = memory.pop("_mesh")
    p2p = np.asarray(
        stp.p2p_time(
            b * plan.seq_length * st.shape.hidden * st.precision.activation_bytes / cp,
            tp,
            k.sequence_parallel,
            mesh.link("pp", size=2),
            mesh.link("tp"),
        )
    )
    priced = Priced(st, k, stages, sc, slow, costs)
    dp_comm, zero3, local = _data_parallel(priced, memory, mesh, m)
    t_mean = stages.mean(sc["time"], pp)
    out = {
        "forward": m * stages.pick(sc["fwd"], slow),
        "backward": m * stages.pick(sc["bwd"], slow),
        "recompute": m * stages.pick(sc["rec"], slow),
        "tp_comm": m * stages.pick(np.maximum(sc["comm"] - sc["cp"] - sc["ep"], 0.0), slow),
        "cp_comm": m * stages.pick(sc["cp"], slow),
        "ep_comm": m * stages.pick(sc["ep"], slow),
        "bubble": _bubble(stages, sc, slow, k, pp, vp, m, t_mean),
        # DualPipe's F&B pairs hide the point-to-point sends too (report Sec. 3.2.1)
        "pp_comm": (
            stp.pipeline_comm(p2p, pp, m, vp)
            * np.where(
                paired,
                1 - pipe.dualpipe_paired_slowest(pp_pairs, m_pairs, slow) / m_pairs,
                1.0,
            )
        ),
        "dp_comm": dp_comm,
        "zero_comm": zero3,
        "optimizer": (
            optimizer_seconds(st, local)
            + _weight_cache(st, stages, [costs.get(kind) for kind in ("dense", "moe")], slow)
        ),
        "overhead": stp.fixed_overheads(
            tr.step_overhead_s, tr.microbatch_overhead_s, tr.hop_overhead_s, m, pp, vp
        ),
    }
    out.update(stage_figures(priced, t_layer, out, p2p, m, full))
    out.update(memory)
    if full:
        out.update(throughput(st, k, out["step_time_s"], B))
        out["stages"] = StageArrays(stages, sc["time"], sc["fwd_share"], sc["wgrad"])
    return out


def _bubble(
    stages: Stages,
    sc: dict[str, Any],
    slow: Array,
    k: Knobs,
    pp: Array,
    vp: Array,
    m: Array,
    t_mean: Array,
) -> Array:
    """The closed-form bubble of each configuration's schedule, seconds: (p-1)/v of the mean stage
    (SPEC 8); DualPipe's and DualPipeV's (p/2 - 1)(F&B + B - 3W) over their stages (DualPipeV: 2p
    stages of half a rank's layers, cost/pipeline.dualpipe_bubble); the zero-bubble family's
    (cost/pipeline.zero_bubble_bubble) from the mean stage's F (with its collectives), W (the
    weight-gradient GEMMs) and B (the rest of the backward)."""
    out = (pp - 1) / vp * t_mean
    split = pipe.zero_bubble_rows(k.schedule, k.pp)
    if split.any():
        f = stages.mean(sc["fwd_share"], pp)
        w = stages.mean(sc["wgrad"], pp)
        zb = pipe.zero_bubble_bubble(pp, f, np.maximum(t_mean - f - w, 0.0), w, m, k.schedule, vp)
        out = np.where(split, zb, out)
    dual = pipe.dualpipe_rows(k.schedule, k.pp)
    dualv = pipe.dualpipev_rows(k.schedule, k.pp)
    if (dual | dualv).any():
        half = np.where(dualv, 0.5, 1.0)  # a DualPipeV chunk is half a rank's layers
        paired = pipe.dualpipe_bubble(
            np.where(dualv, 2 * pp, pp),
            half * stages.pick(sc.get("pair", sc["time"]), slow),
            half * stages.pick(sc.get("b_alone", sc["bwd"]), slow),
            half * stages.pick(sc["wgrad"], slow),
        )
        out = np.where(dual | dualv, paired, out)
    return np.asarray(out)


CHUNK = 65536


KEEP = (
    "step_time_s",
    "total_bytes",
    "fits",
    "simulated_step_lower_bound_s",
    "switchable_s",
    "activations_bytes",
    "layer_activations_bytes",
    "recompute",
)


def evaluate_chunked(
    plan: Plan, knobs: Knobs, progress: Callable[[int, int], None] | None = None, chunk: int = CHUNK
) -> dict[str, np.ndarray]:
    """evaluate() over chunks of configurations (memory stays bounded), keeping only what the
    search ranks with (KEEP)."""
    n = len(knobs)
    out = {k: np.empty(n, dtype=bool if k == "fits" else float) for k in KEEP}
    done = 0
    sets = memory_switches.evaluation_groups(knobs.memory_switch)
    for _, rows in sets:
        for start in range(0, rows.size, chunk):
            # one set (the search's space): contiguous slices, no copy of the row indices
            idx: Any = (
                slice(start, min(n, start + chunk))
                if len(sets) == 1
                else rows[start : start + chunk]
            )
            res = evaluate(plan, knobs.take(idx), keep=KEEP)
            for k in KEEP:
                out[k][idx] = res[k]
            done += len(res["fits"])
            if progress:
                progress(done, n)
    return out
