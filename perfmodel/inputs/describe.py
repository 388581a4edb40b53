"""What `perfmodel presets` lists: the key figures of every bundled preset of a kind."""

from __future__ import annotations

from perfmodel.errors import PerfModelError
from perfmodel.inputs.presets import _bundled, gpu, link, model, preset_names


def describe(kind: str) -> list[dict]:
    """Key figures of every preset of a kind, for `perfmodel presets`."""
    describers = {
        "hardware": _describe_gpus,
        "links": _describe_links,
        "models": _describe_models,
        "frameworks": _describe_frameworks,
        "plans": _describe_plans,
    }
    if kind not in describers:
        raise PerfModelError(
            f"unknown preset kind {kind!r}; use hardware, links, models, frameworks or plans"
        )
    return describers[kind]()


def _describe_gpus() -> list[dict]:
    rows = []
    for name in preset_names("gpus"):
        g = gpu(name)
        rows.append(
            {
                "name": name,
                "gpu": g.name,
                "bf16_tflops": g.peak("bf16") / 1e12,
                "hbm_gb": g.hbm_capacity_bytes / 1e9,
                "hbm_bandwidth_gb_per_s": g.hbm_bandwidth_bytes_per_s / 1e9,
                "sms": g.num_sms,
            }
        )
    return rows


def _describe_links() -> list[dict]:
    rows = []
    for name in preset_names("links"):
        lk = link(name)
        rows.append(
            {
                "name": name,
                "link": lk.name,
                "bandwidth_gb_per_s": lk.bandwidth_bytes_per_s / 1e9,
                "latency_us": lk.latency_s * 1e6,
            }
        )
    return rows


def _describe_models() -> list[dict]:
    """Every model preset with its parameter count (all experts counted), by family, then size."""
    import re

    from perfmodel.cost.memory import total_params
    from perfmodel.cost.transformer import LayerShape

    rows = []
    for name in preset_names("models"):
        m = model(name)
        p = total_params(LayerShape.of(m), m.num_layers, m.seq_length, sum(m.moe_pattern()))
        experts = "-"
        if m.is_moe:
            experts = f"{m.num_moe_experts}x{m.moe_ffn_hidden_size or m.ffn} top{m.moe_router_topk}"
        family = re.match(r"[a-z]+", name)
        rows.append(
            {
                "family": family.group(0) if family else name,
                "name": name,
                "params_b": p / 1e9,
                "layers": m.num_layers,
                "hidden": m.hidden_size,
                "heads": m.num_attention_heads,
                "kv_heads": m.groups,
                "ffn": m.ffn,
                "experts": experts,
                "vocab": m.vocab_size,
                "seq": m.seq_length,
                "mlp": m.mlp,
            }
        )
    rows.sort(key=lambda r: (r["family"], r["params_b"]))
    return rows


def _describe_frameworks() -> list[dict]:
    """Each profile's facts and the flags it turns on; the text view shows the facts
    (output/render.py), --json everything."""
    from perfmodel.specs.framework import FLAGS, PROFILES

    rows = []
    for name, prof in PROFILES.items():
        on = [k for k in FLAGS if prof.get(k) is True]
        rows.append(
            {
                "name": name,
                "zero_stages": ",".join(str(z) for z in prof["zero_stages"]),
                "uneven_stages": prof["uneven_stages"],
                "cp_ep": prof["context_parallel"],
                "pipeline": prof["pipeline"],
                "hsdp": prof["hsdp"],
                "attention": prof["attention_backend"] if prof["flash_attention"] else "unfused",
                "kernels": prof["pointwise_kernels"],
                "reduce_dtype": prof["reduce_dtype"] or "grads",
                "flags_on": " ".join(on) or "-",
                "profile": dict(prof),
            }
        )
    return rows


def _describe_plans() -> list[dict]:
    return [
        {"name": name, "description": str(data.get("description", ""))}
        for name, data in _bundled("plans").items()
    ]
