"""`plan --emit torchtitan`: one configuration as a torchtitan TOML job config, in the key names
inputs/torchtitan.py reads (torchtitan/config/job_config.py), so that importing the file gives
back the plan and its estimate.

torchtitan's job file does not carry the GPU, the GPU count or the links: the comment lines say
which, and `perfmodel import torchtitan FILE --gpu G --gpus N` takes them back.
"""

from __future__ import annotations

from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.inputs.emit_check import gpu_preset, trip_note
from perfmodel.inputs.torchtitan import MODELS, SCHEDULES, TORCHTITAN_PROFILES


def _model_keys(plan) -> tuple[str, str]:
    from perfmodel.inputs import presets

    for (name, flavor), preset in MODELS.items():
        if presets.model(preset) == plan.model:
            return name, flavor
    known = ", ".join(f"{p} ({n} {f})" for (n, f), p in MODELS.items())
    raise PerfModelError(
        f"{plan.model.name}: not one of torchtitan's model flavors perfmodel knows ({known});"
        " write the job file by hand"
    )


def _split(plan, c: dict, layers: list[float] | None) -> dict[str, Any]:
    """The stage split as torchtitan's generate_llm_fqn_per_model_part makes it: the layers spread
    over pp x vp stages, the first and last stages carrying first/last_stage_less_layers fewer."""
    pp, vp, L = c["pp"], c["vp"], plan.model.num_layers
    stages = pp * vp
    n = [int(x) for x in layers] if layers and len(layers) == pp else [L // pp] * pp
    out: dict[str, Any] = {}
    if vp > 1:
        if L % stages or len(set(n)) > 1:
            raise PerfModelError(
                f"the best configuration splits {L} layers {n} over {pp} stages of {vp} virtual"
                " stages: torchtitan's job file has no form for it; plan with a pp x vp that"
                " divides the layers"
            )
        out["pipeline_parallel_layers_per_stage"] = L // stages
        return {
            **out,
            "pipeline_parallel_first_stage_less_layers": 0,
            "pipeline_parallel_last_stage_less_layers": 0,
        }
    middle = set(n[1:-1]) or {max(n)}
    m = middle.pop()
    if middle or n[0] > m or n[-1] > m:
        raise PerfModelError(
            f"the best configuration's stage split {n} has no torchtitan form (its middle stages"
            " share the layers evenly, the first and last carry fewer): write the job file's"
            " module_fqns_per_model_part by hand"
        )
    return {
        "pipeline_parallel_first_stage_less_layers": m - n[0],
        "pipeline_parallel_last_stage_less_layers": m - n[-1],
    }


def _refuse(plan, c: dict) -> None:
    """What torchtitan's job file has no form for, by name."""
    t = plan.training
    if t.framework not in TORCHTITAN_PROFILES:
        raise PerfModelError(
            "--emit torchtitan writes torchtitan's job file, and the plan's framework is"
            f" {t.framework}: plan with --framework torchtitan (the fsdp profile, or"
            " torchtitan-rocm on AMD GPUs) so that the search is torchtitan's"
        )
    if c["tp"] > 1 and not c["sequence_parallel"]:
        raise PerfModelError(
            f"tp {c['tp']} without sequence parallelism: torchtitan's tensor parallelism always"
            " shards the norms' sequence (DTensor SequenceParallel), so its job file has no form"
            " for it; plan with sequence_parallel true"
        )
    if c["zero_stage"] not in (0, 2, 3):
        raise PerfModelError(f"zero_stage {c['zero_stage']}: FSDP2 shards as ZeRO-2 or ZeRO-3")
    if c["schedule"] not in SCHEDULES.values() and c["pp"] > 1:
        raise PerfModelError(f"schedule {c['schedule']}: torchtitan has no such schedule")
    if t.dtype not in ("bf16", "fp32", "fp8", "mxfp8"):
        raise PerfModelError(f"training.dtype {t.dtype}: torchtitan's job file has no form for it")
    if c["recompute"] == "selective" and t.recompute_modules not in (["op_sac"], ["layer_sac"]):
        raise PerfModelError(
            f"training.recompute_modules {t.recompute_modules}: torchtitan's selective"
            " activation checkpointing is per op (op_sac) or per layer (layer_sac); plan with one"
        )


def _checkpoint(plan, c: dict) -> dict[str, Any]:
    """[activation_checkpoint]: selective_ac_option "op" for op_sac, "N" for layer_sac every N
    layers (torchtitan's _apply_ac_to_transformer_block)."""
    out: dict[str, Any] = {"mode": c["recompute"]}
    if c["recompute"] == "selective":
        t = plan.training
        layer = t.recompute_modules == ["layer_sac"]
        out["selective_ac_option"] = str(t.checkpoint_every_n_layers) if layer else "op"
    return out


def _reshard(plan, c: dict) -> str:
    """fully_shard's reshard_after_forward: always for ZeRO-3, never for ZeRO-2 and for ZeRO-3
    without it (which import reads back as ZeRO-2, FSDP1's SHARD_GRAD_OP: toml_text's read-back
    says where that moves the memory)."""
    if c["zero_stage"] == 3 and plan.training.zero3_reshard_after_forward:
        return "always"
    return "never"


def job(plan, c: dict, layers: list[float] | None = None) -> dict[str, dict[str, Any]]:
    """The job config's tables for a plan and one configuration (Estimate.config.as_dict())."""
    t = plan.training
    _refuse(plan, c)
    name, flavor = _model_keys(plan)
    dp, shard = c["dp"], (c.get("dp_shard") or c["dp"])
    if c["zero_stage"] == 0:
        shard = 1
    converters = {"fp8": ["quantize.linear.float8"], "mxfp8": ["quantize.linear.mx"]}.get(t.dtype)
    training: dict[str, Any] = {
        "local_batch_size": c["global_batch_size"] // dp if c["pp"] > 1 else c["micro_batch_size"],
        "global_batch_size": c["global_batch_size"],
        "seq_len": plan.seq_length,
        "mixed_precision_param": "float32" if t.dtype == "fp32" else "bfloat16",
    }
    if t.reduce_dtype:  # MixedPrecisionPolicy.reduce_dtype
        training["mixed_precision_reduce"] = {"fp32": "float32", "bf16": "bfloat16"}[t.reduce_dtype]
    out: dict[str, dict[str, Any]] = {
        "job": {"description": f"{plan.model.name}, written by perfmodel plan --emit torchtitan"},
        "model": {
            "name": name,
            "flavor": flavor,
            **({"converters": converters} if converters else {}),
        },
        "optimizer": {"name": "AdamW"},
        "training": training,
        "parallelism": {
            "data_parallel_replicate_degree": dp // shard,
            "data_parallel_shard_degree": shard,
            "fsdp_reshard_after_forward": _reshard(plan, c),
            "tensor_parallel_degree": c["tp"],
            "enable_async_tensor_parallel": bool(t.tp_comm_overlap_ub),
            "context_parallel_degree": c["cp"],
            "pipeline_parallel_degree": c["pp"],
        },
        "activation_checkpoint": _checkpoint(plan, c),
        "compile": {"enable": bool(t.torch_compile), "components": ["model", "loss"]},
    }
    if t.tokens:
        training["steps"] = max(1, round(t.tokens / (c["global_batch_size"] * plan.seq_length)))
    par = out["parallelism"]
    if c["cp"] > 1:
        par["context_parallel_rotate_method"] = "alltoall"  # the K/V ring (cp_comm_type p2p)
    if c.get("ep", 1) > 1:  # torchtitan's MoE: the experts over ep ranks, etp = tp or 1
        par["expert_parallel_degree"] = c["ep"]
        par["expert_tensor_parallel_degree"] = c.get("etp", 1)
    if c["pp"] > 1:
        par["pipeline_parallel_schedule"] = {v: k for k, v in SCHEDULES.items()}[c["schedule"]]
        par["pipeline_parallel_microbatch_size"] = c["micro_batch_size"]
        par.update(_split(plan, c, layers))
    if t.dtype == "fp8":
        out["quantize.linear.float8"] = {
            "enable_fsdp_float8_all_gather": bool(t.fp8_param_gather),
            "filter_fqns": ["output"],
        }
    return out


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return str(v)


def toml_text(plan, best) -> str:
    """`plan --emit torchtitan`: the comment lines (the prediction, the launch, how to read it
    back, the node size and NVLink domain for the read-back, what it does not carry), then the
    tables."""
    from perfmodel.inputs.emit_text import wrap_comments
    from perfmodel.inputs.megatron_profiles import domain_line

    c = best.config.as_dict()
    tables = job(plan, c, best.stage_layers)
    s = plan.system
    nodes = -(-s.num_gpus // s.gpus_per_node)
    preset, custom = gpu_preset(s.gpu)
    read = f"perfmodel import torchtitan THIS.toml --gpu {preset} --gpus {s.num_gpus}"
    head = [
        (
            f"# {plan.model.name} on {s.num_gpus} x {s.gpu.name}: predicted"
            f" {best.values['step_time_s']:.3g} s per step, MFU {100 * best.values['mfu']:.1f}%"
        ),
        (
            f"# launch: torchrun --nproc_per_node {s.gpus_per_node} --nnodes {nodes}"
            " -m torchtitan.train --job.config_file THIS.toml"
        ),
        "# read back with:",
        f"#   {read}",
    ]
    if custom:
        head.append(f"# then set the plan's system.gpu to this plan's GPU ({custom}: not a preset)")
    if s.gpus_per_node != 8:
        head.append(f"# perfmodel: gpus_per_node {s.gpus_per_node} (torchrun's --nproc_per_node)")
    head += domain_line(s.nvlink_domain)
    if plan.training.framework != ("torchtitan-rocm" if s.gpu.name.startswith("AMD") else "fsdp"):
        head.append(f"# perfmodel: framework {plan.training.framework}")
    lines = []
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_value(v)}" for k, v in table.items()]
    body = "\n".join(lines) + "\n"
    note = trip_note(plan, best, "\n".join(head) + "\n" + body, "torchtitan")
    head += [f"# {note}"] if note else []
    return "\n".join(wrap_comments(head)) + "\n" + body
