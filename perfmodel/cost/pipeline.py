"""Pipeline bubble (SPEC section 7; seed 000, sections 2.4 and 4.3).

With m micro-batches, p stages of equal t_f, t_b and v virtual stages per GPU:
    bubble / ideal compute   (p-1) / (m v)          the lecture's denominator
    bubble / step time       x / (1 + x), x = (p-1)/(m v)   ((p-1)/(m+p-1) for v = 1)
    utilization              1 - bubble / step
    step time                (m + (p-1)/v) (t_f + t_b)
Dimensionless; works on floats and numpy arrays.
"""

from __future__ import annotations

import math

import numpy as np

from perfmodel.cost import Array, Num

# The design limit on the wall-clock bubble: "no more than ~15%" (seed 000, Q3); check rule PM202.
BUBBLE_LIMIT = 0.15


def bubble_over_ideal(p: Num, m: Num, v: Num = 1) -> Num:
    """(p-1)/(m v): bubble relative to the ideal compute time (Narayanan 2021, Sec. 2.2)."""
    return (np.asarray(p, dtype=float) - 1) / (np.asarray(m, dtype=float) * v)


def bubble_over_step(p: Num, m: Num, v: Num = 1) -> Num:
    """Fraction of the wall-clock step the stage idles: (p-1)/(m+p-1) for v = 1."""
    x = bubble_over_ideal(p, m, v)
    return x / (1 + x)


def utilization(p: Num, m: Num, v: Num = 1) -> Num:
    """m / (m + (p-1)/v): fraction of the step a stage computes."""
    return 1 - bubble_over_step(p, m, v)


def step_time_units(p: Num, m: Num, v: Num = 1) -> Num:
    """Step time in units of (t_f + t_b) of one stage: m + (p-1)/v."""
    return np.asarray(m, dtype=float) + (np.asarray(p, dtype=float) - 1) / v


def min_microbatches_for_target(p: int, target: float, v: int = 1) -> int:
    """Smallest integer m whose wall-clock bubble is strictly below target.

    (p-1)/(m v + p - 1) < x  <=>  m > (p-1)(1-x)/(x v)   (SPEC 7: p=4, 10% -> 28).
    """
    if not 0 < target < 1:
        raise ValueError("target must lie strictly between 0 and 1")
    if p <= 1:
        return 1
    bound = round((p - 1) * (1 - target) / (target * v), 9)
    return max(1, math.floor(bound) + 1)


SCHEDULE_CODES = {
    "gpipe": 0,
    "1f1b": 1,
    "interleaved": 2,
    "dualpipe": 3,
    "zb-h1": 4,
    "zb-h2": 5,
    "zbv": 6,
    "v-half": 7,
    "v-min": 8,
    "dualpipev": 9,
    "interleaved-zb": 10,
}
DUALPIPE = SCHEDULE_CODES["dualpipe"]
DUALPIPEV = SCHEDULE_CODES["dualpipev"]
# the V-shaped schedules: two chunks a rank, rank r holding virtual stages r and 2p - 1 - r
V_SHAPED = tuple(SCHEDULE_CODES[s] for s in ("zbv", "v-half", "v-min", "dualpipev"))
# the backward split into B and W (Qi et al. 2023)
SPLIT_BACKWARD = tuple(
    SCHEDULE_CODES[s] for s in ("zb-h1", "zb-h2", "zbv", "v-half", "v-min", "interleaved-zb")
)
# v chunks a rank, chunk c of rank s the virtual stage c p + s (Narayanan 2021, Sec. 2.2.2)
LOOPED = tuple(SCHEDULE_CODES[s] for s in ("interleaved", "interleaved-zb"))


