"""Preset names and the files behind them: YAML presets, plan mappings, Hugging Face config.json.

Bundled presets live in ``configs/`` (installed as ``perfmodel.configs``, so
they resolve from a wheel in any directory). Every failure becomes a
PerfModelError with one line naming the file, the field and the fix.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from perfmodel.errors import PerfModelError
from perfmodel.inputs import hf, names
from perfmodel.inputs.preset_files import (
    SINGULAR,
    _build,
    _bundled,
    _load_yaml,
    _lookup,
    _read_text,
    preset_names,
)
from perfmodel.inputs.preset_files import calibration_bands as calibration_bands
from perfmodel.inputs.preset_files import error_bands as error_bands
from perfmodel.inputs.preset_files import memory_peaks as memory_peaks
from perfmodel.inputs.preset_files import parse_yaml as parse_yaml
from perfmodel.inputs.preset_files import read_text as read_text
from perfmodel.inputs.usual_links import RACK_DOMAIN as RACK_DOMAIN
from perfmodel.inputs.usual_links import (
    _usual_links,
    default_links,
    host_dram_of,
    host_link_of,
    host_memory_of,
)
from perfmodel.specs import GPU, Link, Model, Parallel, Plan, System, Training
from perfmodel.specs.base import format_validation_error
from perfmodel.specs.framework import FRAMEWORK_ALIASES
from perfmodel.specs.run import Run


def _extended(
    kind: str,
    data: dict,
    cls: type[BaseModel] | None,
    label: str,
    notes: list[str] | None,
    depth: int = 0,
) -> dict:
    """A mapping with ``base: NAME`` as the named preset's mapping with the other keys on top (a
    base may itself extend another, up to 8 deep); without ``base`` the mapping as it is."""
    if "base" not in data:
        return data
    if depth >= 8:
        raise PerfModelError(f"{label}.base: presets extend each other more than 8 deep")
    rest = {k: v for k, v in data.items() if k != "base"}
    name = names.base_name(data["base"], label)
    try:
        raw = _lookup(kind, name, notes)
    except PerfModelError as e:
        raise PerfModelError(f"{label}.base: {e}") from None
    if not isinstance(raw, dict):
        raise PerfModelError(f"{label}.base: preset {name} is not a mapping")
    raw = _extended(kind, raw, cls, f"{SINGULAR[kind]} preset {name}", notes, depth + 1)
    if notes is not None:
        notes.append(
            f"{label.rsplit(': ', 1)[-1]}: the {name} preset with {names.overridden(raw, rest)}"
        )
    return names.extend(raw, rest, cls)


# ---------------------------------------------------------------- public resolvers


def _hardware(kind: str, cls, value, label: str, notes: list[str] | None = None):
    if isinstance(value, dict):
        return _build(cls, _extended(kind, value, cls, label, notes), label)
    if not isinstance(value, str):
        raise PerfModelError(
            f"{label}: give a {cls.__name__} preset name or a mapping, got {value!r}"
        )
    return _build(cls, _lookup(kind, value, notes), f"{cls.__name__} preset {value}")


def gpu(name_or_mapping: str | dict, label: str = "gpu", notes: list[str] | None = None) -> GPU:
    """A GPU from a preset name (or alias: h100), an inline mapping, or one with ``base:``."""
    return _hardware("gpus", GPU, name_or_mapping, label, notes)


def link(name_or_mapping: str | dict, label: str = "link", notes: list[str] | None = None) -> Link:
    """A link from a preset name (or alias: ndr), an inline mapping, or one with ``base:``."""
    return _hardware("links", Link, name_or_mapping, label, notes)


def model(
    value: str | dict,
    label: str = "model",
    base_dir: Path | None = None,
    notes: list[str] | None = None,
) -> Model:
    """A model from a preset name, a YAML file, a Hugging Face config.json, an inline mapping, or a
    mapping with ``base: PRESET`` and the keys it changes."""
    if isinstance(value, dict):
        return _build(Model, _extended("models", value, Model, label, notes), label)
    if not isinstance(value, str):
        raise PerfModelError(
            f"{label}: give a model preset name, a file, or a mapping; got {value!r}"
        )
    path = Path(value)
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if path.suffix in (".json", ".yaml", ".yml") and path.is_file():
        if path.suffix == ".json":
            return model_from_hf_config(
                _parse_json(_read_text(path, str(path)), str(path)), str(path)
            )
        return _build(Model, _load_yaml(path, str(path)), str(path))
    if path.suffix in (".json", ".yaml", ".yml"):
        raise PerfModelError(f"{label}: no such file {str(path)!r}")
    return _build(Model, _lookup("models", value, notes), f"model preset {value}")


def _parse_json(text: str, label: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise PerfModelError(
            f"{label}: JSON syntax error at line {e.lineno}, column {e.colno}: {e.msg}"
        ) from None


def model_from_hf_config(cfg: Any, label: str = "config.json") -> Model:
    """A Model from a Hugging Face config.json (perfmodel/inputs/hf.py maps the keys; errors name
    them)."""
    data = hf.model_fields(cfg, label)
    try:
        return Model.model_validate(data)
    except ValidationError as e:
        message = format_validation_error(e, label, Model)
        for field, key in hf.KEY_OF_FIELD.items():  # speak the config.json's language
            message = message.replace(field, key)
        raise PerfModelError(message) from None


def _system(data: Any, label: str, notes: list[str] | None = None) -> System:
    if not isinstance(data, dict):
        raise PerfModelError(
            f"{label}: expected a mapping with gpu, num_gpus, gpus_per_node, "
            "intra_node_link, inter_node_link"
        )
    if "base" in data:  # base: a bundled plan, whose system this one extends
        name = names.base_name(data["base"], label)
        try:
            raw = _lookup("plans", name).get("system")
        except PerfModelError as e:
            raise PerfModelError(f"{label}.base: {e}") from None
        if not isinstance(raw, dict):
            raise PerfModelError(f"{label}.base: plan {name} has no system mapping to extend")
        rest = {k: v for k, v in data.items() if k != "base"}
        if notes is not None:
            notes.append(f"system: plan {name}'s system with {names.overridden(raw, rest)}")
        data = names.extend(raw, rest, System)
    data = dict(data)
    missing = [k for k in ("intra_node_link", "inter_node_link") if k not in data]
    gpu_name = data.get("gpu")
    if isinstance(gpu_name, dict):  # gpu: {base: h100, ...} ships with the base's links
        gpu_name = gpu_name.get("base")
    if missing and isinstance(gpu_name, str) and "links_from" not in data:
        usual = _usual_links(gpu_name)
        if usual is not None:
            data.update({k: usual[k] for k in missing})
            data["links_from"] = (
                f"{gpu_name}'s usual {data['intra_node_link']} on NVLink and"
                f" {data['inter_node_link']} across"
            )
    if "host_link" not in data and isinstance(gpu_name, str):
        data["host_link"] = host_link_of(gpu_name)
    if "host_memory_bandwidth_bytes_per_s" not in data and isinstance(gpu_name, str):
        data["host_memory_bandwidth_bytes_per_s"] = host_memory_of(gpu_name)
    if "host_memory_bytes" not in data and isinstance(gpu_name, str):
        data["host_memory_bytes"] = host_dram_of(gpu_name)
    for key, resolver in (
        ("gpu", gpu),
        ("intra_node_link", link),
        ("inter_node_link", link),
        ("host_link", link),
    ):
        if key in data:
            data[key] = resolver(data[key], f"{label}.{key}", notes)
    return _build(System, data, label)


def quick_plan(
    model_name: str, gpu_name: str, gpus: int | None, gbs: int | None, parallel: dict[str, Any]
) -> Plan:
    """`memory --model NAME`: a plan from a model and a GPU, with the usual links, on tp x pp x dp
    GPUs (or ``gpus``) and a global batch of dp x mbs x pp sequences unless ``gbs`` is given."""
    tp, pp = parallel.get("tp") or 1, parallel.get("pp") or 1
    n = gpus or tp * pp * (parallel.get("dp") or 1)
    dp = n // (tp * pp) or 1
    return plan_from_mapping(
        {
            "model": model_name,
            "system": {
                "gpu": gpu_name,
                "num_gpus": n,
                "gpus_per_node": min(8, n),
                **default_links(gpu_name),
            },
            "training": {
                "global_batch_size": (
                    gbs or dp * (parallel.get("micro_batch_size") or 1) * max(1, pp)
                )
            },
            "parallel": parallel,
        },
        "command line",
    )


PLAN_KEYS = (
    "model",
    "system",
    "training",
    "parallel",
    "run",
    "ignore",
    "description",
    "base",
    "calibration",
)
SECTION_CLASSES: dict[str, type[BaseModel]] = {
    "system": System,
    "training": Training,
    "parallel": Parallel,
    "run": Run,
}


def _plan_base(
    data: dict,
    label: str,
    base_dir: Path | None,
    notes: list[str],
    chain: tuple[tuple[str, str], ...] = (),
) -> dict:
    """A plan with ``base: PLAN`` (a bundled plan's name or a plan file) as that plan with this
    one's sections on top, key by key: ``training: {global_batch_size: 512}`` changes the batch
    and keeps the rest; a model mapping extends the base's model preset. ``chain``: the plans
    read so far, as (identity, name), the first the user's; a base already in it is a loop."""
    if "base" not in data:
        return data
    if not chain:
        top = Path(label)
        chain = ((str(top.resolve()) if top.is_file() else label, label),)
    name = names.base_name(data["base"], label)
    path = Path(name) if base_dir is None or Path(name).is_absolute() else base_dir / name
    key = str(path.resolve()) if path.suffix in (".yaml", ".yml") else f"plans:{name}"
    if key in (k for k, _ in chain):
        shown = " -> ".join(n for _, n in chain[1:]) + (" -> " if len(chain) > 1 else "")
        raise PerfModelError(
            f"{chain[0][1]}: base: {shown}{name} is a loop (each plan extends the next); remove"
            " one of these base keys"
        )
    if len(chain) > 8:
        raise PerfModelError(f"{label}: base plans extend each other more than 8 deep")
    where: Path | None = base_dir
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise PerfModelError(f"{label}.base: no such plan file {str(path)!r}")
        raw, where = _load_yaml(path, str(path)), path.parent
    else:
        raw = _lookup("plans", name, notes)
    if not isinstance(raw, dict):
        raise PerfModelError(f"{label}.base: {name} is not a plan mapping")
    raw = _plan_base(raw, f"plan {name}", where, notes, (*chain, (key, name)))
    out = dict(raw)
    if isinstance(raw.get("calibration"), str):  # a path from the file that holds it
        from perfmodel.inputs.calibration import rebase

        out["calibration"] = rebase(raw["calibration"], where, base_dir)
    changed = []
    for key, value in data.items():
        if key == "base":
            continue
        old = raw.get(key)
        if key == "model" and isinstance(value, dict) and isinstance(old, str):
            value = {"base": old, **value} if "base" not in value else value
        elif isinstance(value, dict) and isinstance(old, dict) and "base" not in value:
            value = names.extend(old, value, SECTION_CLASSES.get(key))
        out[key] = value
        if key != "description":
            changed.append(key)
    notes.append(f"plan: {name} with its {', '.join(changed) or 'nothing'} changed")
    return out


def _seq_from_training(data: dict) -> Any:
    """An inline model without a sequence length takes the training's (training.seq_length is the
    one the run uses either way)."""
    raw, tr = data["model"], data.get("training")
    seq_keys = ("seq_length", "seq_len", "max_position_embeddings")
    given = isinstance(raw, dict) and ("base" in raw or any(k in raw for k in seq_keys))
    if isinstance(raw, dict) and isinstance(tr, dict) and not given:
        seq = tr.get("seq_length", tr.get("seq_len"))
        if seq is not None:
            return {**raw, "seq_length": seq}
    return raw


def plan_from_mapping(data: Any, label: str, base_dir: Path | None = None) -> Plan:
    """A Plan from parsed YAML: presets resolved, every error one line."""
    if not isinstance(data, dict):
        raise PerfModelError(
            f"{label}: a plan is a mapping with keys model, system, training, parallel"
        )
    for key in data:
        if key not in PLAN_KEYS:
            close = difflib.get_close_matches(str(key), PLAN_KEYS, n=1, cutoff=0.5)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f"; allowed keys: {', '.join(PLAN_KEYS)}"
            )
            raise PerfModelError(f"{label}: unknown key {key!r}{hint}")
    notes: list[str] = []
    data = _plan_base(data, label, base_dir, notes)
    for key in ("model", "system", "training"):
        if key not in data:
            raise PerfModelError(f"{label}: missing section {key!r}")
    m = model(_seq_from_training(data), f"{label}: model", base_dir, notes)
    sysm = _system(data["system"], f"{label}: system", notes)
    tr = data["training"]
    framework = tr.get("framework") if isinstance(tr, dict) else None
    if isinstance(framework, str) and framework.lower() in FRAMEWORK_ALIASES:
        notes.append(
            f"framework {framework!r} read as the {FRAMEWORK_ALIASES[framework.lower()]} profile"
            " (an alias)"
        )
    training = _build(Training, data["training"], f"{label}: training")
    parallel = _build(Parallel, data.get("parallel") or {}, f"{label}: parallel")
    run = _build(Run, data.get("run") or {}, f"{label}: run")
    ignore = data.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(x, str) for x in ignore):
        raise PerfModelError(f"{label}: ignore must be a list of rule IDs, e.g. [PM201]")
    _format_runs_on(training, sysm, label)
    try:
        plan = Plan(
            model=m,
            system=sysm,
            training=training,
            parallel=parallel,
            run=run,
            ignore=ignore,
            read_as=notes,
        )
    except ValidationError as e:  # the plan's cross-section rules (Plan's validators)
        raise PerfModelError(format_validation_error(e, label, Plan)) from None
    if data.get("calibration") is None:
        return plan
    from perfmodel.inputs import calibration
    from perfmodel.specs.calibrated_plan import with_calibration

    return with_calibration(plan, calibration.of_plan(data["calibration"], label, base_dir))


