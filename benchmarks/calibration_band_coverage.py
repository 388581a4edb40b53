"""Does a several-run calibration's own band hold at its stated rate? (issue 39, item 3)

For each published stack of three runs or more (benchmarks/calibration_transfer.py's stacks, each
predicted by the model fitted without its source), each run in turn is held out; the others are
calibrated as `perfmodel calibrate` fits them, and the held-out run is predicted with their band
for the kinds of change between it and them: their own leave-one-run-out errors where they make
that change, else the one-run transfer on published stacks (configs/calibration_bands.yaml), the
largest over the kinds, as engine/calibrated.py takes it. Printed: how often the held-out run lies
inside that band, with the runs' leave-one-run-out errors reduced two ways: their mean (the band
before this change) and their 68% split conformal quantile, or the largest where too few (the
band now: review/calibrate.leave_one_out).

Run: python benchmarks/calibration_band_coverage.py   (minutes: a stack of n runs is n x (n - 1)
fits)
"""

from __future__ import annotations

import calibration_transfer as ct
import numpy as np

from perfmodel.engine import calibrated, uncertainty
from perfmodel.inputs import presets
from perfmodel.review import calibrate as cal


def held_out(runs: list[cal.MeasuredRun], scatter: float) -> list[tuple[float, float, float]]:
    """(held-out |error|, band from the mean, band from the quantile) for each run of a stack."""
    transfer = presets.calibration_bands()["typical"]
    out = []
    for j, held in enumerate(runs):
        rest = runs[:j] + runs[j + 1 :]
        theta = cal.fit_theta(rest, None, scatter)[0]
        err = abs(cal.step_time(held.plan, theta) / held.step_s - 1)
        errs, _ = cal.loo_errors(rest, None, scatter)
        made = calibrated.changes(cal.run_kind(held), [cal.run_kind(r) for r in rest]) or ["none"]
        bands = []
        for reduce in (np.mean, lambda v: cal.quantile_or_max(v, uncertainty.TYPICAL)):
            own = {c: float(reduce(v)) for c, v in errs.items()}
            bands.append(max(own.get(c, transfer.get(c, transfer["all"])) for c in made))
        out.append((err, *bands))
    return out


def main() -> None:
    scatter = cal.per_run_scatter()
    stacks = {
        name: ct.source_runs(table, prefixes)[1]
        for name, (table, prefixes) in ct.SOURCES.items()
        if name != "llm-foundry"  # its per-GPU stacks are the same runs
    }
    stacks.update({f"{n} (held)": r for n, r in ct.held_back().items()})
    print(f"{'stack':<27}{'runs':>5}{'mean band holds':>17}{'quantile band holds':>21}")
    every = []
    for name, runs in stacks.items():
        if len(runs) < 3:
            continue
        rows = held_out(runs, scatter)
        every += rows
        by_mean = sum(e <= b for e, b, _ in rows)
        by_q = sum(e <= q for e, _, q in rows)
        print(
            f"{name:<27}{len(rows):>5}{by_mean:>11} of {len(rows):<3}{by_q:>15} of {len(rows):<3}"
        )
    n = len(every)
    m = sum(e <= b for e, b, _ in every)
    q = sum(e <= b for e, _, b in every)
    print(f"{'all':<27}{n:>5}{m:>11} of {n:<3}{q:>15} of {n:<3}")
    print(
        f"held-out runs inside the band: mean {100 * m / n:.0f}%, quantile {100 * q / n:.0f}%"
        " (the band is stated at 68%)"
    )


if __name__ == "__main__":
    main()
