"""The models people train now, read faithfully: presets against the model cards, Hugging Face
config.json files of each family, and what MoE, MLA and CP do to FLOPs, memory and traffic (issue
12).
"""

import pytest

from perfmodel.cost import flops as fl
from perfmodel.cost import memory as mem
from perfmodel.cost.transformer import LayerShape
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.describe import describe


def total(model) -> float:
    return mem.total_params(
        LayerShape.of(model), model.num_layers, model.seq_length, sum(model.moe_pattern())
    )


# (preset, the model card's published total parameters)
CARDS = [
    ("llama3.1-405b", 405.85e9),  # meta-llama/Llama-3.1-405B: 405,853,388,800
    ("mixtral-8x7b", 46.70e9),  # Jiang et al. 2024: 46.7B total
    ("mixtral-8x22b", 141e9),  # Mistral AI model card: 141B total
    ("deepseek-v3", 671e9),  # DeepSeek-V3 report: 671B (685B with the MTP module, not modelled)
    ("qwen3-30b-a3b", 30.5e9),  # Qwen3 report, Table 2
    ("qwen3-235b-a22b", 235e9),
    ("nemotron-4-340b", 341e9),  # Nemotron-4 340B report
    ("gemma-2-9b", 9.24e9),  # google/gemma-2-9b: 9,241,705,984
    ("gemma-2-27b", 27.2e9),  # google/gemma-2-27b: 27,227,128,320
    ("gpt-oss-120b", 116.83e9),  # OpenAI gpt-oss model card: 116.83B
]


@pytest.mark.parametrize("name, published", CARDS)
def test_preset_parameter_counts_match_the_model_cards(name, published):
    assert total(presets.model(name)) == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize(
    "name, active",
    [
        ("mixtral-8x7b", 12.9e9),
        ("deepseek-v3", 37e9),
        ("qwen3-235b-a22b", 22e9),
        ("qwen3-30b-a3b", 3.3e9),
    ],
)
def test_moe_flops_count_the_active_experts(name, active):
    """Model FLOPs per token ~ 6 x active parameters (the papers' own 'active' figures, to 5%, since
    attention's s^2 term and the router come on top and the embedding lookup does not count)."""
    m = presets.model(name)
    sh = LayerShape.of(m)
    per_token = (
        fl.model_flops(sh, 1, 1, fl.Depth(m.num_layers, sum(m.moe_pattern()))) / 1
    )  # s = 1: no attention term
    embed = m.vocab_size * m.hidden_size  # a lookup, no FLOPs
    assert per_token / 6 + embed == pytest.approx(active, rel=0.06)


def test_gpt_oss_reads_as_transformers_builds_it():
    """Issue 21 item 2: model_type gpt_oss was refused. Every layer MoE (128 experts, top 4),
    attention biases, half the layers on a 128-token window (layer_types); the card's 5.13B active
    parameters a token (the output layer counted, the embedding lookup not)."""
    kinds = ["sliding_attention", "full_attention"] * 18
    cfg = {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "num_hidden_layers": 36,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 2880,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "vocab_size": 201088,
        "sliding_window": 128,
        "layer_types": kinds,
        "attention_bias": True,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "swiglu_limit": 7.0,
    }
    m = presets.model_from_hf_config(cfg)
    assert (m.num_moe_experts, m.moe_router_topk, m.sliding_window) == (128, 4, 128)
    assert m.sliding_window_fraction == 0.5 and m.add_bias_linear and sum(m.moe_pattern()) == 36
    assert total(m) == pytest.approx(total(presets.model("gpt-oss-120b")), rel=1e-12)
    sh = LayerShape.of(m)
    assert fl.model_flops(sh, 1, 1, fl.Depth(36, 36)) / 6 == pytest.approx(5.13e9, rel=0.02)
    with pytest.raises(PerfModelError, match="layer_types must name 36 layers"):
        presets.model_from_hf_config({**cfg, "layer_types": kinds[:10]})


# ---------------------------------------------------------------- Hugging Face config.json

