"""What the search skips to save time (issue 41, speed) must change no answer: a step it takes
from the closed form is the one the configuration's Estimate gives, and the launch-flag split it
remembers is the one a plain search over the ends finds."""

import itertools

import pytest

from perfmodel.engine.estimate import Batch
from perfmodel.engine.space import enumerate_space
from perfmodel.engine.split import flags_split
from perfmodel.inputs import load_plan


@pytest.mark.parametrize("name", ["llama3-8b-h100.yaml", "deepseek-v3-h100.yaml"])
def test_a_closed_step_is_the_estimates(name):
    plan = load_plan(name)
    knobs = enumerate_space(plan).knobs
    rows = range(0, len(knobs), max(1, len(knobs) // 40))
    gbs = plan.training.global_batch_size
    batch = Batch(plan, [knobs.config(i, gbs) for i in rows])
    closed = simulated = 0
    for row in range(len(batch)):
        step, est = batch.closed_step(row), batch[row]
        if step is None:  # its pipeline is simulated: only the Estimate knows the step
            simulated += 1
            assert est.config.pp > 1
        else:
            closed += 1
            assert step == est.values["step_time_s"]
    assert closed and (simulated or name.startswith("llama3-8b"))


def _plain(num_layers, pp, vp, f0, l0):
    """Every (first, last) pair with an even middle and vp dividing each stage; the nearest to
    (f0, l0), then the lightest slowest stage, then the ends nearest, then the lightest ends."""
    out = []
    for f, last in itertools.product(range(1, num_layers), repeat=2):
        rest, mid_n = num_layers - f - last, pp - 2
        if rest < 0 or (mid_n == 0 and rest) or (mid_n and (rest < mid_n or rest % mid_n)):
            continue
        split = [f] + [rest // mid_n] * mid_n + [last] if mid_n else [f, last]
        if abs(f - f0) > 2 * pp * vp or abs(last - l0) > 2 * pp * vp or any(x % vp for x in split):
            continue
        d = (abs(f - f0), abs(last - l0))
        out.append(((sum(d), max(split), max(d), f + last), split))
    return min(out)[1] if out else None


@pytest.mark.parametrize("num_layers", [30, 61, 62, 94, 126])
@pytest.mark.parametrize("pp,vp", [(2, 1), (3, 1), (4, 2), (6, 1), (7, 3), (16, 2)])
def test_flags_split_is_the_plain_searchs(num_layers, pp, vp):
    for f0, l0 in ((num_layers // pp, num_layers // pp), (1, 3), (num_layers // pp + 2, 2)):
        near = [f0] + [num_layers // pp] * (pp - 2) + [l0]
        assert flags_split(num_layers, pp, vp, near) == _plain(num_layers, pp, vp, f0, l0)
        assert flags_split(num_layers, pp, vp, near) == _plain(num_layers, pp, vp, f0, l0)
