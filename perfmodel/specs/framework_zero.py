"""The ZeRO/FSDP framework profiles (specs/framework.py merges them, in this order, after
megatron-core): DeepSpeed as Megatron-DeepSpeed ran it, PyTorch FSDP2 as torchtitan runs it
(fsdp) and FSDP1 as Composer/llm-foundry run it (fsdp1). Each flag's value cites its source."""

from __future__ import annotations

from typing import Any

from .framework_common import NO_EXPERTS, ONE_ALLTOALL

ZERO_PROFILES: dict[str, dict[str, Any]] = {
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
        **ONE_ALLTOALL,  # DeepSpeed-MoE: one all-to-all dispatch, no overlap
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
        # the host's time to issue each kernel of the op list in eager PyTorch (cost/host.py: a
        # pass waits for what that takes beyond its GPU work), fitted on vTrain's 1,440 single-node
        # Megatron-DeepSpeed runs (benchmarks/calibrate_host.py): mean |error| 29.5% -> 7.9%,
        # refitted without each GPU count 7.9%, without each hidden size 8.3%; layout pairs
        # ordered right 73.9% -> 91.1%. A listed kernel stands for several eager PyTorch ops and
        # their autograd nodes (bias adds, views, the checkpointing's RNG state), hence tens of us
        "kernel_host_s": 58e-6,
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
        "tp_overlap_symm_mem": True,  # that opt-in async TP is torch's symmetric-memory one
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
        **ONE_ALLTOALL,  # torchtitan's MoE (ExpertParallel): one all-to-all, no overlap
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
        # an expert all-to-all, which needs the model's own overlapped_forward_backward), and
        # ScheduleInterleavedZeroBubble ("InterleavedZeroBubble" in get_schedule_class: the
        # ZB1P schedule over looped chunks; torch/distributed/pipelining/schedules.py, pytorch
        # commit 00722e64) (torchtitan's default micro-batch count is the stage count)
        "schedules": ("1f1b", "interleaved", "zbv", "dualpipev", "interleaved-zb"),
        # torchtitan's MoE (2025: torchtitan/distributed/expert_parallel.py, ExpertParallel's
        # all_to_all_single dispatch; parallel_dims.py at commit 0119de15): the routed experts
        # split over ep ranks, with etp = tp or 1, their states sharded by FSDP over the rest
        # ("dp_shard_in_ep", engine/framework_rules.py's PM110 and engine/mesh.expert_shard)
        "expert_parallel": True,
        "ep_folding": "torchtitan",
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
        # llm-foundry's MPT defaults to loss_fn fused_crossentropy (llmfoundry/models/mpt/
        # modeling_mpt.py, v0.3.0 and 2024-01): flash-attn's CrossEntropyLoss, one kernel that reads
        # the 16-bit logits forward and writes their gradient backward (the xentropy extension of
        # its [gpu] extra, flash-attn 2's Triton kernel in [gpu-flash2]); it raises rather than
        # fall back when missing, so the benchmark runs ran it (framework_memory.py says the same)
        "fused_cross_entropy": True,
        "fp8_param_gather": False,
        "fp8_weight_cache": False,
        # no expert parallelism
        **NO_EXPERTS,
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
        # FullyShardedDataParallel's flat parameter: every micro-batch each unit's gradient is
        # concatenated from its parameters' views, cast to the reduce dtype and pre-divided before
        # the reduce-scatter (PyTorch 2.1 torch/distributed/fsdp; cost/shapes.flat_gradient_bytes)
        "flat_gradient_passes": True,
    },
}
