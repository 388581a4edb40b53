"""Golden outputs: what users read in the main text tables, reviewed as a diff when it changes
(issue 14).

A change to one of these files is a change users see: refresh them deliberately with
    python tests/test_golden.py --refresh
and read the diff (git diff tests/golden) before committing."""

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
}


def run(args) -> str:
    r = CliRunner().invoke(main, args, terminal_width=100)
    return f"$ perfmodel {' '.join(args)}\n(exit {r.exit_code})\n{r.output}"


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
