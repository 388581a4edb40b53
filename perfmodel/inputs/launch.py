"""Launch files as plans: a Megatron-LM launch script or argument file, or a NeMo recipe, read into a Plan
(issue 15, item 4). `perfmodel import` writes the plan out; `check`, `estimate` and `compare` take such a
file where they take a plan."""

from __future__ import annotations

from pathlib import Path

from perfmodel.inputs import presets
from perfmodel.errors import PerfModelError
from perfmodel.engine.estimate import resolve_config, validate_config
from perfmodel.inputs.megatron import Imported, read_args
from perfmodel.inputs.nemo import read_recipe
from perfmodel.specs import Plan

MEGATRON_SUFFIXES = (".sh", ".bash", ".args", ".txt")


def kind_of(path: str) -> str | None:
    """"megatron", "nemo", or None for a perfmodel plan (or anything else, left to the plan loader)."""
    p = Path(path)
    if not p.is_file():
        return None
    if p.suffix in MEGATRON_SUFFIXES:
        return "megatron"
    if p.suffix in (".yaml", ".yml"):
        data = presets.parse_yaml(presets.read_text(path, path), path)
        if isinstance(data, dict) and isinstance(data.get("model"), dict) and (
                "trainer" in data or "train" in data or "tensor_model_parallel_size" in data["model"]):
            return "nemo"
    return None


def read(path: str, kind: str, gpu: str, gpus: int | None = None, vocab_size: int | None = None) -> Imported:
    """The file read into a plan mapping, with the links filled in for the GPU and what was assumed."""
    if kind == "megatron":
        imp = read_args(presets.read_text(path, path), gpu, gpus, vocab_size)
    elif kind == "nemo":
        imp = read_recipe(presets.parse_yaml(presets.read_text(path, path), path), gpu, gpus, vocab_size)
    else:
        raise PerfModelError(f"unknown launch file kind {kind!r}; use megatron or nemo")
    imp.plan["model"]["name"] = Path(path).stem
    links = presets.default_links(gpu)
    imp.plan["system"].update(links)
    imp.assumed.append(f"links {links['intra_node_link']} inside a node and {links['inter_node_link']} across nodes "
                       f"(the usual ones for {gpu}; edit the plan's system section if yours differ)")
    return imp


def plan_of(imp: Imported, path: str) -> Plan:
    """The imported mapping as a Plan whose configuration runs: one clear error otherwise."""
    plan = presets.plan_from_mapping(imp.plan, path)
    try:
        validate_config(plan, resolve_config(plan))
    except PerfModelError as e:
        raise PerfModelError(f"{path}: {e} (on {plan.system.num_gpus} GPUs; --gpus N sets another count)") from None
    return plan


def notes(imp: Imported) -> list[str]:
    """What the reader should know: the arguments ignored or not recognized, and what was assumed."""
    out = []
    if imp.ignored:
        out.append(f"ignored (no effect on the cost): {', '.join(imp.ignored)}")
    if imp.unrecognized:
        out.append(f"not recognized, ignored (check they do not change the cost): {', '.join(imp.unrecognized)}")
    return out + [f"assumed: {a}" for a in imp.assumed]
