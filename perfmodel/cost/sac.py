"""torchtitan's per-op selective activation checkpointing (selective_ac_option "op",
torchtitan/models/llama/parallelize_llama.py, _apply_ac_to_transformer_block, 2024-12): inside
each layer the output of SDPA is saved, and that of every other matrix multiply, counting the
aten.mm calls of the layer's forward in order (its policy saves the 1st, 3rd, ... : `_save_list`
and ``mm_count % 2``); everything else (norms, RoPE, activations, the other matmuls) is recomputed
in the backward from the saved tensors and the layer's input. torchtitan's Llama calls wq, wk,
wv, wo, w1, w3, w2 in that order (torchtitan/models/llama/model.py), so wq, wv, w1 and w2 are
saved and wk, wo and w3 recomputed. A reduce-scatter's output is saved too (``_save_list``), so
TP communication is not repeated.

Bytes per micro-batch on one rank; shares are fractions of an op's forward.
"""

from __future__ import annotations

from perfmodel.cost import Num

from .ops import Block, FusedAttention, Gemm, Pointwise
from .shapes import LayerShape

MODULE = "op_sac"  # its name among Training.recompute_modules
LAYER_MODULE = "layer_sac"  # torchtitan's selective_ac_option "N": every N-th layer checkpointed


def _matmul_shares(op: Gemm, m: LayerShape) -> list[float]:
    """The aten.mm calls one GEMM of the op list stands for, as shares of its output: torchtitan's
    Llama projects q, k and v and the gate and up halves with separate nn.Linear layers."""
    if op.name == "QKV projection":
        total = m.q_dim + 2 * m.kv_dim
        return [m.q_dim / total, m.kv_dim / total, m.kv_dim / total]
    if op.name == "MLP gate+up":
        return [0.5, 0.5]
    return [1.0]


def policy(block: Block, m: LayerShape, act: int) -> tuple[dict[str, float], Num]:
    """(the recomputed share of each op's forward, by name; the bytes kept for the backward):
    the layer's input, every saved matmul's output and the attention output (its fp32 log-sum-exp,
    one value per head and token, is left out)."""
    count = 0
    share: dict[str, float] = {}
    kept: Num = block.input_bytes
    for op in block.ops:
        if isinstance(op, FusedAttention):
            share[op.name] = 0.0
            out = op.gemms[-1]
            kept = kept + act * out.M * out.N * out.batch
        elif isinstance(op, Gemm) and op.params:
            recomputed = 0.0
            for part in _matmul_shares(op, m):
                count += 1
                if count % 2:
                    kept = kept + part * act * op.M * op.N * op.batch
                else:
                    recomputed += part
            share[op.name] = recomputed
        elif isinstance(op, (Gemm, Pointwise)):
            share[op.name] = 1.0
    return share, kept


def layer_policy(block: Block, every: int) -> tuple[dict[str, float], Num]:
    """torchtitan's per-layer selective checkpointing (selective_ac_option "N",
    _apply_ac_to_transformer_block): every N-th layer is wrapped in full activation
    checkpointing and the others keep everything. Per layer on average: 1/N of each op's forward
    (its collectives too) is repeated, and (N - 1)/N of the layers keep all their activations, the
    others their input only."""
    n = max(int(every), 1)
    share = {op.name: 1.0 / n for op in block.ops}
    kept = ((n - 1) * block.activation_bytes(0) + block.input_bytes) / n
    return share, kept
