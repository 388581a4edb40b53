"""Framework profiles: named bundles of defaults for the behaviour flags (STYLE.md "Framework
behaviour as data"). Formulas read the flags, never the profile's name; a plan may set any flag
itself, and what the profile supplied is reported as assumed.

Each flag's value cites where it comes from. Profiles:
- megatron-2021: Megatron-LM as in Narayanan et al. 2021 (SC21; the artifact's run_table_1.sh).
- megatron-2022: Megatron-LM as in Korthikanti et al. 2022 (the SP + selective recompute paper).
- megatron-core: Megatron-Core with Transformer Engine as NeMo 2 / Megatron-Bridge recipes run it
  (2025-2026), the default.
- deepspeed: DeepSpeed ZeRO with its pipeline engine (Rajbhandari et al. 2020; DeepSpeed docs).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

Framework = Literal["megatron-core", "megatron-2022", "megatron-2021", "deepspeed"]
FRAMEWORKS: tuple[str, ...] = get_args(Framework)

# flag -> what it means (shown by `perfmodel presets frameworks`)
FLAGS = {
    "flash_attention": "fused attention kernel (flash / cuDNN); no s x s tensor in HBM",
    "tp_comm_overlap": (
        "asynchronous TP all-reduce: the backward collective hides behind the weight gradient"
    ),
    "tp_comm_overlap_ub": (
        "every TP collective overlapped with its GEMM (Transformer Engine userbuffers)"
    ),
    "grad_accumulation_fusion": (
        "weight-gradient GEMMs accumulate into the gradient buffer (no extra pass)"
    ),
    "persist_layer_norm": "single-pass layernorm backward",
    "p2p_overlap": "pipeline sends overlap compute",
    "overlap_grad_reduce": "gradient reduction overlaps the last micro-batch's backward (bucketed)",
    "overlap_param_gather": (
        "distributed optimizer's parameter all-gather overlaps the next forward"
    ),
    "bias_gemm_fusion": "biases added in the GEMM epilogue, not in a separate kernel",
    "fused_cross_entropy": "vocab-parallel cross-entropy in one fused kernel on 16-bit logits",
    "fp8_param_gather": (
        "FP8 weights cast once per step (with the parameter all-gather), not per micro-batch"
    ),
    "step_overhead_s": "fixed time per optimizer step outside the model (s, fitted)",
    "microbatch_overhead_s": "fixed host time per micro-batch on the critical path (s, fitted)",
    "hop_overhead_s": "fixed time per pipeline chunk pass, forward or backward (s, fitted)",
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
        # fitted on Narayanan 2021 Table 1 (benchmarks/calibrate_overheads.py --profile
        # megatron-2021): the timers' torch.cuda.synchronize() and the Python schedule of 2021 cost
        # ~4 ms a micro-batch
        "step_overhead_s": 0.2,
        "microbatch_overhead_s": 4e-3,
        "hop_overhead_s": 0.0,
        # torch DDP's 25 MB buckets of 16-bit gradients (--DDP-impl torch)
        "grad_bucket_params": 12.5e6,
        "zero_stages": (0,),  # no distributed optimizer in 2021 Megatron-LM
        "uneven_stages": False,  # layers must divide evenly (megatron/model/transformer.py, 2021)
        "context_parallel": False,  # CP and EP came with Megatron-Core (2023)
        "cp_comm_types": (),
        # forward_backward_pipelining_with(out)_interleaving: 1F1B; Megatron has no GPipe schedule
        "schedules": ("1f1b", "interleaved"),
        "expert_parallel": False,
        "interleaved": True,  # interleaved 1F1B: Narayanan et al. 2021, Sec. 2.2.2
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
        # fitted on Korthikanti 2022 Table 5 (benchmarks/calibrate_overheads.py --profile
        # megatron-2022)
        "step_overhead_s": 0.05,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,
        "grad_bucket_params": 12.5e6,
        "zero_stages": (0, 1),  # the distributed optimizer (ZeRO-1) landed in Megatron-LM in 2022
        "uneven_stages": False,
        "context_parallel": False,
        "cp_comm_types": (),
        # forward_backward_pipelining_with(out)_interleaving: 1F1B; Megatron has no GPipe schedule
        "schedules": ("1f1b", "interleaved"),
        "expert_parallel": False,
        "interleaved": True,
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
        # fitted on NeMo 24.07 FP8 and the MoE zoo's long-context runs: no fixed overhead improves
        # them
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,
        # DistributedDataParallelConfig: max(40M, 1M x dp) parameters per bucket
        "grad_bucket_params": 40e6,
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
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,  # no published runs to fit
        "grad_bucket_params": 5e8,  # reduce_bucket_size / allgather_bucket_size defaults (elements)
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
    },
}
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
)


def defaults(framework: str) -> dict[str, Any]:
    """The behaviour-flag defaults of a profile (the flags only)."""
    return {k: v for k, v in PROFILES[framework].items() if k not in FACTS}
