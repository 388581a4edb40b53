"""pydantic specs: hardware, model, parallel/training settings, precision, plans.

The names load on first use (PEP 562), so a module that needs only ``specs.precision`` or
``specs.framework`` (plain data) does not pay for pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.specs.hardware import GPU, Link, System
    from perfmodel.specs.model import Model
    from perfmodel.specs.parallel import RECOMPUTE, SCHEDULES, Parallel
    from perfmodel.specs.plan import Config, Plan
    from perfmodel.specs.precision import DTYPE_BYTES, DTYPES, Precision
    from perfmodel.specs.training import Training

_WHERE = {
    "GPU": "hardware",
    "Link": "hardware",
    "System": "hardware",
    "Model": "model",
    "Parallel": "parallel",
    "Training": "training",
    "RECOMPUTE": "parallel",
    "SCHEDULES": "parallel",
    "Config": "plan",
    "Plan": "plan",
    "Precision": "precision",
    "DTYPE_BYTES": "precision",
    "DTYPES": "precision",
}
__all__ = [
    "DTYPES",
    "DTYPE_BYTES",
    "GPU",
    "RECOMPUTE",
    "SCHEDULES",
    "Config",
    "Link",
    "Model",
    "Parallel",
    "Plan",
    "Precision",
    "System",
    "Training",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
