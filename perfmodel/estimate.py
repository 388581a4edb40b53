"""Compose cost/* into the time and memory of one training step (SPEC sections 5-8).

``evaluate`` works on numpy arrays of configurations (one entry per
configuration); ``estimate`` is the same function on a one-entry array, so
the single-configuration report and the vectorized search share every
formula (STYLE.md "One formula, one place").

Step time of one pipeline (SPEC 8; Narayanan 2021, Sec. 2.2):
    m * T_slowest + (p-1)/v * T_mean        (compute, TP comm and recompute per stage)
  + PP point-to-point, + DP gradient reduction not hidden behind the last
    micro-batch's backward, + ZeRO-3 gathers, + the optimizer step (HBM-bound).
T of a stage is the forward and backward of one micro-batch through its L/p
layers, plus the embedding on the first stage and the output layer and loss
on the last: stages are not equal, and the slowest sets the pace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .cost import collectives as coll
from .cost import flops as fl
from .cost import memory as mem
from .cost import pipeline as pipe
from .cost.layer import (DTYPE_BYTES, Hardware, Op, embedding_ops, grad_accumulation_bytes, layer_ops,
                         output_layer_ops)
from .errors import PerfModelError
from .specs import Config, Plan, config_problems
from .specs.parallel import Parallel

RECOMPUTE_CODES = mem.RECOMPUTE_CODES
SCHEDULE_CODES = pipe.SCHEDULE_CODES
RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE_CODES.items()}
SCHEDULE_NAMES = {v: k for k, v in SCHEDULE_CODES.items()}
# fp32 optimizer states read and written by the update: Adam master, m, v (24 B); SGD master, momentum (16)
OPTIMIZER_STATE_RW_BYTES = {"adam": 24.0, "sgd": 16.0}


def optimizer_step_bytes(optimizer: str, dtype: str, grad_accum_fp32: bool) -> float:
    """HBM bytes per parameter of one optimizer step, as Megatron-LM's mixed-precision optimizer runs
    it (megatron/optimizer/optimizer.py, apex multi-tensor kernels), each pass a separate kernel:
    16-bit gradients are first copied into fp32 main gradients (2 + 4); fp16 unscales them and
    checks for inf/nan in place (4 + 4); the global grad norm reads them (4); the update reads
    them (4) and reads and writes the fp32 states; the fp32 master is copied to the 16-bit weights
    (4 + 2); the gradient buffer is zeroed (its width). fp32 training has no master copy.
    Before all that, the data-parallel reduction divides the whole gradient buffer by the DP size in
    its own pass, read and write at the buffer's width, even at dp = 1 (megatron/model/distributed.py,
    allreduce_gradients: `buffer_.data /= dp`; Megatron Core scales each bucket the same way unless
    the collective averages; PyTorch DDP fuses the division into its copy into the buckets)."""
    half = dtype != "fp32"
    grads_16bit = half and not grad_accum_fp32
    grad_width = 2.0 if grads_16bit else 4.0
    dp_scale = 2 * grad_width
    copy_in = 6.0 if grads_16bit else 0.0
    unscale = 8.0 if dtype == "fp16" else 0.0
    master_out = 6.0 if half else 0.0
    return (dp_scale + OPTIMIZER_STATE_RW_BYTES[optimizer] + copy_in + unscale + 4.0 + 4.0 + master_out
            + grad_width)  # the last: zeroing the buffer

BREAKDOWN_KEYS = ("forward", "backward", "recompute", "bubble", "tp_comm", "pp_comm", "dp_comm",
                  "zero_comm", "optimizer")
MEMORY_KEYS = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "other_bytes",
               "total_bytes", "capacity_bytes", "fits", "params_per_gpu", "model_states_mean_bytes")


@dataclass
class Knobs:
    """Arrays of configurations: one entry per configuration, codes for the categorical knobs."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    vp: np.ndarray
    mbs: np.ndarray
    sp: np.ndarray
    recompute: np.ndarray
    zero: np.ndarray
    schedule: np.ndarray

    @classmethod
    def from_configs(cls, cfgs: list[Config]) -> "Knobs":
        return cls(
            np.array([c.tp for c in cfgs]), np.array([c.pp for c in cfgs]), np.array([c.dp for c in cfgs]),
            np.array([c.vp for c in cfgs]), np.array([c.micro_batch_size for c in cfgs]),
            np.array([c.sequence_parallel for c in cfgs], dtype=bool),
            np.array([RECOMPUTE_CODES[c.recompute] for c in cfgs]), np.array([c.zero_stage for c in cfgs]),
            np.array([SCHEDULE_CODES[c.schedule] for c in cfgs]))

    def take(self, idx) -> "Knobs":
        return Knobs(*(getattr(self, n)[idx] for n in self.__dataclass_fields__))

    def __len__(self) -> int:
        return len(self.tp)

    def config(self, i: int, global_batch_size: int) -> Config:
        return Config(int(self.tp[i]), int(self.pp[i]), int(self.dp[i]), int(self.vp[i]), int(self.mbs[i]),
                      global_batch_size, bool(self.sp[i]), RECOMPUTE_NAMES[int(self.recompute[i])],
                      int(self.zero[i]), SCHEDULE_NAMES[int(self.schedule[i])])


