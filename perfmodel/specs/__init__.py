"""pydantic specs: hardware, model, parallel/training settings, plans."""

from .hardware import GPU, Link, System
from .model import Model
from .parallel import Parallel, Training, RECOMPUTE, SCHEDULES
from .plan import Config, Plan, config_problems, knob_contradictions

__all__ = ["GPU", "Link", "System", "Model", "Parallel", "Training", "Config", "Plan",
           "config_problems", "knob_contradictions", "RECOMPUTE", "SCHEDULES"]
