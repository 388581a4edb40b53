"""The memory-saving switches as searched knobs (issue 37): settings of the optimizer and of the
weights' all-gather that shrink a configuration's memory at a cost, or a saving, in time that the
model prices through the same formulas as any plan that sets them.

A switch set is a column of the configuration arrays (Knobs.memory_switch, codes into SETS) and a
field of Config; a row with a set is evaluated on the plan with the set's training fields applied
(``applied``), so the step time and memory of a switched configuration are exactly what `estimate`
gives for a plan that states those fields. The search tries them only where memory asks for them:
on the configurations that are tight or do not fit without them (engine/search.py), for the
switches trade the numerics of the optimizer, which the model cannot price, for memory. Each is
gated by the framework profile (its ``memory_switches``) and by what the plan states: a field the
plan sets is taken as given and never searched.

The switches, each from Megatron-Core (megatron/training/arguments.py, megatron/core/optimizer):
- bf16-moments: Adam's two moments in BF16 (--use-precision-aware-optimizer --exp-avg-dtype bf16
  --exp-avg-sq-dtype bf16), 4 B a parameter instead of 8, as DeepSeek-V3 trained (report Sec.
  3.3.3); the optimizer's memory-bound pass reads and writes the fewer bytes (cost/step.py).
- bf16-main-grads: the main gradients and their reduction in BF16 (--main-grads-dtype bf16 with the
  precision-aware optimizer): the gradient buffer 2 B a parameter instead of 4, and the
  data-parallel reduction moves half the bytes.
- fp8-moments, fp16-main-params: Adam's moments in FP8 (1 B each, with a per-tensor scale) and
  the master weights in FP16 (2 B, scaled), which Transformer Engine's FusedAdam runs behind the
  same precision-aware optimizer (--exp-avg-dtype fp8, --main-params-dtype fp16); tried after the
  recompute modules, for they trade more of the optimizer's precision than BF16 does.
- fp8-param-gather: the weights kept and all-gathered in FP8 only (--fp8-param-gather), with no
  16-bit copy; the cast runs once a step with the gather (specs/flags.py).
All of these need the distributed optimizer (ZeRO-1 and up here): Megatron-Core asserts it for the
precision-aware optimizer (OptimizerConfig.__post_init__, megatron/core/optimizer/
optimizer_config.py: "--use-precision-aware-optimizer only supported with distributed optimizer")
and Megatron-LM for the FP8 gather (arguments.py validate_args: "--fp8-param-gather only
supported with distributed optimizer").
- mla-up-proj, mla-up-proj-mlp, moe-act, moe-act-layernorm: selective recompute of MLA's
  up-projections (and of the dense MLPs), or of the experts' activation (and the layernorms), in
  place of the attention core, as Megatron-Bridge's performance recipes set --recompute-modules;
  tried on the selective rows of an MLA or MoE model, after the optimizer's switches, for they
  cost recompute FLOPs (cost/sac.py prices them).
- optimizer-cpu-offload: the optimizer's states and its step on the host's CPUs
  (--optimizer-cpu-offload, Megatron-Core's HybridDeviceOptimizer; cost/optimizer_offload.py), with
  the precision-aware optimizer Megatron-LM asserts for it, and so the distributed optimizer; tried
  last, for the host's step is the slowest way to save memory here. Not on ROCm (specs/
  framework_extra.py).
- activation-offload-K (K = 1..8): the kept activations of the first K/8 of the layers (K = 8:
  all but the last, the most Megatron-Core takes) copied to host memory in the forward and back
  for the backward (--cpu-offloading --cpu-offloading-num-layers N; megatron/core/cpu_offload.py;
  cost/offload.py prices the copy the pass does not hide), as Megatron-Bridge's Llama 3 70B
  performance recipes on GB200 and GB300 set it (cpu_offloading_num_layers 40 and 20 of 80, with
  Megatron-FSDP; scripts/performance/configs/llama, v0.4.2). Megatron-Core runs it with pp 1 and
  no recompute only (TransformerConfig.__post_init__), so it is tried on those rows, fewest layers
  first: the first that fits is the one whose copy is shortest. In eighths, so that the ladder
  has the same steps whatever the model's depth, and its rows are priced together (the count is
  read row by row: offload_layers); after the recompute modules, for the copy can cost time, and
  before the riskier optimizer precisions, for production recipes run it.
- offload-attention, offload-attention-experts, offload-modules, offload-modules-experts: the
  saved tensors of chosen modules in every layer copied to host memory and back
  (--fine-grained-activation-offloading --offload-modules; cost/offload_modules.py): the attention
  core's inputs and output (core_attn attn_proj), with the experts' (expert_fc1 moe_act) on MoE
  models, or every module but the dense MLP's. Megatron-Core runs them at any pp and beside
  selective recompute (TransformerConfig.__post_init__), so they are tried on the rows without
  full recompute, after the layer-wise ladder (which the production recipes at pp 1 run).
FSDP's reshard_after_forward is the ZeRO stage the search already tries under the fsdp profiles
(2: SHARD_GRAD_OP, kept gathered; 3: resharded). Not searched: the other recompute modules (moe,
shared_experts: a plan sets recompute_modules), fused_group_mlp (which needs Transformer Engine's
op fuser); each set field is priced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.engine.switch_table import (
    MODULE_SWITCHES,
    RECOMPUTE_SWITCHES,
    SWITCHES,
    Switch,
    offloaded_counts,
    offloaded_layers,
)
from perfmodel.specs.by_plan import ByPlan, batchless

if TYPE_CHECKING:  # the outputs read the names and marks here without loading the specs
    from perfmodel.specs import Plan

__all__ = ["MODULE_SWITCHES", "RECOMPUTE_SWITCHES", "SWITCHES", "Switch", "offloaded_layers"]


# the switch sets a configuration may carry, codes 0.. (0: none); each a '+'-joined list: the
# optimizer's precision (its main gradients, its moments, or both), each with or without the FP8
# gather
SETS: tuple[str, ...] = (
    "",
    "fp8-param-gather",
    "bf16-main-grads",
    "bf16-main-grads+fp8-param-gather",
    "bf16-moments",
    "bf16-moments+fp8-param-gather",
    "bf16-moments+bf16-main-grads",
    "bf16-moments+bf16-main-grads+fp8-param-gather",
    # after the optimizer's: they cost recompute FLOPs
    "mla-up-proj",
    "mla-up-proj-mlp",
    "moe-act",
    "moe-act-layernorm",
    # activation offloading, fewest layers first (on pp 1 rows without recompute only): its
    # copy can cost time, but production recipes run it
    *(f"activation-offload-{k}" for k in range(1, 9)),
    # fine-grained offloading of modules' saved tensors in every layer, at any pp and beside
    # selective recompute: after the layer-wise ladder (which production recipes at pp 1 run),
    # fewest modules first
    "offload-attention",
    "offload-attention-experts",
    "offload-modules",
    "offload-modules-experts",
    # after the recompute modules: FP8 moments and FP16 master weights cost no time but trade
    # more of the optimizer's precision than BF16 does (no production recipe sets them), so they
    # come where nothing above fits; each with BF16 main gradients, the lesser trade before them
    "bf16-moments+bf16-main-grads+fp16-main-params",
    "fp8-moments+bf16-main-grads",
    "fp8-moments+bf16-main-grads+fp16-main-params",
    # last: it moves the optimizer's step to the host's CPUs, which are slower than any of the above
    "optimizer-cpu-offload",
)
LEGEND = (
    "m16, m8, g16, p16: BF16/FP8 moments, BF16 main grads, FP16 master weights;\n"
    "w8: FP8 weights; oc: CPU optimizer; aoK: K/8 of the layers' activations\n"
    "on the host (ao8: all but one); oa, om: the attention's or every module's\n"
    "saved tensors on the host (oae, ome: and the experts');\n"
    "up, upm, ma, mal: recomputed (MLA up-proj, +dense MLP, MoE act, +layernorm)"
)
SET_CODES = {name: code for code, name in enumerate(SETS)}
# each set's eighths of the layers whose activations it offloads, by code (0: none)
EIGHTHS = np.array([max((SWITCHES[s].eighths for s in x.split("+") if s), default=0) for x in SETS])
# each set's fine-grained offload set, by code: its index in MODULE_SWITCHES + 1 (0: none, the
# plan's own offload_modules; a block's costs carry every set's: engine/block_cost.py)
MODULE_INDEX = np.array([MODULE_SWITCHES.index(x) + 1 if x in MODULE_SWITCHES else 0 for x in SETS])
# the sets whose rows the evaluation reads row by row, priced on the plan as it is
ROW_BY_ROW = (EIGHTHS > 0) | (MODULE_INDEX > 0)


def offload_layers(plan: Plan, codes: np.ndarray) -> np.ndarray:
    """The layers whose activations each row offloads: its activation-offload set's count, else the
    plan's own cpu_offloading_num_layers (0: none)."""
    e = EIGHTHS[np.asarray(codes, dtype=np.int64)]
    counts = offloaded_counts(plan.model.num_layers, e)
    return np.where(e > 0, counts, plan.training.cpu_offloading_num_layers)


