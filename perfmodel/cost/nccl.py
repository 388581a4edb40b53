"""A collective across nodes as NCCL prices it and picks its algorithm and protocol.

NCCL times every (algorithm, protocol) pair it may run with its own model and runs the fastest
(NVIDIA/nccl, src/graph/tuning.cc at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027,
2026-06-11: ncclTopoTuneModel builds each pair's latency and bus bandwidth, and
ncclTopoGetAlgoTime gives time = latency + bytes / algorithm bandwidth; NCCL_ALGO and
NCCL_PROTO only narrow the pairs it may pick). This module is that model:

- **Ring** (every collective): ``nsteps`` = 2 (n - 1) for an all-reduce, n - 1 for an all-gather
  or a reduce-scatter; of them, one per node boundary crosses the network (2 (nodes - 1) for an
  all-reduce, nodes - 1 else) and pays the network's per-step latency, the rest the intra-node
  one, at least NCCL's network post overhead (1 us, 3 us with Simple) once the ring leaves a node.
  A broadcast is the same pipelined ring, one chunk's path of n - 1 steps: NCCL's tuner charges
  it n network steps instead ("waiting for proper chunk modeling"), which picks the same protocol
  for the messages here (LL below a few MB) but is no time a chain takes.
- **Tree** (all-reduce only): a chain inside each node and a double binary tree across nodes,
  2 ((ppn - 1) intra + log2(nodes) network) steps, at 0.92 of the ring's bus bandwidth and half
  of it as algorithm bandwidth (a size correction for medium messages).
- **PAT** (all-gather and reduce-scatter, Simple, one rank per node only): log2(nodes) network
  latencies / 3.5 plus 2.8 us per rank, at 0.75 of the bus bandwidth.
- **Protocols**: LL moves 8 bytes a 16-byte line (half the bus bandwidth, at most 20.4 GB/s across
  more than two nodes), LL128 120 of 128 (0.92), Simple all of it, each with its own per-step
  latencies (LL's are the smallest).

NVLS and NVLS-Tree (NVLink SHARP) and CollNet (in-network reduction) are not modelled: the
presets name no SHARP switch. The bus bandwidth is the caller's (the link's achievable ring
bandwidth, Link.ring_bandwidth); NCCL's per-channel caps are not applied.

AMD's RCCL keeps NCCL's structure with its own tables per topology (ROCm/rccl
src/graph/tuning.cc, tuning models 0-5: base latencies 12-17 us, network ring Simple steps of
19.8-320 us): not modelled; no AMD run of the validation crosses nodes.

Units: seconds, bytes, bytes/s (NCCL's tables are in us and GB/s). Every function works on
floats and numpy arrays alike.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from perfmodel.cost import Num

PROTOCOLS = ("LL", "LL128", "Simple")
US = 1e-6
# ncclTunerConstantsDefaults.baseLatencies (us), per protocol LL, LL128, Simple
BASE_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "pat": (8.0, 8.0, 8.0)}
# ncclTunerConstantsDefaults.hwLatencies (us per step): NVLINK, PCI, NET
HW_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "pat": (0.0, 0.0, 4.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "pat": (0.0, 0.0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "pat": (0.0, 0.0, 14.0)},
}
# llMaxBws, more than two nodes, an x86 Intel host (an AMD host: 19.0 GB/s)
LL_MAX_BW = 20.4e9
# getNetOverhead: 1 us on an Intel x86 host (2 us on an AMD one), three times that with Simple
NET_OVERHEAD_S = 1.0 * US
# treeCorrectionFactor[protocol][log2(bytes / 64)], powers of two from 64 B to 256 MB
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
     1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
     1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
     .9),
)  # fmt: skip
# ncclTopoGetAlgoTime: a ring Simple all-reduce across nodes pays its latency 1.4 times (the
# "plateau effect of ring", Ampere and later)
RING_PLATEAU = 1.4
# a ring's bus bandwidth by protocol: LL carries 8 data bytes of each 16-byte line, LL128 120 of
# 128 (ncclTopoTuneModel's refinements)
PROTOCOL_BW = (0.5, 0.92, 1.0)
KINDS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast")


def _log2i(x: Num) -> Num:
    """NCCL's log2i: the floor of log2, 0 for 1."""
    return np.asarray(np.floor(np.log2(np.maximum(np.asarray(x, dtype=float), 1.0))))


