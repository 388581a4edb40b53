"""Transcribe the published runs that state a measured memory peak (issue 29).

Two outputs, both naming their source:

- configs/validation/titan-*.yaml: the torchtitan benchmark runs of
  shared/validation/published-2026b.yaml this task owns (Llama 3.1 8B on 8 H100, the 70B AsyncTP
  row, the 70B BF16 row of 2025-06, Trainy's 8B on 32 H200), written as
  transcribe_fsdp_runs.py writes the published-2026.yaml ones;
- configs/memory_peaks.yaml: every measured peak of published-2026.yaml and published-2026b.yaml,
  keyed by record id (a case's `description`), with the quantity its source measured. torchtitan's
  "memory: X GiB (Y%)" log line is torch.cuda.max_memory_reserved (torchtitan/tools/utils.py
  device_memory_monitor: max_reserved_gib); Primus's "max memory" column does not say which
  figure it is.

Run once from a checkout beside ../shared:

    python benchmarks/transcribe_memory_runs.py ../shared/validation
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from transcribe import OUT, write_cases
from transcribe_fsdp_runs import case as fsdp_case

PEAKS = OUT.parent / "memory_peaks.yaml"
OWNED = (
    "TORCHTITAN-2412-LLAMA31_8B-8xH100-",
    "TORCHTITAN-2412-LLAMA31_70B-",
    "TORCHTITAN-2506-LLAMA31_70B-",
    "TRAINY-",
)
# record id -> case file name, for the rows transcribe_fsdp_runs.py has no name for
NAMES = {
    "TORCHTITAN-2412-LLAMA31_8B-8xH100-FSDP": "titan-8b-8gpu-fsdp",
    "TORCHTITAN-2412-LLAMA31_8B-8xH100-FSDP8-CP1-seq32k": "titan-8b-8gpu-fp8-s32k",
    "TORCHTITAN-2412-LLAMA31_8B-8xH100-FSDP1-CP8-seq256k": "titan-8b-8gpu-fp8-cp8-s256k",
    "TORCHTITAN-2412-LLAMA31_70B-256xH100-FSDP32-TP8-AsyncTP": "titan-70b-256gpu-asynctp",
    "TORCHTITAN-2506-LLAMA31_70B-256xH100-FSDP32-TP8-BF16": "titan2506-70b-256gpu-bf16",
    "TRAINY-2506-LLAMA31_8B-32xH200-FSDP-float8": "trainy-8b-32gpu-h200-fp8",
}


def _owned(r: dict) -> bool:
    return r["id"].startswith(OWNED) and "405B" not in r["id"]


def case(r: dict) -> tuple[str, dict]:
    """transcribe_fsdp_runs.py's case, with this record's own name, GPU and switches."""
    # the shared transcription reads the id's tail; give it the one its table knows
    tail = "FSDP-compile-float8" if "Float8" in str(r.get("precision")) else "FSDP"
    if r["parallelism"]["tp"] > 1:
        tail = "FSDP32-TP8"
    hw = r["hardware"]
    if hw["gpu"] == "H200":  # 141 GB HBM3e; transcribe_fsdp_runs.py knows only the H100 and A100
        hw = {**hw, "gpu": "H100 80GB"}
    _, doc = fsdp_case({**r, "hardware": hw, "id": "TORCHTITAN-X-xH100-" + tail})
    name = NAMES[r["id"]]
    doc["description"] = r["id"]
    doc["source"] = (
        f"{r['source']}; transcribed from shared/validation/published-2026b.yaml id {r['id']}"
    )
    other = str(r["parallelism"].get("other", ""))
    if "Async TP" in other or "AsyncTP" in r["id"]:
        # torchtitan's --parallelism.enable_async_tensor_parallel: micro-pipelined TP collectives
        doc["training"]["tp_comm_overlap_ub"] = True
    if r["id"].startswith("TRAINY"):
        doc["system"].update(gpu="h200", intra_node_link="nvlink4", inter_node_link="ib-ndr")
        # the run's float8 settings: enable_fsdp_float8_all_gather and precompute scales
        doc["training"]["fp8_param_gather"] = True
        doc["table"] = "torchtitan-2506"
    if r["id"].startswith("TORCHTITAN-2506"):
        doc["table"] = "torchtitan-2506"
        doc["training"].pop("dtype", None)  # the BF16 row: no float8
    doc["source"] = doc["source"].replace("published-2026.yaml", "published-2026b.yaml")
    return name, doc


def peaks(folder: Path) -> dict:
    """Every measured peak of the published runs, by record id."""
    out: dict = {}
    for file in ("published-2026.yaml", "published-2026b.yaml"):
        for r in yaml.safe_load(folder.joinpath(file).read_text()):
            m = r.get("measured") or {}
            if m.get("peak_memory_gib") is not None:
                out[r["id"]] = {
                    "peak_bytes": float(m["peak_memory_gib"]) * 2**30,
                    "as_published": f"{m['peak_memory_gib']} GiB",
                    "quantity": "reserved",
                    "how": "torchtitan log line 'memory: X GiB', torch.cuda.max_memory_reserved",
                    "source": f"{r['source']}; shared/validation/{file} id {r['id']}",
                }
            elif m.get("max_memory_gb") is not None:
                out[r["id"]] = {
                    "peak_bytes": float(m["max_memory_gb"]) * 1e9,
                    "as_published": f"{m['max_memory_gb']} GB",
                    "quantity": "unstated",
                    "how": "Primus blog table 'max memory (GB)'; which counter is not stated",
                    "source": f"{r['source']}; shared/validation/{file} id {r['id']}",
                }
    return out


def main(folder: str) -> None:
    base = Path(folder)
    write_cases(str(base / "published-2026b.yaml"), _owned, case, "transcribe_memory_runs.py")
    head = (
        "# Measured memory peaks of published runs, by record id (a validation case's"
        " description).\n# Written by benchmarks/transcribe_memory_runs.py; quantity: reserved ="
        " torch.cuda.max_memory_reserved,\n# allocated = max_memory_allocated, device ="
        " nvidia-smi, unstated = the source does not say.\n"
    )
    PEAKS.write_text(head + yaml.safe_dump(peaks(base), sort_keys=True, width=100))
    print(PEAKS)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation")
