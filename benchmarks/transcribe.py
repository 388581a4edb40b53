"""What the transcription scripts share (benchmarks/transcribe_*_runs.py): read the published
runs, keep a script's own, and write each as configs/validation/NAME.yaml under a header naming
the run and the script."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

OUT = Path(__file__).resolve().parents[1] / "configs" / "validation"
SOURCE = "../shared/validation/published-2026.yaml"


def write_cases(
    path: str,
    keep: Callable[[dict], bool],
    case: Callable[[dict], tuple[str, dict]],
    script: str,
) -> None:
    """Each run of ``path`` (a file of shared/validation) that ``keep`` accepts, as ``case``
    transcribes it, into OUT."""
    for r in yaml.safe_load(Path(path).read_text()):
        if not keep(r):
            continue
        name, doc = case(r)
        head = (
            f"# Transcribed from shared/validation/{Path(path).name} id {r['id']}"
            f" (benchmarks/{script})\n"
        )
        OUT.joinpath(f"{name}.yaml").write_text(
            head + yaml.safe_dump(doc, sort_keys=False, width=100)
        )
        print(name)


def llama_shape(m: dict, name: str) -> dict:
    """A Llama-shaped model preset from a record's ``model`` block (layers, hidden, heads, kv_heads,
    ffn, vocab, seq_len): SwiGLU, RoPE, untied embeddings, as Llama 2 and 3 are."""
    return {
        "name": name,
        "num_layers": m["layers"],
        "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"],
        "num_query_groups": m["kv_heads"],
        "ffn_hidden_size": m["ffn"],
        "vocab_size": m["vocab"],
        "seq_length": m["seq_len"],
        "mlp": "swiglu",
        "tied_embeddings": False,
        "position_embedding": "rope",
    }
