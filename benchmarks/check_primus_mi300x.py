"""Check (not fit) the MI300X's carried-over GEMM fraction on the Primus blog's 1F1B run on 8
MI300X (shared/validation/published-2026b.yaml PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-1F1B; the
schedules work owns that case). Prints the measured and predicted step times.

python benchmarks/check_primus_mi300x.py
"""

from __future__ import annotations

from pathlib import Path

import yaml

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs.presets import plan_from_mapping

SOURCE = Path("/work/shared/validation/published-2026b.yaml")
RUN = "PRIMUSPIPE-LLAMA2_7B_16L-8xMI300X-PP8-1F1B"


def main() -> None:
    r = next(x for x in yaml.safe_load(SOURCE.read_text()) if x["id"] == RUN)
    m = r["model"]
    plan = plan_from_mapping(
        {
            "model": {
                "name": m["name"],
                "num_layers": m["layers"],
                "hidden_size": m["hidden"],
                "num_attention_heads": m["heads"],
                "num_query_groups": m["kv_heads"],
                "ffn_hidden_size": m["ffn"],
                "vocab_size": m["vocab"],
                "seq_length": m["seq_len"],
                "mlp": "swiglu",
                "tied_embeddings": False,
                "position_embedding": "rope",
            },
            "system": {
                "gpu": "mi300x",
                "num_gpus": 8,
                "intra_node_link": "infinity-fabric",
                "inter_node_link": "pollara-400",
            },
            # overlap_grad_reduce/overlap_param_gather false (required by Primus-pipeline)
            "training": {
                "global_batch_size": r["batch"]["global_seqs"],
                "seq_length": r["batch"]["seq_len"],
                "dtype": "bf16",
                "framework": "megatron-rocm",
                "overlap_grad_reduce": False,
                "overlap_param_gather": False,
            },
            "parallel": {
                "tp": 1,
                "pp": 8,
                "dp": 1,
                "cp": 1,
                "vp": 1,
                "micro_batch_size": r["batch"]["micro"],
                "sequence_parallel": False,
                "recompute": "none",
                "zero_stage": 1,
                "schedule": "1f1b",
            },
        },
        RUN,
    )
    predicted = estimate(plan, resolve_config(plan)).values["step_time_s"]
    measured = r["measured"]["derived_step_time_s"]
    print(f"{RUN}: measured {measured:.3f} s, predicted {predicted:.3f} s", end=" ")
    print(f"({100 * (predicted / measured - 1):+.1f}%)")


if __name__ == "__main__":
    main()
