"""Charts a reader trusts (issue 23): GPU-count sweeps on log axes, linear y axes from zero, the
report's labels apart from each other and its Gantt readable at vp 12 x m 64."""

import pytest

pytest.importorskip("matplotlib")

from perfmodel.inputs import load
from perfmodel.output import gantt, plots
from perfmodel.review import sweep as sw


@pytest.fixture
def figures(monkeypatch):
    caught = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: caught.append(fig))
    return caught


def test_a_gpu_sweep_is_drawn_on_log_axes(figures):
    plan = load("gpt3-175b").plan
    result = sw.sweep(plan, *sw.parse_vary("gpus=256,512,1024"), False)
    plots.sweep_plot(result, "t", "x.png")
    ax = figures[0].axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_a_sequence_sweep_starts_its_y_axis_at_zero(figures):
    plan = load("gpt3-175b").plan
    result = sw.sweep(plan, *sw.parse_vary("seq=1024,2048"), False)
    plots.sweep_plot(result, "t", "x.png")
    ax = figures[0].axes[0]
    assert ax.get_xscale() == "linear" and ax.get_ylim()[0] == 0


def test_a_dense_gantt_is_drawn_as_busy_spans_with_its_last_tick_inside():
    from perfmodel.engine.schedule import simulate

    sim = simulate(8, 64, 12, "interleaved", [1.0] * 8, [2.0] * 8, 0.0)
    svg = gantt.svg(sim, "t", max_width=960)
    assert "too thin to draw one by one" in svg and "busy" in svg
    assert 'text-anchor="end">' in svg  # the last tick's label ends at its tick
    small = gantt.svg(simulate(4, 8, 1, "1f1b", [1.0] * 4, [2.0] * 4, 0.0), "t")
    assert "too thin" not in small and "F0" in small
