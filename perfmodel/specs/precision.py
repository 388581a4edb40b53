"""Precision as data: the dtype of every role in mixed-precision training, in one place.

The formulas read a Precision and never the training dtype's name (STYLE.md "Data first"):
FP8 becomes a different Precision, not a branch in the layer model.

Roles and their bytes (Micikevicius et al. 2018, "Mixed Precision Training", Sec. 3;
Rajbhandari et al. 2020, ZeRO, Sec. 3.1):
- GEMM inputs run in the compute dtype (bf16/fp16: 2 B, fp32: 4 B, fp8: 1 B);
- stored activations and the attention core are at least 16-bit (fp8 GEMMs keep bf16
  activations between kernels);
- 16-bit weights (2 B) are what forward and backward read; fp32 training keeps 4 B;
- gradients accumulate in 2 B, or 4 B with fp32 accumulation (Megatron's main_grad);
- the optimizer keeps an fp32 master copy and its moments: 12 B/param for Adam
  (master, m, v), 8 for SGD with momentum (master, momentum).
MFU is measured against the peak of the compute dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

# Every dtype perfmodel knows, with its bytes per element; a GPU lists its peak for a subset.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "mxfp8": 1,  # OCP Microscaling: E4M3 elements
    "nvfp4": 0.5,  # NVIDIA's FP4: E2M1 elements
    # OCP Microscaling MXFP6 (E2M3/E3M2) and MXFP4 (E2M1), 32-element blocks with one E8M0 scale
    # (OCP Microscaling Formats spec v1.0, sec. 5): peaks of AMD's CDNA 4 parts (MI350X, MI355X)
    # and of Blackwell's FP4 tensor cores; MXFP4 is a training dtype (AMD's MLPerf Training v6.0
    # Llama 3.1 8B on MI355X and MI350X), MXFP6 is not (no published recipe to cost)
    "mxfp6": 0.75,
    "mxfp4": 0.5,
}
DTYPES = tuple(DTYPE_BYTES)
# Scale bytes per element of the block-scaled formats: MXFP8 one 8-bit power-of-two scale per
# 32 elements (OCP Microscaling spec v1.0); NVFP4 one FP8 (E4M3) scale per 16 elements plus a
# per-tensor FP32 scale (NVIDIA 2025, "Pretraining Large Language Models with NVFP4")
SCALE_BYTES = {"mxfp8": 1 / 32, "nvfp4": 1 / 16, "mxfp4": 1 / 32}
# FP8's blockwise recipe (DeepSeek-AI 2024, DeepSeek-V3 report Sec. 3.3.2; Transformer Engine's
# Float8BlockScaling): an FP32 scale per 1 x 128 tile of activations and gradients (4/128 B an
# element) and per 128 x 128 block of weights (4/16384)
BLOCKWISE_SCALE_BYTES, BLOCKWISE_WEIGHT_SCALE_BYTES = 4 / 128, 4 / (128 * 128)
# the formats whose GEMMs run below 16 bits (FP8 with per-tensor scales, MXFP8, NVFP4, MXFP4)
LOW_PRECISION = ("fp8", "mxfp8", "nvfp4", "mxfp4")
# the 4-bit ones: their GEMMs take the GPU's FP4 fraction (GPU.fp4_gemm_efficiency)
FP4 = ("nvfp4", "mxfp4")
# the formats whose GEMM inputs Transformer Engine never quantizes inside the norm: ROCm TE's
# MXFP4 writes the norm's output in 16 bits and casts it after, row-wise and column-wise from the
# 16-bit input with the 16-point Hadamard in the cast (its cast_transpose_mxfp4_fused_shuffle,
# ROCm/TransformerEngine PR 537, the "Full MXFP4 Training Recipe" of FP4_RECIPE=mxfp4). Its
# layernorm_linear.py: "For MXFP4, we need ln_out in high precision" (with_quantized_norm = False,
# its FP4=true path at commit 02b2654); the later CustomRecipe MXFP4BlockScaling the same way via
# upstream's with_quantized_norm = ... and not custom (layer_kernels.fp8_casts)
UNFUSED_NORM_QUANT = ("mxfp4",)
# the formats with OCP Microscaling's E8M0 block scales, whose quantizing kernels run at the
# GPU's mx_cast_efficiency
E8M0_SCALED = ("mxfp8", "mxfp4")
# Dtypes a training run can compute in (tf32 is a GEMM mode of fp32, not a training dtype).
TrainingDtype = Literal["bf16", "fp16", "fp32", "fp8", "mxfp8", "nvfp4", "mxfp4"]
TRAINING_DTYPES: tuple[str, ...] = get_args(TrainingDtype)
# fp32 optimizer states per parameter: Adam master + m + v (12 B), SGD master + momentum (8 B)
OPTIMIZER_STATE_BYTES = {"adam": 12.0, "sgd": 8.0}
# the dtypes Megatron-Core's precision-aware optimizer keeps Adam's moments in (--exp-avg-dtype,
# --exp-avg-sq-dtype: fp32, fp16, bf16, fp8), bytes per element
MomentDtype = Literal["fp32", "fp16", "bf16", "fp8"]
MOMENT_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0}
MOMENT_TEXT = (
    "Adam's {} moment's dtype (Megatron-Core --exp-{}-dtype with --use-precision-aware-optimizer);"
    " bf16 as DeepSeek-V3 trained (report Sec. 3.3.3)."
)


# The master copy of the weights the optimizer steps, bytes a parameter: fp32 (mixed precision,
# Micikevicius et al. 2018; ZeRO Sec. 3.1); fp16 (Megatron-Core --main-params-dtype fp16 with
# --use-precision-aware-optimizer); remainders (apex DistributedFusedAdam store_param_remainders:
# beside bf16 weights, the 16 low bits of each fp32 master as int16 - NeMo 1.x's
# distributed_fused_adam with an fp32 optimizer over bf16 O2 weights, megatron_base_model.py
# setup_optimization); none (the optimizer steps the 16-bit weights themselves: apex
# DistributedFusedAdam whose dtype is the model's, store_params False)
MainParamsDtype = Literal["fp32", "fp16", "remainders", "none"]
MAIN_PARAMS_BYTES = {"fp32": 4.0, "fp16": 2.0, "remainders": 2.0, "none": 0.0}
MAIN_PARAMS_TEXT = (
    "The optimizer's master copy of the weights: fp32 (4 B a parameter), fp16 (Megatron-Core"
    " --main-params-dtype with --use-precision-aware-optimizer), remainders (apex"
    " DistributedFusedAdam's store_param_remainders, the 16 low bits of the fp32 master beside bf16"
    " weights: NeMo 1.x's distributed_fused_adam) or none (the optimizer steps the 16-bit weights:"
    " distributed_fused_adam with optim.dtype bf16)."
)


def optimizer_state_bytes(
    optimizer: str, exp_avg: str = "fp32", exp_avg_sq: str = "fp32", main: str = "fp32"
) -> float:
    """Optimizer states per parameter, bytes: the master weight in its dtype (MAIN_PARAMS_BYTES)
    and the moments, Adam's first (exp_avg) and second (exp_avg_sq) in their dtypes (Megatron-Core's
    precision-aware optimizer; DeepSeek-V3 keeps both in BF16, report Sec. 3.3.3: 8 B instead of
    12), SGD's momentum fp32."""
    if optimizer != "adam":
        return OPTIMIZER_STATE_BYTES[optimizer] - 4.0 + MAIN_PARAMS_BYTES[main]
    return MAIN_PARAMS_BYTES[main] + MOMENT_BYTES[exp_avg] + MOMENT_BYTES[exp_avg_sq]


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each role, and the dtype MFU's peak is read for."""

    compute: str  # dtype of the GEMM inputs; its peak FLOP/s times the GEMMs
    gemm_bytes: float  # bytes per GEMM operand element (0.5 for NVFP4)
    activation_bytes: int  # stored activations, attention core, elementwise kernels
    weight_bytes: int  # the copy of the weights forward and backward read
    gradient_bytes: int  # the gradient buffer (accumulation dtype)
    optimizer_bytes: float  # optimizer states, the fp32 master weights included
    mfu_peak: str  # the dtype whose peak MFU and HFU are measured against
    master_weights: bool  # an fp32 master copy exists (16-bit training)
    loss_scaling: bool  # fp16: gradients are unscaled and checked for inf/nan
    # the low-precision copy of the weights kept beside the 16-bit ones between micro-batches
    # (FP8: 1 B; MXFP8 and NVFP4 with their block scales)
    fp8_weight_bytes: float = 0
    # block-scale bytes per element of a quantized tensor (0 for FP8's per-tensor scaling)
    scale_bytes: float = 0.0
    # bytes per gradient element on the wire of the data-parallel reduction (0: gradient_bytes)
    reduce_wire_bytes: int = 0

    @property
    def reduce_bytes(self) -> int:
        """Bytes per gradient element the DP reduction moves: the reduce dtype's, else the
        gradient buffer's (Megatron reduces its main_grad buffer as it is)."""
        return self.reduce_wire_bytes or self.gradient_bytes

    @classmethod
    def of(
        cls,
        dtype: str,
        grad_accum_fp32: bool,
        optimizer: str,
        mfu_peak: str | None = None,
        reduce_dtype: str | None = None,
        fp8_recipe: str | None = None,
        moments: tuple[str, str] = ("fp32", "fp32"),
        main_params: str = "fp32",
    ) -> Precision:
        """The mixed-precision recipe of Megatron-LM for a compute dtype (see the module docstring).
        FP8 (Transformer Engine): GEMM operands in FP8, everything else BF16, the weights kept in
        BF16 with an FP8 copy (its transpose is made for each backward GEMM); MXFP8 and NVFP4 the
        same with their block scales; MFU against the compute dtype's own peak (so it never
        exceeds 1) unless ``mfu_peak`` says otherwise."""
        if dtype not in TRAINING_DTYPES:
            raise ValueError(
                f"unknown training dtype {dtype!r}; use one of {', '.join(TRAINING_DTYPES)}"
            )
        half = dtype != "fp32"
        scale = SCALE_BYTES.get(dtype, 0.0)
        weight_scale = scale
        if dtype == "fp8" and fp8_recipe == "blockwise":
            scale, weight_scale = BLOCKWISE_SCALE_BYTES, BLOCKWISE_WEIGHT_SCALE_BYTES
        return cls(
            compute=dtype,
            gemm_bytes=DTYPE_BYTES[dtype],
            activation_bytes=int(max(DTYPE_BYTES[dtype], 2)),
            weight_bytes=2 if half else 4,
            gradient_bytes=4 if (grad_accum_fp32 or not half) else 2,
            optimizer_bytes=optimizer_state_bytes(optimizer, *moments, main_params),
            mfu_peak=mfu_peak or dtype,
            master_weights=half,
            loss_scaling=dtype == "fp16",
            fp8_weight_bytes=DTYPE_BYTES[dtype] + weight_scale if dtype in LOW_PRECISION else 0,
            reduce_wire_bytes=int(DTYPE_BYTES[reduce_dtype]) if reduce_dtype else 0,
            scale_bytes=scale,
        )
