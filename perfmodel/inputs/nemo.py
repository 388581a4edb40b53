"""NeMo recipes into plans (issue 15, item 4): a NeMo 1 Megatron config (trainer + model sections,
as examples/nlp/language_modeling/conf/megatron_*_config.yaml) or a Megatron-Bridge / NeMo 2 config
dump (model + train + optimizer/ddp sections, Megatron-Core's TransformerConfig names).

As for Megatron-LM arguments (megatron.py), every key is accounted for: set into the plan, ignored
as having no effect on the cost, named as not recognized, or refused when it changes the cost in a
way perfmodel cannot model. A key whose value is null or false is the feature left off and costs
nothing."""

from __future__ import annotations

import re
from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron_args import Imported, megatron_defaults, megatron_rules

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
    "ub_tp_comm_overlap": "tp_comm_overlap",
    "tp_comm_overlap": "tp_comm_overlap",
    "overlap_grad_reduce": "overlap_grad_reduce",
    "overlap_param_gather": "overlap_param_gather",
    "moe_token_dispatcher_type": "moe_token_dispatcher_type",
    "persist_layer_norm": "persist_layer_norm",
    "gradient_accumulation_fusion": "grad_accumulation_fusion",
}
READ_ELSEWHERE = {
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
    "moe_grouped_gemm",
    "num_micro_batches_with_partial_activation_checkpoints",
    "activations_checkpoint_layers_per_pipeline",
    "moe_expert_capacity_factor",
    "mtp_num_layers",
    "cpu_offloading",
    "fp32_residual_connection",
}
CANNOT = {  # key -> what it turns on (refused when its value is set and not false)
    "num_micro_batches_with_partial_activation_checkpoints": "partial activation checkpointing",
    "activations_checkpoint_layers_per_pipeline": "per-stage activation checkpointing",
    "moe_expert_capacity_factor": "token dropping (perfmodel models dropless routing)",
    "mtp_num_layers": "multi-token prediction layers",
    "cpu_offloading": "offloading to the CPU",
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


def read_recipe(
    data: Any, gpu: str, num_gpus: int | None = None, vocab_size: int | None = None
) -> Imported:
    """A plan mapping from a NeMo recipe (parsed YAML)."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise PerfModelError(
            "a NeMo recipe is a mapping with a 'model' section (NeMo 1 config or Megatron-Bridge "
            "config dump)"
        )
    model_cfg = data["model"]
    train = _section(data, "train")
    out = megatron_defaults(str(data.get("name") or "nemo"), gpu)
    model, parallel, training = out.plan["model"], out.plan["parallel"], out.plan["training"]

    def get(key):
        v = model_cfg.get(key, train.get(key))
        return _resolve(v, model_cfg, key)

    for key, value in {**train, **model_cfg}.items():
        value = _resolve(value, model_cfg, key)
        if key in CANNOT and value not in (None, False, 0):
            raise PerfModelError(
                f"model.{key}: {value!r} turns on {CANNOT[key]}, which perfmodel cannot model; "
                "set it to null or plan without it"
            )
        if value is None:
            continue
        if key in MODEL_KEYS:
            model[MODEL_KEYS[key]] = value
        elif key in PARALLEL_KEYS:
            parallel[PARALLEL_KEYS[key]] = value
        elif key in TRAINING_KEYS:
            training[TRAINING_KEYS[key]] = value
        elif key in READ_ELSEWHERE:
            continue
        elif key in NO_COST or key in (
            "train_iters",
            "eval_iters",
            "eval_interval",
            "exit_interval",
            "manual_gc",
            "manual_gc_interval",
            "rampup_batch_size",
        ):
            out.ignored.append(f"model.{key}" if key in model_cfg else f"train.{key}")
        else:
            out.unrecognized.append(f"model.{key}" if key in model_cfg else f"train.{key}")
    _architecture(get, model)
    _recompute(get, parallel)
    _precision_and_optimizer(data, get, out)
    megatron_rules(out, "sequence_parallel", "Megatron")
    _system(data, out, num_gpus)
    if vocab_size:
        model["vocab_size"] = vocab_size
    elif "vocab_size" not in model:
        raise PerfModelError(
            "the vocabulary size is not in the recipe (it comes from the tokenizer); "
            "pass --vocab-size N"
        )
    for section in data:
        if (
            section not in (
                "model",
                "train",
                "trainer",
                "name",
                "optimizer",
                "ddp",
                "mixed_precision",
            )
            and data[section] is not None
        ):
            out.ignored.append(f"{section}.*" if isinstance(data[section], dict) else section)
    return out


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    """A recipe's sub-mapping, or an empty one where the recipe has none (or not a mapping)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _resolve(value, section: dict, key: str):
    """OmegaConf's ${.key} and ${model.key} interpolations, one level deep; '???' (mandatory, unset)
    is None."""
    if isinstance(value, str):
        if value == "???":
            return None
        m = re.fullmatch(r"\$\{(?:model)?\.?([A-Za-z_]\w*)\}", value.strip())
        if m and m.group(1) != key:
            return section.get(m.group(1))
    return value


def _architecture(get, model: dict) -> None:
    norm = get("normalization")
    if norm is not None:
        if str(norm).lower() not in ("layernorm", "rmsnorm"):
            raise PerfModelError(
                f"model.normalization: {norm!r}; perfmodel models layernorm and rmsnorm"
            )
        model["normalization"] = str(norm).lower()
    bias = get("bias") if get("bias") is not None else get("add_bias_linear")
    if bias is not None:
        model["add_bias_linear"] = bool(bias)
    act = str(get("activation") or get("activation_func") or "gelu").lower().removeprefix("fast-")
    gated = get("gated_linear_unit")
    kinds = {
        "gelu": "gelu",
        "swiglu": "swiglu",
        "geglu": "geglu",
        "squared-relu": "squared-relu",
        "silu": "swiglu",
    }
    if act not in kinds:
        raise PerfModelError(
            f"model.activation: {act!r}; perfmodel models gelu, swiglu, geglu and squared-relu"
        )
    model["mlp"] = kinds[act] if act != "gelu" or not gated else "geglu"
    if act == "silu" and gated is False:
        raise PerfModelError(
            "model.activation_func silu without gated_linear_unit: an ungated SiLU MLP is not"
            " modelled"
        )
    pos = get("position_embedding_type")
    if pos is not None:
        if pos not in ("learned_absolute", "rope", "none"):
            raise PerfModelError(
                f"model.position_embedding_type: {pos!r}; perfmodel models learned_absolute and"
                " rope"
            )
        model["position_embedding"] = "learned" if pos == "learned_absolute" else "rope"
    tied = get("share_embeddings_and_output_weights")
    if tied is not None:
        model["tied_embeddings"] = bool(tied)
    drops = [
        get(k) for k in ("hidden_dropout", "attention_dropout", "ffn_dropout") if get(k) is not None
    ]
    if drops and not any(drops):
        model["dropout"] = False


def _recompute(get, parallel: dict) -> None:
    gran = get("activations_checkpoint_granularity") or get("recompute_granularity")
    method = get("activations_checkpoint_method") or get("recompute_method")
    n = get("activations_checkpoint_num_layers") or get("recompute_num_layers")
    if gran:
        if gran not in ("full", "selective"):
            raise PerfModelError(
                f"model.activations_checkpoint_granularity: {gran!r}; full or selective"
            )
        parallel["recompute"] = gran
    if gran == "full" and (method == "block" or (method == "uniform" and n not in (None, 1))):
        raise PerfModelError(
            f"recompute method {method} with {n} layers: only recomputing every layer "
            "(uniform, 1) is modelled"
        )


def _precision_and_optimizer(data: dict, get, out: Imported) -> None:
    training, parallel = out.plan["training"], out.plan["parallel"]
    precision = str(
        (data.get("trainer") or {}).get("precision", "") or data.get("mixed_precision") or ""
    ).lower()
    if get("fp8") or "fp8" in precision:
        training["dtype"] = "fp8"
    elif "bf16" in precision or get("bf16"):
        training["dtype"] = "bf16"
    elif precision.startswith("16") or "fp16" in precision or get("fp16"):
        training["dtype"] = "fp16"
    else:
        training["dtype"] = "fp32"
        out.assumed.append(f"precision {precision or 'unset'}: fp32")
    optim = get("optim")
    name = optim.get("name") if isinstance(optim, dict) else None
    ddp = _section(data, "ddp")
    opt = _section(data, "optimizer")
    if (
        name == "distributed_fused_adam"
        or ddp.get("use_distributed_optimizer")
        or opt.get("use_distributed_optimizer")
    ):
        parallel["zero_stage"] = 1
    for key in ("overlap_grad_reduce", "overlap_param_gather"):
        if ddp.get(key) is not None:
            training[key] = bool(ddp[key])


def _system(data: dict, out: Imported, num_gpus: int | None) -> None:
    trainer = _section(data, "trainer")
    devices, nodes = trainer.get("devices"), trainer.get("num_nodes")
    system = out.plan["system"]
    if isinstance(devices, int) and devices > 0:
        system["gpus_per_node"] = devices
    if num_gpus:
        system["num_gpus"] = num_gpus
    elif isinstance(devices, int) and isinstance(nodes, int) and devices > 0 and nodes > 0:
        system["num_gpus"] = devices * nodes
    else:
        raise PerfModelError(
            "the GPU count is not in the recipe (trainer.devices x trainer.num_nodes); pass"
            " --gpus N"
        )
