"""The memory-saving switches' table: what each sets in the plan and how the outputs name it
(engine/memory_switches.py says what each is, its sources, and how the search tries them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Switch:
    """One memory-saving switch: the training fields it sets and how the outputs name it."""

    fields: dict[str, Any]
    words: str  # the switch in a sentence's words
    flags: str  # the framework's own launch flags
    short: str  # its mark in a configuration's few columns (output/render.config_short)
    # activation offloading: the eighths of the layers whose activations go to the host (0: the
    # switch sets ``fields`` as they are)
    eighths: int = 0

    def fields_for(self, num_layers: int) -> dict[str, Any]:
        """The training fields the switch sets on a model of ``num_layers`` layers."""
        if not self.eighths:
            return self.fields
        return {"cpu_offloading_num_layers": offloaded_layers(num_layers, self.eighths)}


def offloaded_layers(num_layers: int, eighths: int) -> int:
    """The layers activation-offload-K offloads: K/8 of them, rounded half up; all but the last
    for K = 8 (Megatron-Core asserts cpu_offloading_num_layers < num_layers)."""
    return int(offloaded_counts(num_layers, np.asarray(eighths)))


def offloaded_counts(num_layers: int, eighths: np.ndarray) -> np.ndarray:
    """offloaded_layers for an array of eighths."""
    return np.where(eighths >= 8, num_layers - 1, (eighths * num_layers + 4) // 8)


def _offload_switch(k: int) -> Switch:
    share = "all but the last of the layers" if k == 8 else f"{k}/8 of the layers"
    return Switch(
        {"cpu_offloading_num_layers": 0},  # the key only: fields_for gives the count
        f"the activations of {share} offloaded to host memory",
        "--cpu-offloading --cpu-offloading-num-layers",
        f"ao{k}",
        k,
    )


ATTENTION = ("core_attn", "attn_proj")
EXPERTS = ("expert_fc1", "moe_act")
EVERY = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")


def _module_switch(modules: tuple[str, ...], what: str, mark: str) -> Switch:
    return Switch(
        {"offload_modules": list(modules)},
        f"{what} offloaded to host memory in every layer",
        "--fine-grained-activation-offloading --offload-modules " + " ".join(modules),
        mark,
    )


SWITCHES: dict[str, Switch] = {
    "bf16-moments": Switch(
        {"exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"},
        "Adam's moments in BF16",
        "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16",
        "m16",
    ),
    "bf16-main-grads": Switch(
        {"grad_accum_fp32": False},
        "main gradients in BF16",
        "--use-precision-aware-optimizer --main-grads-dtype bf16",
        "g16",
    ),
    "fp8-param-gather": Switch(
        {"fp8_param_gather": True},
        "weights kept and gathered in FP8",
        "--fp8-param-gather",
        "w8",
    ),
    # selective recompute of MLA's up-projections (and of the dense MLPs), as Megatron-Bridge's
    # DeepSeek-V3 performance recipes set it: recompute_modules ["mla_up_proj"] on B200 and GB200,
    # ["mla_up_proj", "mlp"] on H100 (scripts/performance, deepseek_v3 *_config, 2025-2026)
    "mla-up-proj": Switch(
        {"recompute_modules": ["mla_up_proj"]},
        "MLA's up-projections recomputed",
        "--recompute-granularity selective --recompute-modules mla_up_proj",
        "up",
    ),
    "mla-up-proj-mlp": Switch(
        {"recompute_modules": ["mla_up_proj", "mlp"]},
        "MLA's up-projections and the dense MLPs recomputed",
        "--recompute-granularity selective --recompute-modules mla_up_proj mlp",
        "upm",
    ),
    # selective recompute of the MoE layers' activation function (and the layernorms), as
    # Megatron-Bridge's MoE performance recipes set it: ["moe_act"] (DeepSeek-V3 at pp 4 vp 4
    # ep 64), ["moe_act", "layernorm"] (Nemotron 3 Super) (scripts/performance, 2025-2026)
    "moe-act": Switch(
        {"recompute_modules": ["moe_act"]},
        "the experts' activation recomputed",
        "--recompute-granularity selective --recompute-modules moe_act",
        "ma",
    ),
    "moe-act-layernorm": Switch(
        {"recompute_modules": ["moe_act", "layernorm"]},
        "the experts' activation and the layernorms recomputed",
        "--recompute-granularity selective --recompute-modules moe_act layernorm",
        "mal",
    ),
    # the riskier optimizer precisions Transformer Engine's FusedAdam runs
    # (transformer_engine/pytorch/optimizers/fused_adam.py: exp_avg and exp_avg_sq in fp32, fp16,
    # bf16 or fp8 (E4M3 with a per-tensor scale); master weights fp32 or fp16 with a scale)
    "fp8-moments": Switch(
        {"exp_avg_dtype": "fp8", "exp_avg_sq_dtype": "fp8"},
        "Adam's moments in FP8",
        "--use-precision-aware-optimizer --exp-avg-dtype fp8 --exp-avg-sq-dtype fp8",
        "m8",
    ),
    "fp16-main-params": Switch(
        {"main_params_dtype": "fp16"},
        "master weights in FP16",
        "--use-precision-aware-optimizer --main-params-dtype fp16",
        "p16",
    ),
    # the optimizer's states and step in host memory, all of them (--optimizer-offload-fraction's
    # default, 1.0), its copies overlapped as the recipes that offload set it (slime's and
    # Megatron-LM's RL examples: --optimizer-cpu-offload --overlap-cpu-optimizer-d2h-h2d
    # --use-precision-aware-optimizer); cost/optimizer_offload.py prices it
    "optimizer-cpu-offload": Switch(
        {"optimizer_cpu_offload": 1.0, "optimizer_offload_overlap": True},
        "the optimizer's states and step on the host's CPUs",
        "--use-precision-aware-optimizer --optimizer-cpu-offload --optimizer-offload-fraction 1.0"
        " --overlap-cpu-optimizer-d2h-h2d",
        "oc",
    ),
    **{f"activation-offload-{k}": _offload_switch(k) for k in range(1, 9)},
    # fine-grained activation offloading of chosen modules in every layer: the attention core's
    # inputs and its output (Megatron-Core's documented pairing, and Megatron-Bridge's DeepSeek
    # V4 recipe), with the experts' fc1 and activation inputs (its documented MoE example and
    # Megatron-Bridge's Nemotron and Qwen3 MoE configurations), or every module it has
    "offload-attention": _module_switch(ATTENTION, "the attention core's saved tensors", "oa"),
    "offload-attention-experts": _module_switch(
        (*ATTENTION, *EXPERTS), "the attention core's and the experts' saved tensors", "oae"
    ),
    "offload-modules": _module_switch(EVERY, "every offloadable module's saved tensors", "om"),
    "offload-modules-experts": _module_switch(
        (*EVERY, *EXPERTS), "every offloadable module's saved tensors", "ome"
    ),
}
# the module switches, and those that offload the experts' (MoE models only)
MODULE_SWITCHES = (
    "offload-attention",
    "offload-attention-experts",
    "offload-modules",
    "offload-modules-experts",
)
# the modules each fine-grained set offloads, by its index in MODULE_SWITCHES + 1 (0: the plan's
# own offload_modules): a block's costs carry what every set moves, read row by row
MODULE_SETS: tuple[tuple[str, ...], ...] = tuple(
    tuple(SWITCHES[s].fields["offload_modules"]) for s in MODULE_SWITCHES
)
# the switches that change what selective recompute repeats: tried on selective rows only
RECOMPUTE_SWITCHES = ("mla-up-proj", "mla-up-proj-mlp", "moe-act", "moe-act-layernorm")
