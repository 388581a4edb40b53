"""Pipeline bubble: SPEC 9 worked numbers (seed 000, sections 2.4, 3.3, 4.3 and Q1/Q3)."""

import pytest

from perfmodel.cost import pipeline as pipe


@pytest.mark.parametrize(
    "p,m,ideal,wall,util",
    [
        (4, 8, 0.375, 0.273, 0.727),  # seed 000 Q1 (a), (b)
        (8, 48, 0.146, 0.127, None),  # seed 000 Q3: 7/48 and 7/55
    ],
)
def test_both_denominators(p, m, ideal, wall, util):
    assert pipe.bubble_over_ideal(p, m) == pytest.approx(ideal, abs=5e-4)
    assert pipe.bubble_over_step(p, m) == pytest.approx(wall, abs=5e-4)
    if util is not None:
        assert pipe.utilization(p, m) == pytest.approx(util, abs=5e-4)


@pytest.mark.parametrize("p,m,wall", [(4, 16, 0.158), (8, 32, 0.179)])  # seed 000, 2.4(b) and Q3
def test_wall_clock_bubble(p, m, wall):
    assert pipe.bubble_over_step(p, m) == pytest.approx(wall, abs=5e-4)


def test_utilization_m4_p4():  # seed 000, figure 3(a): 4/7
    assert pipe.utilization(4, 4) == pytest.approx(0.571, abs=5e-4)


def test_step_time_units():  # (m + p - 1)(t_f + t_b): 11 units for m=8, p=4 (seed 000, 3.3)
    assert pipe.step_time_units(4, 8) == 11


@pytest.mark.parametrize("p,m", [(4, 28), (8, 64), (16, 136)])  # SPEC 7, seed 000 Q1 (c)(d)
def test_min_microbatches_for_10_percent(p, m):
    from fractions import Fraction

    assert pipe.min_microbatches_for_target(p, 0.10) == m
    wall = lambda k: Fraction(p - 1, k + p - 1)  # noqa: E731  exact, so m - 1 sits exactly on 10%
    assert wall(m) < Fraction(1, 10) <= wall(m - 1)


def test_interleaved_divides_by_v():  # Narayanan 2021, Sec. 2.2.2: (1/v)(p-1)/m
    assert pipe.bubble_over_ideal(8, 16, 4) == pytest.approx(pipe.bubble_over_ideal(8, 16) / 4)


def test_in_flight_per_schedule():  # SPEC 5: GPipe m, 1F1B p, interleaved x (1 + (p-1)/(p v))
    assert pipe.in_flight_microbatches(8, 48, 1, "gpipe") == 48
    assert pipe.in_flight_microbatches(8, 48, 1, "1f1b") == 8
    assert pipe.in_flight_microbatches(8, 48, 3, "interleaved") == pytest.approx(8 * (1 + 7 / 24))
