"""Where a sweep's time goes, value by value (issue 40: 500 values in under 10 s).

A sweep answers each value with `plan`'s own search (review/sweep.py). This prices a sample of a
batch-size sweep's values in this process, one search after another, and counts the search's
evaluations (engine/evaluate.evaluate, each pricing a block of configurations as arrays): how many
a value, how many rows, and the fit time = a + b x rows over every call, so that a (the fixed cost
of an evaluation) and b (the cost of a row) can be told apart. It prints the floor those imply for
500 values: the rows alone, priced with no fixed cost at all, over this machine's cores. Then it
answers the same values side by side, as a sweep of batches does (engine/pooled.py: their
evaluations priced together, so the fixed cost is paid once a round, not once a value), and
splits that time into the pooled evaluations and the searches around them.

Run: python benchmarks/sweep_floor.py [--plan llama3-8b-h100] [--values 20]   (prints figures;
asserts nothing: machines are noisy)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from perfmodel.engine import answer, pooled
from perfmodel.engine import evaluate as ev
from perfmodel.inputs import presets

SWEEP = 500  # the sweep: batch sizes 8, 16, ..., 4000


def _counting() -> list[tuple[int, float]]:
    """Wrap evaluate wherever a module holds it; each call appends (rows, seconds)."""
    calls: list[tuple[int, float]] = []
    original = ev.evaluate

    def counted(plan, knobs, *args, **kwargs):
        t0 = time.perf_counter()
        out = original(plan, knobs, *args, **kwargs)
        calls.append((len(knobs), time.perf_counter() - t0))
        return out

    for module in list(sys.modules.values()):
        if module is not None and getattr(module, "evaluate", None) is original:
            module.evaluate = counted
    return calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="llama3-8b-h100", help="a bundled plan")
    ap.add_argument("--values", type=int, default=20, help="batch sizes sampled of the 500")
    args = ap.parse_args()
    plan = presets.plan_from_mapping(presets.bundled_plan(args.plan), args.plan)
    bands = presets.error_bands()
    answer.plan_search(plan, bands, top=1)  # warm the caches as a sweep's first value does
    calls = _counting()
    step = max(SWEEP // args.values, 1)
    batches = [8 * i for i in range(1, SWEEP + 1, step)]
    t0 = time.perf_counter()
    for gbs in batches:
        answer.plan_search(plan.with_training(global_batch_size=gbs), bands, top=1)
    per_value = (time.perf_counter() - t0) / len(batches)
    rows = np.array([r for r, _ in calls], dtype=float)
    secs = np.array([s for _, s in calls])
    fixed, per_row = np.linalg.lstsq(np.stack([np.ones_like(rows), rows], 1), secs, rcond=None)[0]
    n = len(batches)
    rows_a_value = rows.sum() / n
    cores = os.cpu_count() or 1
    floor = SWEEP * rows_a_value * per_row
    print(f"{args.plan}: {n} batch sizes of the {SWEEP} ({batches[0]} to {batches[-1]})")
    print(
        f"  a value:        {1e3 * per_value:7.1f} ms, of which evaluations"
        f" {1e3 * secs.sum() / n:.1f} ms"
    )
    print(f"  evaluations:    {len(calls) / n:7.1f} a value, {rows_a_value:,.0f} rows a value")
    print(f"  an evaluation:  {1e3 * fixed:7.2f} ms fixed + {1e6 * per_row:.2f} us a row")
    print(f"  {SWEEP} values:     {SWEEP * per_value:7.1f} s of CPU at this rate")
    print(
        f"  floor:          {floor:7.1f} s of CPU for the rows alone, {floor / cores:.1f} s of wall"
    )
    print(f"                  on {cores} cores (no fixed cost, no search around the evaluations)")
    _side_by_side(plan, batches, bands)


def _side_by_side(plan, batches: list[int], bands) -> None:
    """The same values side by side, their evaluations pooled: a value's time, and of it the
    pooled evaluations' (engine/pooled._price, timed where it runs)."""
    priced: list[float] = []
    price = pooled._price

    def timed(group):
        t0 = time.perf_counter()
        price(group)
        priced.append(time.perf_counter() - t0)

    pooled._price = timed
    plans = [plan.with_training(global_batch_size=gbs) for gbs in batches]
    t0 = time.perf_counter()
    pooled.side_by_side(lambda p: answer.plan_search(p, bands, top=1), plans)
    n, wall = len(plans), time.perf_counter() - t0
    pooled._price = price
    print(f"  side by side:   {1e3 * wall / n:7.1f} ms a value, of which pooled evaluations")
    print(f"                  {1e3 * sum(priced) / n:.1f} ms ({len(priced)} for the {n} values)")
    print(f"  {SWEEP} values:     {SWEEP * wall / n:7.1f} s of CPU at this rate")


if __name__ == "__main__":
    main()
