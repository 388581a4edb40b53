"""Framework profiles derived from another one, each from the profile it runs like
(specs/framework.py merges them): DeepSeek's HAI-LLM, DeepSpeed's ZeRO-3 of 2021, AMD's Primus,
InternEvo's hierarchical ZeRO-1 and the ROCm stacks."""

from __future__ import annotations

from typing import Any

from .framework_common import ACTIVATION_OFFLOADS, MODULE_OFFLOADS


def _hai_llm(PROFILES: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """hai-llm, from the megatron-core profile."""
    # DeepSeek-V3 report (arXiv 2412.19437) Sec. 3.2-3.3 unless said: DeepSeek's own framework,
    # whose code is not public; a flag the report does not settle takes Megatron-Core's value
    return {
        **PROFILES["megatron-core"],
        # DeepSeek's own optimizer, not Megatron-Core's: its BF16 moments (Sec. 3.3.3) are a plan's
        # exp_avg_dtype, not a Megatron flag the search may turn on
        "memory_switches": (),
        # the expert GEMMs are one grouped kernel (DeepGEMM), no host loop over the experts; not
        # stated, so Megatron-Core's: the weight cache, the host overheads a step and a micro-batch
        "expert_call_overhead_s": 0.0,
        # Sec. 3.3.3: the activations before the MoE up-projections and their gradients before the
        # down-projections are quantized to FP8 and then dispatched; both combines stay BF16
        "moe_fp8_dispatch": True,
        # Sec. 3.3.4: forward activations are stored as 1 x 128 FP8 tiles; for the backward they
        # are "read out, dequantized, transposed, re-quantized into 128 x 1 tiles, and stored in
        # HBM", a pass of its own (deepseek-ai/profile-data train.json runs per_token_cast_to_fp8
        # and per_channel_cast_and_transpose as separate kernels, 72 and 68 a pair of 4 layers)
        "fp8_transpose_pass": True,
        # the report's framework is not Megatron-Core's MoE module (its experts are one grouped
        # kernel); the profile-data trace runs MLA's (YaRN) RoPE as one kernel (rotary_kernel)
        "megatron_moe_kernels": False,
        "yarn_rope_fused": True,
        # Sec. 3.2.2: node-limited dispatch (each token to at most 4 nodes, once per node, then over
        # NVLink), DeepEP's kernels as DeepSeek released them; the all-to-alls hide in DualPipe's
        # forward-backward pairs, not in Megatron-Core's combined 1F1B
        "moe_token_dispatcher_type": "deepep",
        "moe_a2a_overlap": False,
        "moe_dispatchers": ("deepep",),
        "moe_a2a_overlaps": (False,),
        # Sec. 3.2: DualPipe, the default of a plan that names no schedule; 1F1B is the baseline of
        # its Table 2; DualPipeV ships beside DualPipe in deepseek-ai/DualPipe (dualpipev.py)
        "schedules": ("dualpipe", "1f1b", "dualpipev"),
        "interleaved": False,
        # Sec. 3.2: ZeRO-1 data parallelism
        "zero_stages": (0, 1),
        # Sec. 3.2: 16-way PP over 61 layers: the stages are uneven (first/last layers not stated)
        "uneven_stages": True,
        "context_parallel": False,  # not used or described in the report
        "cp_comm_types": (),
        "expert_parallel": True,  # Sec. 3.2: 64-way EP over 8 nodes
        # Sec. 3.2.2: "without using costly Tensor Parallelism" (the run avoids it; the report does
        # not say the framework lacks it): allowed, as Megatron-Core runs it
        "tensor_parallel": True,
        "sharded_pipeline": False,
        "activation_offloading": False,  # not described in the report
        # the report states no bucket rule: Megatron-Core's 40M, fixed (not grown with dp)
        "grad_bucket_params_per_dp_rank": 0.0,
    }


# The host's seconds per rank of the group for each ZeRO-3 collective as DeepSpeed v0.3.16 ran it
# on PyTorch 1.8, counted from the code, not fitted: its Python loop makes one view a rank
# (partition_parameters.py: flat_tensor.narrow in _allgather_param, param.grad.view(-1).narrow in
# _reduce_scatter_gradient), an eager view op of 3.3 us on a CUDA tensor (PyTorch's operator
# micro-benchmark of split on CUDA, pytorch/pytorch#32194, 2020); then ProcessGroupNCCL::allgather
# copy_s each rank's slice out of the flat buffer and ::reduce_scatter each into it, a same-dtype
# contiguous device copy that ATen issues as one cudaMemcpyAsync (aten/src/ATen/native/cuda/
# Copy.cu, copy_device_to_device when memcpy_eligible), 5-7 us of host time a call (Wu et al.
# 2026, DualPath, arXiv 2602.21548 Sec. 5.2): 6 us
PY_VIEW_OP_S = 3.3e-6
MEMCPY_ASYNC_S = 6.0e-6


def _deepspeed_2021(PROFILES: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """deepspeed-2021, from the deepspeed profile with Megatron-LM 2021's kernels."""
    # Narayanan et al. 2021 (SC21) Sec. 5.2: "We integrated ZeRO into our codebase using the
    # DeepSpeed Python library": Megatron-LM's 2021 layers (megatron-2021's kernels, timers and
    # schedule, whose fitted step and micro-batch overheads come with them) under DeepSpeed's
    # ZeRO-3 as released then (v0.3.16, 2021-04-29; runtime/zero/constants.py and stage3.py)
    mega = PROFILES["megatron-2021"]
    kernels = (
        "flash_attention",
        "attention_backend",
        "persist_layer_norm",
        "pointwise_kernels",
        "step_overhead_s",
        "microbatch_overhead_s",
    )
    return {
        **PROFILES["deepspeed"],
        **{k: mega[k] for k in kernels},
        # ZERO3_OPTIMIZATION_OVERLAP_COMM_DEFAULT True: the reduce-scatters run on their own
        # stream; the next sub-module's parameters are prefetched (stage3_prefetch_bucket_size
        # 5e7 elements, stage3_max_live_parameters 1e9, reduce_bucket_size 5e8)
        "overlap_grad_reduce": True,
        "overlap_param_gather": True,
        "zero3_prefetch_params": 5e7,
        "zero3_reduce_bucket_params": 5e8,
        # stage3_max_live_parameters: no prefetch while 1e9 gathered parameters are live
        "zero3_max_live_params": 1e9,
        # fetch_sub_module all-gathers each sub-module's own parameters (one collective per weight
        # tensor; tensors under stage3_param_persistence_threshold 1e5, the biases and norms here,
        # stay whole), then torch.cuda.synchronize()s (_synchronize_communication)
        "zero3_per_tensor": True,
        # Megatron-LM 2021's layers are issued by its own code, not Megatron-DeepSpeed's: the
        # host time per kernel is megatron-2021's (none fitted there), not the deepspeed profile's
        "kernel_host_s": mega.get("kernel_host_s", 0.0),
        # the host's per-rank loop of each collective (cost/sharded.py Sharding.rank_host_s): a
        # view and a cudaMemcpyAsync a rank (PY_VIEW_OP_S, MEMCPY_ASYNC_S), not fitted
        "collective_rank_host_s": PY_VIEW_OP_S + MEMCPY_ASYNC_S,
        # the list API's staging copies and the zeroed gather buffer (cost/sharded.py
        # ZERO3_HBM_PASSES)
        "zero3_hbm_passes": True,
        # Megatron-LM 2021 has neither context nor expert parallelism, nor uneven stages
        "context_parallel": False,
        "cp_comm_types": (),
        "expert_parallel": False,
        "moe_dispatchers": (),
        "uneven_stages": False,
    }


# the memory switches not tried on ROCm: the optimizer's CPU offload (no ROCm recipe offloads the
# optimizer, and the RL frameworks that run Megatron-Core there refuse it: HybridDeviceOptimizer
# failed in its gradient synchronisation on their ROCm path); FP8 moments or FP16 master weights
# (ROCm's recipes keep fp32 or BF16 states, and no ROCm run checks TE's FP8 optimizer kernels
# there); activation offloading, layer-wise or by module (no ROCm recipe or run offloads them)
ROCM_OFF = (
    "optimizer-cpu-offload",
    "fp8-moments",
    "fp16-main-params",
    *ACTIVATION_OFFLOADS,
    *MODULE_OFFLOADS,
)


PRIMUS_SCHEDULES: tuple[str, ...] = ("1f1b", "interleaved", "zb-h1", "zb-h2", "zbv", "v-half")
PRIMUS_SCHEDULES += ("v-min", "interleaved-zb")


def extra_profiles(PROFILES: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """hai-llm, primus, internevo, megatron-rocm and torchtitan-rocm, from the megatron-core and
    fsdp profiles."""
    out: dict[str, dict[str, Any]] = {}
    out["hai-llm"] = _hai_llm(PROFILES)
    out["deepspeed-2021"] = _deepspeed_2021(PROFILES)
    # AMD-AGI/Primus, Megatron-LM backend with Primus-pipeline (docs tech_blogs/primus_pipeline, PR
    # #513, 2026-02): Megatron-Core's values except where said
    out["primus"] = {
        **PROFILES["megatron-core"],
        # pp_algorithm: 1f1b, 1f1b-interleaved, zero-bubble (ZB-H1's 1F1B with the W split), zbv
        # (ZB-V), v-half and v-min (the blog's experiment tables); and its port of sail-sg's
        # zero-bubble runtime (primus/backends/megatron/core/pipeline_parallel/zerobubble,
        # zbpp_utils.py at commit f8abd27b): --zero-bubble-max-pending-backward 2p "will use
        # zb2p" (ZB-H2), and --interleave-group-size with vpp > 1 the interleaved zero-bubble
        # schedule (scheduler/group_interleaved_1f1b.py at 90fa0bd8: B and W split over v chunks)
        "schedules": PRIMUS_SCHEDULES,
        # "overlap_grad_reduce/overlap_param_gather false (required by Primus-pipeline)" (the blog's
        # test configuration, tests/trainer/test_megatron_trainer_zero_bubble.yaml)
        "overlap_grad_reduce": False,
        "overlap_param_gather": False,
    }
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
        "grad_bucket_params_per_dp_rank": 0.0,  # a fixed bucket, whatever the DP size
        "zero_stages": (0, 1),  # zero1 (fsdp=True is a separate mode, not modelled)
        # HybridZeroOptimizer keeps fp32 masters and moments; no FP8 gather
        "memory_switches": (),
        "uneven_stages": False,
        "context_parallel": False,
        "cp_comm_types": (),
        "expert_parallel": False,
        "schedules": ("1f1b", "interleaved"),
        "zero1_shard_group": True,
        "zero1_grad_reduce": "all-reduce",
        "zero1_param_sync": "broadcast",
        # InternEvo's own modules, not Megatron-Core's MoE module or MLA
        "megatron_moe_kernels": False,
        "yarn_rope_fused": True,
        # no published InternEvo step overheads to fit; Megatron-Core's host costs would be a guess
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
    }
    # Megatron-LM / Megatron-Core on ROCm (AMD-AGI/Primus' megatron backend; the MLPerf Training
    # v5.1 AMD llama31_8b implementation: NeMo + Megatron-LM + ROCm TransformerEngine): the same
    # schedules and buckets as Megatron-Core; TE's fused attention is CK's (fused), GEMMs
    # hipBLASLt (the GPU's fractions say how fast)
    out["megatron-rocm"] = {**PROFILES["megatron-core"]}
    for name in ("primus", "megatron-rocm"):
        switches = out[name]["memory_switches"]
        out[name]["memory_switches"] = tuple(s for s in switches if s not in ROCM_OFF)
    # torchtitan on ROCm: the fsdp profile's behaviour; SDPA's flash backend on ROCm is AOTriton's
    # FlashAttention-2 kernels (the GPU's fa2 fraction)
    out["torchtitan-rocm"] = {**PROFILES["fsdp"]}
    return out
