"""torchtitan's job files, read into a plan (`perfmodel import torchtitan job.toml`).

Key names, sections and defaults are torchtitan's TOML job config (torchtitan/config/job_config.py
at 238fa99, 2026-02, the last commit before its configs moved to Python, PR #2386; the 2024-12
[float8] section is read too). Every key is one of three kinds, as for Megatron-LM arguments: one
that sets the plan (read below), one that does not change the cost (IGNORED: named as ignored),
and one whose cost perfmodel cannot model (an error naming it, unless it has torchtitan's default
value). A key of none of these is named as not recognized, so the reader can judge it.

torchtitan's layout (torchtitan/distributed/parallel_dims.py): world = dp_replicate x dp_shard x
cp x tp x pp, dp_shard -1 taking the GPUs left; FSDP2 shards over dp_shard (ZeRO-3, or ZeRO-2
when fsdp_reshard_after_forward is never; "default" reshards unless pp > 1), DDP replicates over
dp_replicate; TP is DTensor TP with sequence parallel norms. A DP rank takes local_batch_size
sequences a step (global_batch_size -1: local x dp), split into micro-batches of
pipeline_parallel_microbatch_size under PP.
"""

from __future__ import annotations

import tomllib
from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.megatron_args import Imported
from perfmodel.inputs.torchtitan_keys import (
    LOOPED,
    MODELS,
    SCHEDULES,
    account,
)

DEGREE_KEYS = (
    "data_parallel_replicate_degree",
    "data_parallel_shard_degree",
    "context_parallel_degree",
    "tensor_parallel_degree",
    "pipeline_parallel_degree",
)


class _Job:
    """The parsed file, and which of its keys were read."""

    def __init__(self, data: dict, label: str):
        self.data, self.label = data, label
        self.read: set[tuple[str, str]] = set()
        self.notes: list[str] = []

    def section(self, name: str) -> dict:
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            raise PerfModelError(f"{self.label}: [{name}] must be a table, got {value!r}")
        return value

    def get(self, section: str, key: str, default: Any = None) -> Any:
        """``[section] key``, or torchtitan's ``default`` when the file does not set it."""
        self.read.add((section, key))
        node: Any = self.data
        for part in section.split("."):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node.get(key, default) if isinstance(node, dict) else default

    def int(self, section: str, key: str, default: Any, least: int | None = None) -> Any:
        """An integer key (``default`` where absent, which may be None); ``least``: the smallest
        value torchtitan can run (a 0 divides by zero there)."""
        v = self.get(section, key, default)
        if v is None and default is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise PerfModelError(f"{self.label}: [{section}] {key} must be an integer, got {v!r}")
        if least is not None and v < least:
            raise PerfModelError(f"{self.label}: [{section}] {key} {v}: give {least} or more")
        return v

    def entries(self):
        """Every (section, key, value) of the file, sub-tables flattened
        (quantize.linear.float8)."""

        def walk(prefix: str, table: dict):
            for k, v in table.items():
                if isinstance(v, dict) and prefix in (
                    "",
                    "quantize",
                    "quantize.linear",
                    "quantize.grouped_mm",
                ):
                    yield from walk(f"{prefix}.{k}" if prefix else k, v)
                else:
                    yield prefix, k, v

        yield from walk("", self.data)


