"""Read a Hugging Face config.json into the fields of specs.Model, faithfully or not at all.

Each supported ``model_type`` names its family; the family says whether the MLP is gated, which
keys carry the experts, and which defaults apply (transformers' own Config classes: LlamaConfig,
MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, DeepseekV3Config, Gemma2Config, NemotronConfig,
Llama4TextConfig). A key that would change the cost and that perfmodel cannot model is an error
naming that key; so is a model_type it does not know. Errors name the config.json keys the user
wrote, never perfmodel's own field names. This module maps data; presets.py reads the file.
"""

from __future__ import annotations

from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.specs.model import MAX_LAYERS

GATED = {
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "gemma",
    "gemma2",
    "llama4_text",
    "gpt_oss",
}
UNGATED = {"gpt2", "nemotron"}
FAMILIES = GATED | UNGATED
# perfmodel's field -> the config.json key it came from, for error messages
KEY_OF_FIELD = {
    "num_query_groups": "num_key_value_heads",
    "ffn_hidden_size": "intermediate_size",
    "kv_channels": "head_dim",
    "num_moe_experts": "num_experts",
    "moe_router_topk": "num_experts_per_tok",
    "moe_ffn_hidden_size": "moe_intermediate_size",
    "moe_layer_freq": "decoder_sparse_step",
    "num_layers": "num_hidden_layers",
    "seq_length": "max_position_embeddings",
    "mtp_num_layers": "num_nextn_predict_layers",
    "moe_router_num_groups": "n_group",
    "moe_router_group_topk": "topk_group",
}
# tie_word_embeddings when the file does not say (the default of each transformers Config class)
TIED_BY_DEFAULT = {"gemma", "gemma2", "gpt2"}


def _need_int(cfg: dict, key: str, label: str, minimum: int = 1, why: str = "") -> int:
    if key not in cfg or cfg[key] is None:
        raise PerfModelError(
            f"{label}: {key} is missing{why}; transformers would fill its Config class's default,"
            " which may not be this model's: write it in the file"
        )
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise PerfModelError(f"{label}: {key} must be a whole number >= {minimum}, got {v!r}")
    return v


def _opt_int(cfg: dict, key: str, label: str, minimum: int = 1) -> int | None:
    return None if cfg.get(key) is None else _need_int(cfg, key, label, minimum)


def _bool(cfg: dict, key: str, label: str, default: bool) -> bool:
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise PerfModelError(f"{label}: {key} must be true or false (a JSON boolean), got {v!r}")
    return v


def _unwrap(cfg: dict, label: str) -> dict:
    """A multimodal config keeps the language model under text_config (Llama 4, Gemma 3)."""
    text = cfg.get("text_config")
    if text is None:
        return cfg
    if not isinstance(text, dict):
        raise PerfModelError(f"{label}: text_config must be a JSON object")
    return {**text, "_name_or_path": cfg.get("_name_or_path") or text.get("_name_or_path")}


def _refuse(cfg: dict, family: str, label: str) -> None:
    """Keys whose cost perfmodel does not model: one error naming the key."""
    for key in ("ssm_state_size", "mamba_d_state", "linear_attn_config", "hybrid_override_pattern"):
        if key in cfg:
            raise PerfModelError(
                f"{label}: {key}: state-space / linear-attention layers are not modelled"
            )
    layer_types = cfg.get("layer_types") or []
    if not isinstance(layer_types, list) or not all(isinstance(x, str) for x in layer_types):
        raise PerfModelError(
            f'{label}: layer_types must be a list of layer kinds such as "full_attention"'
        )
    kinds = set(layer_types)
    if kinds - {"full_attention", "sliding_attention"}:
        raise PerfModelError(
            f"{label}: layer_types holds {sorted(kinds - {'full_attention', 'sliding_attention'})},"
            " layer kinds perfmodel does not model"
        )
    if family not in ("deepseek_v2", "deepseek_v3") and cfg.get("kv_lora_rank"):
        raise PerfModelError(
            f"{label}: kv_lora_rank (latent attention) in a {family} config is not modelled"
        )


