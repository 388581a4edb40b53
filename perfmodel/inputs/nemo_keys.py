"""The keys of NeMo recipes as data: which model, parallel and training field each sets, which have
no effect on the cost, which turn on what perfmodel cannot model, and the type OmegaConf reads each
as (NeMo reads recipes through OmegaConf: examples/nlp/language_modeling/conf, Megatron-Bridge's
dataclass configs)."""

from __future__ import annotations

from typing import Any

from perfmodel.errors import PerfModelError

MODEL_KEYS = {  # recipe key -> Model field
    "num_layers": "num_layers",
    "hidden_size": "hidden_size",
    "ffn_hidden_size": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads",
    "num_query_groups": "num_query_groups",
    "kv_channels": "kv_channels",
    "encoder_seq_length": "seq_length",
    "seq_length": "seq_length",
    "vocab_size": "vocab_size",
    "num_moe_experts": "num_moe_experts",
    "moe_router_topk": "moe_router_topk",
    "moe_ffn_hidden_size": "moe_ffn_hidden_size",
    "qk_layernorm": "qk_layernorm",
    "moe_shared_expert_intermediate_size": "moe_shared_expert_intermediate_size",
    "mtp_num_layers": "mtp_num_layers",
    "moe_router_num_groups": "moe_router_num_groups",
    "moe_router_group_topk": "moe_router_group_topk",
}


PARALLEL_KEYS = {
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "virtual_pipeline_model_parallel_size": "vp",
    "expert_model_parallel_size": "ep",
    "expert_tensor_parallel_size": "etp",
    "micro_batch_size": "micro_batch_size",
    "sequence_parallel": "sequence_parallel",
}


TRAINING_KEYS = {
    "global_batch_size": "global_batch_size",
    "use_flash_attention": "flash_attention",
    # userbuffers' TP/GEMM overlap; the asynchronous TP all-reduce (tp_comm_overlap) is its own key
    "ub_tp_comm_overlap": "tp_comm_overlap_ub",
    "tp_comm_overlap": "tp_comm_overlap",
    "overlap_grad_reduce": "overlap_grad_reduce",
    "overlap_param_gather": "overlap_param_gather",
    "persist_layer_norm": "persist_layer_norm",
    "gradient_accumulation_fusion": "grad_accumulation_fusion",
}


READ_ELSEWHERE = {
    "cp_comm_type",
    "normalization",
    "bias",
    "add_bias_linear",
    "activation",
    "activation_func",
    "gated_linear_unit",
    "position_embedding_type",
    "share_embeddings_and_output_weights",
    "hidden_dropout",
    "attention_dropout",
    "ffn_dropout",
    "activations_checkpoint_granularity",
    "recompute_granularity",
    "activations_checkpoint_method",
    "recompute_method",
    "activations_checkpoint_num_layers",
    "recompute_num_layers",
    "fp8",
    "fp8_e4m3",
    "fp8_hybrid",
    "fp8_recipe",
    "recompute_modules",
    "cpu_offloading",
    "cpu_offloading_num_layers",
    "fine_grained_activation_offloading",
    "offload_modules",
    "optim",
    "max_position_embeddings",
    "use_distributed_optimizer",
    "bf16",
    "fp16",
    "params_dtype",
}


NO_COST = {
    "mcore_gpt",
    "init_method_std",
    "use_scaled_init_method",
    "apply_query_key_layer_scaling",
    "layernorm_epsilon",
    "do_layer_norm_weight_decay",
    "make_vocab_size_divisible_by",
    "pre_process",
    "post_process",
    "openai_gelu",
    "normalize_attention_scores",
    "rotary_percentage",
    "rotary_base",
    "attention_type",
    "batch_p2p_comm",
    "overlap_p2p_comm",
    "tokenizer",
    "native_amp_init_scale",
    "native_amp_growth_interval",
    "hysteresis",
    "fp16_lm_cross_entropy",
    "megatron_amp_O2",
    "grad_allreduce_chunk_size_mb",
    "grad_div_ar_fusion",
    "bias_activation_fusion",
    "bias_dropout_add_fusion",
    "masked_softmax_fusion",
    "get_attention_mask_from_fusion",
    "seed",
    "resume_from_checkpoint",
    "use_cpu_initialization",
    "onnx_safe",
    "apex_transformer_log_level",
    "gradient_as_bucket_view",
    "sync_batch_comm",
    "transformer_engine",
    "fp8_margin",
    "fp8_interval",
    "fp8_amax_history_len",
    "fp8_amax_compute_algo",
    "reduce_amax",
    "use_emha",
    "data",
    "nsys_profile",
    "headscale",
    "transformer_block_type",
    "moe_router_load_balancing_type",
    "moe_aux_loss_coeff",
    "moe_z_loss_coeff",
    "num_micro_batches_with_partial_activation_checkpoints",
    "activations_checkpoint_layers_per_pipeline",
    "fp32_residual_connection",
}


