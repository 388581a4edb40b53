"""The files behind presets: a user's text and YAML files read with one-line errors, and the
bundled presets in ``configs/`` by kind and name (presets.py builds the specs from them)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from perfmodel.errors import PerfModelError
from perfmodel.inputs import names, yaml12
from perfmodel.specs.base import format_validation_error


def _configs_root():
    """configs/ of the installed package, or of the source tree when run from a checkout."""
    try:
        root = resources.files("perfmodel.configs")
        if root.joinpath("hardware").is_dir():
            return root
    except ModuleNotFoundError:
        pass
    return Path(__file__).resolve().parents[2] / "configs"


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _read_text(path, label: str) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a UTF-8 byte-order mark is accepted
    except FileNotFoundError:
        raise PerfModelError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise PerfModelError(f"{label}: is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PerfModelError(f"{label}: cannot read ({e.__class__.__name__}: {e})") from None


def read_text(path: str, label: str) -> str:
    """A user's text file (a launch script, an argument file), every failure one line."""
    return _read_text(Path(path), label)


def parse_yaml(text: str, label: str, omegaconf: bool = False, bundled: bool = False) -> Any:
    """YAML text -> Python data under YAML 1.2's core schema (yaml12.py), or YAML 1.1 as OmegaConf
    reads it (``omegaconf``: NeMo recipes); a syntax error names the line and column, and duplicate
    keys, runaway aliases and deep nesting are errors."""
    try:
        return yaml12.load(text, omegaconf, bundled)
    except yaml12.YamlError as e:
        raise PerfModelError(f"{label}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise PerfModelError(f"{label}: YAML syntax error{where}: {problem}") from None


def _load_yaml(path, label: str) -> Any:
    return parse_yaml(_read_text(path, label), label)


def _load_bundled(path, label: str) -> Any:
    """A file of configs/ (the same rules as a user's file, parsed by libyaml where present)."""
    return parse_yaml(_read_text(path, label), label, bundled=True)


def _file_kind(kind: str) -> bool:
    """'gpus' and 'links' live in one file each (configs/hardware/); the other kinds, a file a
    preset in configs/KIND/."""
    return kind in ("gpus", "links")


@cache
def _hardware(kind: str) -> dict[str, dict]:
    """name -> raw mapping of configs/hardware/KIND.yaml ('gpus' with each preset's physical
    ceilings from the file beside it)."""
    root = _configs_root()
    data = _load_bundled(root.joinpath("hardware", f"{kind}.yaml"), f"configs/hardware/{kind}.yaml")
    if kind == "gpus":
        c = root.joinpath("hardware", "ceilings.yaml")
        ceilings = _load_bundled(c, "configs/hardware/ceilings.yaml")
        data = {k: {**v, "ceilings": ceilings[k]} if k in ceilings else v for k, v in data.items()}
    return {_norm(k): v for k, v in data.items()}


@cache
def _entries(kind: str) -> dict[str, Any]:
    """name -> file of a folder kind ('models', 'plans', 'validation', 'memory_runs'), unread:
    a lookup parses only the file it needs (every start used to parse all 40)."""
    folder = _configs_root().joinpath(kind)
    files = sorted(folder.iterdir(), key=lambda p: p.name)
    return {_norm(e.name[:-5]): e for e in files if e.name.endswith(".yaml")}


@cache
def _preset(kind: str, key: str) -> dict:
    """The raw mapping of one preset of a folder kind, parsed on first use."""
    entry = _entries(kind)[key]
    return _load_bundled(entry, f"configs/{kind}/{entry.name}")


def _bundled(kind: str) -> dict[str, dict]:
    """name -> raw mapping for 'gpus', 'links', 'models', 'plans', 'validation', 'memory_runs'."""
    if _file_kind(kind):
        return _hardware(kind)
    return {key: _preset(kind, key) for key in _entries(kind)}


def preset_names(kind: str) -> list[str]:
    return sorted(_hardware(kind) if _file_kind(kind) else _entries(kind))


SINGULAR = {"gpus": "GPU", "links": "link", "models": "model", "plans": "plan"}


def _lookup(kind: str, name: str, notes: list[str] | None = None) -> dict:
    """The raw mapping of a bundled preset by its name or an alias (names.py; the alias is noted in
    ``notes``); an unknown name suggests the closest presets, closest first."""
    known = preset_names(kind)
    key, note = names.canonical(kind, name, known)
    if key is not None:
        if note is not None and notes is not None:
            notes.append(f"{SINGULAR[kind]} {note}")
        return _hardware(kind)[key] if _file_kind(kind) else _preset(kind, key)
    close = names.suggest(name, known, kind)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise PerfModelError(
        f"unknown {SINGULAR[kind]} preset {name!r}{hint} (see `perfmodel presets`)"
    )


def _build(cls: type[BaseModel], data: Any, label: str):
    """``data`` validated as ``cls``, every failure one line naming ``label`` and the field."""
    if not isinstance(data, dict):
        raise PerfModelError(
            f"{label}: expected a mapping of keys to values, got {type(data).__name__}"
        )
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise PerfModelError(format_validation_error(e, label, cls)) from None


@cache
def memory_peaks() -> dict[str, dict]:
    """Measured memory peaks of published runs by record id (configs/memory_peaks.yaml, written by
    benchmarks/transcribe_memory_runs.py): peak_bytes, the quantity measured (reserved,
    allocated, device, unstated), how and the source."""
    raw = _load_bundled(_configs_root().joinpath("memory_peaks.yaml"), "configs/memory_peaks.yaml")
    return dict(raw or {})


@cache
def error_bands() -> dict:
    """The model's error per validation table and what its runs were (configs/error_bands.yaml)."""
    return _load_bundled(_configs_root().joinpath("error_bands.yaml"), "configs/error_bands.yaml")


@cache
def calibration_bands() -> dict:
    """A one-run calibration's error on a published stack's other runs, by kind of change
    (configs/calibration_bands.yaml, benchmarks/calibration_transfer.py --bands)."""
    path = _configs_root().joinpath("calibration_bands.yaml")
    return _load_bundled(path, "configs/calibration_bands.yaml")
