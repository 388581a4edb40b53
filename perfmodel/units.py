"""SI constants and the parser for quantities written with units.

Everything inside perfmodel is SI: bytes, seconds, FLOP/s, bytes/s (SPEC
"Conventions"). GB = 1e9 bytes and GiB = 2**30 bytes are distinct and never
mixed. A YAML value such as ``2039 GB/s`` is converted once, on load, by
:func:`parse_quantity`; the formulas only ever see floats or numpy arrays.
"""

from __future__ import annotations

import math
import re

KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12
KiB, MiB, GiB, TiB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
GFLOPS, TFLOPS, PFLOPS = 1e9, 1e12, 1e15
NS, US, MS = 1e-9, 1e-6, 1e-3

# dimension name -> {unit spelling (lower case) -> factor to SI}
_BYTES = {
    "b": 1.0,
    "byte": 1.0,
    "bytes": 1.0,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
}
_UNITS: dict[str, dict[str, float]] = {
    "bytes": _BYTES,
    "bytes_per_s": {
        **{f"{u}/s": f for u, f in _BYTES.items()},
        # network links are often quoted in bits per second: 200 Gb/s = 25 GB/s
        "gbit/s": GB / 8,
        "tbit/s": TB / 8,
    },
    "flops_per_s": {
        "flops": 1.0,
        "flop/s": 1.0,
        "gflops": GFLOPS,
        "gflop/s": GFLOPS,
        "tflops": TFLOPS,
        "tflop/s": TFLOPS,
        "pflops": PFLOPS,
        "pflop/s": PFLOPS,
    },
    "seconds": {
        "s": 1.0,
        "sec": 1.0,
        "ms": MS,
        "us": US,
        "µs": US,
        "μs": US,
        "ns": NS,
        "min": 60.0,
        "h": 3600.0,
        "d": 86400.0,
    },
    # counts of tokens as people write them: 300B, 15.6T, 2M (B = billion, as in model sizes)
    "count": {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15},
    "watts": {"w": 1.0, "kw": 1e3, "mw": 1e6},
}
# Case-sensitive spellings that must not fold into bytes: "Gb/s" is gigabits.
_CASE_SENSITIVE = {
    "bytes_per_s": {
        "Gb/s": GB / 8,
        "Tb/s": TB / 8,
        "Mb/s": MB / 8,
        # "bps" is bits per second; "Bps" bytes
        "Gbps": GB / 8,
        "Tbps": TB / 8,
        "Mbps": MB / 8,
        "GBps": GB,
        "TBps": TB,
        "MBps": MB,
    }
}

EXAMPLES = {
    "bytes": "'80 GB' or '80GiB'",
    "bytes_per_s": "'2039 GB/s' or '2.039 TB/s'",
    "flops_per_s": "'312 TFLOPS'",
    "seconds": "'2 us' or '1.5ms'",
    "count": "'300B' or '15.6T'",
    "watts": "'700 W' or '10.2 kW'",
}

_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


class QuantityError(ValueError):
    """A malformed quantity; the message shows an accepted form."""


def parse_quantity(value: object, dimension: str) -> float:
    """Convert ``value`` (a number, or a string with a unit) to SI for ``dimension``.

    Plain numbers are taken as SI already. Raises QuantityError with an example
    of an accepted spelling when the text is malformed or the unit belongs to
    another dimension (``80 GB`` given for a bandwidth, say).
    """
    if dimension not in _UNITS:
        raise KeyError(dimension)
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity such as {EXAMPLES[dimension]}, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:
            raise QuantityError(
                f"a {len(str(value))}-digit number is too large for a quantity; write it like "
                f"{EXAMPLES[dimension]}"
            ) from None
    elif isinstance(value, str):
        m = _NUMBER.match(value)
        if not m:
            raise QuantityError(
                f"cannot read {value!r} as a quantity; write it like {EXAMPLES[dimension]}"
            )
        if len(value) > 64:
            raise QuantityError(
                f"{value[:40]!r}... is too long for a quantity; write it like {EXAMPLES[dimension]}"
            )
        number, unit = float(m.group(1)), m.group(2).replace(" ", "")
        if not unit:
            factor = 1.0
        elif unit in _CASE_SENSITIVE.get(dimension, {}):
            factor = _CASE_SENSITIVE[dimension][unit]
        elif unit.lower() in _UNITS[dimension]:
            factor = _UNITS[dimension][unit.lower()]
        else:
            raise QuantityError(
                f"unknown unit {unit!r} in {value!r}; write it like {EXAMPLES[dimension]}"
            )
        out = number * factor
    else:
        raise QuantityError(
            f"expected a quantity such as {EXAMPLES[dimension]}, got {type(value).__name__}"
        )
    if not math.isfinite(out):
        raise QuantityError(f"{value!r} is not a finite number")
    return out


def fmt_bytes(x: float) -> str:
    """Human bytes in decimal units (GB = 1e9), the SPEC convention."""
    for unit, f in (("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)):
        if abs(x) >= f:
            return f"{x / f:.3g} {unit}" if abs(x) / f < 100 else f"{x / f:.1f} {unit}"
    return f"{x:.0f} B"


def fmt_count(x: float) -> str:
    """A large count the way it is spoken: 300B, 15.6T."""
    for unit, f in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.3g}{unit}"
    return f"{x:.0f}"


def fmt_duration(x: float) -> str:
    """A span of wall time in the unit people plan in: s, min, h or days."""
    if x < 120:
        return fmt_time(x)
    if x < 7200:
        return f"{x / 60:.3g} min"
    if x < 2 * 86400:
        return f"{x / 3600:.3g} h"
    return f"{x / 86400:,.1f} days"


def fmt_time(x: float) -> str:
    """Human seconds: s, ms or us."""
    if abs(x) >= 1:
        return f"{x:.3g} s" if abs(x) < 100 else f"{x:.1f} s"
    if abs(x) >= MS:
        return f"{x / MS:.3g} ms"
    return f"{x / US:.3g} us"
