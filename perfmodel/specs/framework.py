"""Framework profiles: named bundles of defaults for the behaviour flags (STYLE.md "Framework
behaviour as data"). Formulas read the flags, never the profile's name; a plan may set any flag
itself, and what the profile supplied is reported as assumed.

Each flag's value cites where it comes from. Profiles:
- megatron-2021: Megatron-LM as in Narayanan et al. 2021 (SC21; the artifact's run_table_1.sh).
- megatron-2022: Megatron-LM as in Korthikanti et al. 2022 (the SP + selective recompute paper).
- megatron-core: Megatron-Core with Transformer Engine as NeMo 2 / Megatron-Bridge recipes run it
  (2025-2026), the default.
- deepspeed: DeepSpeed ZeRO with its pipeline engine as Megatron-DeepSpeed ran it in 2021-2022
  (Rajbhandari et al. 2020; DeepSpeed 0.5-0.8 docs: overlap_comm, stage3_prefetch_bucket_size).
- deepspeed-2021: DeepSpeed's ZeRO-3 as released in 2021 (v0.3.16) inside Megatron-LM of 2021, as
  Narayanan et al. 2021 Sec. 5.2 compared it: a collective per weight tensor, each with a host
  loop over the group's ranks (Table 2's runs).
- fsdp: PyTorch FSDP2 (fully_shard) as torchtitan runs it (torchtitan 2024-12, the commit of its
  Llama 3.1 benchmark notes; torch.distributed.fsdp._fully_shard): FSDP with TP (DTensor), PP
  (torch.distributed.pipelining) and CP (ring attention).
- fsdp1: PyTorch FSDP1 (FullyShardedDataParallel, flat parameters) as MosaicML Composer and
  llm-foundry run it (2023-2024): data parallelism only, every micro-batch synchronized.
- hai-llm: DeepSeek's in-house HAI-LLM as the DeepSeek-V3 technical report describes it (arXiv
  2412.19437, Sec. 3.2-3.3, 2024-12): DualPipe, DeepEP-style all-to-all with node-limited
  routing, ZeRO-1, no tensor parallelism in that run. What the report does not state takes
  Megatron-Core's value, said where it is set.
- primus: AMD's Primus (AMD-AGI/Primus, early 2026) on its Megatron-LM backend with the
  Primus-pipeline schedules (the zero-bubble family; its tech blog "primus_pipeline"); Megatron-
  Core's values elsewhere. The GPU's rates are the hardware preset's, not the profile's.
- internevo: InternEvo (InternLM's training framework, 2023-2024) with its HybridZeroOptimizer:
  ZeRO-1 sharded over a zero1 group of ranks (parallel.zero1 size; -1: all of dp), gradients
  all-reduced over every data-parallel rank, parameters broadcast from each shard's owner.
- megatron-rocm: Megatron-LM / Megatron-Core on ROCm as AMD's Primus and the MLPerf v5.1 AMD
  submission run it (ROCm TransformerEngine, CK fused attention, hipBLASLt GEMMs, RCCL).
- torchtitan-rocm: torchtitan (FSDP2) on ROCm (ROCm PyTorch, SDPA's flash backend: AOTriton).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from .flags import FLAGS
from .framework_common import (
    ACTIVATION_OFFLOADS,
    MEGATRON_LM_LAYOUT,
    MODULE_OFFLOADS,
    NO_EXPERTS,
)
from .framework_extra import extra_profiles
from .framework_zero import ZERO_PROFILES

__all__ = ["FLAGS", "FRAMEWORKS", "FRAMEWORK_ALIASES", "PROFILES", "Framework", "defaults"]

Framework = Literal[
    "megatron-core",
    "megatron-2022",
    "megatron-2021",
    "deepspeed",
    "fsdp",
    "fsdp1",
    "hai-llm",
    "deepspeed-2021",
    "primus",
    "internevo",
    "megatron-rocm",
    "torchtitan-rocm",
]
FRAMEWORKS: tuple[str, ...] = get_args(Framework)

# What people call a framework -> the profile that describes it (every output says when one was
# read this way). torchtitan runs FSDP2; NeMo 2 and Megatron-Bridge run Megatron-Core; MosaicML
# Composer and llm-foundry run FSDP1.
FRAMEWORK_ALIASES: dict[str, str] = {
    "torchtitan": "fsdp",
    "fsdp2": "fsdp",
    "megatron": "megatron-core",
    "megatron-lm": "megatron-core",
    "mcore": "megatron-core",
    "nemo": "megatron-core",
    "nemo2": "megatron-core",
    "megatron-bridge": "megatron-core",
    "megatron-deepspeed": "deepspeed",
    "composer": "fsdp1",
    "llm-foundry": "fsdp1",
}

PROFILES: dict[str, dict[str, Any]] = {
    "megatron-2021": {
        "flash_attention": False,  # flash attention came in 2022 (Dao et al.)
        # the asynchronous TP all-reduce arrived late 2021 (Korthikanti 2022, 6.2)
        "tp_comm_overlap": False,
        "tp_comm_overlap_ub": False,
        "grad_accumulation_fusion": False,  # fused wgrad arrived with the async all-reduce
        # apex's persistent layernorm became Megatron's default late 2021
        "persist_layer_norm": False,
        "p2p_overlap": False,  # blocking send/recv (p2p_communication.py of 2021)
        "overlap_grad_reduce": False,  # --DDP-impl local: the all-reduce after the backward
        "overlap_param_gather": False,
        "bias_gemm_fusion": False,  # F.linear adds the QKV bias in its own kernel on a 3-D input
        "fused_cross_entropy": False,  # _VocabParallelCrossEntropy on fp32 logits, one pass per op
        "fp8_param_gather": False,
        "fp8_weight_cache": False,
        # no expert parallelism in Megatron-LM before Megatron-Core
        **NO_EXPERTS,
        "attention_backend": "fused",  # no flash attention at all (flash_attention False)
        "pointwise_kernels": "fused",  # Megatron's fused kernels (bias-gelu, softmax, layernorm)
        "recompute_modules": ("core_attn",),  # Korthikanti 2022's selective recompute
        "torch_compile": False,
        "reduce_dtype": None,
        "reduce_every_microbatch": True,
        "zero2_gathers_per_microbatch": False,
        # fitted on Narayanan 2021 Table 1 (benchmarks/calibrate_overheads.py --profile
        # megatron-2021, every grid point tried): the timers' torch.cuda.synchronize() and the
        # Python schedule of 2021 cost ~0.8 ms each time a micro-batch passes a pipeline chunk
        # (the coordinate descent this fit used before issue 28 stopped at 4 ms a micro-batch,
        # within its tolerance of this)
        "step_overhead_s": 0.2,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.8e-3,
        # torch DDP's 25 MB buckets of 16-bit gradients (--DDP-impl torch)
        "grad_bucket_params": 12.5e6,
        "grad_bucket_params_per_dp_rank": 0.0,  # a fixed bucket, whatever the DP size
        "zero_stages": (0,),  # no distributed optimizer in 2021 Megatron-LM
        "uneven_stages": False,  # layers must divide evenly (megatron/model/transformer.py, 2021)
        **MEGATRON_LM_LAYOUT,
    },
    "megatron-2022": {
        "flash_attention": False,  # Korthikanti 2022 times the unfused CoreAttention (Table 4)
        "tp_comm_overlap": True,  # Korthikanti 2022, Sec. 6.2
        "tp_comm_overlap_ub": False,
        "grad_accumulation_fusion": True,
        "persist_layer_norm": True,
        "p2p_overlap": False,
        # Korthikanti's runs are dp = 1 or report iteration time as such
        "overlap_grad_reduce": False,
        "overlap_param_gather": False,
        "bias_gemm_fusion": False,
        "fused_cross_entropy": False,
        "fp8_param_gather": False,
        "fp8_weight_cache": False,
        # no expert parallelism in Megatron-LM before Megatron-Core
        **NO_EXPERTS,
        "attention_backend": "fused",
        "pointwise_kernels": "fused",
        "torch_compile": False,
        "recompute_modules": ("core_attn",),
        "reduce_dtype": None,
        "reduce_every_microbatch": True,
        "zero2_gathers_per_microbatch": False,
        # fitted on Korthikanti 2022 Table 5 (benchmarks/calibrate_overheads.py --profile
        # megatron-2022)
        "step_overhead_s": 0.05,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,
        "grad_bucket_params": 12.5e6,
        "grad_bucket_params_per_dp_rank": 0.0,  # a fixed bucket, whatever the DP size
        "zero_stages": (0, 1),  # the distributed optimizer (ZeRO-1) landed in Megatron-LM in 2022
        "uneven_stages": False,
        **MEGATRON_LM_LAYOUT,
    },
    "megatron-core": {
        # TE DotProductAttention (flash / cuDNN fused) is the default backend
        "flash_attention": True,
        "tp_comm_overlap": True,  # async TP all-reduce / SP overlap in TE linear layers
        "tp_comm_overlap_ub": False,  # --tp-comm-overlap (userbuffers) is opt-in
        "grad_accumulation_fusion": True,  # --gradient-accumulation-fusion default on
        "persist_layer_norm": True,  # TE's fused layernorm kernels
        "p2p_overlap": True,  # --overlap-p2p-communication with the interleaved schedule
        "overlap_grad_reduce": True,  # distributed optimizer recipes set --overlap-grad-reduce
        "overlap_param_gather": True,  # ... and --overlap-param-gather
        "bias_gemm_fusion": True,  # TE Linear adds the bias in the GEMM epilogue
        # NeMo 2 / Megatron-Bridge recipes set cross_entropy_loss_fusion
        "fused_cross_entropy": True,
        "fp8_param_gather": False,  # --fp8-param-gather is opt-in
        # Megatron-Core calls TE layers with is_first_microbatch (set_is_first_microbatch each
        # step, megatron/training/training.py), so TE caches the FP8 weights and transposes
        "fp8_weight_cache": True,
        # TEGroupedMLP issues each local expert's GEMM from a host loop over the token counts
        # it synchronized for; fitted on the ten MoE runs (benchmarks/calibrate_overheads.py
        # --moe; without it, then fitted: mean |error| 17.9% -> 6.0%, leave-one-out 6.3%; with the
        # Hopper BF16 fraction it shares a ridge with, docs/validation.md), the 26.04 H100 runs at
        # their recipe's forced balance, Megatron-Core's MoE kernels priced: cost/moe_kernels.py)
        "expert_call_overhead_s": 40e-6,
        # Megatron-Core's MoE module at the commits the runs name (NVIDIA/Megatron-LM 2edffadb, the
        # Megatron-Bridge v0.4.2 submodule; 7094270, DGX Cloud's core_r0.12.0): the alltoall
        # dispatcher sorts the received tokens by local expert and back (token_dispatcher.py,
        # sort_chunks_by_idxs), TEGroupedMLP pads each expert's rows for FP8 (Transformer Engine's
        # Fp8Padding) and adds fc2's bias expert by expert in fp32 (experts.py, _apply_bias)
        "megatron_moe_kernels": True,
        # YaRN-scaled RoPE runs unfused, as PyTorch ops: Megatron-Core 0.12 refuses RoPE fusion for
        # MLA's YaRN (multi_latent_attention.py), NeMo's DeepSeekV3Config and Megatron-Bridge's
        # DeepSeekV3Bridge set apply_rope_fusion False, and Bridge turns it off for any position
        # embedding but plain RoPE (utils/fusions.py), gpt-oss's yarn included
        "yarn_rope_fused": False,
        # 16-bit tokens in every dispatcher (fused_a2a.py: max(element_size, 2) bytes), not searched
        "moe_fp8_dispatch": False,
        # NeMo 2 / Bridge recipes: alltoall (TransformerConfig's default: allgather), no overlap;
        # Megatron-Core runs all four dispatchers (flex: DeepEP or HybridEP) and the overlap
        "moe_token_dispatcher_type": "alltoall",
        "moe_a2a_overlap": False,
        "moe_dispatchers": ("alltoall", "allgather", "deepep", "hybridep"),
        "moe_a2a_overlaps": (False, True),
        "attention_backend": "fused",  # TE DotProductAttention: cuDNN fused attention on Hopper
        # TE's fused norms and SwiGLU, apply_rope_fusion in the NeMo 2 / Bridge recipes
        "pointwise_kernels": "fused",
        "torch_compile": False,
        "recompute_modules": ("core_attn",),  # --recompute-modules' default
        "reduce_dtype": None,  # grad_reduce_in_fp32 follows the gradient buffer
        "reduce_every_microbatch": True,  # Megatron-FSDP reduce-scatters every micro-batch
        "zero2_gathers_per_microbatch": False,
        # fitted on NeMo 24.07 FP8 and the MoE zoo's long-context runs, every grid point tried
        # (benchmarks/calibrate_overheads.py): none per step, per micro-batch or per chunk pass
        # once the NeMo runs' recipe knobs (userbuffers, BF16 gradient sync), Transformer Engine's
        # FP8 all-gathers and the Hopper FP8 fraction are modelled (the NeMo runs' leave-one-out
        # mean 5.6%); the 0.05 s and 0.5 ms shipped before absorbed what those now describe
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,
        # DistributedDataParallelConfig: max(40M, 1M x dp) parameters per bucket
        "grad_bucket_params": 40e6,
        # the bucket grows with the data-parallel ranks: the larger of 40M and this x dp
        "grad_bucket_params_per_dp_rank": 1e6,
        # distributed optimizer (ZeRO-1); Megatron-FSDP for ZeRO-3 (pp = 1)
        "zero_stages": (0, 1, 3),
        # --decoder-first/last-pipeline-num-layers, --pipeline-model-parallel-layout
        "uneven_stages": True,
        "context_parallel": True,
        # the K/V ring and Ulysses' all-to-all (--cp-comm-type; a2a+p2p and allgather unmodelled)
        "cp_comm_types": ("p2p", "a2a"),
        "schedules": ("1f1b", "interleaved"),
        "expert_parallel": True,
        "interleaved": True,
        "pipeline": True,
        "tensor_parallel": True,
        "default_microbatches": None,
        "sharded_pipeline": False,  # Megatron-FSDP has no pipeline parallelism
        "hsdp": False,
        # --cpu-offloading (TransformerConfig.cpu_offloading, Megatron-Core 0.4+); the older
        # Megatron-LMs, Megatron-DeepSpeed's activation path, torchtitan (2024-12) and FSDP1's
        # Composer have no activation offloading to the host
        "activation_offloading": True,
        # the memory-saving switches the search may turn on (engine/memory_switches.py):
        # OptimizerConfig's precision-aware optimizer (Megatron-Core 0.11+, Transformer Engine's
        # FusedAdam) and --fp8-param-gather, each with the distributed optimizer; and
        # --recompute-modules as Megatron-Bridge's MoE recipes set it (mla_up_proj, mlp, moe_act,
        # layernorm)
        "memory_switches": (
            "bf16-moments",
            "bf16-main-grads",
            "fp8-param-gather",
            "mla-up-proj",
            "mla-up-proj-mlp",
            "moe-act",
            "moe-act-layernorm",
            # TE FusedAdam's FP8 moments and FP16 master weights (the precision-aware optimizer)
            "fp8-moments",
            "fp16-main-params",
            # --optimizer-cpu-offload (HybridDeviceOptimizer, Megatron-Core 0.11+)
            "optimizer-cpu-offload",
            # --cpu-offloading --cpu-offloading-num-layers (megatron/core/cpu_offload.py), in
            # eighths of the layers, as Megatron-Bridge's Llama 3 70B GB200/GB300 recipes set it
            *ACTIVATION_OFFLOADS,
            # --fine-grained-activation-offloading --offload-modules (Megatron-Core, 2025-10 on:
            # megatron/core/pipeline_parallel/fine_grained_activation_offload.py)
            *MODULE_OFFLOADS,
        ),
        "recompute_regathers": True,
        "zero3_prefetch_params": None,  # one layer (unit) ahead
        "zero3_reduce_bucket_params": 0.0,  # each unit reduce-scatters on its own
    },
    **ZERO_PROFILES,  # deepspeed, fsdp, fsdp1 (specs/framework_zero.py)
}
PROFILES.update(extra_profiles(PROFILES))
for _profile in PROFILES.values():
    # a framework runs no memory switch the search may turn on unless its profile lists it
    _profile.setdefault("memory_switches", ())
for _name, _p in PROFILES.items():
    # the optimizer's sharding group as a knob (ZeRO-1 with dp_shard < dp): Megatron-Core's
    # --num-distributed-optimizer-instances (Megatron-Core 0.10+), InternEvo's zero1 size
    _p.setdefault("zero1_shard_group", _name in ("megatron-core", "megatron-rocm"))
    _p.setdefault("zero1_grad_reduce", "reduce-scatter")
    _p.setdefault("zero1_param_sync", "all-gather")
    # ZeRO-3 collectives one per weight tensor, and the host's per-rank loop of each (DeepSpeed's
    # ZeRO-3 of 2021: cost/sharded.py Sharding.per_tensor, rank_host_s); later frameworks gather a
    # unit's flat buffer in one collective
    _p.setdefault("zero3_per_tensor", False)
    _p.setdefault("collective_rank_host_s", 0.0)
    # the HBM passes of a list-based collective outside NCCL (cost/sharded.py ZERO3_HBM_PASSES)
    _p.setdefault("zero3_hbm_passes", False)
    # the host's time per kernel launch and CUDA graphs (cost/host.py); none unless fitted
    _p.setdefault("kernel_host_s", 0.0)
    _p.setdefault("cuda_graphs", False)
    # a cap on the gathered parameters a rank holds live, which stops the prefetch (DeepSpeed's
    # stage3_max_live_parameters; engine/blocks.py unprefetched_share); None: no cap
    _p.setdefault("zero3_max_live_params", None)
    # Transformer Engine writes an FP8 tensor's row-wise and column-wise (transposed) copies in one
    # cast (its quantize_transpose kernels); a profile that makes the transposed copy in a pass of
    # its own says so (hai-llm: DeepSeek-V3 report Sec. 3.3.4)
    _p.setdefault("fp8_transpose_pass", False)
    # how tp_comm_overlap_ub pipelines the TP collectives: Transformer Engine's userbuffers, or
    # torch's symmetric-memory ops (fused_all_gather_matmul, fused_matmul_reduce_scatter) that
    # Inductor's micro_pipeline_tp pass puts in under torchtitan's enable_async_tensor_parallel
    # (cost/layer_kernels.symm_mem_window, symm_mem_passes): the fsdp profile sets it
    _p.setdefault("tp_overlap_symm_mem", False)
    _p.setdefault("megatron_moe_kernels", False)
    _p.setdefault("yarn_rope_fused", True)
    # FSDP1's flat-parameter gradient, concatenated, cast and pre-divided every micro-batch
    # (cost/shapes.flat_gradient_bytes): the fsdp1 profile sets it
    _p.setdefault("flat_gradient_passes", False)
    # sequence parallelism and selective recompute (Korthikanti et al. 2022, arXiv 2205.05198)
    # came with Megatron-LM's 2022 release (--sequence-parallel, --recompute-granularity
    # selective, Megatron-LM v3.0); every later profile runs them (torchtitan: SequenceParallel
    # in its TP plan and per-op SAC), the 2021 ones do not
    _p.setdefault("sequence_parallelism", True)
    _p.setdefault("selective_recompute", True)
    # how expert parallelism folds into the ranks: Megatron-Core's any ep x etp dividing tp x cp x
    # dp (parallel folding), or torchtitan's etp = tp or 1 with ep taking all of cp (and of tp
    # at etp 1) and part of dp_shard (parallel_dims.py's _validate)
    _p.setdefault("ep_folding", "megatron")
for _name in ("megatron-2021", "deepspeed-2021"):
    # Megatron-LM of 2021 (Narayanan et al. 2021: full recompute only, --checkpoint-activations)
    # and DeepSpeed of 2021 (v0.3.16: ZeRO-3 and its own partitioned activation checkpointing,
    # no sequence parallelism) inside it
    PROFILES[_name]["sequence_parallelism"] = False
    PROFILES[_name]["selective_recompute"] = False

# what a profile adds beyond the flags: which ZeRO stages it runs, and whether stages may be uneven
FACTS = (
    "zero_stages",
    "uneven_stages",
    "context_parallel",
    "cp_comm_types",
    "schedules",
    "interleaved",
    "expert_parallel",
    "grad_bucket_params",
    "grad_bucket_params_per_dp_rank",
    "pipeline",
    "tensor_parallel",
    "default_microbatches",
    "sharded_pipeline",
    "hsdp",
    "activation_offloading",
    "memory_switches",
    "recompute_regathers",
    "zero3_prefetch_params",
    "zero3_reduce_bucket_params",
    # the memory model's (specs/framework_memory.py)
    "loss_logit_bytes",
    "fused_loss_logit_bytes",
    "params_are_master",
    "fp8_swiglu_cache",
    "fp8_transpose_pass",
    "tp_overlap_symm_mem",
    "megatron_moe_kernels",
    "yarn_rope_fused",
    "sp_gathered_head_input",
    "attn_out_cache_bytes",
    "zero1_shard_group",
    "zero1_grad_reduce",
    "zero1_param_sync",
    "zero3_per_tensor",
    "zero3_max_live_params",
    "zero3_hbm_passes",
    "flat_gradient_passes",
    "sequence_parallelism",
    "selective_recompute",
    "moe_dispatchers",
    "moe_a2a_overlaps",
    "ep_folding",
)


def defaults(framework: str) -> dict[str, Any]:
    """The behaviour-flag defaults of a profile (the flags only)."""
    return {k: v for k, v in PROFILES[framework].items() if k not in FACTS}


def _add_memory_facts() -> None:
    """Each profile's memory behaviour (specs/framework_memory.py), as facts of the profile."""
    from .framework_memory import MEMORY_FACTS

    for name, facts in MEMORY_FACTS.items():
        PROFILES[name].update(facts)


_add_memory_facts()
