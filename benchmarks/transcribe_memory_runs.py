"""Transcribe the published runs that state a measured memory peak (issue 29).

Two outputs, both naming their source:

- configs/validation/titan-*.yaml: the torchtitan benchmark runs of
  shared/validation/published-2026b.yaml this task owns (Llama 3.1 8B on 8 H100, the 70B AsyncTP
  row, the 70B BF16 row of 2025-06, Trainy's 8B on 32 H200), written as
  transcribe_fsdp_runs.py writes the published-2026.yaml ones;
- configs/memory_peaks.yaml: every measured peak of published-2026.yaml and published-2026b.yaml,
  keyed by record id (a case's `description`), with the quantity its source measured. torchtitan's
  "memory: X GiB (Y%)" log line is torch.cuda.max_memory_reserved (torchtitan/tools/utils.py
  device_memory_monitor: max_reserved_gib); Primus's "max memory" column is the device's (rocm-smi)
  used memory, in GiB, as its trainer logs it.

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
    # its Async TP column (652.4) is written by hand beside it: titan2506-70b-256gpu-bf16-asynctp
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
    # the 2025-06 rows measured vanilla TP and name the Async TP figure beside it ("vanilla TP
    # (Async TP on: 652.4)"): that row ran without it
    if "AsyncTP" in r["id"] or ("Async TP" in other and not other.startswith("vanilla")):
        # torchtitan's --parallelism.enable_async_tensor_parallel: micro-pipelined TP collectives
        doc["training"]["tp_comm_overlap_ub"] = True
    if r["id"].startswith("TRAINY"):
        doc["system"].update(gpu="h200", intra_node_link="nvlink4", inter_node_link="ib-ndr")
        # the run's float8 settings: enable_fsdp_float8_all_gather and precompute scales
        doc["training"]["fp8_param_gather"] = True
        # its torchtitan (e7c0cae) compiles the loss with training.compile (components/loss.py
        # build_cross_entropy_loss; at 2024-12's 9dec370 that line is commented out in train.py):
        # a fused cross-entropy on the 16-bit logits, not F.cross_entropy on an fp32 copy
        doc["training"]["fused_cross_entropy"] = True
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
            if (r.get("batch") or {}).get("micro") is None:
                # a peak is set beside the model only where the source states the run's
                # micro-batch: the Primus blog's three Qwen3-235B rows state no batch, micro-batch
                # or recompute (configs/memory_runs holds them to check they fit)
                continue
            if m.get("peak_memory_gib") is not None:
                out[r["id"]] = {
                    "peak_bytes": float(m["peak_memory_gib"]) * 2**30,
                    "as_published": f"{m['peak_memory_gib']} GiB",
                    "quantity": "reserved",
                    "how": "torchtitan log line 'memory: X GiB', torch.cuda.max_memory_reserved",
                    "source": f"{r['source']}; shared/validation/{file} id {r['id']}",
                }
            elif m.get("max_memory_gb") is not None:
                # the blog's max_memory and max_mem_percent are the trainer's log line "rank-N max
                # mem usage/usage_ratio": rocm-smi's VRAM used, the largest over the ranks, at
                # iterations 1 and 2 (use_rocm_mem_info_iters [1, 2]), printed as X/1024**3 "GiB"
                # (AMD-AGI/Primus primus/modules/trainer/megatron/trainer.py training_log and
                # primus/core/utils/rocm_mem_info.py at the blog's commit 78633ae7); the percentage
                # is of 192 GiB on MI300X (16.26 / 8.47% = 192.0), 288 GiB on MI355X
                out[r["id"]] = {
                    "peak_bytes": float(m["max_memory_gb"]) * 2**30,
                    "as_published": f"{m['max_memory_gb']} GB (GiB: X / 1024**3)",
                    "quantity": "device",
                    # read after the first step (docs/memory.md): at 18 B a parameter, V-Min's
                    # first rank (embedding, output layer and two layers: 667M parameters) holds
                    # 11.2 GiB of model states, more than its 11.9 GiB peak leaves beside one
                    # micro-batch's 1.0 GiB; before Adam's moments exist (10 B) every schedule's
                    # reading is 1.11-1.27 x the model's allocated figure
                    "reading": "first-step",
                    "how": (
                        "Primus trainer log 'rank-N max mem usage': rocm-smi VRAM used, the"
                        " largest over the ranks, logged after iterations 1 and 2; the figures fit"
                        " the first's"
                    ),
                    "source": f"{r['source']}; shared/validation/{file} id {r['id']}",
                }
    return out


# The rows of torchtitan's 2024-12 benchmark notes that no published record holds, transcribed from
# the notes themselves (its measured "Memory(GiB)" is torch.cuda.max_memory_reserved, as above):
# (record id, table and row, the held case it differs from, what differs, GiB)
TITAN = "TORCHTITAN-2412-LLAMA31_"
TITAN_ROWS = (
    (
        TITAN + "8B-8xH100-FSDP-compile",
        "Table 1, row 'FSDP + torch.compile'",
        "titan-8b-8gpu-fsdp",
        {"training": {"torch_compile": True}},
        77.0,
    ),
    (
        TITAN + "8B-8xH100-FSDP-compile-float8",
        "Table 1, row 'FSDP + torch.compile + Float8'",
        "titan-8b-8gpu-fsdp",
        {"training": {"torch_compile": True, "dtype": "fp8"}},
        76.8,
    ),
    (
        TITAN + "8B-128xH100-FSDP-compile",
        "Table 3, row 'FSDP + torch.compile'",
        "titan-8b-128gpu-fsdp",
        {"training": {"torch_compile": True}},
        62.0,
    ),
    (
        TITAN + "8B-8xH100-FSDP4-CP2-seq64k",
        "Table 2, row 'FSDP 4, CP 2'",
        "titan-8b-8gpu-fp8-s32k",
        {"training": {"seq_length": 65536, "global_batch_size": 4}, "parallel": {"cp": 2, "dp": 4}},
        84.2,
    ),
    (
        TITAN + "8B-8xH100-FSDP2-CP4-seq128k",
        "Table 2, row 'FSDP 2, CP 4'",
        "titan-8b-8gpu-fp8-s32k",
        {
            "training": {"seq_length": 131072, "global_batch_size": 2},
            "parallel": {"cp": 4, "dp": 2},
        },
        84.0,
    ),
) + tuple(
    # Table 6: 4D (FSDP + TP 8 + PP 8 + CP) + compile + Float8 + AsyncTP + 1F1B, local batch 8:
    # torchtitan's default of pp micro-batches a step (pipelining_utils.py at 9dec370), one each
    (
        f"{TITAN}405B-512xH100-FSDP{dp}-TP8-PP8-CP{cp}-seq{s // 1024}k",
        f"Table 6, row 'FSDP {dp}, CP {cp}'",
        "titan-405b-512gpu-pp8-1f1b",
        {
            "training": {"seq_length": s, "global_batch_size": 8 * dp},
            "parallel": {"cp": cp, "dp": dp, "micro_batch_size": 1},
        },
        gib,
    )
    for dp, cp, s, gib in (
        (8, 1, 32768, 75.3),
        (4, 2, 65536, 75.9),
        (2, 4, 131072, 77.1),
        (1, 8, 262144, 84.9),
    )
)
TITAN_SOURCE = (
    "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (same text was"
    " docs/performance.md at commit d4c86e3758a84cf23e2e879ab3c995cba9d5e410); runs by the"
    " torchtitan team with torch 1963fc8, torchao eab345c, torchtitan 9dec370 (2024-12), {}"
)


def titan_rows() -> dict:
    """The extra torchtitan rows as memory runs (configs/memory_runs), and their peaks by id."""
    runs = OUT.parent / "memory_runs"
    runs.mkdir(exist_ok=True)
    out = {}
    for record, row, base, change, gib in TITAN_ROWS:
        doc = yaml.safe_load(OUT.joinpath(f"{base}.yaml").read_text())
        for key in ("table", "measured", "notes"):
            doc.pop(key, None)
        for section, values in change.items():
            doc[section] = {**doc[section], **values}
        doc["description"] = record
        doc["source"] = TITAN_SOURCE.format(row) + f"; the plan of {base} with {change}"
        name = "titan-" + record[len(TITAN) :].lower().replace("xh100", "gpu")
        head = (
            f"# Transcribed from the torchtitan 2024-12 notes, {row}"
            f" (benchmarks/{Path(__file__).name})\n"
        )
        runs.joinpath(f"{name}.yaml").write_text(
            head + yaml.safe_dump(doc, sort_keys=False, width=100)
        )
        out[record] = {
            "peak_bytes": gib * 2**30,
            "as_published": f"{gib} GiB",
            "quantity": "reserved",
            "how": "torchtitan log line 'memory: X GiB', torch.cuda.max_memory_reserved",
            "source": TITAN_SOURCE.format(row),
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
    PEAKS.write_text(
        head + yaml.safe_dump({**peaks(base), **titan_rows()}, sort_keys=True, width=100)
    )
    print(PEAKS)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation")
