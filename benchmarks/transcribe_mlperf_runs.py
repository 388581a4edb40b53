"""Write NVIDIA's MLPerf Training v5.0/v5.1 Llama 3.1 runs on GB200 and GB300 (shared/validation/
published-2026b.yaml, ids MLPERF-v5.0-NVIDIA*, MLPERF-v5.0-CoreWeave*, MLPERF-v5.1-NVIDIA*) as
validation cases (configs/validation/mlperf*-*.yaml), table `mlperf-llama31`: one source (the
MLCommons results repositories, NeMo containers 25.04 and 25.09) that no calibration is fitted on,
so its runs check the Blackwell fractions fitted on Megatron-Bridge's tables out of sample
(benchmarks/oos_errors.py, issue 28). Each run as its submission states it: shape, GPUs (64 of a
rack's 72 on NVLink: 16 trays of 4), batch, tp/pp/cp/vp/dp, micro-batch, SP, the distributed
optimizer; the embedding and loss counted as pipeline layers (ASYM_PP_EMBED/ASYM_PP_LOSS); the
measured step time is the median of MLLOG's train_step_time. Run once from a checkout beside
../shared:

    python benchmarks/transcribe_mlperf_runs.py ../shared/validation/published-2026b.yaml
"""

from __future__ import annotations

import sys

from transcribe import OUT, write_cases
from transcribe_blackwell_runs import MODELS, SYSTEMS, _ends

KEEP = ("MLPERF-v5.0-NVIDIA", "MLPERF-v5.0-CoreWeave", "MLPERF-v5.1-NVIDIA")


def case(r: dict) -> tuple[str, dict]:
    m, hw, par, b = r["model"], r["hardware"], r["parallelism"], r["batch"]
    gpu, per_node, _, intra, inter = SYSTEMS[hw["gpu"].split()[0]]
    n = hw["num_gpus"]
    dtype = "nvfp4" if str(r["precision"]).startswith("NVFP4") else "fp8"
    vp = par.get("vp") or 1
    parallel: dict = {
        "tp": par["tp"],
        "pp": par["pp"],
        "cp": par["cp"],
        "vp": vp,
        "dp": par["dp"],
        "micro_batch_size": b["micro"],
        "sequence_parallel": bool(par.get("sp")),
        "recompute": "none",  # ACT_CKPT_* unset in the configs read (the records' recompute)
        "zero_stage": 1,  # USE_DIST_OPTIMIZER: Megatron-Core's distributed optimizer
    }
    other = str(par.get("other") or "")
    if par["pp"] > 1 and "ASYM_PP_EMBED" in other:
        first, last = _ends(m["layers"], par["pp"], vp)
        parallel["decoder_first_pipeline_num_layers"] = first
        parallel["decoder_last_pipeline_num_layers"] = last
    training: dict = {
        "global_batch_size": b["global_seqs"],
        "seq_length": m["seq_len"],
        "dtype": dtype,
        "framework": "megatron-core",
        # pretrain.py builds MegatronMixedPrecision(grad_reduce_in_fp32=False): bf16 main gradients
        "grad_accum_fp32": False,
    }
    if m["layers"] == 32:
        training["cross_entropy_fusion_impl"] = "te"  # config_common_8b.sh: CE_FUSION_IMPL=te
    if par["tp"] > 1:
        # config_common_fp4.sh turns TP comm overlap off for NVFP4; the v5.0 FP8 configs keep it
        training["tp_comm_overlap_ub"] = "TP comm overlap off" not in other and "TP comm" in other
    size = {32: "8b", 126: "405b"}[m["layers"]]
    release = r["id"].split("-")[1].replace("v", "").replace(".", "")
    name = f"mlperf{release}-{size}-{gpu}-{dtype}-{n}gpu"
    # 16 trays of 4 GPUs per NVL72 rack (64 GPUs); the 8-GPU run sits in one rack
    domain = 64 if n >= 64 else 72
    doc = {
        "description": r["id"],
        "source": (
            f"{r['source']}; transcribed from shared/validation/published-2026b.yaml id {r['id']}"
        ),
        "table": "mlperf-llama31",
        "model": MODELS[m["layers"]],
        "system": {
            "gpu": gpu,
            "gpus_per_node": per_node,
            "intra_node_link": intra,
            "inter_node_link": inter,
            "num_gpus": n,
            "nvlink_domain": domain,
        },
        "training": training,
        "parallel": parallel,
        "measured": {"iteration_time_s": r["measured"]["train_step_time_s_median"]},
    }
    if r.get("uncertain_why"):
        doc["notes"] = f"uncertain: {r['uncertain_why']}"
    return name, doc


def main(path: str) -> None:
    write_cases(path, lambda r: r["id"].startswith(KEEP), case, "transcribe_mlperf_runs.py")
    print(f"into {OUT}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/published-2026b.yaml")
