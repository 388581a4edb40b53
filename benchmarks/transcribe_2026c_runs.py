"""Write the timed runs of shared/validation/published-2026c.yaml as validation cases
(configs/validation/*.yaml), each as its source states it: shape, GPUs, links, batch, layout,
format, framework profile, recompute and optimizer sharding. What a source leaves unstated takes
its framework's default at that release, said in the case's `notes`. One table per source:

- ``torchtitan-2024``: torchtitan's docs/performance.md of 2024 (Llama 2/3 on 64 A100, 2024-04;
  Llama 3.1 405B on 128 H100, BF16, Float8, Float8 + async TP, 2024-08), FSDP2 (profile fsdp).
- ``mlperf51-llama31``: MLPerf Training v5.1 (mlcommons/training_results_v5.1 at 441d65f4), the
  submitters other than NVIDIA (Nebius, University of Florida, HPE, Cisco, Oracle) on H100,
  H200 and B200, and NVIDIA's runs that last round's table (mlperf-llama31) does not hold yet
  go to that table: one table per submitter's systems keeps NVIDIA's GB200/GB300 runs together.
- ``dgxc-2505``: NVIDIA's DGX Cloud benchmark recipes v25.05.01 (NeMo 25.04), dense runs (Llama
  3.1 405B, Nemotron-4 340B); its MoE runs on GB200 join ``dgxc-moe-2505`` beside their H100 runs
  (same recipes, written by hand last round: their model blocks are read from those cases).

torchtitan's torchtitan/components/quantization/mxfp8.md (2025) gives no case: its Llama 3 8B runs
on 8 B200 are held as the calibration example examples/calibration/torchtitan-b200 (HELD), its
Llama 4 Scout runs on 256 GB200 (FSDP2 + EP 16) are refused: the fsdp profile models expert
parallelism now (tests/test_fsdp_moe.py), but as published the run keeps 926 GB of activations a
GPU (REFUSED). The MLPerf v5.1 AMD MI350X run is already held
(mlperf51-amd-8b-mi350x-fp8-8gpu, from published-2026b); the AMD performance-results rows have
no step time (global batch unstated; the three MI325X rows are held as amdperf-mi325x-*, the
MI355X Mixtral row is left out as benchmarks/transcribe_amd_results_runs.py says). Run once from
a checkout beside ../shared:

    python benchmarks/transcribe_2026c_runs.py ../shared/validation/published-2026c.yaml
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from transcribe import OUT, write_cases
from transcribe_blackwell_runs import _ends

SOURCE_2026C = "../shared/validation/published-2026c.yaml"
SCRIPT = "transcribe_2026c_runs.py"
# ids held already: the MI350X run as a validation case (from published-2026b), torchtitan's 8B on
# 8 power-limited B200 as the calibration example examples/calibration/torchtitan-b200 (the same
# table, quoted by torchao's training.md; held back from every fit and band, the stack docs/
# calibration.md calibrates on)
HELD = (
    "MLPERF-v5.1-AMD-LLAMA31_8B-8xMI350X-FP8",
    "TORCHTITAN-2508-LLAMA3_8B-8xB200-FSDP8-BF16",
    "TORCHTITAN-2508-LLAMA3_8B-8xB200-FSDP8-MXFP8",
)
# runs perfmodel refuses to model yet, with the reason (the refusal is in the report of issue t26c)
REFUSED = {
    "TORCHTITAN-2512-LLAMA4_SCOUT": (
        "as published (local batch 10 of 8,192 tokens, no activation checkpointing) its"
        " activations alone are 926 GB a GPU, 4.9x a GB200's usable HBM: the record's batch or"
        " checkpointing is not what ran, and no layout of it can be judged"
    ),
}
# (layers, vocab) -> model preset
MODELS = {
    (32, 128256): "llama3-8b",
    (80, 128256): "llama3-70b",
    (126, 128256): "llama3.1-405b",
    (40, 32000): "llama2-13b",
    (80, 32000): "llama2-70b",
    (96, 256000): "nemotron-4-340b",
}
SIZE = {"llama3-8b": "8b", "llama3-70b": "70b", "llama3.1-405b": "405b"}
SIZE |= {"llama2-13b": "l2-13b", "llama2-70b": "l2-70b", "nemotron-4-340b": "340b"}


def _gpu(system: dict) -> str:
    """The GPU in a case's name: h100-sxm-96gb -> h100 (names stay within validate's column)."""
    return str(system["gpu"]).split("-")[0]


def _system(r: dict) -> tuple[dict, str]:
    """The case's system block and a note on what the record does not state."""
    hw, rid = r["hardware"], r["id"]
    gpu, n = hw["gpu"], hw["num_gpus"]
    note = ""
    if gpu.startswith("H100 SXM, 95 GB"):
        # the 500 W H100 of Meta's Grand Teton hosts; torchtitan's 2024-12 notes on the same hosts:
        # 400 Gb/s RDMA a GPU (RoCE)
        s = ("h100-sxm-96gb", 8, "nvlink4", "roce-400g")
        note = (
            "Network not stated: 400 Gb/s RoCE a GPU, as torchtitan's 2024-12 notes on the hosts."
        )
    elif gpu.startswith("A100"):
        s = ("a100-80gb", 8, "nvlink3", "ib-hdr")
        note = "Network not stated: InfiniBand HDR 200 Gb/s a GPU assumed (DGX A100's)."
    elif gpu.startswith("H100"):
        ethernet = "Ethernet" in str(hw.get("inter_node"))
        s = ("h100-sxm", 8, "nvlink4", "roce-400g" if ethernet else "ib-ndr")
        if "not stated" in str(hw.get("inter_node")):
            note = "Network not stated: InfiniBand NDR 400 Gb/s a GPU (DGX H100's) assumed."
    elif gpu.startswith("H200"):
        s = ("h200", 8, "nvlink4", "ib-ndr")
    elif gpu.startswith("B200"):
        roce = "RoCE" in str(hw.get("inter_node"))
        s = ("b200", 8, "nvlink5", "roce-400g" if roce else "ib-ndr")
        if "speed not given" in str(hw.get("inter_node")):
            note = "InfiniBand speed not given: NDR 400 Gb/s a GPU (DGX B200's ConnectX-7) assumed."
        if "power limited" in gpu:
            note = "The B200s ran power limited, at a limit not given: the preset's clock."
    elif gpu.startswith("GB300"):
        s = ("gb300", 4, "nvlink5-nvl72", "cx8-800g")
    elif gpu.startswith("GB200"):
        s = ("gb200", 4, "nvlink5-nvl72", "ib-ndr")
        if "not stated" in str(hw.get("inter_node")):
            note = "Scale-out not stated: ConnectX-7 400 Gb/s a GPU (GB200 NVL72's) assumed."
    else:
        raise SystemExit(f"{rid}: no GPU preset for {gpu!r}")
    system = {
        "gpu": s[0],
        "gpus_per_node": s[1],
        "intra_node_link": s[2],
        "inter_node_link": s[3],
        "num_gpus": n,
    }
    if s[0] in ("gb200", "gb300"):
        # MLPerf's NVIDIA systems run 16 trays of 4 (SEGMENT 16 nodes: 64 of a rack's 72); a run
        # of 72 GPUs fills one rack; other sources do not say: 72
        system["nvlink_domain"] = 64 if "SEGMENT" in str(hw) else 72
    return system, note


