"""Shared pydantic plumbing: frozen, extra="forbid" models and unit-aware fields."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..units import parse_quantity


def _quantity(dimension: str):
    def parse(v: object) -> float:
        return parse_quantity(v, dimension)

    return BeforeValidator(parse)


# Strictly positive quantities, converted to SI once on load (STYLE.md "Names").
Bytes = Annotated[float, _quantity("bytes"), Field(gt=0)]
BytesPerSecond = Annotated[float, _quantity("bytes_per_s"), Field(gt=0)]
FlopsPerSecond = Annotated[float, _quantity("flops_per_s"), Field(gt=0)]
Seconds = Annotated[float, _quantity("seconds"), Field(ge=0)]
Fraction = Annotated[float, Field(gt=0, le=1)]


class Spec(BaseModel):
    """Base of every spec: immutable, unknown keys rejected, aliases accepted."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
