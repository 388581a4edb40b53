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

from perfmodel.cost import Array, Num
from perfmodel.engine.schedule_zb import LOOPED, ZERO_BUBBLE, chunks, rank_of
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


@lru_cache(maxsize=64)
def _orders(p: int, m: int, v: int, schedule: str) -> tuple[tuple[tuple[str, int, int], ...], ...]:
    """Per stage, the (kind, micro-batch, chunk) sequence of the schedule (computed once per p, m, v
    and schedule; read-only)."""
    orders = []
    for s in range(p):
        if schedule == "gpipe":
            seq = [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in reversed(range(m))]
        elif schedule == "1f1b":
            warm = min(p - s - 1, m)
            seq = [("F", i, 0) for i in range(warm)]
            for i in range(m - warm):
                seq += [("F", warm + i, 0), ("B", i, 0)]
            seq += [("B", i, 0) for i in range(m - warm, m)]
        # interleaved 1F1B, Megatron's order (schedules.py,
        # forward_backward_pipelining_with_interleaving)
        else:
            total = m * v
            warm = min((p - s - 1) * 2 + (v - 1) * p, total)

            def fwd(k: int) -> tuple[str, int, int]:
                return ("F", (k // (p * v)) * p + k % p, (k // p) % v)

            def bwd(k: int) -> tuple[str, int, int]:
                return ("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)

            seq = [fwd(k) for k in range(warm)]
            for k in range(total - warm):
                seq += [fwd(warm + k), bwd(k)]
            seq += [bwd(k) for k in range(total - warm, total)]
        orders.append(tuple(seq))
    return tuple(orders)


def _per_virtual(x: Num | Sequence[float], p: int, v: int, name: str) -> Array:
    """Times per virtual stage (p v entries): a scalar, p per-stage times (split evenly over
    chunks), or p v."""
    a = np.atleast_1d(np.asarray(x, dtype=float))
    if a.size == 1:
        a = np.full(p, float(a[0]))
    if a.size == p:
        a = np.tile(a / v, v)  # virtual stage u = c p + s
    if a.size != p * v:
        raise PerfModelError(
            f"{name}: give one time, {p} per-stage times or {p * v} per-chunk times; got {a.size}"
        )
    if (a < 0).any() or not np.isfinite(a).all():
        raise PerfModelError(f"{name}: times must be finite and non-negative")
    return a


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
        tf, tb = _per_rank(t_f, p, v, "t_f", looped), _per_rank(t_b, p, v, "t_b", looped)
        tw = _per_rank(t_w, p, v, "t_w", looped)
        if any(w > b * (1 + 1e-12) for w, b in zip(tw, tb)):
            raise PerfModelError("t_w: the weight-gradient time is part of t_b, so at most t_b")
        tb = tuple(b - w for b, w in zip(tb, tw))
        return _run_zero_bubble(p, m, v, schedule, tf, tb, tw, latency, blocking, keep_blocks)
    tf = tuple(_per_virtual(t_f, p, v, "t_f").tolist())
    tb = tuple(_per_virtual(t_b, p, v, "t_b").tolist())
    if keep_blocks:
        return _run(p, m, v, schedule, tf, tb, latency, blocking, True)
    return _run_cached(p, m, v, schedule, tf, tb, latency, blocking)


def _per_rank(
    x: Num | Sequence[float], p: int, v: int, name: str, looped: bool = False
) -> tuple[float, ...]:
    """Times per virtual stage of a zero-bubble schedule: per-stage times are a rank's, split
    evenly over its chunks, virtual stage u on rank schedule_zb.rank_of(u) (the V folds back; a
    looped schedule's chunk c of rank s is u = c p + s)."""
    a = np.atleast_1d(np.asarray(x, dtype=float))
    if a.size in (1, p):
        a = np.broadcast_to(a, (p,)) / v
        a = np.array([a[rank_of(u, p, v, looped)] for u in range(p * v)])
    return tuple(_per_virtual(a, p, v, name).tolist())


@lru_cache(maxsize=256)
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


@lru_cache(maxsize=256)
def _run_cached(
    p: int, m: int, v: int, schedule: str, tf: tuple[float, ...], tb: tuple[float, ...],
    latency: float, blocking: bool,
) -> Simulation:  # fmt: skip
    """A step without its blocks, once per input: estimates of one plan (the search's exact top, the
    slower-link check, the report) simulate the same pipeline again and again. Read-only."""
    return _run(p, m, v, schedule, tf, tb, latency, blocking, False)


def _run(
    p: int, m: int, v: int, schedule: str, tf: tuple[float, ...], tb: tuple[float, ...],
    latency: float, blocking: bool, keep_blocks: bool,
) -> Simulation:  # fmt: skip
    """Walk the schedule. A stage runs until a block waits on another stage; only a neighbour's
    progress can release it, so only the neighbours of a stage that ran are visited again, and the
    order of visits changes no number (each block's end is fixed by its own dependencies). State
    in plain lists and locals: a numpy scalar, a call or an attribute costs more than a block."""
    # each stage's order as (backward?, micro-batch, virtual stage u = chunk x p + stage)
    orders = [
        [(kind == "B", i, c * p + s) for kind, i, c in order]
        for s, order in enumerate(_orders(p, m, v, schedule))
    ]
    # blocking: the sender holds its stage for the transfer; the receiver sees it when it ends
    send, lat = (latency, 0.0) if blocking else (0.0, latency)
    last = p * v - 1
    done_f: list[list[float | None]] = [[None] * m for _ in range(p * v)]
    done_b: list[list[float | None]] = [[None] * m for _ in range(p * v)]
    pos, clock, busy, held, peak = [0] * p, [0.0] * p, [0.0] * p, [0] * p, [0] * p
    blocks: list[Block] = []
    remaining = sum(len(o) for o in orders)
    todo, queued = list(range(p)), [True] * p
    while todo:
        s = todo.pop()
        queued[s] = False
        order, k = orders[s], pos[s]
        k0, t, h, pk, spent = k, clock[s], held[s], peak[s], 0.0
        while k < len(order):
            backward, i, u = order[k]
            if not backward:
                if u == 0:
                    ready = 0.0
                else:
                    prev = done_f[u - 1][i]
                    if prev is None:
                        break
                    ready = prev + lat
                dur, sent = tf[u], (send if u != last else 0.0)
                end = (t if t >= ready else ready) + dur + sent
                done_f[u][i] = end
                h += 1
                if h > pk:
                    pk = h
            else:
                own = done_f[u][i]
                if own is None:
                    break
                if u == last:
                    ready = own
                else:
                    nxt = done_b[u + 1][i]
                    if nxt is None:
                        break
                    ready = nxt + lat
                    if own > ready:
                        ready = own
                dur, sent = tb[u], (send if u != 0 else 0.0)
                end = (t if t >= ready else ready) + dur + sent
                done_b[u][i] = end
                h -= 1
            if keep_blocks:
                start = end - dur - sent
                blocks.append(Block(s, "B" if backward else "F", i, u // p, start, start + dur))
            spent += dur
            t = end
            k += 1
        pos[s], clock[s], held[s], peak[s] = k, t, h, pk
        busy[s] += spent
        if k > k0:
            remaining -= k - k0
            for n in ((s - 1) % p, (s + 1) % p):
                if not queued[n]:
                    queued[n] = True
                    todo.append(n)
    if remaining:  # cannot happen for the orders above; guards against a bad order
        raise PerfModelError("the schedule deadlocked")
    return Simulation(
        p, m, v, schedule, max(clock), np.array(busy), np.array(peak, dtype=float) / v, blocks
    )