MIXTRAL = {
    "architectures": ["MixtralForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1e6,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1e6,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "first_k_dense_replace": 3,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False,
    "topk_group": 4,
    "v_head_dim": 128,
    "vocab_size": 129280,
}
GEMMA2_2B = {
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "num_hidden_layers": 26,
    "vocab_size": 256000,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
    "sliding_window": 4096,
    "max_position_embeddings": 8192,
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
    "query_pre_attn_scalar": 256,
}


def test_mixtral_config_json_is_a_mixture_of_experts():
    m = presets.model_from_hf_config(MIXTRAL)
    assert (m.num_moe_experts, m.moe_router_topk, m.moe_ffn_hidden_size) == (8, 2, 14336)
    assert sum(m.moe_pattern()) == 32
    assert total(m) == pytest.approx(46.70e9, rel=0.001)


def test_qwen3_moe_config_json():
    m = presets.model_from_hf_config(QWEN3_MOE)
    assert (m.num_moe_experts, m.moe_router_topk, m.moe_ffn_hidden_size, m.head_dim) == (
        128,
        8,
        768,
        128,
    )
    assert total(m) == pytest.approx(30.53e9, rel=0.001)


def test_qwen2_moe_sparse_step_shared_expert_and_dense_layers():
    cfg = {
        **QWEN3_MOE,
        "model_type": "qwen2_moe",
        "architectures": ["Qwen2MoeForCausalLM"],
        "decoder_sparse_step": 2,
        "mlp_only_layers": [1, 5],
        "shared_expert_intermediate_size": 5632,
    }
    m = presets.model_from_hf_config(cfg)
    pattern = m.moe_pattern()
    # every 2nd layer (i + 1 even) is MoE, except layers 1 and 5, kept dense
    assert pattern[:8] == [0, 0, 0, 1, 0, 0, 0, 1] and sum(pattern) == 48 // 2 - 2
    assert m.moe_shared_expert_intermediate_size == 5632


def test_deepseek_v3_config_json_with_mla_and_dense_first_layers():
    # issue 21: the multi-token prediction layer is read, a MoE layer like the last one
    with_mtp = presets.model_from_hf_config(DEEPSEEK_V3)
    assert with_mtp.mtp_num_layers == DEEPSEEK_V3["num_nextn_predict_layers"] == 1
    assert with_mtp.mtp_is_moe
    m = presets.model_from_hf_config({**DEEPSEEK_V3, "num_nextn_predict_layers": 0})
    assert m.mtp_num_layers == 0
    assert m.is_mla and (m.q_lora_rank, m.kv_lora_rank, m.qk_head_dim, m.v_head_dim) == (
        1536,
        512,
        128,
        128,
    )
    assert m.moe_pattern()[:4] == [0, 0, 0, 1] and m.moe_shared_expert_intermediate_size == 2048
    assert total(m) == pytest.approx(total(presets.model("deepseek-v3")), rel=1e-12)


def test_llama4_text_config_nested_under_text_config():
    cfg = {
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text",
            "hidden_size": 5120,
            "intermediate_size": 8192,
            "intermediate_size_mlp": 16384,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 48,
            "num_local_experts": 16,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 2,
            "vocab_size": 202048,
            "max_position_embeddings": 8192,
            "attention_chunk_size": 8192,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
        },
    }
    m = presets.model_from_hf_config(cfg)
    assert (m.num_moe_experts, m.moe_router_topk, m.moe_ffn_hidden_size, m.ffn) == (
        16,
        1,
        8192,
        16384,
    )
    assert m.moe_pattern()[:4] == [0, 1, 0, 1] and m.moe_shared_expert_intermediate_size == 8192
    assert m.attention_chunk_size == 8192


def test_gemma2_reads_head_dim_and_its_gated_gelu():
    """Gemma-2 2B: head_dim 256 (not 2304 / 8 = 288) and a gated GELU MLP: 2.61B parameters."""
    m = presets.model_from_hf_config(GEMMA2_2B)
    assert m.head_dim == 256 and m.mlp == "geglu" and m.tied_embeddings and m.sandwich_norm
    assert total(m) == pytest.approx(2.614e9, rel=0.001)


@pytest.mark.parametrize(
    "cfg, needle",
    [
        ({**MIXTRAL, "tie_word_embeddings": "false"}, "tie_word_embeddings must be true or false"),
        ({**MIXTRAL, "model_type": "phi3"}, "model_type 'phi3' is not one perfmodel reads"),
        (
            {**MIXTRAL, "model_type": "llama", "architectures": ["LlamaForCausalLM"]},
            "num_local_experts in a llama config",
        ),
        (
            {**MIXTRAL, "model_type": "llama"},
            r"architectures \['MixtralForCausalLM'\] is not a llama",
        ),
        ({**MIXTRAL, "num_key_value_heads": 5}, "num_key_value_heads"),
        ({**QWEN3_MOE, "num_experts_per_tok": 0}, "num_experts_per_tok must be a whole number"),
        ({**QWEN3_MOE, "mlp_only_layers": [99]}, "mlp_only_layers"),
        ({**MIXTRAL, "ssm_state_size": 16}, "ssm_state_size"),
    ],
)
def test_hf_errors_name_the_config_json_key(cfg, needle):
    with pytest.raises(PerfModelError, match=needle):
        presets.model_from_hf_config(cfg)


def test_hf_error_never_names_perfmodels_own_fields():
    with pytest.raises(PerfModelError) as e:
        presets.model_from_hf_config({**MIXTRAL, "num_key_value_heads": 5})
    assert "num_query_groups" not in str(e.value)


def test_presets_listing_counts_experts_and_groups_by_family():
    """`perfmodel presets models` listed DeepSeek-V3 at 37 B (its dense shape, experts left out):
    the listing now counts every expert, as the model cards do, and sorts by family, then size
    (issue 15)."""
    rows = describe("models")
    by_name = {r["name"]: r for r in rows}
    assert by_name["deepseek-v3"]["params_b"] == pytest.approx(671, rel=0.01)
    assert by_name["mixtral-8x7b"]["experts"] == "8x14336 top2"
    keys = [(r["family"], r["params_b"]) for r in rows]
    assert keys == sorted(keys)


def test_a_huge_layer_count_is_refused_before_per_layer_lists_are_built():
    """Found by the fuzz suite (issue 19, item 8): Qwen3-MoE with 10**12 layers built a list of
    every layer's kind before the size check, and ran out of memory."""
    import time

    t0 = time.perf_counter()
    with pytest.raises(PerfModelError, match="num_hidden_layers 1,000,000,000,000 is above"):
        presets.model_from_hf_config({**QWEN3_MOE, "num_hidden_layers": 10**12})
    assert time.perf_counter() - t0 < 5  # a generous bound against the hang, not a speed test