def names(switch_set: str) -> list[str]:
    """The switches of a set, in order ('' has none)."""
    return [s for s in switch_set.split("+") if s]


def applied(plan: Plan, switch_set: str) -> Plan:
    """The plan with a switch set's training fields set (the plan itself for none)."""
    if not switch_set:
        return plan

    def fields() -> dict[str, Any]:
        changes: dict[str, Any] = {}
        for s in names(switch_set):
            changes.update(SWITCHES[s].fields_for(plan.model.num_layers))
        return changes

    return _APPLIED.get(plan, switch_set, lambda: plan.with_training(**fields()))


# the recent plans with a set applied, by the plan and the set (a search prices each set's rows on
# it several times, and validating a plan costs more than a small evaluation)
_APPLIED: ByPlan[Plan] = ByPlan(1024)


def _allowed(plan: Plan, switch: str) -> bool:
    """Whether the plan's framework runs ``switch`` and the plan leaves its fields to the search
    (and, for the BF16 main gradients and the FP8 gather, whether its dtype has them to change)."""
    from perfmodel.specs.framework import PROFILES
    from perfmodel.specs.precision import LOW_PRECISION

    tr = plan.training
    if switch not in PROFILES[tr.framework].get("memory_switches", ()):
        return False
    given = tr.given()
    if any(f in given for f in SWITCHES[switch].fields):
        return False
    if switch in ("moe-act", "moe-act-layernorm"):
        return plan.model.is_moe
    if switch in RECOMPUTE_SWITCHES:
        return plan.model.is_mla and (switch == "mla-up-proj" or _has_dense_layers(plan))
    if switch in ("bf16-moments", "fp8-moments"):
        return tr.optimizer == "adam"
    if switch == "fp16-main-params":  # over fp32 masters only (not apex's remainders or none)
        return tr.optimizer == "adam" and tr.main_params_dtype == "fp32"
    if switch == "bf16-main-grads":
        return bool(tr.grad_accum_fp32)
    if switch == "optimizer-cpu-offload":
        from perfmodel.specs.plan import offload_unmet

        return offload_unmet(tr, plan.system) is None
    if SWITCHES[switch].eighths:
        return _offload_allowed(plan, SWITCHES[switch].eighths) and not tr.offload_modules
    if switch in MODULE_SWITCHES:
        return _module_offload_allowed(plan, switch)
    return tr.dtype in LOW_PRECISION and not tr.fp8_param_gather


