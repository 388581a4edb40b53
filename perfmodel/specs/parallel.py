"""Parallel settings, with Megatron's long names as aliases (Training: specs/training.py)."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import AliasChoices, Field, model_validator

from .base import MAX_BATCH, MAX_GPUS, Spec
from .model import MAX_LAYERS
from .training import Training as Training  # moved to specs/training.py; this path still works

RECOMPUTE = ("none", "selective", "full")
Schedule = Literal[
    "gpipe",
    "1f1b",
    "interleaved",
    "dualpipe",
    "zb-h1",
    "zb-h2",
    "zbv",
    "v-half",
    "v-min",
    "dualpipev",
    "interleaved-zb",
]
SCHEDULES: tuple[str, ...] = get_args(Schedule)


class Parallel(Spec):
    """Parallel knobs. A knob left out (None) is free: `plan` searches it."""

    tp: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        validation_alias=AliasChoices("tp", "tensor_model_parallel_size"),
        description="Tensor-parallel degree t (GPUs per TP group).",
    )
    pp: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        validation_alias=AliasChoices("pp", "pipeline_model_parallel_size"),
        description="Pipeline stages p.",
    )
    dp: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        validation_alias=AliasChoices("dp", "data_parallel_size"),
        description="Data-parallel replicas; num_gpus / (tp * pp).",
    )
    vp: int | None = Field(
        None,
        gt=0,
        le=MAX_LAYERS,
        validation_alias=AliasChoices("vp", "virtual_pipeline_model_parallel_size"),
        description="Virtual stages per GPU v (interleaving); 1 = none.",
    )
    micro_batch_size: int | None = Field(
        None,
        gt=0,
        le=MAX_BATCH,
        validation_alias=AliasChoices("micro_batch_size", "mbs"),
        description="Sequences per micro-batch b.",
    )
    sequence_parallel: bool | None = Field(None, description="Megatron SP (Korthikanti 2022).")
    recompute: Literal["none", "selective", "full"] | None = Field(
        None,
        validation_alias=AliasChoices("recompute", "recompute_granularity"),
        description="Activation recomputation.",
    )
    zero_stage: int | None = Field(None, ge=0, le=3, description="ZeRO stage 0-3 over DP.")
    schedule: Schedule | None = Field(
        None,
        description=(
            "Pipeline schedule; interleaved needs vp > 1. dualpipe: DeepSeek's bidirectional"
            " pipeline (DeepSeek-V3 report Sec. 3.2.1): micro-batches enter from both ends, each"
            " rank holds two stages, and a forward and a backward chunk run overlapped so that"
            " each hides the other's expert all-to-all; needs an even pp, and an even m >= 2 pp."
            " zb-h1, zb-h2: zero-bubble (Qi et al. 2023), the backward split into input and weight"
            " gradients, at 1F1B's and about twice its activations. zbv, v-half, v-min: two"
            " chunks a rank in a V (Qi et al. 2024; vp 2) at 1F1B's, 1/2 and 1/3 of its"
            " activations. dualpipev: DualPipe folded into a V, one copy of the parameters (vp 2)."
            " interleaved-zb: interleaved 1F1B with the zero-bubble split (vp > 1; PyTorch's"
            " ScheduleInterleavedZeroBubble), ZB-H1's bubble over vp at 1F1B's activations."
            " docs/schedules.md."
        ),
    )
    cp: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        validation_alias=AliasChoices("cp", "context_parallel_size"),
        description="Context-parallel degree: the sequence split over cp ranks (Megatron-Core CP).",
    )
    ep: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        validation_alias=AliasChoices("ep", "expert_model_parallel_size"),
        description="Expert-parallel degree: routed experts split over ep ranks.",
    )
    etp: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        validation_alias=AliasChoices("etp", "expert_tensor_parallel_size"),
        description="Expert tensor parallelism: each expert's inner size split etp ways.",
    )
    cp_comm_type: Literal["p2p", "a2a"] | None = Field(
        None,
        description="CP's K/V exchange: p2p (ring, overlapped with attention) or a2a (Ulysses).",
    )
    decoder_first_pipeline_num_layers: int | None = Field(
        None,
        gt=0,
        le=MAX_LAYERS,
        validation_alias=AliasChoices("decoder_first_pipeline_num_layers", "first_stage_layers"),
        description=(
            "Layers on the first pipeline stage (the rest split over the others); default: even, or"
            " balanced when pp does not divide the layers."
        ),
    )
    decoder_last_pipeline_num_layers: int | None = Field(
        None,
        gt=0,
        le=MAX_LAYERS,
        validation_alias=AliasChoices("decoder_last_pipeline_num_layers", "last_stage_layers"),
        description="Layers on the last pipeline stage.",
    )
    dp_shard: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        description=(
            "HSDP: data-parallel ranks each shard group holds (torchtitan's dp_shard; FSDP1's"
            " HYBRID_SHARD shards within a node); ZeRO-2/3 states are sharded over dp_shard x cp"
            " and each shard's gradient all-reduced across the dp / dp_shard replicas. None: dp."
        ),
    )
    dp_replicate: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        description="HSDP replicas (torchtitan's dp_replicate): dp = dp_replicate x dp_shard.",
    )
    tp_across_nodes: bool | None = Field(
        None,
        description=(
            "Let `plan` search TP groups that leave an NVLink domain (tp above the domain's GPUs,"
            " or not dividing them: tp 6 on 8-GPU nodes straddles two), as `plan"
            " --allow-cross-node-tp` does. Left out, the search keeps a free tp to the divisors"
            " of the domain's GPUs (gpus_per_node, or nvlink_domain on a rack). A tp the plan"
            " fixes is estimated as given either way (check PM201 says what crossing costs: TP"
            " rings across nodes run one per NIC, as NCCL runs them)."
        ),
    )
    sharding_strategy: (
        Literal["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"]
        | None
    ) = Field(
        None,
        description=(
            "PyTorch FSDP1's name for the sharding: FULL_SHARD is zero_stage 3, SHARD_GRAD_OP 2,"
            " NO_SHARD 0; HYBRID_SHARD (and _HYBRID_SHARD_ZERO2) are 3 (2) sharded over dp_shard."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _fsdp_names(cls, data: Any) -> Any:
        """FSDP's sharding names and torchtitan's dp_replicate x dp_shard, read as zero_stage,
        dp and dp_shard; a contradiction names both fields."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        name = data.get("sharding_strategy")
        if name in (
            "FULL_SHARD",
            "SHARD_GRAD_OP",
            "NO_SHARD",
            "HYBRID_SHARD",
            "_HYBRID_SHARD_ZERO2",
        ):
            stage = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0}.get(name)
            if stage is None:
                stage = 2 if name.endswith("ZERO2") else 3
                if data.get("dp_shard") is None:
                    raise ValueError(
                        f"sharding_strategy {name} shards within a group of ranks (FSDP1: one"
                        " node): set dp_shard, e.g. 8"
                    )
            given = data.get("zero_stage")
            if given is not None and given != stage:
                raise ValueError(
                    f"sharding_strategy {name} is zero_stage {stage}, not {given}; give one of them"
                )
            data["zero_stage"] = stage
        replicate, shard, dp = data.get("dp_replicate"), data.get("dp_shard"), data.get("dp")
        ints = all(isinstance(x, int) and x > 0 for x in (replicate, shard or 1))
        if replicate is not None and ints:
            shard = shard or 1
            if dp is not None and dp != replicate * shard:
                raise ValueError(
                    f"dp({dp}) is not dp_replicate({replicate}) x dp_shard({shard}); drop dp or"
                    " make it the product"
                )
            data["dp"], data["dp_shard"] = replicate * shard, shard
        return data

    @model_validator(mode="after")
    def _shard_divides_dp(self) -> Parallel:
        if self.dp is not None and self.dp_shard is not None and self.dp % self.dp_shard:
            raise ValueError(
                f"dp_shard({self.dp_shard}) does not divide dp({self.dp}); pick a divisor"
            )
        return self
