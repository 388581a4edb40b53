"""What each configuration sends to host memory per micro-batch, as the memory and the step time
read it (cost/offload.py): Megatron-Core's layer-wise activation offloading (the kept activations
of the first N layers: --cpu-offloading-num-layers, and the search's activation-offload-K sets)
or its fine-grained offloading (the offload_modules' saved tensors in every layer:
cost/offload_modules.py). Megatron-Core runs one of the two (specs/offload_rules.py)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost.stages import Stages
from perfmodel.engine import memory_switches
from perfmodel.engine.blocks import Setting

# the layers fine-grained offloading covers: all of a stage's (min'd with them: cost/offload.py)
_EVERY_LAYER = float(2**31)


class Offload(NamedTuple):
    """Per row and stage class: the layers' kept bytes per micro-batch, all of them and a layer's
    (what layer-wise offloading sheds a layer), the bytes an offloaded layer moves, the layers
    offloaded, and the host messages a layer's copy takes each way."""

    total: Array
    kept: Array
    moved: Array
    layers: Array
    messages: Array


def offloads(plan: Any, codes: Array) -> bool:
    """Whether any row of ``codes`` (Knobs.memory_switch) on ``plan`` sends activations to the
    host."""
    if plan.training.offload_modules or plan.training.cpu_offloading_num_layers:
        return True
    return bool(memory_switches.ROW_BY_ROW[np.asarray(codes, dtype=np.int64)].any())


def offload_terms(
    st: Setting, stages: Stages, layers: list[Any], recompute: Array, codes: Array
) -> Offload:
    """The offloading of configurations with recompute codes ``recompute`` and memory switch
    sets ``codes`` (Knobs.memory_switch) on the plan ``st``: a row of a fine-grained set moves its
    modules' bytes (memory_switches.MODULE_INDEX), one of none the plan's own offload_modules',
    if any; else its layer-wise count of layers (memory_switches.offload_layers)."""
    count = np.maximum(stages.layer_total, 1)
    total = stages.total([x.kept(recompute) if x else None for x in layers], 0.0, 0.0)
    kept = total / count
    n = memory_switches.offload_layers(st.plan, codes)[:, None].astype(float)
    which = memory_switches.MODULE_INDEX[np.asarray(codes, dtype=np.int64)]
    fine = (which > 0) | bool(st.plan.training.offload_modules)
    if not fine.any():
        return Offload(total, kept, kept, n, np.ones_like(n))
    moved = (
        stages.total([x.offload(recompute, which) if x else None for x in layers], 0.0, 0.0) / count
    )
    groups = stages.total([x.groups(which) if x else None for x in layers], 0.0, 0.0) / count
    f = fine[:, None]
    return Offload(
        total,
        kept,
        np.where(f, moved, kept),
        np.where(f, _EVERY_LAYER, n),
        np.where(f, groups, 1.0),
    )
