"""Does the model order layouts as they measured? (issue 38, item 5)

Finds every family in the project's validation data (configs/validation: the same model, hardware,
sequence, precision and global batch, with different layouts or GPU counts), and prints per family
the pairwise ordering accuracy (per-GPU throughput; pairs whose measured gap is below 3% are ties
and left out), the same for the pairs whose measured gap is 10% or more, and whether the fastest
run measured is the fastest predicted; then the totals. The family and pair logic is
perfmodel/review/ranking.py, which `perfmodel validate` reports from as well.

Run: python benchmarks/ranking.py [--json] [--misordered]
"""

from __future__ import annotations

import argparse
import json

from perfmodel.review.validate import validate


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the ranking as JSON")
    ap.add_argument("--misordered", action="store_true", help="list each mis-ordered pair")
    args = ap.parse_args()
    ranking = validate().ranking
    out = ranking.to_json()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{'family':<34} runs pairs right  >=10% right top-1")
    for f in out["families"]:
        print(
            f"{f['family'][:34]:<34} {len(f['runs']):>4} {f['pairs']:>5}"
            f" {_pct(f['accuracy_pct']):>5} {f['pairs_gap_10pct']:>6}"
            f" {_pct(f['accuracy_gap_10pct_pct']):>5} {'yes' if f['top1_agrees'] else 'no':>5}"
        )
        if args.misordered:
            for w in f["misordered"]:
                print(f"    mis-ordered: {w}")
    t = out["totals"]
    print(
        f"\n{t['families']} families, {t['runs']} runs: {t['ordered_right']} of {t['pairs']} pairs"
        f" ordered right ({_pct(t['accuracy_pct'])});\n{t['ties']} pair(s) measured within 3%"
        f" left out as ties; gap >= 10%: {t['ordered_right_gap_10pct']} of {t['pairs_gap_10pct']}"
        f" ({_pct(t['accuracy_gap_10pct_pct'])});\ntop-1 agrees in {t['top1_agree']} of"
        f" {t['families']} families ({_pct(t['top1_pct'])})"
    )


if __name__ == "__main__":
    main()
