"""`validate --memory`: measured memory peaks of published runs beside the model's figure for the
same counter (issue 29; SPEC 13 "Memory as it is measured")."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.cost import memory as mem
from perfmodel.engine import memory as engine_memory
from perfmodel.inputs import presets
from perfmodel.review.validate import validate
from perfmodel.review.validate_memory import memory_rows, predicted_for, summary


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
        a * engine_memory.RESERVED_OVER_ALLOCATED + engine_memory.CUBLAS_WORKSPACE_BYTES
    )
    assert predicted_for("device", a) == reserved + engine_memory.CUDA_CONTEXT_BYTES
    with pytest.raises(ValueError, match="unknown memory quantity"):
        predicted_for("peak", a)


def test_torchtitan_peaks_within_the_issue_targets(titan):
    """Issue 29's targets on the runs of the fitted source (torchtitan 2024-12): within 10% on
    average; before issue 29 the model was 29-48% under every one of them. The nine include the
    two 405B PP 8 runs transcribed with the schedules."""
    rows = [r for r in memory_rows(titan.cases) if r.record.startswith("TORCHTITAN-2412")]
    assert len(rows) == 9
    errs = np.abs([r.error_pct for r in rows])
    assert errs.mean() <= 10.0
    assert all(r.fits for r in rows)  # every one of them ran


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the 405B PP 8 1F1B run's reserved peak is 28% above the model's: its micro-batch count"
        " is not in the benchmark notes (torchtitan's default of 8 is assumed), and the activations"
        " in flight hang on it"
    ),
)
def test_torchtitan_peaks_within_twenty_percent_each(titan):
    rows = [r for r in memory_rows(titan.cases) if r.record.startswith("TORCHTITAN-2412")]
    assert max(abs(r.error_pct) for r in rows) <= 20.0


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
