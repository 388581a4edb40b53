"""The rules of what a framework can run (check's PM110), as data: the profile of
perfmodel/specs/framework.py says which schedules, ZeRO stages and parallelisms it runs, and each
rule names the framework that would run what this one cannot. Part of engine/rule_table.RULES."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.engine.facts import (
    V_SHAPED_NAMES,
    Facts,
    Rule,
    as_array,
    dualpipe,
    given,
    v_shaped,
    vp_above_1,
)
from perfmodel.specs.framework import PROFILES

AFTER_1F1B = ("zb-h1", "zb-h2", "zbv", "v-half", "v-min", "dualpipev", "interleaved-zb")


def _tt_ep(f: Facts) -> Any:
    """Where torchtitan's ParallelDims._validate accepts ep and etp (torchtitan/distributed/
    parallel_dims.py, commit 0119de15): etp = tp, ep % cp = 0 and (dp_shard cp) % ep = 0; or etp
    = 1, ep % (cp tp) = 0 and (dp_shard cp tp) % ep = 0."""
    tp, cp, ep, etp = (as_array(x) for x in (f.tp, f.cp, f.ep, f.etp))
    shard = as_array(f.dp if f.dp_shard is None else f.dp_shard)
    shard = np.where(shard > 0, shard, as_array(f.dp))
    as_tp = (etp == tp) & (ep % cp == 0) & ((shard * cp) % ep == 0)
    as_one = (etp == 1) & (ep % (cp * tp) == 0) & ((shard * cp * tp) % ep == 0)
    return as_tp | as_one


def runs_it(schedule: str) -> list[str]:
    """The profiles whose framework runs ``schedule``."""
    return [name for name, p in PROFILES.items() if schedule in p["schedules"]] or ["none"]


FRAMEWORK_RULES: tuple[Rule, ...] = (
    Rule(
        "PM110",
        "parallel.vp",
        ("vp",),
        # DeepSpeed's PipelineEngine runs one schedule, TrainSchedule (1F1B), with one chunk per
        # stage (deepspeed/runtime/pipe/schedule.py); Megatron-LM has interleaved 1F1B since 2021
        # (a plan that leaves the schedule free may take vp 2 for a V-shaped one its framework runs)
        lambda f: vp_above_1(f)
        & ~v_shaped(f)
        & (not f.profile["interleaved"])
        & ~(
            (f.schedule is None)
            & (as_array(f.vp) == 2)
            & any(s in f.profile["schedules"] for s in V_SHAPED_NAMES)
        ),
        lambda f: (
            f"vp({f.vp}) needs the interleaved schedule, which {f.framework}'s pipeline engine does"
            " not run (one chunk per stage, 1F1B); use vp 1"
        ),
        "micro",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.schedule",
        ("schedule",),
        lambda f: dualpipe(f) & ("dualpipe" not in f.profile["schedules"]),
        lambda f: (
            f"{f.framework} does not run DualPipe (it runs"
            f" {', '.join(f.profile['schedules']) or 'no pipeline'}): DeepSeek's bidirectional"
            " pipeline is HAI-LLM's (framework: hai-llm) and deepseek-ai/DualPipe's; use"
            " schedule 1f1b or interleaved, or framework: hai-llm"
        ),
        "framework",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.schedule",
        ("schedule",),
        # the zero-bubble family and DualPipeV run where the profile's framework ships them
        lambda f: as_array(
            np.isin(as_array(f.schedule), AFTER_1F1B)
            & ~np.isin(as_array(f.schedule), f.profile["schedules"])
        ),
        lambda f: (
            f"{f.framework} does not run schedule {f.schedule} (it runs"
            f" {', '.join(f.profile['schedules']) or 'no pipeline'}); frameworks that do:"
            f" {', '.join(runs_it(str(f.schedule)))} (docs/schedules.md)"
        ),
        "framework",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.zero_stage",
        ("zero_stage",),
        lambda f: ~np.isin(as_array(f.zero_stage), f.profile["zero_stages"]),
        lambda f: (
            f"{f.framework} does not run ZeRO-{f.zero_stage}: it runs stages"
            f" {', '.join(str(z) for z in f.profile['zero_stages'])} (Megatron's distributed"
            " optimizer is ZeRO-1, Megatron-FSDP ZeRO-3; ZeRO-2 is DeepSpeed's); pick one of those"
            " or another framework"
        ),
        "framework",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.zero_stage",
        ("zero_stage", "pp"),
        lambda f: (as_array(f.zero_stage) >= 2)
        & (as_array(f.pp) > 1)
        & (not f.profile["sharded_pipeline"]),
        lambda f: (
            f"ZeRO-{f.zero_stage} with pp({f.pp}) > 1 does not run under {f.framework}:"
            " DeepSpeed's PipelineEngine accepts ZeRO-1 only, and Megatron-FSDP has no pipeline"
            " parallelism; use zero_stage 1, pp 1, or framework: fsdp (FSDP2 with"
            " torch.distributed.pipelining)"
        ),
        "framework",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.tp",
        ("tp",),
        lambda f: (as_array(f.tp) > 1) & (not f.profile["tensor_parallel"]),
        lambda f: (
            f"{f.framework} has no tensor parallelism (tp({f.tp})); use tp 1, or framework:"
            " fsdp (torchtitan's DTensor TP)"
        ),
        "tp",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.pp",
        ("pp",),
        lambda f: (as_array(f.pp) > 1) & (not f.profile["pipeline"]),
        lambda f: (
            f"{f.framework} has no pipeline parallelism (pp({f.pp})); use pp 1, or framework:"
            " fsdp (torchtitan's torch.distributed.pipelining)"
        ),
        "pair",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.dp_shard",
        ("dp_shard", "dp", "zero_stage"),
        lambda f: (f.dp_shard is not None)
        & (as_array(f.dp_shard if f.dp_shard is not None else 0) != as_array(f.dp))
        & ((not f.profile["hsdp"]) | (as_array(f.zero_stage) < 2))
        & ((not f.profile["zero1_shard_group"]) | (as_array(f.zero_stage) != 1)),
        lambda f: (
            f"dp_shard({f.dp_shard}) < dp({f.dp}) is HSDP, which needs ZeRO-2/3 under a framework"
            " that runs it (fsdp, fsdp1), or a ZeRO-1 sharding group (megatron-core's"
            f" --num-distributed-optimizer-instances, internevo's zero1), not ZeRO-{f.zero_stage}"
            f" under {f.framework}; drop dp_shard, or set zero_stage 3 and framework: fsdp"
        ),
        "framework",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.pp",
        ("pp", "first_stage_layers", "last_stage_layers"),
        lambda f: (not f.profile["uneven_stages"])
        & (
            (f.layers % np.maximum(as_array(f.pp), 1) != 0)
            | given(f.first_stage_layers)
            | given(f.last_stage_layers)
        ),
        lambda f: (
            f"{f.framework} splits the layers evenly: num_layers({f.layers}) over pp({f.pp}) stages"
            " needs an uneven split (framework: megatron-core takes one); pick pp dividing the"
            " layers"
        ),
        "pair",
        "the framework cannot run it",
    ),
    # two rules, each masking the search where its knob is built (cp with tp and pp, ep after)
    Rule(
        "PM110",
        "parallel.cp",
        ("cp",),
        lambda f: (as_array(f.cp) > 1) & (not f.profile["context_parallel"]),
        lambda f: (
            f"{f.framework} has no context parallelism (cp({f.cp})); use cp 1, or framework:"
            " megatron-core"
        ),
        "pair",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.ep",
        ("ep",),
        lambda f: (as_array(f.ep) > 1) & (not f.profile["expert_parallel"]),
        lambda f: (
            f"{f.framework} has no expert parallelism (ep({f.ep})); use ep 1, or framework:"
            " megatron-core"
        ),
        "expert",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.sequence_parallel",
        ("sequence_parallel",),
        lambda f: as_array(f.sequence_parallel).astype(bool)
        & (not f.profile["sequence_parallelism"]),
        lambda f: (
            f"{f.framework} has no sequence parallelism (sequence_parallel true): it came with"
            " Megatron-LM's 2022 release (Korthikanti et al. 2022, --sequence-parallel); set"
            " sequence_parallel false, or framework: megatron-2022 or megatron-core"
        ),
        "framework",
        "{framework} has no sequence parallelism (PM110: Megatron-LM 2022 on)",
    ),
    Rule(
        "PM110",
        "parallel.recompute",
        ("recompute",),
        lambda f: (as_array(f.recompute) == "selective") & (not f.profile["selective_recompute"]),
        lambda f: (
            f"{f.framework} has no selective recompute (recompute selective): it came with"
            " Megatron-LM's 2022 release (Korthikanti et al. 2022, --recompute-granularity"
            " selective); use recompute full or none, or framework: megatron-2022 or megatron-core"
        ),
        "framework",
        "{framework} has no selective recompute (PM110: Megatron-LM 2022 on)",
    ),
    Rule(
        "PM110",
        "parallel.etp",
        ("ep", "etp", "tp", "cp", "dp"),
        lambda f: (as_array(f.ep) > 1) & (f.profile["ep_folding"] == "torchtitan") & ~_tt_ep(f),
        lambda f: (
            f"ep({f.ep}) with etp({f.etp}) does not fold into {f.framework}'s mesh: torchtitan"
            " runs etp = tp or etp = 1, with ep a multiple of cp (etp = tp) or of tp x cp"
            " (etp = 1) that divides dp_shard x cp (x tp) (parallel_dims.py); set etp 1 or"
            f" etp {f.tp}, and such an ep"
        ),
        "expert",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.cp_comm_type",
        ("cp",),
        lambda f: (as_array(f.cp) > 1)
        & bool(f.profile["cp_comm_types"])
        & (f.cp_comm not in f.profile["cp_comm_types"]),
        lambda f: (
            f"cp_comm_type {f.cp_comm} with cp({f.cp}): {f.framework} exchanges by"
            f" {', '.join(f.profile['cp_comm_types'])} only; set cp_comm_type"
            f" {f.profile['cp_comm_types'][0]}"
        ),
    ),
)
