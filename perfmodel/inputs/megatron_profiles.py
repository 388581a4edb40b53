"""Which framework a Megatron-style launch runs under, written and read: Megatron-DeepSpeed's
--deepspeed and --zero-stage (microsoft/Megatron-DeepSpeed, megatron/arguments.py), Megatron-FSDP's
--data-parallel-sharding-strategy, and perfmodel's own comment line naming an older Megatron-LM
profile (megatron-2021, megatron-2022), which the arguments alone cannot tell apart from today's
Megatron-LM (the shell skips the comment; `import megatron` reads it)."""

from __future__ import annotations

import re

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron_args import one_value
from perfmodel.specs.framework import PROFILES

MARKER = re.compile(r"^[ \t]*#[ \t]*perfmodel:[ \t]*framework[ \t]+(\S+)[ \t]*$", re.MULTILINE)
# the NVLink domain (system.nvlink_domain), which no launch argument carries
DOMAIN = re.compile(r"^[ \t]*#[ \t]*perfmodel:[ \t]*nvlink_domain[ \t]+(\d+)\b", re.MULTILINE)


def domain_line(nvlink_domain: int | None) -> list[str]:
    """The comment that carries a plan's NVLink domain (a GB200 NVL72 rack) through a launch."""
    return (
        [f"# perfmodel: nvlink_domain {nvlink_domain} (GPUs on one NVLink; no Megatron-LM flag)"]
        if nvlink_domain
        else []
    )


def count_of(text: str, key: str) -> int | None:
    """A count a perfmodel comment line of a launch file names (``# perfmodel: num_gpus 64``,
    gpus_per_node, nvlink_domain: what `plan --emit` writes where no argument carries it), or
    None."""
    found = re.findall(rf"^[ \t]*#[ \t]*perfmodel:[ \t]*{key}[ \t]+(\d+)\b", text, re.MULTILINE)
    return int(found[-1]) if found else None


def count_lines(num_gpus: int, gpus_per_node: int) -> list[str]:
    """The comment lines that carry the GPU count and a node size other than 8 to `import`."""
    lines = [f"# perfmodel: num_gpus {num_gpus} (torchrun's --nproc_per_node x --nnodes)"]
    if gpus_per_node != 8:
        lines.append(f"# perfmodel: gpus_per_node {gpus_per_node} (torchrun's --nproc_per_node)")
    return lines


def domain_of(text: str) -> int | None:
    """The NVLink domain a launch file's perfmodel comment names, or None."""
    found = DOMAIN.findall(text)
    return int(found[-1]) if found else None


def marker_line(framework: str) -> list[str]:
    """The comment that carries an older Megatron-LM profile through a launch file."""
    return (
        []
        if framework in ("megatron-core", "deepspeed")
        else [f"# perfmodel: framework {framework}"]
    )


def framework_of(text: str, args: dict) -> str:
    """The profile a launch file runs under: deepspeed with --deepspeed, else the marker's, else
    megatron-core (today's Megatron-LM)."""
    found = MARKER.findall(text)
    if "--deepspeed" in args:
        if found and found[-1] != "deepspeed":
            raise PerfModelError(
                f"--deepspeed and the comment 'perfmodel: framework {found[-1]}' disagree; keep one"
            )
        return "deepspeed"
    if not found:
        return "megatron-core"
    name = found[-1]
    if name not in PROFILES:
        raise PerfModelError(
            f"comment 'perfmodel: framework {name}': unknown framework; perfmodel knows"
            f" {', '.join(PROFILES)}"
        )
    return name


def cp_args(c: dict, framework: str) -> list[str]:
    """Context parallelism as the framework's arguments: Megatron-DeepSpeed's Ulysses
    (--ds-sequence-parallel-size, all-to-all), or Megatron-LM's --context-parallel-size with its
    --cp-comm-type."""
    if c.get("cp", 1) == 1:
        return []
    if framework == "deepspeed":
        return [f"--ds-sequence-parallel-size {c['cp']}"]
    return [f"--context-parallel-size {c['cp']}", f"--cp-comm-type {c['cp_comm_type']}"]