def in_flight_microbatches(p: Num, m: Num, v: Num, schedule: Num | str) -> Num:
    """Micro-batches whose activations the most loaded stage holds at its peak (SPEC 5), in units
    of one micro-batch through all of a rank's layers (both chunks of a V).

    GPipe keeps all m; 1F1B keeps min(p, m); interleaving multiplies the 1F1B figure by
    1 + (p-1)/(p v) (Korthikanti 2022, Sec. 4.2.3); DualPipe keeps p + 1 chunks' (DeepSeek-V3
    report Table 2), on every rank. Zero-bubble (Qi et al. 2023, Sec. 2 and Table 3): ZB-H1
    p (1F1B's), ZB-H2 2p - 1. Controllable memory (Qi et al. 2024, arXiv 2405.15362, and
    sail-sg's table of its schedules): ZB-V p, V-Half (p + 2) // 2, V-Min (p + 4) // 3.
    DualPipeV (deepseek-ai/DualPipe README): PP + 1 stage-chunks with PP = 2p stages on p ranks,
    p + 1/2 micro-batches of a rank's layers. Interleaved zero-bubble (PyTorch's
    ScheduleInterleavedZeroBubble): (v - 1) p + p - 1 - s warm-up chunk passes on rank s and each W
    s steps behind its B, so every rank holds v p chunk passes, p micro-batches (the simulator's
    peak, engine/schedule_zb.interleaved_zb_order, for m a multiple of p). Each at most m (a rank
    holds no more than it runs). ``schedule`` is a name or an array of SCHEDULE_CODES.
    """
    code = SCHEDULE_CODES[schedule] if isinstance(schedule, str) else np.asarray(schedule)
    p = np.asarray(p, dtype=float)
    m = np.asarray(m, dtype=float)
    one_f_one_b = np.minimum(p, m)
    interleaved = one_f_one_b * (1 + (p - 1) / (p * np.asarray(v, dtype=float)))
    out = np.where(
        code == 0,
        m,
        np.where(code == 2, interleaved, np.where(code == DUALPIPE, p + 1, one_f_one_b)),
    )
    if np.any(np.asarray(code) > DUALPIPE):  # the schedules after 1F1B, where present
        later = {
            SCHEDULE_CODES["zb-h2"]: np.minimum(2 * p - 1, m),
            SCHEDULE_CODES["v-half"]: np.minimum((p + 2) // 2, m),
            SCHEDULE_CODES["v-min"]: np.minimum((p + 4) // 3, m),
            DUALPIPEV: np.minimum(p + 0.5, m),
        }  # zb-h1, zbv and interleaved-zb keep 1F1B's
        out = np.where(code == SCHEDULE_CODES["interleaved-zb"], one_f_one_b, out)
        for c, x in later.items():
            out = np.where(code == c, x, out)
    return np.asarray(out)


def zero_bubble_bubble(p: Num, f: Num, b: Num, w: Num, m: Num, schedule: Num, v: Num = 1) -> Num:
    """Idle time of a rank a step, seconds, by the papers' closed forms (F, B and W the seconds of
    a micro-batch's forward, input gradient and weight gradient through a rank's layers):
    ZB-H1 (p - 1)(F + B - W) (Qi et al. 2023, Sec. 2.1; with B the full backward this is
    deepseek-ai/DualPipe's "ZB1P" row, (PP - 1)(F + B - 2W)); ZB-H2 the same ramp, the zero of
    Qi et al. Sec. 2.2 needing their optimizer post-validation, which a synchronous step lacks (the
    simulator's: engine/schedule_zb.py); ZB-V (p - 1)(F + B - 2W) / 2 (its chunks are half a
    rank's, the warm-up ramp half 1F1B's; 0 at equal F, B, W, as sail-sg's table states); V-Half
    p/(2m) and V-Min 2p/(3m) of the ideal m (F + B + W) (sail-sg's table of Qi et al. 2024, at
    equal F, B, W); interleaved zero-bubble (PyTorch's ScheduleInterleavedZeroBubble, "the ZB1P
    schedule" over v chunks) ZB-H1's ramp over v chunks, (p - 1)(F + B - W) / v, as interleaving
    divides 1F1B's (Narayanan 2021, Sec. 2.2.2; the simulator's step for m a multiple of p).
    Elsewhere 0 (the other schedules' bubbles are their own formulas)."""
    code = np.asarray(schedule)
    p = np.asarray(p, dtype=float)
    f, b, w = (np.asarray(x, dtype=float) for x in (f, b, w))
    ideal = f + b + w
    h1 = (p - 1) * np.maximum(f + b - w, 0.0)
    table = {
        SCHEDULE_CODES["zb-h1"]: h1,
        SCHEDULE_CODES["zb-h2"]: h1,
        SCHEDULE_CODES["zbv"]: (p - 1) * np.maximum(f + b - 2 * w, 0.0) / 2,
        SCHEDULE_CODES["v-half"]: p / 2 * ideal,
        SCHEDULE_CODES["v-min"]: 2 * p / 3 * ideal,
        SCHEDULE_CODES["interleaved-zb"]: h1 / np.asarray(v, dtype=float),
    }
    out = np.zeros(np.broadcast(code, p, f, b, w).shape)
    for c, x in table.items():
        out = np.where(code == c, x, out)
    return np.asarray(out)


def dualpipe_rows(schedule: Num, p: Num) -> Array:
    """Where a configuration runs DualPipe (two stages' parameters a rank): its schedule code, over
    more than one stage."""
    return np.asarray((np.asarray(schedule) == DUALPIPE) & (np.asarray(p) > 1))


def dualpipev_rows(schedule: Num, p: Num) -> Array:
    """Where a configuration runs DualPipeV: DualPipe folded into a V (deepseek-ai/DualPipe,
    dualpipev.py), one copy of the parameters, each rank two chunks of half its layers."""
    return np.asarray((np.asarray(schedule) == DUALPIPEV) & (np.asarray(p) > 1))


def zero_bubble_rows(schedule: Num, p: Num) -> Array:
    """Where a configuration runs one of the B/W-split schedules, over more than one stage."""
    return np.asarray(np.isin(np.asarray(schedule), SPLIT_BACKWARD) & (np.asarray(p) > 1))


def dualpipe_paired(p: Num, m: Num, h: Num = 0) -> Num:
    """Forward chunks that a DualPipe rank runs overlapped with a backward chunk (an F&B pair),
    the rank at distance h from its end of the pipeline (0 for the first and last ranks, p/2 - 1
    for the two middle ones). deepseek-ai/DualPipe, dualpipe.py, DualPipe.step, with n = m/2 the
    micro-batches sent each way: its main phase (step 4) runs n - p + h + 1 iterations of two
    pairs, the middle ranks leaving their first one unpaired; its fifth phase (nB1F1B0) runs one
    pair in each of p/2 - h - 1 iterations. So 2 (n - p + h + 1) - [h = p/2 - 1] + p/2 - h - 1
    = m - 3p/2 + h + 1 - [h = p/2 - 1]: 97 on the end ranks and 103 in the middle at p = 16,
    m = 120. Chunks, dimensionless; valid for m >= 2p (the code's assert)."""
    p = np.asarray(p, dtype=float)
    h = np.asarray(h, dtype=float)
    middle = h == p / 2 - 1
    paired = np.asarray(m, dtype=float) - 1.5 * p + h + 1 - middle
    return np.asarray(np.maximum(paired, 0.0))


def dualpipe_paired_slowest(p: Num, m: Num, slowest_class: Num) -> Num:
    """The F&B pairs of the rank that sets a DualPipe step's pace: the end ranks (h = 0) where the
    slowest stage class is the first or the last, else the middle rank with the fewest pairs
    (h = 1, whose all-to-all hides the least of any middle rank). Chunks."""
    end = np.isin(np.asarray(slowest_class), (0, 3))
    return np.asarray(np.where(end, dualpipe_paired(p, m, 0), dualpipe_paired(p, m, 1)))


def dualpipe_bubble(p: Num, f_and_b: Num, b: Num, w: Num) -> Num:
    """Idle time of a DualPipe rank, seconds: (p/2 - 1)(F&B + B - 3W) (DeepSeek-V3 report, arXiv
    2412.19437, Table 2), with F&B the time of a forward and a backward chunk run overlapped, B a
    full backward chunk and W its weight-gradient part (the zero-bubble split of Qi et al. 2023).
    Against 1F1B's (p - 1)(F + B), DualPipe sends micro-batches in from both ends, so a rank holds
    two stages (stage i and p - 1 - i) and half the pipeline depth idles."""
    half = np.maximum(np.asarray(p, dtype=float) / 2 - 1, 0.0)
    return np.asarray(half * np.maximum(np.asarray(f_and_b) + np.asarray(b) - 3 * np.asarray(w), 0))


def pipeline_lower_bound(count: Num, first_index: Num, stage_time: Num, m: Num, v: Num) -> Num:
    """A lower bound on a simulated pipeline step with per-stage times T_j (classes of identical
    stages: ``count`` stages from ``first_index`` each, arrays configurations x classes): stage j
    cannot start before the first micro-batch's forward has crossed the stages before it, then runs
    m micro-batches, and the last backward must cross them again, so step >= max_j (sum_{i<j} T_i /
    v + m T_j) (with v chunks a micro-batch crosses a stage's chunk in T/v). Exact for equal stages:
    (m + (p-1)/v) T (SPEC 7).
    """
    order = np.argsort(first_index, axis=1, kind="stable")
    cnt = np.take_along_axis(count, order, axis=1)
    t = np.take_along_axis(stage_time, order, axis=1)
    before = np.cumsum(cnt * t, axis=1) - cnt * t  # time of the classes before each one
    v = np.asarray(v, dtype=float)[:, None]
    at_last = (before + np.maximum(cnt - 1, 0) * t) / v + np.asarray(m, dtype=float)[:, None] * t
    return np.asarray(np.where(cnt > 0, at_last, -np.inf).max(axis=1))
