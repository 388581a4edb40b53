"""Searches side by side with their evaluations pooled (engine/pooled.py; issue 40's sweep of 500
values): a pooled row's figures are its plan's alone, to the bit, and a search's answer is the
one it gives on its own; an error reaches its own search and no search waits forever."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

from perfmodel.engine import evaluate as ev
from perfmodel.engine import memory_switches, pooled
from perfmodel.engine.answer import plan_search
from perfmodel.engine.knobs import Knobs
from perfmodel.engine.space import CP_MIN_TOKENS, enumerate_space
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.review import sweep as sw


def bundled(name: str):
    return presets.plan_from_mapping(presets.bundled_plan(name), name)


def sample(plan, rows: int = 120) -> Knobs:
    """Up to ``rows`` configurations spread over the plan's space."""
    k = enumerate_space(plan, False, CP_MIN_TOKENS).knobs
    return k.take(np.unique(np.linspace(0, len(k) - 1, rows).astype(int)))


def same(a, b) -> bool:
    """Equal to the bit: arrays element by element (NaN where NaN), dicts and dataclasses field by
    field, anything else by ==."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if hasattr(a, "__dataclass_fields__"):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return bool(a == b)


# a dense plan on one node, the dense 3D plans, DualPipe MoE on GB200 racks and on H100 nodes
PLANS = ["llama3-8b-h100", "gpt3-175b", "llama3.1-405b-gb200", "deepseek-v3-h100"]


@pytest.mark.parametrize("name", PLANS)
def test_rows_of_plans_differing_in_the_batch_price_as_alone(name):
    """evaluate over the rows of three batches at once, each row with its own batch, gives every
    figure of every row as evaluate on that batch's plan alone: the memory switch sets too (each
    set a call of its own, as the search makes them)."""
    plan = bundled(name)
    gbs = plan.training.global_batch_size
    plans = [plan.with_training(global_batch_size=b) for b in (gbs // 2, gbs, 4 * gbs)]
    sets = [0] + [memory_switches.SET_CODES[s] for s in memory_switches.usable_sets(plan)]
    checked = 0
    for code in sets:
        parts = []
        for p in plans:
            k = sample(p, 60)
            k.memory_switch = np.full(len(k), code)
            parts.append(k)
        whole = ev.evaluate(
            plan,
            Knobs.concat(parts),
            np.repeat([p.training.global_batch_size for p in plans], [len(k) for k in parts]),
        )
        start = 0
        for p, k in zip(plans, parts):
            alone = ev.evaluate(p, k)
            rows = pooled._rows(whole, slice(start, start + len(k)), sum(map(len, parts)))
            assert same(rows, alone), (name, code, p.training.global_batch_size)
            # the search's first pass keeps what it ranks with: the same figures, to the bit
            kept = ev.evaluate(p, k, keep=ev.KEEP)
            assert list(kept) == list(ev.KEEP)
            assert same(kept, {key: alone[key] for key in ev.KEEP})
            start += len(k)
            checked += len(k)
    assert checked > 100


def answers(plans, side_by_side: bool) -> list[str]:
    bands = presets.error_bands()

    def one(p) -> str:
        try:
            out = plan_search(p, bands, top=1).to_json()
            out.pop("search_time_s")  # wall time: side by side, the others' turns too
            return json.dumps(out, sort_keys=True)
        except PerfModelError as e:
            return str(e)

    return pooled.side_by_side(one, plans) if side_by_side else [one(p) for p in plans]


def test_searches_side_by_side_answer_as_alone():
    """`plan`'s search of five batches side by side (the pool prices their evaluations together)
    gives each the answer, figures and all, of the search on its own; a batch no configuration
    divides is its own error, in its place."""
    plan = bundled("llama3-8b-h100")
    plans = [plan.with_training(global_batch_size=b) for b in (8, 24, 64, 250, 1000)]
    assert pooled.poolable(plans)
    got, alone = answers(plans, True), answers(plans, False)
    assert got == alone
    assert sum(a.startswith("{") for a in got) >= 4  # answers, not all errors


def run_with_deadline(fn, seconds: float = 120.0):
    """fn() in a thread; fails (does not hang) if it is not through in ``seconds``."""
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # handed to the test
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the searches side by side did not finish: one waits forever"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_an_error_reaches_its_own_search_and_none_waits(monkeypatch):
    """One search fails before it evaluates, one evaluation fails inside the pooled call: each of
    those two searches gets its own error, the others their answers, and side_by_side raises the
    first item's error once all are through."""
    plan = bundled("llama3-8b-h100")
    plans = [plan.with_training(global_batch_size=b) for b in (16, 32, 64, 128)]
    real = ev.evaluate

    def flaky(p, k, batch=None, keep=None):
        if batch is not None and (np.asarray(batch) == 32).any():
            raise PerfModelError("batch 32 refused")
        return real(p, k, batch, keep)

    monkeypatch.setattr(ev, "evaluate", flaky)
    seen: list[int] = []

    def work(p):
        if p.training.global_batch_size == 128:
            raise ValueError("no search for 128")
        return plan_search(p, presets.error_bands(), top=1).results[0].config.tp

    def outcome(p):
        try:
            return work(p)
        except (PerfModelError, ValueError) as e:
            return str(e)

    got = run_with_deadline(lambda: pooled.side_by_side(outcome, plans, seen.append))
    assert got[1] == "batch 32 refused" and got[3] == "no search for 128"
    assert isinstance(got[0], int) and isinstance(got[2], int)
    assert sorted(seen) == [0, 1, 2, 3]
    with pytest.raises(PerfModelError, match="batch 32"):
        run_with_deadline(lambda: pooled.side_by_side(work, plans))


