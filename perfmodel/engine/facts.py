"""What a validity rule reads and is: the facts of a configuration (numpy arrays over
configurations, or scalars) and the Rule record, with the small array helpers the rules share
(perfmodel/engine/rule_table.py holds the rules themselves)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.specs.framework import PROFILES


@dataclass(frozen=True)
class Facts:
    """What a rule reads: the model's and the job's numbers, and the knobs (arrays or scalars)."""

    heads: int
    groups: int
    layers: int
    num_gpus: int
    gpus_per_node: int  # GPUs on one NVLink domain (System.domain)
    global_batch_size: int
    seq_length: int = 1
    experts: int = 0  # routed experts (0: dense model)
    moe_ffn: int = 0
    fused_attention: bool = True
    cp_comm: str = "p2p"
    # the knobs: an array over configurations, a scalar, or None where not known yet (Any: all
    # three)
    tp: Any = 1
    pp: Any = 1
    dp: Any = 1
    cp: Any = 1
    ep: Any = 1
    etp: Any = 1
    vp: Any = 1
    micro_batch_size: Any = 1
    sequence_parallel: Any = False
    schedule: Any = None  # a name, or None when not known
    # 0: the split is chosen (evenly, or balanced when pp does not divide L)
    first_stage_layers: Any = 0
    last_stage_layers: Any = 0
    zero_stage: Any = 0
    dp_shard: Any = None  # HSDP's shard group (None: dp, full sharding)
    dp_replicate: Any = None  # HSDP's replicas where the plan gives them (dp = them x dp_shard)
    framework: str = "megatron-core"
    a2a_overlap: bool = False  # Megatron-Core's EP all-to-all overlap (Config.moe_a2a_overlap)
    dispatcher: str = "alltoall"  # Config.moe_token_dispatcher_type
    recompute: str = "none"  # the configuration's recompute, where one is known

    @property
    def profile(self) -> dict[str, Any]:
        return PROFILES[self.framework]

    @property
    def m(self) -> Array:
        return as_array(
            self.global_batch_size // np.maximum(as_array(self.dp) * self.micro_batch_size, 1)
        )

    @property
    def stage_ranks(self) -> Array:
        """The tp x cp x dp ranks of one pipeline stage, which EP x ETP fold into."""
        return as_array(as_array(self.tp) * self.cp * self.dp)


@dataclass(frozen=True)
class Rule:
    """One validity rule: the `check` rule ID it reports under, the field to fix, what it reads, the
    vectorized test of a violation, the message, and the search stage that applies it as a mask
    (None: the search never builds a violating configuration)."""

    id: str
    field: str | Callable[[Facts], str]  # the field to fix (a function: it depends on the facts)
    reads: tuple[str, ...]
    broken: Callable[[Facts], Any]
    message: Callable[[Facts], str]
    search_stage: str | None = None
    search_reason: str = ""

    def field_of(self, f: Facts) -> str:
        return self.field if isinstance(self.field, str) else self.field(f)


def as_array(x: Any) -> Array:
    return np.asarray(x)


def interleaved(f: Facts) -> Array:
    """The looped schedules, v chunks a rank: interleaved 1F1B and interleaved zero-bubble."""
    return as_array(np.isin(as_array(f.schedule), ("interleaved", "interleaved-zb")))


def dualpipe(f: Facts) -> Array:
    return as_array(f.schedule == "dualpipe")


V_SHAPED_NAMES = ("zbv", "v-half", "v-min", "dualpipev")


def v_shaped(f: Facts) -> Array:
    """The schedules that run two chunks a rank in a V (Qi et al. 2024; deepseek-ai/DualPipe's
    DualPipeV)."""
    return as_array(np.isin(as_array(f.schedule), V_SHAPED_NAMES))


def dualpipev(f: Facts) -> Array:
    return as_array(f.schedule == "dualpipev")


def vp_above_1(f: Facts) -> Array:
    return as_array(False) if f.vp is None else as_array(as_array(f.vp) > 1)


def given(x: Any) -> Array:
    return as_array(as_array(x) > 0)


def middle_stages(f: Facts) -> Array:
    """The stages besides a given first and last one, which Megatron-Core splits the rest over."""
    return as_array(as_array(f.pp) - given(f.first_stage_layers) - given(f.last_stage_layers))


def middle_layers(f: Facts) -> Array:
    return as_array(f.layers - as_array(f.first_stage_layers) - f.last_stage_layers)


def product_text(f: Facts) -> str:
    cp = f" * cp({f.cp})" if np.any(as_array(f.cp) > 1) else ""
    return f"tp({f.tp}) * pp({f.pp}) * dp({f.dp}){cp} = {f.tp * f.pp * f.dp * f.cp}"
