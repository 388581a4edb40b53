"""A plan: model + system + training + parallel knobs, and the resolved Config.

The cross-field rules here spell out every factor (STYLE.md "Configs"), e.g.
``tp(8) * pp(8) * dp(4) = 256 != num_gpus(512)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pydantic import Field

from .base import Spec
from .hardware import System
from .model import Model
from .parallel import Parallel, Training


class Plan(Spec):
    """What a plan file holds once presets are resolved."""

    model: Model
    system: System
    training: Training
    parallel: Parallel = Field(default_factory=Parallel)
    ignore: list[str] = Field(default_factory=list, description="check rule IDs to silence.")

    @property
    def seq_length(self) -> int:
        return self.training.seq_length or self.model.seq_length

    def with_system(self, **changes) -> "Plan":
        """A copy with system fields replaced (num_gpus, placement, ...)."""
        return self.model_copy(update={"system": self.system.model_copy(update=changes)})

    def with_training(self, **changes) -> "Plan":
        """A copy with training fields replaced (global_batch_size, seq_length, ...)."""
        return self.model_copy(update={"training": self.training.model_copy(update=changes)})

    def with_parallel(self, **changes) -> "Plan":
        """A copy with parallel knobs replaced (None frees a knob for the search)."""
        return self.model_copy(update={"parallel": self.parallel.model_copy(update=changes)})


@dataclass(frozen=True)
class Config:
    """One fully resolved parallel configuration (every knob fixed)."""

    tp: int
    pp: int
    dp: int
    vp: int
    micro_batch_size: int
    global_batch_size: int
    sequence_parallel: bool
    recompute: str
    zero_stage: int
    schedule: str

    @property
    def num_micro_batches(self) -> int:
        return self.global_batch_size // (self.dp * self.micro_batch_size)

    def as_dict(self) -> dict:
        return {**asdict(self), "num_micro_batches": self.num_micro_batches}


def knob_contradictions(tp, pp, vp, sequence_parallel, schedule) -> list[tuple[str, str]]:
    """Knobs that contradict one another, as (field, message); a knob left as None is not checked."""
    out = []
    if sequence_parallel and tp == 1:
        out.append(("parallel.sequence_parallel", "sequence_parallel needs tp > 1; set it false or raise tp"))
    if schedule == "interleaved" and vp == 1:
        out.append(("parallel.vp", "schedule interleaved needs vp > 1; set vp or use schedule 1f1b"))
    if vp is not None and vp > 1 and schedule not in (None, "interleaved"):
        out.append(("parallel.schedule", f"vp({vp}) > 1 needs schedule interleaved"))
    if pp == 1 and ((vp is not None and vp > 1) or schedule == "interleaved"):
        out.append(("parallel.vp", "interleaving (vp > 1) needs pp > 1"))
    return out


def config_problems(model: Model, system: System, cfg: Config,
                    allow_cross_node_tp: bool = True) -> list[tuple[str, str, str]]:
    """Every violated rule as (rule ID, field, message naming the factors and the fix).

    The rule IDs are those of `perfmodel check` (perfmodel/check.py).
    """
    out: list[tuple[str, str, str]] = []
    n = system.num_gpus
    if cfg.tp * cfg.pp * cfg.dp != n:
        out.append(("PM102", "parallel.dp", f"tp({cfg.tp}) * pp({cfg.pp}) * dp({cfg.dp}) = "
                    f"{cfg.tp * cfg.pp * cfg.dp} != num_gpus({n}); choose dp = num_gpus / (tp * pp)"))
    if model.num_attention_heads % cfg.tp:
        out.append(("PM103", "parallel.tp", f"num_attention_heads({model.num_attention_heads}) is not divisible "
                    f"by tp({cfg.tp}); pick tp among the divisors of {model.num_attention_heads}"))
    elif model.groups % cfg.tp and cfg.tp % model.groups:
        out.append(("PM103", "parallel.tp",
                    f"num_query_groups({model.groups}) and tp({cfg.tp}) do not divide one another"))
    if model.num_layers % (cfg.pp * cfg.vp):
        out.append(("PM104", "parallel.pp", f"num_layers({model.num_layers}) is not divisible by pp({cfg.pp}) * "
                    f"vp({cfg.vp}) = {cfg.pp * cfg.vp}; pick pp * vp dividing {model.num_layers}"))
    if cfg.global_batch_size % (cfg.dp * cfg.micro_batch_size):
        out.append(("PM105", "training.global_batch_size",
                    f"global_batch_size({cfg.global_batch_size}) is not divisible by dp({cfg.dp}) * "
                    f"micro_batch_size({cfg.micro_batch_size}) = {cfg.dp * cfg.micro_batch_size}"))
    m = cfg.global_batch_size // max(cfg.dp * cfg.micro_batch_size, 1)
    if cfg.vp > 1 and cfg.pp > 1 and m % cfg.pp:
        out.append(("PM106", "parallel.vp", f"interleaved schedule needs the micro-batch count m({m}) to be a "
                    f"multiple of pp({cfg.pp}); change global_batch_size or micro_batch_size"))
    out += [("PM107", fld, msg) for fld, msg in knob_contradictions(
        cfg.tp, cfg.pp, cfg.vp, cfg.sequence_parallel, cfg.schedule)]
    if not allow_cross_node_tp and cfg.tp > system.gpus_per_node:
        out.append(("PM201", "parallel.tp", f"tp({cfg.tp}) > gpus_per_node({system.gpus_per_node}): the TP "
                    "group would cross nodes"))
    return out
