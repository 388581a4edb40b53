"""Write the pipeline-schedule runs of shared/validation/published-2026b.yaml (issue 30) as
validation cases (configs/validation/primus-*.yaml, titan-405b-*.yaml), as a user would write
them. Run once from a checkout beside ../shared:

    python benchmarks/transcribe_pipeline_runs.py ../shared/validation/published-2026b.yaml

Primus (AMD-AGI/Primus tech blog "primus_pipeline", Llama 2 7B truncated to 16 layers on 8
MI300X, PP 8, m 32): the rows whose schedule the blog names. Left out, with why: the row 'zbb'
(VPP 2; the blog does not say which zero-bubble variant it is), and the three Qwen3-235B rows on
MI355X (no global batch or micro-batch is given, so neither m nor a step time can be had).
torchtitan 2024-12 Table 5 (Llama 3.1 405B, 512 H100, FSDP 8 x TP 8 x PP 8): 1F1B and
interleaved 1F1B, torchtitan's default of as many micro-batches as stages (32 sequences a
replica in 8 micro-batches of 4) and, for the interleaved row, two stages a rank (not stated).
"""

from __future__ import annotations

import sys

from transcribe import llama_shape, write_cases

PRIMUS = {  # the blog's row -> (schedule, vp)
    "PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-1F1B": ("1f1b", 1),
    "PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-1F1B-interleaved-VPP2": ("interleaved", 2),
    "PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-ZBV": ("zbv", 2),
    "PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-V-Half": ("v-half", 2),
    "PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-V-Min": ("v-min", 2),
}
TITAN = {
    "TORCHTITAN-2412-LLAMA31_405B-512xH100-FSDP8-TP8-PP8-1F1B": ("1f1b", 1),
    "TORCHTITAN-2412-LLAMA31_405B-512xH100-FSDP8-TP8-PP8-Interleaved": ("interleaved", 2),
}


def _primus(r: dict) -> tuple[str, dict]:
    schedule, vp = PRIMUS[r["id"]]
    m = r["model"]
    doc = {
        "description": r["id"],
        "source": (
            r["source"] + "; transcribed from shared/validation/published-2026b.yaml id " + r["id"]
        ),
        "table": "primus-pipeline",
        "model": llama_shape(m, "Llama 2 7B shape, 16 layers"),
        # one node of 8 MI300X over Infinity Fabric; the existing MI300X preset
        "system": {
            "gpu": "mi300x",
            "gpus_per_node": 8,
            "intra_node_link": "infinity-fabric",
            "inter_node_link": "roce-400g",
            "num_gpus": 8,
        },
        "training": {
            "global_batch_size": r["batch"]["global_seqs"],
            "seq_length": r["batch"]["seq_len"],
            "framework": "primus",
            "dtype": "bf16",
        },
        "parallel": {
            "tp": 1,
            "pp": 8,
            "cp": 1,
            "dp": 1,
            "vp": vp,
            "micro_batch_size": 1,
            "recompute": "none",
            "zero_stage": 0,
            "sequence_parallel": False,
            "schedule": schedule,
        },
        "measured": {"tokens_per_s_per_gpu": r["measured"]["tokens_per_s_per_device"]},
    }
    return "primus-llama2-7b-16l-" + schedule + "-8gpu", doc


def _titan(r: dict) -> tuple[str, dict]:
    schedule, vp = TITAN[r["id"]]
    doc = {
        "description": r["id"],
        "source": (
            r["source"] + "; transcribed from shared/validation/published-2026b.yaml id " + r["id"]
        ),
        "table": "torchtitan-2412",
        "model": "llama3.1-405b",
        "system": {
            "gpu": "h100-sxm-96gb",
            "gpus_per_node": 8,
            "intra_node_link": "nvlink4",
            "inter_node_link": "roce-400g",
            "num_gpus": 512,
        },
        "training": {
            "global_batch_size": 256,
            "seq_length": 8192,
            "framework": "fsdp",
            "dtype": "fp8",
            "torch_compile": True,
            "tp_comm_overlap_ub": True,  # AsyncTP
        },
        "parallel": {
            "tp": 8,
            "pp": 8,
            "cp": 1,
            "dp": 8,
            "vp": vp,
            "micro_batch_size": 4,
            "recompute": "full",
            "zero_stage": 3,
            "sequence_parallel": True,
            "schedule": schedule,
        },
        "measured": {"tokens_per_s_per_gpu": r["measured"]["tokens_per_s_per_gpu"]},
    }
    return f"titan-405b-512gpu-pp8-{schedule}", doc


def main(path: str) -> None:
    write_cases(
        path,
        lambda r: r["id"] in PRIMUS,
        _primus,
        "transcribe_pipeline_runs.py",
    )
    write_cases(
        path,
        lambda r: r["id"] in TITAN,
        _titan,
        "transcribe_pipeline_runs.py",
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/published-2026b.yaml")
