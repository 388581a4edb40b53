"""Pure formulas: collectives, roofline, FLOPs, memory, pipeline, layer ops.

Every formula takes numbers and returns numbers: a float for one configuration, or a numpy array
with one entry per configuration (STYLE.md "One formula, one place"). ``Num`` is that type. No
printing, no files, no click or rich.
"""

from typing import Any, TypeAlias

import numpy.typing as npt

Array: TypeAlias = npt.NDArray[Any]
Num: TypeAlias = float | Array  # one value, or one per configuration

__all__ = ["Array", "Num"]
