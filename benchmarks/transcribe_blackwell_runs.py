"""Write the Megatron-Bridge Blackwell runs of shared/validation/published-2026.yaml as validation
cases (configs/validation/mb*-*.yaml), as a user would write them: the shape, GPUs, batch,
the published layout (tp, pp, cp, vp, dp, micro-batch, SP), the format, Megatron-FSDP or the
distributed optimizer, and what the workload preset adds (uneven pipeline ends where the embedding
and loss count as layers, activation offloading). Run once from a checkout beside ../shared:

    python benchmarks/transcribe_blackwell_runs.py ../shared/validation/published-2026.yaml
"""

from __future__ import annotations

import re
import sys

from transcribe import SOURCE, write_cases

# (preset, GPUs per node, NVLink domain, intra link, scale-out link): GB200/GB300 NVL72 trays of 4
# GPUs in 72-GPU racks (MLPerf v5.0/v5.1 system descriptions: accelerators_per_node 4; the
# DeepSeek perf recipe sets NVLINK_DOMAIN_SIZE=72), ConnectX-7 400 Gb/s per GPU on GB200 and
# DGX-B200, ConnectX-8 800 Gb/s on GB300 (NVIDIA's system data sheets; the tables do not say)
SYSTEMS = {
    "GB300": ("gb300", 4, 72, "nvlink5-nvl72", "cx8-800g"),
    "GB200": ("gb200", 4, 72, "nvlink5-nvl72", "ib-ndr"),
    "B200": ("b200", 8, 8, "nvlink5", "ib-ndr"),
}
MODELS = {32: "llama3-8b", 80: "llama3-70b", 126: "llama3.1-405b"}


def _dtype(precision: str) -> str:
    if precision.startswith("NVFP4"):
        return "nvfp4"
    if precision.startswith("MXFP8"):
        return "mxfp8"
    return "fp8"  # FP8 / FP8-CS: per-tensor current scaling


def _ends(layers: int, pp: int, vp: int) -> tuple[int, int]:
    """First and last stage layers when the embedding and the loss count as one layer each
    (Megatron-Core account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split):
    (layers + 2) units over pp x vp chunks, the first chunk losing one to the embedding and the
    last one to the loss."""
    per_chunk = (layers + 2) // (pp * vp)
    return per_chunk * vp - 1, per_chunk * vp - 1


def case(r: dict) -> tuple[str, dict]:
    m, hw, par, b = r["model"], r["hardware"], r["parallelism"], r["batch"]
    gpu_name = hw["gpu"].split()[0]
    gpu, per_node, domain, intra, inter = SYSTEMS[gpu_name]
    n = hw["num_gpus"]
    dtype = _dtype(str(r["precision"]))
    fsdp = str(par.get("fsdp", "")).startswith("Megatron-FSDP")
    parallel: dict = {
        "tp": par["tp"],
        "pp": par["pp"],
        "cp": par["cp"],
        "vp": par.get("vp") or 1,
        "dp": par["dp"],
        "micro_batch_size": b["micro"],
        "sequence_parallel": bool(par.get("sp")),
        "recompute": "none",
        # Megatron-FSDP optim_grads_params shards all three (ZeRO-3); else the distributed
        # optimizer (ZeRO-1)
        "zero_stage": 3 if fsdp else 1,
    }
    notes = " ".join(str(par.get(k, "")) for k in ("other", "recompute"))
    chunks = par["pp"] * parallel["vp"]
    # Megatron-Core refuses layers that do not divide over the chunks unless the embedding and
    # loss count as layers; the 405B presets set both flags (llama31_llm_pretrain.py @v0.4.2)
    if par["pp"] > 1 and ("embedding" in notes or m["layers"] % chunks):
        first, last = _ends(m["layers"], par["pp"], parallel["vp"])
        parallel["decoder_first_pipeline_num_layers"] = first
        parallel["decoder_last_pipeline_num_layers"] = last
    training = {
        "global_batch_size": b["global_seqs"],
        "seq_length": m["seq_len"],
        "dtype": dtype,
        "framework": "megatron-core",
        # the performance scripts' set_*_common_configs (scripts/performance/configs at tags v0.2.0
        # and v0.4.2) set ddp.grad_reduce_in_fp32 False: the main gradients in bf16; and their
        # common overrides set cross_entropy_fusion_impl "te" (Transformer Engine's fused loss)
        "grad_accum_fp32": False,
        "cross_entropy_fusion_impl": "te",
    }
    other = str(par.get("other") or "")
    if par["tp"] > 1 and "TP comm overlap" in other:
        # Megatron-Bridge's tp_comm_overlap: Transformer Engine's userbuffers overlap of the SP
        # all-gathers and reduce-scatters with the GEMMs; off for the NVFP4 presets
        training["tp_comm_overlap_ub"] = not re.search(r"TP comm overlap (off|disabled)", other)
    if "param-gather overlap disabled" in other:
        training["overlap_param_gather"] = False
    if dtype == "fp8":
        # the FP8-CS presets' mixed precision, bf16_with_fp8_current_scaling_mixed
        # (src/megatron/bridge/training/mixed_precision.py), sets fp8_param_gather: the weights
        # are kept in FP8 only and gathered so (issue 29)
        training["fp8_param_gather"] = True
    offload = re.search(r"cpu_offloading_num_layers=(\d+)", notes)
    if offload:
        training["cpu_offloading_num_layers"] = int(offload.group(1))
    release = r["id"].split("-")[1]
    size = {32: "8b", 80: "70b", 126: "405b"}[m["layers"]]
    name = f"mb{release.replace('.', '')}-{size}-{gpu}-{dtype}{'-fsdp' if fsdp else ''}-{n}gpu"
    system = {
        "gpu": gpu,
        "gpus_per_node": per_node,
        "intra_node_link": intra,
        "inter_node_link": inter,
        "num_gpus": n,
    }
    if domain != per_node:
        system["nvlink_domain"] = domain
    doc = {
        "description": r["id"],
        "source": (
            f"{r['source']}; transcribed from shared/validation/published-2026.yaml id {r['id']}"
        ),
        "table": "mbridge-blackwell",
        "model": MODELS[m["layers"]],
        "system": system,
        "training": training,
        "parallel": parallel,
        "measured": {"tokens_per_s_per_gpu": r["measured"]["tokens_per_s_per_gpu"]},
    }
    if r.get("uncertain_why"):
        doc["notes"] = f"uncertain: {r['uncertain_why']}"
    return name, doc


def main(path: str) -> None:
    write_cases(
        path,
        lambda r: r["id"].startswith("MBRIDGE-") and r["hardware"]["gpu"].split()[0] in SYSTEMS,
        case,
        "transcribe_blackwell_runs.py",
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else SOURCE)
