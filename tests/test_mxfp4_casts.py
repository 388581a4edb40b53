"""MXFP4's quantizing kernels (issue 40): ROCm Transformer Engine writes the norm's output in 16
bits before it quantizes it to MXFP4 ("For MXFP4, we need ln_out in high precision",
layernorm_linear.py; the CustomRecipe form through ``with_quantized_norm = ... and not custom``),
so every GEMM input of an MXFP4 layer is cast in a kernel of its own; FP8 keeps its norm-fused
casts. MX quantizing kernels run at the GPU's measured share of HBM bandwidth
(mx_cast_efficiency)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.cost.layer import Hardware
from perfmodel.inputs import presets
from perfmodel.specs.precision import DTYPE_BYTES, SCALE_BYTES

MLPERF60 = Path(__file__).parent / "data" / "mlperf60" / "amd-8b-mi355x-mxfp4.yaml"
CAST = "FP8 cast of GEMM inputs"


def per_layer(path: Path) -> dict[str, dict]:
    r = CliRunner().invoke(main, ["estimate", str(path), "--per-layer", "--json"])
    assert r.exit_code == 0, r.output
    return {op["name"]: op for op in json.loads(r.stdout)["per_layer"]}


def _plan(tmp_path: Path, dtype: str) -> Path:
    f = tmp_path / f"{dtype}.yaml"
    f.write_text(MLPERF60.read_text().replace("dtype: mxfp4", f"dtype: {dtype}"))
    return f


def test_mxfp4_casts_every_gemm_input_fp8_only_the_unfused_ones(tmp_path):
    """Bytes of the input casts of one layer (one rank, one micro-batch of b x s tokens): read
    16 bits, write row-wise and column-wise copies with their block scales. MXFP4: the inputs of
    QKV, the output projection, the MLP's gate+up and down (h, h, h, ffn wide); FP8 (per-tensor
    scales): the output projection's alone, the others written by the norm or activation."""
    m = presets.model("llama3-8b")
    tokens = 2 * 8192  # micro-batch 2 at sequence 8192, tp 1
    h, ffn = m.hidden_size, m.ffn
    mx_el = 2 + 2 * (DTYPE_BYTES["mxfp4"] + SCALE_BYTES["mxfp4"])
    fp8_el = 2 + 2 * DTYPE_BYTES["fp8"]
    mx = per_layer(MLPERF60)[CAST]
    f8 = per_layer(_plan(tmp_path, "fp8"))[CAST]
    assert mx["bytes"] == pytest.approx(tokens * (3 * h + ffn) * mx_el, rel=1e-6)
    assert f8["bytes"] == pytest.approx(tokens * h * fp8_el, rel=1e-6)
    # memory-bound, a launch a tensor: MX casts at the GPU's MX quantize share of HBM bandwidth,
    # FP8's at the streaming one
    gpu = presets.gpu("mi355x")
    bw, launch = gpu.hbm_bandwidth_bytes_per_s, gpu.kernel_overhead_s
    mx_s = mx["bytes"] / (bw * gpu.mx_cast_efficiency) + 4 * launch
    assert mx["forward_s"] == pytest.approx(mx_s, rel=1e-3)
    assert f8["forward_s"] == pytest.approx(
        f8["bytes"] / (bw * gpu.hbm_efficiency) + launch, rel=1e-3
    )


@pytest.mark.parametrize(
    "gpu, dtype, share",
    [("mi355x", "mxfp4", 0.46), ("mi350x", "mxfp8", 0.46), ("mi355x", "fp8", 0.0)]
    + [("b200", "mxfp4", 0.0), ("b200", "mxfp8", 0.0)],
)
def test_mx_quantizing_kernels_run_at_the_measured_share_only_where_measured(gpu, dtype, share):
    """ROCm TE's MX quantize kernels on the MI355X: 44-49% of HBM (its PR 598), mean 0.46; the
    MI350X shares the memory system; per-tensor FP8 casts and GPUs without a figure keep the
    streaming fraction (0: none set)."""
    assert Hardware.from_gpu(presets.gpu(gpu), dtype).cast_eff == pytest.approx(share)


def test_the_mlperf60_plan_is_the_submissions_configuration():
    """config_MI355X_1x8x1.sh and its conf yaml (training_results_v6.0): MBS 2, GBS 32, TP/PP/CP
    1, BF16 gradients (accumulate_allreduce_grads_in_fp32 false), no FP8/FP4 parameter gather."""
    r = CliRunner().invoke(main, ["estimate", str(MLPERF60), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    c = d["config"]
    assert (c["tp"], c["pp"], c["cp"], c["dp"], c["micro_batch_size"]) == (1, 1, 1, 8, 2)
    # ZeRO-1 keeps every gradient: 2 B a parameter in BF16 (4 B with fp32 accumulation)
    assert d["memory"]["gradients_bytes"] == pytest.approx(2 * d["memory"]["params_per_gpu"])
