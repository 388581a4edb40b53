"""The parallel mesh as data: named dimensions, the rank order and the link each group crosses
(the validity rules that go with it are in perfmodel/engine/rules.py).

Dimensions (torchtitan's ParallelDims and Megatron-Core's parallel_state name the same ones):
tp (tensor), cp (context), ep (expert), dp (data) and pp (pipeline, with vp virtual stages per
GPU). Ranks are laid out innermost first; Megatron-Core's default order is tp, cp, ep, dp, pp
(megatron/core/parallel_state.py, ``order="tp-cp-ep-dp-pp"``), so a group's neighbours are
``stride`` ranks apart, the product of the sizes of the dimensions before it. A group stays
inside a node while stride x size <= GPUs per node (SPEC 1, 3). cp and ep are 1 until their
issue gives them a cost; they already take their place in the order.

Every function takes numpy arrays (one entry per configuration) or scalars.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from perfmodel.cost import Array, Num
from perfmodel.cost import collectives as coll
from perfmodel.cost.layer import Link

if TYPE_CHECKING:
    from perfmodel.specs import System
    from perfmodel.specs.hardware import GPU
    from perfmodel.specs.hardware import Link as LinkSpec

DIMS = ("tp", "cp", "ep", "etp", "dp", "pp")
# System.placement -> the rank order of the dense part, innermost first (Megatron-Core's
# "tp-cp-ep-dp-pp" with EP folded out of it: parallel_state.py builds a separate expert mesh)
ORDERS = {"tp-dp-pp": ("tp", "cp", "dp", "pp"), "tp-pp-dp": ("tp", "cp", "pp", "dp")}
# MoE parallel folding (Megatron-Core 0.10+, parallel_state.py, expert order "tp-ep-dp-pp" with tp
# read as the expert TP): the expert layers lay the same tp x cp x dp ranks out as etp x ep x edp
EXPERT_ORDER = ("etp", "ep", "edp")
# the dimensions whose per-layer collectives are NCCL rings (all-reduce, all-gather, reduce-scatter)
RING_DIMS = ("tp", "etp")


def link_rate(link: LinkSpec, gpu: GPU, tier: str, efficiency: bool = True) -> float:
    """Bytes/s a collective reaches over ``link``: its bandwidth times its efficiency (issue 4), and
    never more than the part's measured ceiling for the tier (intra, inter), the most of a link's
    data-sheet bandwidth any all-reduce or all-to-all has reached (specs/ceilings.py)."""
    bw = link.bandwidth_bytes_per_s
    if not efficiency:
        return bw
    share = gpu.ceilings.link_fraction(tier) if gpu.ceilings else None
    return float(np.minimum(bw * link.efficiency, bw * share if share else np.inf))


@dataclass(frozen=True)
class Mesh:
    """Sizes of every dimension (arrays over configurations), the order, and the cluster's links."""

    tp: Num
    pp: Num
    dp: Num
    system: System  # its NVLink domain (System.domain), links and placement
    cp: Num = 1
    ep: Num = 1
    etp: Num = 1

    @property
    def order(self) -> tuple[str, ...]:
        return ORDERS[self.system.placement]

    @cached_property
    def edp(self) -> Array:
        """Expert data parallelism: the tp x cp x dp ranks of a stage over etp x ep."""
        return np.asarray(
            np.asarray(self.tp) * self.cp * self.dp // (np.asarray(self.ep) * self.etp)
        )

    def size(self, dim: str) -> Num:
        return np.asarray(getattr(self, dim))

    def stride(self, dim: str) -> Num:
        """Rank distance between neighbours of a group of ``dim``: the sizes laid out before it (the
        expert mesh for ep and etp)."""
        order = EXPERT_ORDER if dim in EXPERT_ORDER else self.order
        out: Num = np.ones(np.shape(self.tp), dtype=np.int64) if np.ndim(self.tp) else 1
        for d in order:
            if d == dim:
                return out
            out = out * self.size(d)
        raise KeyError(dim)

    def crosses_nodes(self, dim: str, size: Num | None = None) -> Num:
        """True where a group of ``dim`` (or of ``size`` of its ranks, e.g. 2 for a p2p pair) leaves
        one node."""
        n = self.size(dim) if size is None else size
        spans = coll.group_spans_nodes(n, self.stride(dim), self.system.domain)
        if size is not None or dim not in RING_DIMS:
            # a pair of neighbours (pipeline send/recv) and the other groups keep SPEC 1's bound
            return spans
        s = self.system
        straddles = coll.group_straddles(n, self.stride(dim), s.domain, s.num_gpus)
        return np.asarray(np.logical_or(np.asarray(spans), straddles))

    def crossing(self, dim: str) -> str:
        """'intra' (inside a node), 'hierarchical' (spans nodes with several ranks in each: a ring
        is costed on the inter-node link, its bottleneck; an all-to-all splits its bytes between the
        links) or 'inter' (one rank per node), for one configuration."""
        if not bool(np.all(self.crosses_nodes(dim))):
            return "intra"
        return "hierarchical" if int(np.max(self.stride(dim))) < self.system.domain else "inter"

    def group_link(self, n: Num, stride: Num) -> Link:
        """The link of a data-parallel group of n ranks ``stride`` apart (rings over every NIC:
        Link.ring_bandwidth), a group that is not one mesh dimension: the
        data-parallel reduction's dp x cp ranks (cp and dp are neighbours in the order, so the
        group is tp apart), HSDP's shard group (dp_shard x cp, tp apart) and its replicas
        (dp / dp_shard, tp x cp x dp_shard apart: torchtitan lays dp_replicate out beyond
        dp_shard)."""
        n, stride = np.asarray(n), np.asarray(stride)
        spans = coll.group_spans_nodes(n, stride, self.system.domain)
        return replace(self._link(n, spans, stride), multi_rail=True)

    def link(self, dim: str, size: Num | None = None, efficiency: bool = True) -> Link:
        """Bandwidth and latency of a group's collectives: the inter-node link as soon as it spans
        nodes (SPEC 3); with ``efficiency`` the bandwidth is the achievable fraction (issue 4). The
        ranks per node let an all-to-all send its in-node share over the intra-node link."""
        n = self.size(dim) if size is None else np.asarray(size)
        spans, stride = self.crosses_nodes(dim, size), self.stride(dim)
        link = self._link(n, spans, stride, efficiency)
        if dim not in RING_DIMS or size is not None:
            return link
        # TP's all-reduces, all-gathers and reduce-scatters across nodes run as NCCL runs any ring:
        # one ring per NIC, so the group's ranks on a node share its NICs (Link.ring_bandwidth;
        # the fewest a group has on one node set the pace) and NCCL picks the algorithm and
        # protocol (cost/nccl.py). Not on one NIC per group: that bound made TP 16 on 8-GPU nodes
        # 4-5x slower than measured (issue 38)
        per_node = np.where(spans, coll.ranks_per_node(n, stride, self.system.domain), n)
        return replace(link, multi_rail=True, ranks_per_node=per_node, intra_floor=True)

    def _link(self, n: Num, spans: Num, stride: Num, efficiency: bool = True) -> Link:
        s = self.system
        bw_in = link_rate(s.intra_node_link, s.gpu, "intra", efficiency)
        bw_out = link_rate(s.inter_node_link, s.gpu, "inter", efficiency)
        per_node = np.where(spans, np.maximum(s.domain // np.maximum(stride, 1), 1), n)
        # on a full mesh (Infinity Fabric) the group's r ranks of a node use r - 1 of its links
        share = coll.mesh_share(s.intra_node_link.mesh_links or 0, per_node)
        mesh_bw = bw_in * share
        ep_eff = s.intra_node_link.ep_efficiency if efficiency else None
        ep_bw = None if ep_eff is None else s.intra_node_link.bandwidth_bytes_per_s * ep_eff * share
        return Link(
            np.where(spans, bw_out, mesh_bw),
            np.where(spans, s.inter_node_link.latency_s, s.intra_node_link.latency_s),
            mesh_bw,
            s.intra_node_link.latency_s,
            per_node,
            spans,
            intra_hw=s.intra_node_link.nccl_hw,
            algos=tuple(s.nccl_algo or ()),
            ep_intra_bandwidth=ep_bw,
        )

    def link_spec(self, dim: str) -> LinkSpec:
        """The Link spec (name and figures) a group of ``dim`` uses, one configuration."""
        s = self.system
        return s.inter_node_link if bool(np.all(self.crosses_nodes(dim))) else s.intra_node_link


def expert_shard(edp: Num, dp: Num, dp_shard: Num, zero_stage: Num) -> Array:
    """The ranks the routed experts' states are sharded over: the expert-data-parallel ranks
    (Mesh.edp), except under HSDP (ZeRO-2/3 with a shard group dp_shard < dp), where the experts
    are sharded within the shard group and replicated over its dp / dp_shard copies as the dense
    parameters are: torchtitan's "dp_shard_in_ep" mesh, dp_shard x cp (x tp at etp 1) / ep ranks
    (torchtitan/distributed/parallel_dims.py, commit 0119de15, build_mesh)."""
    dp = np.asarray(dp, dtype=float)
    shard = np.where(np.asarray(dp_shard) > 0, dp_shard, dp).astype(float)
    hsdp = (np.asarray(zero_stage) >= 2) & (shard < dp)
    return np.asarray(np.where(hsdp, np.asarray(edp) * shard / dp, edp))
