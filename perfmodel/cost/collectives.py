"""Alpha-beta cost of ring collectives (SPEC section 3; seed 000, sections 3.1 and 4.5).

One message of n bytes over a link: T = alpha + n / BW. On a ring of N ranks
with a message of S bytes:

    all-reduce                  2(N-1) alpha + 2(N-1)/N * S / BW
    all-gather, reduce-scatter   (N-1) alpha +  (N-1)/N * S / BW
    all-to-all                   (N-1) alpha +  (N-1)/N * S / BW
    broadcast                    (N-1) alpha +            S / BW   (pipelined chain)
    p2p send/recv                      alpha +            S / BW

Units: bytes, seconds, bytes/s. Every function works on floats and numpy
arrays alike; a group of one rank costs nothing.
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Num

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "p2p")


def ring_steps(kind: str, n: Num) -> Num:
    """Number of latency (alpha) terms of a ring collective on n ranks."""
    n = np.asarray(n, dtype=float)
    if kind == "all-reduce":
        return 2.0 * (n - 1)
    if kind in ("all-gather", "reduce-scatter", "all-to-all", "broadcast"):
        return n - 1
    if kind == "p2p":
        return np.where(n > 1, 1.0, 0.0)
    raise ValueError(f"unknown collective {kind!r}; use one of {COLLECTIVES}")


def wire_fraction(kind: str, n: Num) -> Num:
    """Bytes each rank sends, as a multiple of the message size S."""
    n = np.asarray(n, dtype=float)
    if kind == "all-reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    if kind == "broadcast":  # every rank receives (and forwards) the whole message
        return np.where(n > 1, 1.0, 0.0)
    if kind == "p2p":
        return np.where(n > 1, 1.0, 0.0)
    raise ValueError(f"unknown collective {kind!r}; use one of {COLLECTIVES}")


def bytes_per_rank(kind: str, size_bytes: Num, n: Num) -> Num:
    """Bytes on the wire per rank for a message of size_bytes (SPEC 3)."""
    return wire_fraction(kind, n) * np.asarray(size_bytes, dtype=float)


def collective_time(
    kind: str, size_bytes: Num, n: Num, bandwidth_bytes_per_s: Num, latency_s: Num
) -> tuple[Num, Num]:
    """(latency term, bandwidth term) in seconds of one ring collective (SPEC 3)."""
    lat = ring_steps(kind, n) * np.asarray(latency_s, dtype=float)
    bw = bytes_per_rank(kind, size_bytes, n) / np.asarray(bandwidth_bytes_per_s, dtype=float)
    return lat, bw


def mesh_share(links: Num, ranks_in_node: Num) -> Num:
    """Share of a GPU's full-mesh bandwidth a collective among ``ranks_in_node`` GPUs of one node
    reaches, dimensionless: on a mesh with no switch (AMD Infinity Fabric, 7 links a GPU in an
    8-GPU node) a GPU reaches its r - 1 peers of the group over r - 1 dedicated links, so a ring
    (RCCL runs one ring per channel, over different links), an all-to-all (each peer over its
    own link) and a chain all see min(r - 1, links) / links of it: TP 2 gets one link, TP 8 all
    seven (AMD, "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X", ROCm
    blogs 2025: one xGMI link 64 GB/s, 48 GB/s usable). A switch (links 0 here) gives every
    group all of it."""
    links = np.asarray(links, dtype=float)
    r = np.maximum(np.asarray(ranks_in_node, dtype=float) - 1.0, 1.0)
    return np.asarray(np.where(links > 0, np.minimum(r, links) / np.maximum(links, 1.0), 1.0))


def ring_latency(kind: str, n: Num, ranks_per_node: Num, intra_alpha: Num, inter_alpha: Num) -> Num:
    """Latency (s) of a ring collective over n ranks laid out ``ranks_per_node`` to a node, as
    NCCL's tuner counts it (src/graph/tuning.cc, ncclTopoTuneModel: ``nInterSteps``): of the ring's
    steps (ring_steps), one per node boundary crosses the network (nodes - 1 for an all-gather,
    reduce-scatter or broadcast, 2 (nodes - 1) for an all-reduce) and pays the inter-node alpha;
    the others stay inside a node and pay the intra-node alpha. At 1,024 ranks on 128 nodes an
    all-gather takes 1,023 steps, 127 of them across the network: a small message is
    latency-bound however fast the links."""
    n = np.asarray(n, dtype=float)
    r = np.clip(np.asarray(ranks_per_node, dtype=float), 1.0, np.maximum(n, 1.0))
    nodes = np.maximum(n / r, 1.0)
    steps = ring_steps(kind, n)
    inter = np.minimum(steps, (2.0 if kind == "all-reduce" else 1.0) * (nodes - 1))
    return np.asarray((steps - inter) * intra_alpha + inter * inter_alpha)


def overlapped_time(comm_s: Num, window_s: Num, penalty: Num) -> Num:
    """Critical-path cost (s) of a collective run concurrently with compute lasting window_s (s):
    the part that outlasts the window is exposed, and the part hidden behind it still costs
    `penalty` of its time, because NCCL's thread blocks take SMs and HBM bandwidth from the
    kernels they overlap (GPU.comm_overlap_penalty, fitted on Korthikanti 2022 Table 4, where the
    backward TP all-reduce hides behind the weight-gradient GEMM)."""
    return np.maximum(0.0, comm_s - window_s) + penalty * np.minimum(comm_s, window_s)


def group_spans_nodes(group_size: Num, stride: Num, gpus_per_node: Num) -> Num:
    """True where a group of group_size ranks, stride apart, leaves one node: stride * group_size >
    gpus_per_node (SPEC 1; the strides come from the rank order, perfmodel/engine/mesh.py)."""
    return np.asarray(np.asarray(group_size) * np.asarray(stride) > gpus_per_node)


def group_straddles(group_size: Num, stride: Num, domain: int, num_gpus: int) -> Num:
    """True where some groups of group_size ranks, stride apart, straddle two NVLink domains
    though each would fit in one: the groups tile the ranks in blocks of group_size x stride
    consecutive ranks (the rank order, perfmodel/engine/mesh.py), and a block that does not divide
    the domain's GPUs has blocks across its edge (tp 6 on 8-GPU nodes: ranks 6-11 sit on two).
    The slowest group sets the collective's pace, so the whole dimension is costed as crossing."""
    extent = np.rint(np.asarray(group_size) * np.asarray(stride)).astype(np.int64)
    return np.asarray((num_gpus > domain) & (extent > 1) & (domain % np.maximum(extent, 1) != 0))