def _sum(ops: list[Op], attr: str, kinds: tuple[str, ...], core_only: bool = False):
    return sum(getattr(o, attr) for o in ops if o.kind in kinds and (o.attention_core or not core_only))


_COMPUTE = ("gemm", "attention", "elementwise")


def param_shape(model, seq: int) -> tuple:
    """The arguments cost.memory.total_params and stage_params take for a Model at sequence length seq."""
    return (model.num_layers, model.hidden_size, model.ffn, model.groups, model.head_dim, model.vocab_size, seq,
            model.mlp == "swiglu", model.position_embedding == "learned", model.tied_embeddings)


def layer_recompute(fwd_compute, fwd_comm, attention_core, recompute):
    """(compute, TP comm) seconds one layer spends recomputing in backward (Korthikanti 2022, Sec. 5).

    Full recompute repeats the whole forward, its TP collectives included; selective repeats the
    attention core (scores, softmax, dropout, attention x V), which has no collective. ``recompute``
    is a code of RECOMPUTE_CODES (array or scalar).
    """
    rc = np.asarray(recompute)
    compute = np.where(rc == 2, fwd_compute, np.where(rc == 1, attention_core, 0.0))
    return compute, np.where(rc == 2, fwd_comm, 0.0)


def _layer_setup(plan: Plan, hw: Hardware, tp, b, sp) -> tuple[list[Op], dict]:
    """The ops of one layer for arrays (or scalars) of (tp, b, sp), and the arguments the output
    layer and embedding share with it."""
    model, system, tr = plan.model, plan.system, plan.training
    tp_bw, tp_alpha = coll.group_link(tp, 1, system.gpus_per_node, system.intra_node_link, system.inter_node_link)
    common = dict(b=b, s=plan.seq_length, h=model.hidden_size, dtype=tr.dtype, t=tp, sp=sp,
                  persist_ln=tr.persist_layer_norm)
    grad_accum = grad_accumulation_bytes(tr.dtype, tr.grad_accumulation_fusion, tr.grad_accum_fp32)
    lops = layer_ops(hw, a=model.num_attention_heads, g=model.groups, f=model.ffn, swiglu=model.mlp == "swiglu",
                     flash=tr.flash_attention, tp_bw=tp_bw, tp_alpha=tp_alpha, overlap=tr.tp_comm_overlap,
                     grad_accum_bytes=grad_accum, bias=model.has_bias, **common)
    return lops, dict(common, tp_bw=tp_bw, tp_alpha=tp_alpha)


