"""perfmodel: an analytical performance model and planner for distributed transformer training."""

__version__ = "0.1.0"
