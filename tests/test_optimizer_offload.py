"""The optimizer's CPU offload (issue 37 item 3; cost/optimizer_offload.py, Megatron-Core's
--optimizer-cpu-offload): its worked numbers, its memory and time in an estimate, the rules
Megatron-LM asserts, its flags read and written, and the search turning it on where nothing cheaper
frees the memory."""

from __future__ import annotations

import json
import re

import helpers
import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.cost import optimizer_offload as oo
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load_plan, presets
from perfmodel.inputs.megatron import read_args


def test_adam_on_the_cpu_moves_80_bytes_a_parameter():
    """torch's single-tensor AdamW, kernel by kernel: 8 + 12 + 8 + 12 + 24 + 16 B."""
    assert oo.ADAM_HOST_BYTES == 80.0
    assert oo.host_bytes_per_param("sgd") == 40.0


def test_worked_step_overlapped_and_not():
    """1e9 parameters, all offloaded, fp32 main gradients, a 50 GB/s link, 100 GB/s of host
    memory: D2H 4e9 / 50e9 = 0.08 s, the CPU 80e9 / 100e9 = 0.8 s, H2D 0.08 s. Overlapped the CPU
    sets the pace (0.8 s); one after the other 0.96 s. Half offloaded: half of each."""
    args = dict(gradient_bytes=4.0, optimizer="adam", link_bytes_per_s=50e9)
    overlapped = oo.step_seconds(1e9, 1.0, **args, host_memory_bytes_per_s=100e9, overlap=True)
    serial = oo.step_seconds(1e9, 1.0, **args, host_memory_bytes_per_s=100e9, overlap=False)
    assert float(overlapped) == pytest.approx(0.8)
    assert float(serial) == pytest.approx(0.96)
    half = oo.step_seconds(1e9, 0.5, **args, host_memory_bytes_per_s=100e9, overlap=False)
    assert float(half) == pytest.approx(0.48)
    # a slow link: the copies set the pace
    slow = oo.step_seconds(1e9, 1.0, **{**args, "link_bytes_per_s": 2e9},
                           host_memory_bytes_per_s=100e9, overlap=True)  # fmt: skip
    assert float(slow) == pytest.approx(2.0)
    assert float(oo.gpu_state_bytes(12.0, 0.25)) == pytest.approx(9.0)


@pytest.fixture(scope="module")
def llama70b():
    plan = load_plan("llama2-70b-h100.yaml")
    return plan, resolve_config(plan, tp=8, pp=4, vp=1, zero_stage=1, sequence_parallel=True)


def test_an_estimate_with_the_offload(llama70b):
    """Llama-2 70B, tp 8 pp 4 dp 8, ZeRO-1: the rank's optimizer shard is its stage's parameters
    over dp. Offloaded whole, the optimizer's states leave HBM (12 B a parameter of the shard), and
    the step grows by the CPU's update of that shard at the DGX H100's 76.8 GB/s a GPU (80 B a
    parameter, the copies hidden behind it) plus the gradient buffer's passes the GPU keeps, less
    the GPU's own update of it."""
    plan, cfg = llama70b
    assert plan.system.host_memory_bandwidth_bytes_per_s == pytest.approx(76.8e9)
    base = estimate(plan, cfg).values
    off = estimate(plan.with_training(optimizer_cpu_offload=1.0), cfg).values
    assert off["optimizer_bytes"] == 0.0
    assert off["total_bytes"] == pytest.approx(base["total_bytes"] - base["optimizer_bytes"])
    shard = base["optimizer_bytes"] / 12.0  # parameters of the rank's optimizer shard
    cpu = shard * 80.0 / 76.8e9
    gpu = plan.system.gpu
    buffer = shard * 3 * 4 / (gpu.hbm_bandwidth_bytes_per_s * gpu.hbm_efficiency)
    # (the time's shard is the slowest stage's, the memory's the most loaded one's: they differ by
    # the final norm's h parameters)
    assert off["optimizer"] == pytest.approx(cpu + buffer, rel=1e-5)
    assert off["step_time_s"] - base["step_time_s"] == pytest.approx(
        off["optimizer"] - base["optimizer"], rel=1e-6
    )
    half = estimate(plan.with_training(optimizer_cpu_offload=0.5), cfg).values
    assert half["optimizer_bytes"] == pytest.approx(base["optimizer_bytes"] / 2)
    # what leaves HBM is in host memory, said apart from the GPU's total
    assert base["optimizer_host_bytes"] == 0.0
    assert off["optimizer_host_bytes"] == pytest.approx(base["optimizer_bytes"])
    assert half["optimizer_host_bytes"] == pytest.approx(base["optimizer_bytes"] / 2)