def _micro_batch_costs(plan: Plan, hw: Hardware, tp, b, sp) -> dict[str, np.ndarray]:
    """Seconds per micro-batch of one layer, the output layer and the embedding (arrays over (tp, b, sp))."""
    lops, shared = _layer_setup(plan, hw, tp, b, sp)
    oops = output_layer_ops(hw, V=plan.model.vocab_size, overlap=plan.training.tp_comm_overlap, **shared)
    eops = embedding_ops(hw, **{k: shared[k] for k in ("b", "s", "h", "dtype", "t", "sp", "tp_bw", "tp_alpha")})
    return {
        "l_fwd": _sum(lops, "fwd_s", _COMPUTE), "l_bwd": _sum(lops, "bwd_s", _COMPUTE),
        "l_core": _sum(lops, "fwd_s", _COMPUTE, core_only=True),
        "l_cfwd": _sum(lops, "fwd_s", ("comm",)), "l_cbwd": _sum(lops, "bwd_s", ("comm",)),
        "o_fwd": _sum(oops, "fwd_s", _COMPUTE), "o_bwd": _sum(oops, "bwd_s", _COMPUTE),
        "o_cfwd": _sum(oops, "fwd_s", ("comm",)), "o_cbwd": _sum(oops, "bwd_s", ("comm",)),
        "e_fwd": _sum(eops, "fwd_s", _COMPUTE), "e_bwd": _sum(eops, "bwd_s", _COMPUTE),
        "e_cfwd": _sum(eops, "fwd_s", ("comm",)), "e_cbwd": _sum(eops, "bwd_s", ("comm",)),
    }


