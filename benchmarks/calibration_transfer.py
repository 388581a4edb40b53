"""How far a calibration on one run carries to the other runs of the same stack (issue 32).

For each source (llm-foundry's tables, torchtitan's, Megatron-Bridge's per GPU), each of its
published runs in turn is the one measured run of a calibration (`perfmodel calibrate` with one
step time: one factor, the stack's achieved rate); the source's other runs (other sizes, formats,
layouts, scales) are then predicted with it. The transfer error is the mean |error| of those
predictions, averaged over the choice of the calibration run; "before" is the mean |error| of the
uncalibrated model on the same runs. Also printed: the calibration on all of a source's runs but
one, predicting the one (leave-one-run-out, the fit `perfmodel calibrate` makes with several runs).

Run: PYTHONPATH=. python benchmarks/calibration_transfer.py [--json]   (about a minute)
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from perfmodel.inputs import presets
from perfmodel.review import calibrate as cal
from perfmodel.review.validate import KNOBS, run_case

# source -> case-name prefixes; Megatron-Bridge's per GPU (its B200, GB200 and GB300 runs are
# different machines and, between 25.11 and 26.04, different releases)
SOURCES = {
    "llm-foundry": ("llmf-",),
    "llm-foundry a100-40gb": ("llmf-a100-40-",),
    "llm-foundry a100-80gb": ("llmf-a100-80-",),
    "llm-foundry h100": ("llmf-h100-",),
    "llm-foundry h100 scale": ("llmf-h100ls-",),
    "torchtitan": ("titan-",),
    "megatron-bridge b200": ("mb2511-8b-b200", "mb2511-405b-b200"),
    "megatron-bridge gb200": ("mb2604-70b-gb200", "mb2604-405b-gb200"),
    "megatron-bridge gb300": ("mb2511-8b-gb300", "mb2604-70b-gb300", "mb2604-405b-gb300"),
}


def measured_runs(prefixes: tuple[str, ...]) -> list[cal.MeasuredRun]:
    """The source's validation cases as measured runs, the knobs the search chose for a case's
    unstated ones frozen (as `validate` runs them)."""
    out = []
    for case in presets.validation_cases():
        if not case["name"].startswith(prefixes) or "measured" not in case:
            continue
        r = run_case(case)
        c = r.estimate.config
        plan = r.plan.with_parallel(**{k: getattr(c, k) for k in KNOBS if k in r.searched})
        out.append(cal.MeasuredRun(r.name, plan, r.measured_s))
    return out


# the validation table of each source: left out of the published band a one-run calibration
# discounts (the band would otherwise be measured on the very runs predicted)
TABLES = {"llmf-": "llm-foundry", "titan-": "torchtitan-2412", "mb2": "mbridge-blackwell"}


def transfer(runs: list[cal.MeasuredRun], loo: bool = True) -> dict[str, float]:
    """Mean |error| before calibration, after calibrating on one run (averaged over which), and
    leave-one-run-out with the default fit of the others."""
    if len(runs) < 2:
        raise SystemExit("a source needs two runs: one to calibrate on, one to predict")
    before = [abs(cal.step_time(r.plan, {}) / r.measured_s - 1) for r in runs]
    table = next(t for p, t in TABLES.items() if runs[0].name.startswith(p))
    bands = {k: v for k, v in presets.error_bands().items() if k != table}
    after, raw = [], []
    for i, one in enumerate(runs):
        others = runs[:i] + runs[i + 1 :]
        theta, _ = cal.gauss_newton([one], ["rate"])
        raw.append(np.mean([abs(cal.step_time(o.plan, theta) / o.measured_s - 1) for o in others]))
        aim, _ = cal.one_run_target(one, cal.published_band(one.plan, bands))
        theta, _ = cal.gauss_newton([one], ["rate"], target=np.array([aim]))
        after.append(
            np.mean([abs(cal.step_time(o.plan, theta) / o.measured_s - 1) for o in others])
        )
    loo = cal.leave_one_out(runs, None)[0] if loo else {}
    return {
        "runs": len(runs),
        "before_pct": 100 * float(np.mean(before)),
        "after_one_run_undiscounted_pct": 100 * float(np.mean(raw)),
        "after_one_run_pct": 100 * float(np.mean(after)),
        "after_one_run_worst_pct": 100 * float(np.max(after)),
        "leave_one_out_pct": 100 * loo.get("all", float("nan")),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="Skip the leave-one-run-out fits.")
    args = ap.parse_args()
    rows = {
        name: transfer(measured_runs(prefixes), loo=not args.quick)
        for name, prefixes in SOURCES.items()
    }
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("mean |error| of a source's runs, uncalibrated and calibrated on one of its runs")
    print(
        f"{'source':<22} {'runs':>4} {'before':>7} {'raw':>7} {'1 run':>7} {'worst':>7} {'LOO':>7}"
    )
    for name, r in rows.items():
        print(
            f"{name:<22} {r['runs']:>4} {r['before_pct']:>6.1f}%"
            f" {r['after_one_run_undiscounted_pct']:>6.1f}% {r['after_one_run_pct']:>6.1f}%"
            f" {r['after_one_run_worst_pct']:>6.1f}% {r['leave_one_out_pct']:>6.1f}%"
        )
    print("1 run: calibrated on one run (as `perfmodel calibrate` does: the deviation less the")
    print("published band of other sources), averaged over which run; raw: the whole deviation")
    print("taken as the stack's; worst: the worst choice of run; LOO: each run predicted by")
    print("`perfmodel calibrate` on all the others of its source")


if __name__ == "__main__":
    main()
