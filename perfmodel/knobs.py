"""Configurations as arrays: one entry per configuration, the same names as Config and the JSON.

The categorical knobs travel as integer codes (RECOMPUTE_CODES, SCHEDULE_CODES) so that the
search can hold hundreds of thousands of configurations in a few numpy columns.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .cost.memory import RECOMPUTE_CODES
from .cost.pipeline import SCHEDULE_CODES
from .specs import Config

RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE_CODES.items()}
SCHEDULE_NAMES = {v: k for k, v in SCHEDULE_CODES.items()}


@dataclass
class Knobs:
    """Arrays of configurations (the fields of Config, codes for recompute and schedule)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    vp: np.ndarray
    micro_batch_size: np.ndarray
    sequence_parallel: np.ndarray
    recompute: np.ndarray
    zero_stage: np.ndarray
    schedule: np.ndarray

    @classmethod
    def from_configs(cls, cfgs: list[Config]) -> "Knobs":
        col = {f.name: [getattr(c, f.name) for c in cfgs] for f in fields(cls)}
        col["recompute"] = [RECOMPUTE_CODES[r] for r in col["recompute"]]
        col["schedule"] = [SCHEDULE_CODES[s] for s in col["schedule"]]
        out = {k: np.array(v, dtype=bool if k == "sequence_parallel" else np.int64) for k, v in col.items()}
        return cls(**out)

    @classmethod
    def empty(cls) -> "Knobs":
        return cls(**{f.name: np.zeros(0, dtype=bool if f.name == "sequence_parallel" else np.int64)
                      for f in fields(cls)})

    def take(self, idx) -> "Knobs":
        return Knobs(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def __len__(self) -> int:
        return len(self.tp)

    def config(self, i: int, global_batch_size: int) -> Config:
        return Config(int(self.tp[i]), int(self.pp[i]), int(self.dp[i]), int(self.vp[i]),
                      int(self.micro_batch_size[i]), global_batch_size, bool(self.sequence_parallel[i]),
                      RECOMPUTE_NAMES[int(self.recompute[i])], int(self.zero_stage[i]),
                      SCHEDULE_NAMES[int(self.schedule[i])])
