"""The memory behaviour of each framework profile (issue 29): facts the memory model reads
(engine/memory.py, cost/memory.py), merged into PROFILES by specs/framework.py. Each value cites
the code or paper it comes from.

- loss_logit_bytes: bytes per logit element the loss holds at its peak (times s b V / t);
- fused_loss_logit_bytes: the same for the fused loss (training.fused_cross_entropy),
  Megatron-Core's native kernel or a compiled one (cross_entropy_fusion_impl te: 2 B,
  engine/memory.py);
- params_are_master: the sharded parameter is the fp32 one the optimizer steps (no 16-bit copy
  of the shard);
- fp8_swiglu_cache: under FP8 the experts' SwiGLU input is cached in FP8 and its output
  recomputed;
- sp_gathered_head_input: with TP + SP the output layer saves its input gathered (2 s b h), not
  sequence-sharded (2 s b h / t);
- attn_out_cache_bytes: under a low-precision format, bytes an element of the attention output
  cached once for the core's backward and the output projection (0: 16 bits and the projection's
  own quantized copy).
"""

from __future__ import annotations

from typing import Any

MEGATRON: dict[str, Any] = {
    # the fp32 logits of the vocab-parallel cross-entropy, softmax computed in place (Korthikanti
    # 2022 Sec. 4.1: 4 s b V / t; megatron/core/tensor_parallel/cross_entropy.py)
    "loss_logit_bytes": 4.0,
    # fused (--cross-entropy-loss-fusion, the native implementation): its forward casts the logits
    # to fp32 and saves the fp32 exp_logits for the backward (megatron/core/fusions/
    # fused_cross_entropy.py; calculate_logits_max in tensor_parallel/cross_entropy.py)
    "fused_loss_logit_bytes": 4.0,
    # a 16-bit copy of the weights beside the fp32 master (ZeRO paper Sec. 3.1; Megatron's
    # distributed optimizer keeps the model's bf16 params and shards the fp32 master)
    "params_are_master": False,
    "fp8_swiglu_cache": False,
    # with SP the output layer saves its sequence-sharded input and gathers it again for the
    # backward (LinearWithGradAccumulationAndAsyncCommunication, sequence_parallel)
    "sp_gathered_head_input": False,
    "attn_out_cache_bytes": 0.0,
}

MEMORY_FACTS: dict[str, dict[str, Any]] = {
    "megatron-2021": MEGATRON,
    "megatron-2022": MEGATRON,
    "megatron-core": MEGATRON,
    "deepspeed": MEGATRON,
    "deepspeed-2021": MEGATRON,  # Megatron-LM's 2021 loss and layers
    "fsdp": {
        # F.cross_entropy on the fp32 copy of the 16-bit logits (torchtitan/components/loss.py
        # cross_entropy_loss: pred.flatten(0, 1).float()); the 2024-12 torchtitan compiles the
        # blocks, not the loss: in the backward the saved fp32 log_softmax output, nll_loss's dense
        # fp32 gradient and log_softmax's fp32 gradient are alive together, 3 x 4 bytes (ATen
        # _log_softmax_backward_data)
        "loss_logit_bytes": 12.0,
        # torch.compile'd (torchtitan compiles the loss with training.compile since 2025:
        # components/loss.py build_cross_entropy_loss at e7c0cae): AOTAutograd's min-cut
        # partitioner saves the 16-bit logits and a per-row fp32 log-sum-exp and recomputes the
        # softmax in the backward, which writes a 16-bit gradient: 2 + 2 bytes a logit
        "fused_loss_logit_bytes": 4.0,
        # fully_shard with MixedPrecisionPolicy: the sharded parameter is fp32 and the optimizer
        # steps it; the bf16 weights exist only in the gathered units
        "params_are_master": True,
        "fp8_swiglu_cache": False,
        # DTensor's ColwiseParallel(input_layouts=Shard(1)) on the output layer redistributes its
        # input to Replicate before F.linear, which saves it gathered (torchtitan
        # parallelize_llama)
        "sp_gathered_head_input": True,
        "attn_out_cache_bytes": 0.0,
    },
    "fsdp1": {
        # llm-foundry's MPT defaults to loss_fn fused_crossentropy: flash-attn's Triton
        # CrossEntropyLoss (flash_attn/losses/cross_entropy.py) reads the 16-bit logits, keeps an
        # fp32 log-sum-exp per row and writes a 16-bit gradient: 2 + 2 bytes a logit
        "loss_logit_bytes": 4.0,
        "fused_loss_logit_bytes": 4.0,  # the same flash-attn kernel
        # FullyShardedDataParallel's flat_param shard is fp32 under MixedPrecision
        "params_are_master": True,
        "fp8_swiglu_cache": False,
        "sp_gathered_head_input": False,  # llm-foundry runs no tensor parallelism
        "attn_out_cache_bytes": 0.0,
    },
    "hai-llm": {
        **MEGATRON,
        # DeepSeek-V3 report Sec. 3.3.2, "Low-precision storage": under FP8 the inputs of the MoE
        # SwiGLU are cached in FP8 with the fine-grained (1 x 128) scales, and its output is
        # recomputed in the backward
        "fp8_swiglu_cache": True,
        # Sec. 3.3.3, "Low-Precision Activations" (1): the input of the Linear after attention,
        # which the attention backward also reads, cached once in E5M6 (12 bits an element)
        "attn_out_cache_bytes": 1.5,
    },
    # Megatron-LM's loss and layers on ROCm (Primus, AMD's MLPerf runs) and InternEvo's fused
    # flash-attn cross-entropy (4 bytes a logit, as Megatron's): Megatron's memory behaviour
    "primus": MEGATRON,
    "megatron-rocm": MEGATRON,
    "internevo": MEGATRON,
}
MEMORY_FACTS["torchtitan-rocm"] = MEMORY_FACTS["fsdp"]  # torchtitan's own code, on ROCm
MEMORY_KEYS = tuple(MEGATRON)
