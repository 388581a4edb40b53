"""Times of a described block (cost/transformer.py) on one GPU, forward and backward (SPEC 4-5).

Each op's time comes from the roofline with the GPU's achievable efficiencies
(roofline.kernel_time, roofline.gemm_efficiency). Backward of a GEMM is two GEMMs (input
gradient and weight gradient) of the same FLOPs. A collective that overlaps a GEMM pass
(Megatron's asynchronous TP communication; Korthikanti 2022, Sec. 6.2: the reason full
recompute costs 39%, not 33%) exposes only its excess, plus the contention its overlapped
part still costs.

Every quantity is a numpy array broadcast over configurations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from perfmodel.cost import Array, Num
from perfmodel.specs.precision import E8M0_SCALED, LOW_PRECISION

from . import collectives as coll
from . import nccl
from .ops import Block, Collective, FusedAttention, Gemm, Pointwise, Transfer

if TYPE_CHECKING:
    from perfmodel.specs.hardware import GPU
from .roofline import gemm_bytes, gemm_efficiency, gemm_flops, is_memory_bound, kernel_time


@dataclass
class Op:
    """One timed operation: forward FLOPs and HBM bytes (wire bytes per rank for comm), seconds."""

    name: str
    kind: str  # gemm | attention | elementwise | comm
    flops: Num
    bytes: Num
    fwd_s: Num
    bwd_s: Num  # backward time on the critical path (exposed part for comm)
    attention_core: bool = False  # recomputed by selective recompute
    compute_bound: Num | None = None
    group: str = ""  # a collective's parallel group (tp, cp, ep, etp)
    wgrad_s: Num = 0.0  # of bwd_s, the weight gradient (GEMMs): what a zero-bubble schedule defers


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """The numbers of a GPU the op times need (SI units), for one compute dtype."""

    peak: float  # FLOP/s of the GEMM dtype
    hbm_bw: float  # bytes/s
    num_sms: int
    gemm_eff: float
    k_overhead: float
    hbm_eff: float
    attn_eff: float  # fused attention: fraction of peak
    overhead_s: float  # per kernel
    overlap_penalty: float  # fraction of overlapped comm time still paid (SM/HBM contention)
    tail_waves: bool  # classic wave quantization (False: stream-K balanced tails)
    core_eff: float  # unfused attention core: fraction of its roofline speed it reaches
    # FLOP/s of the attention core (BF16 even when the GEMMs run FP8); 0: peak
    attn_peak: float = 0.0
    attn_gemm_eff: float = 0.0
    attn_k_overhead: float = 0.0  # the 16-bit GEMMs' K overhead (k_overhead is the format's)
    # measured ceilings (specs/ceilings.py): FLOP/s of the format's and the 16-bit best matmul,
    # bytes/s of HBM; no kernel runs faster (inf: none known)
    flops_ceiling: float = math.inf
    attn_flops_ceiling: float = math.inf
    hbm_ceiling: float = math.inf
    # fraction of HBM bandwidth the format's quantizing kernels reach (0: hbm_eff)
    cast_eff: float = 0.0

    @classmethod
    def from_gpu(cls, gpu: GPU, dtype: str, attention_backend: str = "fused") -> Hardware:
        """FP8, MXFP8 and NVFP4 GEMMs run at their format's peak and efficiency; attention stays
        in BF16 (Transformer Engine). ``attention_backend`` fa2: the GPU's FlashAttention-2 fraction
        (GPU.fa2_attention_efficiency). Every compute peak runs at the part's sustained clock
        (GPU.sustained_clock, a fraction of the data sheet's); HBM does not."""
        fp8 = dtype in LOW_PRECISION
        eff = gpu.low_precision_efficiency(dtype) if fp8 else gpu.gemm_efficiency
        attn_dtype = "bf16" if fp8 else dtype
        # a tile's prologue and epilogue take the same time at any dtype, so at twice the math rate
        # they cost twice the K elements (GPU.gemm_k_overhead is measured in BF16)
        k0 = gpu.gemm_k_overhead * (gpu.peak(dtype) / gpu.peak("bf16") if fp8 else 1.0)
        return cls(
            peak=gpu.peak(dtype) * gpu.sustained_clock,
            hbm_bw=gpu.hbm_bandwidth_bytes_per_s,
            num_sms=gpu.num_sms,
            gemm_eff=eff,
            k_overhead=k0,
            hbm_eff=gpu.hbm_efficiency,
            attn_eff=gpu.attention_fraction(attention_backend),
            overhead_s=gpu.kernel_overhead_s,
            overlap_penalty=gpu.comm_overlap_penalty,
            tail_waves=gpu.gemm_tail_waves,
            core_eff=gpu.unfused_attention_efficiency,
            attn_peak=gpu.peak(attn_dtype) * gpu.sustained_clock,
            attn_gemm_eff=gpu.gemm_efficiency,
            attn_k_overhead=gpu.gemm_k_overhead,
            flops_ceiling=gpu.flops_ceiling(dtype),
            attn_flops_ceiling=gpu.flops_ceiling(attn_dtype),
            hbm_ceiling=gpu.hbm_ceiling(),
            cast_eff=(gpu.mx_cast_efficiency or 0.0) if dtype in E8M0_SCALED else 0.0,
        )


@dataclass(frozen=True)
class Link:
    """Bandwidth (bytes/s, achievable) and latency (s) of a group's collectives, arrays: the link
    that bounds a ring (the inter-node one as soon as the group spans nodes), and for an
    all-to-all, which reaches every peer directly, the intra-node link and the group's ranks per
    node too (None: all on the bounding link)."""

    bandwidth: Num
    latency: Num
    intra_bandwidth: Num | None = None
    intra_latency: Num | None = None
    ranks_per_node: Num | None = None
    # True where the group leaves one node (None: a single link)
    spans: Num | None = None
    # rings over every NIC of a node (the data-parallel collectives; see ring_bandwidth)
    multi_rail: bool = False
    # NCCL's class of the intra-node link for its latency tables (cost/nccl.py)
    intra_hw: str = "nvlink"
    # NCCL_ALGO: the algorithms NCCL may pick across nodes (empty: all)
    algos: tuple[str, ...] = ()
    # a ring across nodes takes at least what the same ring takes inside one node (TP's rings,
    # engine/mesh.py: NCCL's tuned latencies across nodes would otherwise undercut SPEC 3's
    # intra-node alpha-beta ring at small messages)
    intra_floor: bool = False
    # bytes/s DeepEP's and HybridEP's kernels move over the intra-node link (None: intra_bandwidth)
    ep_intra_bandwidth: Num | None = None

    @cached_property
    def ring_bandwidth(self) -> Num:
        """Bytes/s a rank's ring collective moves at. SPEC 3: a group that spans nodes is bounded by
        the inter-node link, per GPU. Its hierarchical variant, for the data-parallel collectives
        (``multi_rail``: gradient reductions, ZeRO and FSDP gathers and reduce-scatters, whose
        buckets and FSDP units are 10^8-10^9 bytes): a group with r ranks in each node, each GPU
        with its own NIC (as every preset's inter-node link is), runs NCCL's rings one per NIC;
        each ring crosses a node boundary through its own NIC, so each NIC carries 1/r of a rank's
        ring bytes and the rest go over NVLink (NCCL src/graph/search.cc builds one ring per
        network interface; nccl-tests report a node's bus bandwidth as its NICs together). The
        ring then runs at min(r x NIC, intra-node link), bytes/s. The per-layer model-parallel
        collectives (TP, CP, EP) keep SPEC 3's bound, with which the Megatron tables were
        validated."""
        if (
            not self.multi_rail
            or self.spans is None
            or self.ranks_per_node is None
            or self.intra_bandwidth is None
        ):
            return self.bandwidth
        rails = np.maximum(np.asarray(self.ranks_per_node, dtype=float), 1.0)
        multi = np.minimum(rails * np.asarray(self.bandwidth), self.intra_bandwidth)
        return np.asarray(np.where(self.spans, multi, self.bandwidth))

    def seconds(
        self,
        kind: str,
        message: Num,
        n: Num,
        dedup_k: int = 0,
        route: tuple[int, int] = (0, 0),
        imbalance: float = 1.0,
    ) -> Num:
        """Time of one collective of ``message`` bytes over n ranks (SPEC 3). ``dedup_k``: the
        message is k copies of each token, which DeepEP and HybridEP send once per remote node
        over the NIC and once per rank over NVLink, at their own NVLink rate
        (collectives.forwarded_all_to_all_time, ``ep_intra_bandwidth``); ``route``: group-limited
        routing caps the nodes a token reaches (collectives.node_dedup). ``imbalance``: the
        busiest rank's load over the mean, already in ``message``; with DeepEP a NIC carries a
        node's load instead (collectives.node_imbalance)."""
        rpn, intra_bw, intra_alpha = self.ranks_per_node, self.intra_bandwidth, self.intra_latency
        if (
            kind == "all-to-all"
            and rpn is not None
            and intra_bw is not None
            and intra_alpha is not None
        ):
            if dedup_k:
                # DeepEP and HybridEP: once per node over the NIC, once per rank over NVLink
                return coll.forwarded_all_to_all_time(
                    message,
                    n,
                    rpn,
                    dedup_k,
                    (
                        intra_bw if self.ep_intra_bandwidth is None else self.ep_intra_bandwidth,
                        intra_alpha,
                        self.bandwidth,
                        self.latency,
                    ),
                    route,
                    coll.node_imbalance(imbalance, n, rpn) / imbalance,
                )
            return coll.all_to_all_time(
                message, n, rpn, intra_bw, intra_alpha, self.bandwidth, self.latency
            )
        lat, bw = coll.collective_time(kind, message, n, self.ring_bandwidth, self.latency)
        if kind in nccl.KINDS and self.multi_rail and self.spans is not None and rpn is not None:
            return self._across(kind, message, n, rpn, lat + bw)
        return lat + bw

    def _across(self, kind: str, message: Num, n: Num, rpn: Num, ring: Num) -> Array:
        """A collective of a multi-rail link that may span nodes: where its group does (and has
        more than one rank), NCCL's own model picks the algorithm and protocol (cost/nccl.py),
        never faster than the same collective inside a node where ``intra_floor``; elsewhere the
        ring's time ``ring``; ``rpn``: the group's ranks a node. Where only some rows span, NCCL's
        model is priced on those only (the same figures: every formula is row by row)."""
        spans = np.asarray(self.spans, dtype=bool) & (np.asarray(n) > 1)
        inputs = (message, n, rpn, self.ring_bandwidth)
        if spans.all():
            return np.where(spans, self._nccl(kind, *inputs), ring)
        shape = np.broadcast_shapes(np.shape(spans), np.shape(ring), *(np.shape(x) for x in inputs))
        out = np.array(np.broadcast_to(np.asarray(ring, dtype=float), shape))
        at = np.broadcast_to(spans, shape)
        if at.any():
            m, k, r, b = (np.broadcast_to(np.asarray(x, dtype=float), shape)[at] for x in inputs)
            out[at] = self._nccl(kind, m, k, r, b, at)
        return out

    def _nccl(self, kind: str, m: Num, n: Num, rpn: Num, bw: Num, at: Array | None = None) -> Num:
        """NCCL's pick for a collective of ``m`` bytes (cost/nccl.best), never faster than inside
        a node where ``intra_floor`` (the intra-node link's figures at ``at``, where given)."""
        across = nccl.best(kind, m, n, rpn, bw, self.intra_hw, self.algos)
        intra_bw, intra_alpha = self.intra_bandwidth, self.intra_latency
        if not (self.intra_floor and intra_bw is not None and intra_alpha is not None):
            return across
        if at is not None:
            intra_bw = np.broadcast_to(np.asarray(intra_bw, dtype=float), at.shape)[at]
            intra_alpha = np.broadcast_to(np.asarray(intra_alpha, dtype=float), at.shape)[at]
        return np.maximum(across, sum(coll.collective_time(kind, m, n, intra_bw, intra_alpha)))


def _gemm_time(
    hw: Hardware, M: Num, K: Num, N: Num, dt: Num, batch: Num, core: Num, attention: bool = False
) -> Num:
    """Seconds of one GEMM at the roofline with the efficiency of its shape (the attention core's
    and the 16-bit GEMMs' at the 16-bit peak, fraction and K overhead)."""
    peak = (hw.attn_peak or hw.peak) if attention else hw.peak
    base = (hw.attn_gemm_eff or hw.gemm_eff) if attention else hw.gemm_eff
    k0 = (hw.attn_k_overhead or hw.k_overhead) if attention else hw.k_overhead
    eff = gemm_efficiency(M, N, K, hw.num_sms, base, k0, batch, hw.tail_waves)
    return kernel_time(
        gemm_flops(M, K, N, batch),
        gemm_bytes(M, K, N, dt, batch),
        peak,
        hw.hbm_bw,
        eff * core,
        hw.hbm_eff * core,
        hw.overhead_s,
        hw.attn_flops_ceiling if attention else hw.flops_ceiling,
        hw.hbm_ceiling,
    )


def _time_gemm(hw: Hardware, g: Gemm, dt: float) -> tuple[Op, Num, Num]:
    """(op, dgrad seconds, wgrad seconds). Timed on ``time_rows`` rows where the slowest rank runs
    more than the mean (routed experts); FLOPs and bytes stay the mean's."""
    core = hw.core_eff if g.attention_core else 1.0
    M = g.M if g.time_rows is None else g.time_rows
    # the attention core and the 16-bit GEMMs (logits, router) run at the 16-bit peak under FP8
    a = g.attention_core or g.sixteen_bit
    dt = max(dt, 2) if a else dt
    # a pass issued one expert at a time waits on the host: host_s a pass (Gemm.host_s)
    fwd = _gemm_time(hw, M, g.K, g.N, dt, g.batch, core, a) + g.host_s
    dgrad = _gemm_time(hw, M, g.N, g.K, dt, g.batch, core, a) + g.host_s
    wgrad = _gemm_time(hw, g.K, M, g.N, dt, g.batch, core, a) + g.host_s
    flops, nbytes = g.flops, g.bytes(dt)
    bound = ~np.asarray(is_memory_bound(flops, nbytes, hw.peak, hw.hbm_bw))
    return (
        Op(
            g.name,
            "gemm",
            flops,
            nbytes,
            fwd,
            dgrad + wgrad,
            g.attention_core,
            bound,
            wgrad_s=wgrad,
        ),
        dgrad,
        wgrad,
    )


def _time_pointwise(hw: Hardware, p: Pointwise) -> Op:
    """Memory-bound: bytes / (HBM BW x efficiency) + the overhead of each of its kernels (a
    quantizing kernel at the format's cast efficiency where the GPU gives one). A pass
    that moves no bytes (a backward-only kernel) launches nothing there."""
    el = np.asarray(p.elements, dtype=float)
    hbm_eff = hw.hbm_eff * (hw.core_eff if p.attention_core else 1.0)
    if p.cast and hw.cast_eff:
        hbm_eff = hw.cast_eff

    def run(bytes_per_el: Num) -> Num:
        if not bytes_per_el:
            return np.zeros(el.shape)
        t = kernel_time(
            el * p.flops_per_el,
            el * bytes_per_el,
            hw.peak,
            hw.hbm_bw,
            1.0,
            hbm_eff,
            hw.overhead_s * np.asarray(p.kernels),
            bytes_ceiling=hw.hbm_ceiling,
        )
        return np.where(el > 0, t, 0.0)  # no elements, no launch

    return Op(
        p.name,
        "elementwise",
        el * p.flops_per_el,
        el * p.fwd_bytes_per_el,
        run(p.fwd_bytes_per_el),
        run(p.bwd_bytes_per_el),
        p.attention_core,
        np.zeros(el.shape, dtype=bool),
    )


def _time_fused_attention(hw: Hardware, fa: FusedAttention) -> Op:
    """Flash attention at the GPU's fused-attention efficiency; its backward recomputes the scores
    and does 2.5x the forward FLOPs over twice the I/O (Dao et al. 2022, Sec. 3.1). A causal kernel
    runs only the unmasked blocks (causal_fraction of the FLOPs)."""
    flops, io = fa.flops, fa.io_bytes
    run = flops * fa.causal_fraction
    peak = hw.attn_peak or hw.peak
    ceil = (hw.attn_flops_ceiling, hw.hbm_ceiling)
    fwd = kernel_time(run, io, peak, hw.hbm_bw, hw.attn_eff, hw.hbm_eff, hw.overhead_s, *ceil)
    bwd = kernel_time(
        2.5 * run, 2 * io, peak, hw.hbm_bw, hw.attn_eff, hw.hbm_eff, hw.overhead_s, *ceil
    )
    return Op(
        fa.name,
        "attention",
        flops,
        io,
        fwd,
        bwd,
        True,
        ~np.asarray(is_memory_bound(flops, io, peak, hw.hbm_bw)),
    )


def overlapped(hw: Hardware, comm_s: Num, window_s: Num, overlap: bool) -> Num:
    """A collective run behind compute lasting window_s: the excess is exposed and the overlapped
    part still costs overlap_penalty of its time (cost/collectives.overlapped_time). Without
    overlap, all of it."""
    return coll.overlapped_time(comm_s, window_s, hw.overlap_penalty) if overlap else comm_s


def _time_collective(
    hw: Hardware,
    c: Collective,
    n: Num,
    sp: Num,
    link: Link,
    passes: dict[tuple[str, str], Num],
    overlap: bool,
) -> Op:
    """A group's transfers of each pass over its n ranks: all-reduce and its halves (a
    reduce-scatter or an all-gather take the same ring time, SPEC 3), all-to-all, and point-to-point
    ring steps; each runs when its condition holds, ``repeat`` times, each behind ``share`` of its
    op pass if any."""
    sp = np.asarray(sp, dtype=bool)
    on = {"always": np.ones(sp.shape, dtype=bool), "sp": sp, "no_sp": ~sp}

    def seconds(x: Transfer) -> Num:
        msg = c.message * x.scale
        return link.seconds(
            x.kind, msg, 2 if x.kind == "p2p" else n, c.dedup_k, c.route, c.imbalance
        )

    def total(transfers: tuple[Transfer, ...]) -> Num:
        out = np.zeros(np.broadcast(np.asarray(c.message), sp).shape)
        for x in transfers:
            one = seconds(x)
            if x.behind is not None:
                one = overlapped(hw, one, passes[x.behind] * x.share, overlap)
            out = out + np.where(on[x.when], x.repeat * one, 0.0)
        return out

    def wire(x: Transfer) -> Num:
        if x.kind == "p2p":
            return np.asarray(x.repeat * c.message * x.scale)
        return coll.bytes_per_rank(x.kind, c.message * x.scale, n)

    bytes_ = sum((np.where(on[x.when], wire(x), 0.0) for x in c.fwd), np.zeros(sp.shape))
    zero = np.zeros(np.shape(bytes_))
    return Op(
        c.name,
        "comm",
        zero,
        bytes_ + zero,
        total(c.fwd),
        total(c.bwd),
        c.attention_core,
        group=c.group,
    )


def time_block(
    hw: Hardware,
    block: Block,
    *,
    gemm_bytes: float,
    sizes: dict[str, Num],
    sp: Num,
    links: dict[str, Link],
    overlap: bool = True,
) -> list[Op]:
    """Every op of ``block`` timed on one GPU, in the block's order. Compute is timed first, since a
    collective may hide behind a later op's pass. ``sizes`` and ``links``: each group's degree and
    link.
    """
    timed: dict[int, Op] = {}
    passes: dict[tuple[str, str], Num] = {}
    for i, op in enumerate(block.ops):
        if isinstance(op, Gemm):
            timed[i], passes[(op.name, "dgrad")], passes[(op.name, "wgrad")] = _time_gemm(
                hw, op, gemm_bytes
            )
        elif isinstance(op, FusedAttention):
            timed[i] = _time_fused_attention(hw, op)
        elif isinstance(op, Pointwise):
            timed[i] = _time_pointwise(hw, op)
        if i in timed:
            passes[(op.name, "fwd")], passes[(op.name, "bwd")] = timed[i].fwd_s, timed[i].bwd_s
    for i, op in enumerate(block.ops):
        if isinstance(op, Collective):
            timed[i] = _time_collective(
                hw, op, sizes[op.group], sp, links[op.group], passes, overlap
            )
    return [timed[i] for i in range(len(block.ops))]
