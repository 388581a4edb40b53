"""How much faster async TP makes a step, measured and modelled (issue 38).

Finds every pair of published runs in the project's validation data (configs/validation) that are
the same plan but for tp_comm_overlap_ub (TP collectives pipelined with their GEMMs: Transformer
Engine's userbuffers, or torchtitan's enable_async_tensor_parallel), and prints per pair the gain,
step time without it over step time with it, less one, as measured and as predicted, and the
step-time error of each run. Measured gains come from the sources' own tables (torchtitan's
benchmark notes print both columns).

Run: python benchmarks/async_tp_gain.py [--json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case


def pairs(cases: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(without, with) for each run with tp_comm_overlap_ub whose plan, the flag turned off, is
    another run's plan."""
    off = {
        c["plan"].model_dump_json(): c for c in cases if not c["plan"].training.tp_comm_overlap_ub
    }
    out = []
    for c in cases:
        plan = c["plan"]
        if not plan.training.tp_comm_overlap_ub:
            continue
        twin = off.get(plan.with_training(tp_comm_overlap_ub=False).model_dump_json())
        if twin is not None:
            out.append((twin, c))
    return out


def gains(cases: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Each pair's measured and predicted gain and each run's error (fractions)."""
    every = [c for c in cases or presets.validation_cases() if "measured" in c]
    rows = []
    for plain, fast in pairs(every):
        a, b = run_case(plain), run_case(fast)
        rows.append(
            {
                "without": plain["name"],
                "with": fast["name"],
                "framework": fast["plan"].training.framework,
                "measured_gain": a.measured_s / b.measured_s - 1,
                "predicted_gain": a.predicted_s / b.predicted_s - 1,
                "error_without": a.predicted_s / a.measured_s - 1,
                "error_with": b.predicted_s / b.measured_s - 1,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the pairs as JSON")
    args = ap.parse_args()
    rows = gains()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'run with async TP':<34} {'framework':<9} {'measured':>8} {'model':>6} {'errors':>14}")
    for r in rows:
        print(
            f"{r['with']:<34} {r['framework']:<9} {100 * r['measured_gain']:7.1f}%"
            f" {100 * r['predicted_gain']:5.1f}%"
            f" {100 * r['error_without']:+6.1f}% {100 * r['error_with']:+6.1f}%"
        )
    print("gain: step time without over step time with, less one; errors: without, with")


if __name__ == "__main__":
    main()