def _model(r: dict) -> str:
    m = r["model"]
    return MODELS[(m["layers"], m["vocab"])]


def _dtype(precision: str) -> str:
    p = precision.lstrip("'")
    for word, dtype in (("NVFP4", "nvfp4"), ("MXFP8", "mxfp8"), ("Float8", "fp8"), ("FP8", "fp8")):
        if p.startswith(word):
            return dtype
    return "bf16"


def _parallel(r: dict, zero_stage: int, recompute: str) -> dict:
    par, b = r["parallelism"], r["batch"]
    out = {
        "tp": par["tp"],
        "pp": par["pp"],
        "cp": par["cp"],
        "vp": par.get("vp") or 1,
        "dp": par["dp"],
        "micro_batch_size": b["micro"],
        "sequence_parallel": bool(par.get("sp")),
        "recompute": recompute,
        "zero_stage": zero_stage,
    }
    return out


def _titan(r: dict) -> tuple[str, dict]:
    """torchtitan (FSDP2): the 2024 docs/performance.md tables and the 2025 MXFP8 notes."""
    par, b, m = r["parallelism"], r["batch"], r["model"]
    system, note = _system(r)
    dtype = _dtype(str(r["precision"]))
    rec = str(par["recompute"])
    recompute = "full" if rec.startswith("full") else "selective" if "selective" in rec else "none"
    # compile: false in the 2024-04 tomls (eager); true in the 405B toml (2024-08) and the 2025 runs
    compiled = "compile = false" not in str(r["framework"])
    training: dict = {
        "global_batch_size": b["global_seqs"],
        "seq_length": m["seq_len"],
        "framework": "fsdp",
        "dtype": dtype,
        "torch_compile": compiled,
    }
    notes = [note] if note else []
    if recompute == "selective":
        # selective_ac_option "op": the fsdp profile's recompute_modules (op_sac)
        notes.append("Selective recompute is torchtitan's per-op policy (op_sac).")
    if dtype == "fp8":
        training["fp8_recipe"] = "tensorwise"  # torchao Float8Linear, dynamic tensorwise
        # the 405B toml's [float8] section: enable_fsdp_float8_all_gather (and precomputed scales)
        training["fp8_param_gather"] = True
    if "Async TP" in str(par.get("other")):
        training["tp_comm_overlap_ub"] = True  # enable_async_tensor_parallel
    if r["id"].startswith("TORCHTITAN-2408") and dtype == "bf16":
        notes.append("torch.compile is not printed for the BF16 row: the toml's compile = true.")
    name = f"titan{r['id'][11:13]}-{SIZE[_model(r)]}-{system['num_gpus']}gpu"
    name += {"bf16": "", "fp8": "-fp8", "mxfp8": "-mxfp8"}[dtype]
    name += "-asynctp" if training.get("tp_comm_overlap_ub") else ""
    year = r["id"].split("-")[1][:2]
    doc = _doc(r, f"torchtitan-20{year}", _model(r), system, training)
    doc["parallel"] = _parallel(r, 3, recompute)  # FSDP2 fully_shard: parameters, grads, states
    doc["measured"] = {"tokens_per_s_per_gpu": r["measured"]["tokens_per_s_per_gpu"]}
    return name, _with_notes(doc, r, notes)


