"""A long pipeline step extrapolated from a short one (engine/schedule_steady.py) is the step the
walk of every block gives, and the extrapolation refuses where its check does not hold."""

import random

import numpy as np
import pytest

from perfmodel.engine import schedule, schedule_steady
from perfmodel.engine.schedule import _run, _run_cached


def _case(seed: int):
    """A long 1F1B or interleaved pipeline with uneven stages, p2p latency, blocking or not."""
    rnd = random.Random(seed)
    p = rnd.randint(2, 12)
    name = rnd.choice(["1f1b", "interleaved"])
    v = 1 if name == "1f1b" else rnd.randint(2, 5)
    step = schedule_steady.period(p, name)
    low = 3 * schedule_steady.REACH * p + 2 * step  # a multiple of step: both tries fit
    m = 2 * schedule_steady.LONGER * low + step * rnd.randint(0, 40)
    if rnd.random() < 0.5:  # any times
        tf = [rnd.uniform(0.5, 2.0) for _ in range(p * v)]
        tb = [rnd.uniform(1.0, 4.0) for _ in range(p * v)]
    else:  # equal stages but the first and last (embedding, head), as an estimate's are
        tf = [1.0] * (p * v)
        tf[0], tf[-1] = 1.3, 1.7
        tb = [2 * t for t in tf]
    latency = rnd.choice([0.0, 0.01, 0.3, 2.0])
    return p, m, v, name, tuple(tf), tuple(tb), latency, rnd.random() < 0.5


def _compare(case, monkeypatch) -> list[bool]:
    """The extrapolated pair against the walk's; whether each extrapolation was taken."""
    p, m, v, name, tf, tb, latency, blocking = case
    used: list[bool] = []
    original = schedule_steady.extrapolate

    def spy(*args):
        out = original(*args)
        used.append(out is not None)
        return out

    monkeypatch.setattr(schedule_steady, "extrapolate", spy)
    _run_cached.cache_clear()
    fast = _run_cached(p, m, v, name, tf, tb, latency, blocking)
    full = _run(p, m, v, name, tf, tb, latency, blocking, False)
    for a, b in zip(fast, full):
        assert a.m == b.m == m
        assert a.step_time == pytest.approx(b.step_time, rel=1e-12)
        assert list(a.busy) == pytest.approx(list(b.busy), rel=1e-12)
        assert list(a.peak_in_flight) == list(b.peak_in_flight)
    return used


@pytest.mark.parametrize("seed", range(24))
def test_a_long_step_is_the_walk_of_every_block(seed, monkeypatch):
    """Taken or refused, the figures are the walk's (any stage times: some patterns settle
    later than the short runs show, and are walked)."""
    assert len(_compare(_case(seed), monkeypatch)) == 1


@pytest.mark.parametrize("name,v", [("1f1b", 1), ("interleaved", 4)])
@pytest.mark.parametrize("latency,blocking", [(0.0, False), (0.02, False), (0.02, True)])
def test_an_estimates_pipeline_is_extrapolated(name, v, latency, blocking, monkeypatch):
    """Equal layers but the first and last stage's (embedding, head): taken, and exact."""
    p = 8
    tf = [1.0] * (p * v)
    tf[0], tf[-1] = 1.25, 1.6
    tb = [2.1 * t for t in tf]
    case = (p, 96 * p, v, name, tuple(tf), tuple(tb), latency, blocking)
    assert _compare(case, monkeypatch) == [True]


def test_the_simulator_gives_the_extrapolated_step():
    """simulate() without blocks goes through the extrapolation; with blocks it walks them all."""
    p, v, m = 4, 2, 400
    tf, tb = [1.0, 1.2, 0.9, 1.4], [2.0, 2.5, 1.8, 3.0]
    quick = schedule.simulate(p, m, v, "interleaved", tf, tb, 0.05, keep_blocks=False)
    walked = schedule.simulate(p, m, v, "interleaved", tf, tb, 0.05, keep_blocks=True)
    assert quick.step_time == pytest.approx(walked.step_time, rel=1e-12)
    assert len(walked.blocks) == 2 * p * m * v


def test_short_runs_and_other_schedules_are_walked():
    run = pytest.fail  # never called
    assert schedule_steady.extrapolate(run, 4, 20, 1, "1f1b") is None  # too short to gain
    assert schedule_steady.extrapolate(run, 4, 4000, 1, "gpipe") is None
    assert schedule_steady.extrapolate(run, 4, 4000, 2, "zbv") is None


def _ends(kinds: int, m_a: int, drift: float) -> np.ndarray:
    """Block ends, slot kind x m_a + micro-batch: 3 s a micro-batch, plus a drift that grows."""
    steady = np.tile(np.arange(m_a, dtype=float) * 3.0, (kinds, 1))
    return steady + drift * np.arange(m_a) ** 2


def test_a_pattern_that_does_not_repeat_is_refused():
    """Ends whose shift to the twin changes within the window: no extrapolation."""
    p, v, step = 2, 1, 1
    kinds = 2 * p * v
    m_a = schedule_steady.short_lengths(p, 1000, step)[0]
    assert schedule_steady._shift(list(_ends(kinds, m_a, 0.0).ravel()), kinds, m_a, 8, 17, 1) == 3
    drifting = list(_ends(kinds, m_a, 1e-3).ravel())
    assert schedule_steady._shift(drifting, kinds, m_a, 8, 17, step) is None
    tried = []

    def run(k, ends):
        tried.append(k)
        sim = schedule.simulate(p, k, v, "1f1b", 1.0, 2.0, keep_blocks=False)
        ends.extend([list(_ends(kinds, k, 1e-3).ravel()) + [0.0]] * 2)
        return sim, sim

    assert schedule_steady.extrapolate(run, p, 1000, v, "1f1b") is None
    assert tried == schedule_steady.short_lengths(p, 1000, step) == [26, 104]