def _offload_allowed(plan: Plan, eighths: int) -> bool:
    """Activation offloading as the plan validates it (specs/plan.py _offloading): the profile runs
    it, the GPU has a host link, and pp and recompute are free or 1 and none; and it frees
    something: with pp 1 one micro-batch is in flight, and the layer in transit stays, so at
    least two layers (cost/offload.resident_saving)."""
    from perfmodel.specs.framework import PROFILES

    par = plan.parallel
    return (
        bool(PROFILES[plan.training.framework].get("activation_offloading", False))
        and plan.system.host_link is not None
        and par.pp in (None, 1)
        and par.recompute in (None, "none")
        and offloaded_layers(plan.model.num_layers, eighths) >= 2
    )


def _module_offload_allowed(plan: Plan, switch: str) -> bool:
    """Fine-grained offloading where the plan with the set's modules validates
    (specs/offload_rules.module_offload_problem: the profile runs it, a host link, no full
    recompute, no layer-wise offloading, the experts' modules on MoE models only), and where the
    search can try it on its rows: not the experts' modules where selective recompute redoes the
    MoE layer whole (recompute_modules with moe), and not the dense set on a MoE model, whose sets
    offload its experts' too."""
    from perfmodel.specs.offload_rules import module_offload_problem

    tr = plan.training
    if switch == "offload-modules" and plan.model.is_moe:
        return False
    if switch.endswith("-experts") and "moe" in tr.recompute_modules:
        return False
    modules = list(SWITCHES[switch].fields["offload_modules"])
    trial = plan.model_copy(update={"training": tr.model_copy(update={"offload_modules": modules})})
    return module_offload_problem(trial) is None


def usable_sets(plan: Plan) -> list[str]:
    """The switch sets (beyond none) the plan's framework runs and the plan leaves free; of the
    activation offloading sets that offload the same layers on this model, the first. They never
    read the global batch: plans that differ in it alone share them (by_plan.batchless)."""
    first = batchless(plan)
    return list(_USABLE.get(first, None, lambda: _usable_sets(first)))


# the recent plans' usable sets (a search asks once, a sweep of the batch once a value)
_USABLE: ByPlan[list[str]] = ByPlan(1024)


