"""Hardware specs: GPU, Link, System (SPEC section 1).

Efficiency parameters live here, in the presets, never in the formulas
(issue 4): each is a fraction of a data-sheet figure that real kernels reach.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..units import QuantityError, parse_quantity
from .base import MAX_GPUS, Bytes, BytesPerSecond, FlopsPerSecond, Fraction, Seconds, Spec
from .ceilings import Ceilings
from .precision import DTYPES

# the Triton flash attention's speed over FlashAttention-2's (GPU.attention_fraction)
TRITON_OVER_FA2 = 0.5


class GPU(Spec):
    """One accelerator, from its vendor data sheet (dense, not sparse, FLOP/s)."""

    name: str = Field(description="What the outputs call the GPU (a preset's data-sheet name).")
    peak_flops_per_s: dict[str, FlopsPerSecond] = Field(
        description="Dense peak FLOP/s per dtype (fp32, tf32, bf16, fp16, fp8)."
    )
    hbm_capacity_bytes: Bytes = Field(description="HBM capacity, bytes (GB = 1e9).")
    hbm_bandwidth_bytes_per_s: BytesPerSecond = Field(description="HBM bandwidth, bytes/s.")
    num_sms: int = Field(gt=0, le=2**20, description="Streaming multiprocessors (compute units).")
    l2_bytes: Bytes = Field(description="L2 cache size, bytes.")
    # --- achievable-efficiency model (calibrated once per GPU type; issue 4) ---
    gemm_efficiency: Fraction = Field(
        0.80, description="Fraction of peak a large, well-shaped GEMM reaches."
    )
    gemm_tail_waves: bool = Field(
        True,
        description=(
            "The last, partial wave of tiles idles SMs (classic tiled GEMMs, A100's cuBLAS). False"
            " where the library spreads the work evenly over the SMs (stream-K; Hopper's cuBLAS):"
            " then only a GEMM with fewer tiles than SMs loses efficiency."
        ),
    )
    gemm_k_overhead: float = Field(
        64.0,
        ge=0,
        le=2**20,
        description=(
            "K (elements) lost to each tile's prologue/epilogue: "
            "efficiency falls as K / (K + k0) for thin reductions."
        ),
    )
    fp8_gemm_efficiency: Fraction | None = Field(
        None,
        description=(
            "Fraction of the FP8 peak a large FP8 GEMM reaches (Transformer Engine, cuBLASLt);"
            " None: the BF16 gemm_efficiency. FP8 GEMMs run their tiles at twice the rate but feed"
            " them from the same HBM and L2 and scale per tensor, so they reach a smaller fraction"
            " of their peak."
        ),
    )
    fp4_gemm_efficiency: Fraction | None = Field(
        None,
        description=(
            "Fraction of the NVFP4 peak a large NVFP4 GEMM reaches; None: the FP8 figure (a"
            " documented default, said in the output)."
        ),
    )
    efficiency_source: str = Field(
        "assumed",
        description=(
            "Where the efficiency figures come from: measured (a device run of benchmarks/device/),"
            " fitted (on published runs, named) or assumed (carried over, not checked on this GPU)."
            " Results that rest on assumed figures say so."
        ),
    )
    hbm_efficiency: Fraction = Field(
        0.85, description="Fraction of HBM bandwidth a streaming kernel reaches."
    )
    mx_cast_efficiency: Fraction | None = Field(
        None,
        description=(
            "Fraction of HBM bandwidth the kernels that quantize to an E8M0-scaled (MX) format"
            " reach (MXFP8, MXFP4: row-wise and column-wise copies with their block scales, each"
            " from the 16-bit input); None: hbm_efficiency."
        ),
    )
    attention_efficiency: Fraction = Field(
        0.60, description="Fraction of peak a fused (flash) attention kernel reaches."
    )
    fa2_attention_efficiency: Fraction | None = Field(
        None,
        description=(
            "Fraction of peak a FlashAttention-2 class kernel reaches (PyTorch SDPA's flash"
            " backend, flash-attn 2, triton), forward and backward together; None: as"
            " attention_efficiency. On Hopper these kernels use neither wgmma nor TMA and reach"
            " about a third of peak (Shah et al. 2024, FlashAttention-3, Sec. 4.1)."
        ),
    )
    unfused_attention_efficiency: Fraction = Field(
        1.0,
        description=(
            "Fraction of its roofline speed (at the GEMM and HBM fractions above) that the unfused"
            " attention core reaches: Megatron's batched QK^T and AV GEMMs over the head dimension,"
            " fused softmax, dropout and context copy. 1.0 unless measured; Korthikanti 2022 Table"
            " 4's selective-recompute rows time this core on A100 (benchmarks/calibrate_a100.py"
            " --design core-joint)."
        ),
    )
    comm_overlap_penalty: float = Field(
        0.4,
        ge=0,
        le=1,
        description=(
            "Fraction of a collective overlapped with compute that is still paid: NCCL's thread"
            " blocks take SMs and HBM bandwidth from the kernels they hide behind (default: the"
            " A100 fit on Korthikanti 2022 Table 4)."
        ),
    )
    sustained_clock: float = Field(
        1.0,
        gt=0,
        le=1,
        description=(
            "Fraction of the clock its data-sheet peaks assume that the part sustains under its"
            " power limit through a training step. Every compute rate (GEMMs in every format,"
            " attention) scales with it, HBM does not; MFU stays against the data-sheet peak."
            " 1.0 unless a part's runs show it (each preset names its source)."
        ),
    )
    kernel_overhead_s: Seconds = Field(
        4e-6, description="Launch and tail time per kernel, seconds."
    )
    reserved_bytes: Bytes = Field(
        2e9, description="CUDA context, allocator fragmentation and workspaces, bytes."
    )
    tdp_w: float | None = Field(
        None, gt=0, le=1e5, description="Board power limit (TDP), watts: its data sheet's."
    )
    peak_power_w: float | None = Field(
        None,
        gt=0,
        le=1e5,
        description=(
            "Board power its data-sheet peaks are quoted at, watts, where the part runs under a"
            " lower limit (tdp_w): cost/clock.py gives the clock that limit leaves, the prior for"
            " sustained_clock before any run. None: the peaks are the part's own."
        ),
    )
    system_power_w_per_gpu: float | None = Field(
        None,
        gt=0,
        le=1e5,
        description=(
            "A node's maximum system power over its GPUs, watts (the DGX/HGX data sheet's); None"
            " where no system sheet is known."
        ),
    )
    source: str = Field("", description="Where the figures come from.")
    ceilings: Ceilings | None = Field(
        None,
        description=(
            "The best published measured rates (matmul by format, HBM, collectives), each with its"
            " source: configs/hardware/ceilings.yaml for the presets; no prediction or calibration"
            " runs faster. None: none known (a GPU given as a mapping without base:)."
        ),
    )

    @model_validator(mode="after")
    def _reserve_below_hbm(self) -> GPU:
        """A reserve of the whole HBM or more leaves no usable memory (and advice that cannot
        help)."""
        if self.reserved_bytes >= self.hbm_capacity_bytes:
            raise ValueError(
                f"reserved_bytes {self.reserved_bytes / 1e9:.3g} GB is more than the"
                f" {self.hbm_capacity_bytes / 1e9:.1f} GB of HBM on the {self.name}; give less"
                " (the CUDA context and workspaces take a few GB)"
            )
        return self

    @field_validator("peak_flops_per_s")
    @classmethod
    def _known_dtypes(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(DTYPES))
        if unknown:
            raise ValueError(f"unknown dtype(s) {unknown}; use any of {list(DTYPES)}")
        if not v:
            raise ValueError("give at least one dtype, e.g. {bf16: 312 TFLOPS}")
        return v

    def low_precision_efficiency(self, dtype: str) -> float:
        """The GEMM fraction of a low-precision format: FP8's for FP8 and MXFP8 (the same tensor
        cores, MX scales applied in the epilogue), the FP4 one for NVFP4 and MXFP4 (one FP4
        tensor-core path, two scale layouts) else FP8's, else the BF16 one."""
        fp8 = self.fp8_gemm_efficiency or self.gemm_efficiency
        return (self.fp4_gemm_efficiency or fp8) if dtype in ("nvfp4", "mxfp4") else fp8

    def attention_fraction(self, backend: str) -> float:
        """Fraction of peak the fused attention kernel of ``backend`` reaches: fused, the GPU's own
        (attention_efficiency); fa2, FlashAttention-2's (fa2_attention_efficiency, else the same);
        triton, the Triton flash attention of flash-attn's flash_attn_triton.py (llm-foundry's
        attn_impl triton), which its header puts at about FlashAttention-1's speed, half of
        FlashAttention-2's (Dao 2023, FlashAttention-2, abstract: about 2x over FlashAttention)."""
        fa2 = self.fa2_attention_efficiency
        fa2 = self.attention_efficiency if fa2 is None else fa2
        if backend == "triton":
            return TRITON_OVER_FA2 * fa2
        return fa2 if backend == "fa2" else self.attention_efficiency

    def flops_ceiling(self, dtype: str) -> float:
        """The best measured matmul FLOP/s of ``dtype`` (ceilings.yaml), inf where none is known."""
        c = self.ceilings.gemm_rate(dtype) if self.ceilings else None
        return math.inf if c is None else c.rate

    def hbm_ceiling(self) -> float:
        """The best HBM bandwidth a kernel reaches (ceilings.yaml), bytes/s; inf where unknown."""
        return self.ceilings.hbm.rate if self.ceilings else math.inf

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for dtype (fp16 and bf16 share tensor cores)."""
        if dtype in self.peak_flops_per_s:
            return self.peak_flops_per_s[dtype]
        twin = {"fp16": "bf16", "bf16": "fp16"}.get(dtype)
        if twin in self.peak_flops_per_s:
            return self.peak_flops_per_s[twin]
        from ..errors import PerfModelError

        raise PerfModelError(
            f"GPU {self.name} has no peak FLOP/s for dtype {dtype!r}; "
            f"it lists {sorted(self.peak_flops_per_s)}"
        )


class Link(Spec):
    """An interconnect, per GPU: unidirectional bandwidth and latency alpha."""

    name: str = Field(description="What the outputs call the link.")
    bandwidth_bytes_per_s: BytesPerSecond = Field(description="Unidirectional, per GPU, bytes/s.")
    latency_s: Seconds = Field(description="Per-message latency alpha, seconds.")
    efficiency: Fraction = Field(
        0.85, description="Fraction of the bandwidth collectives reach (NCCL bus bandwidth)."
    )
    mesh_links: int | None = Field(
        None,
        gt=0,
        le=1024,
        description=(
            "Links per GPU of a full mesh with no switch (AMD Infinity Fabric: 7, one to each peer"
            " of an 8-GPU node); bandwidth_bytes_per_s is then all of them together. A group of r"
            " GPUs of a node reaches its peers over r - 1 of them. None: a switch, where any"
            " group gets the whole bandwidth."
        ),
    )
    nccl_hw: Literal["nvlink", "pci"] = Field(
        "nvlink",
        description=(
            "The class of this link in NCCL's latency tables when it joins GPUs inside a node"
            " (src/graph/tuning.cc, hwLatencies: NVLINK for NVLink and Infinity Fabric, PCI for a"
            " PCIe switch); it sets the intra-node steps of a collective across nodes."
        ),
    )
    ep_efficiency: Fraction | None = Field(
        None,
        description=(
            "Fraction of the bandwidth the expert dispatch and combine kernels (DeepEP, HybridEP)"
            " reach inside the NVLink domain, in bytes on the wire: their own measured figures,"
            " less the tokens a rank keeps (benchmarks/moe_a2a_table.py). None: efficiency."
        ),
    )
    source: str = Field("", description="Where the figures come from (data sheet, measurement).")


class System(Spec):
    """A cluster: GPU type and count, node size, links, rank placement."""

    gpu: GPU = Field(description="A GPU preset name (`perfmodel presets hardware`) or a mapping.")
    num_gpus: int = Field(gt=0, le=MAX_GPUS, description="GPUs in the job (up to 16,777,216).")
    gpus_per_node: int = Field(
        8, gt=0, le=MAX_GPUS, description="GPUs sharing the intra-node link."
    )
    nvlink_domain: int | None = Field(
        None,
        gt=0,
        le=MAX_GPUS,
        description=(
            "GPUs on one NVLink fabric (intra_node_link): a GB200 NVL72 rack is 72 (often run as"
            " 64) of gpus_per_node 4; default gpus_per_node. A multiple of gpus_per_node."
        ),
    )
    intra_node_link: Link = Field(
        description=(
            "Link inside a node (NVLink domain): a preset name or a mapping; the GPU's usual one."
        )
    )
    inter_node_link: Link = Field(
        description=(
            "Scale-out link per GPU across nodes: a preset name or a mapping; the GPU's usual one."
        )
    )
    host_link: Link | None = Field(
        None,
        description=(
            "A GPU's link to host memory, which activation offloading uses: NVLink-C2C on Grace"
            " systems (GB200, GB300), PCIe elsewhere. Default: the GPU generation's usual one."
        ),
    )
    host_memory_bandwidth_bytes_per_s: BytesPerSecond | None = Field(
        None,
        description=(
            "A GPU's share of its host's memory bandwidth, bytes/s (the CPU sockets' DRAM"
            " channels at their data-sheet peak, divided among the node's GPUs), which the"
            " optimizer's CPU offload steps at. Default: the GPU generation's usual host."
        ),
    )
    host_memory_bytes: Bytes | None = Field(
        None,
        description=(
            "A GPU's share of its host's DRAM, bytes (the node's system memory over its GPUs),"
            " which offloaded activations and optimizer states fill. Default: the GPU"
            " generation's usual host; none: not checked."
        ),
    )
    placement: Literal["tp-dp-pp", "tp-pp-dp"] = Field(
        "tp-dp-pp",
        description=(
            "Rank order, innermost first: TP on consecutive GPUs of a node, "
            "then DP, then PP outermost (Megatron-LM's rank order), or PP before DP."
        ),
    )
    nccl_algo: list[Literal["ring", "tree", "pat"]] | None = Field(
        None,
        description=(
            "NCCL_ALGO: the algorithms NCCL may pick for a data-parallel collective across nodes"
            " (ring, tree: all-reduce only, pat: all-gather and reduce-scatter with one rank a"
            " node). Default: every one, NCCL's tuner picking the fastest by size and rank count"
            " (docs/amd-and-scale.md)."
        ),
    )

    links_from: str | None = Field(
        None,
        description=(
            "Set when the plan names no links: which usual links of the GPU preset were taken"
            " (every output says so)."
        ),
    )
    memory_reserve: float | None = Field(
        None,
        ge=0,
        lt=1,
        description=(
            "HBM held back from the plan, as a share of capacity (5% or 0.05): the CUDA context, "
            "NCCL's and cuBLAS's workspaces and the caching allocator's fragmentation. Default: "
            "5% of HBM, at least the GPU's reserved_bytes."
        ),
    )
    memory_reserve_bytes: Bytes | None = Field(
        None, ge=0, description="The same reserve as a size (memory_reserve: 4 GB sets it)."
    )

    @model_validator(mode="before")
    @classmethod
    def _reserve(cls, data: Any) -> Any:
        """memory_reserve: 5%, 0.05 (a share of HBM) or 4 GB (a size)."""
        if not isinstance(data, dict) or "memory_reserve" not in data:
            return data
        value, data = data["memory_reserve"], dict(data)
        if isinstance(value, bool):
            raise ValueError("memory_reserve: give a share of HBM (5%, 0.05) or a size (4 GB)")
        if isinstance(value, str) and value.strip().endswith("%"):
            try:
                data["memory_reserve"] = float(value.strip()[:-1]) / 100
            except ValueError:
                raise ValueError(f"memory_reserve: {value!r} is not a percentage (5%)") from None
        elif isinstance(value, str) and not value.strip().replace(".", "", 1).isdigit():
            try:
                size = parse_quantity(value, "bytes")
            except QuantityError as e:
                raise ValueError(f"memory_reserve: {e}") from None
            if size < 0:
                raise ValueError(f"memory_reserve: {value!r} is negative; give a size such as 4 GB")
            data["memory_reserve_bytes"] = size
            data["memory_reserve"] = None
        elif isinstance(value, (int, float)) and value >= 1:
            raise ValueError(
                f"memory_reserve: {value:g} is neither a share of HBM (below 1, e.g. 0.05 or 5%) "
                "nor a size (give its unit, e.g. 4 GB)"
            )
        return data

    @model_validator(mode="after")
    def _reserve_below_hbm(self) -> System:
        """A reserve of the whole HBM or more leaves nothing (a share is below 1 already)."""
        cap = self.gpu.hbm_capacity_bytes
        if self.memory_reserve_bytes is not None and self.memory_reserve_bytes >= cap:
            raise ValueError(
                f"memory_reserve: {self.memory_reserve_bytes / 1e9:.1f} GB is not below the"
                f" {cap / 1e9:.1f} GB of HBM on the {self.gpu.name}; give less (5%, 4 GB)"
            )
        return self

    @model_validator(mode="after")
    def _nccl_algo_all_reduce(self) -> System:
        """Every plan all-reduces (gradients, the loss, the norm): a list with neither ring nor
        tree leaves NCCL no all-reduce (PAT runs all-gather and reduce-scatter only)."""
        algos = self.nccl_algo
        if algos is not None and not {"ring", "tree"} & set(algos):
            raise ValueError(
                f"nccl_algo [{', '.join(algos)}] has no all-reduce: PAT runs all-gather and"
                " reduce-scatter only (NCCL 2.23, one rank a node); add ring or tree"
            )
        return self

    @model_validator(mode="after")
    def _nodes(self) -> System:
        if self.num_gpus > self.gpus_per_node and self.num_gpus % self.gpus_per_node:
            raise ValueError(
                f"num_gpus({self.num_gpus}) is not a multiple of gpus_per_node"
                f"({self.gpus_per_node}); use whole nodes"
            )
        if self.nvlink_domain is not None and self.nvlink_domain % self.gpus_per_node:
            raise ValueError(
                f"nvlink_domain({self.nvlink_domain}) is not a multiple of gpus_per_node"
                f"({self.gpus_per_node}): an NVLink domain holds whole nodes (trays); e.g. 72 of 4"
            )
        return self

    @property
    def domain(self) -> int:
        """GPUs that share the intra-node link: the NVLink domain, else one node. Every decision
        "inside NVLink or across the scale-out network" reads this (engine/mesh.py)."""
        return self.nvlink_domain or self.gpus_per_node

    def placement_note(self) -> str | None:
        """How the job sits on NVLink domains when it does not fill them evenly, or None."""
        d = self.domain
        if d == self.gpus_per_node or self.num_gpus % d == 0:
            return None
        if self.num_gpus < d:
            return f"{self.num_gpus} GPUs inside one {d}-GPU NVLink domain"
        full, rest = divmod(self.num_gpus, d)
        return f"{self.num_gpus} GPUs on {full} full {d}-GPU NVLink domains and one of {rest}"
