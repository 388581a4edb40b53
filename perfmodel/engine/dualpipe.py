"""DualPipe (DeepSeek-V3 report, arXiv 2412.19437, Sec. 3.2.1 and Table 2; deepseek-ai/DualPipe):
the per-micro-batch seconds of a pipeline's stage classes as DualPipe's ranks run them. The
bubble's closed form is cost/pipeline.dualpipe_bubble; memory (two stages' parameters a rank,
p + 1 chunks in flight) is engine/memory.py's."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost import pipeline as pipe
from perfmodel.cost.stages import Stages

# SMs DeepSeek's all-to-all kernels take while they run: "only 20 SMs are sufficient to fully
# utilize the bandwidths of IB and NVLink" (DeepSeek-V3 report Sec. 3.2.2, on H800's 132)
COMM_SMS = 20
# Share of an F&B pair's compute-kernel time that runs beside DeepEP's kernels, which hold their
# SMs from launch until the tokens they wait for have arrived, not only while bytes move:
# deepseek-ai/profile-data train.json (one F&B pair of 4 MoE layers, EP 64, H800, balanced
# routing; commit 4496024), 104.2 ms of the compute stream's 118.2 ms of kernels overlap a kernel
# of the communication stream, each of those on a grid of 20 blocks. Dimensionless.
COMM_SM_OCCUPANCY = 0.88


def contention(num_sms: int) -> float:
    """What hiding a collective behind compute costs in DualPipe's F&B pairs, per second hidden:
    the compute runs on num_sms - COMM_SMS SMs meanwhile, so it takes COMM_SMS / (num_sms -
    COMM_SMS) longer (0.18 on H800; cost/collectives.overlapped_time's penalty). Dimensionless."""
    return COMM_SMS / max(num_sms - COMM_SMS, 1)


def paired_cost(ep: Array, compute: Array, penalty: float) -> Array:
    """Seconds the expert all-to-all adds to an F&B pair (DeepSeek-V3 report Sec. 3.2.2): what it
    outlasts the other chunk's compute by, plus ``penalty`` (``contention``) of the time the
    compute runs beside the communication kernels' SMs, COMM_SM_OCCUPANCY of the compute or the
    all-to-all itself, whichever is longer (cost/collectives.overlapped_time counts only the
    latter). Without an all-to-all (no expert parallelism) there are no such kernels: 0."""
    ep, compute = np.asarray(ep, dtype=float), np.asarray(compute, dtype=float)
    beside = np.maximum(np.minimum(ep, compute), COMM_SM_OCCUPANCY * compute)
    return np.asarray(np.maximum(0.0, ep - compute) + penalty * np.where(ep > 0, beside, 0.0))


def ranks(
    stages: Stages, sc: dict[str, Any], dual: Array, pp: Array, m: Array, penalty: float
) -> dict[str, Any]:
    """The stage classes' per-micro-batch seconds as DualPipe's ranks run them (DeepSeek-V3 report
    Sec. 3.2.1; deepseek-ai/DualPipe): each micro-batch's chunk runs on one of a rank's two
    stages, so the end ranks cost the first and last stages' mean (Stages.dualpipe). In an F&B
    pair a forward and a backward chunk of different micro-batches run together, each one's
    expert all-to-all behind the other's compute (cost/collectives.overlapped_time with
    ``penalty``, the SMs the all-to-all takes: ``contention``); dualpipe_paired chunks run paired
    (the end ranks' count on the first and last classes, the fewest of a middle rank on the
    others), the rest alone. Adds "pair" (an F&B pair's seconds) and "b_alone" (a backward chunk
    alone) for the bubble of cost/pipeline.dualpipe_bubble. Rows where ``dual``
    (cost/pipeline.dualpipe_rows) is False are returned as they were."""
    out = {key: stages.dualpipe(x, dual) for key, x in sc.items()}
    compute = out["fwd"] + out["bwd"] + out["rec"]
    other = out["comm"] - out["ep"]  # TP and CP collectives: DualPipe does not move them
    hidden = paired_cost(out["ep"], compute, penalty)
    # per stage class (first, two middle, last): the end ranks pair least, then the middle's h = 1
    end = np.array([True, False, False, True])
    share = np.where(
        end,
        np.asarray(pipe.dualpipe_paired(pp, m, 0))[:, None],
        np.asarray(pipe.dualpipe_paired(pp, m, 1))[:, None],
    )
    share = share / np.asarray(m, dtype=float)[:, None]
    ep = np.where(dual[:, None], share * hidden + (1 - share) * out["ep"], out["ep"])
    out["pair"] = compute + other + hidden
    # a backward chunk alone: its compute and the backward half of the chunk's collectives
    out["b_alone"] = out["bwd"] + out["rec"] + out["comm"] / 2
    out["comm"] = other + ep
    out["ep"] = ep
    out["time"] = compute + out["comm"]
    return out