def _moe(cfg: dict, family: str, L: int, label: str) -> dict:
    """The expert keys of each family, as Model fields (num_moe_experts None: dense)."""
    out: dict[str, Any] = {}
    experts_key = {
        "mixtral": "num_local_experts",
        "llama4_text": "num_local_experts",
        "qwen2_moe": "num_experts",
        "qwen3_moe": "num_experts",
        "deepseek_v2": "n_routed_experts",
        "deepseek_v3": "n_routed_experts",
        "gpt_oss": "num_local_experts",
    }.get(family)
    if experts_key and cfg.get(experts_key) == 0:  # 0 experts is no MoE model at all
        dense_type = {"qwen2_moe": "qwen2", "qwen3_moe": "qwen3", "mixtral": "mistral"}.get(family)
        raise PerfModelError(
            f"{label}: {experts_key}: 0 in a {family} config is a mixture-of-experts model without"
            " experts; give the expert count"
            + (f", or model_type {dense_type} for a dense model" if dense_type else "")
        )
    why = " (the experts' count and inner size)"
    if family in ("mixtral", "gpt_oss") or (
        family == "llama4_text" and cfg.get("num_local_experts")
    ):
        out["num_moe_experts"] = _need_int(cfg, "num_local_experts", label, why=why)
        out["moe_ffn_hidden_size"] = _need_int(cfg, "intermediate_size", label, why=why)
        if family == "llama4_text":  # one shared expert; dense layers use intermediate_size_mlp
            out["moe_shared_expert_intermediate_size"] = out["moe_ffn_hidden_size"]
            out["moe_layer_freq"] = _llama4_moe_layers(cfg, L, label)
    elif family in ("qwen2_moe", "qwen3_moe") and cfg.get("num_experts"):
        out["num_moe_experts"] = _need_int(cfg, "num_experts", label)
        out["moe_ffn_hidden_size"] = _need_int(cfg, "moe_intermediate_size", label, why=why)
        shared = _opt_int(cfg, "shared_expert_intermediate_size", label)
        if shared:
            out["moe_shared_expert_intermediate_size"] = shared
        step = _opt_int(cfg, "decoder_sparse_step", label) or 1
        dense = cfg.get("mlp_only_layers") or []
        if not isinstance(dense, list) or not all(isinstance(i, int) and 0 <= i < L for i in dense):
            raise PerfModelError(
                f"{label}: mlp_only_layers must be a list of layer indices below {L}"
            )
        out["moe_layer_freq"] = [0 if i in dense or (i + 1) % step else 1 for i in range(L)]
    elif family in ("deepseek_v2", "deepseek_v3") and cfg.get("n_routed_experts"):
        out["num_moe_experts"] = _need_int(cfg, "n_routed_experts", label)
        out["moe_ffn_hidden_size"] = f_e = _need_int(cfg, "moe_intermediate_size", label, why=why)
        shared = _opt_int(cfg, "n_shared_experts", label, 0) or 0
        if shared:
            out["moe_shared_expert_intermediate_size"] = shared * f_e
        groups, reach = _opt_int(cfg, "n_group", label), _opt_int(cfg, "topk_group", label)
        if groups and reach and reach < groups:  # group-limited (node-limited) routing
            out["moe_router_num_groups"], out["moe_router_group_topk"] = groups, reach
        first = _opt_int(cfg, "first_k_dense_replace", label, 0) or 0
        freq = _opt_int(cfg, "moe_layer_freq", label) or 1
        out["moe_layer_freq"] = [1 if i >= first and i % freq == 0 else 0 for i in range(L)]
    else:
        for key in ("num_local_experts", "num_experts", "n_routed_experts"):
            if cfg.get(key):
                raise PerfModelError(
                    f"{label}: {key} in a {family} config: perfmodel reads experts only from "
                    "mixtral, qwen2_moe, qwen3_moe, deepseek_v2/v3 and llama4 configs"
                )
        return out
    if "num_experts_per_tok" in cfg:
        out["moe_router_topk"] = _need_int(cfg, "num_experts_per_tok", label)
    return out


