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
from .framework_extra import extra_profiles

__all__ = ["FLAGS", "FRAMEWORKS", "FRAMEWORK_ALIASES", "PROFILES", "Framework", "defaults"]

Framework = Literal[
    "megatron-core",
    "megatron-2022",
    "megatron-2021",
    "deepspeed",
    "fsdp",
    "fsdp1",
    "hai-llm",
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
        "expert_call_overhead_s": 0.0,
        "moe_fp8_dispatch": False,
        # no expert parallelism in Megatron-LM before Megatron-Core
        "moe_token_dispatcher_type": "alltoall",
        "moe_a2a_overlap": False,
        "moe_dispatchers": (),
        "moe_a2a_overlaps": (False,),
        "attention_backend": "fused",  # no flash attention at all (flash_attention False)
        "pointwise_kernels": "fused",  # Megatron's fused kernels (bias-gelu, softmax, layernorm)
        "recompute_modules": ("core_attn",),  # Korthikanti 2022's selective recompute
        "torch_compile": False,
        "reduce_dtype": None,
        "reduce_every_microbatch": True,
        "zero2_gathers_per_microbatch": False,
        # fitted on Narayanan 2021 Table 1 (benchmarks/calibrate_overheads.py --profile
        # megatron-2021): the timers' torch.cuda.synchronize() and the Python schedule of 2021 cost
        # ~4 ms a micro-batch
        "step_overhead_s": 0.2,
        "microbatch_overhead_s": 4e-3,
        "hop_overhead_s": 0.0,
        # torch DDP's 25 MB buckets of 16-bit gradients (--DDP-impl torch)
        "grad_bucket_params": 12.5e6,
        "grad_bucket_params_per_dp_rank": 0.0,  # a fixed bucket, whatever the DP size
        "zero_stages": (0,),  # no distributed optimizer in 2021 Megatron-LM
        "uneven_stages": False,  # layers must divide evenly (megatron/model/transformer.py, 2021)
        "context_parallel": False,  # CP and EP came with Megatron-Core (2023)
        "cp_comm_types": (),
        # forward_backward_pipelining_with(out)_interleaving: 1F1B; Megatron has no GPipe schedule
        "schedules": ("1f1b", "interleaved"),
        "expert_parallel": False,
        "interleaved": True,  # interleaved 1F1B: Narayanan et al. 2021, Sec. 2.2.2
        "pipeline": True,
        "tensor_parallel": True,
        "default_microbatches": None,
        "sharded_pipeline": False,
        "hsdp": False,
        "recompute_regathers": True,
        "zero3_prefetch_params": None,  # one layer (unit) ahead
        "zero3_reduce_bucket_params": 0.0,  # each unit reduce-scatters on its own
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
        "expert_call_overhead_s": 0.0,
        "moe_fp8_dispatch": False,
        # no expert parallelism in Megatron-LM before Megatron-Core
        "moe_token_dispatcher_type": "alltoall",
        "moe_a2a_overlap": False,
        "moe_dispatchers": (),
        "moe_a2a_overlaps": (False,),
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
        "context_parallel": False,
        "cp_comm_types": (),
        # forward_backward_pipelining_with(out)_interleaving: 1F1B; Megatron has no GPipe schedule
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
        # --moe; mean |error| 15.8% -> 9.1%, leave-one-out 10.3%)
        "expert_call_overhead_s": 35e-6,
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
        # fitted on NeMo 24.07 FP8 and the MoE zoo's long-context runs, jointly with the H100's
        # FP8 GEMM fraction (benchmarks/calibrate_overheads.py): 50 ms a step, 0.5 ms a
        # micro-batch, nothing per chunk pass
        "step_overhead_s": 0.05,
        "microbatch_overhead_s": 0.5e-3,
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
        "recompute_regathers": True,
        "zero3_prefetch_params": None,  # one layer (unit) ahead
        "zero3_reduce_bucket_params": 0.0,  # each unit reduce-scatters on its own
    },
    "deepspeed": {
        # models run under ZeRO use FlashAttention-2 (transformers' attn_implementation)
        "flash_attention": True,
        "tp_comm_overlap": False,
        "tp_comm_overlap_ub": False,
        "grad_accumulation_fusion": False,
        "persist_layer_norm": True,
        "p2p_overlap": False,
        "overlap_grad_reduce": True,  # "overlap_comm": true in the ZeRO config
        "overlap_param_gather": True,  # ZeRO-3 prefetches parameters (stage3_prefetch_bucket_size)
        "bias_gemm_fusion": False,
        "fused_cross_entropy": False,
        "fp8_param_gather": False,
        "fp8_weight_cache": False,
        "expert_call_overhead_s": 0.0,
        "moe_fp8_dispatch": False,
        # DeepSpeed-MoE: one all-to-all dispatch (deepspeed/moe/sharded_moe.py), no overlap
        "moe_token_dispatcher_type": "alltoall",
        "moe_a2a_overlap": False,
        "moe_dispatchers": ("alltoall",),
        "moe_a2a_overlaps": (False,),
        # the FlashAttention-2 that Megatron-DeepSpeed and transformers call
        "attention_backend": "fa2",
        "pointwise_kernels": "fused",  # Megatron-DeepSpeed keeps Megatron's fused kernels
        "torch_compile": False,
        "recompute_modules": ("core_attn",),
        "reduce_dtype": None,  # communication_data_type: the gradients' dtype
        # stage 3 reduce-scatters every micro-batch; stage 2 keeps 16-bit parameters replicated
        # and all-gathers them once after the step (deepspeed/runtime/zero/stage_1_and_2.py)
        "reduce_every_microbatch": True,
        "zero2_gathers_per_microbatch": False,
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,  # no published runs to fit
        "grad_bucket_params": 5e8,  # reduce_bucket_size / allgather_bucket_size defaults (elements)
        "grad_bucket_params_per_dp_rank": 0.0,  # a fixed bucket, whatever the DP size
        # ZeRO-2/3 only without pipeline parallelism (PipelineEngine asserts
        # zero_optimization_stage < 2)
        "zero_stages": (0, 1, 2, 3),
        # PipelineModule partition_method="parameters" balances unequal stages
        "uneven_stages": True,
        "context_parallel": True,  # DeepSpeed-Ulysses sequence parallelism (all-to-all)
        "cp_comm_types": ("a2a",),  # Ulysses only: no ring attention in Megatron-DeepSpeed
        "schedules": ("1f1b",),  # PipelineEngine's TrainSchedule: one forward, one backward
        "expert_parallel": True,  # DeepSpeed-MoE expert parallelism
        "interleaved": False,  # PipelineEngine: TrainSchedule only, one chunk per stage
        "pipeline": True,
        "tensor_parallel": True,
        "default_microbatches": None,
        "sharded_pipeline": False,  # PipelineEngine asserts zero_optimization_stage < 2
        "hsdp": False,  # ZeRO++'s hpZ is not modelled
        # ZeRO-3 as DeepSpeed runs it (DeepSpeed config docs, zero_optimization defaults):
        # stage3_prefetch_bucket_size 5e7 parameters gathered ahead of the layer computing;
        # reduce_bucket_size 5e8 gradients per reduce-scatter; stage3_param_persistence_threshold
        # 1e5 keeps smaller tensors (norm gains, biases: < 0.01% of a model's parameters here)
        # replicated, below this model's resolution
        "zero3_prefetch_params": 5e7,
        "zero3_reduce_bucket_params": 5e8,
        # activation checkpointing's recompute forward fetches the released parameters again
        "recompute_regathers": True,
    },
    "fsdp": {
        # torchtitan calls F.scaled_dot_product_attention, whose flash backend is FlashAttention-2
        # (aten/src/ATen/native/transformers/cuda/flash_attn); cuDNN attention was opt-in in 2024
        "flash_attention": True,
        "attention_backend": "fa2",
        # torchtitan's Llama in eager mode: nn.RMSNorm (a composite op in PyTorch 2.5), F.silu
        # times w3, RoPE as a complex multiply in fp32 (torchtitan/models/llama/model.py)
        "pointwise_kernels": "eager",
        "torch_compile": False,  # --training.compile is opt-in
        "recompute_modules": ("op_sac",),  # selective_ac_option "op", the 8B toml's default
        # DTensor TP's collectives run in order on the compute stream; async TP (micro-pipelined
        # all-gather/reduce-scatter matmuls, torch._inductor's micro_pipeline_tp) is opt-in
        # (--parallelism.enable_async_tensor_parallel): set tp_comm_overlap_ub for it
        "tp_comm_overlap": False,
        "tp_comm_overlap_ub": False,
        # each micro-batch's gradients are reduce-scattered into the sharded fp32 gradient: no
        # separate unsharded accumulation pass
        "grad_accumulation_fusion": True,
        "persist_layer_norm": True,  # ATen's layer/RMS norm backward is one kernel
        "p2p_overlap": True,  # torch.distributed.pipelining posts batch_isend_irecv
        "overlap_grad_reduce": True,  # reduce-scatter on its own stream, per FSDP unit
        "overlap_param_gather": True,  # the next unit's all-gather runs ahead (implicit prefetch)
        # PyTorch 2.x at::linear folds a contiguous 3-D input into addmm: the bias rides the GEMM
        "bias_gemm_fusion": True,
        # torchtitan's cross_entropy_loss casts the logits to fp32 before F.cross_entropy
        "fused_cross_entropy": False,
        # torchao's enable_fsdp_float8_all_gather is off by default (torchtitan float8 config)
        "fp8_param_gather": False,
        "fp8_weight_cache": False,
        "expert_call_overhead_s": 0.0,
        "moe_fp8_dispatch": False,
        # no expert parallelism in the 2024-12 torchtitan
        "moe_token_dispatcher_type": "alltoall",
        "moe_a2a_overlap": False,
        "moe_dispatchers": (),
        "moe_a2a_overlaps": (False,),
        # MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): torchtitan's
        # training.mixed_precision_reduce default is float32
        "reduce_dtype": "fp32",
        # gradient accumulation keeps requires_gradient_sync on: every micro-batch reduce-scatters
        "reduce_every_microbatch": True,
        # fully_shard(reshard_after_forward=False) keeps the gathered parameters to the backward
        "zero2_gathers_per_microbatch": True,
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,
        "grad_bucket_params": 0.0,  # no buckets: one reduce-scatter per FSDP unit (layer)
        "grad_bucket_params_per_dp_rank": 0.0,  # a fixed bucket, whatever the DP size
        # NO_SHARD is DDP (dp_shard 1); reshard_after_forward False is SHARD_GRAD_OP (ZeRO-2)
        "zero_stages": (0, 2, 3),
        # pipeline_parallel_split_points / the layers-per-stage split may be uneven
        "uneven_stages": True,
        # context_parallel(): ring attention over the cp mesh, K/V passed round the ring
        "context_parallel": True,
        "cp_comm_types": ("p2p",),
        # torch.distributed.pipelining as torchtitan's pipeline_parallel_schedule names them
        # (get_schedule_class): Schedule1F1B, ScheduleInterleaved1F1B, and in the 2025 releases
        # ScheduleZBVZeroBubble (ZB-V) and ScheduleDualPipeV (without DualPipe's F&B overlap of
        # an expert all-to-all, which needs the model's own overlapped_forward_backward)
        # (torchtitan's default micro-batch count is the stage count)
        "schedules": ("1f1b", "interleaved", "zbv", "dualpipev"),
        "expert_parallel": False,  # not in the 2024-12 torchtitan this profile describes
        "interleaved": True,
        "pipeline": True,
        "tensor_parallel": True,
        "default_microbatches": "pp",  # torchtitan: n_microbatches defaults to the pp degree
        "sharded_pipeline": True,  # FSDP + PP: the 405B run of the benchmark notes
        "hsdp": True,  # dp_replicate x dp_shard (torchtitan ParallelDims)
        # the checkpoint wrapper sits inside the FSDP unit: the backward's unshard serves the
        # recompute too
        "recompute_regathers": False,
        # FSDP2's implicit prefetch and FSDP1's limit_all_gathers: one unit ahead; each unit
        # reduce-scatters its own gradients
        "zero3_prefetch_params": None,
        "zero3_reduce_bucket_params": 0.0,
    },
    "fsdp1": {
        # llm-foundry's MPT runs flash-attn 2 or its triton kernel (attn_impl flash / triton)
        "flash_attention": True,
        "attention_backend": "fa2",
        # MPT in PyTorch eager mode: F.layer_norm and F.gelu are one ATen kernel each
        "pointwise_kernels": "eager",
        "torch_compile": False,
        "recompute_modules": ("core_attn",),  # llm-foundry runs full or no checkpointing
        "tp_comm_overlap": False,
        "tp_comm_overlap_ub": False,
        "grad_accumulation_fusion": True,  # every micro-batch reduce-scatters (see below)
        "persist_layer_norm": True,
        "p2p_overlap": False,
        "overlap_grad_reduce": True,  # post-backward reduce-scatter on FSDP's own stream
        # forward_prefetch and BACKWARD_PRE, limit_all_gathers: at most two units gathered
        "overlap_param_gather": True,
        "bias_gemm_fusion": True,  # at::linear: addmm with the bias in the epilogue
        "fused_cross_entropy": False,
        "fp8_param_gather": False,
        "fp8_weight_cache": False,
        "expert_call_overhead_s": 0.0,
        "moe_fp8_dispatch": False,
        # no expert parallelism
        "moe_token_dispatcher_type": "alltoall",
        "moe_a2a_overlap": False,
        "moe_dispatchers": (),
        "moe_a2a_overlaps": (False,),
        # Composer's FSDP mixed_precision DEFAULT: reduce_dtype fp32 (PURE: bf16)
        "reduce_dtype": "fp32",
        # composer/distributed/dist_strategy.py ddp_sync_context returns at once for a model that
        # is not DDP: under FSDP every micro-batch reduce-scatters
        "reduce_every_microbatch": True,
        "zero2_gathers_per_microbatch": True,  # SHARD_GRAD_OP frees after the backward
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,
        "grad_bucket_params": 0.0,  # one flat parameter per FSDP unit (an MPT block)
        "grad_bucket_params_per_dp_rank": 0.0,  # a fixed bucket, whatever the DP size
        "zero_stages": (0, 2, 3),  # NO_SHARD, SHARD_GRAD_OP, FULL_SHARD (and HYBRID_SHARD)
        "uneven_stages": False,
        "context_parallel": False,
        "cp_comm_types": (),
        "schedules": (),
        "expert_parallel": False,
        "interleaved": False,
        "pipeline": False,  # Composer has no pipeline parallelism
        "tensor_parallel": False,  # the llm-foundry runs of this profile: FSDP only
        "default_microbatches": None,
        "sharded_pipeline": False,
        "hsdp": True,  # HYBRID_SHARD
        "recompute_regathers": False,  # checkpoint_wrapper inside each FSDP unit
        "zero3_prefetch_params": None,
        "zero3_reduce_bucket_params": 0.0,
    },
}
PROFILES.update(extra_profiles(PROFILES))
for _name, _p in PROFILES.items():
    # the optimizer's sharding group as a knob (ZeRO-1 with dp_shard < dp): Megatron-Core's
    # --num-distributed-optimizer-instances (Megatron-Core 0.10+), InternEvo's zero1 size
    _p.setdefault("zero1_shard_group", _name in ("megatron-core", "megatron-rocm"))
    _p.setdefault("zero1_grad_reduce", "reduce-scatter")
    _p.setdefault("zero1_param_sync", "all-gather")

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
    "recompute_regathers",
    "zero3_prefetch_params",
    "zero3_reduce_bucket_params",
    # the memory model's (specs/framework_memory.py)
    "loss_logit_bytes",
    "params_are_master",
    "fp8_swiglu_cache",
    "sp_gathered_head_input",
    "zero1_shard_group",
    "zero1_grad_reduce",
    "zero1_param_sync",
    "moe_dispatchers",
    "moe_a2a_overlaps",
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
