"""FP8 with Transformer Engine (issue 13; SPEC 11): GEMMs at the FP8 peak, casts as memory-bound
kernels, attention in BF16, FP8 weight copies in memory, MFU against the BF16 peak."""

import pytest

from perfmodel.engine.estimate import estimate, per_layer_ops, resolve_config
from perfmodel.inputs import load_plan, presets


@pytest.fixture(scope="module")
def plans():
    p = load_plan("llama3-8b-h100.yaml")
    return p, p.with_training(dtype="fp8")


def ops(plan):
    cfg = resolve_config(plan, tp=1, pp=1, micro_batch_size=1, zero_stage=1)
    return {o.name: o for o in per_layer_ops(plan, cfg)}, cfg


def test_gemms_run_at_the_fp8_peak_and_attention_stays_bf16(plans):
    bf16, fp8 = ops(plans[0])[0], ops(plans[1])[0]
    h100 = presets.gpu("h100-sxm")
    for name in ("QKV projection", "MLP gate+up", "MLP down"):
        # twice the peak at the FP8 efficiency: at most 2 x fp8_eff / bf16_eff faster (less where
        # a tile's fixed cost, twice as long in K at FP8, weighs), and faster than BF16
        ratio = float(bf16[name].fwd_s) / float(fp8[name].fwd_s)
        fp8_eff = h100.fp8_gemm_efficiency or h100.gemm_efficiency
        assert 1.2 < ratio <= 2.0 * fp8_eff / h100.gemm_efficiency + 1e-9
    assert float(fp8["attention core (flash)"].fwd_s) == float(bf16["attention core (flash)"].fwd_s)


def test_casts_are_memory_bound_kernels(plans):
    fp8, _ = ops(plans[1])
    h = 4096
    tokens = 8192  # one micro-batch of one 8k sequence
    # the output projection's input is the only dense GEMM input not cast by the op before it (TE
    # fuses the cast into LayerNormLinear / LayerNormMLP): read 2 B, write 1 B and a 1 B transpose
    assert float(fp8["FP8 cast of GEMM inputs"].bytes) == pytest.approx(4 * tokens * 4096)
    assert (
        float(fp8["FP8 cast of GEMM inputs"].bwd_s) == 0
        and float(fp8["FP8 cast of output gradients"].fwd_s) == 0
    )
    # without Transformer Engine's weight cache (is_first_microbatch), every micro-batch casts the
    # weights: read 2 B, write 1 B and a 1 B transpose
    weights = h * (h + 2 * 1024) + h * h + 3 * h * 14336
    uncached, _ = ops(plans[1].with_training(fp8_weight_cache=False))
    assert float(uncached["FP8 cast of weights"].bytes) == pytest.approx(4 * weights)
    assert "FP8 cast of weights" not in ops(plans[1].with_training(fp8_param_gather=True))[0]
    # Megatron-Core's default: cast once a step, not in the layer
    assert "FP8 cast of weights" not in fp8


def test_fp8_memory_holds_the_fp8_weight_copies(plans):
    b = estimate(
        plans[0], resolve_config(plans[0], tp=1, pp=1, micro_batch_size=1, zero_stage=1)
    ).values
    f = estimate(
        plans[1], resolve_config(plans[1], tp=1, pp=1, micro_batch_size=1, zero_stage=1)
    ).values
    assert f["weights_bytes"] == pytest.approx(
        b["weights_bytes"] * 1.5
    )  # bf16 weights + their FP8 copy


def test_mfu_is_against_the_fp8_peak_unless_asked(plans):
    """Issue 19, item 3: an FP8 run's MFU is against the FP8 peak (it never exceeds 1); mfu_peak:
    bf16 reports it as NeMo and Megatron-LM do, against the BF16 peak."""
    f = estimate(
        plans[1], resolve_config(plans[1], tp=1, pp=1, micro_batch_size=1, zero_stage=1)
    ).values
    h100 = presets.gpu("h100-sxm")
    assert f["mfu"] == pytest.approx(f["model_tflops_per_gpu"] * 1e12 / h100.peak("fp8"))
    asked = plans[1].with_training(mfu_peak="bf16")
    g = estimate(asked, resolve_config(asked, tp=1, pp=1, micro_batch_size=1, zero_stage=1)).values
    assert g["mfu"] == pytest.approx(f["mfu"] * h100.peak("fp8") / h100.peak("bf16"))
