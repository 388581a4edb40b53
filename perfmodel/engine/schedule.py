"""Event simulator of pipeline schedules: GPipe, 1F1B and interleaved 1F1B (issue 6; seed 000, 2.4
and 6); the zero-bubble family (ZB-H1, ZB-H2, ZB-V, V-Half, V-Min and interleaved zero-bubble) is
engine/schedule_zb.py's walk,
whose steps this module returns the same way.

Each stage runs its operations in the order its schedule prescribes; an
operation starts when its stage is free and its input has arrived:
    F(u, i) needs F(u-1, i) (+ p2p latency), B(u, i) needs B(u+1, i) (+ latency) and F(u, i),
where u is the virtual stage (chunk c of stage s is virtual stage c p + s, as
in Megatron's interleaved schedule; Narayanan 2021, Sec. 2.2.2). Times are in
seconds (or any unit): the simulator only adds and compares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from perfmodel.cost import Num
from perfmodel.engine import schedule_steady
from perfmodel.engine.schedule_times import per_rank, virtual_times
from perfmodel.engine.schedule_zb import LOOPED, ZERO_BUBBLE, chunks
from perfmodel.engine.sized_cache import sized_cache
from perfmodel.errors import PerfModelError


@dataclass(frozen=True)
class Block:
    stage: int
    kind: str  # "F", "B" (with the zero-bubble schedules: the input gradient) or "W"
    micro_batch: int
    chunk: int
    start: float
    end: float


@dataclass
class Simulation:
    p: int
    m: int
    v: int
    schedule: str
    step_time: float
    busy: np.ndarray  # per stage
    # per stage: micro-batches (chunk passes / v) whose activations are held
    peak_in_flight: np.ndarray
    blocks: list[Block] = field(default_factory=list)

    @property
    def idle(self) -> np.ndarray:
        return self.step_time - self.busy

    @property
    def bubble_over_step(self) -> float:
        """Mean idle share of the step over stages ((p-1)/(m+p-1) for equal stages)."""
        return float(np.mean(self.idle) / self.step_time)

    @property
    def bubble_over_ideal(self) -> float:
        """Mean idle time over the mean busy time ((p-1)/m for equal stages)."""
        return float(np.mean(self.idle) / np.mean(self.busy))

    def to_json(self) -> dict[str, Any]:
        return {
            "p": self.p,
            "m": self.m,
            "v": self.v,
            "schedule": self.schedule,
            "step_time": self.step_time,
            "busy": self.busy.tolist(),
            "idle": self.idle.tolist(),
            "bubble_per_stage": (self.idle / self.step_time).tolist(),
            "bubble_over_step": self.bubble_over_step,
            "bubble_over_ideal": self.bubble_over_ideal,
            "peak_in_flight": self.peak_in_flight.tolist(),
        }


# a stage's order: per block, backward?, its micro-batch and its chunk (numpy arrays)
Order = tuple[np.ndarray, np.ndarray, np.ndarray]


def _orders(p: int, m: int, v: int, schedule: str) -> list[Order]:
    """Per stage, the sequence of its blocks in the schedule's order: ``warm`` forwards, then one
    forward and one backward in turn, then the last ``warm`` backwards; the k-th forward and the
    k-th backward name their micro-batch and chunk as Megatron's schedules do (schedules.py:
    forward_backward_pipelining_without_interleaving and _with_interleaving)."""
    total = m * v
    out = []
    for s in range(p):
        if schedule == "gpipe":
            warm = m
        elif schedule == "1f1b":
            warm = min(p - s - 1, m)
        else:  # interleaved 1F1B
            warm = min((p - s - 1) * 2 + (v - 1) * p, total)
        backward = np.concatenate(
            [np.zeros(warm, bool), np.tile([False, True], total - warm), np.ones(warm, bool)]
        )
        k = np.empty(2 * total, dtype=np.int64)
        k[~backward] = np.arange(total)
        # GPipe runs its backwards last micro-batch first
        k[backward] = np.arange(total)[:: -1 if schedule == "gpipe" else 1]
        if schedule == "interleaved":
            micro, chunk = (k // (p * v)) * p + k % p, (k // p) % v
            chunk[backward] = v - 1 - chunk[backward]
        else:
            micro, chunk = k, np.zeros_like(k)
        out.append((backward, micro, chunk))
    return out


MAX_BLOCKS = 2_000_000  # forward + backward blocks the simulator walks one by one (a few seconds)
MAX_GANTT_BLOCKS = 20_000  # blocks an SVG Gantt chart draws (about 3 MB of SVG)


SCHEDULES = ("gpipe", "1f1b", "interleaved", *ZERO_BUBBLE)


def _check_arguments(p: int, m: int, v: int, schedule: str, latency: float) -> None:
    """What the simulator refuses, each with the fix: a schedule that cannot run p, m and v, and a
    step too large to walk block by block."""
    if p < 1 or m < 1 or v < 1:
        raise PerfModelError("p, m and v must be positive integers")
    if schedule in ("dualpipe", "dualpipev"):
        raise PerfModelError(
            f"the simulator does not run {schedule}: its step and bubble are the closed form of"
            " deepseek-ai/DualPipe's table (the DeepSeek-V3 report's Table 2; perfmodel estimate"
            " prints them); simulate 1f1b, interleaved or zbv"
        )
    if schedule not in SCHEDULES:
        raise PerfModelError(f"unknown schedule {schedule!r}; use {', '.join(SCHEDULES)}")
    if schedule == "interleaved":
        if v == 1:
            raise PerfModelError("the interleaved schedule needs v > 1 (use 1f1b for v = 1)")
        if m % p:
            raise PerfModelError(
                f"the interleaved schedule needs m({m}) to be a multiple of p({p})"
            )
    elif schedule in LOOPED:
        rounds = max(1, m // p)
        if v == 1:
            raise PerfModelError(
                f"the {schedule} schedule needs v > 1 (use zb-h1 for v = 1; PyTorch's"
                " ScheduleInterleavedZeroBubble)"
            )
        if m % rounds:
            raise PerfModelError(
                f"the {schedule} schedule needs m({m}) to be a multiple of its {rounds} rounds"
                f" (max(1, m // p({p})), PyTorch's ScheduleInterleavedZeroBubble); use a multiple"
                f" of p({p})"
            )
    elif v != chunks(schedule):
        need = chunks(schedule)
        raise PerfModelError(
            f"the {schedule} schedule runs {need} chunk{'s' * (need > 1)} a stage: v({v}) must be"
            f" {need}"
            + (" (v > 1 needs the interleaved or a V-shaped schedule)" if v > 1 else "")
        )
    if not latency >= 0 or not np.isfinite(latency):  # also refuses nan
        raise PerfModelError("latency must be a finite, non-negative number")
    limit = max_chunk_passes(schedule)
    if p * m * v > limit:
        raise PerfModelError(
            f"p({p}) x m({m}) x v({v}) = {p * m * v:,} blocks exceed the simulator's"
            f" {limit:,}; simulate fewer micro-batches (the bubble fraction depends only on p,"
            " m and v: `perfmodel bubble` gives it for any m)"
        )


def max_chunk_passes(schedule: str) -> int:
    """p x m x v the simulator walks for ``schedule``: the zero-bubble walk runs three ops a chunk
    pass and chooses each among the ready ones, so it takes a quarter of the others' (a few
    seconds either way)."""
    return MAX_BLOCKS // 4 if schedule in ZERO_BUBBLE else MAX_BLOCKS


def simulate(
    p: int,
    m: int,
    v: int = 1,
    schedule: str = "1f1b",
    t_f: Num | Sequence[float] = 1.0,
    t_b: Num | Sequence[float] = 2.0,
    latency: float = 0.0,
    keep_blocks: bool = True,
    blocking: bool = False,
    t_w: Num | Sequence[float] = 0.0,
) -> Simulation:
    """Simulate one step of a p-stage pipeline over m micro-batches (v chunks per stage when
    interleaved or V-shaped).

    ``latency`` is the point-to-point time between stages. With ``blocking`` the sender is occupied
    for it too (Megatron's synchronous send/recv before overlapped p2p); otherwise it only delays
    the receiver. Busy time counts compute only. ``t_w`` is the weight-gradient part of ``t_b``
    (per stage, like t_b): the zero-bubble schedules run it as its own block (W), after B, the
    rest; the other schedules ignore it.
    """
    _check_arguments(p, m, v, schedule, latency)
    if schedule in ZERO_BUBBLE:
        looped = schedule in LOOPED
        tf, tb = per_rank(t_f, p, v, "t_f", looped), per_rank(t_b, p, v, "t_b", looped)
        tw = per_rank(t_w, p, v, "t_w", looped)
        if any(w > b * (1 + 1e-12) for w, b in zip(tw, tb)):
            raise PerfModelError("t_w: the weight-gradient time is part of t_b, so at most t_b")
        tb = tuple(b - w for b, w in zip(tb, tw))
        return _run_zero_bubble(p, m, v, schedule, tf, tb, tw, latency, blocking, keep_blocks)
    tf, tb = virtual_times(t_f, p, v, "t_f"), virtual_times(t_b, p, v, "t_b")
    if keep_blocks:
        return _run(p, m, v, schedule, tf, tb, latency, blocking, True)[1]
    return _run_cached(p, m, v, schedule, tf, tb, latency, blocking)[1]


def simulate_pair(
    p: int,
    m: int,
    v: int,
    schedule: str,
    t_f: Num | Sequence[float],
    t_b: Num | Sequence[float],
    latency: float,
    blocking: bool,
    t_w: Num | Sequence[float] = 0.0,
) -> tuple[Simulation, Simulation]:
    """simulate() without blocks, without the p2p latency and with it: what the pipeline takes on
    its own and what the p2p adds to it (an estimate's two steps). One replay of the schedule's
    walk gives both; the zero-bubble walk, which chooses among ready blocks, runs twice."""
    if schedule in ZERO_BUBBLE:
        alone = simulate(p, m, v, schedule, t_f, t_b, 0.0, False, t_w=t_w)
        return alone, simulate(p, m, v, schedule, t_f, t_b, latency, False, blocking, t_w)
    _check_arguments(p, m, v, schedule, latency)
    tf, tb = virtual_times(t_f, p, v, "t_f"), virtual_times(t_b, p, v, "t_b")
    return _run_cached(p, m, v, schedule, tf, tb, latency, blocking)


@lru_cache(maxsize=4096)
def _run_zero_bubble(
    p: int, m: int, v: int, schedule: str, tf: tuple[float, ...], tb: tuple[float, ...],
    tw: tuple[float, ...], latency: float, blocking: bool, keep_blocks: bool,
) -> Simulation:  # fmt: skip
    """engine/schedule_zb.run as a Simulation (cached like _run_cached; read-only)."""
    from perfmodel.engine import schedule_zb

    send, delay = (latency, 0.0) if blocking else (0.0, latency)
    step, busy, peak, raw = schedule_zb.run(
        p, m, schedule, list(tf), list(tb), list(tw), delay, send, keep_blocks, v
    )
    blocks = [Block(*b) for b in raw]
    return Simulation(p, m, v, schedule, step, np.array(busy), np.array(peak), blocks)


@lru_cache(maxsize=4096)
def _run_cached(
    p: int, m: int, v: int, schedule: str, tf: tuple[float, ...], tb: tuple[float, ...],
    latency: float, blocking: bool,
) -> tuple[Simulation, Simulation]:  # fmt: skip
    """_run without blocks, once per input: estimates of one plan (the search's exact top, the
    slower-link check, the report) simulate the same pipeline again and again. A long one is
    extrapolated from short ones once its pattern has settled (schedule_steady). Read-only."""

    def short(k: int, ends: list[Any]) -> tuple[Simulation, Simulation]:
        pair, slots = _short_run(p, k, v, schedule, tf, tb, latency, blocking)
        ends.extend(slots)
        return pair

    long = schedule_steady.extrapolate(short, p, m, v, schedule)
    return long or _run(p, m, v, schedule, tf, tb, latency, blocking, False)


@lru_cache(maxsize=4096)
def _short_run(
    p: int, k: int, v: int, schedule: str, tf: tuple[float, ...], tb: tuple[float, ...],
    latency: float, blocking: bool,
) -> tuple[tuple[Simulation, Simulation], tuple[Any, ...]]:  # fmt: skip
    """A short run that extrapolate() reads (the pair and each one's block ends), once per input:
    its length depends on m only modulo the schedule's period (schedule_steady.short_lengths), so
    the searches of a sweep's batches (the stages' times alike, m not) share it. Read-only."""
    ends: list[Any] = []
    pair = _run(p, k, v, schedule, tf, tb, latency, blocking, False, ends)
    return pair, tuple(ends)


Step = tuple[int, int, int, int]


@dataclass(frozen=True)
class _Walk:
    """A schedule's walk with its times left out (_walk): what depends only on p, m, v and the
    schedule. ``visits``: per visit, its stage and its blocks in order, each (the block whose end
    plus the p2p latency it waits for, the block whose end it waits for as is, its duration's
    index, its own slot) (slots of a list of ends whose last stands for no block; durations are
    indexed u for F(u) and p v + u for B(u)). ``orders``: per stage, its order (_orders).
    ``peak``: per stage, the most micro-batches whose activations it holds at once."""

    visits: tuple[tuple[int, list[Step]], ...]
    orders: tuple[Order, ...]
    peak: tuple[int, ...]


def _steps(p: int, m: int, v: int, s: int, order: Order) -> list[Step]:
    """Stage s's blocks as _Walk's steps: F(u, i) (virtual stage u = chunk x p + s) waits for
    F(u - 1, i) and the latency; B(u, i) for B(u + 1, i) and the latency, and for its own F(u, i).
    F(u, i) ends in slot u m + i, B(u, i) in slot (n + u) m + i (n = p v virtual stages)."""
    backward, i, chunk = order
    n, none = p * v, 2 * p * v * m
    u = chunk * p + s
    d = np.where(backward, n + u, u)
    after = np.where(u < n - 1, (n + u + 1) * m + i, none)
    before = np.where(u > 0, (u - 1) * m + i, none)
    a = np.where(backward, after, before)
    b = np.where(backward, u * m + i, none)
    return list(zip(a.tolist(), b.tolist(), d.tolist(), (d * m + i).tolist()))


# the walks kept, in steps (p m v forward and as many backward blocks; some 230 bytes each): a
# sweep of batches walks a few hundred shapes of a few thousand steps (issue 40), which a count of
# 64 walks made it walk again and again; a budget of steps also keeps a few large ones from
# filling the memory (about 115 MB at most)
WALK_STEPS = 500_000


@sized_cache(WALK_STEPS, lambda p, m, v, schedule: 2 * p * m * v)
def _walk(p: int, m: int, v: int, schedule: str) -> _Walk:
    """Walk the schedule once without times: a stage runs until a block waits on one of a
    neighbour's, and runs again when that one is done; the order of visits changes no end (each
    block's end is fixed by its own dependencies). Which block waits on which, and so this walk,
    does not depend on the times, so every step with the same p, m, v and schedule replays it
    (_run)."""
    orders = _orders(p, m, v, schedule)
    steps = [_steps(p, m, v, s, order) for s, order in enumerate(orders)]
    none = 2 * p * v * m
    done = [False] * none + [True]  # the last slot: no such block
    waits = [none] * p  # the slot of the block each stage waits for
    pos, visits, todo, queued = [0] * p, [], list(range(p)), [True] * p
    while todo:
        s = todo.pop()
        queued[s] = False
        mine, k0 = steps[s], pos[s]
        k, end = k0, len(mine)
        while k < end:  # by index: islice(mine, k0) would step over the k0 done ones each visit
            a, b, _, out = mine[k]
            if not (done[a] and done[b]):
                waits[s] = b if done[a] else a
                break
            done[out] = True
            k += 1
        if k > k0:
            pos[s] = k
            visits.append((s, mine[k0:k]))
            # a stage waits only for its neighbours' blocks (u - 1 and u + 1) or its own
            for nb in ((s - 1) % p, (s + 1) % p):
                if not queued[nb] and done[waits[nb]] and pos[nb] < len(steps[nb]):
                    queued[nb] = True
                    todo.append(nb)
    if not all(done):  # cannot happen for the orders above; guards against a bad order
        raise PerfModelError("the schedule deadlocked")
    # held: +1 at each F, -1 at each B, in the stage's order
    peak = [max(0, int(np.cumsum(np.where(o[0], -1, 1)).max())) for o in orders]
    return _Walk(tuple(visits), tuple(orders), tuple(peak))


def _run(
    p: int, m: int, v: int, schedule: str, tf: tuple[float, ...], tb: tuple[float, ...],
    latency: float, blocking: bool, keep_blocks: bool, ends_out: list[Any] | None = None,
) -> tuple[Simulation, Simulation]:  # fmt: skip
    """Two steps, one replay of the schedule's walk (_walk): without the p2p latency and with it
    (its blocks kept with ``keep_blocks``). A block starts when its stage is free and its inputs
    have arrived, and ends its duration later (plus the send, when blocking). State in plain lists
    and locals: a numpy scalar, a call or an attribute costs more than a block. ``ends_out``, where
    given, receives every block's end without and with the latency (slots as _Walk's)."""
    walk = _walk(p, m, v, schedule)
    n = p * v
    # blocking: the sender holds its stage for the transfer; the receiver sees it when it ends
    send, lat = (latency, 0.0) if blocking else (0.0, latency)
    dur = list(tf) + list(tb)
    # the send a block holds its stage for: none for F of the last and B of the first virtual stage
    sent = [send] * (2 * n)
    sent[n - 1] = sent[n] = 0.0
    alone = [0.0] * (2 * n * m) + [-np.inf]  # each block's end without the latency
    ends = alone.copy()  # and with it
    clock0, clock, busy = [0.0] * p, [0.0] * p, [0.0] * p
    for s, run in walk.visits:
        t0, t, spent = clock0[s], clock[s], 0.0
        for a, b, d, out in run:
            x = dur[d]
            ready = alone[a]
            if alone[b] > ready:
                ready = alone[b]
            if ready > t0:
                t0 = ready
            t0 += x
            alone[out] = t0
            ready = ends[a] + lat
            if ends[b] > ready:
                ready = ends[b]
            if ready > t:
                t = ready
            t = t + x + sent[d]
            ends[out] = t
            spent += x
        clock0[s], clock[s] = t0, t
        busy[s] += spent
    blocks = []
    if keep_blocks:
        for s, (backward, micro, chunk) in enumerate(walk.orders):  # stage by stage, in order
            u = chunk * p + s
            index = np.where(backward, n + u, u)
            for back, i, c, dk in zip(*(x.tolist() for x in (backward, micro, chunk, index))):
                start = ends[dk * m + i] - dur[dk] - sent[dk]
                blocks.append(Block(s, "B" if back else "F", i, c, start, start + dur[dk]))
    if ends_out is not None:
        ends_out.extend((alone, ends))
    peak = np.array(walk.peak, dtype=float) / v
    return (
        Simulation(p, m, v, schedule, max(clock0), np.array(busy), peak),
        Simulation(p, m, v, schedule, max(clock), np.array(busy), peak.copy(), blocks),
    )
