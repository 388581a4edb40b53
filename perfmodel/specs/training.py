"""Training settings: batch, precision, optimizer, the framework profile and its flags."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from .base import MAX_BATCH, Count, Seconds, Spec
from .framework import FLAGS, FRAMEWORK_ALIASES, FRAMEWORKS, Framework
from .framework import defaults as profile_defaults
from .model import MAX_LAYERS, MAX_TOKENS
from .precision import (
    LOW_PRECISION,
    MAIN_PARAMS_TEXT,
    MOMENT_TEXT,
    MainParamsDtype,
    MomentDtype,
    TrainingDtype,
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
    main_params_dtype: MainParamsDtype = Field("fp32", description=MAIN_PARAMS_TEXT)
    optimizer_cpu_offload: float = Field(
        0.0,
        ge=0,
        le=1,
        description=(
            "The fraction of the optimizer's states kept and stepped in host memory (Megatron-Core"
            " --optimizer-cpu-offload --optimizer-offload-fraction, with the precision-aware"
            " optimizer and the distributed optimizer); 0: none. Needs system.host_link and"
            " system.host_memory_bandwidth_bytes_per_s."
        ),
    )
    optimizer_offload_overlap: bool = Field(
        True,
        description=(
            "The offloaded step's copies overlap the CPU's update (Megatron-Core"
            " --overlap-cpu-optimizer-d2h-h2d, as the recipes that offload set it; Megatron-LM's"
            " own default is off)."
        ),
    )
    fp8_recipe: Literal["tensorwise", "delayed", "blockwise"] | None = Field(
        None,
        description=(
            "FP8's scaling (dtype fp8): tensorwise (current) or delayed per-tensor scales, the"
            " default and alike in cost; blockwise, DeepSeek-V3's 1x128 activation and 128x128"
            " weight tiles with FP32 scales (Transformer Engine's Float8BlockScaling, Hopper only)."
        ),
    )
    mfu_peak: Literal["bf16", "fp8", "mxfp8", "nvfp4", "mxfp4"] | None = Field(
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
    cross_entropy_fusion_impl: Literal["native", "te"] = Field(
        "native",
        description=(
            "The fused cross-entropy's kernel (Megatron-Core --cross-entropy-fusion-impl):"
            " native (fp32 exp_logits kept for the backward, 4 B a logit) or te (Transformer"
            " Engine's parallel_cross_entropy, which writes the gradient into the 16-bit logits"
            " and keeps them: 2 B; Megatron-Bridge's performance recipes)."
        ),
    )
    fp8_param_gather: bool = Field(False, description=FLAGS["fp8_param_gather"])
    fp8_weight_cache: bool = Field(False, description=FLAGS["fp8_weight_cache"])
    moe_fp8_dispatch: bool = Field(False, description=FLAGS["moe_fp8_dispatch"])
    expert_call_overhead_s: float = Field(
        0.0, ge=0, le=1, description=FLAGS["expert_call_overhead_s"]
    )
    collective_rank_host_s: Seconds = Field(0.0, description=FLAGS["collective_rank_host_s"])
    kernel_host_s: Seconds = Field(0.0, description=FLAGS["kernel_host_s"])
    cuda_graphs: bool = Field(False, description=FLAGS["cuda_graphs"])
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
    attention_unpad: bool = Field(
        False,
        description=(
            "Each layer's q, k and v are gathered into flash-attn's packed (varlen) layout and"
            " the attention output scattered back (llm-foundry's flash_attn_fn, attn_impl flash:"
            " flash-attn's bert_padding unpad_input and pad_input): a copy of each forward, the"
            " reverse backward. false: the kernel reads the layer's tensors as they are (SDPA,"
            " Megatron, triton)."
        ),
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
    offload_modules: list[
        Literal[
            "attn_norm",
            "qkv_linear",
            "core_attn",
            "attn_proj",
            "mlp_norm",
            "expert_fc1",
            "moe_act",
            "fused_group_mlp",
        ]
    ] = Field(
        [],
        description=(
            "Modules whose saved activations go to host memory in every layer and come back for"
            " the backward (Megatron-Core --fine-grained-activation-offloading --offload-modules),"
            " over system.host_link; with any pp, beside selective recompute."
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