def _inputs(kind: str, size: Num, n: Num, ppn: Num, bus_bw: Num) -> tuple[Num, Num, Num, Num]:
    """(size, n, ppn, bus_bw) as the tuner reads them: at least one rank, 1 to n a node."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r} for NCCL's tuner; use one of {KINDS}")
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    ppn = np.clip(np.asarray(ppn, dtype=float), 1.0, n)
    return np.asarray(size, dtype=float), n, ppn, np.asarray(bus_bw, dtype=float)


def _pat(size: Num, n: Num, ppn: Num, bus_bw: Num) -> Num:
    """PAT (Simple): log2(nodes) network latencies / 3.5 plus 2.8 us a rank, at 0.75 of the bus
    bandwidth; only with one rank a node (else infinite: NCCL does not run it)."""
    nodes = np.maximum(n / ppn, 1.0)
    lat = BASE_US["pat"][2] + _log2i(nodes) * HW_US["net"]["tree"][2] / 3.5 + n * 2.8
    return np.where(ppn <= 1, lat * US + size / (0.75 * bus_bw), np.inf)


def choices(
    kind: str, size: Num, n: Num, ppn: Num, bus_bw: Num, intra: str = "nvlink"
) -> dict[tuple[str, str], Num]:
    """{(algorithm, protocol): seconds} of one collective of ``size`` bytes (the whole message:
    the gathered tensor of an all-gather, the input of a reduce-scatter) over n ranks laid out
    ``ppn`` to a node across more than one node, at a ring bus bandwidth of ``bus_bw`` bytes/s;
    ``intra``: NCCL's hardware class of the intra-node link (nvlink or pci). The pairs NCCL may
    not run are left out."""
    size, n, ppn, bus_bw = _inputs(kind, size, n, ppn, bus_bw)
    # every pair's seconds, the protocols as one array axis (_rings, _trees, as best() reads them)
    rings = _rings(kind, size, n, ppn, bus_bw, intra)
    trees = _trees(size, n, ppn, bus_bw, intra) if kind == "all-reduce" else None
    out: dict[tuple[str, str], Num] = {}
    for p, proto in enumerate(PROTOCOLS):  # NCCL's table, row by row
        out[("ring", proto)] = rings[p]
        if trees is not None:
            out[("tree", proto)] = trees[p]
    if kind in ("all-gather", "reduce-scatter"):
        out[("pat", "Simple")] = _pat(size, n, ppn, bus_bw)
    return out


def best(
    kind: str,
    size: Num,
    n: Num,
    ppn: Num,
    bus_bw: Num,
    intra: str = "nvlink",
    algos: tuple[str, ...] = (),
) -> Num:
    """Seconds of the (algorithm, protocol) NCCL picks: the least of ``choices``, among
    ``algos`` where given (NCCL_ALGO; a collective none of them runs falls back to the ring, as
    NCCL does when NCCL_ALGO leaves a function no algorithm). A pair that cannot run at a layout
    (PAT with more than one rank a node) is absent there, so that layout falls back too.
    It reduces the same arrays ``choices`` is built from without building the dict (the search
    calls this for every collective of every evaluation)."""
    size, n, ppn, bus_bw = _inputs(kind, size, n, ppn, bus_bw)
    shape = np.broadcast_shapes(*(np.shape(x) for x in (size, n, ppn, bus_bw)))
    if int(np.prod(shape)) >= DISTINCT_FROM:
        cols = [np.broadcast_to(x, shape).ravel() for x in (size, n, ppn, bus_bw)]
        first, inverse = _distinct(cols)
        if first.size < inverse.size:
            s, k, r, b = (c[first] for c in cols)
            return np.asarray(_best(kind, s, k, r, b, intra, algos)[inverse].reshape(shape))
    return _best(kind, size, n, ppn, bus_bw, intra, algos)


# a search's collectives repeat their inputs: of the 4.3 million rows a pool of 64 searches
# prices (engine/pooled.py), 46,000 are distinct; from this many rows, best() prices each
# distinct input once
DISTINCT_FROM = 256
# odd 64-bit multipliers (splitmix64's) folding an input's four floats into one key
_MIX = tuple(np.uint64(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _distinct(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(a row of each distinct input, each row's index into those): the rows' four floats folded
    into a 64-bit key, sorted; two rows with one key are checked to be equal, and where two
    differ (a collision) every row is its own input."""
    bits = [c.view(np.uint64) for c in cols]
    key = bits[0].copy()
    for b, mix in zip(bits[1:], _MIX):
        key = (key ^ (key >> np.uint64(31))) * mix + b
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if all(np.array_equal(b[first][inverse], b) for b in bits):
        return first, inverse
    every = np.arange(key.size)
    return every, every


def _best(
    kind: str, size: Num, n: Num, ppn: Num, bus_bw: Num, intra: str, algos: tuple[str, ...]
) -> np.ndarray:
    """best() of inputs as _inputs gives them."""
    ring = _rings(kind, size, n, ppn, bus_bw, intra).min(axis=0)
    allowed = [] if algos and "ring" not in algos else [ring]
    if kind == "all-reduce" and (not algos or "tree" in algos):
        allowed.append(_trees(size, n, ppn, bus_bw, intra).min(axis=0))
    if kind in ("all-gather", "reduce-scatter") and (not algos or "pat" in algos):
        allowed.append(_pat(size, n, ppn, bus_bw))
    if not allowed:
        return np.asarray(ring)
    least = np.minimum.reduce(allowed) if len(allowed) > 1 else allowed[0]
    return np.asarray(np.where(np.isinf(least), ring, least))


