"""A long pipeline step from one short one, where the short one shows that the pattern repeats.

In the steady phase of 1F1B and interleaved 1F1B, each stage's order repeats every P micro-batches
(P = 1 for 1F1B; p for the interleaved schedule, a group of p micro-batches through every chunk:
Megatron's schedules.py), and the block P micro-batches later (its twin) waits on the twins of
what the block waits on. A block's end is the latest end it waits for plus its duration (a
max-plus linear system; Heidergott, Olsder and van der Woude, "Max Plus at Work", 2006, ch. 3).
So if, over a window of micro-batches wider than any wait reaches back, every block's twin ends
exactly lambda after the block, then every later twin does too (induction along the waits), and a
run of m = m_a + K P micro-batches ends K lambda after the run of m_a: its blocks before the
window are m_a's, and its last blocks are m_a's last ones, K periods on. The window is the last
one before the cool-down's margin, so a long transient has the whole run to settle. The busy
time is linear in m. Where the check fails the caller walks every block, so the figures are the
walk's either way (to rounding).

Reach of a wait, in micro-batches: a stage's forward runs at most its warm-up, (p - s - 1) 2 +
(v - 1) p chunk passes (under 2p micro-batches), ahead of its backward, plus a group of p; the
other waits are on the same micro-batch. So 3p; the window and margins take 4p.

Why: a step of 5,000 micro-batches walks a million blocks (seconds); a sweep of batch sizes, or a
search over large batches, walks many such steps (issue 40). Units: seconds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

REACH = 4  # x p micro-batches: the window and each margin, over the 3p a wait reaches
LONGER = 4  # the second try's length over the first's
TOLERANCE = 1e-12  # relative to the step: equal shifts but for floating-point rounding

Pair = tuple[Any, Any]  # (Simulation without the p2p latency, Simulation with it)
ShortRun = Callable[[int, list[Any]], Pair]  # micro-batches, list to receive the ends -> Pair


def period(p: int, schedule: str) -> int | None:
    """Micro-batches the steady pattern repeats over, or None for schedules not extrapolated
    (GPipe has no steady phase; the zero-bubble walks choose among ready blocks)."""
    return {"1f1b": 1, "interleaved": p}.get(schedule)


def short_lengths(p: int, m: int, step: int) -> list[int]:
    """The runs m_a to try, each = m (mod P) and at most m / 2: the shortest with a warm-up
    margin, the window, its twins and a margin before the cool-down (3 REACH p + 2 P
    micro-batches), then one LONGER times as long for a pattern that takes longer to settle (a
    max-plus transient ends when the slowest cycle has overtaken the others, which takes longer
    the closer their rates)."""
    out = []
    for low in (3 * REACH * p + 2 * step, LONGER * (3 * REACH * p + 2 * step)):
        m_a = low + (m - low) % step
        if 2 * m_a <= m:
            out.append(m_a)
    return out


def _shift(ends: list[float], kinds: int, m_a: int, lo: int, hi: int, step: int) -> float | None:
    """The common shift from each block with micro-batch in [lo, hi) to its twin, or None.
    ``ends``: slot kind x m_a + micro-batch, ``kinds`` 2 p v of them (schedule._Walk)."""
    e = np.asarray(ends[: kinds * m_a]).reshape(kinds, m_a)
    d = e[:, lo + step : hi + step] - e[:, lo:hi]
    shift = float(d.flat[0])
    scale = TOLERANCE * max(float(np.abs(e[:, hi + step - 1]).max()), 1e-300)
    return shift if np.all(np.abs(d - shift) <= scale) else None


def extrapolate(run: ShortRun, p: int, m: int, v: int, schedule: str) -> Pair | None:
    """The pair of simulations of m micro-batches from a run of m_a (``run``), or None where m
    is not long enough to gain or no short run's steady blocks repeat (the caller walks)."""
    step = period(p, schedule)
    if step is None:
        return None
    for m_a in short_lengths(p, m, step):
        pair = _from(run, p, m, v, m_a, step)
        if pair is not None:
            return pair
    return None


def _from(run: ShortRun, p: int, m: int, v: int, m_a: int, step: int) -> Pair | None:
    """extrapolate() from the run of m_a, its window the last one before the cool-down margin."""
    ends: list[Any] = []
    pair = run(m_a, ends)
    hi = m_a - REACH * p - step  # the window: micro-batches [lo, hi); their twins end by m_a - 4p
    lo = hi - REACH * p - step
    periods = (m - m_a) // step
    out = []
    for sim, slots in zip(pair, ends):
        shift = _shift(slots, 2 * p * v, m_a, lo, hi, step)
        if shift is None:
            return None
        out.append(
            replace(
                sim,
                m=m,
                step_time=sim.step_time + periods * shift,
                busy=sim.busy * (m / m_a),  # every block's duration, m times over
            )
        )
    return out[0], out[1]