def _llama4_moe_layers(cfg: dict, L: int, label: str) -> list[int]:
    """Which layers are MoE, as transformers' Llama4TextConfig decides: the moe_layers list when
    given, else every interleave_moe_layer_step-th layer."""
    given = cfg.get("moe_layers")
    if given is not None:
        if not isinstance(given, list) or not all(isinstance(i, int) and 0 <= i < L for i in given):
            raise PerfModelError(f"{label}: moe_layers must be a list of layer indices below {L}")
        if not given:
            raise PerfModelError(f"{label}: moe_layers is empty: a MoE config with no MoE layer")
        return [1 if i in given else 0 for i in range(L)]
    step = _opt_int(cfg, "interleave_moe_layer_step", label) or 1
    if step > L:
        raise PerfModelError(
            f"{label}: interleave_moe_layer_step {step} leaves no MoE layer among {L} layers;"
            f" use a step of at most {L}, or drop the experts for a dense model"
        )
    return [1 if (i + 1) % step == 0 else 0 for i in range(L)]


def _mla(cfg: dict, label: str) -> dict:
    if cfg.get("kv_lora_rank") == 0:
        raise PerfModelError(
            f"{label}: kv_lora_rank: 0; DeepSeek's latent attention needs a rank of at least 1"
            " (transformers has no attention without it for this model_type)"
        )
    if not cfg.get("kv_lora_rank"):
        return {}
    keys = {
        "q_lora_rank": "q_lora_rank",
        "kv_lora_rank": "kv_lora_rank",
        "qk_nope_head_dim": "qk_head_dim",
        "qk_rope_head_dim": "qk_pos_emb_head_dim",
        "v_head_dim": "v_head_dim",
    }
    out = {}
    for key, field in keys.items():
        if key == "q_lora_rank" and cfg.get(key) is None:
            continue  # DeepSeek-V2-Lite: no query compression
        if key not in cfg:
            raise PerfModelError(f"{label}: MLA (kv_lora_rank) needs {key}")
        out[field] = _need_int(cfg, key, label)
    return out


def _gpt_oss(cfg: dict, L: int, label: str) -> dict:
    """gpt-oss (OpenAI 2025, gpt-oss model card; transformers' GptOssConfig): every layer MoE
    (num_local_experts, top num_experts_per_tok, each expert intermediate_size wide, with biases),
    attention with biases alternating a sliding window (layer_types "sliding_attention") and full
    causal attention. Two details cost nothing the model times: each head's learned attention
    sink (one logit per head in the softmax's denominator, inside the fused kernel) and the
    SwiGLU's clamp at swiglu_limit (one more compare in the same elementwise kernel)."""
    out: dict[str, Any] = {"add_bias_linear": True}
    kinds = cfg.get("layer_types") or []
    window = _opt_int(cfg, "sliding_window", label)
    if kinds and len(kinds) != L:
        raise PerfModelError(f"{label}: layer_types must name {L} layers, one per layer")
    sliding = sum(k == "sliding_attention" for k in kinds) if kinds else L // 2
    if window and sliding:
        out["sliding_window"] = window
        out["sliding_window_fraction"] = sliding / L
    return out


def _mtp(cfg: dict, label: str) -> dict:
    """DeepSeek-V3's multi-token prediction module(s), trained with the model (DeepSeek-V3 report,
    Sec. 2.2): num_nextn_predict_layers."""
    mtp = _opt_int(cfg, "num_nextn_predict_layers", label, 0)
    return {"mtp_num_layers": mtp} if mtp else {}


