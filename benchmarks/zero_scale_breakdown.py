"""Where the step of sharded data parallelism at 384-2,240 ranks goes (issue 38 item 2): for
Narayanan et al. 2021 Table 2's DeepSpeed ZeRO-3 runs and InternEvo's 1,024-A100 runs, the
measured step beside what the model's physics gives for each part.

ZeRO-3 (deepspeed-2021): each run as shipped and with the host's per-rank loop off
(training.collective_rank_host_s 0), so that what NCCL's own model prices (cost/nccl.py:
algorithm, protocol, latency and bus bandwidth of every collective) stands apart from the host's
loop (counted from DeepSpeed's code, specs/framework_extra.py). Columns, seconds a step:
- compute: forward + backward + recompute of the slowest stage;
- nccl: the exposed ZeRO-3 traffic with no host loop (NCCL's tuner model, and the list API's
  HBM staging passes, cost/sharded.py ZERO3_HBM_PASSES);
- host: what the counted host loop adds (as shipped minus the run without it);
- gap: measured - compute - nccl - the other parts of the step, the time the physics without the
  host loop leaves unexplained (the counted loop explains the host column of it), and per
  collective (gap / collectives a step: a GPT layer's four weight tensors, gathered for the
  forward, the recompute and the backward, reduce-scattered once) and per rank of the group.
Then the least-squares line a + b n through each model's gap a collective, a finding printed for
the reader (the model uses no such term), with a per GB of the layer's mean weight tensor; and,
per weight tensor of the 175B runs, the pair NCCL picks and its time against the pure
bandwidth time (the latency share).

InternEvo (internevo, zero1 = 8, 4 or all ranks): the exposed data-parallel traffic (the gradient
all-reduce over all ranks and the shard broadcasts) and the pair NCCL picks for one broadcast.

python benchmarks/zero_scale_breakdown.py   (about a minute)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.cost import nccl
from perfmodel.engine.mesh import Mesh
from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

ZERO3, INTERNEVO = "narayanan2021-table2", "internevo-1024-a100"


def dp_link(plan: Any) -> tuple[Any, int]:
    """The data-parallel group's link (as engine/data_parallel.py builds it) and its ranks."""
    p = plan.parallel
    tp, cp, dp = p.tp or 1, p.cp or 1, p.dp or 1
    mesh = Mesh(np.array([tp]), np.array([p.pp or 1]), np.array([dp]), plan.system)
    return mesh.group_link(np.array([float(dp * cp)]), np.array([float(tp)])), dp * cp


def gpt_tensors(model: Any) -> dict[str, float]:
    """A dense GPT layer's weight tensors, parameters (QKV, projection, the MLP's two)."""
    h = float(model.hidden_size)
    ffn = float(model.ffn_hidden_size or 4 * model.hidden_size)
    heads, groups = model.num_attention_heads, model.num_query_groups or model.num_attention_heads
    qkv = h * (h + 2.0 * h * groups / heads)
    up = (2.0 if model.mlp == "swiglu" else 1.0) * h * ffn
    return {"qkv": qkv, "proj": h * h, "fc1": up, "fc2": h * ffn}


def zero3_row(case: dict) -> dict[str, float]:
    """One ZeRO-3 run's step split into compute, NCCL-priced traffic, host loop and the gap."""
    shipped = run_case(case)
    plan = case["plan"]
    bare = run_case({**case, "plan": plan.with_training(collective_rank_host_s=0.0)})
    v, b = shipped.estimate.values, bare.estimate.values
    compute = float(b["forward"] + b["backward"] + b["recompute"])
    nccl_s = float(b["zero_comm"])
    rest = float(b["step_time_s"]) - compute - nccl_s
    layers = plan.model.num_layers
    collectives = layers * len(gpt_tensors(plan.model)) * 4  # 3 gathers + 1 reduce-scatter
    gap = shipped.measured_s - compute - nccl_s - rest
    n = plan.parallel.dp or 1
    return {
        "n": float(n),
        "measured": shipped.measured_s,
        "shipped": float(v["step_time_s"]),
        "compute": compute,
        "nccl": nccl_s,
        "host": float(v["zero_comm"]) - nccl_s,
        "gap": gap,
        "per_coll_ms": 1e3 * gap / collectives,
        "per_rank_us": 1e6 * gap / collectives / n,
    }


