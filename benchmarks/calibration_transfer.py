"""How far a calibration on one run carries to the other runs of the same stack (issue 32), out of
sample.

A stack here is one source's published runs (llm-foundry's tables, torchtitan's, Megatron-Bridge's
per GPU): one software stack on one cluster. Its runs are predicted by the model fitted WITHOUT that
source (benchmarks/oos_errors.py: every fit that reads the source refitted on the others, or at its
prior), which is what a team gets for a stack the presets never saw ("before"). Then each of the
stack's runs in turn is the one measured run of a calibration, fitted as `perfmodel calibrate` fits
one step time (one factor, compute, the gap shrunk by the model's per-run scatter; the scatter taken
from the other sources' runs), and the stack's other runs are predicted with it. Columns:

  fitted   the model as shipped, fitted on these very runs (in sample: no calibration beats it)
  before   the model fitted without the source (out of sample)
  raw      one run, its whole gap taken as the stack's (no shrinkage); in --json also with the
           factor ``rate`` (links too) in place of ``compute``
  1 run    one run as `perfmodel calibrate` fits it, the mean over which run is calibrated on
  worst    the worst choice of that run
  near     each run predicted from the one other run most like it (same format first, then the
           same model, then layout and scale): the rule "calibrate on a run like the ones you will
           predict"
  LOO      each run predicted by `perfmodel calibrate` on all the others of its stack

All are mean |predicted / measured - 1| of step time, %. Stacks held back from every fit (the RUNS
files under examples/calibration/*/, such as torchtitan on power-limited B200) are out of sample as
shipped: their "before" is the shipped model.

Run: python benchmarks/calibration_transfer.py [--json] [--quick]   (several minutes; --quick skips
the leave-one-run-out fits)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import oos_errors as oos

from perfmodel.engine import calibrated, uncertainty
from perfmodel.inputs import presets
from perfmodel.review import calibrate as cal
from perfmodel.review.calibrate_runs import load_runs
from perfmodel.review.validate import KNOBS, run_case

# source -> (validation table, case-name prefixes); Megatron-Bridge's per GPU (its B200, GB200 and
# GB300 runs are different machines and, between 25.11 and 26.04, different releases)
SOURCES = {
    "llm-foundry": ("llm-foundry", ("llmf-",)),
    "llm-foundry a100-40gb": ("llm-foundry", ("llmf-a100-40-",)),
    "llm-foundry a100-80gb": ("llm-foundry", ("llmf-a100-80-",)),
    "llm-foundry h100": ("llm-foundry", ("llmf-h100-",)),
    "llm-foundry h100 scale": ("llm-foundry", ("llmf-h100ls-",)),
    "torchtitan": ("torchtitan-2412", ("titan-",)),
    "megatron-bridge b200": ("mbridge-blackwell", ("mb2511-8b-b200", "mb2511-405b-b200")),
    "megatron-bridge gb200": ("mbridge-blackwell", ("mb2604-70b-gb200", "mb2604-405b-gb200")),
    "megatron-bridge gb300": (
        "mbridge-blackwell",
        ("mb2511-8b-gb300", "mb2604-70b-gb300", "mb2604-405b-gb300"),
    ),
}
HELD_BACK = Path(__file__).resolve().parent.parent / "examples" / "calibration"
# how much a difference counts in choosing the nearest run: the format first (other GEMM kernels),
# then the GPU, the model, and the layout or scale
WEIGHT = {"format": 8, "gpu": 4, "model": 2, "layout": 1, "scale": 1}


def _frozen(case: dict) -> cal.MeasuredRun:
    """A validation case as a measured run, the knobs the search chose for its unstated ones frozen
    (as `validate` runs it)."""
    r = run_case(case)
    c = r.estimate.config
    plan = r.plan.with_parallel(**{k: getattr(c, k) for k in KNOBS if k in r.searched})
    return cal.MeasuredRun(r.name, plan, r.measured_s)


def source_runs(table: str, prefixes: tuple[str, ...]) -> tuple[list, list, list[str]]:
    """(runs as shipped, runs with the source left out of every fit, what was refitted)."""
    every = [c for c in presets.validation_cases() if "measured" in c]
    own = [c for c in every if c["name"].startswith(prefixes)]
    leave_out, said = oos.without_source(table, every)
    return [_frozen(c) for c in own], [_frozen(leave_out(c)) for c in own], said


def _error(run: cal.MeasuredRun, theta: dict[str, float]) -> float:
    return abs(cal.step_time(run.plan, theta) / run.step_s - 1)


def one_run(
    one: cal.MeasuredRun, scatter: float | None, factor: str = "compute"
) -> dict[str, float]:
    """The factors `perfmodel calibrate` fits on ``one`` alone (``scatter`` None: its whole gap)."""
    target = None
    if scatter is not None:
        target = np.array([cal.one_run_target(one, scatter)[0]])
    return cal.gauss_newton([one], [factor], target=target)[0]


def nearest(kinds: list[dict[str, Any]], j: int) -> list[int]:
    """The runs other than ``j`` most like it (WEIGHT), ties kept."""
    cost = {
        i: sum(WEIGHT[c] for c in calibrated.changes(kinds[j], [k]))
        for i, k in enumerate(kinds)
        if i != j
    }
    best = min(cost.values())
    return [i for i, c in cost.items() if c == best]


def transfer(
    runs: list[cal.MeasuredRun], scatter: float, shipped: list | None, loo: bool
) -> dict[str, Any]:
    """The columns of one stack (module docstring), mean |error| as fractions."""
    if len(runs) < 2:
        raise SystemExit("a stack needs two runs: one to calibrate on, one to predict")
    n = len(runs)
    fitted = [one_run(r, scatter) for r in runs]
    raw = [one_run(r, None) for r in runs]
    rate = [one_run(r, None, "rate") for r in runs]
    err = np.array([[_error(o, fitted[i]) for o in runs] for i in range(n)])
    err_raw = np.array([[_error(o, raw[i]) for o in runs] for i in range(n)])
    err_rate = np.array([[_error(o, rate[i]) for o in runs] for i in range(n)])
    off = ~np.eye(n, dtype=bool)
    per_choice = [float(err[i][off[i]].mean()) for i in range(n)]
    kinds = [cal.run_kind(r) for r in runs]
    near = [float(np.mean([err[i, j] for i in nearest(kinds, j)])) for j in range(n)]
    out = {
        "one_run_by_change": by_change(err, kinds),
        "runs": n,
        "shipped": float(np.mean([_error(r, {}) for r in shipped])) if shipped else None,
        "before": float(np.mean([_error(r, {}) for r in runs])),
        "one_run_raw": float(np.mean([err_raw[i][off[i]].mean() for i in range(n)])),
        "one_run_raw_rate": float(np.mean([err_rate[i][off[i]].mean() for i in range(n)])),
        "one_run": float(np.mean(per_choice)),
        "one_run_worst": float(np.max(per_choice)),
        "nearest_run": float(np.mean(near)),
        "per_run_scatter": scatter,
        "errors_before": {r.name: cal.step_time(r.plan, {}) / r.step_s - 1 for r in runs},
    }
    if loo:
        loo = cal.loo_errors(runs, None, scatter)[0].get("all")
        out["leave_one_out"] = float(np.mean(loo)) if loo else None
    return out


def by_change(err: np.ndarray, kinds: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The one-run errors ``err[i, j]`` (calibrated on run i, predicting run j) grouped by the kinds
    of change from run i to run j (engine/calibrated.py: scale, layout, model, format, gpu; a run
    predicted from itself, "none"), every pair also under "all"."""
    out: dict[str, list[float]] = {}
    for i, calib in enumerate(kinds):
        for j, other in enumerate(kinds):
            made = calibrated.changes(other, [calib]) or ["none"]
            for c in [*made, "all"] if i != j else ["none"]:
                out.setdefault(c, []).append(float(err[i, j]))
    return out


