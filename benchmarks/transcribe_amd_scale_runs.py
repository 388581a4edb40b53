"""Transcribe the AMD MLPerf run and InternEvo's 1,024-A100 ZeRO-1 runs (issue 31) from
../shared/validation/published-2026b.yaml into configs/validation/ (run from the repository root:
python benchmarks/transcribe_amd_scale_runs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transcribe import write_cases

SOURCE = "/work/shared/validation/published-2026b.yaml"
INTERNLM_7B = {
    "name": "InternLM 7B",
    "num_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_query_groups": 32,
    "ffn_hidden_size": 11008,
    "vocab_size": 103168,
    "seq_length": 2048,
    "mlp": "swiglu",
    "tied_embeddings": False,
    "position_embedding": "rope",
    "source": (
        "InternLM/InternEvo configs/7B_sft.py (HIDDEN 4096, 32 layers, 32 heads, MLP_RATIO"
        " 8/3 -> 11008, VOCAB 103168, SEQ_LEN 2048)"
    ),
}


def keep(r: dict) -> bool:
    return r["id"] == "MLPERF-v5.1-AMD-LLAMA31_8B-8xMI355X-FP8" or r["id"].startswith(
        "INTERNEVO-7B-1024xA100-"
    )


def _zero1_group(r: dict) -> int:
    """InternEvo's zero1 size from the record's id (ZeRO1x8, ZeRO1xAll)."""
    tag = r["id"].split("ZeRO1x")[1].split("-")[0]
    return r["parallelism"]["dp"] if tag == "All" else int(tag)


def case(r: dict) -> tuple[str, dict]:
    par, batch = r["parallelism"], r["batch"]
    src = f"{r['source']}; transcribed from shared/validation/published-2026b.yaml id {r['id']}"
    if r["id"].startswith("MLPERF"):
        doc = {
            "description": r["id"],
            "source": src,
            "table": "amd-instinct",
            "model": "llama3-8b",
            "system": {
                "gpu": "mi355x",
                "gpus_per_node": 8,
                "intra_node_link": "infinity-fabric-4",
                "inter_node_link": "pollara-400",
                "num_gpus": 8,
            },
            "training": {
                "global_batch_size": batch["global_seqs"],
                "seq_length": batch["seq_len"],
                "dtype": "fp8",
                "framework": "megatron-rocm",
                "fp8_param_gather": True,
            },
            "parallel": {
                "tp": 1,
                "pp": 1,
                "cp": 1,
                "vp": 1,
                "dp": par["dp"],
                "micro_batch_size": batch["micro"],
                "sequence_parallel": False,
                "recompute": "none",
                "zero_stage": 1,
            },
            "measured": {"iteration_time_s": r["measured"]["derived_step_time_s"]},
            "notes": "MLLOG throughput median of 10 runs; step = 32 / samples per second.",
        }
        return "mlperf51-amd-8b-mi355x-fp8-8gpu", doc
    group = _zero1_group(r)
    dp = par["dp"]
    full = r["parallelism"]["recompute"].startswith("full")
    doc = {
        "description": r["id"],
        "source": src,
        "table": "internevo-1024-a100",
        "model": INTERNLM_7B,
        "system": {
            "gpu": "a100-80gb",
            "gpus_per_node": 8,
            "intra_node_link": "nvlink3",
            "inter_node_link": "roce-100g-x4",
            "num_gpus": r["hardware"]["num_gpus"],
        },
        "training": {
            "global_batch_size": batch["global_seqs"],
            "seq_length": batch["seq_len"],
            "dtype": "bf16",
            "framework": "internevo",
            # HybridZeroOptimizer accumulates and all-reduces the bf16 gradients of the model
            # (reduce_tensor in self._dtype); only the owner's shard is copied to fp32
            "grad_accum_fp32": False,
        },
        "parallel": {
            "tp": par["tp"],
            "pp": 1,
            "cp": 1,
            "vp": 1,
            "dp": dp,
            "micro_batch_size": batch["micro"],
            "sequence_parallel": False,
            "recompute": "full" if full else "none",
            "zero_stage": 1,
            **({"dp_shard": group} if group != dp else {}),
        },
        "measured": {"tokens_per_s_per_gpu": r["measured"]["tokens_per_s_per_gpu"]},
        "notes": f"zero1={group if group != dp else -1}; {r['parallelism']['other']}",
    }
    name = r["id"].lower().replace("internevo-7b-1024xa100-", "internevo-7b-1024-")
    return name, doc


if __name__ == "__main__":
    write_cases(SOURCE, keep, case, "transcribe_amd_scale_runs.py")
