"""One layer of one configuration: its timed operations (the --per-layer table, as JSON rows)
and its forward and backward seconds (engine/estimate.py re-exports these)."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost.layer import Op
from perfmodel.cost.memory import RECOMPUTE_CODES
from perfmodel.cost.ops import Block
from perfmodel.cost.transformer import decoder_layer
from perfmodel.engine.block_cost import BlockCost
from perfmodel.engine.blocks import Setting, block_ops
from perfmodel.specs import Config, Plan


def layer_kind(plan: Plan) -> str:
    """The kind of layer most of the model is made of: "moe" or "dense"."""
    pattern = plan.model.moe_pattern()
    return "moe" if 2 * sum(pattern) > len(pattern) else "dense"


def _layer(plan: Plan, cfg: Config, kind: str | None) -> tuple[list[Op], Block]:
    def f(x: float) -> Array:
        return np.asarray(float(x))

    return block_ops(
        Setting.of(plan),
        decoder_layer,
        f(cfg.tp),
        f(cfg.micro_batch_size),
        np.asarray(cfg.sequence_parallel),
        f(cfg.cp),
        f(cfg.ep),
        f(cfg.etp),
        cfg.cp_comm_type,
        cfg.moe_token_dispatcher_type,
        cfg.moe_a2a_overlap,
        moe=(kind or layer_kind(plan)) == "moe",
    )


def layer_block(plan: Plan, cfg: Config, kind: str | None = None) -> Block:
    """One layer of ``cfg`` as described ops (cost/ops.py), before timing: what each kernel moves
    an element, for the tests and the docs that quote it."""
    return _layer(plan, cfg, kind)[1]


def per_layer_ops(plan: Plan, cfg: Config, kind: str | None = None) -> list[Op]:
    """The timed operations of one layer for ``cfg`` (of ``kind``, default the model's most common
    kind), for the --per-layer table."""
    return _layer(plan, cfg, kind)[0]


def layer_seconds(
    plan: Plan, cfg: Config, recompute: str | None = None, kind: str | None = None
) -> tuple[float, float]:
    """(forward, backward) seconds of one layer for one micro-batch under ``cfg``, TP communication
    and the recompute of ``recompute`` (default: the configuration's) included."""
    ops, block = _layer(plan, cfg, kind)
    st = Setting.of(plan)
    cost = BlockCost.of(
        ops,
        block,
        float(cfg.tp),
        float(cfg.ep),
        float(cfg.etp),
        tuple(plan.training.recompute_modules),
        st.shape,
        st.precision.activation_bytes,
        plan.training.checkpoint_every_n_layers,
    )
    fwd, bwd = cost.seconds(RECOMPUTE_CODES[recompute or cfg.recompute])
    return float(fwd), float(bwd)


def ops_json(ops: list[Op]) -> list[dict[str, Any]]:
    """The per-layer operations as JSON rows (one configuration)."""
    rows = []
    for o in ops:
        bound = (
            "link"
            if o.kind == "comm"
            else ("compute" if bool(np.all(o.compute_bound)) else "memory")
        )
        rows.append(
            {
                "name": o.name,
                "kind": o.kind,
                "flops": float(np.sum(o.flops)),
                "bytes": float(np.sum(o.bytes)),
                "bound": bound,
                "forward_s": float(np.sum(o.fwd_s)),
                "backward_s": float(np.sum(o.bwd_s)),
                "recomputed_by_selective": o.attention_core,
            }
        )
    return rows
