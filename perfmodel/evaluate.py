"""Compose cost/* into the time and memory of one training step (SPEC sections 5-8).

``evaluate`` works on numpy arrays of configurations (one entry per configuration); the
single-configuration report (perfmodel/estimate.py) is the same function on a one-entry array,
so the report and the vectorized search share every formula (STYLE.md "One formula, one place").

Step time of one pipeline (SPEC 8; Narayanan 2021, Sec. 2.2):
    m * T_slowest + (p-1)/v * T_mean        (compute, TP comm and recompute per stage)
  + PP point-to-point, + DP gradient reduction not hidden behind the last
    micro-batch's backward, + ZeRO-3 gathers, + the optimizer step (HBM-bound).
T of a stage is the forward and backward of one micro-batch through its layers, plus the
embedding on the stage that holds it and the LM head and loss on the stage that holds it:
stages are not equal, and the slowest sets the pace (cost/stages.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cost import flops as fl
from .cost import memory as mem
from .cost import pipeline as pipe
from .cost import step as stp
from .cost.layer import Hardware, Op, time_block
from .cost.stages import Stages, equal_stages
from .cost.transformer import LayerShape, Options, decoder_layer, embedding, grad_accumulation_bytes, lm_head
from .knobs import Knobs
from .mesh import Mesh
from .specs import Plan, Precision

BREAKDOWN_KEYS = ("forward", "backward", "recompute", "bubble", "tp_comm", "pp_comm", "dp_comm",
                  "zero_comm", "optimizer")
MEMORY_KEYS = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "other_bytes",
               "total_bytes", "capacity_bytes", "fits", "params_per_gpu", "model_states_mean_bytes")
_COMPUTE = ("gemm", "attention", "elementwise")


@dataclass(frozen=True)
class Setting:
    """What every cost of a plan reads besides the knobs: shapes, precision, GPU numbers, kernels."""

    plan: Plan
    shape: LayerShape
    precision: Precision
    hw: Hardware
    options: Options

    @classmethod
    def of(cls, plan: Plan) -> "Setting":
        tr = plan.training
        p = Precision.of(tr.dtype, tr.grad_accum_fp32, tr.optimizer)
        opts = Options(gemm_bytes=p.gemm_bytes, act_bytes=p.activation_bytes, flash=tr.flash_attention,
                       persist_ln=tr.persist_layer_norm,
                       grad_accum_bytes=grad_accumulation_bytes(p.activation_bytes, tr.grad_accumulation_fusion,
                                                                p.gradient_bytes))
        return cls(plan, LayerShape.of(plan.model), p, Hardware.from_gpu(plan.system.gpu, p.compute), opts)


@dataclass(frozen=True)
class BlockCost:
    """Seconds per micro-batch of one block on one GPU: compute and communication, forward and
    backward, and the forward of the attention core (what selective recompute repeats)."""

    fwd: np.ndarray
    bwd: np.ndarray
    comm_fwd: np.ndarray
    comm_bwd: np.ndarray
    core_fwd: np.ndarray

    @classmethod
    def of(cls, ops: list[Op]) -> "BlockCost":
        zero = 0.0 * ops[0].fwd_s

        def total(attr, kinds, core_only=False):
            return sum((getattr(o, attr) for o in ops if o.kind in kinds and (o.attention_core or not core_only)),
                       zero)
        return cls(total("fwd_s", _COMPUTE), total("bwd_s", _COMPUTE), total("fwd_s", ("comm",)),
                   total("bwd_s", ("comm",)), total("fwd_s", _COMPUTE, core_only=True))

    def seconds(self, recompute=0):
        """(forward, backward) seconds per micro-batch, communication included; the backward includes
        what ``recompute`` (a RECOMPUTE_CODES code) repeats of the forward."""
        rec, rec_comm = stp.layer_recompute(self.fwd, self.comm_fwd, self.core_fwd, recompute)
        return self.fwd + self.comm_fwd, self.bwd + self.comm_bwd + rec + rec_comm

    def take(self, idx) -> "BlockCost":
        return BlockCost(*(np.asarray(getattr(self, f))[idx] for f in self.__dataclass_fields__))


def block_ops(st: Setting, builder, tp, b, sp) -> list[Op]:
    """A block (decoder_layer, lm_head or embedding) described and timed for arrays of (tp, b, sp)."""
    plan = st.plan
    mesh = Mesh(np.asarray(tp), np.ones(np.shape(tp)), np.ones(np.shape(tp)), plan.system)
    block = builder(st.shape, st.options, b, plan.seq_length, tp, sp)
    return time_block(st.hw, block, gemm_bytes=st.precision.gemm_bytes, t=tp, sp=sp, links={"tp": mesh.link("tp")},
                      overlap=plan.training.tp_comm_overlap)


def block_costs(st: Setting, k: Knobs) -> dict[str, BlockCost]:
    """Layer, LM head and embedding costs per micro-batch. They depend on (tp, b, sp) only, so each is
    computed once per distinct triple and broadcast back to every configuration."""
    key = k.tp.astype(np.int64) * (1 << 32) + k.micro_batch_size.astype(np.int64) * 2 + k.sequence_parallel
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    tp, b, sp = k.tp[first].astype(float), k.micro_batch_size[first].astype(float), k.sequence_parallel[first]
    return {name: BlockCost.of(block_ops(st, builder, tp, b, sp)).take(inverse)
            for name, builder in (("layer", decoder_layer), ("head", lm_head), ("embedding", embedding))}


def stage_costs(stages: Stages, c: dict[str, BlockCost], recompute) -> dict[str, np.ndarray]:
    """Per stage class, seconds per micro-batch: forward, backward, recompute and TP comm (the four sum
    to the stage's time), and the forward share the schedule simulator needs."""
    layer, head, emb = c["layer"], c["head"], c["embedding"]
    rec, rec_comm = stp.layer_recompute(layer.fwd, layer.comm_fwd, layer.core_fwd, recompute)
    out = {"fwd": stages.total(layer.fwd, emb.fwd, head.fwd), "bwd": stages.total(layer.bwd, emb.bwd, head.bwd),
           "rec": stages.total(rec, 0.0, 0.0),
           "comm": stages.total(layer.comm_fwd + layer.comm_bwd + rec_comm, emb.comm_fwd + emb.comm_bwd,
                                head.comm_fwd + head.comm_bwd)}
    out["time"] = out["fwd"] + out["bwd"] + out["rec"] + out["comm"]
    out["fwd_share"] = stages.total(layer.fwd + layer.comm_fwd, emb.fwd + emb.comm_fwd, head.fwd + head.comm_fwd)
    return out


def memory_terms(st: Setting, k: Knobs, stages: Stages, m) -> dict[str, np.ndarray]:
    """Memory on the most loaded GPU (SPEC 6): model states and activations of each stage class at the
    peak of the schedule; the class with the largest total is reported (Korthikanti 2022, Sec. 4.3)."""
    sh, tr, gpu = st.shape, st.plan.training, st.plan.system.gpu
    tp, pp, vp, b, sp, rc = (k.tp.astype(float), k.pp.astype(float), k.vp.astype(float),
                             k.micro_batch_size.astype(float), k.sequence_parallel, k.recompute)
    s = st.plan.seq_length
    a_eff = 0 if tr.flash_attention else sh.heads  # flash attention keeps no s x s tensor
    first_flight = pipe.in_flight_microbatches(pp, m, vp, k.schedule)
    # in flight at each class's first stage; the last stage runs each backward right after its forward
    in_flight = np.stack([first_flight, pipe.in_flight_microbatches(np.maximum(pp - 1, 1), m, vp, k.schedule),
                          np.where(pp > 1, 1.0, first_flight)], axis=1)
    per_layer, working, embed, head = mem.activation_terms(s, b, sh.hidden, a_eff, sh.vocab, tp, sp, rc)
    acts = (stages.layers * per_layer[:, None] * in_flight + working[:, None]
            + np.where(stages.embedding, embed[:, None] * in_flight, 0.0) + np.where(stages.head, head[:, None], 0.0))
    params = mem.stage_params(sh, s, stages, tp, pp)
    states = mem.model_state_bytes(params, k.dp[:, None], k.zero_stage[:, None], st.precision)
    other = np.full(tp.shape, gpu.reserved_bytes)
    total = sum(states) + acts + other[:, None]
    top = stages.slowest(total)
    pick = lambda x: stages.pick(x, top)  # noqa: E731
    mean_params = mem.total_params(sh, st.plan.model.num_layers, s) / (tp * pp)
    return {"weights_bytes": pick(states[0]), "gradients_bytes": pick(states[1]), "optimizer_bytes": pick(states[2]),
            "activations_bytes": pick(acts), "other_bytes": other, "total_bytes": pick(total),
            "capacity_bytes": np.full(tp.shape, gpu.hbm_capacity_bytes),
            "fits": pick(total) <= gpu.hbm_capacity_bytes, "params_per_gpu": pick(params),
            # the seed's figure (000, Q3): all parameters spread evenly over the tp x pp model-parallel GPUs
            "model_states_mean_bytes": sum(mem.model_state_bytes(mean_params, k.dp, k.zero_stage, st.precision)),
            "_params_max": np.where(stages.count > 0, params, -np.inf).max(axis=1)}


def throughput(st: Setting, k: Knobs, step) -> dict[str, np.ndarray]:
    """Tokens per second, model and hardware TFLOP/s per GPU, MFU and HFU (SPEC 5), against the peak of
    the precision's MFU dtype. FLOPs are read off the layer description (cost/flops.py)."""
    plan, sh = st.plan, st.shape
    B, s, L, n = plan.training.global_batch_size, plan.seq_length, plan.model.num_layers, plan.system.num_gpus
    model_fl = fl.model_flops(sh, B, s, L)
    rc = k.recompute
    hw_fl = np.where(rc == 2, fl.hardware_flops(sh, B, s, L, "full"),
                     np.where(rc == 1, fl.hardware_flops(sh, B, s, L, "selective"), model_fl))
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
    tp, pp, dp, vp, b = (k.tp.astype(float), k.pp.astype(float), k.dp.astype(float), k.vp.astype(float),
                         k.micro_batch_size.astype(float))
    mesh = Mesh(tp, pp, dp, plan.system)
    stages = equal_stages(plan.model.num_layers, pp)
    sc = stage_costs(stages, block_costs(st, k), k.recompute)
    slow = stages.slowest(sc["time"])
    m = tr.global_batch_size / (dp * b)
    p2p = stp.p2p_time(b * plan.seq_length * st.shape.hidden * st.precision.activation_bytes, tp,
                       k.sequence_parallel, mesh.link("pp", size=2), mesh.link("tp"))
    memory = memory_terms(st, k, stages, m)
    params = memory.pop("_params_max")
    window = stages.pick(sc["bwd"], slow) + stages.pick(sc["rec"], slow)  # the last micro-batch's backward
    dp_comm, t_gather = stp.data_parallel_comm(params, dp, k.zero_stage, st.precision, mesh.link("dp"), window,
                                               tr.overlap_grad_reduce, gpu.comm_overlap_penalty)
    local = params / np.where(k.zero_stage >= 1, dp, 1.0)
    t_mean = stages.mean(sc["time"], pp)
    out = {"forward": m * stages.pick(sc["fwd"], slow), "backward": m * stages.pick(sc["bwd"], slow),
           "recompute": m * stages.pick(sc["rec"], slow), "tp_comm": m * stages.pick(sc["comm"], slow),
           "bubble": (pp - 1) / vp * t_mean, "pp_comm": stp.pipeline_comm(p2p, pp, m, vp), "dp_comm": dp_comm,
           "zero_comm": stp.zero3_comm(t_gather, dp, k.zero_stage, m),
           "optimizer": stp.optimizer_time(local, st.precision, gpu.hbm_bandwidth_bytes_per_s, gpu.hbm_efficiency)}
    step = sum(out[key] for key in BREAKDOWN_KEYS)
    out.update(step_time_s=step, num_micro_batches=m, slowest_stage_is_first=slow == 0,
               stage_time_first_s=sc["time"][:, 0], stage_time_middle_s=sc["time"][:, 1],
               stage_time_last_s=sc["time"][:, 2], p2p_s=np.where(pp > 1, p2p, 0.0),
               slowest_stage_s=stages.pick(sc["time"], slow),
               # the schedule's closed-form bubble (equal stages, SPEC 7) and the bubble's share of this step
               bubble_over_ideal=pipe.bubble_over_ideal(pp, m, vp), bubble_over_step=pipe.bubble_over_step(pp, m, vp),
               bubble_share_of_step=out["bubble"] / step)
    out.update(memory)
    out.update(throughput(st, k, step))
    out["stages"] = StageArrays(stages, sc["time"], sc["fwd_share"])
    return out


@dataclass(frozen=True)
class StageArrays:
    """Per stage class: seconds per micro-batch in all and in forward (for the schedule simulator)."""

    stages: Stages
    time: np.ndarray
    fwd: np.ndarray

    def per_stage(self, row: int = 0) -> tuple[list[float], list[float]]:
        """Forward and backward seconds per micro-batch of each stage, first stage first."""
        tf, tt = self.stages.expand(self.fwd, row), self.stages.expand(self.time, row)
        return tf, [t - f for t, f in zip(tt, tf)]
