"""The expert all-to-all as perfmodel costs it, against the dispatch and combine throughputs DeepEP
and HybridEP publish, by EP size, inside an NVLink domain and across InfiniBand (issue 38 item 3).

Each published figure is a bandwidth the library's own test prints: the bytes it counts over the
kernel's time. The model's figure divides the same counted bytes by the time perfmodel's EP link
(engine/mesh.py Mesh.link("ep"), cost/layer.py Link.seconds) gives the same exchange, so the two
read alike:

- DeepEP V1 (deepseek-ai/DeepEP docs/legacy.md, "Normal kernels"): H800 (NVLink 200 GB/s a GPU),
  one CX7 400 Gb/s NIC a GPU; 4,096 tokens a rank, hidden 7,168, top-8 of 256 experts, each token
  within top-4 groups of one node each (tests/test_internode.py: num_topk_groups = min(nodes, 4)),
  FP8 dispatch (1 + 4/128 bytes an element with its scales), BF16 combine. Intranode it counts the
  tokens each rank receives, one per (token, rank) pair the self included ("NVLink"); internode
  one per (token, node) pair the own node included ("RDMA").
- HybridEP (deepseek-ai/DeepEP docs/README_Hybrid-EP.md, "Kernel Only", the best SM count): H100
  over IB at 16-64 ranks, GB200 over one NVL72 rack at 8-36 ranks and B200 in one node; 4,096
  tokens, hidden 7,168, top-8, 8 experts a rank, uniform random routing, BF16 dispatch and
  combine; "algorithm bandwidth", counted as DeepEP counts it (the same test harness). Kernel
  only: its "Torch API" figures add the metadata all-gather, the copies out of the buffer and
  the permutation (docs/Hybrid-EP_Implementation.md, Executor), which perfmodel prices as the
  MoE layer's own permute ops, not in the exchange.

The expected distinct ranks (nodes) a token reaches among c of them with k uniform picks is
c (1 - (1 - 1/c)^k) (cost/collectives.node_dedup). Units: GB/s = 1e9 bytes/s.

Run: python benchmarks/moe_a2a_table.py [--json]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import numpy as np

from perfmodel.engine.mesh import Mesh
from perfmodel.inputs import presets
from perfmodel.specs import System

TOKENS, HIDDEN, TOPK = 4096, 7168, 8
FP8 = 1 + 4 / 128  # bytes an element with its 1x128 FP32 scales (DeepEP tests: fp8_factor)


@dataclass(frozen=True)
class Row:
    """One published figure: library, GPU, EP size, where (intra, inter, rack), direction, bytes
    an element, GB/s, and the system it ran on (gpu preset, links, GPUs a node, NVLink domain)."""

    lib: str
    gpu: str
    ep: int
    where: str
    direction: str
    elem_bytes: float
    published: float
    system: tuple[str, str, str, int, int]
    route: tuple[int, int] = (0, 0)  # (groups, groups a token reaches); 0: none


H800 = ("h800", "nvlink4-h800", "ib-ndr", 8, 8)
H100 = ("h100-sxm", "nvlink4", "ib-ndr", 8, 8)
B200 = ("b200", "nvlink5", "ib-ndr", 8, 8)
GB200 = ("gb200", "nvlink5-nvl72", "ib-ndr", 4, 72)


def _deepep_v1() -> list[Row]:
    rows = [Row("DeepEP", "H800", 8, "intra", "dispatch", FP8, 153, H800)]
    rows.append(Row("DeepEP", "H800", 8, "intra", "combine", 2, 158, H800))
    for ep, d, c in ((16, 43, 43), (32, 58, 57), (64, 51, 50)):
        nodes = ep // 8
        route = (nodes, min(nodes, 4))
        rows.append(Row("DeepEP", "H800", ep, "inter", "dispatch", FP8, d, H800, route))
        rows.append(Row("DeepEP", "H800", ep, "inter", "combine", 2, c, H800, route))
    return rows


def _hybridep() -> list[Row]:
    rows = [
        Row("HybridEP", "B200", 8, "intra", "dispatch", 2, 734.95, B200),
        Row("HybridEP", "B200", 8, "intra", "combine", 2, 673.84, B200),
    ]
    for ep, d, c in ((16, 76.80, 68.00), (32, 57.69, 57.46), (64, 50.55, 51.03)):
        rows.append(Row("HybridEP", "H100", ep, "inter", "dispatch", 2, d, H100))
        rows.append(Row("HybridEP", "H100", ep, "inter", "combine", 2, c, H100))
    for ep, d, c in (
        (8, 764.03, 737.13),
        (16, 706.95, 666.26),
        (24, 665.97, 639.80),
        (32, 642.23, 605.15),
        (36, 632.31, 596.99),
    ):
        rows.append(Row("HybridEP", "GB200", ep, "rack", "dispatch", 2, d, GB200))
        rows.append(Row("HybridEP", "GB200", ep, "rack", "combine", 2, c, GB200))
    return rows


ROWS = _deepep_v1() + _hybridep()


def distinct(c: float, k: int = TOPK) -> float:
    """Expected distinct targets among c of them a token's k uniform picks reach."""
    return c * (1 - (1 - 1 / c) ** k)


