"""Transcribe the ZeRO-3 rows of Narayanan et al. 2021, Table 2 into configs/validation/ (issue 31;
run from the repository root: python benchmarks/transcribe_zero3_2021_runs.py).

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC21 (arXiv 2104.04473), Table 2, "ZeRO-3 without Model Parallelism": GPT-3 175B
(174.6B parameters) and the 529.6B model of Table 1, model-parallel size 1, on A100-80GB of
Selene (DGX A100, eight 200 Gb/s HDR NICs a node; Sec. 5). Sec. 5.2: "We integrated ZeRO into our
codebase using the DeepSpeed Python library", the global batch kept as the GPUs double. The
paper's teraFLOP/s count hardware FLOPs with full recompute (its eq. 3), as Table 1's. The 530B
row on 640 GPUs carries the table's star: batch 2,560, not the 2,240 of the others. Each GPU runs
one micro-batch a step (batch = GPUs x micro-batch).
"""

from __future__ import annotations

from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "configs" / "validation"
SOURCE = (
    "Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU Clusters Using"
    " Megatron-LM', SC21 (arXiv 2104.04473), Table 2 (ZeRO-3 without model parallelism), row"
)
# (model preset, parameters (billions) as the table gives them, batch, GPUs, micro-batch,
#  achieved teraFLOP/s per GPU, training days for 300B tokens)
ROWS = (
    ("gpt3-175b", 174.6, 1536, 384, 4, 144, 90),
    ("gpt3-175b", 174.6, 1536, 768, 2, 88, 74),
    ("gpt3-175b", 174.6, 1536, 1536, 1, 44, 74),
    ("gpt-529.6b", 529.6, 2560, 640, 4, 138, 169),
    ("gpt-529.6b", 529.6, 2240, 1120, 2, 98, 137),
    ("gpt-529.6b", 529.6, 2240, 2240, 1, 48, 140),
)


def case(model: str, size: float, batch: int, gpus: int, mbs: int, tflops: int, days: int) -> dict:
    return {
        "description": f"Narayanan et al. 2021 Table 2, ZeRO-3 GPT {size}B on {gpus} A100-80GB",
        "source": (
            f"{SOURCE} '{size}, 1, {batch}{'*' if batch == 2560 else ''}, {gpus}, {mbs}, {tflops},"
            f" {days}'"
        ),
        "table": "narayanan2021-table2",
        "model": model,
        "system": {
            "gpu": "a100-80gb",
            "gpus_per_node": 8,
            "intra_node_link": "nvlink3",
            "inter_node_link": "ib-hdr",
            "num_gpus": gpus,
        },
        "training": {"global_batch_size": batch, "dtype": "fp16", "framework": "deepspeed-2021"},
        "parallel": {
            "tp": 1,
            "pp": 1,
            "dp": gpus,
            "sequence_parallel": False,
            "recompute": "full",
            "zero_stage": 3,
            "vp": 1,
            "micro_batch_size": mbs,
        },
        "searched": [],
        "measured": {"tflops_per_gpu": tflops, "flop_convention": "narayanan-eq3"},
        "notes": (
            f"Table 2 also gives {days} days for 300B tokens, which eq. 4 (8 T P / n X) reproduces"
            " within 4%. Full recompute: the table's FLOP count is eq. 3's, and without it the"
            " activations could not fit."
        ),
    }


def main() -> None:
    for model, size, batch, gpus, mbs, tflops, days in ROWS:
        name = f"zero3-2021-{size}b-{gpus}gpu"
        head = (
            "# Transcribed from the paper named in `source` (benchmarks/transcribe_zero3_2021_runs"
            ".py); the measured value and its FLOP convention are under `measured`.\n"
        )
        doc = case(model, size, batch, gpus, mbs, tflops, days)
        OUT.joinpath(f"{name}.yaml").write_text(
            head + yaml.safe_dump(doc, sort_keys=False, width=100)
        )
        print(name)


if __name__ == "__main__":
    main()
