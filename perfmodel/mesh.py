"""The parallel mesh as data: named dimensions, the rank order, the link each group crosses, and
the validity rules, written once for `check`, `estimate` and the search's masks.

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

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .cost import collectives as coll
from .cost.layer import Link

DIMS = ("tp", "cp", "ep", "dp", "pp")
# System.placement -> the rank order, innermost first
ORDERS = {"tp-dp-pp": ("tp", "cp", "ep", "dp", "pp"), "tp-pp-dp": ("tp", "cp", "ep", "pp", "dp")}


@dataclass(frozen=True)
class Mesh:
    """Sizes of every dimension (arrays over configurations), the order, and the cluster's links."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    system: object  # specs.System: gpus_per_node, intra_node_link, inter_node_link, placement
    cp: np.ndarray | int = 1
    ep: np.ndarray | int = 1

    @property
    def order(self) -> tuple[str, ...]:
        return ORDERS[self.system.placement]

    def size(self, dim: str):
        return np.asarray(getattr(self, dim))

    def stride(self, dim: str):
        """Rank distance between neighbours of a group of ``dim``: the sizes laid out before it."""
        out = np.ones(np.shape(self.tp), dtype=np.int64) if np.ndim(self.tp) else 1
        for d in self.order:
            if d == dim:
                return out
            out = out * self.size(d)
        raise KeyError(dim)

    def crosses_nodes(self, dim: str, size=None):
        """True where a group of ``dim`` (or of ``size`` of its ranks, e.g. 2 for a p2p pair) leaves
        one node."""
        n = self.size(dim) if size is None else size
        return coll.group_spans_nodes(n, self.stride(dim), self.system.gpus_per_node)

    def crossing(self, dim: str) -> str:
        """'intra' (inside a node), 'hierarchical' (spans nodes with several ranks in each: costed on
        the inter-node link, its bottleneck) or 'inter' (one rank per node), for one configuration."""
        if not bool(np.all(self.crosses_nodes(dim))):
            return "intra"
        return "hierarchical" if int(np.max(self.stride(dim))) < self.system.gpus_per_node else "inter"

    def link(self, dim: str, size=None, efficiency: bool = True) -> Link:
        """Bandwidth and latency of a group's collectives: the inter-node link as soon as it spans
        nodes (SPEC 3); with ``efficiency`` the bandwidth is the achievable fraction (issue 4)."""
        s = self.system
        spans = self.crosses_nodes(dim, size)
        bw_in = s.intra_node_link.bandwidth_bytes_per_s * (s.intra_node_link.efficiency if efficiency else 1.0)
        bw_out = s.inter_node_link.bandwidth_bytes_per_s * (s.inter_node_link.efficiency if efficiency else 1.0)
        return Link(np.where(spans, bw_out, bw_in),
                    np.where(spans, s.inter_node_link.latency_s, s.intra_node_link.latency_s))

    def link_spec(self, dim: str):
        """The Link spec (name and figures) a group of ``dim`` uses, one configuration."""
        s = self.system
        return s.inter_node_link if bool(np.all(self.crosses_nodes(dim))) else s.intra_node_link


# ---------------------------------------------------------------- validity rules

@dataclass(frozen=True)
class Facts:
    """What a rule reads: the model's and the job's numbers, and the knobs (arrays or scalars).
    A knob may be None where it is not known yet (a free knob); rules that read it are skipped."""

    heads: int
    groups: int
    layers: int
    num_gpus: int
    gpus_per_node: int
    global_batch_size: int
    tp: object = 1
    pp: object = 1
    dp: object = 1
    vp: object = 1
    micro_batch_size: object = 1
    sequence_parallel: object = False
    schedule: object = None      # a name, or None when not known

    @property
    def m(self):
        return self.global_batch_size // np.maximum(np.asarray(self.dp) * self.micro_batch_size, 1)


@dataclass(frozen=True)
class MeshRule:
    """One validity rule: the `check` rule ID it reports under, the field to fix, what it reads,
    the vectorized test of a violation, the message, and the search stage that applies it as a
    mask (None: the search never builds a violating configuration)."""

    id: str
    field: str
    reads: tuple[str, ...]
    broken: Callable[[Facts], object]
    message: Callable[[Facts], str]
    search_stage: str | None = None
    search_reason: str = ""


def _interleaved(f: Facts):
    return np.asarray(f.schedule == "interleaved")


def _vp_above_1(f: Facts):
    return np.asarray(False) if f.vp is None else np.asarray(f.vp) > 1