def _rope_numbers(cfg: dict) -> dict[str, float]:
    """RoPE's base and Llama 3.1's scaling factor (rope_scaling rope_type llama3), which cost
    nothing but travel to the emitted launch arguments."""
    out: dict[str, float] = {}
    theta, scaling = cfg.get("rope_theta"), cfg.get("rope_scaling")
    if isinstance(theta, (int, float)) and not isinstance(theta, bool) and theta > 0:
        out["rotary_base"] = theta
    if isinstance(scaling, dict) and "llama3" in (scaling.get("type"), scaling.get("rope_type")):
        factor = scaling.get("factor")
        if isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor > 0:
            out["rope_scaling_factor"] = factor
    return out


def _rope_kind(cfg: dict) -> str:
    """rope, or yarn where config.json's rope_scaling names YaRN (type or rope_type "yarn": gpt-oss,
    DeepSeek-V3)."""
    scaling = cfg.get("rope_scaling")
    if isinstance(scaling, dict) and "yarn" in (scaling.get("type"), scaling.get("rope_type")):
        return "yarn"
    return "rope"


def _activation(cfg: dict, family: str, label: str) -> str:
    act = str(
        cfg.get("hidden_activation")
        or cfg.get("hidden_act")
        or cfg.get("activation_function")
        or "gelu"
    ).lower()
    if family in GATED:
        if act in ("silu", "swish", "swiglu"):
            return "swiglu"
        if act.startswith("gelu"):
            return "geglu"  # Gemma's gelu_pytorch_tanh gates its MLP (GemmaMLP: act(gate) * up)
    elif act.startswith("gelu"):
        return "gelu"
    elif act in ("relu2", "squared_relu", "squared-relu"):
        return "squared-relu"
    raise PerfModelError(
        f"{label}: hidden_act {act!r} in a {family} config is not an MLP perfmodel models"
    )


def _llama4_chunks(cfg: dict, L: int, label: str) -> dict:
    """Llama 4's chunked attention: attention_chunk_size tokens on the RoPE layers, global attention
    on the NoPE ones. no_rope_layers marks each layer 1 (RoPE, chunked) or 0 (NoPE, global); without
    it transformers makes every 4th layer NoPE (3 of 4 chunked)."""
    if "attention_chunk_size" not in cfg or cfg["attention_chunk_size"] is None:
        return {}
    chunk = _need_int(cfg, "attention_chunk_size", label)
    flags = cfg.get("no_rope_layers")
    if flags is None:
        return {"attention_chunk_size": chunk, "chunked_attention_fraction": 0.75}
    if not isinstance(flags, list) or len(flags) != L or any(x not in (0, 1) for x in flags):
        raise PerfModelError(f"{label}: no_rope_layers must be {L} flags, 0 (NoPE) or 1 (RoPE)")
    if not any(flags):  # every layer NoPE: global attention everywhere, no chunk is ever used
        return {}
    return {"attention_chunk_size": chunk, "chunked_attention_fraction": sum(flags) / L}


# the class names transformers gives each model_type (config.json "architectures")
ARCHITECTURE_PREFIX = {
    "llama": "llama", "mistral": "mistral", "mixtral": "mixtral", "qwen2": "qwen2",
    "qwen2_moe": "qwen2moe", "qwen3": "qwen3", "qwen3_moe": "qwen3moe", "deepseek_v2": "deepseekv2",
    "deepseek_v3": "deepseekv3", "gemma": "gemma", "gemma2": "gemma2", "llama4_text": "llama4",
    "gpt2": "gpt2", "nemotron": "nemotron", "gpt_oss": "gptoss",
}  # fmt: skip


def _architectures(raw: dict, family: str, label: str) -> None:
    """architectures names the class that runs the checkpoint: it must be one of model_type's."""
    names = raw.get("architectures")
    if names is None:
        return
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise PerfModelError(f"{label}: architectures must be a list of class names")
    prefix = ARCHITECTURE_PREFIX[family]
    wrong = [n for n in names if not n.lower().startswith(prefix)]
    if wrong:
        raise PerfModelError(
            f"{label}: architectures {wrong} is not a {family} model (model_type {family!r}"
            f" runs {prefix.capitalize()}... classes); perfmodel reads the layers model_type"
            " describes, so fix the one that is wrong"
        )