CANNOT = {  # key -> what it turns on (refused when its value is set and not false)
    "num_micro_batches_with_partial_activation_checkpoints": "partial activation checkpointing",
    "activations_checkpoint_layers_per_pipeline": "per-stage activation checkpointing",
    "headscale": "head scaling",
    "fp32_residual_connection": "fp32 residual connections",
}


SECTIONS_NO_COST = (
    "exp_manager",
    "logger",
    "checkpoint",
    "scheduler",
    "rng",
    "dataset",
    "tokenizer",
    "profiling",
    "logging",
    "comm_overlap",
    "rerun_state_machine",
    "ft",
    "straggler",
    "inprocess_restart",
    "nvrx_straggler",
    "mixed_precision_ignored",
)

BOOL_KEYS = {
    "sequence_parallel",
    "use_flash_attention",
    "ub_tp_comm_overlap",
    "tp_comm_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "persist_layer_norm",
    "gradient_accumulation_fusion",
    "qk_layernorm",
    "bias",
    "add_bias_linear",
    "gated_linear_unit",
    "share_embeddings_and_output_weights",
    "bf16",
    "fp16",
    "use_distributed_optimizer",
    "cpu_offloading",
    "fine_grained_activation_offloading",
    "fp32_residual_connection",
    "headscale",
    "mcore_gpt",
    "megatron_amp_O2",
    "transformer_engine",
    "grad_reduce_in_fp32",
    "average_in_collective",
    "use_precision_aware_optimizer",
    "use_megatron_fsdp",
}
INT_KEYS = {
    *[k for k in MODEL_KEYS if k != "qk_layernorm"],
    *PARALLEL_KEYS,
    "global_batch_size",
    "activations_checkpoint_num_layers",
    "recompute_num_layers",
    "mtp_num_layers",
    "cpu_offloading_num_layers",
} - {"sequence_parallel"}
FLOAT_KEYS = {"hidden_dropout", "attention_dropout", "ffn_dropout"}
CHOICES = {  # the values NeMo and Megatron-Core accept
    "activations_checkpoint_method": ("uniform", "block"),
    "recompute_method": ("uniform", "block"),
    "activations_checkpoint_granularity": ("full", "selective"),
    "recompute_granularity": ("full", "selective"),
    "fp8_recipe": ("tensorwise", "delayed", "mxfp8", "blockwise"),
}
TRAINER_KEYS_NO_COST = {
    "accelerator",
    "max_steps",
    "max_epochs",
    "max_time",
    "log_every_n_steps",
    "val_check_interval",
    "limit_val_batches",
    "limit_test_batches",
    "accumulate_grad_batches",
    "gradient_clip_val",
    "enable_checkpointing",
    "logger",
    "use_distributed_sampler",
    "benchmark",
    "enable_model_summary",
    "num_sanity_val_steps",
    "callbacks",
    "plugins",
    "enable_progress_bar",
}
STRATEGY_KEYS_NO_COST = {
    "_target_",
    "ckpt_async_save",
    "ckpt_parallel_load",
    "ckpt_load_optimizer",
    "ckpt_save_optimizer",
    "ddp",
    "gradient_as_bucket_view",
    "find_unused_parameters",
    "progress_interval",
}
DDP_KEYS = {
    "use_distributed_optimizer",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "check_for_nan_in_grad",
    "bucket_size",
    "average_in_collective",
    "grad_reduce_in_fp32",
    "data_parallel_sharding_strategy",
    "use_custom_fsdp",
    "use_megatron_fsdp",
    "num_distributed_optimizer_instances",
}

# Megatron-Bridge's named mixed-precision recipes (megatron/bridge/training/mixed_precision.py,
# MIXED_PRECISION_RECIPES; hyphens and underscores alike): the fields each sets on the model
# config, which it overrides (update_config_with_precision_overrides). fp8 is the format (None:
# off), fp8_recipe Transformer Engine's scaling, fp4 the FP4 format (nvfp4 recipe).
_OFF = {"fp8": None, "fp8_recipe": None, "fp4": None, "fp8_param_gather": False}
_BF16 = {"bf16": True, "fp16": False, **_OFF}
_FP16 = {"bf16": False, "fp16": True, **_OFF}


