"""vTrain's single-node measurements as plans (issue 38): 1,440 measured iteration times of
GPT-style models on 2-8 A100 of one node under Megatron-DeepSpeed (Bang et al., MICRO 2024, arXiv
2312.12391; VIA-Research/vTrain f8dda84, data/ground_truth_single.csv, copied unchanged to
configs/validation/vtrain/ with a README naming the source).

Each row becomes a plan with what the source's validation configurations state
(config/validation/*/config_val_*.json: A100, 8 GPUs a node, use_checkpoint true,
pipeline_scheduling 1f1b, use_gradient_bucket false) and what it does not state, assumed and
listed in ASSUMED:
- the deepspeed profile (Megatron-DeepSpeed, the framework's alias here) with Megatron's fused
  softmax attention: FlashAttention-2 (2023-07) postdates the 2021-23 Megatron-DeepSpeed these
  runs used, and vTrain's configurations name no flash attention;
- the 80 GB A100: the same source's multi-node set runs GPT-3 175B at tp 8, pp 8
  (config_val_175B_8_8_8_*.json), 2.7e9 parameters a GPU, whose 16 bytes a parameter of fp16
  weights, gradients and fp32 Adam states (Rajbhandari et al. 2020, Sec. 3.1) are 44 GB: more
  than a 40 GB part holds; every single-node run fits either part;
- fp16 mixed precision and GPT-2's 51,200-token vocabulary, Megatron-DeepSpeed's defaults.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from perfmodel.errors import PerfModelError
from perfmodel.inputs.preset_files import _configs_root
from perfmodel.inputs.presets import plan_from_mapping
from perfmodel.specs import Plan

SOURCE = (
    "Bang et al., 'vTrain: A Simulation Framework for Evaluating Cost-effective and Compute-optimal"
    " Large Language Model Training', MICRO 2024 (arXiv 2312.12391); VIA-Research/vTrain f8dda84,"
    " data/ground_truth_single.csv"
)
CSV_PATH = ("validation", "vtrain", "ground_truth_single.csv")
COLUMNS = (
    "# GPUs",
    "global batch",
    "micro batch",
    "hidden size",
    "attention heads",
    "# layers",
    "sequence length",
    "tensor parallelism",
    "data parallelism",
    "pipeline parallelism",
    "iteration time (ms)",
)
VOCAB = 51200  # GPT-2's vocabulary padded to 51,200 (Megatron-LM's default for GPT-2 BPE)
GPU = "a100-80gb"
ASSUMED = (
    "deepspeed profile (Megatron-DeepSpeed) without flash attention",
    "A100 80 GB (the source's multi-node runs need it)",
    "fp16 mixed precision",
    f"vocabulary {VOCAB:,}",
)


@dataclass(frozen=True)
class VTrainRun:
    """One measured row: the layout and the iteration time, seconds."""

    row: int  # the CSV's data row, from 1
    gpus: int
    global_batch: int
    micro_batch: int
    hidden: int
    heads: int
    layers: int
    seq: int
    tp: int
    dp: int
    pp: int
    measured_s: float

    @property
    def family(self) -> tuple[int, ...]:
        """Runs of one model, batch and GPU count (their layouts differ): the ordering's unit."""
        return (self.hidden, self.heads, self.layers, self.seq, self.global_batch, self.gpus)

    @property
    def name(self) -> str:
        return (
            f"vtrain-{self.row}-h{self.hidden}-l{self.layers}-s{self.seq}-b{self.global_batch}"
            f"-tp{self.tp}-pp{self.pp}-dp{self.dp}-mb{self.micro_batch}"
        )

    def plan(self) -> Plan:
        return plan_from_mapping(self.mapping(), f"configs/validation/vtrain row {self.row}")

    def mapping(self) -> dict:
        return {
            "description": f"vTrain single-node run {self.row}",
            "model": {
                "name": f"GPT h{self.hidden} L{self.layers}",
                "num_layers": self.layers,
                "hidden_size": self.hidden,
                "num_attention_heads": self.heads,
                "vocab_size": VOCAB,
                "seq_length": self.seq,
            },
            "system": {
                "gpu": GPU,
                "gpus_per_node": 8,
                "intra_node_link": "nvlink3",
                "inter_node_link": "ib-hdr",
                "num_gpus": self.gpus,
            },
            "training": {
                "global_batch_size": self.global_batch,
                "dtype": "fp16",
                "framework": "deepspeed",
                # use_gradient_bucket false: one all-reduce after the backward
                "overlap_grad_reduce": False,
                "flash_attention": False,
                "attention_backend": "fused",
            },
            "parallel": {
                "tp": self.tp,
                "pp": self.pp,
                "dp": self.dp,
                "sequence_parallel": False,
                "recompute": "full",
                "zero_stage": 0,
                "vp": 1,
                "micro_batch_size": self.micro_batch,
                "schedule": "1f1b",
            },
        }


def parse(text: str, label: str) -> list[VTrainRun]:
    """The rows of vTrain's ground_truth_single.csv (its header, a BOM allowed)."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows or tuple(c.strip() for c in rows[0]) != COLUMNS:
        raise PerfModelError(f"{label}: the header is not vTrain's ({', '.join(COLUMNS)})")
    out = []
    for i, r in enumerate(rows[1:], start=1):
        if len(r) != len(COLUMNS):
            raise PerfModelError(f"{label}: row {i} has {len(r)} fields; expected {len(COLUMNS)}")
        try:
            ints = [int(v) for v in r[:-1]]
            ms = float(r[-1])
        except ValueError:
            raise PerfModelError(f"{label}: row {i} is not numbers: {','.join(r)}") from None
        gpus, batch, micro, hidden, heads, layers, seq, tp, dp, pp = ints
        run = VTrainRun(i, gpus, batch, micro, hidden, heads, layers, seq, tp, dp, pp, ms / 1e3)
        if run.tp * run.dp * run.pp != run.gpus:
            raise PerfModelError(
                f"{label}: row {i}: tensor x data x pipeline parallelism is "
                f"{run.tp * run.dp * run.pp}, not its {run.gpus} GPUs"
            )
        out.append(run)
    return out


def runs(every: int = 1) -> list[VTrainRun]:
    """The bundled runs (every ``every``-th row, for a quick check)."""
    f = _configs_root().joinpath(*CSV_PATH)
    return parse(f.read_text(encoding="utf-8"), "configs/" + "/".join(CSV_PATH))[::every]