def zero_args(zero_stage: int, framework: str) -> list[str]:
    """A ZeRO stage as the framework's arguments: Megatron-DeepSpeed's --zero-stage; Megatron-LM's
    distributed optimizer (ZeRO-1) or Megatron-FSDP's sharding strategy (ZeRO-2, ZeRO-3)."""
    if framework == "deepspeed":
        return ["--deepspeed", f"--zero-stage {zero_stage}"]
    if zero_stage == 1:
        return ["--use-distributed-optimizer"]
    if zero_stage > 1:
        return [
            "--use-megatron-fsdp",
            "--data-parallel-sharding-strategy "
            + {2: "optim_grads", 3: "optim_grads_params"}[zero_stage],
        ]
    return []


def read_sharding(args: dict, parallel: dict, ignored: list[str], assumed: list[str]) -> None:
    """The ZeRO stage of a launch: --zero-stage under --deepspeed (the ZeRO JSON of
    --deepspeed_config is not read: Megatron-DeepSpeed's example scripts write --zero-stage into
    it); Megatron-FSDP (--use-megatron-fsdp) by --data-parallel-sharding-strategy: no_shard,
    optim (ZeRO-1), optim_grads (ZeRO-2), optim_grads_params (ZeRO-3)."""
    if "--deepspeed" in args:
        if "--ds-sequence-parallel-size" in args:
            size = one_value(args, "--ds-sequence-parallel-size")
            if not size.isdigit() or int(size) < 1:
                raise PerfModelError(f"--ds-sequence-parallel-size {size}: not a whole number >= 1")
            parallel["cp"] = int(size)
            parallel["cp_comm_type"] = "a2a"
        stage = one_value(args, "--zero-stage") if "--zero-stage" in args else "0"
        if stage not in ("0", "1", "2", "3"):
            raise PerfModelError(f"--zero-stage {stage}: DeepSpeed's ZeRO stages are 0 to 3")
        parallel["zero_stage"] = int(stage)
        for flag in ("--deepspeed_config", "--deepspeed-config"):
            if flag in args:
                assumed.append(f"{flag} not read: the ZeRO stage is --zero-stage's ({stage})")
        return
    if "--zero-stage" in args:
        ignored.append("--zero-stage (read only with --deepspeed)")
    strategy = (
        one_value(args, "--data-parallel-sharding-strategy")
        if "--data-parallel-sharding-strategy" in args
        else None
    )
    if "--use-megatron-fsdp" not in args:
        if strategy:
            ignored.append("--data-parallel-sharding-strategy (read only with --use-megatron-fsdp)")
        return
    stage_of = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
    parallel["zero_stage"] = stage_of[strategy or "optim_grads_params"]


def read_cp_comm(args: dict, parallel: dict, assumed: list[str]) -> None:
    """--cp-comm-type (Megatron-Core's context parallelism, arguments.py: p2p, a2a, allgather,
    a2a+p2p; one value, or one a layer): p2p (the K/V ring) and a2a (Ulysses) are modelled, the
    others are refused by name; without it, with cp > 1, Megatron-LM's default p2p, said."""
    if "--cp-comm-type" in args:
        kinds = set(args["--cp-comm-type"])
        known = {"p2p", "a2a", "allgather", "a2a+p2p"}
        if not kinds or not kinds <= known:
            raise PerfModelError(
                f"--cp-comm-type {' '.join(args['--cp-comm-type'])}: Megatron-LM accepts"
                " p2p, a2a, allgather and a2a+p2p"
            )
        if len(kinds) > 1 or kinds - {"p2p", "a2a"}:
            raise PerfModelError(
                f"--cp-comm-type {' '.join(sorted(kinds))}: perfmodel models one of p2p (the K/V"
                " ring) and a2a (Ulysses' all-to-all) for every layer; plan with one of them"
            )
        parallel["cp_comm_type"] = kinds.pop()
    elif parallel.get("cp", 1) > 1 and "cp_comm_type" not in parallel:
        parallel["cp_comm_type"] = "p2p"
        assumed.append("no --cp-comm-type: p2p (the K/V ring), Megatron-LM's default")