def tensor_picks(case: dict) -> list[tuple[str, str, float, float]]:
    """(tensor, NCCL's pair, seconds, pure-bandwidth seconds) of each weight tensor's all-gather
    over the run's data-parallel group, 16-bit weights."""
    plan = case["plan"]
    link, n = dp_link(plan)
    bw, ppn = float(link.ring_bandwidth[0]), float(link.ranks_per_node[0])
    out = []
    for name, params in gpt_tensors(plan.model).items():
        size = 2.0 * params
        times = nccl.choices("all-gather", size, n, ppn, bw, link.intra_hw)
        pair = min(times, key=lambda k: float(times[k]))
        out.append((name, "/".join(pair), float(times[pair]), size * (n - 1) / n / bw))
    return out


def gap_lines(cases: list[dict]) -> dict[str, tuple[float, float, float]]:
    """{model: (a s, b s a rank, a per byte of the layer's mean weight tensor in 16 bits, s/GB)}
    of the least-squares line a + b n through each model's per-collective gaps (zero3_row)."""
    out = {}
    for model in ("174.6b", "529.6b"):
        runs = [c for c in cases if c["name"].startswith(f"zero3-2021-{model}-")]
        rows = [zero3_row(c) for c in runs]
        n = np.array([r["n"] for r in rows])
        y = np.array([r["per_coll_ms"] / 1e3 for r in rows])
        b, a = np.polyfit(n, y, 1)
        t = gpt_tensors(runs[0]["plan"].model)
        mean_gb = 2.0 * sum(t.values()) / len(t) / 1e9
        out[model] = (float(a), float(b), float(a) / mean_gb)
    return out


def main() -> None:
    cases = [c for c in presets.validation_cases() if "measured" in c]
    print("DeepSpeed ZeRO-3 2021 (s a step; gap: measured less compute, NCCL and the rest)")
    head = f"{'run':<16} {'meas':>6} {'model':>6} {'comp':>6} {'nccl':>6} {'host':>6} {'gap':>6}"
    print(head + f" {'ms/coll':>7} {'us/rank':>7}")
    for c in sorted((c for c in cases if c["table"] == ZERO3), key=lambda c: c["name"]):
        r = zero3_row(c)
        print(
            f"{c['name'][11:]:<16} {r['measured']:6.1f} {r['shipped']:6.1f} {r['compute']:6.1f}"
            f" {r['nccl']:6.1f} {r['host']:6.1f} {r['gap']:6.1f} {r['per_coll_ms']:7.1f}"
            f" {r['per_rank_us']:7.1f}"
        )
    print("\nThe gap a collective, least squares a + b n per model (not used by the model)")
    for model, (a, b, per_gb) in gap_lines(cases).items():
        print(
            f"  {model:<7} a {1e3 * a:5.1f} ms ({1e3 * per_gb:4.1f} ms a GB of the mean tensor),"
            f" b {1e6 * b:4.1f} us a rank"
        )
    print("\nGPT-3 175B, one weight tensor's all-gather over all ranks, as NCCL picks it")
    for c in sorted((c for c in cases if c["name"].startswith("zero3-2021-174")), key=_ranks):
        for name, pair, t, pure in tensor_picks(c):
            print(
                f"  {_ranks(c):>5} ranks {name:<5} {pair:<12} {1e3 * t:6.2f} ms"
                f" (bandwidth {1e3 * pure:5.2f} ms, latency {100 * (1 - pure / t):3.0f}%)"
            )
    print("\nInternEvo 7B on 1,024 A100 (s a step)")
    print(f"{'run (internevo-7b-1024-)':<26} {'meas':>6} {'model':>6} {'dp comm':>7}  broadcast")
    for c in sorted((c for c in cases if c["table"] == INTERNEVO), key=lambda c: c["name"]):
        r = run_case(c)
        link, n = dp_link(c["plan"])
        shard = float(c["plan"].parallel.dp_shard or n)
        size = 2.0 * 7e9 / shard  # one rank's 16-bit shard of the 7B model's weights
        bw, ppn = float(link.ring_bandwidth[0]), float(link.ranks_per_node[0])
        pick = "in a node"
        if shard > ppn:  # NCCL's tuner prices the broadcasts that cross nodes
            pick = nccl.pick("broadcast", size, shard, ppn, bw, link.intra_hw)
        print(
            f"{c['name'][18:]:<26} {r.measured_s:6.2f} {r.predicted_s:6.2f}"
            f" {float(r.estimate.values['dp_comm']):7.2f}  {pick} x {shard:.0f}"
        )


def _ranks(case: dict) -> int:
    return int(case["plan"].parallel.dp or 1)


if __name__ == "__main__":
    main()
