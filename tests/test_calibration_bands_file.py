"""configs/calibration_bands.yaml as benchmarks/calibration_transfer.py --bands draws it (issue 39):
the band is the split conformal quantile of the pooled one-run errors, and its held-out coverage is
counted over the pairs and stack by stack. Worked numbers on two made-up stacks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import calibration_transfer as ct

# stack a predicts its other runs within 1-3%, stack b within 10-20%
TABLE = {
    "a": {"one_run_by_change": {"layout": [0.01, 0.02, 0.03]}},
    "b": {"one_run_by_change": {"layout": [0.10, -0.20]}},
}


def test_band_is_the_conformal_rank_of_the_pooled_errors() -> None:
    """Five errors: the ceil(6 x 0.68) = 5th smallest, 0.20; too few for 95%: the largest."""
    out = ct.bands(TABLE)
    assert out["typical"]["layout"] == pytest.approx(0.20)
    assert out["worst"]["layout"] == pytest.approx(0.20)
    assert out["pairs"]["layout"] == 5


def test_held_out_coverage_over_the_pairs_and_stack_by_stack() -> None:
    """a against b's band (two errors, too few for 68%: their largest, 0.20) holds on 3 of 3; b
    against a's (ceil(4 x 0.68) = 3rd smallest, 0.03) on 0 of 2. Over the pairs 3 of 5; stack by
    stack (1 + 0) / 2."""
    out = ct.bands(TABLE)
    assert out["held_out_within_typical"]["layout"] == pytest.approx(0.6)
    assert out["held_out_per_stack_within_typical"]["layout"] == pytest.approx(0.5)
    assert out["held_out_pairs"]["layout"] == 5
    assert out["held_out_stacks"]["layout"] == 2
