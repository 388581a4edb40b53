"""The memory verdicts (issue 37): a predicted peak is a band, not a point. The band is the memory
model's own out-of-sample error (benchmarks/calibrate_memory.py); against the usable line (HBM less
the reserve) a configuration fits (the band's upper edge under the line), is tight (the line inside
the band) or does not fit (the band's lower edge over the line)."""

from __future__ import annotations

from typing import Any

import numpy as np

# The memory model's own band, relative half-width: the split-conformal 68% rank of the |error| of
# its predicted peaks against the measured ones, each source's runs predicted with the allocator's
# ratio refitted without that source (25 peaks of 3 sources: mean 7.2%, the band holds 72%;
# written by benchmarks/calibrate_memory.py --write; docs/memory.md).
MEMORY_BAND = 0.102
VERDICTS = ("fits", "tight", "does not fit")


def fits_mask(total: Any, usable: Any) -> Any:
    """Not "does not fit": the band's lower edge of the predicted peak is under the usable line
    (no configuration is refused for memory while the line lies inside its band)."""
    return np.asarray(total) * (1 - MEMORY_BAND) <= usable


def tight_mask(total: Any, usable: Any) -> Any:
    """The usable line lies inside the band of the predicted peak: neither side is backed."""
    t = np.asarray(total)
    return (t * (1 - MEMORY_BAND) <= usable) & (t * (1 + MEMORY_BAND) > usable)


def margin_mask(total: Any, usable: Any) -> Any:
    """Fits with margin (the verdict "fits"): the band's upper edge of the predicted peak is under
    the usable line, so neither "tight" nor "does not fit"."""
    return np.asarray(total) * (1 + MEMORY_BAND) <= usable


def verdict(total: float, usable: float) -> str:
    """fits (the band's upper edge under the usable line), tight, or does not fit."""
    if not bool(fits_mask(total, usable)):
        return "does not fit"
    return "tight" if bool(tight_mask(total, usable)) else "fits"


def host_fits(m: Any) -> Any:
    """What is offloaded (``m``'s host_bytes) fits in the GPU's share of its host's DRAM
    (host_capacity_bytes) with margin, as margin_mask draws it: the offloaded activations are the
    activation model's. Nothing offloaded, or a capacity not known (0), is not checked."""
    h, capacity = np.asarray(m.get("host_bytes", 0.0)), np.asarray(
        m.get("host_capacity_bytes", 0.0)
    )
    return (h == 0) | (capacity <= 0) | margin_mask(h, capacity)


def verdict_of(values: dict[str, Any]) -> str:
    """An estimate's verdict: HBM's, or "does not fit" where it does not fit for another reason
    (the host's DRAM cannot hold what is offloaded: host_fits)."""
    if not bool(values["fits"]):
        return "does not fit"
    return verdict(float(values["total_bytes"]), float(values["usable_bytes"]))


def margin_text(total: float, usable: float) -> str:
    """The verdict with its margin in GB, in words: "tight (82.4 of 81.2 GB, +-10.2%)"."""
    v = verdict(total, usable)
    figures = f"{total / 1e9:.1f} of {usable / 1e9:.1f} GB, +-{100 * MEMORY_BAND:g}%"
    if v == "fits":
        return f"fits ({(usable - total) / 1e9:.1f} GB to spare; {figures})"
    return f"{v} ({figures})"
