"""Where a sweep's time goes, value by value (issue 40: 500 values in under 10 s).

A sweep answers each value with `plan`'s own search (review/sweep.py), so its time is 500 times
one search. This prices a sample of a batch-size sweep's values in this process and counts the
search's evaluations (engine/evaluate.evaluate, each pricing a block of configurations as arrays):
how many a value, how many rows, and the fit time = a + b x rows over every call, so that a (the
fixed cost of an evaluation) and b (the cost of a row) can be told apart. It prints the floor those
imply for 500 values: the rows alone, priced with no fixed cost at all, over this machine's cores.

Run: python benchmarks/sweep_floor.py [--plan llama3-8b-h100] [--values 20]   (prints figures;
asserts nothing: machines are noisy)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from perfmodel.engine import answer
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


if __name__ == "__main__":
    main()
