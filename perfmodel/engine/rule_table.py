"""The validity rules of a configuration as data: what each reads (the facts of a configuration,
numpy arrays over configurations), when it is broken, and its message with the fix.
perfmodel/engine/rules.py applies them; the rule IDs are those of `perfmodel check`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.specs.framework import PROFILES


@dataclass(frozen=True)
class Facts:
    """What a rule reads: the model's and the job's numbers, and the knobs (arrays or scalars)."""

    heads: int
    groups: int
    layers: int
    num_gpus: int
    gpus_per_node: int
    global_batch_size: int
    seq_length: int = 1
    experts: int = 0  # routed experts (0: dense model)
    moe_ffn: int = 0
    fused_attention: bool = True
    cp_comm: str = "p2p"
    # the knobs: an array over configurations, a scalar, or None where not known yet (Any: all
    # three)
    tp: Any = 1
    pp: Any = 1
    dp: Any = 1
    cp: Any = 1
    ep: Any = 1
    etp: Any = 1
    vp: Any = 1
    micro_batch_size: Any = 1
    sequence_parallel: Any = False
    schedule: Any = None  # a name, or None when not known
    # 0: the split is chosen (evenly, or balanced when pp does not divide L)
    first_stage_layers: Any = 0
    last_stage_layers: Any = 0
    zero_stage: Any = 0
    framework: str = "megatron-core"

    @property
    def profile(self) -> dict[str, Any]:
        return PROFILES[self.framework]

    @property
    def m(self) -> Array:
        return _a(self.global_batch_size // np.maximum(_a(self.dp) * self.micro_batch_size, 1))

    @property
    def stage_ranks(self) -> Array:
        """The tp x cp x dp ranks of one pipeline stage, which EP x ETP fold into."""
        return _a(_a(self.tp) * self.cp * self.dp)


@dataclass(frozen=True)
class Rule:
    """One validity rule: the `check` rule ID it reports under, the field to fix, what it reads, the
    vectorized test of a violation, the message, and the search stage that applies it as a mask
    (None: the search never builds a violating configuration)."""

    id: str
    field: str
    reads: tuple[str, ...]
    broken: Callable[[Facts], Any]
    message: Callable[[Facts], str]
    search_stage: str | None = None
    search_reason: str = ""


def _a(x: Any) -> Array:
    return np.asarray(x)


def _interleaved(f: Facts) -> Array:
    return _a(f.schedule == "interleaved")


def _vp_above_1(f: Facts) -> Array:
    return _a(False) if f.vp is None else _a(_a(f.vp) > 1)


def _given(x: Any) -> Array:
    return _a(_a(x) > 0)


def _product(f: Facts) -> str:
    cp = f" * cp({f.cp})" if np.any(_a(f.cp) > 1) else ""
    return f"tp({f.tp}) * pp({f.pp}) * dp({f.dp}){cp} = {f.tp * f.pp * f.dp * f.cp}"


RULES: tuple[Rule, ...] = (
    Rule(
        "PM102",
        "parallel.dp",
        ("tp", "pp", "dp", "cp"),
        lambda f: _a(f.tp) * f.pp * f.dp * f.cp != f.num_gpus,
        lambda f: f"{_product(f)} != num_gpus({f.num_gpus}); choose dp = num_gpus / (tp * pp * cp)",
    ),
    Rule(
        "PM103",
        "parallel.tp",
        ("tp",),
        lambda f: f.heads % _a(f.tp) != 0,
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
        lambda f: (f.heads % _a(f.tp) == 0) & (f.groups % _a(f.tp) != 0),
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
        lambda f: (_a(f.vp) > 1) & (f.layers + 2 < _a(f.pp) * f.vp),
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
        lambda f: _a(f.pp) > f.layers,
        lambda f: (
            f"pp({f.pp}) exceeds num_layers({f.layers}): every stage needs at least one layer"
        ),
        "pair",
        "pp does not divide the layers",
    ),
    Rule(
        "PM104",
        "parallel.decoder_first_pipeline_num_layers",
        ("pp", "first_stage_layers", "last_stage_layers"),
        lambda f: (_given(f.first_stage_layers) | _given(f.last_stage_layers))
        & (
            (_a(f.pp) < 2)
            | (
                _a(f.first_stage_layers) + f.last_stage_layers
                > f.layers - np.maximum(_a(f.pp) - 2, 0)
            )
            | (
                (_a(f.pp) == 2)
                & _given(f.first_stage_layers)
                & _given(f.last_stage_layers)
                & (_a(f.first_stage_layers) + f.last_stage_layers != f.layers)
            )
        ),
        lambda f: (
            f"first/last stage layers ({f.first_stage_layers}, {f.last_stage_layers}) do not fit"
            f" pp({f.pp}) stages of num_layers({f.layers}): they need pp >= 2 and leave each middle"
            " stage a layer"
        ),
        "pair",
        "pp does not divide the layers",
    ),
    Rule(
        "PM105",
        "training.global_batch_size",
        ("dp", "micro_batch_size"),
        lambda f: f.global_batch_size % (_a(f.dp) * f.micro_batch_size) != 0,
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
        lambda f: (_a(f.vp) > 1) & (_a(f.pp) > 1) & (f.m % _a(f.pp) != 0),
        lambda f: (
            f"interleaved schedule needs the micro-batch count m({f.m}) to be a multiple of "
            f"pp({f.pp}); change global_batch_size or micro_batch_size"
        ),
        "micro",
        "interleaving needs pp > 1 and m a multiple of pp",
    ),
    Rule(
        "PM107",
        "parallel.sequence_parallel",
        ("sequence_parallel", "tp"),
        lambda f: _a(f.sequence_parallel).astype(bool) & (_a(f.tp) == 1),
        lambda f: "sequence_parallel needs tp > 1; set it false or raise tp",
    ),
    Rule(
        "PM107",
        "parallel.vp",
        ("schedule", "vp"),
        lambda f: _interleaved(f) & (_a(f.vp) == 1),
        lambda f: "schedule interleaved needs vp > 1; set vp or use schedule 1f1b",
    ),
    Rule(
        "PM107",
        "parallel.schedule",
        ("schedule", "vp"),
        lambda f: _vp_above_1(f) & ~_interleaved(f),
        lambda f: f"vp({f.vp}) > 1 needs schedule interleaved",
    ),
    Rule(
        "PM107",
        "parallel.vp",
        ("pp",),
        lambda f: (_a(f.pp) == 1) & (_vp_above_1(f) | _interleaved(f)),
        lambda f: "interleaving (vp > 1) needs pp > 1",
        "micro",
        "interleaving needs pp > 1 and m a multiple of pp",
    ),
    Rule(
        "PM108",
        "parallel.cp",
        ("cp",),
        lambda f: (_a(f.cp) > 1) & (f.seq_length % (2 * _a(f.cp)) != 0),
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
        lambda f: (_a(f.cp) > 1) & (not f.fused_attention),
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
        lambda f: (_a(f.cp) > 1) & (f.cp_comm == "a2a") & (f.heads % (_a(f.tp) * f.cp) != 0),
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
        lambda f: (f.experts == 0) & ((_a(f.ep) > 1) | (_a(f.etp) > 1)),
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
        lambda f: (f.experts > 0) & (max(f.experts, 1) % _a(f.ep) != 0),
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
        lambda f: f.stage_ranks % (_a(f.ep) * f.etp) != 0,
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
        lambda f: (f.experts > 0) & (max(f.moe_ffn, 1) % _a(f.etp) != 0),
        lambda f: f"moe_ffn_hidden_size({f.moe_ffn}) is not divisible by etp({f.etp})",
        "expert",
        "ep does not divide the experts",
    ),
    Rule(
        "PM109",
        "parallel.sequence_parallel",
        ("tp", "sequence_parallel"),
        lambda f: (f.experts > 0) & (_a(f.tp) > 1) & ~_a(f.sequence_parallel).astype(bool),
        lambda f: (
            f"a mixture-of-experts model with tp({f.tp}) > 1 needs sequence_parallel: true "
            "(Megatron-LM arguments.py asserts it)"
        ),
    ),
    Rule(
        "PM110",
        "parallel.vp",
        ("vp",),
        # DeepSpeed's PipelineEngine runs one schedule, TrainSchedule (1F1B), with one chunk per
        # stage (deepspeed/runtime/pipe/schedule.py); Megatron-LM has interleaved 1F1B since 2021
        lambda f: _vp_above_1(f) & (not f.profile["interleaved"]),
        lambda f: (
            f"vp({f.vp}) needs the interleaved schedule, which {f.framework}'s pipeline engine does"
            " not run (one chunk per stage, 1F1B); use vp 1"
        ),
        "micro",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.zero_stage",
        ("zero_stage",),
        lambda f: ~np.isin(_a(f.zero_stage), f.profile["zero_stages"]),
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
        lambda f: (_a(f.zero_stage) >= 2) & (_a(f.pp) > 1),
        lambda f: (
            f"ZeRO-{f.zero_stage} with pp({f.pp}) > 1 does not run: DeepSpeed's PipelineEngine"
            " accepts ZeRO-1 only, and Megatron-FSDP has no pipeline parallelism; use zero_stage 1"
            " or pp 1"
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
            (f.layers % np.maximum(_a(f.pp), 1) != 0)
            | _given(f.first_stage_layers)
            | _given(f.last_stage_layers)
        ),
        lambda f: (
            f"{f.framework} splits the layers evenly: num_layers({f.layers}) over pp({f.pp}) stages"
            " needs an uneven split (framework: megatron-core takes one); pick pp dividing the"
            " layers"
        ),
        "pair",
        "the framework cannot run it",
    ),
    Rule(
        "PM110",
        "parallel.cp",
        ("cp", "ep"),
        lambda f: ((_a(f.cp) > 1) & (not f.profile["context_parallel"]))
        | ((_a(f.ep) > 1) & (not f.profile["expert_parallel"])),
        lambda f: (
            f"{f.framework} has no context or expert parallelism (cp({f.cp}), ep({f.ep})); use "
            "framework: megatron-core"
        ),
        "pair",
        "the framework cannot run it",
    ),
    Rule(
        "PM201",
        "parallel.tp",
        ("tp",),
        lambda f: _a(f.tp) > f.gpus_per_node,
        lambda f: f"tp({f.tp}) > gpus_per_node({f.gpus_per_node}): the TP group would cross nodes",
        "tp",
        "tp group would cross the node boundary",
    ),
)


KNOB_RULES = tuple(r for r in RULES if r.id == "PM107")