def parse(text: str, label: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PerfModelError(f"{label}: TOML syntax error: {e}") from None


def read_job(text: str, gpu: str, num_gpus: int | None = None, label: str = "job.toml") -> Imported:
    """A plan mapping from a torchtitan TOML job config; ``gpu`` names the GPU preset and
    ``num_gpus`` the world size (torchtitan's NGPU x nodes: the file does not say)."""
    job = _Job(parse(text, label), label)
    out = Imported({"model": _model(job), "system": {"gpu": gpu}, "training": {}, "parallel": {}})
    out.assumed += job.notes
    _parallel(job, out, num_gpus)
    _batch(job, out)
    _precision(job, out)
    _recompute(job, out)
    account(job, out)
    _framework_and_nodes(text, out)
    return out


def _framework_and_nodes(text: str, out: Imported) -> None:
    """torchtitan's profile for the GPU (torchtitan-rocm on an AMD GPU: ROCm PyTorch runs the same
    code), and the node size and NVLink domain from the comment lines `plan --emit torchtitan`
    writes (torchrun's --nproc_per_node is not in the job file)."""
    from perfmodel.inputs.megatron_profiles import MARKER, count_of, domain_of

    try:
        amd = presets.gpu(out.plan["system"]["gpu"]).name.startswith("AMD")
    except PerfModelError:
        amd = False  # an unknown GPU: the plan's loader names it
    marked = MARKER.findall(text)
    if marked and marked[-1] not in TORCHTITAN_PROFILES:
        raise PerfModelError(
            f"comment 'perfmodel: framework {marked[-1]}': a torchtitan job runs as one of"
            f" {', '.join(TORCHTITAN_PROFILES)}"
        )
    out.plan["training"]["framework"] = (
        marked[-1] if marked else "torchtitan-rocm" if amd else "fsdp"
    )
    system = out.plan["system"]
    node = count_of(text, "gpus_per_node")
    if node:
        system["gpus_per_node"] = node
    elif system["num_gpus"] > 8:
        out.assumed.append(
            "8 GPUs a node (torchrun's --nproc_per_node is not in the job file): set the plan's"
            " system.gpus_per_node if yours differ"
        )
    if domain_of(text):
        system["nvlink_domain"] = domain_of(text)


# the profiles that describe torchtitan: the CUDA one and the ROCm one
TORCHTITAN_PROFILES = ("fsdp", "torchtitan-rocm")


def _model(job: _Job) -> str:
    name, flavor = job.get("model", "name", "llama3"), job.get("model", "flavor", "debugmodel")
    preset = MODELS.get((name, flavor))
    if preset is None:
        known = ", ".join(f"{n} {f}" for n, f in MODELS)
        raise PerfModelError(
            f"{job.label}: [model] name {name!r} flavor {flavor!r} has no bundled preset; known:"
            f" {known} (or write a plan with the model's config.json: model: config.json)"
        )
    job.get("model", "converters", [])
    if name == "deepseek_v3":
        job.notes.append(
            "torchtitan's deepseek_v3 671B runs FlexAttention with block-causal masks (attn_type"
            " flex): costed as the fsdp profile's attention, without MTP (torchtitan has none)"
        )
    return preset


def _world(job: _Job, num_gpus: int | None, degrees: dict[str, int]) -> int:
    """dp_shard from the GPU count when the file says -1 (torchtitan's ParallelDims)."""
    shard = degrees["dp_shard"]
    rest = degrees["dp_replicate"] * degrees["cp"] * degrees["tp"] * degrees["pp"]
    spelled = " x ".join(f"{k}({v})" for k, v in degrees.items())
    if shard == -1:
        if num_gpus is None:
            raise PerfModelError(
                f"{job.label}: data_parallel_shard_degree -1 takes the GPUs left, and the file"
                " does not give the GPU count: pass --gpus N"
            )
        if num_gpus % rest:
            raise PerfModelError(
                f"{job.label}: --gpus {num_gpus} is not a multiple of {spelled.replace('(-1)', '')}"
                f" without dp_shard = {rest}"
            )
        degrees["dp_shard"] = num_gpus // rest
        return num_gpus
    world = shard * rest
    if num_gpus is not None and num_gpus != world:
        raise PerfModelError(f"{job.label}: {spelled} = {world} != --gpus {num_gpus}")
    return world


def _parallel(job: _Job, out: Imported, num_gpus: int | None) -> None:
    p, s = out.plan["parallel"], "parallelism"
    degrees = {
        key: job.int(s, name, -1 if key == "dp_shard" else 1)
        for key, name in zip(("dp_replicate", "dp_shard", "cp", "tp", "pp"), DEGREE_KEYS)
    }
    for (key, v), name in zip(degrees.items(), DEGREE_KEYS):
        if v < 1 and not (key == "dp_shard" and v == -1):
            raise PerfModelError(f"{job.label}: [parallelism] {name} {v}: give 1 or more")
    out.plan["system"]["num_gpus"] = _world(job, num_gpus, degrees)
    p.update(degrees)
    p["sequence_parallel"] = degrees["tp"] > 1  # DTensor TP shards the norms' sequence
    reshard = job.get(s, "fsdp_reshard_after_forward", "default")
    if reshard not in ("default", "always", "never"):
        raise PerfModelError(
            f"{job.label}: [parallelism] fsdp_reshard_after_forward {reshard!r}: torchtitan takes"
            " default, always or never"
        )
    resharded = reshard == "always" or (reshard == "default" and degrees["pp"] == 1)
    p["zero_stage"] = 0 if degrees["dp_shard"] == 1 else (3 if resharded else 2)
    if p["zero_stage"] == 0:  # no shard at all: plain data parallelism over the replicas
        p["dp"] = p.pop("dp_replicate") * p.pop("dp_shard")
    # torchtitan's MoE: the routed experts over ep ranks, etp = tp or 1 (parallel_dims.py; the
    # fsdp profile's expert_parallel, engine/framework_rules.py checks the folding)
    ep = job.int(s, "expert_parallel_degree", 1)
    etp = job.int(s, "expert_tensor_parallel_degree", 1)
    backend = job.get(s, "expert_parallel_comm_backend", "standard")
    if ep > 1 and backend != "standard":
        raise PerfModelError(
            f"{job.label}: [parallelism] expert_parallel_comm_backend {backend!r}: only the"
            ' standard all_to_all_single dispatch is modelled; set it to "standard"'
        )
    p["ep"], p["etp"] = ep, etp
    if job.get(s, "enable_async_tensor_parallel", False):
        out.plan["training"]["tp_comm_overlap_ub"] = True  # micro-pipelined TP (framework.py)
    if degrees["cp"] > 1:
        rotate = job.get(s, "context_parallel_rotate_method", "allgather")
        if rotate != "alltoall":
            raise PerfModelError(
                f"{job.label}: [parallelism] context_parallel_rotate_method {rotate!r}: the"
                " all-gather of K/V is not modelled; alltoall (the K/V ring, cp_comm_type p2p) is"
            )
        p["cp_comm_type"] = "p2p"
    _pipeline(job, out, degrees["pp"])


def _pipeline(job: _Job, out: Imported, pp: int) -> None:
    p, s = out.plan["parallel"], "parallelism"
    name = job.get(s, "pipeline_parallel_schedule", "1F1B")
    per_stage = job.int(s, "pipeline_parallel_layers_per_stage", None, least=1)
    first_less = job.int(s, "pipeline_parallel_first_stage_less_layers", 1, least=0)
    last_less = job.int(s, "pipeline_parallel_last_stage_less_layers", 1, least=0)
    if pp == 1:
        p.update(vp=1, schedule="1f1b")
        return
    if name not in SCHEDULES:
        raise PerfModelError(
            f"{job.label}: [parallelism] pipeline_parallel_schedule {name!r} is not modelled;"
            f" use {', '.join(SCHEDULES)}"
        )
    p["schedule"] = SCHEDULES[name]
    layers = presets.model(out.plan["model"]).num_layers
    if per_stage is not None:  # pipeline_llm: stages = ceil((L + first + last) / per_stage)
        stages = -(-(layers + first_less + last_less) // per_stage)
    else:  # one stage a rank, two for a looped or V schedule
        stages = pp * (2 if name in LOOPED else 1)
    if stages % pp:
        raise PerfModelError(f"{job.label}: {stages} pipeline stages do not divide over pp({pp})")
    p["vp"] = stages // pp
    # generate_llm_fqn_per_model_part: L + first + last effective layers split evenly over the
    # stages, the remainder one each to the first stages; the embedding and the output count as
    # first_less and last_less layers
    effective = layers + first_less + last_less
    each, extra = divmod(effective, stages)
    counts = [each + (i < extra) for i in range(stages)]
    counts[0] -= first_less
    counts[-1] -= last_less
    middle = counts[1:-1]
    if p["vp"] > 1 and (counts[0] != counts[-1] or len(set(middle)) > 1 or first_less or last_less):
        if len(set(counts)) > 1:
            out.assumed.append(
                f"torchtitan's stage split {counts} read as the layers spread evenly over the"
                f" {stages} virtual stages (uneven virtual stages are not modelled)"
            )
        return
    if len(set(counts)) > 1:
        p["decoder_first_pipeline_num_layers"] = counts[0]
        p["decoder_last_pipeline_num_layers"] = counts[-1]


def _batch(job: _Job, out: Imported) -> None:
    p, t, s = out.plan["parallel"], out.plan["training"], "training"
    local = job.int(s, "local_batch_size", 8, least=1)
    dp = p["dp"] if "dp" in p else p["dp_replicate"] * p["dp_shard"]
    gbs = job.int(s, "global_batch_size", -1)
    if gbs != -1 and gbs < 1:
        raise PerfModelError(
            f"{job.label}: [training] global_batch_size {gbs}: give 1 or more, or -1"
            " (local_batch_size x the data-parallel degree)"
        )
    gbs = local * dp if gbs == -1 else gbs
    if gbs % (local * dp):
        raise PerfModelError(
            f"{job.label}: [training] global_batch_size {gbs} is not a multiple of"
            f" local_batch_size({local}) x dp({dp}) (torchtitan's gradient accumulation)"
        )
    mbs = (
        job.int("parallelism", "pipeline_parallel_microbatch_size", 1, least=1)
        if p["pp"] > 1
        else local
    )
    if local % mbs:
        raise PerfModelError(
            f"{job.label}: local_batch_size {local} is not a multiple of"
            f" pipeline_parallel_microbatch_size {mbs}"
        )
    p["micro_batch_size"] = mbs
    t.update(global_batch_size=gbs, seq_length=job.int(s, "seq_len", 2048, least=1))
    steps = job.get(s, "steps", None)
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        t["tokens"] = steps * gbs * t["seq_length"]
    opt = job.get("optimizer", "name", "AdamW")
    if opt not in ("AdamW", "Adam"):
        raise PerfModelError(f"{job.label}: [optimizer] name {opt!r}: perfmodel models Adam(W)")
    t["optimizer"] = "adam"


def _precision(job: _Job, out: Imported) -> None:
    t = out.plan["training"]
    param = job.get("training", "mixed_precision_param", "bfloat16")
    if param not in ("bfloat16", "float32"):
        raise PerfModelError(
            f"{job.label}: [training] mixed_precision_param {param!r}: bfloat16 or float32"
        )
    t["dtype"] = "bf16" if param == "bfloat16" else "fp32"
    # MixedPrecisionPolicy(reduce_dtype=...): fp32 doubles the reduce-scatter's bytes; the
    # profile's default is torchtitan's, float32
    reduce = job.get("training", "mixed_precision_reduce", None)
    if reduce is not None:
        if reduce not in ("float32", "bfloat16"):
            raise PerfModelError(
                f"{job.label}: [training] mixed_precision_reduce {reduce!r}: float32 or bfloat16"
            )
        t["reduce_dtype"] = "bf16" if reduce == "bfloat16" else "fp32"
    converters = job.get("model", "converters", [])
    if not isinstance(converters, list) or not all(isinstance(c, str) for c in converters):
        raise PerfModelError(
            f'{job.label}: [model] converters must be a list of names, e.g. ["float8"]; got'
            f" {converters!r}"
        )
    legacy = job.get("float8", "enable_float8_linear", False)  # torchtitan 2024-12
    fp8 = legacy or any(c in ("float8", "quantize.linear.float8") for c in converters)
    mx = any(c in ("mx", "quantize.linear.mx") for c in converters)
    other = [
        c
        for c in converters
        if c not in ("float8", "quantize.linear.float8", "mx", "quantize.linear.mx")
        and not c.startswith("quantize.grouped_mm.")
    ]
    if other:
        raise PerfModelError(f"{job.label}: [model] converters {other}: not modelled")
    if fp8 and mx:
        raise PerfModelError(
            f"{job.label}: [model] converters: float8 and mx both convert the linear layers;"
            " keep one"
        )
    sec = "float8" if legacy else "quantize.linear.float8"
    if fp8:  # the converter's options (unread when it is off: ignored, _account)
        recipe = job.get(sec, "recipe_name", None)
        gather = job.get(sec, "enable_fsdp_float8_all_gather", False)
        job.get(sec, "precompute_float8_dynamic_scale_for_fsdp", False)
        filters = job.get(sec, "filter_fqns", [])
        if recipe not in (None, "tensorwise"):
            raise PerfModelError(
                f"{job.label}: [{sec}] recipe_name {recipe!r}: torchao's tensorwise recipe is"
                " modelled, rowwise scaling is not"
            )
        t.update(dtype="fp8", fp8_recipe="tensorwise", fp8_param_gather=bool(gather))
        if any(f not in ("output", "auto_filter_small_kn") for f in filters):
            out.assumed.append(
                f"[{sec}] filter_fqns {filters}: every decoder linear layer in FP8 (only the"
                " output layer stays in BF16 in the model)"
            )
    if mx:
        mx_recipe = job.get("quantize.linear.mx", "recipe_name", "mxfp8_cublas")
        if not str(mx_recipe).startswith("mxfp8"):
            raise PerfModelError(
                f"{job.label}: [quantize.linear.mx] recipe_name {mx_recipe!r}: MXFP8 is modelled"
            )
        job.get("quantize.linear.mx", "filter_fqns", ["output"])
        t["dtype"] = "mxfp8"
    # torch.compile of the model: [compile] enable with "model" in components (2025-), or
    # [training] compile (torchtitan 2024-12, the fsdp profile's)
    compiled, legacy_compile = job.get("compile", "enable", False), job.get("training", "compile")
    parts = job.get("compile", "components", ["model", "loss"])
    for key, v in (("[compile] enable", compiled), ("[training] compile", legacy_compile)):
        if v is not None and not isinstance(v, bool):
            raise PerfModelError(f"{job.label}: {key} must be true or false, got {v!r}")
    t["torch_compile"] = (bool(compiled) and "model" in parts) or bool(legacy_compile)
    if compiled and set(parts) != {"model", "loss"}:  # the plan's torch_compile is both
        out.assumed.append(
            f"[compile] components {parts}: costed as "
            + ("the model and the loss compiled" if "model" in parts else "nothing compiled")
            + " (perfmodel's torch_compile compiles both)"
        )


def _recompute(job: _Job, out: Imported) -> None:
    s = "activation_checkpoint"
    mode = job.get(s, "mode", "selective")
    option = str(job.get(s, "selective_ac_option", "2"))  # torchtitan's default: every 2nd layer
    job.get(s, "memory_budget", 0.5)
    if mode == "none":
        recompute = "none"
    elif mode == "full" or (mode == "selective" and option == "1"):
        recompute = "full"  # selective_ac_option 1: every layer checkpointed whole
    elif mode == "selective" and option == "op":
        recompute = "selective"  # op-level SAC: the fsdp profile's recompute_modules op_sac
    elif mode == "selective" and option.isdigit() and int(option) > 1:
        # torchtitan's _apply_ac_to_transformer_block: every N-th block wrapped in
        # checkpoint_wrapper (per-layer SAC); the plan's layer_sac with checkpoint_every_n_layers
        recompute = "selective"
        out.plan["training"].update(
            recompute_modules=["layer_sac"], checkpoint_every_n_layers=int(option)
        )
    elif mode == "selective":
        raise PerfModelError(
            f"{job.label}: [activation_checkpoint] selective_ac_option {option!r}: torchtitan"
            " takes 'op' or a whole number N (every N-th layer checkpointed; 1: every layer)"
        )
    else:
        raise PerfModelError(
            f"{job.label}: [activation_checkpoint] mode {mode!r}: not modelled; use none,"
            " selective or full"
        )
    out.plan["parallel"]["recompute"] = recompute
