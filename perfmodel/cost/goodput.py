"""A training run's length, energy and goodput (issue 23). Units: seconds, watts, joules,
bytes; floats.

Checkpoint/restart under random failures (Young 1974, "A first order approximation to the optimum
checkpoint interval", CACM 17(9); Daly 2006, "A higher order estimate of the optimum checkpoint
interval for restart dumps", FGCS 22(3)): a job with mean time between interruptions M (the
per-GPU rate times the GPUs) saves a checkpoint taking delta every tau seconds of work. Each
interruption loses, on average, half an interval of work and the restart R (which includes
reading the checkpoint back). To first order the wall time of T seconds of work is

    T_wall = T (1 + delta / tau) / (1 - (tau / 2 + R) / M),

and the interval that minimizes it is Daly's higher-order optimum

    tau = sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta   (delta < 2M),

Young's sqrt(2 delta M) to first order; tau = M beyond.
"""

from __future__ import annotations

import math


def job_mtbf(failure_rate_per_gpu_hour: float, gpus: int) -> float:
    """Mean seconds between interruptions of a job on ``gpus`` GPUs (inf without failures)."""
    rate = failure_rate_per_gpu_hour * gpus / 3600.0
    return math.inf if rate <= 0 else 1.0 / rate


def optimal_interval(delta: float, mtbf: float) -> float:
    """Daly's checkpoint interval for a save of ``delta`` seconds, seconds of work."""
    if math.isinf(mtbf):
        return math.inf
    if delta <= 0:
        return 0.0
    if delta >= 2 * mtbf:
        return mtbf
    x = delta / (2 * mtbf)
    return math.sqrt(2 * delta * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - delta


def wall_time(work: float, delta: float, interval: float, mtbf: float, restart: float) -> float:
    """Seconds to finish ``work`` seconds of training with checkpoints and interruptions (first
    order); inf when interruptions come faster than the work between them can be saved."""
    if math.isinf(mtbf):
        return work * (1 + (delta / interval if interval and not math.isinf(interval) else 0.0))
    lost = (interval / 2 + restart) / mtbf
    if lost >= 1:
        return math.inf
    return work * (1 + delta / interval) / (1 - lost)


def energy_joules(seconds: float, gpus: int, gpu_w: float, other_w: float, pue: float) -> float:
    """The facility's energy over a run: every GPU's power and its share of the rest of its node,
    times the power usage effectiveness, J."""
    return seconds * gpus * (gpu_w + other_w) * pue
