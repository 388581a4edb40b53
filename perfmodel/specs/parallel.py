"""Parallel and training settings, with Megatron's long names as aliases."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from .base import MAX_BATCH, MAX_GPUS, Seconds, Spec
from .framework import FLAGS, FRAMEWORKS, Framework
from .framework import defaults as profile_defaults
from .model import MAX_LAYERS, MAX_TOKENS
from .precision import TrainingDtype

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = ("gpipe", "1f1b", "interleaved")


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
    schedule: Literal["gpipe", "1f1b", "interleaved"] | None = Field(
        None, description="Pipeline schedule; interleaved needs vp > 1."
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


class Training(Spec):
    """Batch, precision, optimizer, the framework profile and its behaviour flags.

    A flag left out takes the named framework's default (specs/framework.py); ``profile_flags``
    lists those, so every output can say what it assumed."""

    global_batch_size: int = Field(
        gt=0, le=MAX_BATCH, description="Sequences per optimizer step B."
    )
    seq_length: int | None = Field(
        None,
        gt=0,
        le=MAX_TOKENS,
        validation_alias=AliasChoices("seq_length", "seq_len"),
        description="Overrides the model's sequence length.",
    )
    dtype: TrainingDtype = Field("bf16", description="Compute dtype.")
    optimizer: Literal["adam", "sgd"] = Field(
        "adam", description="adam: 12 B/param of fp32 states."
    )
    mfu_peak: Literal["bf16", "fp8"] | None = Field(
        None,
        description=(
            "The peak MFU and HFU are measured against; default the compute dtype's (FP8's for "
            "FP8 runs, so MFU never exceeds 1); bf16 reports FP8 runs as NeMo and Megatron-LM do."
        ),
    )
    framework: Framework = Field(
        "megatron-core",
        description=(
            "The training software whose defaults the flags below take: megatron-core, "
            "megatron-2022, megatron-2021 or deepspeed (`perfmodel presets frameworks`)."
        ),
    )
    grad_accum_fp32: bool = Field(
        False,
        description=(
            "fp32 gradient accumulation: 18 B/param, not 16. Default: on for bf16, as Megatron-LM's"
            " arguments.py sets accumulate_allreduce_grads_in_fp32 (and DeepSpeed's bf16"
            " grad_accum_dtype)."
        ),
    )
    flash_attention: bool = Field(False, description=FLAGS["flash_attention"])
    tp_comm_overlap: bool = Field(
        True,
        description=(
            "Overlap the backward TP collective with the weight-gradient GEMM (Megatron's"
            " asynchronous all-reduce, described in Korthikanti et al. 2022, Sec. 6.2; Megatron-LM"
            " before late 2021, as in Narayanan et al. 2021, ran it exposed)."
        ),
    )
    tp_comm_overlap_ub: bool = Field(False, description=FLAGS["tp_comm_overlap_ub"])
    grad_accumulation_fusion: bool = Field(
        True,
        description=(
            "The weight-gradient GEMM accumulates straight into the gradient buffer (Megatron's"
            " fused wgrad, with the asynchronous TP all-reduce since late 2021). Without it every"
            " micro-batch adds its weight gradients to the buffer in a separate HBM pass."
        ),
    )
    persist_layer_norm: bool = Field(
        True,
        description=(
            "Single-pass layernorm backward (apex's persistent FastLayerNorm, Megatron's default"
            " since late 2021; --no-persist-layer-norm turns it off). Before it, as in Narayanan et"
            " al. 2021, the backward read its inputs twice."
        ),
    )
    p2p_overlap: bool = Field(
        False,
        description=(
            "Pipeline sends overlap compute (Megatron's --overlap-p2p-communication, 2023); "
            "otherwise each send blocks its stage, as in the validated 2021-2022 runs."
        ),
    )
    overlap_grad_reduce: bool = Field(
        True, description="Overlap the DP gradient reduction with the last micro-batch's backward."
    )
    overlap_param_gather: bool = Field(False, description=FLAGS["overlap_param_gather"])
    bias_gemm_fusion: bool = Field(False, description=FLAGS["bias_gemm_fusion"])
    fused_cross_entropy: bool = Field(False, description=FLAGS["fused_cross_entropy"])
    fp8_param_gather: bool = Field(False, description=FLAGS["fp8_param_gather"])
    step_overhead_s: Seconds = Field(
        0.0,
        description=(
            "Fixed time per optimizer step outside the model (data loading, logging, host "
            "synchronization), seconds; a profile's fitted value (specs/framework.py)."
        ),
    )
    microbatch_overhead_s: Seconds = Field(
        0.0,
        description=(
            "Fixed host time per micro-batch on the critical path (the schedule's Python, "
            "kernel launches not hidden by the GPU), seconds; a profile's fitted value."
        ),
    )
    hop_overhead_s: Seconds = Field(
        0.0,
        description=(
            "Fixed time per pipeline chunk pass (each forward or backward of a micro-batch through"
            " a virtual stage: the p2p handshake and its synchronization), seconds; a profile's"
            " fitted value."
        ),
    )
    zero3_reshard_after_forward: bool = Field(
        True,
        description=(
            "ZeRO-3/FSDP frees a layer's gathered parameters after its forward and gathers them "
            "again for the backward (FSDP's reshard_after_forward, DeepSpeed's default)."
        ),
    )
    recompute_modules: list[
        Literal["core_attn", "layernorm", "mlp", "moe", "moe_act", "shared_experts", "mla_up_proj"]
    ] = Field(
        ["core_attn"],
        description=(
            "What recompute: selective repeats (Megatron-Core --recompute-modules; core_attn is"
            " Korthikanti 2022's selective recompute). Memory is counted as for core_attn."
        ),
    )
    moe_a2a_overlap: bool = Field(
        False,
        description=(
            "The EP all-to-alls of one micro-batch run under another's expert computation "
            "(Megatron-Core --overlap-moe-expert-parallel-comm with the combined 1F1B schedule)."
        ),
    )
    moe_token_dispatcher_type: Literal["alltoall", "allgather", "deepep"] = Field(
        "alltoall",
        description=(
            "How tokens reach their experts: all-to-all over EP, all-gather/reduce-"
            "scatter, or DeepEP (Megatron's flex dispatcher: each token crosses to a node once)."
        ),
    )
    _given: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _profile(cls, data: Any, handler: ModelWrapValidatorHandler[Training]) -> Training:
        """Fill the flags a plan leaves out from its framework's profile."""
        if not isinstance(data, dict) or isinstance(data, Training):
            return handler(data)
        framework = data.get("framework", "megatron-core")
        if framework not in FRAMEWORKS:
            return handler(data)  # the Literal names the accepted profiles
        filled = {**profile_defaults(framework), **data}
        # Megatron-LM: bf16 (and FP8 over bf16 weights) accumulate in fp32
        if "grad_accum_fp32" not in data:
            filled["grad_accum_fp32"] = data.get("dtype", "bf16") in ("bf16", "fp8")
        model = handler(filled)
        model._given = dict(data)
        return model

    @property
    def profile_flags(self) -> list[str]:
        """The behaviour flags this training took from its framework's profile (not set by the
        plan)."""
        return [k for k in (*FLAGS, "grad_accum_fp32") if k not in self._given]

    def given(self) -> dict[str, Any]:
        """What the plan itself set (a copy starts from this, so a changed framework re-fills the
        flags)."""
        return dict(self._given) if self._given else dict(self)
