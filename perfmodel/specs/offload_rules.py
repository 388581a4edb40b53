"""What Megatron-Core asserts of fine-grained activation offloading (training.offload_modules;
megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__, Megatron-LM main
of 2026-08), and what the model needs to price it, as one message naming the field and the fix."""

from __future__ import annotations

from typing import Any

from perfmodel.specs.framework import PROFILES

EXPERT_MODULES = ("expert_fc1", "moe_act", "fused_group_mlp")


def module_offload_problem(plan: Any) -> str | None:
    """Why ``plan``'s offload_modules cannot run or be priced (None: they can, or it has none)."""
    tr, par = plan.training, plan.parallel
    mods = list(tr.offload_modules)
    if not mods:
        return None
    field = f"training.offload_modules [{', '.join(mods)}]"
    if not PROFILES[tr.framework].get("activation_offloading", False):
        return (
            f"{field}: {tr.framework} has no fine-grained activation offloading (it is"
            " Megatron-Core's --fine-grained-activation-offloading); use framework:"
            " megatron-core or drop it"
        )
    if tr.cpu_offloading_num_layers:
        return (
            f"{field} with cpu_offloading_num_layers({tr.cpu_offloading_num_layers}):"
            " Megatron-Core runs one of the two offloadings (fine_grained_activation_offloading"
            " cannot be enabled with cpu_offloading); drop one"
        )
    if "attn_proj" in mods and "core_attn" not in mods:
        return (
            f"{field}: attn_proj's input is core_attn's output, which core_attn's backward needs;"
            " Megatron-Core offloads it only with core_attn: add core_attn or drop attn_proj"
        )
    if "fused_group_mlp" in mods and {"expert_fc1", "moe_act"} & set(mods):
        return (
            f"{field}: fused_group_mlp offloads the experts' whole fused MLP and cannot be"
            " combined with expert_fc1 or moe_act; drop one side"
        )
    experts = [m for m in mods if m in EXPERT_MODULES]
    if experts and not plan.model.is_moe:
        names, one = ", ".join(experts), len(experts) == 1
        return (
            f"{field}: {names} {'needs' if one else 'need'} experts, and {plan.model.name} has"
            f" none; drop {'it' if one else 'them'}"
        )
    recompute = par.recompute
    if experts and recompute == "selective" and "moe" in tr.recompute_modules:
        return (
            f"{field} with recompute_modules containing moe: the whole MoE layer is recomputed,"
            f" so {', '.join(experts)} keep nothing to offload (Megatron-Core asserts it); drop"
            " moe from recompute_modules or the expert modules"
        )
    if recompute == "full":
        return (
            f"{field} with recompute full: a layer keeps only its input, so the modules have"
            " nothing to offload; use recompute selective or none, or drop offload_modules"
        )
    if plan.system.host_link is None:
        return (
            f"{field} needs system.host_link, the GPU's link to host memory: nvlink-c2c on"
            " Grace systems (GB200, GB300), pcie-gen5-shared on HGX boards"
        )
    return None
