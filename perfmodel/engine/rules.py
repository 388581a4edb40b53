"""The validity rules of a configuration, written once: `check` and `estimate` read their messages,
the search applies them as vectorized masks and counts what each rejects
(perfmodel/engine/search.py).

Each rule says what it reads; a knob not known yet (None, a free knob) skips the rules that read it.
The rule IDs are those of `perfmodel check` (perfmodel/review/check.py).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.engine.facts import Facts, Rule
from perfmodel.engine.rule_table import KNOB_RULES, RULES

if TYPE_CHECKING:
    from perfmodel.specs import Config, Model, Plan, System, Training


def broken_rules(
    f: Facts, rules: tuple[Rule, ...] = RULES, cross_node_tp: bool = True
) -> list[Rule]:
    """The rules one configuration breaks (PM201 only when cross-node TP is not allowed)."""
    out = []
    for r in rules:
        if r.id == "PM201" and cross_node_tp:
            continue
        if any(getattr(f, k) is None for k in r.reads):
            continue
        if bool(np.any(r.broken(f))):
            out.append(r)
    return out


class Reason(str):
    """A search rejection: its text, as printed, carrying the ID of the rule it counts under (the
    stable identifier `plan --json` gives beside the text) and the rule's message for the first
    configuration it set aside (what a refusal quotes; '' when none was kept)."""

    rule: str
    example: str

    def __new__(cls, text: str, rule: str, example: str = "") -> Reason:
        obj = super().__new__(cls, text)
        obj.rule = rule
        obj.example = example
        return obj


def one_row(f: Facts, i: int) -> Facts:
    """The facts of configuration ``i`` alone (the knobs that are arrays, at row i)."""
    changes = {}
    for fld in dataclasses.fields(f):
        v = getattr(f, fld.name)
        if isinstance(v, np.ndarray) and v.ndim == 1 and v.size > i:
            changes[fld.name] = v[i].item()
    return dataclasses.replace(f, **changes)


def apply_masks(
    stage: str,
    f: Facts,
    alive: Array,
    counts: dict[str, int],
    unit: str,
    cross_node_tp: bool = True,
) -> Array:
    """The search's side of the rules: drop the candidates of ``stage`` that break one, counting
    each under the first rule it breaks (``search_reason (unit)``)."""
    alive = np.asarray(alive, dtype=bool).copy()
    for r in RULES:
        if r.search_stage != stage or (r.id == "PM201" and cross_node_tp):
            continue
        hit = np.asarray(r.broken(f), dtype=bool) & alive
        n = int(hit.sum())
        if n:
            suffix = "; --allow-cross-node-tp" if r.id == "PM201" else ""
            # a reason may name the plan's framework profile ({framework})
            reason = r.search_reason.replace("{framework}", f.framework)
            key = Reason(f"{reason} ({unit}{suffix})", r.id)
            if key not in counts:
                key.example = r.message(one_row(f, int(np.flatnonzero(hit)[0])))
            counts[key] = counts.get(key, 0) + n
        alive &= ~hit
    return alive


def facts(
    model: Model,
    system: System,
    global_batch_size: int,
    seq_length: int,
    training: Training | None = None,
    **knobs: Any,
) -> Facts:
    """The Facts of a model, a cluster, a batch and (some of) the knobs."""
    fused = True if training is None else bool(training.flash_attention)
    framework = "megatron-core" if training is None else training.framework
    return Facts(
        model.num_attention_heads,
        model.groups,
        model.num_layers,
        system.num_gpus,
        system.domain,
        global_batch_size,
        seq_length,
        model.num_moe_experts or 0,
        (model.moe_ffn_hidden_size or model.ffn) if model.is_moe else 0,
        fused,
        knobs.pop("cp_comm", "p2p"),
        framework=framework,
        a2a_overlap=bool(
            knobs.pop("a2a_overlap", training is not None and training.moe_a2a_overlap)
        ),
        dispatcher=knobs.pop(
            "dispatcher", "alltoall" if training is None else training.moe_token_dispatcher_type
        ),
        **knobs,
    )


def config_problems(
    plan: Plan, cfg: Config, allow_cross_node_tp: bool = True
) -> list[tuple[str, str, str]]:
    """Every rule one resolved configuration breaks, as (rule ID, field, message naming the factors
    and the fix)."""
    f = facts(
        plan.model,
        plan.system,
        cfg.global_batch_size,
        plan.seq_length,
        plan.training,
        cp_comm=cfg.cp_comm_type,
        a2a_overlap=cfg.moe_a2a_overlap,
        dispatcher=cfg.moe_token_dispatcher_type,
        recompute=cfg.recompute,
        tp=cfg.tp,
        pp=cfg.pp,
        dp=cfg.dp,
        cp=cfg.cp,
        ep=cfg.ep,
        etp=cfg.etp,
        vp=cfg.vp,
        micro_batch_size=cfg.micro_batch_size,
        sequence_parallel=cfg.sequence_parallel,
        schedule=cfg.schedule,
        first_stage_layers=cfg.first_stage_layers,
        last_stage_layers=cfg.last_stage_layers,
        zero_stage=cfg.zero_stage,
        dp_shard=cfg.dp_shard or cfg.dp,
        dp_replicate=plan.parallel.dp_replicate,
    )
    return [
        (r.id, r.field_of(f), r.message(f))
        for r in broken_rules(f, cross_node_tp=allow_cross_node_tp)
    ]


def knob_contradictions(
    tp: int | None,
    pp: int | None,
    vp: int | None,
    sequence_parallel: bool | None,
    schedule: str | None,
) -> list[tuple[str, str]]:
    """Knobs that contradict one another (rule PM107), as (field, message); a knob left as None
    (free) is not checked."""
    f = Facts(
        1,
        1,
        1,
        1,
        1,
        1,
        tp=tp,
        pp=pp,
        vp=vp,
        sequence_parallel=sequence_parallel,
        schedule=schedule,
    )
    return [(r.field_of(f), r.message(f)) for r in broken_rules(f, KNOB_RULES)]