def test_memory_says_where_the_offloaded_states_are(tmp_path):
    """`memory` prints the host's share on its own line (it used to print only 'optimizer
    states 0 B'), and --json carries it as optimizer_host_bytes."""
    path = tmp_path / "plan.yaml"
    path.write_text(
        "model: llama2-70b\nsystem: {gpu: h100-sxm, num_gpus: 64}\n"
        "training: {global_batch_size: 64, optimizer_cpu_offload: 1.0}\n"
        "parallel: {tp: 8, pp: 2, zero_stage: 1}\n"
    )
    text = CliRunner().invoke(main, ["memory", str(path)])
    assert text.exit_code == 0, text.output
    line = next(x for x in text.output.splitlines() if "host memory" in x)
    data = json.loads(CliRunner().invoke(main, ["memory", str(path), "--json"]).output)
    assert data["optimizer_bytes"] == 0.0
    assert data["optimizer_host_bytes"] > 1e9
    assert f"{data['optimizer_host_bytes'] / 1e9:.3g} GB (offload)" in line


@pytest.mark.parametrize(
    "training, parallel, message",
    [
        ({}, {"zero_stage": 0}, "needs the distributed optimizer: set parallel.zero_stage to 1"),
        ({"framework": "fsdp"}, {"zero_stage": 3}, "fsdp has no optimizer CPU offload"),
        ({"framework": "primus"}, {"zero_stage": 1}, "primus has no optimizer CPU offload"),
        (
            {"dtype": "fp8", "fp8_recipe": "tensorwise", "fp8_param_gather": True},
            {"zero_stage": 1},
            "with fp8_param_gather needs fp8_recipe delayed",
        ),
    ],
)
def test_what_megatron_asserts_is_refused_by_name(training, parallel, message):
    with pytest.raises(PerfModelError, match=re.escape(message)):
        presets.plan_from_mapping(
            {
                "model": "llama2-70b",
                "system": {"gpu": "h100-sxm", "num_gpus": 64},
                "training": {"global_batch_size": 64, "optimizer_cpu_offload": 1.0, **training},
                "parallel": {"tp": 8, "pp": 2, **parallel},
            },
            "t",
        )


def test_a_host_without_its_memory_bandwidth_is_asked_for_it():
    """The GPU presets carry their usual host's; a plan that clears it is asked for it by name."""
    data = {
        "model": "llama2-70b",
        "system": {"gpu": "h100-sxm", "num_gpus": 64, "host_memory_bandwidth_bytes_per_s": None},
        "training": {"global_batch_size": 64, "optimizer_cpu_offload": 1.0},
        "parallel": {"tp": 8, "pp": 2, "zero_stage": 1},
    }
    with pytest.raises(PerfModelError, match=r"system\.host_memory_bandwidth_bytes_per_s"):
        presets.plan_from_mapping(data, "t")
    data["system"]["host_memory_bandwidth_bytes_per_s"] = "60 GB/s"
    plan = presets.plan_from_mapping(data, "t")
    assert plan.system.host_memory_bandwidth_bytes_per_s == pytest.approx(60e9)


BASE = (
    "--num-layers 8 --hidden-size 64 --num-attention-heads 2 --micro-batch-size 1"
    " --global-batch-size 8 --vocab-size 100 --use-distributed-optimizer"
)


