"""Configurations as arrays: one entry per configuration, the same names as Config and the JSON.

The categorical knobs travel as integer codes (RECOMPUTE_CODES, SCHEDULE_CODES) so that the
search can hold hundreds of thousands of configurations in a few numpy columns.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost.memory import RECOMPUTE_CODES
from perfmodel.cost.pipeline import SCHEDULE_CODES
from perfmodel.engine.memory_switches import SET_CODES, SETS
from perfmodel.specs import Config

RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE_CODES.items()}
SCHEDULE_NAMES = {v: k for k, v in SCHEDULE_CODES.items()}
CP_COMM_CODES = {"p2p": 0, "a2a": 1}
CP_COMM_NAMES = {v: k for k, v in CP_COMM_CODES.items()}
DISPATCHER_CODES = {"alltoall": 0, "allgather": 1, "deepep": 2, "hybridep": 3}
DISPATCHER_NAMES = {v: k for k, v in DISPATCHER_CODES.items()}
CODES = {
    "recompute": RECOMPUTE_CODES,
    "schedule": SCHEDULE_CODES,
    "cp_comm_type": CP_COMM_CODES,
    "moe_token_dispatcher_type": DISPATCHER_CODES,
    "memory_switch": SET_CODES,
}
NAMES = {
    "recompute": RECOMPUTE_NAMES,
    "schedule": SCHEDULE_NAMES,
    "cp_comm_type": CP_COMM_NAMES,
    "moe_token_dispatcher_type": DISPATCHER_NAMES,
    "memory_switch": dict(enumerate(SETS)),
}
BOOLS = ("sequence_parallel", "moe_a2a_overlap")


@dataclass
class Knobs:
    """Arrays of configurations (the fields of Config, codes for recompute, schedule, CP's
    exchange and the MoE dispatcher)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    vp: np.ndarray
    micro_batch_size: np.ndarray
    sequence_parallel: np.ndarray
    recompute: np.ndarray
    zero_stage: np.ndarray
    schedule: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    cp_comm_type: np.ndarray
    dp_shard: np.ndarray
    first_stage_layers: np.ndarray
    last_stage_layers: np.ndarray
    moe_token_dispatcher_type: np.ndarray
    moe_a2a_overlap: np.ndarray
    memory_switch: np.ndarray

    @classmethod
    def from_configs(cls, cfgs: list[Config]) -> Knobs:
        col = {f.name: [getattr(c, f.name) for c in cfgs] for f in fields(cls)}
        for name, codes in CODES.items():
            col[name] = [codes[v] for v in col[name]]
        out = {k: np.array(v, dtype=bool if k in BOOLS else np.int64) for k, v in col.items()}
        return cls(**out)

    @classmethod
    def empty(cls) -> Knobs:
        return cls(
            **{
                f.name: np.zeros(0, dtype=bool if f.name in BOOLS else np.int64)
                for f in fields(cls)
            }
        )

    def take(self, idx: Array | slice) -> Knobs:
        return Knobs(**{name: getattr(self, name)[idx] for name in _NAMES})

    def __len__(self) -> int:
        return len(self.tp)

    def plus(self, other: Knobs) -> Knobs:
        """These configurations, then ``other``'s."""
        return Knobs.concat([self, other])

    @classmethod
    def concat(cls, parts: list[Knobs]) -> Knobs:
        """The configurations of ``parts``, in order."""
        return cls(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in _NAMES})

    def config(self, i: int, global_batch_size: int) -> Config:
        return self.take(slice(i, i + 1)).columns().config(0, global_batch_size)

    def columns(self) -> Columns:
        """The knobs as Python lists, to make many rows' Configs from."""
        return Columns({name: getattr(self, name).tolist() for name in _NAMES})


# the fields' names, in order (dataclasses.fields builds them anew at every call)
_NAMES = tuple(f.name for f in fields(Knobs))


@dataclass(frozen=True)
class Columns:
    """Knobs' columns as Python lists (Knobs.columns): a row's Config without numpy's per-element
    indexing, which costs more than the Config."""

    lists: dict[str, list[Any]]

    def config(self, i: int, global_batch_size: int) -> Config:
        out: dict[str, Any] = {
            k: NAMES[k][int(v[i])] if k in NAMES else bool(v[i]) if k in BOOLS else int(v[i])
            for k, v in self.lists.items()
        }
        return Config(global_batch_size=global_batch_size, **out)
