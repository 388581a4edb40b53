"""What a result rests on that the plan did not state and no measurement checked, in words every
output prints (plan, estimate, sweep, compare, the report)."""

from __future__ import annotations

from collections.abc import Sequence

from perfmodel.cost.offload_modules import MIN_TENSOR_ELEMENTS
from perfmodel.engine.reserve import reserve_text
from perfmodel.engine.split import assumed_text, uneven
from perfmodel.specs import Config, Plan
from perfmodel.specs.framework import defaults

# what an FP4 run is taken to quantize (the output says it)
FP4_RECIPES = {
    "nvfp4": (
        "nvfp4: every decoder linear layer in NVFP4, the logits, router and attention in BF16"
        " (Megatron-Bridge's performance recipes keep no BF16 layers); the Hadamard transform"
        " of the weight-gradient inputs rides in their cast"
    ),
    # AMD ROCm blog, "Technical Dive into AMD's MLPerf Training v6.0 Submission" (2026): the linear
    # layers in E2M1 with E8M0 block scales and a deterministic 16-point Hadamard rotation; ROCm
    # TE quantizes MXFP4 inputs after the norm (precision.UNFUSED_NORM_QUANT)
    "mxfp4": (
        "mxfp4: every decoder linear layer in MXFP4 (E2M1, one E8M0 scale per 32 elements,"
        " OCP Microscaling v1.0), the logits, router and attention in BF16; every GEMM input"
        " quantized in a kernel of its own (ROCm TE: no norm-fused MXFP4 cast), the"
        " Hadamard rotation in that cast"
    ),
}


def assumptions(plan: Plan) -> list[str]:
    """What a result rests on that the plan did not state and no measurement checked: the framework
    profile's defaults, and a GPU's efficiencies when they are assumed (not measured or fitted)."""
    tr, gpu, s = plan.training, plan.system.gpu, plan.system
    out = [] if plan.calibration is None else [plan.calibration.summary()]
    out += [*plan.read_as, _profile_text(plan)]
    source = gpu.efficiency_source
    if source.split()[0] == "assumed":
        out.append(
            f"{gpu.name}: efficiencies assumed (carried over, not measured or fitted on this"
            f" GPU){': ' + source.split(None, 1)[1] if len(source.split()) > 1 else ''}"
        )
    elif "assumed" in source:
        out.append(f"{gpu.name}: efficiencies {source}")
    if tr.dtype in ("fp8", "mxfp8") and gpu.fp8_gemm_efficiency is None:
        out.append(f"{gpu.name}: FP8 GEMM efficiency taken as the BF16 one (not measured)")
    if tr.fp8_recipe == "blockwise":
        out.append(
            "fp8 blockwise (1x128 activation, 128x128 weight tiles): FP32 scales in every cast and"
            " saved input; the GEMMs at the per-tensor FP8 fraction (no blockwise run is fitted)"
        )
    if tr.dtype in FP4_RECIPES:
        if gpu.fp4_gemm_efficiency is None:
            out.append(
                f"{gpu.name}: {tr.dtype.upper()} GEMM efficiency taken as the FP8 one (not"
                " measured)"
            )
        out.append(FP4_RECIPES[tr.dtype])
    if tr.cpu_offloading_num_layers:
        link = s.host_link
        rate = f" at {link.bandwidth_bytes_per_s / 1e9:g} GB/s" if link else ""
        out.append(
            f"activation offloading: {tr.cpu_offloading_num_layers} layers' activations to host"
            f" memory over {link.name if link else 'the host link'}{rate}, hidden"
            " behind each pass where the copy fits; pp 1 and no recompute (Megatron-Core)"
        )
    if tr.offload_modules:
        link = s.host_link
        rate = f" at {link.bandwidth_bytes_per_s / 1e9:g} GB/s" if link else ""
        out.append(
            f"fine-grained activation offloading: what {', '.join(tr.offload_modules)} keep for"
            " the backward, in every layer, to host memory over"
            f" {link.name if link else 'the host link'}{rate}, hidden behind each pass where the"
            f" copy fits; tensors under {MIN_TENSOR_ELEMENTS:,} elements stay (Megatron-Core's"
            " min_offloaded_tensor_size)"
        )
    offloads = tr.cpu_offloading_num_layers or tr.optimizer_cpu_offload or tr.offload_modules
    if offloads and s.host_memory_bytes:
        out.append(
            f"host memory: {s.host_memory_bytes / 1e9:g} GB a GPU (its share of the node's DRAM)"
            " holds what is offloaded"
        )
    elif offloads:
        out.append(
            "host memory: not known for this GPU (system.host_memory_bytes): what is offloaded is"
            " not checked against it"
        )
    if tr.optimizer_cpu_offload and s.host_memory_bandwidth_bytes_per_s:
        out.append(
            f"optimizer CPU offload: {tr.optimizer_cpu_offload:.0%} of the optimizer's states and"
            f" step in host memory, stepped at {s.host_memory_bandwidth_bytes_per_s / 1e9:.1f} GB/s"
            " a GPU (its share of the host's DRAM peak; torch's AdamW moves 80 B a parameter)."
            " That needs CPU threads for each rank (OMP_NUM_THREADS; torchrun's default of 1"
            " reaches one core's bandwidth, several times less)"
        )
    if s.placement_note():
        out.append(f"placement: {s.placement_note()}")
    if s.nccl_algo and "ring" not in s.nccl_algo:
        out.append(
            f"nccl_algo [{', '.join(s.nccl_algo)}]: an all-gather or reduce-scatter none of them"
            " runs (tree is all-reduce only, PAT needs one rank a node) is priced on the ring,"
            " NCCL's fallback when NCCL_ALGO leaves a collective no algorithm"
        )
    if s.links_from:
        out.append(f"links: {s.links_from} (name them in the plan's system to change them)")
    out.append(reserve_text(plan.system))
    return out


def config_assumptions(plan: Plan, cfg: Config, stage_layers: Sequence[float]) -> list[str]:
    """What one configuration's figures rest on that its plan did not say: the layer split of a pp
    that does not divide the layers, and ZeRO over a single replica (it shards nothing)."""
    out = []
    if uneven(plan.model.num_layers, cfg.pp, cfg.first_stage_layers, cfg.last_stage_layers):
        ranks = plan.system.num_gpus // (cfg.tp * cfg.cp)
        out.append(assumed_text(plan.model.num_layers, cfg.pp, cfg.vp, stage_layers, ranks))
    if cfg.zero_stage and cfg.dp * cfg.cp == 1:
        out.append(
            f"zero_stage {cfg.zero_stage} over one data-parallel replica (dp 1, cp 1) shards"
            " nothing: the figures are stage 0's (Megatron's distributed optimizer and DeepSpeed"
            " run it so)"
        )
    return out


def _profile_text(plan: Plan) -> str:
    """The framework profile in one line: how many behaviour flags it supplied (listed by
    `presets frameworks --json`, not here), and each flag the plan set to another value than the
    profile's, so a reader sees what departs from the framework as it ships."""
    tr = plan.training
    profile = defaults(tr.framework)
    given = tr.given()
    differs = [
        f"{k} {_word(getattr(tr, k))} (profile: {_word(profile[k])})"
        for k in profile
        if k in given and getattr(tr, k) != profile[k]
    ]
    text = (
        f"framework {tr.framework}: {len(tr.profile_flags)} behaviour flags at the profile's"
        " defaults (`perfmodel presets frameworks --json` lists them)"
    )
    return text + ("; the plan sets " + ", ".join(differs) if differs else "")


def _word(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)
