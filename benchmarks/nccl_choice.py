"""What NCCL's choice of algorithm does to the published runs whose data-parallel collectives
cross nodes (issue 31): each run's predicted step with NCCL's pick (cost/nccl.py) and with the
ring forced (system.nccl_algo [ring], NCCL_ALGO=Ring), and the pair NCCL picks for an all-reduce
and an all-gather of the run's bucket over its data-parallel group.

python benchmarks/nccl_choice.py   (about a minute)
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import nccl
from perfmodel.engine.mesh import Mesh
from perfmodel.inputs import presets
from perfmodel.review.validate import run_case
from perfmodel.specs.framework import PROFILES

TABLES = ("internevo-1024-a100", "narayanan2021-table2", "llm-foundry", "mlperf-llama31")


def _dp_link(plan):  # type: ignore[no-untyped-def]
    p = plan.parallel
    tp, cp, dp = p.tp or 1, p.cp or 1, p.dp or 1
    mesh = Mesh(np.array([tp]), np.array([p.pp or 1]), np.array([dp]), plan.system)
    return mesh.group_link(np.array([float(dp * cp)]), np.array([float(tp)])), dp * cp


def main() -> None:
    cases = [c for c in presets.validation_cases() if c["table"] in TABLES and "measured" in c]
    print(f"{'run':<44} {'NCCL':>8} {'ring':>8}  all-reduce    all-gather")
    for c in cases:
        plan = c["plan"]
        link, n = _dp_link(plan)
        if not bool(link.spans[0]) or n < 2:
            continue
        free = run_case(c)
        ring = run_case({**c, "plan": plan.with_system(nccl_algo=["ring"])})
        profile = PROFILES[plan.training.framework]
        bucket = 2.0 * max(profile["grad_bucket_params"], 1e6)  # 16-bit bytes
        bw, ppn = float(link.ring_bandwidth[0]), float(link.ranks_per_node[0])
        ar = nccl.pick("all-reduce", bucket, n, ppn, bw, link.intra_hw)
        ag = nccl.pick("all-gather", bucket, n, ppn, bw, link.intra_hw)
        print(f"{c['name']:<44} {free.error_pct:+7.1f}% {ring.error_pct:+7.1f}%  {ar:<13} {ag}")


if __name__ == "__main__":
    main()
