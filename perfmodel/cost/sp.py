"""Sequence parallelism: shape trace, residency and communication (seed 002; Korthikanti 2022).

Megatron SP shards the token-wise regions (LayerNorm, dropout, residual)
along the sequence, s -> s/t, and turns each TP all-reduce into a
reduce-scatter (g*) plus an all-gather (g). Since a ring all-reduce is a
reduce-scatter followed by an all-gather, both move the same bytes per block:
    4 (t-1)/t * b s h * dtype_bytes   (2 all-reduces, or 2 AG + 2 RS)
with twice the number of operations under SP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.cost import Num

from .collectives import bytes_per_rank


@dataclass(frozen=True)
class TraceRow:
    region: str
    s: int
    h: int
    resident: bool  # kept for backward (True) or a transient communication buffer


def shape_trace(seq: int, hidden: int, tp: int, sequence_parallel: bool) -> list[TraceRow]:
    """Activation shapes (s, h) through layernorm -> col-linear -> gelu -> row-linear -> dropout
    (seed 002)."""
    s, h = seq, hidden
    rows: list[TraceRow] = []
    if not sequence_parallel:
        rows.append(TraceRow("layernorm", s, h, True))
        rows.append(TraceRow("col_linear", s, h // tp, True))
        rows.append(TraceRow("gelu", s, h // tp, True))
        rows.append(TraceRow("row_linear", s, h, True))
        rows.append(TraceRow("dropout", s, h, True))
        return rows
    s = seq // tp
    rows.append(TraceRow("layernorm", s, h, True))
    rows.append(TraceRow("g (all-gather seq)", seq, h, False))
    rows.append(TraceRow("col_linear", seq, h // tp, True))
    rows.append(TraceRow("gelu", seq, h // tp, True))
    rows.append(TraceRow("row_out (full h)", seq, h, False))
    rows.append(TraceRow("g* (reduce-scatter seq)", s, h, False))
    rows.append(TraceRow("dropout", s, h, True))
    return rows


def resident_peak_bytes(trace: list[TraceRow], batch: int = 1, dtype_bytes: int = 2) -> int:
    """Largest tensor kept for backward (transient buffers excluded), bytes (seed 002)."""
    return max(batch * r.s * r.h * dtype_bytes for r in trace if r.resident)


def transient_peak_bytes(trace: list[TraceRow], batch: int = 1, dtype_bytes: int = 2) -> int:
    """Largest transient (communication) buffer, bytes; 0 when there is none."""
    return max((batch * r.s * r.h * dtype_bytes for r in trace if not r.resident), default=0)


def norm_input_bytes(
    seq: Num, hidden: Num, batch: Num, tp: Num, sequence_parallel: Num, dtype_bytes: Num = 2
) -> Num:
    """Bytes of one LayerNorm input a layer keeps: b s h * dtype, / t with SP (seed 002 worked
    example)."""
    full = np.asarray(batch, dtype=float) * seq * hidden * dtype_bytes
    return np.where(sequence_parallel, full / tp, full)


def block_comm(
    seq: Num, hidden: Num, batch: Num, tp: Num, sequence_parallel: Num, dtype_bytes: Num = 2
) -> dict[str, Any]:
    """Forward TP communication of one block: operations and bytes per rank (seed 002, section
    4)."""
    message = float(batch) * seq * hidden * dtype_bytes
    ops = {"all-gather": 2, "reduce-scatter": 2} if sequence_parallel else {"all-reduce": 2}
    total = sum(n * float(bytes_per_rank(kind, message, tp)) for kind, n in ops.items())
    return {
        "message_bytes": message,
        "operations": ops,
        "num_operations": sum(ops.values()),
        "bytes_per_rank": total,
    }


def linear_layer_comm(c_in: Num, c_out: Num, batch: Num) -> dict[str, Any]:
    """Elements moved for y = W x, W C_out x C_in, batch B (seed 000, section 2.3).

    Data parallel moves the parameters (C_out C_in per step); TP "partition
    output" moves B C_in (in backward), "reduce output" B C_out (in forward).
    """
    dp = float(c_out) * c_in
    return {
        "data_parallel": dp,
        "tp_partition_output": float(batch) * c_in,
        "tp_reduce_output": float(batch) * c_out,
        "dp_over_tp": dp / (float(batch) * c_out),
    }


def tp_comm_compute_ratio(t: Num, flops_per_s: Num, hidden: Num, bandwidth_bytes_per_s: Num) -> Num:
    """8 (t-1) P / (24 h BW): TP all-reduce time over layer compute, independent of batch (seed 000,
    4.2).

    Bandwidth term only: 4 (t-1)/t * b s h * 2 bytes over BW, against
    24 b s h^2 / (t P) seconds of GEMMs.
    """
    return (
        8.0
        * (np.asarray(t, dtype=float) - 1)
        * flops_per_s
        / (24.0 * hidden * bandwidth_bytes_per_s)
    )
