"""The validity rules of a configuration as data: what each reads (the facts of a configuration,
numpy arrays over configurations), when it is broken, and its message with the fix.
perfmodel/engine/rules.py applies them; the rule IDs are those of `perfmodel check`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from perfmodel.engine.facts import (
    Facts,
    Rule,
    as_array,
    dualpipe,
    dualpipev,
    given,
    interleaved,
    middle_layers,
    middle_stages,
    product_text,
    v_shaped,
    vp_above_1,
)
from perfmodel.engine.framework_rules import FRAMEWORK_RULES

__all__ = ["KNOB_RULES", "RULES", "Facts", "Rule"]


def _only_where(rows: Any, broken: Callable[[], Any]) -> Any:
    """``rows & broken()``, broken() worked out only where some row is one of ``rows`` (a rule
    of one schedule, over a search's rows of others)."""
    rows = np.asarray(rows, dtype=bool)
    return rows & broken() if rows.any() else rows


def _replicas_text(f: Facts) -> str:
    """PM102 where dp is dp_replicate x dp_shard, in those names (dp_shard defaults to 1)."""
    shard = f.dp // f.dp_replicate
    rest = f.num_gpus // max(int(f.tp * f.pp * f.cp), 1)
    fix = (
        f"set dp_shard {rest // f.dp_replicate}"
        if rest % f.dp_replicate == 0 and rest >= f.dp_replicate
        else f"pick dp_replicate x dp_shard = {rest}"
    )
    return (
        f"dp_replicate({f.dp_replicate}) x dp_shard({shard}) = {f.dp} ranks, {f.num_gpus} GPUs"
        f" at tp({f.tp}) * pp({f.pp}) * cp({f.cp}); {fix}"
    )


RULES: tuple[Rule, ...] = (
    Rule(
        "PM102",
        lambda f: "parallel.dp" if f.dp_replicate is None else "parallel.dp_replicate",
        ("tp", "pp", "dp", "cp"),
        lambda f: as_array(f.tp) * f.pp * f.dp * f.cp != f.num_gpus,
        lambda f: (
            f"{product_text(f)} != num_gpus({f.num_gpus}); choose dp = num_gpus / (tp * pp * cp)"
            if f.dp_replicate is None
            else _replicas_text(f)
        ),
    ),
    Rule(
        "PM102",
        "parallel.dp_shard",
        ("dp_shard", "dp"),
        # HSDP's shard groups tile the dp ranks: dp = dp_replicate x dp_shard (torchtitan's
        # ParallelDims._validate), whether dp is given or resolved from num_gpus
        lambda f: as_array(f.dp) % np.maximum(as_array(f.dp_shard), 1) != 0,
        lambda f: (
            f"dp_shard({f.dp_shard}) does not divide dp({f.dp}): the shard groups tile the dp"
            " ranks (dp = dp_replicate x dp_shard); pick a divisor of dp"
        ),
    ),
    Rule(
        "PM103",
        "parallel.tp",
        ("tp",),
        lambda f: f.heads % as_array(f.tp) != 0,
        lambda f: (
            f"num_attention_heads({f.heads}) is not divisible by tp({f.tp}); pick tp among the "
            f"divisors of {f.heads}"
        ),
        "tp",
        "tp does not divide the attention heads / query groups",
    ),
    Rule(
        "PM103",
        "parallel.tp",
        ("tp",),
        # Megatron-Core splits the KV heads over the TP ranks, divide(num_query_groups, tp)
        # (megatron/core/transformer/attention.py); replicating them is what inference engines do
        lambda f: (f.heads % as_array(f.tp) == 0) & (f.groups % as_array(f.tp) != 0),
        lambda f: (
            f"num_query_groups({f.groups}) is not divisible by tp({f.tp}): Megatron-Core splits"
            " the KV heads over the TP ranks (it does not replicate them); pick tp dividing"
            f" {f.groups}"
        ),
        "tp",
        "tp does not divide the attention heads / query groups",
    ),
    Rule(
        "PM104",
        "parallel.vp",
        ("pp", "vp"),
        lambda f: (as_array(f.vp) > 1) & (f.layers + 2 < as_array(f.pp) * f.vp),
        lambda f: (
            f"pp({f.pp}) * vp({f.vp}) = {f.pp * f.vp} virtual stages exceed num_layers({f.layers})"
            " + 2: every chunk needs a layer, or the embedding or the loss (Megatron-Core's"
            " account_for_embedding/loss_in_pipeline_split)"
        ),
        "micro",
        "more virtual stages than layers",
    ),
    Rule(
        "PM104",
        "parallel.pp",
        ("pp",),
        lambda f: as_array(f.pp) > f.layers,
        lambda f: (
            f"pp({f.pp}) exceeds num_layers({f.layers}): every stage needs at least one layer"
        ),
        "pair",
        "pp does not divide the layers",
    ),
    Rule(
        "PM104",
        lambda f: "parallel.decoder_"
        + ("first" if np.any(given(f.first_stage_layers)) else "last")
        + "_pipeline_num_layers",
        ("pp", "first_stage_layers", "last_stage_layers"),
        lambda f: (given(f.first_stage_layers) | given(f.last_stage_layers))
        & (
            (as_array(f.pp) < 2)
            | (
                as_array(f.first_stage_layers) + f.last_stage_layers
                > f.layers - np.maximum(as_array(f.pp) - 2, 0)
            )
            | (
                (as_array(f.pp) == 2)
                & given(f.first_stage_layers)
                & given(f.last_stage_layers)
                & (as_array(f.first_stage_layers) + f.last_stage_layers != f.layers)
            )
        ),
        lambda f: (
            f"first/last stage layers ({f.first_stage_layers}, {f.last_stage_layers}) do not fit"
            f" pp({f.pp}) stages of num_layers({f.layers}): they need pp >= 2 and leave each middle"
            " stage a layer; give pp >= 2 and first + last stage layers at most num_layers - (pp -"
            " 2)"
        ),
        "pair",
        "pp does not divide the layers",
    ),
    Rule(
        "PM104",
        "parallel.vp",
        ("pp", "vp", "first_stage_layers", "last_stage_layers"),
        # the uneven-split form of the rule above: each of a stage's vp chunks holds a layer, the
        # embedding (first stage) or the loss (last stage); fewest on a middle stage:
        # floor(rest / stages)
        lambda f: (given(f.first_stage_layers) | given(f.last_stage_layers))
        & vp_above_1(f)
        & (
            (given(f.first_stage_layers) & (as_array(f.first_stage_layers) + 1 < as_array(f.vp)))
            | (given(f.last_stage_layers) & (as_array(f.last_stage_layers) + 1 < as_array(f.vp)))
            | (
                (middle_stages(f) > 0)
                & (middle_layers(f) // np.maximum(middle_stages(f), 1) < as_array(f.vp))
            )
        ),
        lambda f: (
            f"vp({f.vp}) chunks per stage with first/last stage layers ({f.first_stage_layers},"
            f" {f.last_stage_layers}) of num_layers({f.layers}) over pp({f.pp}): a stage has"
            " fewer layers than chunks (each chunk needs a layer, or the embedding or the loss);"
            " pick a smaller vp"
        ),
        "micro",
        "more virtual stages than layers",
    ),
    Rule(
        "PM105",
        "training.global_batch_size",
        ("dp", "micro_batch_size"),
        lambda f: f.global_batch_size % (as_array(f.dp) * f.micro_batch_size) != 0,
        lambda f: (
            f"global_batch_size({f.global_batch_size}) is not divisible by dp({f.dp}) * "
            f"micro_batch_size({f.micro_batch_size}) = {f.dp * f.micro_batch_size}"
        ),
        "batch",
        "global batch not divisible by dp",
    ),
    Rule(
        "PM106",
        "parallel.vp",
        ("pp", "vp", "dp", "micro_batch_size"),
        lambda f: (as_array(f.vp) > 1)
        & ~v_shaped(f)
        & (as_array(f.pp) > 1)
        & (f.m % as_array(f.pp) != 0),
        lambda f: (
            f"interleaved schedule needs the micro-batch count m({f.m}) to be a multiple of "
            f"pp({f.pp}); change global_batch_size or micro_batch_size"
        ),
        "micro",
        "interleaving needs pp > 1 and m a multiple of pp",
    ),
    Rule(
        "PM106",
        "parallel.pp",
        ("pp", "dp", "micro_batch_size", "schedule"),
        # DualPipe.step asserts an even rank count and num_chunks even and >= 2 x ranks
        # (deepseek-ai/DualPipe, dualpipe.py): half the micro-batches enter from each end
        lambda f: _only_where(
            dualpipe(f),
            lambda: (as_array(f.pp) < 2)
            | (as_array(f.pp) % 2 != 0)
            | (f.m % 2 != 0)
            | (f.m < 2 * f.pp),
        ),
        lambda f: (
            f"schedule dualpipe needs an even pp >= 2 (pp({f.pp})) and an even micro-batch count"
            f" m >= 2 pp (m({f.m})): half the micro-batches enter from each end"
            " (deepseek-ai/DualPipe); change pp, global_batch_size or micro_batch_size"
        ),
        "schedule",
        "DualPipe needs an even pp and an even m >= 2 pp",
    ),
    Rule(
        "PM107",
        "training.moe_a2a_overlap",
        ("schedule",),
        lambda f: dualpipe(f) & f.a2a_overlap,
        lambda f: (
            "moe_a2a_overlap is Megatron-Core's expert all-to-all overlap for its 1F1B schedules;"
            " schedule dualpipe overlaps the all-to-all in its own F&B pairs: drop"
            " moe_a2a_overlap"
        ),
        "schedule",
        "DualPipe beside moe_a2a_overlap",
    ),
    Rule(
        "PM107",
        "training.moe_a2a_overlap",
        ("ep", "pp", "vp"),
        # megatron/training/arguments.py asserts each for --overlap-moe-expert-parallel-comm
        lambda f: as_array(f.a2a_overlap)
        & (
            (as_array(f.ep) == 1)
            | ((as_array(f.pp) > 1) & (as_array(f.vp) == 1))
            | (f.dispatcher == "allgather")
            | (f.recompute == "full")
        ),
        lambda f: (
            "moe_a2a_overlap (Megatron-Core's --overlap-moe-expert-parallel-comm) needs ep > 1,"
            " a virtual pipeline (vp > 1) when pp > 1, the alltoall or flex dispatcher and no full"
            f" recompute (ep({f.ep}), pp({f.pp}), vp({f.vp}), moe_token_dispatcher_type"
            f" {f.dispatcher}, recompute {f.recompute}): drop moe_a2a_overlap or meet them"
        ),
    ),
    Rule(
        "PM107",
        "parallel.sequence_parallel",
        ("sequence_parallel", "tp"),
        lambda f: as_array(f.sequence_parallel).astype(bool) & (as_array(f.tp) == 1),
        lambda f: "sequence_parallel needs tp > 1; set it false or raise tp",
    ),
    Rule(
        "PM107",
        "parallel.vp",
        ("schedule", "vp"),
        lambda f: interleaved(f) & (as_array(f.vp) == 1),
        lambda f: f"schedule {f.schedule} needs vp > 1; set vp or use schedule"
        + (" zb-h1" if f.schedule == "interleaved-zb" else " 1f1b"),
    ),
    Rule(
        "PM107",
        "parallel.schedule",
        ("schedule", "vp"),
        lambda f: vp_above_1(f) & ~interleaved(f) & ~v_shaped(f),
        lambda f: f"vp({f.vp}) > 1 needs schedule interleaved (or a V-shaped one, at vp 2)",
    ),
    Rule(
        "PM107",
        "parallel.vp",
        ("schedule", "vp"),
        # the V: rank r holds chunks r and 2p - 1 - r (Qi et al. 2024 Sec. 3; dualpipev.py)
        lambda f: v_shaped(f) & (as_array(1 if f.vp is None else f.vp) != 2),
        lambda f: (f"schedule {f.schedule} runs two chunks a stage in a V: set vp 2 (vp({f.vp}))"),
    ),
    Rule(
        "PM106",
        "parallel.pp",
        ("pp", "dp", "micro_batch_size", "schedule"),
        # DualPipeV.step asserts num_chunks >= num_ranks * 2 (deepseek-ai/DualPipe, dualpipev.py)
        lambda f: _only_where(
            dualpipev(f), lambda: (as_array(f.pp) < 2) | (f.m < 2 * as_array(f.pp))
        ),
        lambda f: (
            f"schedule dualpipev needs pp >= 2 (pp({f.pp})) and m >= 2 pp micro-batches"
            f" (m({f.m})) (deepseek-ai/DualPipe, dualpipev.py); change pp, global_batch_size or"
            " micro_batch_size"
        ),
        "schedule",
        "DualPipeV needs m >= 2 pp",
    ),
    Rule(
        "PM107",
        "parallel.vp",
        ("pp",),
        lambda f: (as_array(f.pp) == 1) & (vp_above_1(f) | interleaved(f)),
        lambda f: "interleaving (vp > 1) needs pp > 1",
        "micro",
        "interleaving needs pp > 1 and m a multiple of pp",
    ),
    Rule(
        "PM108",
        "parallel.cp",
        ("cp",),
        lambda f: (as_array(f.cp) > 1) & (f.seq_length % (2 * as_array(f.cp)) != 0),
        lambda f: (
            f"seq_length({f.seq_length}) is not divisible by 2 * cp({f.cp}): causal load balancing"
            " splits the sequence into 2 cp chunks (Megatron-Core CP); pick cp dividing"
            f" {f.seq_length // 2}"
        ),
        "pair",
        "cp does not split the sequence",
    ),
    Rule(
        "PM108",
        "training.flash_attention",
        ("cp",),
        lambda f: (as_array(f.cp) > 1) & (not f.fused_attention),
        lambda f: (
            f"cp({f.cp}) needs fused attention: Megatron-Core's context parallelism runs inside "
            "Transformer Engine's fused attention; set training.flash_attention: true"
        ),
        "pair",
        "cp needs fused attention",
    ),
    Rule(
        "PM108",
        "parallel.cp_comm_type",
        ("cp", "tp"),
        lambda f: (as_array(f.cp) > 1)
        & (f.cp_comm == "a2a")
        & (f.heads % (as_array(f.tp) * f.cp) != 0),
        lambda f: (
            f"cp_comm_type a2a splits the heads over tp * cp = {f.tp * f.cp}, which does not divide"
            f" num_attention_heads({f.heads}); use cp_comm_type p2p"
        ),
        "pair",
        "cp does not split the sequence",
    ),
    Rule(
        "PM109",
        "parallel.ep",
        ("ep", "etp"),
        lambda f: (f.experts == 0) & ((as_array(f.ep) > 1) | (as_array(f.etp) > 1)),
        lambda f: (
            "expert parallelism (ep, etp > 1) needs a mixture-of-experts model (num_moe_experts)"
        ),
        "expert",
        "no experts to split",
    ),
    Rule(
        "PM109",
        "parallel.ep",
        ("ep",),
        lambda f: (f.experts > 0) & (max(f.experts, 1) % as_array(f.ep) != 0),
        lambda f: (
            f"num_moe_experts({f.experts}) is not divisible by ep({f.ep}): experts per rank must be"
            " whole"
        ),
        "expert",
        "ep does not divide the experts",
    ),
    Rule(
        "PM109",
        "parallel.ep",
        ("ep", "etp", "tp", "cp", "dp"),
        lambda f: f.stage_ranks % (as_array(f.ep) * f.etp) != 0,
        lambda f: (
            f"ep({f.ep}) * etp({f.etp}) does not divide tp * cp * dp = {f.tp * f.cp * f.dp}: expert"
            " parallelism folds into the ranks of a pipeline stage (Megatron-Core MoE parallel"
            " folding)"
        ),
        "expert",
        "ep x etp does not fold into tp x cp x dp",
    ),
    Rule(
        "PM109",
        "parallel.etp",
        ("etp",),
        lambda f: (f.experts > 0) & (max(f.moe_ffn, 1) % as_array(f.etp) != 0),
        lambda f: f"moe_ffn_hidden_size({f.moe_ffn}) is not divisible by etp({f.etp})",
        "expert",
        "ep does not divide the experts",
    ),
    Rule(
        "PM109",
        "parallel.sequence_parallel",
        ("tp", "sequence_parallel"),
        lambda f: (f.experts > 0)
        & (as_array(f.tp) > 1)
        & ~as_array(f.sequence_parallel).astype(bool),
        lambda f: (
            f"a mixture-of-experts model with tp({f.tp}) > 1 needs sequence_parallel: true "
            "(Megatron-LM arguments.py asserts it)"
        ),
    ),
    *FRAMEWORK_RULES,
    Rule(
        "PM201",
        "parallel.tp",
        ("tp",),
        # TP groups are tp consecutive ranks (Megatron-Core's order tp-cp-ep-dp-pp): they stay in
        # an NVLink domain when tp divides its GPUs, else some straddle two (tp 6 on 8-GPU nodes:
        # ranks 6-11); on a rack (NVL72) the domain is the rack's, not the 4-GPU tray's
        lambda f: (as_array(f.tp) > f.gpus_per_node)
        | ((f.num_gpus > f.gpus_per_node) & (f.gpus_per_node % as_array(f.tp) != 0)),
        lambda f: (
            f"tp({f.tp}) > {f.gpus_per_node} GPUs on one NVLink domain: the TP group would cross it"
            if f.tp > f.gpus_per_node
            else (
                f"tp({f.tp}) does not divide the {f.gpus_per_node} GPUs of an NVLink domain: some"
                f" TP groups would straddle two; pick tp among the divisors of {f.gpus_per_node}"
            )
        ),
        "tp",
        "tp group would cross the node boundary",
    ),
)


KNOB_RULES = tuple(r for r in RULES if r.id == "PM107")