def counted_bytes(row: Row) -> float:
    """The bytes the library's test counts for one exchange (module docstring)."""
    _, _, _, per_node, _ = row.system
    if row.where == "inter":
        nodes = row.ep // per_node
        reach = distinct(row.route[1]) if row.route[1] else distinct(nodes)
        return TOKENS * reach * HIDDEN * row.elem_bytes
    return TOKENS * distinct(row.ep) * HIDDEN * row.elem_bytes


def model_seconds(row: Row, nccl: bool = False) -> float:
    """Seconds perfmodel gives the exchange: the rank's k token copies over its EP link, each token
    once per rank and once per node (DeepEP, HybridEP: dedup_k), the routing groups as the test
    routes them; ``nccl``: Megatron's alltoall dispatcher instead, all k copies over NCCL."""
    gpu, intra, inter, per_node, domain = row.system
    system = System(
        gpu=presets.gpu(gpu),
        intra_node_link=presets.link(intra),
        inter_node_link=presets.link(inter),
        gpus_per_node=per_node,
        nvlink_domain=domain,
        num_gpus=row.ep,
    )
    mesh = Mesh(tp=1, pp=1, dp=row.ep, system=system, ep=row.ep)
    sent = TOKENS * TOPK * HIDDEN * row.elem_bytes
    dedup = 0 if nccl else TOPK
    t = mesh.link("ep").seconds("all-to-all", sent, row.ep, dedup_k=dedup, route=row.route)
    return float(np.asarray(t))


def table() -> list[dict]:
    """One dict a published figure: the row, the model's GB/s and its error, and what the model
    gives NCCL's all-to-all of the same tokens (Megatron's alltoall dispatcher), counted alike."""
    out = []
    for r in ROWS:
        model = counted_bytes(r) / model_seconds(r) / 1e9
        nccl = counted_bytes(r) / model_seconds(r, nccl=True) / 1e9
        out.append(
            {
                "lib": r.lib,
                "gpu": r.gpu,
                "ep": r.ep,
                "where": r.where,
                "direction": r.direction,
                "published_gb_s": r.published,
                "model_gb_s": round(model, 1),
                "error": round(model / r.published - 1, 4),
                "nccl_model_gb_s": round(nccl, 1),
            }
        )
    return out


def main(argv: list[str]) -> None:
    rows = table()
    if "--json" in argv:
        print(json.dumps(rows, indent=1))
        return
    print(
        f"{'library':<9} {'GPU':<6} {'EP':>3} {'where':<6} {'op':<9} {'publ.':>6}"
        f" {'model':>6} {'error':>7} {'NCCL':>6}"
    )
    for r in rows:
        print(
            f"{r['lib']:<9} {r['gpu']:<6} {r['ep']:>3} {r['where']:<6} {r['direction']:<9}"
            f" {r['published_gb_s']:>6.0f} {r['model_gb_s']:>6.0f} {100 * r['error']:>+6.1f}%"
            f" {r['nccl_model_gb_s']:>6.0f}"
        )
    err = np.abs([np.log1p(r["error"]) for r in rows])
    print(
        f"{len(rows)} figures: mean |log error| {100 * err.mean():.1f}%, max {100 * err.max():.1f}%"
    )
    print("GB/s as each library counts them; NCCL: the model's all-to-all of all k copies")
    print("(Megatron's alltoall dispatcher) counted alike; no published figure to check")


if __name__ == "__main__":
    main(sys.argv[1:])
