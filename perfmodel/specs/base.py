"""Shared pydantic plumbing: frozen, extra="forbid" models and unit-aware fields."""

from __future__ import annotations

import difflib
import typing
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from ..units import parse_quantity


def _quantity(dimension: str) -> BeforeValidator:
    def parse(v: object) -> float:
        return parse_quantity(v, dimension)

    return BeforeValidator(parse)


# Positive quantities, converted to SI once on load (STYLE.md "Names"), in ranges where every
# formula stays finite: at least a byte, a byte per second and a FLOP per second, at most a day of
# latency. Bounds on counts a user gives: beyond any machine (16.7M GPUs) or batch (10^12
# sequences), small enough that products of counts and sizes stay exact in int64.
MAX_GPUS = 2**24
MAX_BATCH = 2**40
Bytes = Annotated[float, _quantity("bytes"), Field(ge=1, le=1e18)]
BytesPerSecond = Annotated[float, _quantity("bytes_per_s"), Field(ge=1, le=1e18)]
FlopsPerSecond = Annotated[float, _quantity("flops_per_s"), Field(ge=1, le=1e21)]
Seconds = Annotated[float, _quantity("seconds"), Field(ge=0, le=86400)]
Fraction = Annotated[float, Field(gt=0, le=1)]
# a count as people write it: 300B, 15.6T tokens (units.py "count")
Count = Annotated[float, _quantity("count"), Field(gt=0, le=1e18)]


class Spec(BaseModel):
    """Base of every spec: immutable, unknown keys rejected, aliases accepted, and no boolean taken
    for a number (pydantic's lax mode reads true as 1; a plan's `tp: true` is a mistake, not a 1).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, fld in cls.model_fields.items():
            if not _numeric(fld.annotation):
                continue
            keys = [name] + [
                c for c in getattr(fld.validation_alias, "choices", []) if isinstance(c, str)
            ]
            for key in keys:
                if isinstance(data.get(key), bool):
                    raise ValueError(f"{key}: expected a number, got {data[key]!r} (a boolean)")
        return data


def _numeric(annotation: Any) -> bool:
    """True for int, float and their optional and annotated forms (not lists or dicts of them)."""
    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    if origin in (list, dict, tuple, typing.Literal) or origin is None:
        return False
    return any(_numeric(a) for a in typing.get_args(annotation) if a is not type(None))


def _known_keys(cls: type[BaseModel]) -> list[str]:
    keys = []
    for name, fld in cls.model_fields.items():
        keys.append(name)
        alias = fld.validation_alias
        if alias is not None and hasattr(alias, "choices"):
            keys.extend(c for c in alias.choices if isinstance(c, str))
    return keys


def _names_of_field(cls: type[BaseModel], key: str) -> list[str]:
    """Every name of the field ``key`` names (the field's and its aliases'), or [] when none."""
    for name, fld in cls.model_fields.items():
        alias = fld.validation_alias
        names = [name, *(c for c in getattr(alias, "choices", ()) if isinstance(c, str))]
        if key in names:
            return list(dict.fromkeys(names))
    return []


def format_validation_error(
    e: ValidationError, label: str, cls: type[BaseModel] | None = None
) -> str:
    """pydantic errors -> one line: where, what, and the fix (did-you-mean for unknown keys)."""
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"])
        if err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            owner = _owner(cls, err["loc"][:-1]) if cls else None
            names = _names_of_field(owner, key) if owner else []
            if names:
                # pydantic took the field under its other name and left this one over
                others = " and ".join(repr(n) for n in names if n != key)
                parts.append(f"{loc!r} and {others} name one field; give one of them")
                continue
            close = (
                difflib.get_close_matches(key, _known_keys(owner), n=1, cutoff=0.5) if owner else []
            )
            hint = f"; did you mean {close[0]!r}?" if close else ""
            parts.append(f"unknown key {loc!r}{hint}")
        elif err["type"] == "missing":
            parts.append(f"{loc}: required field is missing")
        else:
            got = err.get("input")
            text = repr(got)
            text = text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
            shown = "" if isinstance(got, (dict, list)) else f" (got {text})"
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}{shown}" if loc else f"{msg}")
    return f"{label}: " + "; ".join(parts)


def _owner(cls: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class at a location path, for key suggestions."""
    current: type[BaseModel] | None = cls
    for part in loc:
        fld = current.model_fields.get(str(part)) if current else None
        if fld is None:
            return None
        ann = fld.annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        current = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
    return current
