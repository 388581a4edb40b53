"""The plan reference (docs/reference.md), generated from the pydantic specs: every key of every
section with its type, default, unit and meaning, so the reference cannot drift from the code
(`python benchmarks/refresh_docs.py` writes it; tests/test_docs.py fails when it is stale)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

# (heading, how a plan reaches it, the spec) in the order a plan file is written
SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("Top level", "the plan file itself", "perfmodel.specs.plan:Plan"),
    (
        "model",
        "`model:` a preset name, a file, a config.json, or this mapping",
        "perfmodel.specs.model:Model",
    ),
    ("system", "`system:`", "perfmodel.specs.hardware:System"),
    ("system.gpu", "`system.gpu:` a preset name or this mapping", "perfmodel.specs.hardware:GPU"),
    (
        "links",
        "`system.intra_node_link`, `inter_node_link`, `host_link`: a preset name or this mapping",
        "perfmodel.specs.hardware:Link",
    ),
    ("training", "`training:`", "perfmodel.specs.training:Training"),
    ("parallel", "`parallel:` (a knob left out is searched)", "perfmodel.specs.parallel:Parallel"),
    ("run", "`run:` (used with `training.tokens`)", "perfmodel.specs.run:Run"),
)

# the SI unit each quantity parser converts to (perfmodel/units.py)
UNITS = {
    "bytes": "bytes (`80 GB`, `80GiB`)",
    "bytes_per_s": "bytes/s (`2039 GB/s`, `200 Gb/s`)",
    "flops_per_s": "FLOP/s (`312 TFLOPS`)",
    "seconds": "s (`2 us`, `10 min`)",
    "count": "count (`300B`, `15.6T`)",
}


def spec(path: str) -> type[BaseModel]:
    module, name = path.split(":")
    import importlib

    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, BaseModel)
    return cls


def _type_text(annotation: Any) -> str:
    """A type as a plan writer reads it: `int`, `one of a, b`, `list of str`, `... or none`."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [a for a in args if a is not type(None)]
        text = " or ".join(_type_text(a) for a in parts)
        return text + (" or none" if len(parts) < len(args) else "")
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin in (list, tuple, set):
        inner = [a for a in args if a is not Ellipsis]
        return "list of " + (_type_text(inner[0]) if inner else "values")
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "mapping (below)"
        return {"bool": "bool", "int": "int", "float": "float", "str": "text"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def _unit(field: Any) -> str:
    """The unit a field's quantity parser converts to, read off its validator's closure."""
    for meta in field.metadata:
        func = getattr(meta, "func", None)
        cells = getattr(func, "__closure__", None) or ()
        for cell in cells:
            if isinstance(cell.cell_contents, str) and cell.cell_contents in UNITS:
                return UNITS[cell.cell_contents]
    return ""


def _default(name: str, field: Any, profile_flags: frozenset[str]) -> str:
    if name in profile_flags:
        return "the framework profile's"
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return "empty" if name in ("ignore",) else "its section's defaults"
    value = field.default
    if value is None or value is PydanticUndefined:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"`{value}`"


def _aliases(name: str, field: Any) -> str:
    choices = getattr(field.validation_alias, "choices", None) or []
    names = [c for c in choices if isinstance(c, str) and c != name]
    if isinstance(field.alias, str) and field.alias != name:
        names.append(field.alias)
    return ", ".join(f"`{n}`" for n in dict.fromkeys(names))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows(cls: type[BaseModel]) -> list[tuple[str, str, str, str, str, str]]:
    """(key, also read as, type, default, unit, meaning) for every field of one spec."""
    from perfmodel.specs.flags import FLAGS

    flags = frozenset((*FLAGS, "grad_accum_fp32")) if cls.__name__ == "Training" else frozenset()
    out = []
    for name, field in cls.model_fields.items():
        out.append(
            (
                f"`{name}`",
                _aliases(name, field),
                _cell(_type_text(field.annotation)),
                _cell(_default(name, field, flags)),
                _unit(field),
                _cell(field.description or ""),
            )
        )
    return out


def markdown() -> str:
    """docs/reference.md as the specs describe the plan today."""
    out = [
        "# Plan reference",
        "",
        "Every key a plan file may hold, section by section, generated from the pydantic specs by",
        "`python benchmarks/refresh_docs.py` (do not edit by hand; `tests/test_docs.py` fails when",
        "this page and the specs disagree). Quantities take units (`80 GB`, `2039 GB/s`,",
        "`312 TFLOPS`, `2 us`) and are converted to SI once on load; GB = 1e9 bytes, GiB = 2^30.",
        "An unknown key is an error with a suggestion. `base: NAME` in the model, system or plan",
        "mapping starts from a bundled preset where the inputs support it (docs/inputs.md).",
        "",
    ]
    for heading, reached, path in SECTIONS:
        cls = spec(path)
        out += [f"## {heading}", "", f"Written as {reached}. {_cell(cls.__doc__ or '')}", ""]
        out += ["| key | also read as | type | default | unit | meaning and source |"]
        out += ["|---|---|---|---|---|---|"]
        out += ["| " + " | ".join(r) + " |" for r in rows(cls)]
        out.append("")
    return "\n".join(out)