def bands_without(table: str | None) -> dict[str, Any]:
    """configs/error_bands.yaml's runs less those of ``table``."""
    runs = presets.error_bands()["runs"]
    return {"runs": {k: v for k, v in runs.items() if v["table"] != table}}


def held_back() -> dict[str, list[cal.MeasuredRun]]:
    """The stacks no fit reads: each RUNS file one folder down in examples/calibration."""
    return {p.parent.name: load_runs(str(p))[0] for p in sorted(HELD_BACK.glob("*/runs.yaml"))}


def rows(loo: bool) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, (table, prefixes) in SOURCES.items():
        shipped, left_out, said = source_runs(table, prefixes)
        scatter = cal.per_run_scatter(bands_without(table))
        out[name] = transfer(left_out, scatter, shipped, loo) | {"refitted": said}
        print(f"{name}: done", file=sys.stderr, flush=True)
    for name, runs in held_back().items():
        out[f"{name} (held)"] = transfer(runs, cal.per_run_scatter(), None, loo)
    return out


def _pct(v: float | None) -> str:
    return "     -" if v is None else f"{100 * v:5.1f}%"


def bands(table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """configs/calibration_bands.yaml from the --json table: each kind of change's one-run errors
    pooled over every pair of runs of every stack. The typical and worst half-widths are split
    conformal quantiles of |error| at 68% and 95% (engine/uncertainty.conformal, as the
    uncalibrated bands are drawn; the largest error where the pairs are too few for 95%), with the
    mean and the largest beside them; and how often the typical band holds, on the pairs it was
    drawn from and on each stack's pairs from the other stacks' quantile (held out), pooled over
    the pairs and stack by stack. The whole llm-foundry stack repeats its per-GPU stacks, so only
    its changes of GPU are taken from it."""
    by_stack: dict[str, dict[str, list[float]]] = {}
    for name, row in table.items():
        for change, errs in row["one_run_by_change"].items():
            if name != "llm-foundry" or change == "gpu":
                by_stack.setdefault(name, {}).setdefault(change, []).extend(errs)
    pooled: dict[str, list[float]] = {}
    for changes in by_stack.values():
        for change, errs in changes.items():
            pooled.setdefault(change, []).extend(errs)
    used = [n for n in table if n != "llm-foundry"]

    def typical(v: list[float]) -> float:
        return float(uncertainty.conformal(v, uncertainty.TYPICAL) or np.max(np.abs(v)))

    def worst(v: list[float]) -> float:
        return float(uncertainty.conformal(v, uncertainty.WORST) or np.max(np.abs(v)))

    held: dict[str, list[bool]] = {}
    per_stack: dict[str, list[float]] = {}
    for name, changes in by_stack.items():
        for change, errs in changes.items():
            rest = [e for n, c in by_stack.items() if n != name for e in c.get(change, [])]
            if rest:
                inside = [abs(e) <= typical(rest) for e in errs]
                held.setdefault(change, []).extend(inside)
                per_stack.setdefault(change, []).append(float(np.mean(inside)))
    return {
        "source": (
            "benchmarks/calibration_transfer.py --json --quick, then --bands: calibrated on one"
            " run of a published stack as `perfmodel calibrate` fits it, the error on each other"
            f" run of that stack, grouped by the change between them; stacks: {', '.join(used)}"
            " (changes of GPU: llm-foundry's A100 and H100 runs); typical and worst: split"
            " conformal 68% and 95% quantiles of |error|"
        ),
        "typical": {c: round(typical(v), 4) for c, v in sorted(pooled.items())},
        "worst": {c: round(worst(v), 4) for c, v in sorted(pooled.items())},
        "mean": {c: round(float(np.mean(np.abs(v))), 4) for c, v in sorted(pooled.items())},
        "max": {c: round(float(np.max(np.abs(v))), 4) for c, v in sorted(pooled.items())},
        "pairs": {c: len(v) for c, v in sorted(pooled.items())},
        # how often a stack's other runs fall within the typical band: on the pairs it is drawn
        # from, and on each stack's pairs from the other stacks' quantile
        "within_typical": {
            c: round(float(np.mean(np.abs(v) <= typical(v))), 3) for c, v in sorted(pooled.items())
        },
        "held_out_within_typical": {
            c: round(float(np.mean(v)), 3) for c, v in sorted(held.items())
        },
        # the pairs behind it, and the same coverage stack by stack, each stack counted once (a
        # team's stack is one stack: a stack of many pairs weighs no more than one of few)
        "held_out_pairs": {c: len(v) for c, v in sorted(held.items())},
        "held_out_stacks": {c: len(v) for c, v in sorted(per_stack.items())},
        "held_out_per_stack_within_typical": {
            c: round(float(np.mean(v)), 3) for c, v in sorted(per_stack.items())
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="Skip the leave-one-run-out fits.")
    ap.add_argument(
        "--bands",
        metavar="TABLE.json",
        help="Print configs/calibration_bands.yaml from a table this script wrote with --json.",
    )
    args = ap.parse_args()
    if args.bands:
        import yaml

        print("# written by benchmarks/calibration_transfer.py --bands (its docstring)")
        print(yaml.safe_dump(bands(json.loads(Path(args.bands).read_text())), sort_keys=False))
        return
    table = rows(loo=not args.quick)
    if args.json:
        print(json.dumps(table, indent=2))
        return
    print("A stack's runs out of sample, then calibrated on one of them (module docstring)")
    cols = ("shipped", "before", "one_run_raw", "one_run", "one_run_worst", "nearest_run")
    head = ("fitted", "before", "raw", "1 run", "worst", "near", "LOO")
    print(f"{'stack':<25}{'runs':>5} " + " ".join(f"{h:>6}" for h in head))
    for name, r in table.items():
        cells = [_pct(r[c]) for c in cols] + [_pct(r.get("leave_one_out"))]
        print(f"{name:<25}{r['runs']:>5} " + " ".join(cells))
    print("mean |predicted / measured - 1| of step time; (held): a stack no fit reads")


if __name__ == "__main__":
    main()