def ranks_per_node(group_size: Num, stride: Num, domain: int) -> Num:
    """The fewest ranks of one group on one NVLink domain, for a group that crosses domains: its
    block of group_size x stride ranks meets a domain in gcd(block, domain) consecutive ranks at
    least, of which one in stride is the group's (at least 1)."""
    stride = np.rint(np.asarray(stride)).astype(np.int64)
    extent = np.rint(np.asarray(group_size)).astype(np.int64) * stride
    return np.asarray(np.maximum(np.gcd(extent, int(domain)) // np.maximum(stride, 1), 1))


def all_to_all_time(
    size_bytes: Num,
    n: Num,
    ranks_per_node: Num,
    intra_bw: Num,
    intra_alpha: Num,
    inter_bw: Num,
    inter_alpha: Num,
    inter_scale: Num = 1.0,
) -> Num:
    """Seconds of an all-to-all of ``size_bytes`` per rank over n ranks, ``ranks_per_node`` of them
    in each node: every rank sends (n-1)/n of its data, 1/n to each peer (SPEC 3); the share for
    peers in its own node goes over the intra-node link and the rest over the NIC at the same time,
    so the slower part sets the time (NCCL's all-to-all posts every peer's send at once).
    ``inter_scale`` shrinks the bytes that cross nodes (node_dedup)."""
    n = np.asarray(n, dtype=float)
    r = np.clip(np.asarray(ranks_per_node, dtype=float), 1.0, np.maximum(n, 1.0))
    per_peer = np.asarray(size_bytes, dtype=float) / np.maximum(n, 1.0)
    intra = (r - 1) * (intra_alpha + per_peer / intra_bw)
    inter = (n - r) * inter_alpha + (n - r) * per_peer * inter_scale / inter_bw
    return np.asarray(np.maximum(intra, inter))


def node_dedup(n: Num, ranks_per_node: Num, k: int, groups: int = 0, group_topk: int = 0) -> Num:
    """Share of a token's k expert copies that must cross to remote nodes when each remote node
    receives the token once and fans it out over NVLink (DeepEP, DeepSeek-V3 report Sec. 3.2.2): the
    expected distinct nodes among k uniform picks of C nodes, C (1 - (1 - 1/C)^k), over k. C is the
    EP group's N = n / ranks_per_node nodes, or fewer under group-limited routing (report Sec.
    2.1.2: each token reaches at most M nodes): with G expert groups over N nodes, a token within
    group_topk groups reaches at most group_topk x max(1, N / G) nodes."""
    nodes = np.maximum(np.asarray(n, dtype=float) / np.maximum(ranks_per_node, 1), 1.0)
    if groups and group_topk:
        nodes = np.minimum(nodes, group_topk * np.maximum(1.0, nodes / groups))
    return np.asarray(nodes * (1 - (1 - 1 / nodes) ** k) / k)


def node_imbalance(imbalance: float, n: Num, ranks_per_node: Num) -> Num:
    """Busiest node's share of the routed tokens over the mean, from the busiest rank's
    (``imbalance``), for the NIC traffic of DeepEP's dispatch and combine. DeepEP sends a token
    over RDMA to the GPU of the same in-node index on each target node, which forwards it over
    NVLink to the GPUs holding its experts (DeepSeek-V3 report Sec. 3.2.2; DeepEP's internode
    kernels), so a NIC receives what its node's experts need, not what one rank's do. A node sums
    the loads of its r expert ranks; taken as independent, their excess over the mean shrinks by
    sqrt(r) (the central limit theorem): 1 + (imbalance - 1) / sqrt(r), dimensionless."""
    r = np.clip(np.asarray(ranks_per_node, dtype=float), 1.0, np.maximum(np.asarray(n), 1.0))
    return np.asarray(1.0 + (imbalance - 1.0) / np.sqrt(r))


def reached_ranks(n: Num, ranks_per_node: Num, k: int, groups: int = 0, group_topk: int = 0) -> Num:
    """Expected distinct EP ranks a token's k expert copies land on: c (1 - (1 - 1/c)^k) for k
    uniform picks of c ranks, c the EP group's n, or the ranks of the nodes group-limited routing
    lets a token reach (node_dedup: group_topk x max(1, N / G) of the N nodes, DeepSeek-V3 report
    Sec. 2.1.2), dimensionless."""
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    r = np.clip(np.asarray(ranks_per_node, dtype=float), 1.0, n)
    pool = n
    if groups and group_topk:
        pool = np.minimum(n, r * group_topk * np.maximum(1.0, n / r / groups))
    return np.asarray(pool * (1 - (1 - 1 / pool) ** k))


def forwarded_all_to_all_time(
    size_bytes: Num,
    n: Num,
    ranks_per_node: Num,
    k: int,
    links: tuple[Num, Num, Num, Num],
    route: tuple[int, int] = (0, 0),
    nic_scale: Num = 1.0,
) -> Num:
    """Seconds of DeepEP's (and HybridEP's) dispatch or combine of ``size_bytes`` per rank, the
    rank's k copies of each of its tokens, over n ranks ``ranks_per_node`` to an NVLink domain;
    ``links``: (intra bytes/s, intra alpha s, inter bytes/s, inter alpha s). These kernels send a
    token once per rank and once per node, never once per expert (DeepEP csrc/kernels intranode.cu
    and internode.cu: ``is_token_in_rank``; deepseek-ai/DeepEP docs/legacy.md; HybridEP,
    docs/README_Hybrid-EP.md, the same scheme per NVLink domain):

    - across nodes a token crosses the NIC once to each remote node it reaches, to the GPU of its
      own in-node index (node_dedup x k nodes, (N - 1) / N of them remote), one RDMA message per
      remote node: (N - 1) alpha_inter;
    - that GPU forwards it over NVLink to each GPU of its node that holds one of its experts: of
      the reached_ranks a token lands on, all but the (1 / r) that are the receiving GPU itself
      cross NVLink, (r - 1) alpha_intra. Inside one domain (N = 1) this is the whole exchange.

    The two legs run at once (DeepEP's RDMA and NVLink channels pipeline), so the slower sets the
    time. ``nic_scale`` scales the NIC leg's bytes (the busiest node's load over the busiest
    rank's, node_imbalance). On DeepEP's published H800 figures the NVLink leg is what bounds EP 16
    (2 nodes: 43 GB/s "RDMA", half of it the own node's) and the NIC leg EP 32 and 64
    (benchmarks/moe_a2a_table.py)."""
    intra_bw, intra_alpha, inter_bw, inter_alpha = links
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    r = np.clip(np.asarray(ranks_per_node, dtype=float), 1.0, n)
    nodes = np.maximum(n / r, 1.0)
    token = np.asarray(size_bytes, dtype=float) / k  # one copy of each token, bytes
    nvlink = (r - 1) * (intra_alpha + token * reached_ranks(n, r, k, *route) / r / intra_bw)
    remote = node_dedup(n, r, k, *route) * k * (nodes - 1) / nodes
    nic = (nodes - 1) * inter_alpha + token * remote * nic_scale / inter_bw
    return np.asarray(np.maximum(nvlink, nic))