RULES: tuple[MeshRule, ...] = (
    MeshRule("PM102", "parallel.dp", ("tp", "pp", "dp"),
             lambda f: np.asarray(f.tp) * f.pp * f.dp != f.num_gpus,
             lambda f: f"tp({f.tp}) * pp({f.pp}) * dp({f.dp}) = {f.tp * f.pp * f.dp} != num_gpus({f.num_gpus}); "
                       "choose dp = num_gpus / (tp * pp)"),
    MeshRule("PM103", "parallel.tp", ("tp",), lambda f: f.heads % np.asarray(f.tp) != 0,
             lambda f: f"num_attention_heads({f.heads}) is not divisible by tp({f.tp}); pick tp among the "
                       f"divisors of {f.heads}",
             "tp", "tp does not divide the attention heads / query groups"),
    MeshRule("PM103", "parallel.tp", ("tp",),
             lambda f: (f.heads % np.asarray(f.tp) == 0) & (f.groups % np.asarray(f.tp) != 0)
             & (np.asarray(f.tp) % f.groups != 0),
             lambda f: f"num_query_groups({f.groups}) and tp({f.tp}) do not divide one another",
             "tp", "tp does not divide the attention heads / query groups"),
    MeshRule("PM104", "parallel.pp", ("pp", "vp"), lambda f: f.layers % (np.asarray(f.pp) * f.vp) != 0,
             lambda f: f"num_layers({f.layers}) is not divisible by pp({f.pp}) * vp({f.vp}) = {f.pp * f.vp}; "
                       f"pick pp * vp dividing {f.layers}",
             "pair", "pp does not divide the layers"),
    MeshRule("PM105", "training.global_batch_size", ("dp", "micro_batch_size"),
             lambda f: f.global_batch_size % (np.asarray(f.dp) * f.micro_batch_size) != 0,
             lambda f: f"global_batch_size({f.global_batch_size}) is not divisible by dp({f.dp}) * "
                       f"micro_batch_size({f.micro_batch_size}) = {f.dp * f.micro_batch_size}",
             "batch", "global batch not divisible by dp"),
    MeshRule("PM106", "parallel.vp", ("pp", "vp", "dp", "micro_batch_size"),
             lambda f: (np.asarray(f.vp) > 1) & (np.asarray(f.pp) > 1) & (f.m % np.asarray(f.pp) != 0),
             lambda f: f"interleaved schedule needs the micro-batch count m({f.m}) to be a multiple of "
                       f"pp({f.pp}); change global_batch_size or micro_batch_size",
             "micro", "interleaving needs pp > 1 and m a multiple of pp"),
    MeshRule("PM107", "parallel.sequence_parallel", ("sequence_parallel", "tp"),
             lambda f: np.asarray(f.sequence_parallel, dtype=bool) & (np.asarray(f.tp) == 1),
             lambda f: "sequence_parallel needs tp > 1; set it false or raise tp"),
    MeshRule("PM107", "parallel.vp", ("schedule", "vp"),
             lambda f: _interleaved(f) & (np.asarray(f.vp) == 1),
             lambda f: "schedule interleaved needs vp > 1; set vp or use schedule 1f1b"),
    MeshRule("PM107", "parallel.schedule", ("schedule", "vp"),
             lambda f: _vp_above_1(f) & ~_interleaved(f),
             lambda f: f"vp({f.vp}) > 1 needs schedule interleaved"),
    MeshRule("PM107", "parallel.vp", ("pp",),
             lambda f: (np.asarray(f.pp) == 1) & (_vp_above_1(f) | _interleaved(f)),
             lambda f: "interleaving (vp > 1) needs pp > 1",
             "micro", "interleaving needs pp > 1 and m a multiple of pp"),
    MeshRule("PM201", "parallel.tp", ("tp",), lambda f: np.asarray(f.tp) > f.gpus_per_node,
             lambda f: f"tp({f.tp}) > gpus_per_node({f.gpus_per_node}): the TP group would cross nodes",
             "tp", "tp group would cross the node boundary"),
)
KNOB_RULES = tuple(r for r in RULES if r.id == "PM107")


def broken_rules(f: Facts, rules=RULES, cross_node_tp: bool = True) -> list[MeshRule]:
    """The rules one configuration breaks (PM201 only when cross-node TP is not allowed)."""
    out = []
    for r in rules:
        if r.id == "PM201" and cross_node_tp:
            continue
        if any(getattr(f, k) is None for k in r.reads):
            continue
        if bool(np.any(r.broken(f))):
            out.append(r)
    return out


def apply_masks(stage: str, f: Facts, alive, counts: dict, unit: str, cross_node_tp: bool = True):
    """The search's side of the rules: drop the candidates of ``stage`` that break one, counting each
    under the first rule it breaks (``search_reason (unit)``)."""
    alive = np.asarray(alive, dtype=bool).copy()
    for r in RULES:
        if r.search_stage != stage or (r.id == "PM201" and cross_node_tp):
            continue
        hit = np.asarray(r.broken(f), dtype=bool) & alive
        n = int(hit.sum())
        if n:
            suffix = "; --allow-cross-node-tp" if r.id == "PM201" else ""
            key = f"{r.search_reason} ({unit}{suffix})"
            counts[key] = counts.get(key, 0) + n
        alive &= ~hit
    return alive


def _facts(model, system, global_batch_size: int, **knobs) -> Facts:
    return Facts(model.num_attention_heads, model.groups, model.num_layers, system.num_gpus,
                 system.gpus_per_node, global_batch_size, **knobs)


def config_problems(model, system, cfg, allow_cross_node_tp: bool = True) -> list[tuple[str, str, str]]:
    """Every rule one resolved configuration breaks, as (rule ID, field, message naming the factors and
    the fix). The rule IDs are those of `perfmodel check`."""
    f = _facts(model, system, cfg.global_batch_size, tp=cfg.tp, pp=cfg.pp, dp=cfg.dp, vp=cfg.vp,
               micro_batch_size=cfg.micro_batch_size, sequence_parallel=cfg.sequence_parallel,
               schedule=cfg.schedule)
    return [(r.id, r.field, r.message(f)) for r in broken_rules(f, cross_node_tp=allow_cross_node_tp)]


def knob_contradictions(tp, pp, vp, sequence_parallel, schedule) -> list[tuple[str, str]]:
    """Knobs that contradict one another (rule PM107), as (field, message); a knob left as None (free)
    is not checked."""
    f = Facts(1, 1, 1, 1, 1, 1, tp=tp, pp=pp, vp=vp, sequence_parallel=sequence_parallel, schedule=schedule)
    return [(r.field, r.message(f)) for r in broken_rules(f, KNOB_RULES)]
