"""The one way in: a path or a bundled name becomes a Plan, and what kind of file it is gets decided
once, here, from its content.

Kinds, in the order they are told apart:
- a bundled plan name (no such file in the working directory): configs/plans/NAME.yaml;
- a Megatron-LM launch script or argument file (.sh, .bash, .args, or any text that is not a YAML
  mapping but carries --arguments), read as the shell and Megatron-LM's argument parser read it;
- a NeMo recipe (a YAML mapping with a trainer or train section, or NeMo's model keys), read as
  OmegaConf reads it;
- a Hugging Face config.json: a model, not a plan, so an error that says how to use it;
- anything else that is a YAML mapping: a perfmodel plan, whatever its extension (a plan saved as
  .txt is a plan, and its own errors are the ones reported).
Launch files do not name the GPU: ``gpu`` is required for them, and refused for a perfmodel plan,
whose system section names one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from perfmodel.engine.estimate import resolve_config, validate_config
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.megatron import read_args
from perfmodel.inputs.megatron_args import Imported
from perfmodel.inputs.nemo import read_recipe
from perfmodel.inputs.torchtitan import read_job
from perfmodel.specs import Plan

Kind = Literal["plan", "megatron", "nemo", "torchtitan"]
MEGATRON_SUFFIXES = (".sh", ".bash", ".args")
_ARGUMENT = re.compile(r"(?:^|\s)--[a-z][a-z0-9_-]+", re.MULTILINE)
KIND_NAMES = {
    "megatron": "a Megatron-LM launch file",
    "nemo": "a NeMo recipe",
    "torchtitan": "a torchtitan job file",
    "plan": "a perfmodel plan",
}


@dataclass
class Loaded:
    """A plan, the kind of file it came from, and what a person should be told about the reading."""

    plan: Plan
    kind: Kind
    notes: list[str] = field(default_factory=list)
    imported: Imported | None = None


def load(
    source: str,
    *,
    gpu: str | None = None,
    gpus: int | None = None,
    vocab_size: int | None = None,
    refuse_unused: bool = True,
    parallel: dict[str, Any] | None = None,
) -> Loaded:
    """Read ``source`` (a file, or a bundled plan's name) into a Plan on ``gpus`` GPUs (default: the
    file's own count), with the ``parallel`` knobs given on the command line replacing the file's
    (before a launch file's layout is checked, so the layout checked is the one asked for).
    ``gpu`` and ``vocab_size`` are for launch files, which do not carry them: given for a
    perfmodel plan they are an error, unless ``refuse_unused`` is off (`compare` passes them for
    whichever of its files are launch files)."""
    return _load(source, gpu, gpus, vocab_size, refuse_unused, parallel or {})


def _load(
    source: str,
    gpu: str | None,
    gpus: int | None,
    vocab_size: int | None,
    refuse_unused: bool,
    parallel: dict[str, Any],
) -> Loaded:
    path = Path(source)
    if not source.strip():
        raise PerfModelError(
            "the plan argument is empty: give a plan file or a bundled plan's name "
            "(`perfmodel presets plans` lists them)"
        )
    if path.is_dir():
        raise PerfModelError(f"{source}: is a directory, not a plan file")
    if path.exists() and not path.is_file():
        raise PerfModelError(f"{source}: is not a regular file")
    if not path.exists():
        if path.suffix.lower() in (*MEGATRON_SUFFIXES, ".json", ".txt"):
            raise PerfModelError(f"{source}: no such file")
        try:
            data = presets.bundled_plan(path.name)
        except PerfModelError as e:
            raise PerfModelError(f"{source}: no such file, and {e}") from None
        return _as_plan(
            data,
            f"plan {path.name}",
            None,
            gpu if refuse_unused else None,
            gpus,
            vocab_size if refuse_unused else None,
            parallel,
        )
    text = presets.read_text(source, source)
    kind, data = kind_of(path, text)
    if kind == "plan":
        return _as_plan(
            data,
            source,
            path.parent,
            gpu if refuse_unused else None,
            gpus,
            vocab_size if refuse_unused else None,
            parallel,
        )
    if gpu is None:
        raise PerfModelError(
            f"{source} is {KIND_NAMES[kind]}: give the GPU with --gpu NAME (the file does "
            f"not name it), or convert it first with `perfmodel import {kind} {source} "
            "--gpu NAME -o plan.yaml`"
        )
    if kind == "torchtitan":
        imp = read_job(text, gpu, gpus, source)
    elif kind == "megatron":
        imp = read_args(text, gpu, gpus, vocab_size)
    else:
        imp = read_recipe(data, gpu, gpus, vocab_size)
    imp.plan["parallel"].update(parallel)
    return Loaded(_launch_plan(imp, source, gpu), kind, notes(imp), imp)


def load_plan(source: str, **kw: Any) -> Plan:
    """``load(source, ...).plan``, for callers that need no notes."""
    return load(source, **kw).plan


def kind_of(path: Path, text: str) -> tuple[Kind, Any]:
    """The kind of a file from its content, and its parsed YAML where it has some."""
    label = str(path)
    suffix = path.suffix.lower()
    if suffix in MEGATRON_SUFFIXES:
        return "megatron", None
    if suffix == ".toml":
        return "torchtitan", None
    if suffix == ".json":
        raise PerfModelError(
            f"{label} is a Hugging Face config.json: a model, not a plan; name it in a "
            f"plan (model: {label}) beside a system and a training section"
        )
    try:
        data = presets.parse_yaml(text, label)
    except PerfModelError:
        if _ARGUMENT.search(text):
            return "megatron", None
        raise
    if isinstance(data, dict):
        model = data.get("model")
        if (
            "trainer" in data
            or "train" in data
            or (isinstance(model, dict) and "tensor_model_parallel_size" in model)
        ):
            return "nemo", presets.parse_yaml(text, label, omegaconf=True)  # as NeMo reads it
        return "plan", data
    if _ARGUMENT.search(text):
        return "megatron", None
    return "plan", data  # not a mapping: the plan reader says what a plan is


def _as_plan(
    data: Any,
    label: str,
    base_dir: Path | None,
    gpu: str | None,
    gpus: int | None,
    vocab_size: int | None,
    parallel: dict[str, Any] | None = None,
) -> Loaded:
    if gpu is not None:
        raise PerfModelError(
            f"{label} is a perfmodel plan, whose system.gpu names its GPU: --gpu is for "
            "Megatron-LM launch files and NeMo recipes (edit the plan, or compare GPUs "
            "with `perfmodel sweep PLAN --vary gpu=a100-80gb,h100-sxm`)"
        )
    if vocab_size is not None:
        raise PerfModelError(
            f"{label} is a perfmodel plan, whose model gives the vocabulary: --vocab-size "
            "is for Megatron-LM launch files and NeMo recipes"
        )
    plan = presets.plan_from_mapping(data, label, base_dir)
    if gpus:
        try:
            plan = plan.with_system(num_gpus=gpus)
        except PerfModelError as e:
            raise PerfModelError(f"--gpus {gpus}: {e}") from None
    if parallel:
        plan = plan.with_parallel(**parallel)
    return Loaded(plan, "plan")


def read_launch(
    path: str, kind: Kind, gpu: str, gpus: int | None = None, vocab_size: int | None = None
) -> Imported:
    """A launch file read as ``kind`` (for `perfmodel import`, which names the kind), links filled
    in."""
    return read_launch_text(presets.read_text(path, path), kind, gpu, gpus, path, vocab_size)


def read_launch_text(
    text: str,
    kind: Kind,
    gpu: str,
    gpus: int | None,
    path: str,
    vocab_size: int | None = None,
) -> Imported:
    """read_launch on a launch file's text (``path`` names it)."""
    if kind != "torchtitan" and Path(path).suffix.lower() == ".toml":
        raise PerfModelError(
            f"{path} is a TOML job file (torchtitan's), not {KIND_NAMES[kind]}: use `perfmodel"
            " import torchtitan`"
        )
    if kind == "megatron":
        imp = read_args(text, gpu, gpus, vocab_size)
    elif kind == "nemo":
        data = _recipe_yaml(text, path)
        imp = read_recipe(data, gpu, gpus, vocab_size)
    elif kind == "torchtitan":
        imp = read_job(text, gpu, gpus, path)
    else:
        raise PerfModelError(f"unknown launch file kind {kind!r}; use megatron, nemo or torchtitan")
    return _with_links(imp, path, gpu)


# Megatron-Bridge's ConfigContainer writes itself as YAML (ConfigContainerBase.to_yaml; its
# docs/training/config-container-overview: "config.to_yaml('my_config.yaml')")
DUMP_RECIPE = (
    "a NeMo 2 / Megatron-Bridge recipe is Python: dump it to YAML first, e.g. python -c"
    ' "from megatron.bridge.recipes.llama import llama3_8b_pretrain_config as r;'
    " r().to_yaml('recipe.yaml')\", then import recipe.yaml"
)


def _recipe_yaml(text: str, path: str) -> Any:
    """A NeMo recipe's YAML as OmegaConf reads it; a Python recipe is an error saying how to dump
    it to YAML."""
    if Path(path).suffix == ".py":
        raise PerfModelError(f"{path}: {DUMP_RECIPE}")
    try:
        data = presets.parse_yaml(text, path, omegaconf=True)
    except PerfModelError as e:
        raise PerfModelError(f"{e} (NeMo recipes are read as YAML; {DUMP_RECIPE})") from None
    if not isinstance(data, dict):
        raise PerfModelError(f"{path}: not a YAML mapping; {DUMP_RECIPE}")
    return data


def _with_links(imp: Imported, path: str, gpu: str) -> Imported:
    if isinstance(imp.plan["model"], dict):
        imp.plan["model"]["name"] = Path(path).stem
    links = presets.default_links(gpu)
    imp.plan["system"].update(links)
    imp.assumed.append(
        f"links {links['intra_node_link']} inside a node and {links['inter_node_link']} "
        f"across nodes (the usual ones for {gpu}; edit the plan's system section if yours "
        "differ)"
    )
    system = imp.plan["system"]
    rack = presets.RACK_DOMAIN.get(links["intra_node_link"])
    if rack and "nvlink_domain" not in system and rack % system.get("gpus_per_node", 8) == 0:
        # the launch names its trays (--nproc_per_node), not the rack they share NVLink in
        system["nvlink_domain"] = rack
        imp.assumed.append(
            f"an NVLink domain of {rack} GPUs (one {gpu} NVL{rack} rack); set the plan's"
            " system.nvlink_domain if yours differs (64 is often run)"
        )
    return imp


def _launch_plan(imp: Imported, path: str, gpu: str) -> Plan:
    return plan_of(_with_links(imp, path, gpu), path)


def plan_of(imp: Imported, path: str) -> Plan:
    """The imported mapping as a Plan whose configuration runs: one clear error otherwise, in the
    file's own words where the reader recorded them (Imported.words)."""
    try:
        plan = presets.plan_from_mapping(imp.plan, path)
    except PerfModelError as e:
        text = str(e)
        for said, own in sorted(imp.words.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(said, own)
        raise PerfModelError(text) from None
    try:
        validate_config(plan, resolve_config(plan))
    except PerfModelError as e:
        raise PerfModelError(
            f"{path}: {e} (on {plan.system.num_gpus} GPUs; --gpus N sets another count)"
        ) from None
    return plan


def notes(imp: Imported) -> list[str]:
    """What the reader should know: the arguments ignored or not recognized, and what was
    assumed."""
    out = []
    if imp.ignored:
        out.append(f"ignored (no effect on the cost): {', '.join(imp.ignored)}")
    if imp.unrecognized:
        out.append(
            "not recognized, ignored (check they do not change the cost): "
            + ", ".join(imp.unrecognized)
        )
    return out + [f"assumed: {a}" for a in imp.assumed]
