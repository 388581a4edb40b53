"""The behaviour flags a framework profile sets (perfmodel/specs/framework.py), each with what it
means, as `perfmodel presets frameworks` shows them."""

# flag -> what it means (shown by `perfmodel presets frameworks`)
FLAGS = {
    "flash_attention": "fused attention kernel (flash / cuDNN); no s x s tensor in HBM",
    "tp_comm_overlap": (
        "asynchronous TP all-reduce: the backward collective hides behind the weight gradient"
    ),
    "tp_comm_overlap_ub": (
        "every TP collective overlapped with its GEMM (Transformer Engine userbuffers;"
        " torchtitan's enable_async_tensor_parallel: torch's micro-pipelined all-gather-matmul"
        " and matmul-reduce-scatter)"
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
    "expert_call_overhead_s": (
        "host time per local expert of each grouped expert GEMM pass on the critical path (s,"
        " fitted)"
    ),
    "fp8_weight_cache": (
        "the low-precision weights cast on a step's first micro-batch and reused by the rest"
        " (Transformer Engine's is_first_microbatch)"
    ),
    "attention_backend": (
        "fused: the GPU's own fused attention (cuDNN, FA3 on Hopper); fa2: FlashAttention-2"
        " (PyTorch SDPA flash, flash-attn 2); triton: flash-attn's Triton kernel"
    ),
    "reduce_dtype": "dtype of the gradient reduction (None: the gradient buffer's)",
    "pointwise_kernels": (
        "fused: the framework's hand-fused norm, activation and RoPE kernels; eager: PyTorch's"
        " own ops, one kernel each"
    ),
    "torch_compile": "Inductor fuses each chain of pointwise and norm kernels between GEMMs",
    "recompute_modules": "what selective recompute repeats (core_attn; op_sac: torchtitan's)",
    "reduce_every_microbatch": (
        "ZeRO-2/3: gradients reduce-scattered after every micro-batch (no no_sync)"
    ),
    "zero2_gathers_per_microbatch": (
        "ZeRO-2 keeps parameters sharded and gathers them every micro-batch (FSDP SHARD_GRAD_OP)"
    ),
    "step_overhead_s": "fixed time per optimizer step outside the model (s, fitted)",
    "kernel_host_s": (
        "host time to issue one kernel in eager mode (Python, autograd, launch); a pass waits"
        " for what its kernels' issue takes beyond the GPU's work (s, fitted)"
    ),
    "cuda_graphs": "CUDA graphs replay each layer's kernels: no host time per kernel",
    "collective_rank_host_s": (
        "host time per rank of the group for each ZeRO-3 collective, on the critical path: the"
        " per-rank loop of a list-based all-gather or reduce-scatter (s, counted from the"
        " framework's code; 0: flat buffers)"
    ),
    "microbatch_overhead_s": "fixed host time per micro-batch on the critical path (s, fitted)",
    "hop_overhead_s": "fixed time per pipeline chunk pass, forward or backward (s, fitted)",
    "moe_fp8_dispatch": (
        "under FP8, the tokens cross to their experts in FP8 with a scale per 128 elements (the"
        " forward dispatch and its gradient's way back); the combines stay BF16"
    ),
    "moe_token_dispatcher_type": (
        "how tokens reach their experts: alltoall, allgather, deepep or hybridep (each token"
        " crosses to a node once); `plan` picks the fastest the profile runs unless a plan sets it"
    ),
    "moe_a2a_overlap": (
        "the expert all-to-alls of one micro-batch under another's compute (Megatron-Core's"
        " combined 1F1B); `plan` turns it on where it runs and helps unless the plan sets it"
    ),
}

__all__ = ["FLAGS"]
