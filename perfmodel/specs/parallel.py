"""Parallel and training settings, with Megatron's long names as aliases."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from .base import MAX_BATCH, MAX_GPUS, Count, Seconds, Spec
from .framework import FLAGS, FRAMEWORK_ALIASES, FRAMEWORKS, Framework
from .framework import defaults as profile_defaults
from .model import MAX_LAYERS, MAX_TOKENS
from .precision import LOW_PRECISION, MOMENT_TEXT, MomentDtype, TrainingDtype

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = (
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
)
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
]


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
    tokens: Count | None = Field(
        None,
        description=(
            "Tokens to train on (300B, 15.6T): with them every output gives the run's days,"
            " GPU-hours, energy, cost and goodput (the plan's run section)."
        ),
    )
    dtype: TrainingDtype = Field("bf16", description="Compute dtype.")
    optimizer: Literal["adam", "sgd"] = Field(
        "adam", description="adam: 12 B/param of fp32 states."
    )
    exp_avg_dtype: MomentDtype = Field("fp32", description=MOMENT_TEXT.format("first", "avg"))
    exp_avg_sq_dtype: MomentDtype = Field(
        "fp32", description=MOMENT_TEXT.format("second", "avg-sq")
    )
    fp8_recipe: Literal["tensorwise", "delayed", "blockwise"] | None = Field(
        None,
        description=(
            "FP8's scaling (dtype fp8): tensorwise (current) or delayed per-tensor scales, the"
            " default and alike in cost; blockwise, DeepSeek-V3's 1x128 activation and 128x128"
            " weight tiles with FP32 scales (Transformer Engine's Float8BlockScaling, Hopper only)."
        ),
    )
    mfu_peak: Literal["bf16", "fp8", "mxfp8", "nvfp4"] | None = Field(
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
            "megatron-2022, megatron-2021, deepspeed, fsdp (FSDP2 as torchtitan runs it), fsdp1"
            " (FSDP1 as Composer/llm-foundry run it) or hai-llm (DeepSeek's, as the DeepSeek-V3"
            " report describes it) (`perfmodel presets frameworks`)."
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
    fp8_weight_cache: bool = Field(False, description=FLAGS["fp8_weight_cache"])
    moe_fp8_dispatch: bool = Field(False, description=FLAGS["moe_fp8_dispatch"])
    expert_call_overhead_s: float = Field(
        0.0, ge=0, le=1, description=FLAGS["expert_call_overhead_s"]
    )
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
        validation_alias=AliasChoices("zero3_reshard_after_forward", "reshard_after_forward"),
        description=(
            "ZeRO-3/FSDP frees a layer's gathered parameters after its forward and gathers them "
            "again for the backward (FSDP's reshard_after_forward, DeepSpeed's default)."
        ),
    )
    attention_backend: Literal["fused", "fa2", "triton"] = Field(
        "fused", description=FLAGS["attention_backend"]
    )
    pointwise_kernels: Literal["fused", "eager"] = Field(
        "fused", description=FLAGS["pointwise_kernels"]
    )
    torch_compile: bool = Field(
        False,
        description=(
            "torch.compile (Inductor): each chain of pointwise and norm ops between two GEMMs runs"
            " as one kernel, so its intermediate tensors never reach HBM (torchtitan's"
            " --training.compile); the GEMMs and attention kernels are unchanged."
        ),
    )
    reduce_dtype: Literal["fp32", "bf16"] | None = Field(
        None,
        description=(
            "dtype the gradients are reduced in (FSDP MixedPrecisionPolicy.reduce_dtype, Composer"
            " DEFAULT fp32 / PURE bf16): fp32 doubles the reduce-scatter bytes. None: the gradient"
            " buffer's (grad_accum_fp32)."
        ),
    )
    reduce_every_microbatch: bool = Field(
        True,
        description=(
            "ZeRO-2/3: gradients are reduce-scattered after every micro-batch's backward (FSDP"
            " and Composer by default); false: once, after the last micro-batch (FSDP's no_sync or"
            " set_requires_gradient_sync(False)), holding unsharded gradients until then."
        ),
    )
    zero2_gathers_per_microbatch: bool = Field(
        False,
        description=FLAGS["zero2_gathers_per_microbatch"]
        + " (FSDP: true; DeepSpeed stage 2 keeps them replicated and gathers once a step).",
    )
    recompute_modules: list[
        Literal[
            "core_attn",
            "layernorm",
            "mlp",
            "moe",
            "moe_act",
            "shared_experts",
            "mla_up_proj",
            "op_sac",
            "layer_sac",
        ]
    ] = Field(
        ["core_attn"],
        description=(
            "What recompute: selective repeats (Megatron-Core --recompute-modules; core_attn is"
            " Korthikanti 2022's selective recompute; op_sac is torchtitan's per-op policy, which"
            " saves every other matmul's output and SDPA's and recomputes the rest; layer_sac its"
            " per-layer policy, every checkpoint_every_n_layers-th layer fully recomputed)."
        ),
    )
    checkpoint_every_n_layers: int = Field(
        2,
        ge=1,
        le=MAX_LAYERS,
        description=(
            'layer_sac: every N-th layer is checkpointed (torchtitan\'s selective_ac_option "N").'
        ),
    )
    cpu_offloading_num_layers: int = Field(
        0,
        ge=0,
        le=MAX_LAYERS,
        validation_alias=AliasChoices("cpu_offloading_num_layers", "offload_layers"),
        description=(
            "Layers whose activations go to host memory during the forward and come back for the"
            " backward (Megatron-Core --cpu-offloading-num-layers), over system.host_link."
            " Megatron-Core runs it with pp 1 and no recompute, and below num_layers."
        ),
    )
    moe_a2a_overlap: bool = Field(
        False,
        description=(
            "The EP all-to-alls of one micro-batch under another's expert computation"
            " (Megatron-Core --overlap-moe-expert-parallel-comm, combined 1F1B). Left out: `plan`"
            " searches it."
        ),
    )
    moe_token_dispatcher_type: Literal["alltoall", "allgather", "deepep", "hybridep"] = Field(
        "alltoall",
        description=(
            "How tokens reach their experts: all-to-all over EP, all-gather/reduce-scatter, or"
            " Megatron's flex dispatcher with DeepEP or HybridEP (each token crosses to a node, or"
            " an NVLink domain, once). Left out: `plan` searches those the profile runs."
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
        if isinstance(framework, str) and framework.lower() in FRAMEWORK_ALIASES:
            framework = FRAMEWORK_ALIASES[framework.lower()]  # torchtitan -> fsdp (Plan.read_as)
            data = {**data, "framework": framework}
        if framework not in FRAMEWORKS:
            return handler(data)  # the Literal names the accepted profiles
        filled = {**profile_defaults(framework), **data}
        # Megatron-LM: bf16 (and FP8 over bf16 weights) accumulate in fp32
        if "grad_accum_fp32" not in data:
            filled["grad_accum_fp32"] = data.get("dtype", "bf16") in ("bf16", *LOW_PRECISION)
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