def test_only_plans_differing_in_the_batch_are_pooled():
    plan = bundled("llama3-8b-h100")
    assert pooled.poolable([plan.with_training(global_batch_size=b) for b in (8, 16)])
    assert not pooled.poolable([plan, plan.with_training(seq_length=4096)])
    assert not pooled.poolable([plan, plan.with_system(num_gpus=16)])


def test_sweep_reports_progress_to_the_last_value():
    """A sweep of batches (pooled, in this process) calls progress from (0, n) to (n, n)."""
    plan = bundled("llama3-8b-h100")
    calls: list[tuple[int, int]] = []
    result = sw.sweep(
        plan,
        "training.global_batch_size",
        ["16", "32", "48"],
        progress=lambda d, n: calls.append((d, n)),
    )
    assert [p.est is not None for p in result.points] == [True, True, True]
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_a_pool_holds_a_bounded_number_of_rows():
    """Each search of a pool holds its space's figures while it runs: a sweep pools PART searches
    of a one-node plan, and so few of DeepSeek-V3 on GB200 (317,000 rows a value) that their
    spaces stay within POOL_ROWS."""
    small, large = bundled("llama3-8b-h100"), bundled("deepseek-v3-gb200")
    assert sw._pool_size(small) == sw.PART
    rows = len(enumerate_space(large, False, CP_MIN_TOKENS).knobs)
    assert 1 <= sw._pool_size(large) <= sw.POOL_ROWS // rows < 8


