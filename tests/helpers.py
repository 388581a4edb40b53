"""Shared test helpers: describe and time one block the way evaluate() does, with plain
arguments."""

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.cost.layer import Hardware, Link, time_block
from perfmodel.cost.transformer import LayerShape, Options, decoder_layer
from perfmodel.inputs import presets


def shape(h, a, g=None, f=None, V=51200, gated=False, bias=True, norm="layernorm"):
    return LayerShape(
        hidden=h,
        heads=a,
        groups=g or a,
        ffn=f or 4 * h,
        vocab=V,
        gated=gated,
        bias=bias,
        norm=norm,
        learned_positions=not gated,
        tied=True,
    )


def timed(
    builder=decoder_layer,
    *,
    b,
    s,
    t,
    sp=False,
    tp_bw=2.3e11,
    tp_alpha=3e-6,
    overlap=True,
    gpu="a100-80gb",
    flash=False,
    persist_ln=True,
    **shape_kw,
):
    """{op name: timed Op} of ``builder`` (decoder_layer, lm_head or embedding) on one GPU, bf16."""
    hw = Hardware.from_gpu(gpu if not isinstance(gpu, str) else presets.gpu(gpu), "bf16")
    block = builder(shape(**shape_kw), Options(flash=flash, persist_ln=persist_ln), b, s, t, sp)
    ops = time_block(
        hw,
        block,
        gemm_bytes=2,
        sizes={"tp": np.asarray(float(t))},
        sp=np.asarray(sp),
        links={"tp": Link(np.asarray(tp_bw), np.asarray(tp_alpha))},
        overlap=overlap,
    )
    return {o.name: o for o in ops}, hw


@dataclass
class RoundTrip:
    """One `plan --emit megatron` round trip: the search's Result and its best result (JSON),
    the emitted Result, and, when both ran, the imported plan mapping and its estimate (JSON)."""

    searched: Any
    best: dict | None = None
    emitted: Any = None
    back: dict | None = None
    estimate: dict | None = None


def emit_round_trip(plan_file, workdir, gpu="h100-sxm") -> RoundTrip:
    """`plan --top 1 --json` and `plan --emit megatron` of a plan file, the emitted text after a
    launcher line imported with `import megatron` (the plan's GPU count and vocabulary given, as
    a launch file cannot say them), the plan's own system section put back (links), and
    estimated. Stops early, with what it has, where the search or the emit exits non-zero."""
    import json
    from pathlib import Path

    import yaml
    from click.testing import CliRunner

    from perfmodel.cli import main
    from perfmodel.inputs import load

    def run(*args):
        return CliRunner().invoke(main, [str(a) for a in args])

    plan_file, workdir = Path(plan_file), Path(workdir)
    trip = RoundTrip(run("plan", plan_file, "--top", "1", "--json"))
    if trip.searched.exit_code:
        return trip
    trip.best = json.loads(trip.searched.stdout)["results"][0]
    trip.emitted = run("plan", plan_file, "--emit", "megatron")
    if trip.emitted.exit_code:
        return trip
    # the arguments and the comments fit a terminal: a long layer pattern or pipeline layout is
    # written with Megatron's own repeats
    wide = [ln for ln in trip.emitted.stdout.splitlines() if len(ln) > 80]
    assert not wide, wide
    script = workdir / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py \\\n" + trip.emitted.stdout)
    plan = load(str(plan_file)).plan
    back_file = workdir / "back.yaml"
    counts = ["--gpus", plan.system.num_gpus, "--vocab-size", plan.model.vocab_size]
    imported = run("import", "megatron", script, "--gpu", gpu, *counts, "-o", back_file)
    assert imported.exit_code == 0, imported.output
    trip.back = yaml.safe_load(back_file.read_text())
    system = yaml.safe_load(plan_file.read_text())["system"]
    back_file.write_text(yaml.safe_dump({**trip.back, "system": system}))
    est = run("estimate", back_file, "--json")
    assert est.exit_code == 0, est.output
    trip.estimate = json.loads(est.stdout)
    return trip


def deepseek_v3_pp8_vp4() -> dict:
    """DeepSeek-V3 on 1,024 H100 at tp 1 pp 8 ep 64 vp 4, one 4,096-token sequence a micro-batch
    and selective recompute, as a plan mapping; CP, ZeRO and the MoE switches left free."""
    return {
        "model": "deepseek-v3",
        "system": {"gpu": "h100-sxm", "num_gpus": 1024},
        "training": {"global_batch_size": 4096, "seq_length": 4096},
        "parallel": {
            "tp": 1,
            "pp": 8,
            "ep": 64,
            "vp": 4,
            "micro_batch_size": 1,
            "recompute": "selective",
        },
    }


def deepseek_v3(training: dict | None = None, **parallel):
    """DeepSeek-V3 on 1,024 H100 at PP 16 x EP 64 (the report's PP and EP), m = 64, its split
    fixed unless told otherwise (61 = 3 + 14 x 4 + 2); ``training`` and ``parallel`` add to or
    replace the plan's."""
    return presets.plan_from_mapping(
        {
            "model": "deepseek-v3",
            "system": {"gpu": "h100-sxm", "num_gpus": 1024},
            "training": {"global_batch_size": 4096, "seq_length": 4096, **(training or {})},
            "parallel": {
                "tp": 1,
                "pp": 16,
                "ep": 64,
                "cp": 1,
                "vp": 1,
                "micro_batch_size": 1,
                "zero_stage": 1,
                "recompute": "none",
                "decoder_first_pipeline_num_layers": 3,
                "decoder_last_pipeline_num_layers": 2,
                **parallel,
            },
        },
        "t",
    )


def flat(text: str) -> str:
    """``text`` with every run of whitespace one space: an error message as the tool wrapped it to
    80 columns reads as it was written (perfmodel/cli: wrapped)."""
    return " ".join(str(text).split())


def says(output: str, *needles: str) -> bool:
    """Whether the output holds every needle, whatever lines the wrapping broke them across."""
    out = flat(output)
    return all(flat(n) in out for n in needles)


def error_lines(output: str) -> list[str]:
    """The errors an output holds, each with its wrapped continuation lines joined: a line that
    starts "Error: " opens one, a line indented two spaces under it continues it."""
    errors: list[str] = []
    for line in output.splitlines():
        if line.startswith("Error: "):
            errors.append(line)
        elif errors and line.startswith("  ") and line.strip():
            errors[-1] += " " + line.strip()
    return errors


REPRO = __import__("pathlib").Path(__file__).parent / "data" / "repro"


def run(case: str, *args: str):
    """The command of a reproducer (tests/data/repro/NAME), run in its folder through click."""
    import os

    from click.testing import CliRunner

    from perfmodel.cli import main

    old = os.getcwd()
    os.chdir(REPRO / case)
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        os.chdir(old)


def one_line_error(result, *needles: str) -> None:
    """A user error: exit code 1 or 2, one 'Error:' line, no traceback or interpreter warning, the
    needles in it."""
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert "RuntimeWarning" not in result.output
    assert result.output.count("Error:") == 1, result.output
    for n in needles:
        assert says(result.output, n), result.output
