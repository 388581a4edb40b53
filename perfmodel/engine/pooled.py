"""Searches run side by side, their evaluations pooled (issue 40: a sweep of 500 values).

A sweep answers every value with `plan`'s own search (review/sweep.py). A search prices its
configurations in some thirty calls of engine/evaluate.evaluate, and on a plan of one node each
call's fixed cost (its Python and numpy set-up, some 2-4 ms) outweighs its rows. Searches of plans
that differ only in the global batch price the same kinds of rows in the same order, so here each
search runs in a thread of its own and, where it calls evaluate, waits; once every search of the
pool waits, the caller's thread prices the waiting calls together (in rounds of at most POOLED_ROWS
rows, the calls that come earliest in their searches first), one evaluate per plan (the global batch
aside) and memory switch set, each row with its own plan's batch (evaluate's ``batch``), and each
search goes on with its own rows. evaluate's formulas are row by row, so a pooled row's figures are
those of its search alone, to the bit (tests/test_pooled.py).

Only one search runs Python at a time (the interpreter's lock); the threads are a way to hold
every search at its evaluate, not to use more cores: review/sweep.py spreads the values over
processes for that.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

import numpy as np

from perfmodel.engine.knobs import Knobs
from perfmodel.engine.memory_switches import priced_set
from perfmodel.specs import Plan
from perfmodel.specs.by_plan import batchless_key

T = TypeVar("T")
R = TypeVar("R")

_LOCAL = threading.local()


def current_pool() -> Pool | None:
    """The pool this thread's evaluations join, if any (engine/evaluate.evaluate asks)."""
    return getattr(_LOCAL, "pool", None)


# engine/evaluate.evaluate, as it hands a call to the pool: (plan, knobs, each row's batch, the
# figures kept)
Keep = tuple[str, ...] | None
Evaluate = Callable[[Plan, Knobs, np.ndarray, Keep], dict[str, Any]]


@dataclass
class _Call:
    plan: Plan
    knobs: Knobs
    price: Evaluate
    keep: Keep
    turn: threading.Event  # its search's: set when the call is priced and the search may go on
    index: int  # how many calls its search made before it (0: its first)
    kind: Hashable = field(init=False)  # calls of one kind are priced by one evaluate (_kind)
    out: dict[str, Any] | None = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.kind = _kind(self)


class Pool:
    """The searches of one side-by-side run, taking turns with the caller: one of them runs at a
    time (the others wait on their own event, so that the interpreter's lock is never contended:
    numpy lets it go in every large operation) until it calls evaluate or ends; then the next whose
    turn is due runs. Once every search still running waits in evaluate, the caller's thread prices
    their calls together (so the large arrays of every round come from one thread's heap, which
    reuses them) and they go on in the order they called."""

    def __init__(self) -> None:
        self.due: deque[threading.Event] = deque()  # searches free to go on, in turn
        self.waiting: list[_Call] = []
        self.ranks: dict[Hashable, int] = {}  # each kind of call, in the order first priced
        self.pricer = threading.Event()  # the caller's turn: price, or all are through

    def evaluate(self, plan: Plan, knobs: Knobs, price: Evaluate, keep: Keep) -> dict[str, Any]:
        """``price``(plan, knobs, its batch, keep), priced with the other searches' calls once
        all wait (engine/evaluate.evaluate hands itself as ``price``)."""
        call = _Call(plan, knobs, price, keep, _LOCAL.turn, _LOCAL.calls)
        _LOCAL.calls += 1
        self.waiting.append(call)
        self._next()
        call.turn.wait()
        call.turn.clear()
        if call.error is not None:
            raise call.error
        assert call.out is not None
        return call.out

    def leave(self) -> None:
        """A search is through: the next runs."""
        self._next()

    def _next(self) -> None:
        """Hand the turn on: to the next search due, or, where none is (every search still
        running waits in evaluate, or none runs), to the caller."""
        if self.due:
            self.due.popleft().set()
        else:
            self.pricer.set()

    def run(self, turns: list[threading.Event]) -> None:
        """The caller's part: start the searches in turn, then, each time the turn comes back,
        price the calls that come earliest in their searches (_earliest), POOLED_ROWS of rows at
        most (so the figures of at most that many rows are held at once), and hand the turn to the
        first of them; until every search is through."""
        self.due.extend(turns)
        while True:
            self._next()
            self.pricer.wait()
            self.pricer.clear()
            if not self.waiting:
                return
            calls = self._earliest()
            try:
                _price(calls)
            except Exception as e:  # every call of the round ends with it
                for c in calls:
                    if c.out is None and c.error is None:
                        c.error = e
            self.due.extend(c.turn for c in calls)

    def _earliest(self) -> list[_Call]:
        """The waiting calls of the kind that comes earliest in the searches (one evaluate prices
        them: _kind), in the order they came, while their rows stay within POOLED_ROWS (the first
        whatever its rows), taken off the waiting list. The searches make the same kinds of calls in
        much the same order, so the kinds are ranked in the order first priced, and a kind not yet
        priced comes after them, the one most searches wait in first (then the earliest in its
        search). A search that ran ahead waits for the others to reach its kind of call; then all
        are priced in one evaluation. (Pricing the oldest calls instead let the searches whose first
        pass came in a later round trail a round behind, and those that skipped a kind of call run a
        kind ahead: each kind of small call was priced once for each such cohort.)"""
        ranks, count = self.ranks, Counter(c.kind for c in self.waiting)
        head = min(
            self.waiting, key=lambda c: (ranks.get(c.kind, len(ranks)), -count[c.kind], c.index)
        )
        ranks.setdefault(head.kind, len(ranks))
        rows, taken, rest = 0, list[_Call](), list[_Call]()
        for c in self.waiting:
            if c.kind == head.kind and (not taken or rows + len(c.knobs) <= POOLED_ROWS):
                rows += len(c.knobs)
                taken.append(c)
            else:
                rest.append(c)
        self.waiting = rest
        return taken


