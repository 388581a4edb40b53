"""The planning answer (issue 23): a run's days, GPU-hours, energy, cost and goodput, worked by
hand from Young 1974 / Daly 2006 and the defaults' sources."""

import json
import math

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.cost import goodput as gp
from perfmodel.engine.run import checkpoint_bytes, training_run
from perfmodel.inputs import load
from perfmodel.specs.run import LLAMA3_FAILURES_PER_GPU_HOUR, Run


def test_llamas_failure_rate_gives_back_its_interruptions():
    """419 unexpected interruptions in 54 days on 16,384 GPUs (Dubey et al. 2024, Table 5)."""
    mtbf = gp.job_mtbf(LLAMA3_FAILURES_PER_GPU_HOUR, 16384)
    assert 54 * 86400 / mtbf == pytest.approx(419)
    assert gp.job_mtbf(0.0, 16384) == math.inf


def test_dalys_interval_and_the_wall_time():
    delta, m = 60.0, 10 * 3600.0
    x = delta / (2 * m)
    tau = math.sqrt(2 * delta * m) * (1 + math.sqrt(x) / 3 + x / 9) - delta
    assert gp.optimal_interval(delta, m) == pytest.approx(tau)
    assert abs(tau - math.sqrt(2 * delta * m)) / tau < 0.05  # close to Young's first order
    assert gp.optimal_interval(3 * m, m) == m  # a save longer than 2M: checkpoint every M
    work, restart = 1e6, 600.0
    wall = work * (1 + delta / tau) / (1 - (tau / 2 + restart) / m)
    assert gp.wall_time(work, delta, tau, m, restart) == pytest.approx(wall)
    assert gp.wall_time(work, delta, m, m, m) == math.inf  # interruptions outpace the work
    # the optimum beats its neighbours
    best = gp.wall_time(work, delta, tau, m, restart)
    assert best < gp.wall_time(work, delta, tau * 1.5, m, restart)
    assert best < gp.wall_time(work, delta, tau / 1.5, m, restart)


def test_a_run_of_gpt3_on_512_a100():
    plan = load("gpt3-175b").plan.with_training(tokens="300B")
    plan = plan.model_copy(update={"run": Run(price_per_gpu_hour=2.0)})
    step = 36.0
    r = training_run(plan, step)
    steps = math.ceil(300e9 / (1536 * 2048))
    assert r.steps == steps and r.ideal_s == pytest.approx(steps * step)
    size = checkpoint_bytes(plan)
    assert size == pytest.approx(14 * 174.6e9, rel=0.01)  # 2 + 12 B a parameter
    save = size / (64 * 2e12 / 2048)  # 64 nodes at Llama 3's 1 GB/s a node
    assert r.checkpoint_s == pytest.approx(save)
    assert r.restart_s == pytest.approx(600 + save)
    mtbf = gp.job_mtbf(LLAMA3_FAILURES_PER_GPU_HOUR, 512)
    tau = gp.optimal_interval(save, mtbf)
    wall = gp.wall_time(r.ideal_s, save, tau, mtbf, 600 + save)
    assert r.wall_s == pytest.approx(wall) and r.goodput == pytest.approx(r.ideal_s / wall)
    assert r.gpu_hours == pytest.approx(512 * wall / 3600)
    assert r.cost_usd == pytest.approx(2.0 * 512 * wall / 3600)
    # A100: 400 W TDP, DGX A100's 6.5 kW for 8 GPUs: 412.5 W a GPU besides, PUE 1.2
    assert r.energy_j == pytest.approx(wall * 512 * (400 + 412.5) * 1.2)
    assert r.gpu_energy_j == pytest.approx(wall * 512 * 400)
    assert any("Llama 3" in a for a in r.assumptions)


def test_asynchronous_saving_pauses_only_for_the_host_copy():
    plan = load("gpt3-175b").plan.with_training(tokens="300B")
    sync = training_run(plan, 36.0)
    quick = training_run(plan.model_copy(update={"run": Run(async_checkpoint=True)}), 36.0)
    assert quick.checkpoint_s == pytest.approx(checkpoint_bytes(plan) / 512 / 25e9)
    assert quick.goodput > sync.goodput


def test_no_tokens_no_run_and_no_tdp_no_energy():
    assert training_run(load("gpt3-175b").plan, 36.0) is None
    plan = load("gpt3-175b").plan.with_training(tokens=1e12)
    gpu = plan.system.gpu.model_copy(update={"tdp_w": None})
    plan = plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": gpu})})
    r = training_run(plan, 36.0)
    assert r.energy_j is None and any("set run.gpu_power_w" in a for a in r.assumptions)


def test_plan_prints_the_run_and_json_carries_it():
    r = CliRunner().invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--tokens", "300B"])
    assert r.exit_code == 0, r.output
    for words in ("time, with failures", "GPU-hours", "MWh", "goodput", "interruptions"):
        assert words in r.output
    j = CliRunner().invoke(
        main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--tokens", "300B", "--json"]
    )
    run = json.loads(j.output)["results"][0]["training_run"]
    assert run["tokens"] == 3e11 and run["days"] > run["ideal_days"] > 0
    assert run["energy_mwh"] > run["gpu_energy_mwh"] > 0 and run["assumptions"]
    bad = CliRunner().invoke(main, ["plan", "gpt3-175b.yaml", "--tokens", "lots"])
    assert bad.exit_code == 2 and "--tokens" in bad.output and "15.6T" in bad.output


def test_compare_and_sweep_trade_gpus_for_days():
    r = CliRunner().invoke(
        main, ["sweep", "gpt3-175b.yaml", "--vary", "gpus=256,512", "--tokens", "300B"]
    )
    assert r.exit_code == 0 and "Training run of 300B tokens" in r.output and "days" in r.output
    c = CliRunner().invoke(
        main, ["compare", "gpt3-175b.yaml", "gpt3-175b-3d.yaml", "--tokens", "300B"]
    )
    assert c.exit_code == 0 and "days to train" in c.output and "GPU-hours" in c.output


def test_the_report_shows_the_run(tmp_path):
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", "gpt3-175b.yaml", "--tokens", "300B", "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "The training run (best configuration)" in page and "goodput" in page
    assert "419 unexpected interruptions" in page


def test_edge_runs_say_never_or_none_instead_of_breaking(tmp_path):
    """A storage so slow the run never finishes, and a run with no failures at all."""
    base = (
        "model: llama3-8b\nsystem: {gpu: h100-sxm, num_gpus: 8}\n"
        "training: {global_batch_size: 64, tokens: 1T}\n"
    )
    for run, words in (
        ("run: {checkpoint_bandwidth_per_node: 5}", "never"),
        ("run: {failure_rate_per_gpu_hour: 0}", "none needed without failures"),
    ):
        path = tmp_path / "p.yaml"
        path.write_text(base + run + "\n")
        for cmd in (["estimate", str(path)], ["sweep", str(path), "--vary", "gpus=8,16"]):
            r = CliRunner().invoke(main, cmd)
            assert r.exit_code == 0 and "internal error" not in r.output, r.output
        assert words in CliRunner().invoke(main, ["estimate", str(path)]).output
        out = tmp_path / "r.html"
        assert CliRunner().invoke(main, ["report", str(path), "-o", str(out)]).exit_code == 0
