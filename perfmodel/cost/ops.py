"""The vocabulary a layer is described in: GEMMs, pointwise kernels and collectives, as data.

A layer description (cost/transformer.py) is a list of these; everything else reads it:
FLOP and parameter counts (cost/flops.py, cost/memory.py), the roofline rows of
`perfmodel roofline` and check PM203, the per-op times (cost/layer.py) and the
attention core that selective recompute repeats. Shapes are those of one rank,
numpy arrays broadcast over configurations; ``shard`` names the parallel dimension
that split them, so the whole-layer figure is one multiplication away.

Units: elements, FLOPs, bytes, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .roofline import gemm_bytes, gemm_flops

# How tensor parallelism splits an op (Shoeybi et al. 2019, Megatron-LM, Sec. 3):
#   column: the GEMM's N (output features) is split t ways;   row: its K (input features);
#   heads: the attention core's batch of heads;   tokens: token-wise kernels under SP
#   (Korthikanti et al. 2022, Sec. 4.2.2); replicated: every rank runs it whole.
Shard = Literal["column", "row", "heads", "tokens", "replicated"]


@dataclass(frozen=True)
class Gemm:
    """C (M x N) = A (M x K) B (K x N), ``batch`` independent products, on one rank.

    Backward is two GEMMs of the same FLOPs: the input gradient (M x N x K) and the weight
    gradient (K x M x N). ``params`` counts the whole layer's weights and bias of this GEMM
    (0 for an activation x activation product such as QK^T)."""

    name: str
    M: np.ndarray
    K: np.ndarray
    N: np.ndarray
    batch: np.ndarray
    shard: Shard
    params: float = 0.0
    attention_core: bool = False  # repeated by selective recompute (Korthikanti 2022, Sec. 5)

    @property
    def flops(self):
        """2 M K N per product (SPEC 4), FLOPs."""
        return gemm_flops(self.M, self.K, self.N, self.batch)

    def bytes(self, dtype_bytes: float):
        """Minimum HBM traffic: read A and B, write C (SPEC 4), bytes."""
        return gemm_bytes(self.M, self.K, self.N, dtype_bytes, self.batch)


@dataclass(frozen=True)
class FusedAttention:
    """Flash attention (Dao et al. 2022): the core's GEMMs in one kernel that keeps the s x s
    scores on chip. FLOPs are those of its GEMMs; HBM traffic is Q, K, V in and the output out."""

    name: str
    gemms: tuple[Gemm, ...]
    io_bytes: np.ndarray
    shard: Shard = "heads"
    attention_core: bool = True

    @property
    def flops(self):
        return sum(g.flops for g in self.gemms)


@dataclass(frozen=True)
class Pointwise:
    """A memory-bound kernel over ``elements`` (one rank): bytes per element read and written
    forward and backward (0: no kernel in that pass), FLOPs per element. ``params``: the
    whole layer's parameters it owns (a norm's gamma and beta)."""

    name: str
    elements: np.ndarray
    fwd_bytes_per_el: float
    bwd_bytes_per_el: float
    flops_per_el: float
    shard: Shard
    params: float = 0.0
    attention_core: bool = False


@dataclass(frozen=True)
class Transfer:
    """One collective of a pass: its kind (a whole all-reduce, or one half of it: a
    reduce-scatter or an all-gather, the same ring time), when it runs (always, only under
    sequence parallelism, or only without it), and the GEMM pass it overlaps, if any:
    (GEMM name, "dgrad" or "wgrad")."""

    kind: Literal["all-reduce", "reduce-scatter", "all-gather"]
    when: Literal["always", "sp", "no_sp"] = "always"
    behind: tuple[str, str] | None = None


@dataclass(frozen=True)
class Collective:
    """Communication of ``message`` bytes over a parallel group, as the transfers of the forward
    and of the backward pass. Wire bytes per rank are those of the forward transfers."""

    name: str
    group: Literal["tp"]
    message: np.ndarray
    fwd: tuple[Transfer, ...]
    bwd: tuple[Transfer, ...]
    attention_core: bool = False


OpDesc = Gemm | FusedAttention | Pointwise | Collective


@dataclass(frozen=True)
class Block:
    """A described piece of the model: a decoder layer, the embedding, or the LM head."""

    name: str
    ops: tuple[OpDesc, ...]

    def gemms(self) -> list[Gemm]:
        """Every GEMM, the fused attention's included (the roofline's rows)."""
        out: list[Gemm] = []
        for op in self.ops:
            out.extend(op.gemms if isinstance(op, FusedAttention) else [op] if isinstance(op, Gemm) else [])
        return out

    def matmul_flops(self, attention_core_only: bool = False):
        """Forward FLOPs of the matrix products (the FLOPs MFU counts), one rank."""
        return sum(g.flops for g in self.gemms() if g.attention_core or not attention_core_only)

    def params(self):
        """Parameters the block owns, whole (before any sharding)."""
        return sum(op.params for op in self.ops if isinstance(op, (Gemm, Pointwise)))