HOPPER = ("H100", "H200", "H800")


def _format_runs_on(training: Training, system: System, label: str) -> None:
    """A compute format (or MFU peak) the GPU has no tensor cores for is an error naming the GPU,
    the format and the bundled GPUs that have it (NVFP4 or MXFP8 on Hopper, FP8 on A100); FP8's
    recipe needs FP8 and, blockwise, Hopper (Megatron-Bridge mixed_precision.py: "blockwise (for
    Hopper only)"; Blackwell block-scales in MXFP8)."""
    recipe = training.fp8_recipe
    if recipe is not None and training.dtype != "fp8":
        raise PerfModelError(
            f"{label}: training.fp8_recipe {recipe} with dtype {training.dtype}: the recipe is"
            " FP8's; set dtype fp8 or drop fp8_recipe"
        )
    if recipe == "blockwise" and not system.gpu.name.upper().startswith(HOPPER):
        raise PerfModelError(
            f"{label}: training.fp8_recipe blockwise on {system.gpu.name}: Transformer Engine's"
            " blockwise FP8 runs on Hopper (H100, H200, H800); on Blackwell use dtype mxfp8"
        )
    for dtype in {training.dtype, training.mfu_peak or training.dtype}:
        try:
            system.gpu.peak(dtype)
        except PerfModelError:
            have = [n for n in preset_names("gpus") if dtype in gpu(n).peak_flops_per_s]
            raise PerfModelError(
                f"{label}: training.dtype {dtype}: {system.gpu.name} has no {dtype} tensor cores;"
                f" GPUs that have them: {', '.join(have) or 'none bundled'}"
            ) from None


def bundled_plan(name: str) -> dict:
    """The raw mapping of a bundled plan (configs/plans/NAME.yaml); an unknown name suggests close
    ones."""
    return _lookup("plans", name)


VALIDATION_KEYS = (
    "source",
    "table",
    "searched",
    "knobs_from",
    "knobs_from_fields",
    "measured",
    "notes",
    "per_layer_ms",
)


def validation_cases() -> list[dict]:
    """The bundled published runs (configs/validation): plan, measured values, source,
    convention."""
    out = []
    table = _bundled("validation")
    for name in sorted(table):
        raw = dict(table[name])
        meta = {k: raw.pop(k) for k in VALIDATION_KEYS if k in raw}
        label = f"configs/validation/{name}.yaml"
        out.append(
            {
                "name": name,
                "plan": plan_from_mapping(raw, label),
                **meta,
                "description": raw.get("description", ""),
            }
        )
    return out
