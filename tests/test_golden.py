"""Golden outputs: what users read in the main text tables, reviewed as a diff when it changes
(issue 14), each at 80 columns as a pipe prints it (issue 23: no line over 80 but in --format
markdown, which is for documents).

A change to one of these files is a change users see: refresh them deliberately with
    python tests/test_golden.py --refresh
and read the diff (git diff tests/golden) before committing."""

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main

GOLDEN = Path(__file__).parent / "golden"
COMMANDS = {
    "bubble": ["bubble", "-m", "48", "-p", "8", "--sweep"],
    "roofline": ["roofline", "--mbs", "64"],
    "comm": ["comm", "all-reduce", "--size", "67.1MB", "--ranks", "8", "--link", "nvlink3"],
    "estimate-3d": ["estimate", "gpt3-175b-3d.yaml"],
    "memory-3d": ["memory", "gpt3-175b-3d.yaml"],
    "check-troubled": ["check", "examples/troubled-plan.yaml"],
    "validate-k22": ["validate", "k22"],
    "schedule": ["schedule", "-m", "8", "-p", "4"],
    "compare": ["compare", "examples/clean-plan.yaml", "examples/proposal-pp16.yaml"],
    "compare-markdown": [
        "compare",
        "examples/clean-plan.yaml",
        "examples/proposal-pp16.yaml",
        "--format",
        "markdown",
    ],
    "check-markdown": ["check", "examples/troubled-plan.yaml", "--format", "markdown"],
    "sweep-fixed": [
        "sweep",
        "examples/clean-plan.yaml",
        "--vary",
        "inter_node_bandwidth=25GB/s,12.5GB/s",
        "--fixed",
    ],
    "plan-gpt3-tokens": ["plan", "gpt3-175b.yaml", "--gpus", "512", "--tokens", "300B"],
    "plan-fsdp": ["plan", "llama3-8b-h100.yaml", "--framework", "fsdp"],
    "estimate-per-layer": ["estimate", "gpt3-175b.yaml", "--tp", "8", "--pp", "8", "--per-layer"],
    "check-rules": ["check", "--list-rules"],
    "presets": ["presets"],
    "validate-fsdp": ["validate", "llmf", "titan"],
    "compare-jobs": ["compare", "gpt3-175b.yaml", "llama3-8b-h100.yaml", "--tokens", "1T"],
    "sweep-gpus": ["sweep", "gpt3-175b.yaml", "--vary", "gpus=256,512", "--tokens", "300B"],
    "import-megatron": [
        "import",
        "megatron",
        "tests/data/megatron/train_gpt3_175b_distributed.sh",
        "--gpu",
        "a100-80gb",
        "--gpus",
        "128",
    ],
    "sp": ["sp", "--seq", "2048", "--hidden", "12288", "--tp", "8", "--batch", "1"],
}


def run(args) -> str:
    r = CliRunner().invoke(main, args, terminal_width=80, env={"COLUMNS": "80"})
    # the search's own speed varies from run to run
    out = re.sub(r"in [\d.]+ s \([\d,]+ per second\)", "in T s (N per second)", r.output)
    return f"$ perfmodel {' '.join(args)}\n(exit {r.exit_code})\n{out}"


@pytest.mark.parametrize("name", sorted(n for n in COMMANDS if "markdown" not in n))
def test_no_line_is_wider_than_80_columns(name):
    text = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8").splitlines()[1:]
    wide = [ln for ln in text if len(ln) > 80]
    assert not wide, wide[:3]


def test_a_pipe_honours_columns():
    narrow = CliRunner().invoke(main, COMMANDS["estimate-3d"], env={"COLUMNS": "60"}).output
    wide = CliRunner().invoke(main, COMMANDS["estimate-3d"], env={"COLUMNS": "200"}).output
    assert max(map(len, narrow.splitlines())) <= 60 < max(map(len, wide.splitlines()))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_golden(name):
    expected = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")
    assert (
        run(COMMANDS[name]) == expected
    ), f"output of {name} changed: python tests/test_golden.py --refresh"


if __name__ == "__main__":
    if "--refresh" not in sys.argv:
        sys.exit("usage: python tests/test_golden.py --refresh")
    GOLDEN.mkdir(exist_ok=True)
    for name, args in COMMANDS.items():
        (GOLDEN / f"{name}.txt").write_text(run(args), encoding="utf-8")
        print(f"wrote {GOLDEN / name}.txt")
