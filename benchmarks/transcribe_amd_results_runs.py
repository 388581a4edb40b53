"""Transcribe AMD's own published training measurements on Instinct GPUs into configs/validation/
(issue 31; run from the repository root: python benchmarks/transcribe_amd_results_runs.py).

Two sources, each its own table:

- ``amd-perf-results``: AMD's "Performance results with AMD ROCm software" page
  (amd.com/en/developer/resources/rocm-hub/dev-ai/performance-results.html, AI Training), 8-node
  rows on MI325X, as AMD quotes them ("Measured 8-Node (tok/s/GPU)") in its Primus projection
  blog: ROCm/rocm-blogs blogs/software-tools-optimization/primus-projection/README.md at commit
  5f2d6c1577aea3285f06e2d011ba5730184e1a77, section "Validation: Projected vs. Measured Results",
  table "AMD Instinct MI325X GPU - Dense Models (Llama 3.1)": container rocm/primus:v26.1
  (released 2026-01-21). The same figures are in AMD-AGI/Primus docs/tech_blogs/projection/
  projection.md since commit 2eb9dc7d (2026-03-25). The blog's "Batch" is the micro-batch (the
  70B rows have 1 and 4 on 64 GPUs). What the rows do not state is taken from Primus's own
  example configurations at the container's date (AMD-AGI/Primus commit 17e026d0, 2026-01-21,
  examples/megatron/configs/MI300X/llama3.1_*-pretrain.yaml) and marked uncertain in `notes`:
  the global batch (the ROCm docs' Megatron-LM benchmark page scales it with the nodes: 128 on
  one node, 256 on two, so 1,024 on eight); recompute under FSDP2 for 70B (full, all 80 layers,
  as the example config, for the FP8 row at micro-batch 4, whose activations would need about
  640 GB a GPU without; none for the BF16 row at micro-batch 1, which fits without: see
  RECOMPUTE_NOTE); and the network (AMD's 8-node MI325X cluster of its MLPerf Training v6.0
  submission has Broadcom 400G NICs, systems/8xMI325X_EPYC_9575F_pytorch
  .json; one per GPU assumed).
- ``amd-instinct`` (the MLPerf Training v5.1 AMD submission, the table of the MI355X run): the
  MI350X llama31_8b run, mlcommons/training_results_v5.1 at commit 441d65f4: the same
  implementation and config as the MI355X run (config_MI350X_1x8x1_8b.sh: GBS 32, MBS 2, TP/PP/CP
  1, FP8 hybrid with FP8 params; only MAX_LR and the platform differ), logs
  results/MI350X_EPYC_9575F_pytorch/llama31_8b/result_0..9.txt. The measured figure is the median
  over the 10 runs of each run's median MLLOG tracked_stats.throughput (samples/s over each
  12,288-sample block, eval excluded), as the MI355X record: 24.917 samples/s (runs 24.81-25.00),
  step 32 / 24.917 = 1.2843 s.

Not transcribed, and why:
- The MI355X Mixtral 8x22B row of the same blog (BF16, PP 4, VPP 2, EP 8, 64 GPUs): a mixture of
  experts, whose costs are another issue's; and its two versions disagree (micro-batch 2 and
  3,534 tok/s/GPU at 2eb9dc7d, micro-batch 1 and 3,475 at 5f2d6c15).
- The blog's "1-Node" column: the projection tool's own single-node benchmark, not a training
  run with a stated configuration (the two 70B rows carry the same 1,135).
- MLPerf Training v6.0's AMD llama31_8b runs (MI350X, MI355X): MXFP4 GEMMs
  (config_MI3*_1x8x1.sh: FP4_RECIPE=mxfp4), a format no training recipe here is costed in.
- MLPerf v5.0/v5.1 MI300X and MI325X entries: Llama 2 70B LoRA fine-tuning (frozen weights).
"""

from __future__ import annotations

from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "configs" / "validation"
BLOG = (
    "AMD ROCm Performance Results page (AI Training, 8-node MI325X rows, container"
    " rocm/primus:v26.1, 2026-01-21), as quoted in ROCm/rocm-blogs"
    " blogs/software-tools-optimization/primus-projection/README.md (commit"
    " 5f2d6c1577aea3285f06e2d011ba5730184e1a77), section 'Validation: Projected vs. Measured"
    " Results', MI325X dense table, row"
)
PRIMUS = "AMD-AGI/Primus 17e026d0 (2026-01-21) examples/megatron/configs/MI300X/"
GBS_NOTE = (
    "uncertain: the global batch is not stated; 1,024 = 128 a node as the ROCm docs' Megatron-LM"
    " benchmark commands scale it (MBS=2 BS=128 on one node, BS=256 on two). Network: Broadcom"
    " 400G RoCE, one NIC a GPU assumed (AMD's MLPerf v6.0 8-node MI325X system)."
)
RECOMPUTE_NOTE = {
    "full": (
        " Recompute is not stated: full, all 80 layers, as Primus's example config; without it the"
        " activations of micro-batch 4 would need about 640 GB a GPU."
    ),
    "none": (
        " Recompute is not stated: none. Primus's example config recomputes all 80 layers at"
        " micro-batch 3, but at micro-batch 1 the run fits without (213 of 243 GB usable,"
        " `perfmodel memory`; micro-batch 2 would not: about 400 GB), the likely reason for the"
        " row's micro-batch 1 where the FP8 row runs 4. With full recompute its GEMMs would have to"
        " run at 0.67 of the BF16 peak, above the 0.645 AMD measures as the MI325X's best (MAF 843"
        " TFLOP/s, benchmarks/calibrate_cdna.py)."
    ),
}
# (name, model preset, dtype, micro-batch, FSDP, recompute, measured tokens/s/GPU, the blog's row,
#  config)
PERF_ROWS = (
    (
        "amdperf-mi325x-8b-fp8-64gpu",
        "llama3-8b",
        "fp8",
        2,
        False,
        "none",
        16186,
        "'Llama 3.1 8B | FP8 | 2 | 8192 | No | 1 | 1 | 1 | 1 | 16,224 | 16,186'",
        (
            "llama3.1_8B-FP8-pretrain.yaml (TP/PP 1, overlap_grad_reduce and overlap_param_gather,"
            " fp8 hybrid, no recompute)"
        ),
    ),
    (
        "amdperf-mi325x-70b-fp8-fsdp-64gpu",
        "llama3-70b",
        "fp8",
        4,
        True,
        "full",
        1726,
        "'Llama 3.1 70B | FP8 | 4 | 8192 | Yes | 1 | 1 | 1 | 1 | 1,135 | 1,726'",
        (
            "llama3.1_70B-FP8-pretrain.yaml (use_torch_fsdp2, recompute_granularity full,"
            " recompute_num_layers 80, fp8 hybrid)"
        ),
    ),
    (
        "amdperf-mi325x-70b-bf16-fsdp-64gpu",
        "llama3-70b",
        "bf16",
        1,
        True,
        "none",
        1174,
        "'Llama 3.1 70B | BF16 | 1 | 8192 | Yes | 1 | 1 | 1 | 1 | 1,135 | 1,174'",
        "llama3.1_70B-BF16-pretrain.yaml (use_torch_fsdp2)",
    ),
)