def _mlperf(r: dict) -> tuple[str, dict]:
    """MLPerf Training v5.1 Llama 3.1 runs of NVIDIA's NeMo implementation (every submitter's)."""
    par, b, m = r["parallelism"], r["batch"], r["model"]
    system, note = _system(r)
    precision, other = str(r["precision"]), str(par.get("other") or "")
    dtype = _dtype(precision)
    notes = [note] if note else []
    training: dict = {
        "global_batch_size": b["global_seqs"],
        "seq_length": m["seq_len"],
        "dtype": dtype,
        "framework": "megatron-core",
        # NVIDIA's pretrain.py: MegatronMixedPrecision(grad_reduce_in_fp32=False)
        "grad_accum_fp32": False,
    }
    if m["layers"] == 32:
        training["cross_entropy_fusion_impl"] = "te"  # config_common_8b.sh: CE_FUSION_IMPL=te
    if dtype == "fp8":
        if "tensorwise" in precision:
            training["fp8_recipe"] = "tensorwise"
        else:
            # FP8_RECIPE not overridden: NeMo's MegatronMixedPrecision default, delayed scaling
            training["fp8_recipe"] = "delayed"
            notes.append("FP8 recipe not set: NeMo's default, delayed scaling.")
        # FP8_PARAMS / FP8 param gather: config_common.sh of NVIDIA's implementation sets it
        training["fp8_param_gather"] = True
        if not any(w in precision for w in ("PARAM", "param")):
            notes.append("FP8 parameter gather not restated: config_common.sh's (on).")
    if "FP8 attention" in precision:
        notes.append("FP8 attention (FP8_DPA) is not modelled: attention costed in BF16.")
    if par["tp"] > 1 and "TP comm overlap" in other:
        training["tp_comm_overlap_ub"] = "TP comm overlap off" not in other
    if "CUDA graph" in other:
        notes.append("CUDA graphs are not modelled apart from the megatron-core overheads.")
    parallel = _parallel(r, 1, "none")  # USE_DIST_OPTIMIZER; ACT_CKPT unset ("none set")
    if par["pp"] > 1 and "ASYM_PP_EMBED" in other:
        first, last = _ends(m["layers"], par["pp"], parallel["vp"])
        parallel["decoder_first_pipeline_num_layers"] = first
        parallel["decoder_last_pipeline_num_layers"] = last
    submitter = r["id"].split("-")[2]
    nvidia = submitter == "NVIDIA"
    who = "" if nvidia else f"{submitter.lower().replace('ufl', 'uf').replace('orida', '')}-"
    # NVIDIA's as that table names them (with the format); the other submitters' are all FP8
    tail = f"{dtype}-{system['num_gpus']}gpu" if nvidia else f"{system['num_gpus']}gpu"
    name = f"mlperf51-{who}{SIZE[_model(r)]}-{_gpu(system)}-{tail}"
    table = "mlperf-llama31" if nvidia else "mlperf51-llama31"
    doc = _doc(r, table, _model(r), system, training)
    doc["parallel"] = parallel
    doc["measured"] = {"iteration_time_s": r["measured"]["train_step_time_s_median"]}
    return name, _with_notes(doc, r, notes)


