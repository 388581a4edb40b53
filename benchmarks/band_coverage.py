"""How often the error bands hold on runs they never saw (issue 28; SPEC 13): each published run's
out-of-sample error (configs/error_bands.yaml: its source left out of every fit,
benchmarks/oos_errors.py) against the band its configuration gets from the runs of every OTHER
source (perfmodel/engine/uncertainty.coverage). Prints the share inside the typical band (nominal
68%) and inside the worst band (nominal 95%), the median half-widths, and each source's figures;
tests/test_validate.py holds them.

Run: python benchmarks/band_coverage.py [--runs]   (a second or two)
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from perfmodel.engine import uncertainty
from perfmodel.inputs import presets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", action="store_true", help="every run, with its band and basis")
    args = ap.parse_args()
    c = uncertainty.coverage(uncertainty.Runs(presets.error_bands()["runs"]))
    print(
        f"{c['runs']} runs out of sample: typical band holds {100 * c['typical_coverage']:.0f}%"
        f" (nominal 68%), worst band {100 * c['worst_coverage']:.0f}% (nominal 95%); median"
        f" half-width {100 * c['median_typical_half_width']:.1f}% typical,"
        f" {100 * c['median_worst_half_width']:.1f}% worst"
    )
    for table in sorted({r["table"] for r in c["rows"]}):
        rows = [r for r in c["rows"] if r["table"] == table]
        t = np.mean([abs(r["error"]) <= r["typical"] for r in rows])
        w = np.mean([abs(r["error"]) <= r["worst"] for r in rows])
        med = np.median([r["typical"] for r in rows])
        print(
            f"  {table:<24} {len(rows):3d} runs: typical {100 * t:4.0f}%, worst {100 * w:4.0f}%,"
            f" half-width {100 * med:4.1f}%"
        )
    if args.runs:
        for r in c["rows"]:
            print(
                f"  {r['run']:<36} {100 * math.expm1(r['error']):+6.1f}%"
                f"  +-{100 * r['typical']:.0f}% / +-{100 * r['worst']:.0f}%  {r['basis']}"
            )


if __name__ == "__main__":
    main()
