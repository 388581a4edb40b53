"""A slow reference for the vectorized composition, written separately: one configuration at a time,
in plain Python (no numpy), from the per-micro-batch costs of its blocks to the stage times, the
slowest stage, the closed-form bubble and the step's compute, recompute and communication terms
(issue 14).

It takes the per-op times of the layer, embedding and LM head for that one configuration (their
formulas are checked against hand counts elsewhere) and assembles everything else its own way: the
layer split as Megatron does it (even when p divides L; else the ends lighter), stages as a list,
the slowest by a loop, the mean by a sum. It covers dense models without context parallelism."""

from __future__ import annotations

from perfmodel.cost.transformer import decoder_layer, embedding, lm_head
from perfmodel.engine.blocks import Setting, block_ops


def _block(plan, builder, cfg) -> dict:
    """Seconds per micro-batch of one block: compute and comm, forward and backward, and the
    attention core."""
    ops, _ = block_ops(
        Setting.of(plan), builder, float(cfg.tp), float(cfg.micro_batch_size), cfg.sequence_parallel
    )
    out = {"fwd": 0.0, "bwd": 0.0, "cfwd": 0.0, "cbwd": 0.0, "core": 0.0}
    for op in ops:
        comm = op.kind == "comm"
        out["cfwd" if comm else "fwd"] += float(op.fwd_s)
        out["cbwd" if comm else "bwd"] += float(op.bwd_s)
        if op.attention_core and not comm:
            out["core"] += float(op.fwd_s)
    return out


def layer_split(L: int, p: int) -> list[int]:
    """Layers per stage for an even split (the only case the reference takes)."""
    assert L % p == 0, "the reference covers even splits"
    return [L // p] * p


def breakdown(plan, cfg) -> dict:
    """forward, backward, recompute, tp_comm (per step) and the closed-form bubble, for one
    configuration."""
    layer, emb, head = (
        _block(plan, decoder_layer, cfg),
        _block(plan, embedding, cfg),
        _block(plan, lm_head, cfg),
    )
    rec = {
        "none": (0.0, 0.0),
        "selective": (layer["core"], 0.0),
        "full": (layer["fwd"], layer["cfwd"]),
    }[cfg.recompute]
    stages = []
    split = layer_split(plan.model.num_layers, cfg.pp)
    for i, n in enumerate(split):
        parts = {
            "fwd": n * layer["fwd"],
            "bwd": n * layer["bwd"],
            "rec": n * rec[0],
            "comm": n * (layer["cfwd"] + layer["cbwd"] + rec[1]),
        }
        for block, held in ((emb, i == 0), (head, i == cfg.pp - 1)):
            if held:
                parts["fwd"] += block["fwd"]
                parts["bwd"] += block["bwd"]
                parts["comm"] += block["cfwd"] + block["cbwd"]
        parts["time"] = parts["fwd"] + parts["bwd"] + parts["rec"] + parts["comm"]
        stages.append(parts)
    slowest = stages[0]
    for st in stages[1:]:
        if st["time"] > slowest["time"]:
            slowest = st
    m = cfg.num_micro_batches
    mean = sum(st["time"] for st in stages) / cfg.pp
    return {
        "forward": m * slowest["fwd"],
        "backward": m * slowest["bwd"],
        "recompute": m * slowest["rec"],
        "tp_comm": m * slowest["comm"],
        "bubble": (cfg.pp - 1) / cfg.vp * mean,
    }
