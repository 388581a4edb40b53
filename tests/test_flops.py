"""FLOP counts: the closed forms of the papers and the per-GEMM sums agree (SPEC 5)."""

import pytest

from perfmodel.cost import flops as fl

GPT3 = dict(s=2048, L=96, h=12288, V=51200)


def gpt_general(B, s, L, h, V, recompute=None):
    a = h // 128  # GPT: g = a, d = 128
    args = (B, s, L, h, a, h // a, 4 * h, V, False)
    return fl.model_flops(*args) if recompute is None else fl.hardware_flops(*args, recompute)


@pytest.mark.parametrize("B", [1, 64, 1536])
def test_model_flops_is_korthikanti_eq7(B):
    assert gpt_general(B, **GPT3) == pytest.approx(fl.korthikanti_model_flops(B, **GPT3), rel=1e-12)


def test_full_recompute_is_narayanan_eq3():
    assert gpt_general(64, **GPT3, recompute="full") == pytest.approx(
        fl.narayanan_hardware_flops(64, **GPT3), rel=1e-12)


def test_selective_is_korthikanti_eq8():
    assert gpt_general(64, **GPT3, recompute="selective") == pytest.approx(
        fl.korthikanti_selective_flops(64, **GPT3), rel=1e-12)


def test_tp_layer_flops():  # seed 000, 4.2: B*S = 8192, h = 4096: 3.30e12 per layer, 412 GFLOP per GPU, 2.75 ms
    parts = fl.layer_forward_flops(8, 1024, 4096, 32, 128, 4 * 4096, False)
    linear = parts["qkv"] + parts["proj"] + parts["mlp"]
    assert linear == pytest.approx(3.30e12, rel=2e-3)
    assert linear / 8 == pytest.approx(412e9, rel=2e-3)
    assert linear / 8 / 150e12 == pytest.approx(2.75e-3, rel=2e-3)


def test_published_mfu_follows_eq7():  # Korthikanti 2022 Table 5: 175B, 64 GPUs, 13.75 s -> MFU 51.4%
    mfu = fl.korthikanti_model_flops(64, **GPT3) / 13.75 / 64 / 312e12
    assert mfu == pytest.approx(0.514, abs=0.002)
    hfu = fl.korthikanti_selective_flops(64, **GPT3) / 13.75 / 64 / 312e12
    assert hfu == pytest.approx(0.528, abs=0.002)


def test_narayanan_throughput_convention():  # Narayanan 2021 Table 1: 1T on 3072 GPUs, 163 TFLOP/s = 502 PFLOP/s
    F = fl.narayanan_hardware_flops(3072, s=2048, L=128, h=25600, V=51200)
    step = F / (163e12 * 3072)
    # the table rounds 163 TFLOP/s per GPU; 3072 x 163 = 500.7 PFLOP/s against the 502 printed
    assert 3072 * 163e12 == pytest.approx(502e15, rel=3e-3)
    assert step == pytest.approx(F / 502e15, rel=3e-3)


def test_swiglu_and_gqa_count_their_gemms():
    gelu = fl.layer_forward_flops(1, 4096, 8192, 8, 128, 28672, False)
    swi = fl.layer_forward_flops(1, 4096, 8192, 8, 128, 28672, True)
    assert swi["mlp"] == pytest.approx(1.5 * gelu["mlp"])
    assert gelu["qkv"] == pytest.approx(2 * 4096 * 8192 * (8192 + 2 * 8 * 128))
