"""Framework profiles beyond Megatron-on-NVIDIA (issue 31): InternEvo's hierarchical ZeRO-1 and
the ROCm stacks, each derived from the profile it runs like (specs/framework.py merges them)."""

from __future__ import annotations

from typing import Any


def extra_profiles(PROFILES: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """internevo, megatron-rocm and torchtitan-rocm, from the megatron-core and fsdp profiles."""
    out: dict[str, dict[str, Any]] = {}
    # InternEvo's HybridZeroOptimizer (InternLM/InternEvo internlm/solver/optimizer/
    # hybrid_zero_optim.py, 2023-2024) and configs/7B_sft.py; what InternEvo does not differ in
    # takes Megatron-Core's value
    out["internevo"] = {
        **PROFILES["megatron-core"],
        # flash-attn 2 kernels (use_flash_attn True): FlashAttention-2 on A100
        "attention_backend": "fa2",
        "tp_comm_overlap": False,  # no asynchronous TP collectives in the 2023 versions
        "p2p_overlap": False,
        "fp8_weight_cache": False,
        "fused_cross_entropy": True,  # flash-attn's fused CrossEntropyLoss (FlashCrossEntropyLoss)
        # hybrid_zero_optimizer: overlap_sync_grad True (bucketed all-reduce in the backward hooks),
        # overlap_sync_param False (the broadcast runs after the step, exposed)
        "overlap_grad_reduce": True,
        "overlap_param_gather": False,
        "grad_bucket_params": 512 * 1024 * 1024,  # reduce_bucket_size=512 * 1024 * 1024 elements
        "zero_stages": (0, 1),  # zero1 (fsdp=True is a separate mode, not modelled)
        "uneven_stages": False,
        "context_parallel": False,
        "cp_comm_types": (),
        "expert_parallel": False,
        "schedules": ("1f1b", "interleaved"),
        "zero1_shard_group": True,
        "zero1_grad_reduce": "all-reduce",
        "zero1_param_sync": "broadcast",
        # no published InternEvo step overheads to fit; Megatron-Core's host costs would be a guess
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
    }
    # Megatron-LM / Megatron-Core on ROCm (AMD-AGI/Primus' megatron backend; the MLPerf Training
    # v5.1 AMD llama31_8b implementation: NeMo + Megatron-LM + ROCm TransformerEngine): the same
    # schedules and buckets as Megatron-Core; TE's fused attention is CK's (fused), GEMMs
    # hipBLASLt (the GPU's fractions say how fast)
    out["megatron-rocm"] = {**PROFILES["megatron-core"]}
    # torchtitan on ROCm: the fsdp profile's behaviour; SDPA's flash backend on ROCm is AOTriton's
    # FlashAttention-2 kernels (the GPU's fa2 fraction)
    out["torchtitan-rocm"] = {**PROFILES["fsdp"]}
    return out