def _dgxc(r: dict) -> tuple[str, dict]:
    """DGX Cloud v25.05.01 recipes (NeMo 25.04 performance recipes, megatron-core)."""
    par, b, m = r["parallelism"], r["batch"], r["model"]
    system, note = _system(r)
    dtype = _dtype(str(r["precision"]))
    notes = [note] if note else []
    moe = "moe" in m
    training: dict = {
        "global_batch_size": b["global_seqs"],
        "seq_length": m["seq_len"],
        "dtype": dtype,
        "framework": "megatron-core",
    }
    if dtype == "fp8":
        # scripts/performance's --fp8_recipe default "ds": delayed scaling
        training["fp8_recipe"] = "delayed"
        # helpers.py set_precision_configs: grad_reduce_in_fp32 False under FP8 (BF16 keeps the
        # mixed-precision plugin's fp32 gradient reduction)
        training["grad_accum_fp32"] = False
        notes.append("FP8 recipe not printed: the performance scripts' default, delayed scaling.")
    if par["tp"] > 1:
        # the recipes' MegatronCommOverlapCallback(tp_comm_overlap=True): TE userbuffers
        training["tp_comm_overlap_ub"] = True
    parallel = _parallel(r, 1, "none")  # distributed optimizer
    # scripts/performance/helpers.py: full recompute only for a CSV row's recompute_layers > 0;
    # the recommended_model_configs rows of these models have 0
    notes.append("Recompute not printed: the performance scripts' default, none.")
    if par["pp"] > 1 and m["layers"] % (par["pp"] * parallel["vp"]):
        # the 405B recipe counts the embedding and the loss as pipeline layers
        first, last = _ends(m["layers"], par["pp"], parallel["vp"])
        parallel["decoder_first_pipeline_num_layers"] = first
        parallel["decoder_last_pipeline_num_layers"] = last
    model: str | dict = "" if moe else _model(r)
    table = "dgxc-moe-2505" if moe else "dgxc-2505"
    name = f"dgxc-{SIZE.get(str(model), '')}-{_gpu(system)}-{dtype}-{system['num_gpus']}gpu"
    if moe:
        model, name = _dgxc_moe(r, training, parallel, notes)
        name = f"dgxc-{name}-{system['gpu']}-{dtype}-{system['num_gpus']}gpu"
    doc = _doc(r, table, model, system, training)
    doc["parallel"] = parallel
    doc["measured"] = {"iteration_time_s": r["measured"]["train_step_time_s"]}
    return name, _with_notes(doc, r, notes)


