"""What people type for a preset, and what it means: aliases, suggestions ranked closest first, and
``base:`` (a mapping that extends a preset with a few keys of its own).

An alias resolves to exactly one preset and every output says so (Plan.read_as). A name that is
neither a preset nor an alias is an error whose suggestions put the preset the name starts, or is
part of, first (``h100`` -> h100-sxm), then the closest spellings (difflib's ratio).
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel

from perfmodel.errors import PerfModelError
from perfmodel.specs.framework import FRAMEWORK_ALIASES

# What people type -> the bundled preset it names. Only names that mean one preset: "a100" is the
# 80 GB part (NVIDIA has sold only it since 2021; say a100-40gb for the other), "v100" the 32 GB.
ALIASES: dict[str, dict[str, str]] = {
    "gpus": {
        "h100": "h100-sxm",
        "h100-sxm5": "h100-sxm",
        "h100-80gb": "h100-sxm",
        "h100-sxm5-80gb": "h100-sxm",
        "h100-96gb": "h100-sxm-96gb",
        "h100-sxm5-96gb": "h100-sxm-96gb",
        "h200-sxm": "h200",
        "h200-141gb": "h200",
        "h800-sxm5": "h800",
        "a100": "a100-80gb",
        "a100-sxm4-80gb": "a100-80gb",
        "a100-sxm4-40gb": "a100-40gb",
        "b200-sxm": "b200",
        "hgx-b200": "b200",
        "dgx-b200": "b200",
        "b300-sxm": "b300",
        "gb200-nvl72": "gb200",
        "gb300-nvl72": "gb300",
        "mi300": "mi300x",
        "v100": "v100-32gb",
        "v100-sxm2-32gb": "v100-32gb",
        "v100-sxm2-16gb": "v100-16gb",
    },
    "links": {
        "ndr": "ib-ndr",
        "infiniband-ndr": "ib-ndr",
        "hdr": "ib-hdr",
        "infiniband-hdr": "ib-hdr",
        "nvl72": "nvlink5-nvl72",
        "c2c": "nvlink-c2c",
        "pcie5": "pcie-gen5",
        "pcie4": "pcie-gen4",
    },
    "models": {
        "gpt3": "gpt3-175b",
        "gpt-3": "gpt3-175b",
        "gpt-3-175b": "gpt3-175b",
        "deepseekv3": "deepseek-v3",
        "dsv3": "deepseek-v3",
        "qwen3-235b": "qwen3-235b-a22b",
        "qwen3-30b": "qwen3-30b-a3b",
        "nemotron-340b": "nemotron-4-340b",
        "nemotron4-340b": "nemotron-4-340b",
        "mt-nlg": "mt-nlg-530b",
        "megatron-turing-nlg-530b": "mt-nlg-530b",
    },
    "plans": {},
}
ALIASES["frameworks"] = dict(FRAMEWORK_ALIASES)


def norm(name: str) -> str:
    """A preset name as the tables key it: lower case, '-' for '_' and spaces, no '.yaml', no
    Hugging Face organisation (meta-llama/Llama-3-8B), 'llama-3' as 'llama3'."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = key.removesuffix(".yaml").rsplit("/", 1)[-1]
    return re.sub(r"^llama-(\d)", r"llama\1", key)


def canonical(kind: str, name: str, names: list[str]) -> tuple[str | None, str | None]:
    """The preset ``name`` names among ``names`` (None when none), and a note when an alias was
    resolved ("gpu h100 read as h100-sxm")."""
    key = norm(name)
    if key in names:
        plain = name.strip().lower().replace("_", "-").replace(" ", "-").removesuffix(".yaml")
        return key, None if plain == key else f"{name!r} read as the {key} preset"
    target = ALIASES.get(kind, {}).get(key)
    if target is not None and target in names:
        return target, f"{name!r} read as the {target} preset (an alias)"
    return None, None


def suggest(name: str, names: list[str], kind: str = "", n: int = 4) -> list[str]:
    """Presets close to ``name``, closest first: the one an alias names, then those the name starts
    or is part of (shortest first), then difflib's closest spellings of the rest."""
    key = norm(name)
    ranked: list[str] = []
    target = ALIASES.get(kind, {}).get(key)
    if target in names:
        ranked.append(target)
    ranked += sorted(
        (m for m in names if key and key in m), key=lambda m: (not m.startswith(key), len(m))
    )
    pool = list(names) + list(ALIASES.get(kind, {}))
    for m in difflib.get_close_matches(key, pool, n=2 * n, cutoff=0.5):
        ranked.append(ALIASES.get(kind, {}).get(m, m))
    out: list[str] = []
    for m in ranked:
        if m in names and m not in out:
            out.append(m)
    return out[:n]


def field_names(cls: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each alias key (seq_len, tensor_model_parallel_size, ...) under its field's
    name, so a base's key and an override's alias of it cannot both stand."""
    by_alias: dict[str, str] = {}
    for field, info in cls.model_fields.items():
        for choice in getattr(info.validation_alias, "choices", []):
            if isinstance(choice, str):
                by_alias[choice] = field
    return {by_alias.get(str(k), k): v for k, v in data.items()}


def extend(
    base: dict[str, Any], overrides: dict[str, Any], cls: type[BaseModel] | None
) -> dict[str, Any]:
    """A base mapping with ``overrides`` on top, key by key (both under field names)."""
    if cls is None:
        return {**base, **overrides}
    return {**field_names(cls, base), **field_names(cls, overrides)}


def base_name(value: Any, label: str) -> str:
    """The preset a ``base:`` key names; anything but a name is an error naming the field."""
    if not isinstance(value, str) or not value.strip():
        raise PerfModelError(
            f"{label}.base: give the name of the preset to extend (e.g. base: deepseek-v3),"
            f" got {value!r}"
        )
    return value


def overridden(base: dict[str, Any], overrides: dict[str, Any]) -> str:
    """'mtp_num_layers 1, name ...': the keys an extension sets, for the note every output
    prints."""
    parts = []
    for k, v in overrides.items():
        if k in ("name", "source", "description"):
            continue
        text = str(v) if not isinstance(v, dict) else "{...}"
        text = text if len(text) <= 24 else text[:21] + "..."
        parts.append(f"{k} {text}")
    return ", ".join(parts) or "nothing changed"
