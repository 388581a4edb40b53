"""`validate --memory`: measured memory peaks of published runs beside the model's figure for the
same counter (issue 29; SPEC 13 "Memory as it is measured")."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.cost import memory as mem
from perfmodel.engine import reserve as engine_reserve
from perfmodel.inputs import presets
from perfmodel.review.validate import validate
from perfmodel.review.validate_memory import (
    memory_rows,
    memory_validation,
    predicted_for,
    reading_allocated,
    summary,
)


@pytest.fixture(scope="module")
def titan():
    return validate(["titan", "trainy"])


def test_every_peak_names_its_counter_and_source():
    peaks = presets.memory_peaks()
    assert len(peaks) >= 10
    for record, p in peaks.items():
        assert p["quantity"] in ("allocated", "reserved", "device", "unstated"), record
        assert p["peak_bytes"] > 1e9 and p["source"], record
    # torchtitan's log line is the reserved peak (torchtitan/tools/utils.py max_reserved_gib)
    assert peaks["TORCHTITAN-2412-LLAMA31_8B-128xH100-FSDP"]["quantity"] == "reserved"
    assert peaks["TORCHTITAN-2412-LLAMA31_8B-128xH100-FSDP"]["peak_bytes"] == 67.0 * 2**30


def test_reserved_is_allocated_with_fragmentation_and_workspaces():
    a = 50e9
    assert predicted_for("allocated", a) == a
    reserved = predicted_for("reserved", a)
    assert reserved == pytest.approx(
        a * engine_reserve.RESERVED_OVER_ALLOCATED + engine_reserve.CUBLAS_WORKSPACE_BYTES
    )
    assert predicted_for("device", a) == reserved + engine_reserve.CUDA_CONTEXT_BYTES
    with pytest.raises(ValueError, match="unknown memory quantity"):
        predicted_for("peak", a)


def test_torchtitan_peaks_within_the_issue_targets(titan):
    """Issue 29's targets on the validation cases of torchtitan's 2024-12 notes: within 10% on
    average and 20% each; before issue 29 the model was 29-48% under every one of them. The nine
    include the two 405B PP 8 runs (1F1B was 28% under while FSDP2's fp32 accumulation of the
    unsharded gradients under PP was not modelled)."""
    rows = [r for r in memory_rows(titan.cases) if r.record.startswith("TORCHTITAN-2412")]
    assert len(rows) == 9
    errs = np.abs([r.error_pct for r in rows])
    assert errs.mean() <= 10.0 and errs.max() <= 20.0
    assert all(r.fits for r in rows)  # every one of them ran


@pytest.fixture(scope="module")
def whole():
    return memory_validation()


def test_every_published_peak_within_the_issue_targets(whole):
    """Issue 29's "done when": over every measured peak the project holds (validation cases and
    memory runs, three sources), the prediction of the counter each source printed is within 10%
    on average and 20% at most (before: 16.8% and 44.8% over 15 peaks)."""
    rows, s = whole
    assert s["peaks"] == len(rows) >= 25
    assert {r.quantity for r in rows} == {"reserved", "device"}
    assert s["mean_abs_error_pct"] <= 10.0 and s["max_abs_error_pct"] <= 20.0


# published-2026c's runs the model puts over the usable line of their GPU, within its memory band
# (tight, not "does not fit"; issue 37): DGX Cloud's Llama 3.1 405B in BF16 on 512 H100 (fp32
# gradient reduction, NeMo's bf16_mixed default; no recompute, its recipe's) by 1.1 GB, 1.4% of the
# H100; torchtitan's Llama 2 13B on 64 A100 without checkpointing at micro-batch 2 (eager, 2024-04)
# by 4.8 GB: 80 GB of activations
OVER = {"dgxc-405b-h100-bf16-512gpu", "titan24-l2-13b-64gpu"}


def test_every_published_run_fits_under_the_default_reserve(whole):
    """A run that ran cannot need more than its GPU: every validation case and memory run fits
    under the default reserve, or is tight: within the memory band of the line (issue 37; before
    issue 29: 11 of 103 did not fit)."""
    _, s = whole
    assert s["runs"] >= 155 and not s["not_fitting"]


def test_published_2026c_runs_over_the_line_are_tight(whole):
    """The two published-2026c runs over the usable line are within the band: tight, searched and
    ranked as production recipes run them, not refused."""
    _, s = whole
    assert set(s["tight"]) >= OVER and not OVER & set(s["not_fitting"])


def test_primus_reads_the_device_after_its_first_step():
    """Primus logs rocm-smi's VRAM use (GiB, the largest over the ranks) after iterations 1 and 2;
    its rows fit the first: before Adam's first step there are no moments, so the reading is the
    larger of the forward-backward peak without them and the states with them."""
    peaks = presets.memory_peaks()
    row = peaks["PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-V-Min"]
    assert row["quantity"] == "device" and row["reading"] == "first-step"
    assert row["peak_bytes"] == pytest.approx(11.9 * 2**30)
    plan = next(c for c in presets.validation_cases() if "v-min" in c["name"])["plan"]
    v = {"total_bytes": 10.0, "weights_bytes": 1.0, "gradients_bytes": 2.0, "optimizer_bytes": 6.0}
    # Adam with fp32 master and moments: 8 of its 12 bytes are the moments
    assert reading_allocated(v, plan, "first-step") == pytest.approx(max(10.0 - 4.0, 9.0))
    assert reading_allocated(v, plan) == 10.0
    with pytest.raises(ValueError, match="unknown memory reading"):
        reading_allocated(v, plan, "last-step")


def test_the_loss_holds_twelve_bytes_a_logit_in_torchtitan():
    """F.cross_entropy on pred.float(): the backward holds the saved fp32 log_softmax output,
    nll_loss's fp32 gradient and log_softmax's fp32 gradient; Megatron's in-place fp32 softmax 4
    (Korthikanti 2022 Sec. 4.1)."""
    s, b, h, V, t = 8192, 2, 4096, 128256, 1
    *_, megatron = mem.activation_terms(s, b, h, 0, V, t, False, 0)
    *_, titan = mem.activation_terms(s, b, h, 0, V, t, False, 0, 12.0)
    assert float(titan - megatron) == pytest.approx(8 * s * b * V)
    assert float(megatron) == pytest.approx(4 * s * b * h + 4 * s * b * V)


def test_fsdp_keeps_no_sixteen_bit_copy_of_its_shard(titan):
    """FSDP2's sharded parameter is the fp32 master the optimizer steps: under ZeRO-3 the weights
    are the gathered units only; the 8B on 8 and on 128 GPUs gathers the same units."""
    by = {c.name: c.estimate.values for c in titan.cases}
    assert by["titan-8b-8gpu-fsdp"]["weights_bytes"] == pytest.approx(
        by["titan-8b-128gpu-fsdp"]["weights_bytes"]
    )


def test_summary_counts_the_runs_that_do_not_fit(titan):
    rows = memory_rows(titan.cases)
    s = summary(rows, titan.cases)
    assert s["peaks"] == len(rows) and s["runs"] == len(titan.cases)
    assert s["runs_not_fitting"] == sum(not c.estimate.values["fits"] for c in titan.cases)


def test_cli_memory_table_json_and_text():
    r = CliRunner().invoke(main, ["validate", "titan-8b", "--memory", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    row = next(m for m in out["memory"] if m["case"] == "titan-8b-128gpu-fsdp")
    assert row["quantity"] == "reserved"
    assert row["predicted_bytes"] > row["allocated_bytes"]
    assert set(out["summary"]) >= {"mean_abs_error_pct", "max_abs_error_pct", "not_fitting"}
    text = CliRunner().invoke(main, ["validate", "titan-8b", "--memory"])
    assert text.exit_code == 0 and "GiB" in text.output
    assert max(len(x) for x in text.output.splitlines()) <= 80


def _layer(shape, moe=False, **opts):
    from perfmodel.cost.shapes import Options
    from perfmodel.cost.transformer import decoder_layer

    one = np.array([1.0])
    return decoder_layer(
        shape, Options(flash=True, **opts), one, 4096, one, np.array([False]), moe=moe
    )


def test_flash_keeps_its_sixteen_bit_output_under_fp8():
    """Flash attention's backward reads its output O; in 16 bits O is the output projection's
    saved input, under FP8 the projection keeps an FP8 copy and O stays in 16 bits."""
    from perfmodel.cost.ops import FusedAttention
    from perfmodel.cost.transformer import LayerShape

    shape = LayerShape.of(presets.model("llama3-8b"))
    core = {
        g: next(op for op in _layer(shape, gemm_bytes=g).ops if isinstance(op, FusedAttention))
        for g in (2, 1)
    }
    out16 = 2 * 4096 * shape.hidden  # bytes of O for one sequence of 4096 tokens
    assert np.asarray(core[1].saved - core[2].saved).item() == pytest.approx(out16)


def test_deepseek_caches_the_swiglu_input_in_fp8():
    """DeepSeek-V3 Sec. 3.3.2: the experts' SwiGLU input cached in FP8 with its 1 x 128 scales,
    and the SwiGLU output (fc2's input) recomputed in the backward."""
    plan = next(c for c in presets.validation_cases() if c["name"].startswith("dsv3"))["plan"]
    from perfmodel.cost.transformer import LayerShape

    shape = LayerShape.of(plan.model)
    scale = 4 / 128
    kw = dict(gemm_bytes=1, scale_bytes=scale)
    plain = _layer(shape, True, **kw)
    cached = _layer(shape, True, fp8_swiglu_cache=True, **kw)

    def act(block):
        return next(op for op in block.ops if "moe_act" in op.modules)

    def one(x):
        return np.asarray(x).ravel()[0]

    assert one(act(cached).saved) == pytest.approx(one(act(plain).saved) * (1 + scale) / 2)
    modules = ("moe_act",)
    fewer = one(plain.activation_bytes(1, modules) - cached.activation_bytes(1, modules))
    assert fewer > one(act(plain).saved - act(cached).saved)  # and fc2's FP8 copy is rebuilt


def test_fp8_param_gather_keeps_the_weights_in_fp8_only():
    """Megatron-Core --fp8-param-gather: the compute param is FP8, no 16-bit copy beside it."""
    from perfmodel.specs.precision import Precision

    p = Precision.of("fp8", True, "adam")
    w16, *_ = mem.model_state_bytes(1e9, 1, 1, p)
    w8, *_ = mem.model_state_bytes(1e9, 1, 1, p, fp8_params=True)
    assert float(w16 - w8) == pytest.approx(p.weight_bytes * 1e9)
    assert float(w8) == pytest.approx(p.fp8_weight_bytes * 1e9)


def test_dtensor_saves_the_output_layers_input_gathered():
    """TP with SP: Megatron saves the output layer's sequence-sharded input (2 s b h / t) and
    gathers it again for the backward; DTensor's ColwiseParallel saves the gathered one (2 s b h).
    """
    s, b, h, V, t = 8192, 16, 8192, 128256, 8.0
    *_, megatron = mem.activation_terms(s, b, h, 0, V, t, True, 0, 12.0)
    *_, titan = mem.activation_terms(s, b, h, 0, V, t, True, 0, 12.0, True)
    assert float(titan - megatron) == pytest.approx(2 * s * b * h * (1 - 1 / t))
    *_, no_sp = mem.activation_terms(s, b, h, 0, V, t, False, 0, 12.0, True)
    assert float(no_sp) == pytest.approx(float(megatron))


def test_the_loss_keeps_what_its_kernel_keeps():
    """Bytes a logit at the loss's peak: torchtitan's F.cross_entropy on an fp32 copy 12; its
    compiled loss (2025, components/loss.py) the 16-bit logits and gradient, 4; Megatron's fp32
    exp_logits 4, fused natively or not; Transformer Engine's fused kernel (v2.14) writes the
    gradient into the 16-bit logits it saved, 2."""
    from perfmodel.engine.memory import loss_logit_bytes

    titan = next(c for c in presets.validation_cases() if c["name"] == "titan-8b-8gpu-fsdp")
    nemo = next(c for c in presets.validation_cases() if c["name"] == "nemo-llama3-8b-8gpu")
    bridge = next(c for c in presets.validation_cases() if c["name"].startswith("mb2604-70b"))
    assert loss_logit_bytes(titan["plan"]) == 12.0
    assert loss_logit_bytes(titan["plan"].with_training(fused_cross_entropy=True)) == 4.0
    assert loss_logit_bytes(nemo["plan"]) == 4.0
    assert bridge["plan"].training.cross_entropy_fusion_impl == "te"
    assert loss_logit_bytes(bridge["plan"]) == 2.0


def test_fsdp2_under_pp_accumulates_the_gathered_gradients_in_fp32(titan):
    """torch.distributed.pipelining runs every micro-batch but the last without gradient sync, and
    FSDP2 upcasts the unsharded gradient it then accumulates to the reduce dtype
    (FSDPParam.to_accumulated_grad_if_needed), fp32 in torchtitan: with the gathered bf16 weights,
    6 bytes a parameter of the stage until the last backward."""
    case = next(c for c in titan.cases if c.name == "titan-405b-512gpu-pp8-1f1b")
    v = case.estimate.values
    params = float(v["params_per_gpu"])
    # FSDP's shard is the fp32 master the optimizer steps: no 16-bit copy of it (params_are_master)
    assert float(v["weights_bytes"]) == pytest.approx(params * (2 + 4), rel=1e-6)


def test_deepseek_caches_the_attention_output_once_in_e5m6():
    """DeepSeek-V3 report Sec. 3.3.3: the input of the Linear after attention, which the attention
    backward reads too, cached once in E5M6 (12 bits), not 16 bits plus the projection's FP8."""
    from perfmodel.cost.ops import FusedAttention
    from perfmodel.cost.transformer import LayerShape

    plan = next(c for c in presets.validation_cases() if c["name"].startswith("dsv3"))["plan"]
    shape = LayerShape.of(plan.model)
    kw = dict(gemm_bytes=1, scale_bytes=4 / 128)
    plain, e5m6 = _layer(shape, **kw), _layer(shape, attn_out_bytes=1.5, **kw)

    def core(block):
        return one(next(o for o in block.ops if isinstance(o, FusedAttention)).saved)

    def proj(block):
        return one(next(o for o in block.ops if o.name == "output projection").saved)

    # elements of O for one sequence of 4096 tokens: heads x v_head_dim a token
    out = 4096 * plan.model.num_attention_heads * plan.model.v_head_dim
    assert core(plain) - core(e5m6) == pytest.approx(out * (2 - 1.5))
    assert proj(e5m6) == 0.0 and proj(plain) == pytest.approx(out * (1 + 4 / 128))


def test_a_recomputed_norm_frees_its_output_not_the_fp8_copies():
    """Megatron-Core's layernorm recompute (CheckpointWithoutOutput) discards the norm's output,
    which its 16-bit consumers saved (the router, in 16 bits under every recipe; DeepSeek-V3 report
    Sec. 3.2.3: 'eliminating the need to persistently store their output activations'); a
    consumer's own FP8 copy stays."""
    from perfmodel.cost.transformer import LayerShape

    shape = LayerShape.of(presets.model("qwen3-235b-a22b"))
    norm_output = 2 * 4096 * shape.hidden  # 16 bits, one sequence of 4096 tokens
    # in 16 bits the QKV projection's input (norm 1) and the router's (norm 2); under FP8 the
    # QKV projection keeps its own FP8 copy, the router its 16-bit input
    for gemm_bytes, consumers in ((2, 2), (1, 1)):
        block = _layer(shape, True, gemm_bytes=gemm_bytes)
        freed = one(block.activation_bytes(1, ())) - one(block.activation_bytes(1, ("layernorm",)))
        # the norms' own inputs stay: the recompute's checkpoint (1 and 2, 16 bits each)
        assert freed == pytest.approx(consumers * norm_output, rel=1e-6)


def one(x):
    return float(np.asarray(x).ravel()[0])


def test_apex_keeps_remainders_or_no_master_copy():
    """NeMo 24.07's distributed_fused_adam (apex DistributedFusedAdam): with an fp32 optimizer over
    bf16 weights, the fp32 master's 16 low bits (2 B); with a bf16 optimizer (Nemotron-4 340B's
    recipe) the moments in bf16 and no master copy."""
    from perfmodel.specs.precision import optimizer_state_bytes

    assert optimizer_state_bytes("adam", main="remainders") == 10.0
    assert optimizer_state_bytes("adam", "bf16", "bf16", "none") == 4.0
    by = {c["name"]: c["plan"].training for c in presets.validation_cases()}
    assert by["nemo-llama3-8b-8gpu"].main_params_dtype == "remainders"
    assert by["nemo-nemotron-340b-128gpu"].main_params_dtype == "none"
    assert not by["nemo-llama3-8b-8gpu"].grad_accum_fp32  # grad_sync_dtype=bf16


def test_cli_memory_runs_without_a_peak_and_unknown_names():
    """A memory run is named like a validation case; runs with no peak print no table, and a name
    matching neither set is one clear error."""
    r = CliRunner().invoke(main, ["validate", "--memory", "fms-eager-13b"])
    assert r.exit_code == 0, r.output
    assert "no measured peak among these runs" in r.output
    assert "all 2 published runs fit under the default reserve" in r.output
    bad = CliRunner().invoke(main, ["validate", "--memory", "nosuchrun"])
    assert bad.exit_code != 0 and "no validation case or memory run matches nosuchrun" in (
        bad.output
    )
