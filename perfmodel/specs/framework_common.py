"""Blocks of behaviour flags that several framework profiles share word for word, written once:
a profile spreads one (``**NO_EXPERTS``) where its framework has the same code path."""

from __future__ import annotations

from typing import Any

# no expert parallelism: one all-to-all dispatcher (never run), no overlap, no expert host time
NO_EXPERTS: dict[str, Any] = {
    "expert_call_overhead_s": 0.0,
    "moe_fp8_dispatch": False,
    "moe_token_dispatcher_type": "alltoall",
    "moe_a2a_overlap": False,
    "moe_dispatchers": (),
    "moe_a2a_overlaps": (False,),
}
# one all-to-all dispatch per MoE layer, with no overlap, no FP8 dispatch and no per-expert host
# time: DeepSpeed-MoE (deepspeed/moe/sharded_moe.py) and torchtitan's ExpertParallel
# (all_to_all_single over the ep mesh)
ONE_ALLTOALL: dict[str, Any] = {
    "expert_call_overhead_s": 0.0,
    "moe_fp8_dispatch": False,
    "moe_token_dispatcher_type": "alltoall",
    "moe_a2a_overlap": False,
    "moe_dispatchers": ("alltoall",),
    "moe_a2a_overlaps": (False,),
}
# Megatron-LM before Megatron-Core (2021-2022): 1F1B and interleaved 1F1B
# (forward_backward_pipelining_with(out)_interleaving; no GPipe schedule; Narayanan et al. 2021,
# Sec. 2.2.2), TP and PP, no CP nor EP (they came with Megatron-Core, 2023), no sharded parameters
MEGATRON_LM_LAYOUT: dict[str, Any] = {
    "context_parallel": False,
    "cp_comm_types": (),
    "schedules": ("1f1b", "interleaved"),
    "expert_parallel": False,
    "interleaved": True,
    "pipeline": True,
    "tensor_parallel": True,
    "default_microbatches": None,
    "sharded_pipeline": False,
    "hsdp": False,
    "recompute_regathers": True,
    "zero3_prefetch_params": None,  # one layer (unit) ahead
    "zero3_reduce_bucket_params": 0.0,  # each unit reduce-scatters on its own
}

# Megatron-Core's activation offloading as the search's memory switches, in eighths of the layers
# (engine/memory_switches.py: activation-offload-K, K/8 of them; 8: all but the last)
ACTIVATION_OFFLOADS = tuple(f"activation-offload-{k}" for k in range(1, 9))
# and its fine-grained offloading of chosen modules (--offload-modules; the sets:
# engine/memory_switches.py)
MODULE_OFFLOADS = (
    "offload-attention",
    "offload-attention-experts",
    "offload-modules",
    "offload-modules-experts",
)