def perf_case(
    model: str, dtype: str, mbs: int, fsdp: bool, recompute: str, tokens: int, row: str, config: str
) -> dict:
    size = "70B" if "70b" in model else "8B"
    return {
        "description": (
            f"AMD performance results: Llama 3.1 {size} {dtype.upper()}"
            f"{' FSDP2' if fsdp else ''} on 64 MI325X (8 nodes)"
        ),
        "source": f"{BLOG} {row}; unstated settings from {PRIMUS}{config}",
        "table": "amd-perf-results",
        "model": model,
        "system": {
            "gpu": "mi325x",
            "gpus_per_node": 8,
            "intra_node_link": "infinity-fabric",
            "inter_node_link": "roce-400g",
            "num_gpus": 64,
        },
        "training": {
            "global_batch_size": 1024,
            "seq_length": 8192,
            "dtype": dtype,
            "framework": "megatron-rocm",
        },
        "parallel": {
            "tp": 1,
            "pp": 1,
            "cp": 1,
            "vp": 1,
            "dp": 64,
            "micro_batch_size": mbs,
            "sequence_parallel": False,
            "recompute": recompute,
            "zero_stage": 3 if fsdp else 1,
        },
        "measured": {"tokens_per_s_per_gpu": tokens},
        "notes": GBS_NOTE + RECOMPUTE_NOTE.get(recompute, "") if fsdp else GBS_NOTE,
    }


MLPERF = (
    "mlcommons/training_results_v5.1 (GitHub snapshot commit"
    " 441d65f4445cd59687466533fd9f55399136e7a4)"
)
MI350X = {
    "description": "MLPERF-v5.1-AMD-LLAMA31_8B-8xMI350X-FP8",
    "source": (
        f"{MLPERF}: AMD/benchmarks/llama31_8b/implementations/MI350X_EPYC_9575F_pytorch_llama3_8b/"
        "config_MI350X_1x8x1_8b.sh (GBS 32, MBS 2, TP/PP/CP 1, FP8_PARAMS=1; as the MI355X config"
        " but MAX_LR and the platform), logs AMD/results/MI350X_EPYC_9575F_pytorch/llama31_8b/"
        "result_0..9.txt (MLLOG tracked_stats.throughput), system AMD/systems/"
        "MI350X_EPYC_9575F_pytorch.json (SMCI350X, 8 x MI350X 288 GB, ROCm 7.0.0)"
    ),
    "table": "amd-instinct",
    "model": "llama3-8b",
    "system": {
        "gpu": "mi350x",
        "gpus_per_node": 8,
        "intra_node_link": "infinity-fabric-4",
        "inter_node_link": "pollara-400",
        "num_gpus": 8,
    },
    "training": {
        "global_batch_size": 32,
        "seq_length": 8192,
        "dtype": "fp8",
        "framework": "megatron-rocm",
        "fp8_param_gather": True,
    },
    "parallel": {
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "vp": 1,
        "dp": 8,
        "micro_batch_size": 2,
        "sequence_parallel": False,
        "recompute": "none",
        "zero_stage": 1,
    },
    "measured": {"iteration_time_s": 1.2843},
    "notes": (
        "MLLOG throughput: median over 10 runs of each run's median, 24.917 samples/s (run medians"
        " 24.81-25.00); step = 32 / 24.917 s."
    ),
}


def main() -> None:
    head = (
        "# Transcribed from the source named in `source` (benchmarks/transcribe_amd_results_runs"
        ".py); what the source does not state is under `notes`.\n"
    )
    docs = {name: perf_case(*row) for name, *row in PERF_ROWS}
    docs["mlperf51-amd-8b-mi350x-fp8-8gpu"] = MI350X
    for name, doc in docs.items():
        OUT.joinpath(f"{name}.yaml").write_text(
            head + yaml.safe_dump(doc, sort_keys=False, width=100)
        )
        print(name)


if __name__ == "__main__":
    main()