def _fp8(base: dict, fmt: str, recipe: str, gather: bool) -> dict:
    return {**base, "fp8": fmt, "fp8_recipe": recipe, "fp8_param_gather": gather}


MIXED_PRECISION = {
    "bf16_mixed": _BF16,
    "fp16_mixed": _FP16,
    "bf16_with_fp8_delayed_scaling_mixed": _fp8(_BF16, "hybrid", "delayed", True),
    "fp16_with_fp8_delayed_scaling_mixed": _fp8(_FP16, "hybrid", "delayed", True),
    "bf16_with_mxfp8_mixed": _fp8(_BF16, "e4m3", "mxfp8", True),
    "fp16_with_mxfp8_mixed": _fp8(_FP16, "e4m3", "mxfp8", True),
    # the current-scaling recipes keep the first and last layers in BF16 (first_last_layers_bf16)
    "bf16_with_fp8_current_scaling_mixed": _fp8(_BF16, "hybrid", "tensorwise", True),
    "nemotron_h_bf16_with_fp8_current_scaling_mixed": _fp8(_BF16, "hybrid", "tensorwise", True),
    "nanov2_bf16_with_fp8_current_scaling_mixed": _fp8(_BF16, "hybrid", "blockwise", True),
    "fp16_with_fp8_current_scaling_mixed": _fp8(_FP16, "hybrid", "tensorwise", True),
    "bf16_with_fp8_subchannel_scaling_mixed": _fp8(_BF16, "hybrid", "blockwise", False),
    "fp16_with_fp8_subchannel_scaling_mixed": _fp8(_FP16, "hybrid", "blockwise", False),
    # cfg.fp8 = None; cfg.fp4 = "e2m1"; cfg.fp4_recipe = "nvfp4"
    "bf16_with_nvfp4_mixed": {**_BF16, "fp4": "e2m1"},
    "nemotron_3_super_bf16_with_nvfp4_mixed": {**_BF16, "fp4": "e2m1"},
}
FIRST_LAST_BF16 = {
    "bf16_with_fp8_current_scaling_mixed",
    "nemotron_h_bf16_with_fp8_current_scaling_mixed",
    "nanov2_bf16_with_fp8_current_scaling_mixed",
    "fp16_with_fp8_current_scaling_mixed",
    "nemotron_3_super_bf16_with_nvfp4_mixed",
}
# the precision fields of a mixed_precision mapping (Bridge's MixedPrecisionConfig)
PRECISION_FIELDS = ("bf16", "fp16", "fp8", "fp8_recipe", "fp4", "fp8_param_gather")


TRUE_WORDS = {"true", "yes", "on", "y", "1"}
FALSE_WORDS = {"false", "no", "off", "n", "0"}


def typed(key: str, value: Any, where: str) -> Any:
    """A recipe value as OmegaConf's typed nodes read it (BooleanNode, IntegerNode, FloatNode):
    "false", "Off" or 0 is false, "0.0" is 0.0; '???' is OmegaConf's mandatory value, left unset,
    which NeMo would stop on when it reads it."""
    if isinstance(value, str) and value.strip() == "???":
        raise PerfModelError(
            f"{where}.{key}: ??? is OmegaConf's mandatory value, left unset (NeMo stops on it):"
            " give the value"
        )
    if value is None:
        return None
    if key in BOOL_KEYS:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) or (
            isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS
        ):
            return (
                str(value).strip().lower() in TRUE_WORDS if isinstance(value, str) else value != 0
            )
        raise PerfModelError(f"{where}.{key}: {value!r} is not true or false")
    if key in INT_KEYS and not isinstance(value, bool):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        if not isinstance(value, int):
            raise PerfModelError(f"{where}.{key}: {value!r} is not a whole number")
    if key in FLOAT_KEYS and not isinstance(value, bool):
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise PerfModelError(f"{where}.{key}: {str(value)[:40]!r} is not a number") from None
        if number != number or abs(number) == float("inf"):
            raise PerfModelError(f"{where}.{key}: {value!r} is not a finite number")
        return number
    if key in CHOICES and value not in CHOICES[key]:
        raise PerfModelError(f"{where}.{key}: {value!r}; NeMo accepts {', '.join(CHOICES[key])}")
    return value


def section(data: dict[str, Any], key: str) -> dict[str, Any]:
    """A recipe's sub-mapping, or an empty one where the recipe has none (or not a mapping)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}