def model_fields(raw: Any, label: str = "config.json") -> dict:
    """The fields of specs.Model for a Hugging Face config.json (already parsed)."""
    if not isinstance(raw, dict):
        raise PerfModelError(f"{label}: expected a JSON object")
    cfg = _unwrap(raw, label)
    family = str(cfg.get("model_type", "")).lower()
    if family not in FAMILIES:
        raise PerfModelError(
            f"{label}: model_type {family or '(missing)'!r} is not one perfmodel reads; it reads "
            f"{', '.join(sorted(FAMILIES))}. Write the model as a YAML mapping instead"
        )
    need = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    if family == "gpt2":
        cfg = {
            **cfg,
            "hidden_size": cfg.get("n_embd", cfg.get("hidden_size")),
            "num_hidden_layers": cfg.get("n_layer", cfg.get("num_hidden_layers")),
            "num_attention_heads": cfg.get("n_head", cfg.get("num_attention_heads")),
            "max_position_embeddings": cfg.get(
                "n_positions", cfg.get("max_position_embeddings", 1024)
            ),
            "intermediate_size": cfg.get("n_inner", cfg.get("intermediate_size")),
        }
    missing = [k for k in need if cfg.get(k) is None]
    if missing:
        raise PerfModelError(
            f"{label}: missing {', '.join(missing)}; is this a transformer config.json?"
        )
    _architectures(raw if family != "llama4_text" else cfg, family, label)
    _refuse(cfg, family, label)
    L = _need_int(cfg, "num_hidden_layers", label)
    if L > MAX_LAYERS:  # before any per-layer list is built
        raise PerfModelError(
            f"{label}: num_hidden_layers {L:,} is above the {MAX_LAYERS:,} layers perfmodel models;"
            " check the file"
        )
    data: dict[str, Any] = {
        "name": cfg.get("_name_or_path") or family,
        "num_layers": L,
        "hidden_size": _need_int(cfg, "hidden_size", label),
        "num_attention_heads": _need_int(cfg, "num_attention_heads", label),
        "num_query_groups": _opt_int(cfg, "num_key_value_heads", label),
        "kv_channels": _opt_int(cfg, "head_dim", label),
        "ffn_hidden_size": (
            _opt_int(cfg, "intermediate_size_mlp", label)
            if family == "llama4_text"
            else _opt_int(cfg, "intermediate_size", label)
        ),
        "vocab_size": _need_int(cfg, "vocab_size", label),
        "seq_length": _opt_int(cfg, "max_position_embeddings", label) or 2048,
        "mlp": _activation(cfg, family, label),
        "tied_embeddings": _bool(cfg, "tie_word_embeddings", label, family in TIED_BY_DEFAULT),
        "position_embedding": "learned" if family == "gpt2" else _rope_kind(cfg),
        "add_bias_linear": (
            _bool(cfg, "attention_bias", label, False)
            if "attention_bias" in cfg
            else family == "gpt2"
        ),
        "normalization": "layernorm" if family in ("gpt2", "nemotron") else "rmsnorm",
        "qk_layernorm": family == "qwen3" or family == "qwen3_moe",
        "sandwich_norm": family == "gemma2",
        "source": label,
    }
    if family == "gemma2" and cfg.get("sliding_window"):
        data["sliding_window"] = _need_int(cfg, "sliding_window", label)
        data["sliding_window_fraction"] = 0.5  # Gemma 2 alternates local and global layers
    elif (
        family in ("mistral", "mixtral", "qwen2", "qwen3")
        and cfg.get("sliding_window")
        and cfg.get("use_sliding_window", family in ("mistral", "mixtral"))
    ):
        data["sliding_window"] = _need_int(cfg, "sliding_window", label)
    if family == "gpt_oss":
        data.update(_gpt_oss(cfg, L, label))
    if family == "llama4_text":
        data.update(_llama4_chunks(cfg, L, label))
    for part in (_rope_numbers(cfg), _moe(cfg, family, L, label), _mtp(cfg, label)):
        data.update(part)
    data.update(_mla(cfg, label))
    return data
