"""Plots are an optional extra: a PNG when matplotlib is installed, a clear message when it is
not."""

import builtins

import numpy as np
import pytest
from helpers import says

from perfmodel.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args",
    [
        ["roofline", "--mbs", "64"],
        ["bubble", "-m", "48", "-p", "8"],
        ["memory", "gpt3-175b-3d.yaml"],
        ["plan", "gpt3-175b.yaml", "--top", "1"],
    ],
)
def test_plot_commands_write_a_png(runner, tmp_path, args):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.png"
    r = runner.invoke(main, args + ["--plot", str(out)])
    assert r.exit_code == 0, r.output
    data = out.read_bytes()
    assert data.startswith(PNG) and len(data) > 5000
    assert f"wrote {out}" in r.stderr  # issue 15: every written file is announced


def test_plot_names_are_checked_and_an_svg_gantt_has_an_axis(runner, tmp_path):
    pytest.importorskip("matplotlib")
    for name in ("noext", ""):
        r = runner.invoke(
            main, ["bubble", "-m", "8", "-p", "4", "--plot", str(tmp_path / name) if name else ""]
        )
        assert r.exit_code == 2 and says(r.output, "give the file an extension")
    assert not list(tmp_path.iterdir())  # nothing written, not even noext.png
    r = runner.invoke(
        main, ["plan", "gpt3-175b.yaml", "--gpus", "8", "--plot", str(tmp_path / "p.png")]
    )
    assert r.exit_code == 1 and "nothing fits, no plot written" in r.stderr
    svg = tmp_path / "g.svg"
    r = runner.invoke(main, ["schedule", "-m", "8", "-p", "4", "-v", "2", "--svg", str(svg)])
    text = svg.read_text()
    assert (
        r.exit_code == 0 and f"wrote {svg}" in r.stderr and "time (s)" in text and ">B0.1<" in text
    )
    assert runner.invoke(main, ["schedule", "-m", "8", "-p", "4", "--svg", ""]).exit_code == 1


def test_missing_matplotlib_is_one_clear_line(runner, tmp_path, monkeypatch):
    real = builtins.__import__

    def no_matplotlib(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    r = runner.invoke(main, ["bubble", "-m", "8", "-p", "4", "--plot", str(tmp_path / "x.png")])
    assert r.exit_code == 1 and "pip install 'perfmodel[plot]'" in r.output


def test_pareto_front():
    from perfmodel.output.plots import pareto_front

    t = np.array([3.0, 1.0, 2.0, 1.5, 4.0])
    m = np.array([1.0, 5.0, 2.0, 6.0, 0.5])
    assert sorted(pareto_front(t, m).tolist()) == [0, 1, 2, 4]