@cache
def _axis(values: tuple[float, ...], ndim: int) -> np.ndarray:
    """Per-protocol constants shaped to broadcast against arrays of ``ndim`` dimensions."""
    return np.asarray(values, dtype=float).reshape((3,) + (1,) * ndim)


def _ndim(*xs: Num) -> int:
    return max(np.ndim(x) for x in xs)


def _rings(kind: str, size: Num, n: Num, ppn: Num, bus_bw: Num, intra: str) -> np.ndarray:
    """(3, ...) seconds of the ring across nodes by protocol (LL, LL128, Simple): NCCL's base
    latency, each intra-node step at the intra link's ring latency (never under the network
    overhead) and each inter-node step at the network's (with one rank a node every step is a
    network step, priced at the tree's network latency), Simple's all-reduce latency times the
    ring plateau; then the bytes at the protocol's share of the bus bandwidth (LL at most NCCL's LL
    ceiling)."""
    ndim = _ndim(size, n, ppn, bus_bw)
    nodes = np.maximum(n / ppn, 1.0)
    steps = 2.0 * (n - 1) if kind == "all-reduce" else n - 1
    inter_steps = (2.0 if kind == "all-reduce" else 1.0) * (nodes - 1)
    overhead = _axis((NET_OVERHEAD_S, NET_OVERHEAD_S, 3 * NET_OVERHEAD_S), ndim)
    intra_lat = np.maximum(_axis(HW_US[intra]["ring"], ndim) * US, overhead)
    inter_lat = (
        np.where(ppn <= 1, _axis(HW_US["net"]["tree"], ndim), _axis(HW_US["net"]["ring"], ndim))
        * US
    )
    lat = (
        _axis(BASE_US["ring"], ndim) * US
        + (steps - inter_steps) * intra_lat
        + inter_steps * inter_lat
    )
    if kind == "all-reduce":
        lat = lat * _axis((1.0, 1.0, RING_PLATEAU), ndim)
    bw = bus_bw * _axis(PROTOCOL_BW, ndim)
    bw = np.where(_axis((1.0, 0.0, 0.0), ndim) > 0, np.minimum(LL_MAX_BW, bw), bw)
    nsteps = {"all-reduce": 2.0 * (n - 1), "broadcast": n}.get(kind, n - 1)
    alg = bw * n / np.maximum(nsteps, 1.0) if kind != "broadcast" else bw
    return np.asarray(lat + size / alg)


def _trees(size: Num, n: Num, ppn: Num, bus_bw: Num, intra: str) -> np.ndarray:
    """(3, ...) seconds of NCCL's tree all-reduce across nodes by protocol: the base latency and,
    both ways, the intra-node hops and log2(nodes) network hops; the bytes at 0.92 of the bus
    bandwidth times the protocol's share and NCCL's static correction for medium messages
    (TREE_CORRECTION), over half the bus (LL at most NCCL's LL ceiling)."""
    ndim = _ndim(size, n, ppn, bus_bw)
    nodes = np.maximum(n / ppn, 1.0)
    lat = _axis(BASE_US["tree"], ndim) + 2 * (
        (ppn - 1) * _axis(HW_US[intra]["tree"], ndim)
        + _log2i(nodes) * _axis(HW_US["net"]["tree"], ndim)
    )
    factor = 0.92 * _axis((1 / 3.8, 120 / 128, 1.0), ndim)
    log = np.asarray(_log2i(np.maximum(np.asarray(size, dtype=float) / 64.0, 1.0))).astype(int)
    table = np.asarray(TREE_CORRECTION, dtype=float)
    idx = np.clip(log, 0, table.shape[1] - 1)
    correction = np.where(log < 23, table[:, idx], 1.0)
    correction = correction.reshape((3,) + (1,) * (ndim - np.ndim(idx)) + np.shape(idx))
    bw = bus_bw * factor * correction
    bw = np.where(_axis((1.0, 0.0, 0.0), ndim) > 0, np.minimum(LL_MAX_BW, bw), bw)
    return np.asarray(lat * US + size / (0.5 * bw))


def pick(kind: str, size: float, n: float, ppn: float, bus_bw: float, intra: str = "nvlink") -> str:
    """The name of the pair NCCL picks for one collective ("tree/LL128"), floats only."""
    times = choices(kind, size, n, ppn, bus_bw, intra)
    algo, proto = min(times, key=lambda k: float(times[k]))
    return f"{algo}/{proto}"
