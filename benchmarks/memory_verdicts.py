"""The memory verdict of every validation case (configs/validation) at its stated layout: how many
the model says do not fit, beyond its memory band (issue 37: every run there ran, so the count
should be 0), and how many are tight, each listed with its figures. A case that times one layer
(per_layer_ms: Korthikanti 2022 Table 4) is no run that fitted, and is listed apart.

Run: python benchmarks/memory_verdicts.py
"""

from __future__ import annotations

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.engine.memory_verdict import MEMORY_BAND, verdict
from perfmodel.inputs import presets


def main() -> None:
    rows, layers = [], []
    for case in presets.validation_cases():
        if case.get("per_layer_ms"):
            layers.append(case["name"])
            continue
        plan = case["plan"]
        v = estimate(plan, resolve_config(plan)).values
        rows.append((case["name"], verdict(v["total_bytes"], v["usable_bytes"]), v))
    print(
        f"{len(rows)} validation cases at their stated layouts; memory band"
        f" +-{100 * MEMORY_BAND:g}%"
    )
    print(f"not runs (one layer timed), not judged: {', '.join(layers) or 'none'}")
    for word in ("does not fit", "tight"):
        hits = [r for r in rows if r[1] == word]
        print(f"{word}: {len(hits)}")
        for name, _, v in hits:
            print(
                f"  {name:48s} {v['total_bytes'] / 1e9:6.1f} of {v['usable_bytes'] / 1e9:6.1f} GB"
                f" ({100 * (v['total_bytes'] / v['usable_bytes'] - 1):+.1f}%)"
            )


if __name__ == "__main__":
    main()
