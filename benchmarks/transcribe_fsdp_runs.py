"""Write the PyTorch FSDP runs of shared/validation/published-2026.yaml as validation cases
(configs/validation/fsdp-*.yaml), as a user would write them: the shape, GPUs, batch, the
sharding (FULL_SHARD -> zero_stage 3, SHARD_GRAD_OP -> 2), the checkpointing each run used, and
the framework profile of the software that ran it. Run once from a checkout beside ../shared:

    python benchmarks/transcribe_fsdp_runs.py ../shared/validation/published-2026.yaml
"""

from __future__ import annotations

import sys

from transcribe import SOURCE, write_cases

GPUS = {"H100 80GB": "h100-sxm", "A100 80GB": "a100-80gb", "A100 40GB": "a100-40gb"}


def _gpu(hw: dict) -> tuple[str, str, str]:
    """(GPU preset, intra-node link, inter-node link) of a record's hardware."""
    if hw["gpu"].startswith("H100 SXM, 96 GB"):
        # torchtitan: Grand Teton, 400 Gb/s RDMA per GPU over Meta's RoCE fabric
        return "h100-sxm-96gb", "nvlink4", "roce-400g"
    for prefix, preset in GPUS.items():
        if hw["gpu"].startswith(prefix):
            if preset.startswith("a100"):
                # "1600 Gbps node-node interconnect (RoCE)": 8 x 200 Gb/s per node
                return preset, "nvlink3", "roce-200g"
            # the H100 tables do not state the fabric: MosaicML's H100 clusters have 3.2 Tb/s per
            # node, 400 Gb/s per GPU
            return preset, "nvlink4", "ib-ndr"
    raise SystemExit(f"no GPU preset for {hw['gpu']!r}")


def _mpt(m: dict) -> dict:
    return {
        "name": f"MPT {m['params_b']:.1f}B",
        "num_layers": m["layers"],
        "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"],
        "ffn_hidden_size": m["ffn"],
        "vocab_size": m["vocab"],
        "seq_length": m["seq_len"],
        "mlp": "gelu",
        "tied_embeddings": True,
        "position_embedding": "learned",
        "add_bias_linear": True,
        "normalization": "layernorm",
        "dropout": False,  # MPT's attn_pdrop and resid_pdrop are 0 in the pretrain yamls
    }


def _recompute(text: str) -> str:
    text = str(text)
    if text.startswith("full"):
        return "full"
    if text.startswith("selective"):
        return "selective"
    return "none"


def case(r: dict) -> tuple[str, dict]:
    m, hw, par, b = r["model"], r["hardware"], r["parallelism"], r["batch"]
    gpu, intra, inter = _gpu(hw)
    titan = r["id"].startswith("TORCHTITAN")
    n = hw["num_gpus"]
    training: dict = {"global_batch_size": b["global_seqs"], "seq_length": m["seq_len"]}
    if titan:
        size = "8b" if m["layers"] == 32 else "70b"
        tail = {
            "FSDP": "fsdp",
            "FSDP-compile-float8": "compile-fp8",
            "FSDP32-TP8": "fsdp32-tp8",
        }[r["id"].split("xH100-", 1)[1]]
        name = f"titan-{size}-{n}gpu-{tail}"
        model = "llama3-8b" if m["layers"] == 32 else "llama3-70b"
        training["framework"] = "fsdp"
        fp8 = "Float8" in str(r.get("precision"))
        # "BF16 (eager, no torch.compile)" names compile to say it is off
        said = str(r.get("precision")).replace("no torch.compile", "")
        compiled = "compile" in said + r["id"]
        if fp8:
            training["dtype"] = "fp8"  # torchao Float8Linear, tensorwise dynamic scaling
        if compiled:
            training["torch_compile"] = True  # Inductor's fusion of the pointwise kernels
    else:
        name = "llmf-" + r["id"].split("-", 1)[1].lower()
        model = _mpt(m)
        training["framework"] = "fsdp1"
        if "fp8" in str(hw.get("precision")):
            training["dtype"] = "fp8"
        # MPT's attn_impl as the benchmark scripts of that table passed it; flash goes through
        # llm-foundry's flash_attn_fn, which gathers q, k, v into flash-attn's varlen layout and
        # scatters the output back each layer (llmfoundry/models/layers/attention.py at 5e85bd62d)
        if "attn_impl flash" not in r["framework"]:
            training["attention_backend"] = "triton"
        else:
            training["attention_unpad"] = True
        # Composer's FSDP mixed precision: DEFAULT reduces in fp32, PURE in bf16
        training["reduce_dtype"] = "bf16" if "PURE" in par["fsdp_mixed_precision"] else "fp32"
    zero = 2 if "SHARD_GRAD_OP" in str(par.get("zero_stage")) else 3
    parallel = {
        "tp": par["tp"],
        "pp": par["pp"],
        "cp": par["cp"],
        "dp": par.get("dp") or n // (par["tp"] * par["pp"] * par["cp"]),
        "micro_batch_size": b["micro"],
        "recompute": _recompute(par["recompute"]),
        "zero_stage": zero,
        "sequence_parallel": bool(par.get("sp")),
    }
    if parallel["pp"] == 1:
        parallel["vp"] = 1
    measured = {"tokens_per_s_per_gpu": r["measured"]["tokens_per_s_per_gpu"]}
    doc = {
        "description": f"{r['id']}",
        "source": (
            f"{r['source']}; transcribed from shared/validation/published-2026.yaml id {r['id']}"
        ),
        "table": "torchtitan-2412" if titan else "llm-foundry",
        "model": model,
        "system": {
            "gpu": gpu,
            "gpus_per_node": 8,
            "intra_node_link": intra,
            "inter_node_link": inter,
            "num_gpus": n,
        },
        "training": training,
        "parallel": parallel,
        "measured": measured,
    }
    if r.get("uncertain_why"):
        doc["notes"] = f"uncertain: {r['uncertain_why']}"
    return name, doc


def main(path: str) -> None:
    write_cases(
        path,
        lambda r: r["id"].startswith("LLMF-") or r["id"].startswith("TORCHTITAN"),
        case,
        "transcribe_fsdp_runs.py",
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else SOURCE)