def test_megatron_flags_read_as_megatron_reads_them():
    """--optimizer-cpu-offload with its fraction (default 1.0) and the overlap (default off);
    without --use-precision-aware-optimizer Megatron-LM asserts, and so does the import."""
    aware = BASE + " --use-precision-aware-optimizer --optimizer-cpu-offload"
    tr = read_args(aware, "h100-sxm", num_gpus=8).plan["training"]
    assert (tr["optimizer_cpu_offload"], tr["optimizer_offload_overlap"]) == (1.0, False)
    tr = read_args(
        aware + " --optimizer-offload-fraction 0.25 --overlap-cpu-optimizer-d2h-h2d", "h100-sxm", 8
    ).plan["training"]
    assert (tr["optimizer_cpu_offload"], tr["optimizer_offload_overlap"]) == (0.25, True)
    with pytest.raises(PerfModelError, match="needs --use-precision-aware-optimizer"):
        read_args(BASE + " --optimizer-cpu-offload", "h100-sxm", num_gpus=8)
    with pytest.raises(PerfModelError, match="give a fraction from 0 to 1"):
        read_args(aware + " --optimizer-offload-fraction 2", "h100-sxm", num_gpus=8)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def squeezed(tmp_path_factory):
    """Llama-2 70B on 32 H100 at tp 8 pp 2 with micro-batches of 4 and no recompute, all fixed,
    the optimizer's states kept at BF16 moments and fp32 masters (FP8 moments and FP16 masters,
    tried before the offload, would fit): BF16 gradients do not free enough, the offload does.
    With a 6.5 GB reserve the plain run (88.1 GB of 79 GB usable) does not fit at all, beyond the
    memory band; at the default reserve it is tight, ranks first (16% faster than the offload,
    beyond the step band) and names the offload beside it (test_memory_band)."""
    path = tmp_path_factory.mktemp("offload") / "plan.yaml"
    path.write_text(
        "base: llama2-70b-h100\ntraining: {global_batch_size: 64, exp_avg_dtype: bf16,"
        " exp_avg_sq_dtype: bf16, main_params_dtype: fp32}\n"
        "system: {gpu: h100-sxm, num_gpus: 32, intra_node_link: nvlink4, inter_node_link: ib-ndr,"
        " memory_reserve_bytes: 6.5e9}\n"
        "parallel: {tp: 8, pp: 2, recompute: none, micro_batch_size: 4}\n"
    )
    return path


def test_the_search_offloads_where_nothing_cheaper_fits_and_says_so(squeezed):
    r = run("plan", squeezed, "--top", "1", "--json")
    assert r.exit_code == 0, r.output
    best = json.loads(r.stdout)["results"][0]
    assert best["config"]["memory_switch"] == "optimizer-cpu-offload"
    text = run("plan", squeezed).output
    assert "z1 oc" in text and "--optimizer-cpu-offload" in text
    assert "optimizer CPU offload: 100% of the optimizer's states" in text
    emitted = run("plan", squeezed, "--emit", "megatron").output
    for flag in ("--use-precision-aware-optimizer", "--optimizer-cpu-offload",
                 "--optimizer-offload-fraction 1", "--overlap-cpu-optimizer-d2h-h2d"):  # fmt: skip
        assert flag in emitted


def test_the_emitted_offload_reads_back_to_the_same_step(squeezed, tmp_path):
    """`plan --emit megatron` and `import megatron` of what it wrote: the offload, its fraction
    and its overlap come back, and the read-back plan estimates the answer's step."""
    trip = helpers.emit_round_trip(squeezed, tmp_path)
    assert trip.estimate is not None, trip.searched.output
    training = trip.back["training"]
    assert training["optimizer_cpu_offload"] == 1.0 and training["optimizer_offload_overlap"]
    assert trip.estimate["step_time_s"] == pytest.approx(trip.best["step_time_s"], rel=1e-9)


def test_fp8_moments_and_fp16_masters_come_before_the_offload(tmp_path):
    """The same squeezed run with the optimizer's precision left free: FP8 moments and FP16
    master weights (Transformer Engine's FusedAdam, no time cost) fit before the host's step is
    needed; the emitted arguments carry them and read back to the same step."""
    path = tmp_path / "plan.yaml"
    path.write_text(
        "base: llama2-70b-h100\ntraining: {global_batch_size: 64}\n"
        "system: {gpu: h100-sxm, num_gpus: 32, intra_node_link: nvlink4, inter_node_link: ib-ndr}\n"
        "parallel: {tp: 8, pp: 2, recompute: none, micro_batch_size: 4}\n"
    )
    trip = helpers.emit_round_trip(path, tmp_path)
    assert trip.best["config"]["memory_switch"] == "fp8-moments+bf16-main-grads+fp16-main-params"
    for flag in ("--exp-avg-dtype fp8", "--exp-avg-sq-dtype fp8", "--main-params-dtype fp16"):
        assert flag in trip.emitted.stdout
    assert trip.estimate is not None, trip.searched.output
    training = trip.back["training"]
    assert (training["exp_avg_dtype"], training["main_params_dtype"]) == ("fp8", "fp16")
    assert trip.estimate["step_time_s"] == pytest.approx(trip.best["step_time_s"], rel=1e-9)
