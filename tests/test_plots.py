"""Plots are an optional extra: a PNG when matplotlib is installed, a clear message when it is not."""

import builtins

import numpy as np
import pytest

from perfmodel.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args", [
    ["roofline", "--mbs", "64"], ["bubble", "-m", "48", "-p", "8"], ["memory", "gpt3-175b-3d.yaml"],
    ["plan", "gpt3-175b.yaml", "--top", "1"]])
def test_plot_commands_write_a_png(runner, tmp_path, args):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.png"
    r = runner.invoke(main, args + ["--plot", str(out)])
    assert r.exit_code == 0, r.output
    data = out.read_bytes()
    assert data.startswith(PNG) and len(data) > 5000


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
    from perfmodel.plots import pareto_front
    t = np.array([3.0, 1.0, 2.0, 1.5, 4.0])
    m = np.array([1.0, 5.0, 2.0, 6.0, 0.5])
    assert sorted(pareto_front(t, m).tolist()) == [0, 1, 2, 4]
