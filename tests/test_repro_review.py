"""The reproducers of issue 40 that the design review owns (tests/data/repro/NAME, copied from the
shared set with their README.txt), each run in its folder as tests/test_reproducers.py runs them."""

import os
from pathlib import Path

from click.testing import CliRunner
from helpers import says

from perfmodel.cli import main

REPRO = Path(__file__).parent / "data" / "repro"


def run(case: str, *args: str):
    """The command of a reproducer, in its folder."""
    old = os.getcwd()
    os.chdir(REPRO / case)
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        os.chdir(old)


def one_line_error(result, *needles: str) -> None:
    """A user error: exit code 1 or 2, one 'Error:' line, no traceback, the needles in it."""
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert result.output.count("Error:") == 1, result.output
    for n in needles:
        assert says(result.output, n), result.output


def test_gpu_reserved_bytes_beyond_hbm_is_refused_by_name():
    """reserved_bytes 100 GB on an 85.5 GB H100 gave a negative usable memory."""
    for args in (["memory", "plan.yaml", "--json"], ["estimate", "plan.yaml"]):
        one_line_error(
            run("gpu_reserved_bytes_beyond_hbm", *args),
            "system.gpu: reserved_bytes 100 GB is more than the 85.5 GB of HBM",
        )


def test_base_plan_cycle_is_named_as_a_loop(tmp_path):
    """a.yaml and b.yaml extending each other were reported as depth."""
    one_line_error(
        run("base_plan_cycle_message", "estimate", "plan.yaml"),
        "plan.yaml: base: a.yaml -> b.yaml -> a.yaml is a loop",
    )
    (tmp_path / "self.yaml").write_text("base: self.yaml\nmodel: llama3-8b\n")
    one_line_error(
        CliRunner().invoke(main, ["estimate", str(tmp_path / "self.yaml")]),
        "base: self.yaml is a loop",
    )
