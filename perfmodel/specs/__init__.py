"""pydantic specs: hardware, model, parallel/training settings, precision, plans."""

from .hardware import GPU, Link, System
from .model import Model
from .parallel import Parallel, Training, RECOMPUTE, SCHEDULES
from .plan import Config, Plan
from .precision import DTYPE_BYTES, DTYPES, Precision

__all__ = ["GPU", "Link", "System", "Model", "Parallel", "Training", "Config", "Plan", "Precision",
           "DTYPE_BYTES", "DTYPES", "RECOMPUTE", "SCHEDULES"]