def _usable_sets(plan: Plan) -> list[str]:
    out, counts = [], set()
    known: dict[str, bool] = {}

    def allowed(switch: str) -> bool:  # each switch asked once (the sets share their switches)
        if switch not in known:
            known[switch] = _allowed(plan, switch)
        return known[switch]

    for s in SETS[1:]:
        if not all(allowed(x) for x in names(s)):
            continue
        if is_offload(s):
            n = offloaded_layers(plan.model.num_layers, SWITCHES[s].eighths)
            if n in counts:
                continue
            counts.add(n)
        out.append(s)
    return out


def is_recompute(switch_set: str) -> bool:
    """Whether a set changes what selective recompute repeats (else the optimizer's, the gather's
    or the activations' offload switches: a set holds one kind)."""
    return names(switch_set)[0] in RECOMPUTE_SWITCHES


def is_offload(switch_set: str) -> bool:
    """Whether a set offloads layers' activations (activation-offload-K)."""
    return bool(SWITCHES[names(switch_set)[0]].eighths)


def is_module_offload(switch_set: str) -> bool:
    """Whether a set offloads modules' saved tensors in every layer (MODULE_SWITCHES)."""
    return names(switch_set)[0] in MODULE_SWITCHES


def _has_dense_layers(plan: Plan) -> bool:
    """Whether the model has dense MLP layers beside its MoE ones (what "mlp" recomputes)."""
    return not all(plan.model.moe_pattern())


def runs_with(
    switch_set: str, zero_stage: np.ndarray, recompute: np.ndarray, pp: np.ndarray
) -> np.ndarray:
    """The rows a switch set can be tried on: for the optimizer's and the gather's switches the
    distributed optimizer (ZeRO 1 and up), which Megatron-LM asserts for each; for the recompute
    modules, selective recompute (RECOMPUTE_CODES: 1); for activation offloading, pp 1 and no
    recompute (0), which Megatron-Core asserts; for the fine-grained offloading, no or selective
    recompute (under full recompute a layer keeps its input only)."""
    if is_recompute(switch_set):
        return np.asarray(recompute == 1, dtype=bool)
    if is_offload(switch_set):
        return np.asarray((recompute == 0) & (pp == 1), dtype=bool)
    if is_module_offload(switch_set):
        return np.asarray(recompute <= 1, dtype=bool)
    return np.asarray(zero_stage >= 1, dtype=bool)


def short(switch_set: str) -> str:
    """A switch set's marks, each after a space ('' for none)."""
    return "".join(f" {SWITCHES[s].short}" for s in names(switch_set))


def describe(switch_set: str, num_layers: int | None = None) -> str:
    """A switch set in words, with its launch flags: what an output says the answer uses (the
    offloaded layers counted where the model's ``num_layers`` is given)."""
    out = []
    for s in names(switch_set):
        sw = SWITCHES[s]
        words, flags = sw.words, sw.flags
        if sw.eighths and num_layers:
            n = offloaded_layers(num_layers, sw.eighths)
            words = f"the activations of {n} of the {num_layers} layers offloaded to host memory"
            flags = f"{flags} {n}"
        out.append(f"{words} ({flags})")
    return "; ".join(out)


def groups(codes: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The rows of each switch set among ``codes`` (Knobs.memory_switch): (set, row indices), the
    sets in code order; one evaluation prices each (engine/evaluate.py)."""
    return [(SETS[int(c)], np.flatnonzero(codes == c)) for c in np.unique(codes)]


def evaluation_groups(codes: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """``groups``, but the rows of every offloading set in one: the layer-wise sets differ only in
    the layers they offload (offload_layers), the fine-grained ones in the modules (MODULE_INDEX),
    which the evaluation reads row by row."""
    offloads = ROW_BY_ROW[np.asarray(codes, dtype=np.int64)]
    out = [(n, rows) for n, rows in groups(codes) if not ROW_BY_ROW[SET_CODES[n]]]
    return out + ([("offload", np.flatnonzero(offloads))] if offloads.any() else [])


def priced_set(codes: np.ndarray) -> int | None:
    """The code of the switch set a block of rows is priced on: 0 (the plan itself) for none and
    for rows of offloading sets, which the evaluation reads row by row; the set's for rows of one
    set; None for rows of several, which are priced a set at a time (``evaluation_groups``)."""
    if codes.size == 0 or not codes.any() or ROW_BY_ROW[codes].all():
        return 0
    first = int(codes[0])
    return None if (codes != first).any() else first


def uniform_plan(plan: Plan, codes: np.ndarray) -> Plan:
    """The plan a block of rows of one switch set is priced on (priced_set)."""
    code = priced_set(codes)
    if code is None:
        raise ValueError("rows of different memory switch sets are evaluated a set at a time")
    return applied(plan, SETS[code])
