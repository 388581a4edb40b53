"""FLOP and parameter counts read off the layer description agree with the papers' closed forms and
with hand counts written out here (SPEC 5; issue 11)."""

import pytest

from perfmodel.cost import flops as fl
from perfmodel.cost import memory as mem
from perfmodel.cost.transformer import LayerShape
from perfmodel.inputs import presets

GPT3 = dict(s=2048, L=96, h=12288, V=51200)


def gpt_shape(h, V):
    # GPT: g = a, d = 128, f = 4h, biases, LayerNorm, learned positions, tied embeddings
    return LayerShape(
        hidden=h,
        heads=h // 128,
        groups=h // 128,
        ffn=4 * h,
        vocab=V,
        gated=False,
        bias=True,
        norm="layernorm",
        learned_positions=True,
        tied=True,
    )


def gpt_general(B, s, L, h, V, recompute=None):
    shape = gpt_shape(h, V)
    return (
        fl.model_flops(shape, B, s, fl.Depth(L))
        if recompute is None
        else fl.hardware_flops(shape, B, s, fl.Depth(L), recompute)
    )


@pytest.mark.parametrize("B", [1, 64, 1536])
def test_model_flops_is_korthikanti_eq7(B):
    assert gpt_general(B, **GPT3) == pytest.approx(fl.korthikanti_model_flops(B, **GPT3), rel=1e-12)


def test_full_recompute_is_narayanan_eq3():
    assert gpt_general(64, **GPT3, recompute="full") == pytest.approx(
        fl.narayanan_hardware_flops(64, **GPT3), rel=1e-12
    )


def test_selective_is_korthikanti_eq8():
    assert gpt_general(64, **GPT3, recompute="selective") == pytest.approx(
        fl.korthikanti_selective_flops(64, **GPT3), rel=1e-12
    )


# seed 000, 4.2: B*S = 8192, h = 4096: 3.30e12 per layer, 412 GFLOP per GPU, 2.75 ms
def test_tp_layer_flops():
    parts = fl.layer_forward_flops(gpt_shape(4096, 51200), 8, 1024)
    linear = (
        parts["QKV projection"] + parts["output projection"] + parts["MLP up"] + parts["MLP down"]
    )
    assert linear == pytest.approx(3.30e12, rel=2e-3)
    assert linear / 8 == pytest.approx(412e9, rel=2e-3)
    assert linear / 8 / 150e12 == pytest.approx(2.75e-3, rel=2e-3)


# Korthikanti 2022 Table 5: 175B, 64 GPUs, 13.75 s -> MFU 51.4%
def test_published_mfu_follows_eq7():
    mfu = fl.korthikanti_model_flops(64, **GPT3) / 13.75 / 64 / 312e12
    assert mfu == pytest.approx(0.514, abs=0.002)
    hfu = fl.korthikanti_selective_flops(64, **GPT3) / 13.75 / 64 / 312e12
    assert hfu == pytest.approx(0.528, abs=0.002)


# Narayanan 2021 Table 1: 1T on 3072 GPUs, 163 TFLOP/s = 502 PFLOP/s
def test_narayanan_throughput_convention():
    F = fl.narayanan_hardware_flops(3072, s=2048, L=128, h=25600, V=51200)
    step = F / (163e12 * 3072)
    # the table rounds 163 TFLOP/s per GPU; 3072 x 163 = 500.7 PFLOP/s against the 502 printed
    assert pytest.approx(502e15, rel=3e-3) == 3072 * 163e12
    assert step == pytest.approx(F / 502e15, rel=3e-3)


# ---------------------------------------------------------------- hand counts of three real models


def test_gpt3_175b_parameters_and_flops_by_hand():
    """Brown et al. 2020 Table 2.1 shape; Narayanan 2021 Sec. 5.1: 12 h^2 + 13 h per layer."""
    shape = LayerShape.of(presets.model("gpt3-175b"))
    h, s = 12288, 2048
    assert mem.layer_params(shape) == 12 * h * h + 13 * h  # 1,812,090,880
    # QKV 2 s h 3h, QK^T and AV 2 s^2 h each, output 2 s h^2, MLP 2 x 2 s h 4h
    parts = fl.layer_forward_flops(shape, 1, s)
    assert parts == {
        "QKV projection": 6 * s * h * h,
        "attention scores QK^T": 2 * s * s * h,
        "attention x V": 2 * s * s * h,
        "output projection": 2 * s * h * h,
        "MLP up": 8 * s * h * h,
        "MLP down": 8 * s * h * h,
    }


def test_llama3_70b_parameters_and_flops_by_hand():
    """Dubey et al. 2024 Table 3: 80 layers, h 8192, 64 heads, 8 KV heads, f 28672, V 128256,
    untied. The published checkpoint (meta-llama/Meta-Llama-3-70B) holds 70,553,706,496 parameters.
    """
    shape = LayerShape.of(presets.model("llama3-70b"))
    h, kv, f, V, L = 8192, 8 * 128, 28672, 128256, 80
    layer = (
        h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h
    )  # q, k, v, o; gate, up, down; two RMSNorms
    assert mem.layer_params(shape) == layer == 855_654_400
    assert mem.total_params(shape, L, 8192) == L * layer + 2 * V * h + h == 70_553_706_496
    s = 4096
    parts = fl.layer_forward_flops(shape, 1, s)
    assert parts["QKV projection"] == 2 * s * h * (h + 2 * kv)
    assert parts["MLP gate+up"] == 2 * s * h * 2 * f and parts["MLP down"] == 2 * s * f * h
    assert parts["attention scores QK^T"] == parts["attention x V"] == 2 * s * s * h


def test_gqa_llama3_8b_parameters_by_hand():
    """A GQA model with 4 query heads per KV head: Llama-3 8B (32 heads, 8 KV heads, f 14336). The
    published checkpoint (meta-llama/Meta-Llama-3-8B) holds 8,030,261,248 parameters."""
    shape = LayerShape.of(presets.model("llama3-8b"))
    h, kv, f, V = 4096, 8 * 128, 14336, 128256
    layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h
    assert mem.total_params(shape, 32, 8192) == 32 * layer + 2 * V * h + h == 8_030_261_248
    # K and V projections are g/a = 1/4 of Q's: QKV FLOPs 2 s h (h + 2 g d)
    assert fl.layer_forward_flops(shape, 1, 1)["QKV projection"] == 2 * h * (h + 2 * kv)


def test_swiglu_has_three_mlp_gemms():
    gelu = fl.layer_forward_flops(gpt_shape(8192, 32000), 1, 4096)
    swi = fl.layer_forward_flops(LayerShape.of(presets.model("llama2-70b")), 1, 4096)
    f = 28672
    assert gelu["MLP up"] + gelu["MLP down"] == 2 * (2 * 4096 * 8192 * 4 * 8192)
    assert swi["MLP gate+up"] + swi["MLP down"] == 3 * (2 * 4096 * 8192 * f)