def test_a_kind_of_call_is_priced_once_for_every_search(monkeypatch):
    """The first calls of four searches need two rounds (a round holds two of them); the searches
    priced in the first round then make their second call, of another kind. The pool prices the
    calls that come earliest in their searches first, so the second round holds the other two
    first calls alone, and all four second calls are priced in one evaluation (priced with the
    oldest calls, the two early searches' second calls would go with the round's first calls,
    and the late ones' in a round more: that kind priced twice)."""
    plan = bundled("llama3-8b-h100")
    plans = [plan.with_training(global_batch_size=b) for b in (16, 32, 64, 128)]
    first, second = sample(plan, 60), sample(plan, 5)
    # a round holds two first calls, or two first calls and two second ones
    monkeypatch.setattr(pooled, "POOLED_ROWS", 2 * len(first) + 2 * len(second))
    priced: list[tuple[bool, int]] = []
    real = pooled._price

    def count(group):
        priced.append((group[0].keep is None, len(group)))
        real(group)

    monkeypatch.setattr(pooled, "_price", count)

    def work(p):
        ev.evaluate(p, first, keep=ev.KEEP)
        return ev.evaluate(p, second)["step_time_s"]

    got = run_with_deadline(lambda: pooled.side_by_side(work, plans))
    assert priced == [(False, 2), (False, 2), (True, 4)]
    for p, steps in zip(plans, got):  # each its own batch's figures
        assert same(steps, ev.evaluate(p, second)["step_time_s"])


def test_a_search_that_skips_a_kind_of_call_waits_for_the_others(monkeypatch):
    """Three searches make a first call, then two of them a call of a second kind that the third
    skips, then all a call of a third kind: the third waits for the other two to reach it, so that
    kind is priced once for all three."""
    plan = bundled("llama3-8b-h100")
    plans = [plan.with_training(global_batch_size=b) for b in (16, 32, 64)]
    rows = sample(plan, 8)
    kinds = {"first": ev.KEEP, "second": ("step_time_s",), "third": None}
    priced: list[tuple[Any, int]] = []
    real = pooled._price

    def count(group):
        priced.append((group[0].keep, len(group)))
        real(group)

    monkeypatch.setattr(pooled, "_price", count)

    def work(p):
        ev.evaluate(p, rows, keep=kinds["first"])
        if p.training.global_batch_size != 64:
            ev.evaluate(p, rows, keep=kinds["second"])
        return ev.evaluate(p, rows, keep=kinds["third"])["step_time_s"]

    run_with_deadline(lambda: pooled.side_by_side(work, plans))
    assert priced == [(kinds["first"], 3), (kinds["second"], 2), (kinds["third"], 3)]


@pytest.mark.parametrize("name", ["llama3-8b-h100", "deepseek-v3-h100", "gpt3-175b"])
def test_the_assumptions_and_switch_sets_never_read_the_global_batch(name):
    """An Estimate's assumptions and the usable switch sets are remembered for one plan of those
    that differ in the global batch alone (by_plan.batchless; engine/estimate.Batch,
    memory_switches.usable_sets), so each value of a sweep of the batch does not work them out
    again: that needs them to read no batch (the assumptions under each switch set)."""
    from perfmodel.engine.assumptions import assumptions

    plan = bundled(name)
    other = plan.with_training(global_batch_size=2 * plan.training.global_batch_size)
    assert memory_switches._usable_sets(plan) == memory_switches._usable_sets(other)
    for switch in ["", *memory_switches.usable_sets(plan)]:
        a, b = memory_switches.applied(plan, switch), memory_switches.applied(other, switch)
        assert assumptions(a) == assumptions(b), switch


def test_plans_that_set_a_flag_themselves_are_not_shared():
    """Two plans with the same figures, one of which sets a profile flag itself (at the profile's
    value): a switched copy of each re-fills a different set of flags, and their assumptions count
    different flags at the profile's defaults, so by_plan.batchless never hands one for the other.
    """
    from perfmodel.engine.estimate import estimate
    from perfmodel.specs.by_plan import batchless

    plan = bundled("llama3-8b-h100")
    flag = plan.training.profile_flags[0]
    own = plan.with_training(**{flag: getattr(plan.training, flag)})
    assert own.model_dump() == plan.model_dump()
    assert batchless(own) is not batchless(plan)
    cfg = plan_search(plan, presets.error_bands(), top=1).results[0].config
    counts = [estimate(p, cfg).assumed for p in (plan, own)]
    assert counts[0] != counts[1]
