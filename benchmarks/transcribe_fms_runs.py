"""Write IBM's fms-fsdp throughput runs of shared/validation/published-2026b.yaml (the IBMFSDP-*
records: Llama 2 shapes, 7B-70B, on 128 A100 and 96 H100 with the same scripts, eager and
torch.compile) as timed validation cases, configs/validation/fms-*.yaml, table ``fms-fsdp``.

What each record and fms-fsdp's code at the record's commit state (foundation-model-stack/fms-fsdp
4ffb9bdf, 2024-03-21, and ed74fd5d, 2024-05-09, for the compiled rows):
- main_training.py: torch.distributed.fsdp.FullyShardedDataParallel (FSDP1, flat parameters,
  ``use_orig_params`` only with compile, ``limit_all_gathers=True``), one optimizer step per batch
  of ``batch_size`` 2 sequences a GPU (no gradient accumulation): micro-batch 2, global 2 x GPUs;
  torch.optim.AdamW on the flat parameters;
- fms_fsdp/policies/mixed_precision.py bfSixteen: parameters, gradient reduction and buffers in
  bf16 (``reduce_dtype: bf16``);
- the README's sharding: HSDP for 7B (fms_fsdp/utils/train_utils.py get_policies: HYBRID_SHARD,
  sharded over the 8 GPUs of a node, docs/configurations.md), FULL_SHARD for the others;
- checkpointing (fms_fsdp/policies/ac_handler.py): ``selective_checkpointing`` k wraps every k-th
  LLaMABlock; the 13B row's k is not printed, but its HFU/MFU ratio (0.59/0.51 and 0.40/0.35, about
  1 + 1/(3k)) is k = 2: every other layer recomputed (``layer_sac``, every 2nd layer);
- attention: PyTorch SDPA's flash backend, FlashAttention-2 (README); the fms Llama in eager mode
  (RMSNorm, SwiGLU, RoPE as separate kernels) unless compiled;
- the loss: torch.nn.CrossEntropyLoss on the model's logits (fms_fsdp/utils/train_utils.py
  train), not a fused kernel (``fused_cross_entropy: false``; the model's unfused loss is
  Megatron's fp32 one, a few bytes a logit more than PyTorch's on bf16 logits).

The network: the README's table headers say "A100 80G 128 GPUs with 400Gbps" and "H100 96 GPUs
with 800 Gbps"; read as a node's scale-out bandwidth (8 GPUs a node, scripts/train.sh
--nproc_per_node=8), 50 and 100 Gb/s a GPU, at a link's default efficiency (no measurement).

Run from the repository root:

    python benchmarks/transcribe_fms_runs.py /work/shared/validation/published-2026b.yaml
"""

from __future__ import annotations

import sys

from transcribe import llama_shape, write_cases

SOURCE = "/work/shared/validation/published-2026b.yaml"
MODELS = {32: "llama2-7b", 40: "llama2-13b", 80: "llama2-70b"}


def _network(per_node_gbps: int) -> dict:
    """A node's scale-out bandwidth as the README's header gives it, per GPU."""
    return {
        "name": f"{per_node_gbps} Gb/s a node (fms-fsdp README), {per_node_gbps // 8} Gb/s a GPU",
        "bandwidth_bytes_per_s": f"{per_node_gbps // 8} Gb/s",
        "latency_s": 4e-6,
        "source": (
            "foundation-model-stack/fms-fsdp README.md table header; 8 GPUs a node"
            " (scripts/train.sh --nproc_per_node=8); latency as RoCE's (roce-400g)"
        ),
    }


def _model(m: dict) -> str | dict:
    if m["layers"] in MODELS:
        return MODELS[m["layers"]]
    # CodeLlama-34B's shape, as fms_fsdp/utils/config_utils.py gives "34b"
    return llama_shape(m, "Llama 34B (fms)")


def case(r: dict) -> tuple[str, dict]:
    m, hw, par, b = r["model"], r["hardware"], r["parallelism"], r["batch"]
    a100 = hw["gpu"].startswith("A100")
    n = hw["num_gpus"]
    compiled = r["id"].startswith("IBMFSDP-compile")
    size = r["id"].split("-")[2]
    name = f"fms-{'compile' if compiled else 'eager'}-{size}-{'a100' if a100 else 'h100'}-{n}gpu"
    training: dict = {
        "global_batch_size": b["global_seqs"],
        "seq_length": m["seq_len"],
        "framework": "fsdp1",
        "reduce_dtype": "bf16",  # bfSixteen
        "attention_backend": "fa2",  # SDPA's flash backend
        "fused_cross_entropy": False,  # torch.nn.CrossEntropyLoss
    }
    if compiled:
        training["torch_compile"] = True
    recompute = str(par["recompute"])
    parallel: dict = {
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "vp": 1,
        "dp": n,
        "micro_batch_size": b["micro"],
        "zero_stage": 3,
        "sequence_parallel": False,
        "recompute": "none",
    }
    if recompute.startswith("full"):
        parallel["recompute"] = "full"
    elif recompute.startswith("selective"):
        # every 2nd block (k = 2, from the row's HFU/MFU ratio; see the module docstring)
        parallel["recompute"] = "selective"
        training["recompute_modules"] = ["layer_sac"]
        training["checkpoint_every_n_layers"] = 2
    if par.get("hsdp_shard_group"):
        parallel["dp_shard"] = par["hsdp_shard_group"]
    doc = {
        "description": r["id"],
        "source": (
            f"{r['source']}; transcribed from shared/validation/published-2026b.yaml id {r['id']}"
        ),
        "table": "fms-fsdp",
        "model": _model(m),
        "system": {
            "gpu": "a100-80gb" if a100 else "h100-sxm",
            "gpus_per_node": 8,
            "intra_node_link": "nvlink3" if a100 else "nvlink4",
            "inter_node_link": _network(400 if a100 else 800),
            "num_gpus": n,
        },
        "training": training,
        "parallel": parallel,
        "measured": {"tokens_per_s_per_gpu": r["measured"]["tokens_per_s_per_gpu"]},
        "notes": f"uncertain: {r['uncertain_why']}",
    }
    return name, doc


def main(path: str) -> None:
    write_cases(path, lambda r: r["id"].startswith("IBMFSDP-"), case, "transcribe_fms_runs.py")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else SOURCE)