def _dgxc_moe(r: dict, training: dict, parallel: dict, notes: list[str]) -> tuple[dict, str]:
    """A DGX Cloud MoE run on GB200: the model block and MoE switches of its H100 case (written
    by hand from the same recipe), at the GB200 layout."""
    held = {"Grok": "grok1-314b", "DeepSeek": "deepseek-v3", "Llama 4": "llama4-maverick"}
    key = next(k for k in held if r["model"]["name"].startswith(k))
    (path,) = OUT.glob(f"dgxc-{held[key]}-h100-*.yaml")
    h100 = yaml.safe_load(path.read_text())
    for k in ("moe_token_dispatcher_type", "moe_a2a_overlap", "recompute_modules"):
        if k in h100["training"]:
            training[k] = h100["training"][k]
    etp = str(r["parallelism"].get("other") or "").removeprefix("ETP ")
    parallel["ep"] = r["parallelism"]["ep"]
    parallel["etp"] = int(etp) if etp.isdigit() else 1
    if key == "DeepSeek":
        # the recipe's uneven ends: 64 // pp - 1 layers first, 64 // pp - 2 last (H100 case)
        pp = parallel["pp"]
        parallel["decoder_first_pipeline_num_layers"] = 64 // pp - 1
        parallel["decoder_last_pipeline_num_layers"] = 64 // pp - 2
        parallel["recompute"] = "selective"
        # --recompute_modules mla_up_proj is launch.sh's on H100 only: Megatron-Core's default
        # module, core_attn (NeMo's later model_configs_gb200.csv names it for this layout too)
        training["recompute_modules"] = ["core_attn"]
        notes[-1] = (
            "Recompute: the recipe's selective; launch.sh names mla_up_proj on H100 only, so"
            " Megatron-Core's default module (core_attn) on GB200."
        )
    notes.append(f"Model and MoE switches as {path.name} (same recipe).")
    return h100["model"], held[key]


def _doc(r: dict, table: str, model: str | dict, system: dict, training: dict) -> dict:
    return {
        "description": r["id"],
        "source": (
            f"{r['source']}; transcribed from shared/validation/published-2026c.yaml id {r['id']}"
        ),
        "table": table,
        "model": model,
        "system": system,
        "training": training,
    }


def _with_notes(doc: dict, r: dict, notes: list[str]) -> dict:
    if r.get("uncertain_why"):
        notes.append(f"uncertain: {r['uncertain_why']}")
    if notes:
        doc["notes"] = " ".join(notes)
    return doc


def keep(r: dict) -> bool:
    timed = (r.get("measured") or {}).get("derived_step_time_s") is not None
    refused = any(r["id"].startswith(k) for k in REFUSED)
    return timed and r["id"] not in HELD and not refused


def case(r: dict) -> tuple[str, dict]:
    if r["id"].startswith("TORCHTITAN"):
        return _titan(r)
    if r["id"].startswith("MLPERF"):
        return _mlperf(r)
    if r["id"].startswith("DGXC"):
        return _dgxc(r)
    raise SystemExit(f"{r['id']}: no transcription for this source")


def main(path: str) -> None:
    write_cases(path, keep, case, SCRIPT)
    for rid, why in REFUSED.items():
        print(f"not written: {rid}*: {why}")
    print(f"into {OUT} (from {Path(path).name})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else SOURCE_2026C)