def side_by_side(
    work: Callable[[T], R], items: Sequence[T], done: Callable[[int], None] | None = None
) -> list[R]:
    """[work(x) for x in items], each in a thread of its own, taking turns, with their evaluations
    pooled; what one raises is raised here, the first item's first. ``done(i)`` is called as item
    i ends."""
    pool = Pool()
    results: list[Any] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)
    turns = [threading.Event() for _ in items]

    def run(i: int) -> None:
        turns[i].wait()
        turns[i].clear()
        _LOCAL.pool, _LOCAL.turn, _LOCAL.calls = pool, turns[i], 0
        try:
            results[i] = work(items[i])
        except BaseException as e:  # handed to the caller below
            errors[i] = e
        finally:
            _LOCAL.pool = None
            if done is not None:
                done(i)
            pool.leave()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(items))]
    for t in threads:
        t.start()
    pool.run(turns)
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def poolable(plans: Sequence[Plan]) -> bool:
    """Whether the plans differ in nothing but the global batch (their searches' evaluations can
    then be pooled)."""
    return len({batchless_key(p) for p in plans}) == 1


def _kind(call: _Call) -> Hashable:
    """What one evaluate can price together: plans equal but for the global batch, rows priced on
    one switch set (memory_switches.priced_set; a call of rows of several sets is its own kind,
    priced alone, and evaluate refuses it as it would alone), the same figures kept."""
    code = priced_set(call.knobs.memory_switch)
    return ("alone", id(call)) if code is None else (batchless_key(call.plan), code, call.keep)


# rows priced in one round at most (engine/evaluate.CHUNK's bound on memory: a round holds every
# figure of its rows until their searches read them); a call larger than it is priced alone
POOLED_ROWS = 65536


def _price(group: list[_Call]) -> None:
    """One evaluate over the group's rows, each call handed its own; where it raises, each call is
    priced alone, so that each gets its own error or figures."""
    sizes = [len(c.knobs) for c in group]
    try:
        knobs = Knobs.concat([c.knobs for c in group]) if len(group) > 1 else group[0].knobs
        batch = np.repeat([c.plan.training.global_batch_size for c in group], sizes)
        whole = group[0].price(group[0].plan, knobs, batch, group[0].keep)
    except Exception as e:
        if len(group) > 1:
            for c in group:
                _price([c])
        else:
            group[0].error = e
        return
    start, n = 0, len(knobs)
    for c, size in zip(group, sizes):
        c.out = whole if len(group) == 1 else _rows(whole, slice(start, start + size), n)
        start += size


def _rows(value: Any, rows: slice, n: int) -> Any:
    """``value`` (an evaluate output: arrays a row each, their dicts and dataclasses, or a figure
    for all rows) at ``rows``."""
    if isinstance(value, dict):  # mostly arrays a row each: sliced here, not a call each
        return {
            k: (
                v[rows]
                if type(v) is np.ndarray and v.ndim and v.shape[0] == n
                else _rows(v, rows, n)
            )
            for k, v in value.items()
        }
    if isinstance(value, np.ndarray):
        return value[rows] if value.ndim and value.shape[0] == n else value
    if is_dataclass(value) and not isinstance(value, type):
        return type(value)(
            **{f.name: _rows(getattr(value, f.name), rows, n) for f in fields(value)}
        )
    return value
