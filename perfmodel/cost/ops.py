"""The vocabulary a layer is described in: GEMMs, pointwise kernels and collectives, as data.

A layer description (cost/transformer.py) is a list of these; everything else reads it:
FLOP and parameter counts (cost/flops.py, cost/memory.py), stored activations, the roofline
rows of `perfmodel roofline` and check PM203, the per-op times (cost/layer.py) and the
attention core that selective recompute repeats. Shapes are those of one rank, numpy arrays
broadcast over configurations; ``shard`` names the parallel dimension that split them.

Stored activations (Korthikanti et al. 2022, Sec. 4.1) are attached to the op that keeps them
for its backward: ``saved`` bytes survive selective recompute, ``saved_core`` bytes (the s x s
softmax output, dropout mask and dropout output) are what selective recompute drops.

Each op names the Megatron-Core recompute modules it belongs to (--recompute-modules: core_attn,
layernorm, mlp, moe, moe_act, shared_experts, mla_up_proj); selective recompute repeats the forward
of the ops of the modules chosen (core_attn by default, Korthikanti 2022's selective recompute).

Units: elements, FLOPs, bytes, seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import Literal

import numpy as np

from perfmodel.cost import Array, Num

from .roofline import gemm_bytes, gemm_flops

# How an op is split (Shoeybi et al. 2019, Megatron-LM, Sec. 3; Korthikanti 2022, Sec. 4.2.2):
#   column: a GEMM's N (output features) split over TP;   row: its K (input features);
#   heads: the attention core's batch of heads;   tokens: token-wise kernels under SP;
#   experts: routed experts over EP (and their inner size over ETP);   replicated: every rank.
Shard = Literal["column", "row", "heads", "tokens", "experts", "replicated"]


@dataclass(frozen=True)
class Gemm:
    """C (M x N) = A (M x K) B (K x N), ``batch`` independent products, on one rank.

    Backward is two GEMMs of the same FLOPs: the input gradient (M x N x K) and the weight
    gradient (K x M x N). ``params`` counts the whole model's weights and bias of this GEMM
    (0 for an activation x activation product such as QK^T). ``time_rows``: the rows the
    slowest rank really runs (routed experts: the busiest rank's share), when not M."""

    name: str
    M: Num
    K: Num
    N: Num
    batch: Num
    shard: Shard
    params: Num = 0.0
    attention_core: bool = False  # repeated by selective recompute (Korthikanti 2022, Sec. 5)
    saved: Num = 0.0
    saved_core: Num = 0.0
    time_rows: Num | None = None
    modules: tuple[str, ...] = ()
    # runs in 16-bit under an FP8/MXFP8/NVFP4 recipe: Megatron-Core's output layer is its own
    # tensor_parallel.ColumnParallelLinear, outside Transformer Engine's autocast
    # (megatron/core/models/gpt/gpt_model.py), torchtitan's Float8 skips "output" (filter_fqns),
    # and the router runs in 16/32-bit (Megatron-Core moe/router.py)
    sixteen_bit: bool = False
    # host time of one pass on the critical path (a grouped GEMM issued expert by expert)
    host_s: Num = 0.0
    # of ``saved``, what a recomputed module rebuilds: (module, bytes) (FusedAttention.rebuilt)
    rebuilt: tuple[str, Num] = ("", 0.0)

    @property
    def flops(self) -> Num:
        """2 M K N per product (SPEC 4), FLOPs."""
        return gemm_flops(self.M, self.K, self.N, self.batch)

    def bytes(self, dtype_bytes: float) -> Num:
        """Minimum HBM traffic: read A and B, write C (SPEC 4), bytes."""
        return gemm_bytes(self.M, self.K, self.N, dtype_bytes, self.batch)


@dataclass(frozen=True)
class FusedAttention:
    """Flash attention (Dao et al. 2022): the core's GEMMs in one kernel that keeps the s x s
    scores on chip. FLOPs are those of its GEMMs; a causal kernel skips the masked half of the
    blocks (``causal_fraction``). HBM traffic is Q, K, V in and the output out."""

    name: str
    gemms: tuple[Gemm, ...]
    io_bytes: Num
    causal_fraction: float = 1.0
    shard: Shard = "heads"
    attention_core: bool = True
    saved: Num = 0.0
    saved_core: Num = 0.0
    modules: tuple[str, ...] = ()
    # of ``saved``, the inputs a recomputed module rebuilds: (module, bytes); MLA's up-projections
    # give Q, K and V
    rebuilt: tuple[str, Num] = ("", 0.0)

    @property
    def flops(self) -> Num:
        return sum(g.flops for g in self.gemms)


@dataclass(frozen=True)
class Pointwise:
    """A memory-bound kernel over ``elements`` (one rank): bytes per element read and written
    forward and backward (0: no kernel in that pass), FLOPs per element. ``params``: the
    whole model's parameters it owns (a norm's gamma and beta). ``kernels``: the launches that
    move those bytes in each pass (an op issued in pieces, one per expert, pays the per-kernel
    overhead each time)."""

    name: str
    elements: Num
    fwd_bytes_per_el: float
    bwd_bytes_per_el: float
    flops_per_el: float
    shard: Shard
    params: Num = 0.0
    attention_core: bool = False
    saved: Num = 0.0
    saved_core: Num = 0.0
    modules: tuple[str, ...] = ()
    kernels: Num = 1.0
    cast: bool = False  # a quantizing kernel (its bandwidth: Hardware.cast_eff where set)


@dataclass(frozen=True)
class Transfer:
    """One collective of a pass: its kind; when it runs (always, only under sequence parallelism,
    or only without it); the op pass it overlaps, if any: (op name, "dgrad" | "wgrad" | "fwd" |
    "bwd"); ``repeat`` times in a row, each overlapping ``share`` of that pass (a ring's steps);
    and a multiple of the message it moves (the backward of a ring moves K, V and their gradients).
    """

    kind: Literal["all-reduce", "reduce-scatter", "all-gather", "all-to-all", "p2p"]
    when: Literal["always", "sp", "no_sp"] = "always"
    behind: tuple[str, str] | None = None
    repeat: Num = 1
    share: Num = 1.0
    scale: float = 1.0


@dataclass(frozen=True)
class Collective:
    """Communication of ``message`` bytes over a parallel group, as the transfers of the forward
    and of the backward pass. Wire bytes per rank are those of the forward transfers."""

    name: str
    group: Literal["tp", "cp", "ep", "etp"]
    message: Num
    fwd: tuple[Transfer, ...]
    bwd: tuple[Transfer, ...]
    attention_core: bool = False
    saved: Num = 0.0
    saved_core: Num = 0.0
    modules: tuple[str, ...] = ()
    dedup_k: int = 0  # DeepEP: a token's k copies cross to each remote node once (0: no dedup)
    # group-limited routing (groups, groups a token may reach): caps the nodes a token reaches
    route: tuple[int, int] = (0, 0)
    # the busiest rank's load over the mean, already in ``message`` (routed experts; 1: balanced)
    imbalance: float = 1.0


OpDesc = Gemm | FusedAttention | Pointwise | Collective


def tag(ops: Iterable[OpDesc], *modules: str) -> list[OpDesc]:
    """The ops, each also in ``modules`` (the attention core's ops are in core_attn already)."""
    return [_replace(op, modules=tuple(dict.fromkeys(op.modules + modules))) for op in ops]


def in_modules(op: OpDesc, modules: Iterable[str]) -> bool:
    """True where op is repeated by a selective recompute of ``modules``."""
    return bool(set(op.modules + (("core_attn",) if op.attention_core else ())) & set(modules))


@dataclass(frozen=True)
class Block:
    """A described piece of the model: a decoder layer, the embedding, or the LM head.
    ``input_bytes``: the block's input per rank, all that full recompute keeps."""

    name: str
    ops: tuple[OpDesc, ...]
    input_bytes: Num = 0.0

    def gemms(self) -> list[Gemm]:
        """Every GEMM, the fused attention's included (the roofline's rows)."""
        out: list[Gemm] = []
        for op in self.ops:
            out.extend(
                op.gemms if isinstance(op, FusedAttention) else [op] if isinstance(op, Gemm) else []
            )
        return out

    def matmul_flops(self, attention_core_only: bool = False) -> Num:
        """Forward FLOPs of the matrix products (the FLOPs MFU counts), one rank."""
        return sum(g.flops for g in self.gemms() if g.attention_core or not attention_core_only)

    def params(self) -> Num:
        """Parameters the block owns, whole (before any sharding)."""
        return sum(op.params for op in self.ops if isinstance(op, (Gemm, Pointwise)))

    def activation_bytes(self, recompute: Num, modules: tuple[str, ...] = ("core_attn",)) -> Array:
        """Bytes kept for the backward per micro-batch (Korthikanti 2022, Sec. 4-5): everything
        (0 none), the input alone (2 full), or under selective recompute (1) everything but what
        the recomputed ``modules`` rebuild: the attention core's s x s tensors (core_attn; its Q, K,
        V inputs stay), and of every other recomputed module (Megatron-Core --recompute-modules,
        e.g. moe, layernorm) only its input, the checkpoint it is recomputed from: the first op of
        each run of recomputed ops keeps its input, the ops after it keep nothing; MLA's
        up-projections (mla_up_proj) also rebuild the attention core's Q, K and V, and the experts'
        activation (moe_act) the 16-bit input of their fc2. The recompute
        time repeats the same ops (cost/step.layer_recompute), so memory and time agree."""
        kept: Num = sum(self.kept_by_op(False, modules), 0.0)
        selective: Num = sum(self.kept_by_op(True, modules), 0.0)
        rc = np.asarray(recompute)
        return np.where(rc == 2, self.input_bytes, np.where(rc == 1, selective, kept))

    def kept_by_op(self, selective: bool, modules: tuple[str, ...] = ("core_attn",)) -> list[Num]:
        """What each op keeps for the backward per micro-batch, bytes, in op order: its saved and
        s x s tensors without recompute; under selective recompute of ``modules``, as
        activation_bytes describes (what fine-grained offloading moves is read op by op:
        cost/offload_modules.py)."""
        if not selective:
            return [op.saved + op.saved_core for op in self.ops]
        others = set(modules) - {"core_attn"}
        out: list[Num] = []
        inside = False
        for op in self.ops:
            part: Num = 0.0
            recomputed = bool(set(op.modules) & others)
            if not recomputed or not inside:  # outside a recomputed run, or its first op
                part = op.saved
                if isinstance(op, (Gemm, FusedAttention)) and op.rebuilt[0] in others:
                    # Megatron-Core frees a recomputed module's output once its consumer has
                    # run (CheckpointWithoutOutput) and rebuilds it before that consumer's
                    # backward
                    part = part - op.rebuilt[1]
            if not recomputed and not (op.attention_core and "core_attn" in modules):
                part = part + op.saved_core
            out.append(part)
            inside = recomputed
        return out