def evaluate(plan: Plan, k: Knobs) -> dict[str, np.ndarray]:
    """Step time, breakdown and memory of every configuration in ``k`` (arrays in, arrays out)."""
    model, system, tr = plan.model, plan.system, plan.training
    gpu = system.gpu
    s, h, a, g, f, V, L = (plan.seq_length, model.hidden_size, model.num_attention_heads, model.groups,
                           model.ffn, model.vocab_size, model.num_layers)
    swiglu = model.mlp == "swiglu"
    hw = Hardware.from_gpu(gpu, tr.dtype)
    gpn, intra, inter = system.gpus_per_node, system.intra_node_link, system.inter_node_link
    tp, pp, dp, vp, b = (k.tp.astype(float), k.pp.astype(float), k.dp.astype(float), k.vp.astype(float),
                         k.mbs.astype(float))
    rc, sp = k.recompute, k.sp
    act = max(DTYPE_BYTES[tr.dtype], 2)

    # --- one layer, one micro-batch (cost/layer.py): depends on (tp, b, sp) only, so it is
    # computed once per distinct triple and broadcast back to every configuration ---
    key = (k.tp.astype(np.int64) * (1 << 32) + k.mbs.astype(np.int64) * 2 + sp.astype(np.int64))
    _, first_idx, inverse = np.unique(key, return_index=True, return_inverse=True)
    per_mb = {name: val[inverse] for name, val in
              _micro_batch_costs(plan, hw, tp[first_idx], b[first_idx], sp[first_idx]).items()}
    l_fwd, l_bwd, l_core = per_mb["l_fwd"], per_mb["l_bwd"], per_mb["l_core"]
    l_cfwd, l_cbwd = per_mb["l_cfwd"], per_mb["l_cbwd"]
    o_fwd, o_bwd, o_cfwd = per_mb["o_fwd"], per_mb["o_bwd"], per_mb["o_cfwd"]
    o_comm = o_cfwd + per_mb["o_cbwd"]
    e_fwd, e_bwd, e_cfwd = per_mb["e_fwd"], per_mb["e_bwd"], per_mb["e_cfwd"]
    e_comm = e_cfwd + per_mb["e_cbwd"]
    l_rec, rec_comm = layer_recompute(l_fwd, l_cfwd, l_core, rc)
    l_comm = l_cfwd + l_cbwd + rec_comm

    # --- stages: per micro-batch components (fwd, bwd, recompute, tp comm) ---
    n_l = L / pp
    single = pp == 1
    base = (n_l * l_fwd, n_l * l_bwd, n_l * l_rec, n_l * l_comm)
    first = (base[0] + e_fwd + np.where(single, o_fwd, 0), base[1] + e_bwd + np.where(single, o_bwd, 0),
             base[2], base[3] + e_comm + np.where(single, o_comm, 0))
    last = (base[0] + o_fwd, base[1] + o_bwd, base[2], base[3] + o_comm)
    t_first, t_last, t_mid = sum(first), sum(last), sum(base)
    first_slowest = t_first >= t_last
    slow = tuple(np.where(first_slowest, x, y) for x, y in zip(first, last))
    t_slow = np.maximum(t_first, t_last)
    t_mean = np.where(single, t_first, (t_first + t_last + (pp - 2) * t_mid) / pp)

    m = tr.global_batch_size / (dp * b)
    bubble = (pp - 1) / vp * t_mean
    # forward share of each stage's time (compute and TP comm), for the schedule simulator
    f_mid = n_l * (l_fwd + l_cfwd)
    out_stage_fwd = (f_mid + e_fwd + e_cfwd + np.where(single, o_fwd + o_cfwd, 0), f_mid, f_mid + o_fwd + o_cfwd)

    # --- pipeline point-to-point with the scatter/gather optimization (Narayanan 2021, Sec. 4.1):
    # each TP rank sends 1/t of the b s h activation to the next stage, which all-gathers it over
    # the TP link; forward activations and backward gradients, v chunks per micro-batch. Under SP
    # each rank already holds its s/t slice and sends it as is: no all-gather (Megatron-LM
    # p2p_communication.py skips scatter/gather when sequence_parallel is on) ---
    pp_stride, dp_stride = coll.placement_strides(system.placement, tp, pp, dp)
    pp_bw, pp_alpha = coll.group_link(2, pp_stride, gpn, intra, inter)
    tp_bw, tp_alpha = coll.group_link(tp, 1, gpn, intra, inter)
    message = b * s * h * act
    p2p = (sum(coll.collective_time("p2p", message / tp, 2, pp_bw, pp_alpha))
           + np.where(sp, 0.0, sum(coll.collective_time("all-gather", message, tp, tp_bw, tp_alpha))))
    # 2 v crossings per micro-batch sit on the 1F1B critical path (with equal stages even when the
    # sends overlap compute: the schedule simulator shows it); estimate() refines this by simulation
    pp_comm = np.where(pp > 1, 2.0 * m * vp * p2p, 0.0)

    # --- parameters and model states on the most loaded GPU ---
    shape = param_shape(model, s)
    p_first, p_last = mem.stage_params(*shape, tp, pp)
    params = np.maximum(p_first, p_last)
    z = k.zero

    # --- DP gradient reduction (ring, SPEC 3); ZeRO >= 1: reduce-scatter + all-gather ---
    dp_bw, dp_alpha = coll.group_link(dp, dp_stride, gpn, intra, inter)
    grad_bytes = params * (4.0 if tr.grad_accum_fp32 else 2.0)
    t_ar = sum(coll.collective_time("all-reduce", grad_bytes, dp, dp_bw, dp_alpha))
    t_rs = sum(coll.collective_time("reduce-scatter", grad_bytes, dp, dp_bw, dp_alpha))
    t_ag = sum(coll.collective_time("all-gather", params * 2.0, dp, dp_bw, dp_alpha))
    # the gradient reduction can hide behind the last micro-batch's backward, at the same SM/HBM
    # contention cost as any overlapped collective; ZeRO's all-gather of the updated parameters
    # comes after the optimizer step and cannot
    t_reduce = np.where(dp > 1, np.where(z >= 1, t_rs, t_ar), 0.0)
    if tr.overlap_grad_reduce:
        t_reduce = coll.overlapped_time(t_reduce, slow[1] + slow[2], gpu.comm_overlap_penalty)
    dp_comm = t_reduce + np.where((dp > 1) & (z >= 1), t_ag, 0.0)
    zero_comm = np.where((z >= 3) & (dp > 1), 2.0 * m * t_ag, 0.0)  # weights gathered for fwd and bwd

    # --- optimizer step: HBM-bound over the local shard ---
    local = params / np.where(z >= 1, dp, 1.0)
    optimizer = local * optimizer_step_bytes(tr.optimizer, tr.dtype, tr.grad_accum_fp32) / (
        gpu.hbm_bandwidth_bytes_per_s * gpu.hbm_efficiency)

    out = {"forward": m * slow[0], "backward": m * slow[1], "recompute": m * slow[2], "tp_comm": m * slow[3],
           "bubble": bubble, "pp_comm": pp_comm, "dp_comm": dp_comm, "zero_comm": zero_comm,
           "optimizer": optimizer}
    step = sum(out[key] for key in BREAKDOWN_KEYS)
    out["step_time_s"] = step
    out["num_micro_batches"] = m
    out["slowest_stage_is_first"] = first_slowest
    out["stage_time_first_s"], out["stage_time_last_s"], out["stage_time_middle_s"] = t_first, t_last, t_mid
    out["stage_fwd_first_s"], out["stage_fwd_middle_s"], out["stage_fwd_last_s"] = out_stage_fwd
    out["p2p_s"] = np.where(pp > 1, p2p, 0.0)
    out["slowest_stage_s"] = t_slow
    # the schedule's closed-form bubble (equal stages, SPEC 7) and the bubble's share of this step
    out["bubble_over_ideal"] = pipe.bubble_over_ideal(pp, m, vp)
    out["bubble_over_step"] = pipe.bubble_over_step(pp, m, vp)
    out["bubble_share_of_step"] = bubble / step

    # --- memory on the most loaded GPU (SPEC 6) ---
    in_flight = pipe.in_flight_microbatches(pp, m, vp, k.schedule)
    a_eff = 0 if tr.flash_attention else a  # flash attention keeps no s x s tensor
    act_first, act_last = mem.stage_activation_bytes(s, b, h, a_eff, V, tp, sp, rc, n_l, in_flight, pp)
    states_first = mem.model_state_bytes(p_first, dp, z, tr.grad_accum_fp32, tr.optimizer)
    states_last = mem.model_state_bytes(p_last, dp, z, tr.grad_accum_fp32, tr.optimizer)
    other = np.full(tp.shape, gpu.reserved_bytes)
    tot_first = sum(states_first) + act_first + other
    tot_last = sum(states_last) + act_last + other
    use_first = tot_first >= tot_last
    pick = lambda x, y: np.where(use_first, x, y)  # noqa: E731
    out["weights_bytes"] = pick(states_first[0], states_last[0])
    out["gradients_bytes"] = pick(states_first[1], states_last[1])
    out["optimizer_bytes"] = pick(states_first[2], states_last[2])
    out["activations_bytes"] = pick(act_first, act_last)
    out["other_bytes"] = other
    out["total_bytes"] = np.maximum(tot_first, tot_last)
    out["capacity_bytes"] = np.full(tp.shape, gpu.hbm_capacity_bytes)
    out["fits"] = out["total_bytes"] <= gpu.hbm_capacity_bytes
    out["params_per_gpu"] = pick(p_first, p_last)
    # the seed's figure (000, Q3): all parameters spread evenly over the tp x pp model-parallel GPUs
    mean_params = mem.total_params(*shape) / (tp * pp)
    out["model_states_mean_bytes"] = sum(mem.model_state_bytes(mean_params, dp, z, tr.grad_accum_fp32, tr.optimizer))

    # --- throughput and FLOP conventions (SPEC 5) ---
    n = system.num_gpus
    B = tr.global_batch_size
    model_fl = fl.model_flops(B, s, L, h, g, h // a, f, V, swiglu)
    hw_fl = np.where(rc == 2, fl.hardware_flops(B, s, L, h, g, h // a, f, V, swiglu, "full"),
                     np.where(rc == 1, fl.hardware_flops(B, s, L, h, g, h // a, f, V, swiglu, "selective"),
                              model_fl))
    peak = gpu.peak(tr.dtype)
    out["tokens_per_s"] = B * s / step
    out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / n
    out["model_tflops_per_gpu"] = model_fl / step / n / 1e12
    out["hardware_tflops_per_gpu"] = hw_fl / step / n / 1e12
    out["mfu"] = out["model_tflops_per_gpu"] * 1e12 / peak
    out["hfu"] = out["hardware_tflops_per_gpu"] * 1e12 / peak
    return out


# ---------------------------------------------------------------- single configuration

def resolve_config(plan: Plan, **overrides) -> Config:
    """Fill the knobs a plan leaves free with defaults for a single estimate.

    Defaults: tp 1, pp 1, dp = num_gpus / (tp pp), vp 1, micro-batch 1, no SP,
    no recompute, ZeRO 0, schedule 1f1b (interleaved when vp > 1).
    """
    fixed = plan.parallel.model_dump()
    fixed.update({k: v for k, v in overrides.items() if v is not None})
    par = Parallel(**fixed)
    n = plan.system.num_gpus
    tp, pp = par.tp or 1, par.pp or 1
    if par.dp is not None:
        dp = par.dp
    elif n % (tp * pp):
        raise PerfModelError(f"num_gpus({n}) is not divisible by tp({tp}) * pp({pp}) = {tp * pp}; "
                             "pick tp and pp whose product divides the GPU count")
    else:
        dp = n // (tp * pp)
    vp = par.vp or 1
    schedule = par.schedule or ("interleaved" if vp > 1 else "1f1b")
    return Config(tp, pp, dp, vp, par.micro_batch_size or 1, plan.training.global_batch_size,
                  bool(par.sequence_parallel), par.recompute or "none", par.zero_stage or 0, schedule)


def validate_config(plan: Plan, cfg: Config) -> None:
    """Raise one PerfModelError listing every broken rule of ``cfg``."""
    problems = config_problems(plan.model, plan.system, cfg)
    if problems:
        raise PerfModelError("; ".join(f"{fld}: {msg}" for _, fld, msg in problems))


@dataclass
class Estimate:
    """One configuration's figures (floats), with the conventions and warnings to print."""

    config: Config
    values: dict[str, float]
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        v = self.values
        return {
            "step_time_s": v["step_time_s"], "tokens_per_s": v["tokens_per_s"],
            "tokens_per_s_per_gpu": v["tokens_per_s_per_gpu"],
            "model_tflops_per_gpu": v["model_tflops_per_gpu"],
            "hardware_tflops_per_gpu": v["hardware_tflops_per_gpu"], "mfu": v["mfu"], "hfu": v["hfu"],
            "flop_convention": flop_convention(self.config.recompute),
            "breakdown_s": {key: v[key] for key in BREAKDOWN_KEYS},
            "bubble_over_step": v["bubble_over_step"], "bubble_over_ideal": v["bubble_over_ideal"],
            "bubble_share_of_step": v["bubble_share_of_step"],
            "bubble_simulated_over_step": v["bubble_simulated_over_step"],
            "closed_form_step_time_s": v["closed_form_step_time_s"],
            "slowest_stage": "first" if v["slowest_stage_is_first"] else "last",
            "stage_time_s": {"first": v["stage_time_first_s"], "middle": v["stage_time_middle_s"],
                             "last": v["stage_time_last_s"]},
            "memory": {key: (bool(v[key]) if key == "fits" else v[key]) for key in MEMORY_KEYS},
            "config": self.config.as_dict(),
            "warnings": list(self.warnings),
        }


def flop_convention(recompute: str) -> str:
    """How MFU and HFU count FLOPs (SPEC 5)."""
    hw = {"full": "Narayanan 2021 eq. 3 (4x forward)", "selective": "Korthikanti 2022 eq. 8",
          "none": "= model FLOPs"}[recompute]
    return f"MFU: model FLOPs, Korthikanti 2022 eq. 7 (3x forward, no recompute); HFU: {hw}"


def estimate(plan: Plan, cfg: Config, simulate: bool = True) -> Estimate:
    """Evaluate one configuration through the vectorized path; with ``simulate`` (and pp > 1) the
    pipeline's bubble and exposed point-to-point time come from the schedule simulator, which
    is exact for unequal stages (the closed form assumes equal ones; seed 000, 6)."""
    validate_config(plan, cfg)
    raw = evaluate(plan, Knobs.from_configs([cfg]))
    values = {key: (bool(val[0]) if val.dtype == bool else float(val[0])) for key, val in raw.items()}
    values["closed_form_step_time_s"] = values["step_time_s"]
    values["bubble_simulated_over_step"] = values["bubble_over_step"]
    if simulate and cfg.pp > 1:
        _refine_with_simulation(cfg, values, not plan.training.p2p_overlap)
    return Estimate(cfg, values, _warnings(plan, cfg, values))


def stage_times(v: dict, p: int) -> tuple[list[float], list[float]]:
    """Forward and backward seconds per micro-batch of each of the p stages (first, middles, last)."""
    if p == 1:
        return [v["stage_fwd_first_s"]], [v["stage_time_first_s"] - v["stage_fwd_first_s"]]
    tf = [v["stage_fwd_first_s"]] + [v["stage_fwd_middle_s"]] * (p - 2) + [v["stage_fwd_last_s"]]
    tt = [v["stage_time_first_s"]] + [v["stage_time_middle_s"]] * (p - 2) + [v["stage_time_last_s"]]
    return tf, [t - f for t, f in zip(tt, tf)]


def _refine_with_simulation(cfg: Config, v: dict, blocking: bool) -> None:
    """Replace the closed-form bubble and p2p terms by a simulated step of the schedule."""
    from .schedule import simulate as run
    p, m = cfg.pp, cfg.num_micro_batches
    tf, tb = stage_times(v, p)
    ideal = run(p, m, cfg.vp, cfg.schedule, tf, tb, 0.0, keep_blocks=False)
    real = run(p, m, cfg.vp, cfg.schedule, tf, tb, v["p2p_s"], keep_blocks=False, blocking=blocking)
    old = v["bubble"] + v["pp_comm"]
    v["bubble"] = max(0.0, ideal.step_time - m * v["slowest_stage_s"])
    v["pp_comm"] = real.step_time - ideal.step_time
    scale = v["step_time_s"] / (v["step_time_s"] - old + v["bubble"] + v["pp_comm"])
    v["step_time_s"] /= scale
    for key in ("tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
                "mfu", "hfu"):
        v[key] *= scale
    v["bubble_simulated_over_step"] = ideal.bubble_over_step
    v["bubble_share_of_step"] = v["bubble"] / v["step_time_s"]


def _warnings(plan: Plan, cfg: Config, v: dict) -> list[str]:
    out = []
    gpn = plan.system.gpus_per_node
    if cfg.tp > gpn:
        out.append(f"TP group of {cfg.tp} crosses the node boundary ({gpn} GPUs per node): "
                   f"TP collectives run on {plan.system.inter_node_link.name}")
    if not v["fits"]:
        out.append(f"does not fit: {v['total_bytes'] / 1e9:.1f} GB needed, "
                   f"{v['capacity_bytes'] / 1e9:.1f} GB of HBM")
    if v["bubble_over_step"] > pipe.BUBBLE_LIMIT:
        out.append(f"pipeline bubble is {100 * v['bubble_over_step']:.1f}% of the step")
    return out


def per_layer_ops(plan: Plan, cfg: Config) -> list[Op]:
    """The operations of one layer for ``cfg`` (scalar arrays), for the --per-layer table."""
    hw = Hardware.from_gpu(plan.system.gpu, plan.training.dtype)
    return _layer_setup(plan, hw, cfg.tp, cfg.micro_batch_size, cfg.sequence_parallel)[0]


def ops_json(ops: list[Op]) -> list[dict]:
    """The per-layer operations as JSON rows (one configuration)."""
    rows = []
    for o in ops:
        bound = "link" if o.kind == "comm" else ("compute" if bool(np.all(o.compute_bound)) else "memory")
        rows.append({"name": o.name, "kind": o.kind, "flops": float(np.sum(o.flops)),
                     "bytes": float(np.sum(o.bytes)), "bound": bound, "forward_s": float(np.sum(o.fwd_s)),
                     "backward_s": float(np.sum(o.bwd_s)), "recomputed_by_selective": o.attention_core})
    return rows
