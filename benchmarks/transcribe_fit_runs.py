"""Write the published runs of shared/validation/published-2026b.yaml that `validate` does not time
as memory runs (configs/memory_runs/*.yaml, perfmodel/inputs/memory_runs.py): each ran, so each must
fit (tests/test_memory_runs.py), and a run that measured its peak joins `validate --memory`.
IBM's fms-fsdp table was one until it became timed validation cases
(benchmarks/transcribe_fms_runs.py, table fms-fsdp); its 13B row's checkpointing is explained there.

- Primus-pipeline's 'zbb' row (Llama 2 7B, 16 layers, PP 8): the blog's own table of its schedules
  names ZeroBubble ZB1P, Primus's pp_algorithm zero-bubble (ZB-H1); its peak as the other rows';
- Primus-pipeline's three Qwen3-235B rows on MI355X: the blog states no batch, micro-batch or
  recompute, so the layout (PP 4, EP 8, 32 GPUs) with full recompute and one sequence a
  micro-batch, the least memory that layout runs in; their peaks are not compared (no config).

Run once from a checkout beside ../shared:

    python benchmarks/transcribe_fit_runs.py ../shared/validation/published-2026b.yaml
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from transcribe import llama_shape

OUT = Path(__file__).resolve().parents[1] / "configs" / "memory_runs"
# the 'zbb' row at VPP 2: interleaved zero-bubble, the schedule of Primus's zero-bubble runtime
# with vpp > 1 (specs/framework_extra.py's primus profile)
SCHEDULES = {"ZBB-VPP2": "interleaved-zb", "1F1B": "1f1b", "ZeroBubble": "zb-h1"}


def primus(r: dict) -> tuple[str, dict]:
    m, hw, par, b = r["model"], r["hardware"], r["parallelism"], r["batch"]
    n = hw["num_gpus"]
    tail = r["id"].split(f"PP{par['pp']}-", 1)[1].removeprefix(f"EP{par['ep']}-")
    sched = SCHEDULES.get(tail, "interleaved")
    vp = par["vp"] if sched in ("interleaved", "interleaved-zb") else 1
    parallel: dict = {"tp": 1, "pp": par["pp"], "cp": 1, "dp": par["dp"], "vp": vp}
    parallel.update(schedule=sched, sequence_parallel=False, zero_stage=1)
    if "QWEN3" in r["id"]:
        name = f"primus-qwen3-235b-{tail.lower()}-{n}gpu"
        parallel.update(ep=par["ep"], micro_batch_size=1, recompute="full")
        # the blog states no batch: 4 nodes' share of the MI355X preset's 8192 over 32 nodes
        training = {"global_batch_size": 1024, "seq_length": 4096, "framework": "primus"}
        doc = {"model": "qwen3-235b-a22b", "system": _system(n, "mi355x")}
    else:
        name = "primus-llama2-7b-16l-zbb-8gpu"
        parallel.update(micro_batch_size=b["micro"], recompute="none", zero_stage=0)
        training = {
            "global_batch_size": b["global_seqs"],
            "seq_length": 4096,
            "framework": "primus",
        }
        doc = {"model": _primus_llama(m), "system": _system(n, "mi300x")}
    training["dtype"] = "bf16"
    return name, {**doc, "training": training, "parallel": parallel}


def _system(n: int, gpu: str) -> dict:
    inter = "pollara-400" if gpu == "mi355x" else "roce-400g"
    return {
        "gpu": gpu,
        "gpus_per_node": 8,
        "intra_node_link": "infinity-fabric",
        "inter_node_link": inter,
        "num_gpus": n,
    }


def _primus_llama(m: dict) -> dict:
    return llama_shape(m, "Llama 2 7B shape, 16 layers")


def main(path: str) -> None:
    OUT.mkdir(exist_ok=True)
    held = {p.stem for p in (OUT.parent / "validation").glob("*.yaml")}
    for r in yaml.safe_load(Path(path).read_text()):
        if r["id"].startswith("PRIMUSPIPE") and ("QWEN3" in r["id"] or "ZBB" in r["id"]):
            name, doc = primus(r)
        else:
            continue
        assert name not in held, name
        head = f"# Transcribed from shared/validation/{Path(path).name} id {r['id']}"
        head += " (benchmarks/transcribe_fit_runs.py)\n"
        doc = {
            "description": r["id"],
            "source": (
                f"{r['source']}; transcribed from shared/validation/{Path(path).name} id {r['id']}"
            ),
            **doc,
        }
        if r.get("uncertain_why"):
            doc["notes"] = f"uncertain: {r['uncertain_why']}"
        OUT.joinpath(f"{name}.yaml").write_text(head + yaml.safe_dump(doc, sort_keys=False))
        print(name)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/published-2026b.yaml")
