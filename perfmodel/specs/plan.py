"""A plan: model + system + training + parallel knobs, and the resolved Config.

The rules that tie a configuration to the model and the cluster live in perfmodel/engine/mesh.py
(one place for `check`, `estimate` and the search).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pydantic import Field, ValidationError, model_validator

from ..errors import PerfModelError
from .base import Spec, format_validation_error
from .calibration import Calibration
from .framework import PROFILES
from .hardware import System
from .model import Model
from .offload_rules import module_offload_problem
from .parallel import Parallel
from .run import Run
from .training import Training


def offload_unmet(tr: Training, sys: System) -> str | None:
    """What the optimizer's CPU offload needs beyond its framework and the distributed optimizer,
    unmet, in words (None: nothing): the delayed recipe where FP8 weights are gathered in FP8
    (Megatron-LM's validate_args asserts it) and a host to step on. The plan's validation and the
    search's gate (engine/memory_switches) ask the same."""
    if tr.fp8_param_gather and tr.fp8_recipe not in (None, "delayed"):
        return (
            "with fp8_param_gather needs fp8_recipe delayed (Megatron-LM asserts it); drop"
            " fp8_param_gather or the offload"
        )
    if sys.host_link is None or sys.host_memory_bandwidth_bytes_per_s is None:
        return (
            "needs system.host_link and system.host_memory_bandwidth_bytes_per_s (the GPU's"
            " share of its host's memory bandwidth, e.g. 76.8 GB/s on a DGX H100)"
        )
    return None


class Plan(Spec):
    """What a plan file holds once presets are resolved."""

    model: Model = Field(description="The transformer: a preset name, a file or a mapping.")
    system: System = Field(description="The cluster: GPU, GPU count, links.")
    training: Training = Field(description="Batch, precision, optimizer, framework profile.")
    parallel: Parallel = Field(
        default_factory=Parallel,
        description="The parallel knobs; any knob given is fixed, the search picks the rest.",
    )
    run: Run = Field(
        default_factory=Run,
        description="Power, price, failures and checkpoints of the whole run (with tokens).",
    )
    ignore: list[str] = Field(default_factory=list, description="check rule IDs to silence.")
    read_as: list[str] = Field(
        default_factory=list,
        description=(
            "How the plan's names were read, which every output prints: an alias resolved to its"
            " preset (gpu h100 as h100-sxm, framework torchtitan as fsdp), a base: extended."
        ),
    )
    calibration: Calibration | None = Field(
        None,
        description=(
            "Factors fitted on the team's own runs (perfmodel calibrate), already applied to the"
            " efficiencies above; a plan file names the CAL.yaml."
        ),
    )

    @property
    def seq_length(self) -> int:
        return self.training.seq_length or self.model.seq_length

    @model_validator(mode="after")
    def _recompute_modules(self) -> Plan:
        """torchtitan's per-op and per-layer policies are one choice (selective_ac_option "op" or
        a number); a Megatron-Core module the model lacks recomputes nothing."""
        modules = self.training.recompute_modules
        if "op_sac" in modules and "layer_sac" in modules:
            raise ValueError(
                "training.recompute_modules: op_sac and layer_sac are one torchtitan choice"
                ' (selective_ac_option "op" or a layer count); give one'
            )
        m = self.model
        absent = [
            name
            for name, lacking in (
                ("mla_up_proj", not m.is_mla),
                ("moe", not m.is_moe),
                ("moe_act", not m.is_moe),
                ("shared_experts", not (m.is_moe and m.moe_shared_expert_intermediate_size)),
            )
            if name in modules and lacking
        ]
        if absent:
            raise ValueError(
                f"training.recompute_modules: {', '.join(absent)} not in {m.name} (no"
                f" {'MLA' if 'mla_up_proj' in absent else 'such module'}"
                f"{', no MoE' if set(absent) & {'moe', 'moe_act'} else ''}); drop"
                f" {'them' if len(absent) > 1 else 'it'}"
            )
        return self

    @model_validator(mode="after")
    def _offloading(self) -> Plan:
        """Activation offloading as Megatron-Core takes it (TransformerConfig.__post_init__): fewer
        layers than the model has, pp 1, no recompute."""
        n = self.training.cpu_offloading_num_layers
        if not n:
            return self
        L, par = self.model.num_layers, self.parallel
        framework = self.training.framework
        if not PROFILES[framework].get("activation_offloading", False):
            raise ValueError(
                f"training.cpu_offloading_num_layers({n}): {framework} has no activation"
                " offloading (it is Megatron-Core's --cpu-offloading); use framework:"
                " megatron-core or drop it"
            )
        if n >= L:
            raise ValueError(
                f"training.cpu_offloading_num_layers({n}) must be below num_layers({L}):"
                " Megatron-Core offloads fewer layers than the model has"
            )
        if self.system.host_link is None:
            raise ValueError(
                f"training.cpu_offloading_num_layers({n}) needs system.host_link, the GPU's link to"
                " host memory: nvlink-c2c on Grace systems (GB200, GB300), pcie-gen5-shared on"
                " HGX boards"
            )
        if (par.pp or 1) > 1 or (par.recompute or "none") != "none":
            raise ValueError(
                f"training.cpu_offloading_num_layers({n}) with pp({par.pp}) and recompute"
                f" {par.recompute}: Megatron-Core runs activation offloading with pp 1 and no"
                " recompute only; set pp 1 and recompute none, or drop the offloading"
            )
        return self

    @model_validator(mode="after")
    def _module_offloading(self) -> Plan:
        """Fine-grained activation offloading as Megatron-Core takes it (TransformerConfig.
        __post_init__): not with the layer-wise offloading, attn_proj with core_attn, the fused
        grouped MLP alone, no expert module under the MoE layer's recompute; and, for the model,
        modules the layers have, a host link, and something kept to move (not full recompute)."""
        problem = module_offload_problem(self)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _optimizer_offload(self) -> Plan:
        """The optimizer's CPU offload as Megatron-LM takes it (arguments.py validate_args): with
        the precision-aware optimizer, itself only with the distributed optimizer; FP8 weights
        gathered in FP8 only with the delayed recipe; and a host to step on."""
        f = self.training.optimizer_cpu_offload
        if not f:
            return self
        tr, name = self.training, f"training.optimizer_cpu_offload({f:g})"
        if "optimizer-cpu-offload" not in PROFILES[tr.framework]["memory_switches"]:
            raise ValueError(
                f"{name}: {tr.framework} has no optimizer CPU offload (it is Megatron-Core's"
                " --optimizer-cpu-offload); use framework: megatron-core or drop it"
            )
        if (self.parallel.zero_stage or 0) < 1:
            raise ValueError(
                f"{name} needs the distributed optimizer: set parallel.zero_stage to 1 (Megatron-LM"
                " asserts --use-precision-aware-optimizer for the offload, and the distributed"
                " optimizer for that)"
            )
        unmet = offload_unmet(tr, self.system)
        if unmet:
            raise ValueError(f"{name} {unmet}")
        return self

    def _with(self, section: str, changes: dict[str, Any]) -> Plan:
        """A copy with fields of one section replaced, validated like a loaded plan: a bad value
        raises PerfModelError naming ``section.field`` and the fix."""
        part = getattr(self, section)
        base = part.given() if hasattr(part, "given") else dict(part)
        try:
            new = type(part).model_validate({**base, **changes})
        except ValidationError as e:
            raise PerfModelError(format_validation_error(e, section, type(part))) from None
        return self.model_copy(update={section: new})

    def with_system(self, **changes: Any) -> Plan:
        """A copy with system fields replaced (num_gpus, placement, ...)."""
        return self._with("system", changes)

    def with_training(self, **changes: Any) -> Plan:
        """A copy with training fields replaced (global_batch_size, seq_length, ...)."""
        return self._with("training", changes)

    def with_parallel(self, **changes: Any) -> Plan:
        """A copy with parallel knobs replaced (None frees a knob for the search)."""
        return self._with("parallel", changes)


@dataclass(frozen=True)
class Config:
    """One fully resolved parallel configuration (every knob fixed)."""

    tp: int
    pp: int
    dp: int
    vp: int
    micro_batch_size: int
    global_batch_size: int
    sequence_parallel: bool
    recompute: str
    zero_stage: int
    schedule: str
    cp: int = 1
    ep: int = 1
    etp: int = 1
    cp_comm_type: str = "p2p"
    # HSDP: the ranks each ZeRO-2/3 shard group holds (0: all dp, full sharding)
    dp_shard: int = 0
    # 0: chosen (even split, or balanced when pp does not divide the layers)
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    # MoE switches (Training's fields of the same names): how tokens reach their experts, and
    # whether Megatron-Core's combined 1F1B hides the all-to-alls under another micro-batch
    moe_token_dispatcher_type: str = "alltoall"
    moe_a2a_overlap: bool = False
    # the memory-saving switches the configuration runs with beyond the plan's training settings
    # ('+'-joined names of engine/memory_switches.py; '' none): searched where memory asks
    memory_switch: str = ""

    @property
    def num_micro_batches(self) -> int:
        return self.global_batch_size // (self.dp * self.micro_batch_size)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "num_micro_batches": self.num_micro_batches}
