"""CLI through click's CliRunner: exit codes and --json (issue 2)."""

import json

import pytest

from perfmodel.cli import main


def js(runner, args):
    r = runner.invoke(main, args + ["--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_bubble_json(runner):
    d = js(runner, ["bubble", "-m", "48", "-p", "8"])
    assert d["bubble_over_ideal"] == pytest.approx(7 / 48)
    assert d["bubble_over_step"] == pytest.approx(7 / 55)
    assert d["utilization"] == pytest.approx(48 / 55)
    assert d["min_m_for_target"] == 64


def test_bubble_sweep_and_text(runner):
    r = runner.invoke(main, ["bubble", "-m", "8", "-p", "4", "--sweep", "--target", "0.2"])
    assert r.exit_code == 0 and "27.3%" in r.output and "37.5%" in r.output and "Sweep" in r.output


def test_roofline_default_layer(runner):  # SPEC 9: MLP GEMM memory-bound at AI ~61, ~125 TFLOP/s
    d = js(runner, ["roofline", "--mbs", "64"])
    assert d["ridge_point"] == pytest.approx(153, abs=0.5)
    up = next(g for g in d["gemms"] if g["name"].startswith("MLP up"))
    assert up["bound"] == "memory" and up["arithmetic_intensity"] == pytest.approx(61, abs=0.5)
    assert up["attainable_flops_per_s"] == pytest.approx(125e12, rel=5e-3)
    assert up["time_s"] == pytest.approx(8.6e-6, rel=5e-3)
    assert {
        "name",
        "flops",
        "bytes",
        "arithmetic_intensity",
        "bound",
        "attainable_flops_per_s",
        "time_s",
    } <= set(up)


def test_roofline_large_batch_is_compute_bound(runner):
    d = js(runner, ["roofline", "--mbs", "8", "--seq-len", "1024"])
    up = next(g for g in d["gemms"] if g["name"].startswith("MLP up"))
    assert up["bound"] == "compute" and up["flops"] == pytest.approx(1.374e11, rel=1e-3)


def test_roofline_with_model_preset(runner):
    d = js(runner, ["roofline", "--mbs", "1", "--seq-len", "4096", "--model", "llama2-70b"])
    assert any("gate+up" in g["name"] for g in d["gemms"])


def test_comm_json(runner):  # SPEC 9: 67.1 MB all-reduce on NVLink: 117 MB per rank
    d = js(runner, ["comm", "all-reduce", "--size", "67.1MB", "--ranks", "8", "--link", "nvlink3"])
    assert d["bytes_per_rank"] == pytest.approx(117.4e6, rel=1e-3)
    assert d["latency_s"] == pytest.approx(42e-6)
    d = js(runner, ["comm", "all-reduce", "--size", "64KiB", "--ranks", "32", "--link", "ib-hdr"])
    assert d["latency_s"] == pytest.approx(124e-6) and d["bandwidth_s"] == pytest.approx(
        5.08e-6, rel=0.01
    )


@pytest.mark.parametrize("kind", ["all-gather", "reduce-scatter", "all-to-all", "p2p"])
def test_comm_other_collectives(runner, kind):
    d = js(
        runner,
        [
            "comm",
            kind,
            "--size",
            "1GB",
            "--ranks",
            "4",
            "--bandwidth",
            "100GB/s",
            "--latency",
            "1us",
        ],
    )
    assert d["time_s"] > 0


def test_sp_json(runner):
    d = js(runner, ["sp", "--seq", "4096", "--hidden", "4096", "--tp", "8"])
    assert d["tp_only"]["resident_peak_bytes"] == 8 * d["tp_sp"]["resident_peak_bytes"]
    assert d["same_bytes"]


def test_memory_json_keys(runner):
    d = js(runner, ["memory", "gpt3-175b-3d.yaml"])
    for k in (
        "weights_bytes",
        "gradients_bytes",
        "optimizer_bytes",
        "activations_bytes",
        "reserve_bytes",
        "usable_bytes",
        "tight",
        "total_bytes",
        "capacity_bytes",
        "fits",
        "params_per_gpu",
    ):
        assert k in d


def test_memory_quick_case(runner):
    d = js(
        runner,
        [
            "memory",
            "--model",
            "gpt3-175b",
            "--gpus",
            "64",
            "--tp",
            "8",
            "--pp",
            "8",
            "--sp",
            "--recompute",
            "selective",
        ],
    )
    assert d["fits"] and d["config"]["sequence_parallel"]


@pytest.mark.parametrize("kind", ["hardware", "links", "models", "plans"])
def test_presets(runner, kind):
    d = js(runner, ["presets", kind])
    assert len(d) >= 4


def test_presets_text(runner):
    r = runner.invoke(main, ["presets"])
    assert r.exit_code == 0 and "a100-80gb" in r.output and "gpt3-175b" in r.output
    # the A100's data-sheet figures, as listed: 312 TFLOP/s bf16, 2039 GB/s; 80 GiB = 85.9 GB
    a100 = next(line for line in r.output.splitlines() if line.startswith("a100-80gb"))
    assert "312" in a100 and "2039" in a100 and "85.9" in a100


def test_help_has_examples(runner):
    for cmd in (
        "bubble",
        "roofline",
        "comm",
        "memory",
        "sp",
        "presets",
        "estimate",
        "plan",
        "validate",
        "check",
        "schedule",
    ):
        r = runner.invoke(main, [cmd, "--help"])
        assert r.exit_code == 0 and "Example" in r.output


def test_python_dash_m():
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "perfmodel", "bubble", "-m", "8", "-p", "4", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(r.stdout)["utilization"] == pytest.approx(8 / 11)


def test_interleaved_bubble_sweep_lists_only_runnable_m_and_plurals(runner):
    """Issue 15: the interleaved sweep listed m values the schedule rejects, and comm printed "1
    steps"."""
    r = json.loads(
        runner.invoke(
            main, ["bubble", "-m", "48", "-p", "8", "-v", "2", "--sweep", "--json"]
        ).output
    )
    assert (
        r["sweep"]
        and all(row["m"] % 8 == 0 for row in r["sweep"])
        and 48 in [row["m"] for row in r["sweep"]]
    )
    out = runner.invoke(main, ["comm", "reduce-scatter", "--size", "1MB", "--ranks", "2"]).output
    assert "(1 step x" in out and "1 steps" not in out


def test_roofline_shows_fused_attention_when_flash_is_on(runner):
    """Issue 15: with FlashAttention the attention core is one kernel: the FLOPs of QK^T and x V,
    and HBM traffic of Q, K, V and O only (Dao et al. 2022): b (a/t) tensors of s x d each, 2 bytes.
    """
    args = ["roofline", "--mbs", "2", "--seq-len", "4096", "--json"]
    fused = json.loads(runner.invoke(main, args).output)
    unfused = json.loads(runner.invoke(main, args + ["--no-flash"]).output)
    f = [g for g in fused["gemms"] if "attention" in g["name"]]
    u = [g for g in unfused["gemms"] if "attention" in g["name"]]
    assert [g["name"] for g in f] == ["fused attention (flash)"] and len(u) == 2
    assert f[0]["flops"] == sum(g["flops"] for g in u)
    assert (
        f[0]["bytes"] == 2 * (32 // 8) * 4 * 4096 * 128 * 2
    )  # mbs 2, 32 heads over TP 8, Q K V O, bf16
    assert f[0]["bound"] == "compute" and all(g["bound"] == "memory" for g in u)


def _commands(group, prefix=()):
    import click

    for name, cmd in group.commands.items() if hasattr(group, "commands") else []:
        yield prefix + (name,), cmd
    if hasattr(group, "list_commands"):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if isinstance(cmd, click.Group):
                yield from _commands(cmd, prefix + (name,))
            else:
                yield prefix + (name,), cmd


def test_every_help_fits_80_columns(runner):
    """Output for people is at most 80 columns, --help and its examples included."""
    seen = {path for path, _ in _commands(main)}
    assert ("plan",) in seen and ("import", "nemo") in seen
    for path in sorted(seen):
        r = runner.invoke(main, [*path, "--help"], terminal_width=80)
        assert r.exit_code == 0, path
        wide = [ln for ln in r.output.splitlines() if len(ln) > 80]
        assert not wide, (path, wide)
