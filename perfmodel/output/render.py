"""Per-command views: what each command prints, built on the terminal primitives of console.py.

Units are always printed (ms, GB, TFLOP/s). Sizes use decimal units (GB = 1e9 bytes), the SPEC
convention.
"""

from __future__ import annotations

import sys

from perfmodel.engine import memory_switches
from perfmodel.output.console import _console, is_terminal, kv, line, pct, table, tflops
from perfmodel.units import fmt_bytes, fmt_time


def bubble(r: dict) -> None:
    kv(
        f"Pipeline bubble: p={r['p']}, m={r['m']}, v={r['v']}",
        [
            ("bubble / ideal compute  (p-1)/(m v)", pct(r["bubble_over_ideal"])),
            ("bubble / step time      (wall clock)", pct(r["bubble_over_step"])),
            ("utilization", pct(r["utilization"])),
            ("step time", f"{r['step_time_units']:g} x (t_f + t_b)"),
            (f"smallest m for wall bubble < {pct(r['target'])}", str(r["min_m_for_target"])),
        ],
    )
    if "schedules" in r:
        table(
            "Each schedule's closed form at equal F, B and W (docs/schedules.md)",
            ["schedule", "vp", "bubble/ideal", "in flight (micro-batches)"],
            [
                (
                    s["schedule"],
                    s["vp"],
                    pct(s["bubble_over_ideal"]),
                    f"{s['in_flight_microbatches']:g}",
                )
                for s in r["schedules"]
            ],
        )
    if "sweep" in r:
        table(
            "Sweep over m",
            ["m", "bubble/ideal", "bubble/step", "utilization"],
            [
                (
                    s["m"],
                    pct(s["bubble_over_ideal"]),
                    pct(s["bubble_over_step"]),
                    pct(s["utilization"]),
                )
                for s in r["sweep"]
            ],
        )


def roofline(r: dict) -> None:
    """One row per GEMM; the split shown as col/row (column- or row-parallel), FLOPs in --json."""

    def name(g):
        return (
            g["name"]
            .replace(" (column-parallel)", " (col)")
            .replace(" (row-parallel)", " (row)")
            .replace(" projection", " proj")
            .replace("output proj", "out proj")
            .replace("fused attention", "attention")
        )

    rows = [
        (
            name(g),
            f"{g['M']:g}x{g['K']:g}x{g['N']:g}" + (f" x{g['batch']:g}" if g["batch"] != 1 else ""),
            fmt_bytes(g["bytes"]),
            f"{g['arithmetic_intensity']:.0f}",
            g["bound"],
            f"{g['attainable_flops_per_s'] / 1e12:.1f}",
            fmt_time(g["time_s"]),
        )
        for g in r["gemms"]
    ]
    table(
        f"Roofline: {r['gpu']} {r['dtype']}, {tflops(r['peak_flops_per_s'])},"
        f" {r['hbm_bandwidth_bytes_per_s'] / 1e9:.0f} GB/s; h={r['hidden']}, f={r['ffn']},"
        f" TP={r['tp']}, M={r['tokens']} tokens",
        ["GEMM", "M x K x N", "bytes", "AI", "bound", "TFLOP/s", "time"],
        rows,
        right=[False, True, True, True, False, True, True],
        caption=(
            f"AI: FLOP/B; ridge point {r['ridge_point']:.0f} FLOP/B, below it a GEMM is"
            " memory-bound; TFLOP/s: attainable; M = mbs x seq-len tokens; proj: projection;"
            " col/row: column- or row-parallel; attention "
        )
        + (
            "fused (FlashAttention: Q, K, V and the output through HBM once; --no-flash for its two"
            " GEMMs)"
            if r.get("flash_attention")
            else "as two GEMMs with the s x s scores in HBM"
        )
        + (f"; assumed: {r['seq_len_assumed']}" if r.get("seq_len_assumed") else ""),
    )


def comm(r: dict) -> None:
    kv(
        f"{r['collective']} of {fmt_bytes(r['size_bytes'])} on {r['ranks']} ranks over {r['link']}",
        [
            (
                "bandwidth",
                f"{r['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s"
                + (
                    f" ({r['ranks'] - 1} of the mesh's links: {r['mesh_share']:.3g} of its"
                    " bandwidth, no switch)"
                    if r.get("mesh_share", 1.0) < 1
                    else ""
                ),
            ),
            ("bytes per rank", fmt_bytes(r["bytes_per_rank"])),
            (
                "latency term",
                (
                    f"{fmt_time(r['latency_s'])} ({r['steps']:g}"
                    f" step{'' if r['steps'] == 1 else 's'} x {fmt_time(r['latency_per_step_s'])})"
                ),
            ),
            ("bandwidth term", fmt_time(r["bandwidth_s"])),
            ("total", fmt_time(r["time_s"])),
        ],
    )


def fits_text(m: dict) -> str:
    """The memory verdict against the memory model's band (engine/memory_verdict.py): fits, tight
    or does not fit, with the margin to the usable line (capacity less the reserve)."""
    from perfmodel.engine.memory_verdict import MEMORY_BAND, host_fits

    band = f"the memory model's +-{100 * MEMORY_BAND:g}% band"
    gap = m["usable_bytes"] - m["total_bytes"]
    if not m["fits"] and not host_fits(m):
        host, cap = m["host_bytes"], m["host_capacity_bytes"]
        return (
            f"does not fit: host memory {fmt_bytes(host)} (offloaded) of {fmt_bytes(cap)},"
            f" the GPU's share of its host's DRAM, with {band} as margin"
        )
    if not m["fits"]:
        return f"does not fit: {fmt_bytes(-gap)} over the usable line, beyond {band}"
    if m["tight"]:
        side = "below" if gap >= 0 else "over"
        return f"tight: {fmt_bytes(abs(gap))} {side} the usable line, inside {band}"
    return f"fits: {fmt_bytes(gap)} to spare, beyond {band}"


def memory(m: dict, title: str) -> None:
    rows = [
        ("weights", fmt_bytes(m["weights_bytes"])),
        ("gradients", fmt_bytes(m["gradients_bytes"])),
        ("optimizer states", fmt_bytes(m["optimizer_bytes"])),
        *(
            [
                (
                    "optimizer states in host memory",
                    f"{fmt_bytes(m['optimizer_host_bytes'])} (offload)",
                )
            ]
            if m.get("optimizer_host_bytes")
            else []
        ),
        ("activations", fmt_bytes(m["activations_bytes"])),
        *(
            [
                (
                    "activations in host memory",
                    f"{fmt_bytes(m['activations_host_bytes'])} (offload)",
                )
            ]
            if m.get("activations_host_bytes")
            else []
        ),
        *(
            [("host memory, the GPU's share", fmt_bytes(m["host_capacity_bytes"]))]
            if m.get("host_bytes") and m.get("host_capacity_bytes")
            else []
        ),
        ("total", fmt_bytes(m["total_bytes"])),
        ("HBM capacity", fmt_bytes(m["capacity_bytes"])),
        ("reserve (context, NCCL, cuBLAS, fragments)", fmt_bytes(m["reserve_bytes"])),
        ("usable (capacity - reserve)", fmt_bytes(m["usable_bytes"])),
        ("parameters on this GPU", f"{m['params_per_gpu']:.3g}"),
        ("model states, mean over stages", fmt_bytes(m["model_states_mean_bytes"])),
        ("verdict", fits_text(m)),
    ]
    kv(title, rows)


def sp(r: dict) -> None:
    for key, label in (("tp_only", "TP only"), ("tp_sp", "TP + SP")):
        part = r[key]
        table(
            f"{label}: shape trace (s={r['seq']}, h={r['hidden']}, t={r['tp']}, b={r['batch']}; "
            "* = transient buffer)",
            ["region", "s", "h", "bytes"],
            [
                (
                    ("  " if x["resident"] else "* ") + x["region"],
                    x["s"],
                    x["h"],
                    fmt_bytes(x["bytes"]),
                )
                for x in part["trace"]
            ],
            right=[False, True, True, True],
        )
    kv(
        "Residency and communication per block",
        [
            ("TP resident peak", fmt_bytes(r["tp_only"]["resident_peak_bytes"])),
            ("TP+SP resident peak", fmt_bytes(r["tp_sp"]["resident_peak_bytes"])),
            (
                "LayerNorm input per layer, TP / TP+SP",
                (
                    f"{fmt_bytes(r['tp_only']['norm_input_bytes_per_layer'])} /"
                    f" {fmt_bytes(r['tp_sp']['norm_input_bytes_per_layer'])}"
                ),
            ),
            (
                f"... over {r['layers']} layers",
                (
                    f"{fmt_bytes(r['tp_only']['norm_input_bytes_all_layers'])} /"
                    f" {fmt_bytes(r['tp_sp']['norm_input_bytes_all_layers'])}"
                ),
            ),
            (
                "TP comm: ops, bytes per rank",
                (
                    f"{r['tp_only']['comm']['num_operations']} all-reduce,"
                    f" {fmt_bytes(r['tp_only']['comm']['bytes_per_rank'])}"
                ),
            ),
            (
                "TP+SP comm: ops, bytes per rank",
                (
                    f"{r['tp_sp']['comm']['num_operations']} (2 AG + 2 RS),"
                    f" {fmt_bytes(r['tp_sp']['comm']['bytes_per_rank'])}"
                ),
            ),
            ("same bytes on the wire", "yes" if r["same_bytes"] else "no"),
        ],
    )


def presets(kind: str, rows: list[dict]) -> None:
    if not rows:
        line(f"no {kind} presets")
        return
    caption = None
    # a narrower view for 80 columns: heads as a/g; family, vocabulary, sequence in --json
    if kind == "models":
        rows = [
            {
                "name": r["name"],
                "params": f"{r['params_b']:.4g}B",
                "layers": r["layers"],
                "hidden/ffn": f"{r['hidden']}/{r['ffn']}",
                "heads/kv": f"{r['heads']}/{r['kv_heads']}",
                "experts": r["experts"].replace(" top", " k"),
                "mlp": r["mlp"].replace("squared-relu", "relu^2"),
            }
            for r in rows
        ]
        caption = (
            "by family, then size; experts: count x inner size, k routed per token; relu^2: squared"
            " ReLU; vocabulary and "
            "sequence length: --json"
        )
    if kind == "frameworks":
        yes = {True: "yes", False: "no"}
        rows = [
            {
                "name": r["name"],
                "ZeRO": r["zero_stages"],
                "PP": yes[r["pipeline"]],
                "CP": yes[r["cp_ep"]],
                "EP": yes[r["profile"]["expert_parallel"]],
                "HSDP": yes[r["hsdp"]],
                "attention": r["attention"],
                "kernels": r["kernels"],
                "reduce": r["reduce_dtype"],
            }
            for r in rows
        ]
        caption = (
            "attention: unfused, fused (cuDNN/FA3), fa2 or triton; kernels: fused or eager;\n"
            "reduce: the gradient reduction's dtype; every flag: presets frameworks --json"
        )
    headers = list(rows[0])
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    table(
        f"{kind} presets",
        headers,
        [[fmt(r[h]) for h in headers] for r in rows],
        right=[isinstance(rows[0][h], (int, float)) or "/" in h or h == "params" for h in headers],
        caption=caption,
    )


def config_text(c: dict, stage_layers: list | None = None) -> str:
    """One configuration in the knobs' own names; cp, ep and etp (and with ep the MoE dispatcher
    and all-to-all overlap) only where they are used, and the layers of each stage where the split
    is uneven."""
    extra = "".join(f" {k}={c[k]}" for k in ("cp", "ep", "etp") if c.get(k, 1) != 1)
    if c.get("cp", 1) > 1:
        extra += f" cp_comm={c['cp_comm_type']}"
    if c.get("ep", 1) > 1 and "moe_token_dispatcher_type" in c:  # the MoE switches, where EP runs
        extra += f" dispatcher={c['moe_token_dispatcher_type']}"
        extra += f" a2a_overlap={c['moe_a2a_overlap']}"
    if c.get("dp_shard"):
        extra = f" dp_shard={c['dp_shard']}" + extra
    out = (
        f"tp={c['tp']} pp={c['pp']} dp={c['dp']}{extra} vp={c['vp']} mbs={c['micro_batch_size']} "
        f"m={c['num_micro_batches']} gbs={c['global_batch_size']} sp={c['sequence_parallel']} "
        f"recompute={c['recompute']} zero={c['zero_stage']} schedule={c['schedule']}"
    )
    if c.get("memory_switch"):
        out += " memory_switches=" + c["memory_switch"]
    if stage_layers and len(set(stage_layers)) > 1:
        out += " layers/stage=" + "|".join(f"{x:g}" for x in stage_layers)
    return out


def schedule(sim, gantt_rows: list[str], axis_rows: list[str], legend: str, title: str) -> None:
    """Figures of a simulated step and its Gantt chart: the stage rows coloured on a terminal (block
    labels after the row's "|"), the time axis beneath as it is."""
    j = sim.to_json()
    kv(
        f"{title}: {sim.schedule}, p={sim.p}, m={sim.m}, v={sim.v}",
        [
            ("step time", f"{j['step_time']:.4g}"),
            ("idle / step (mean over stages)", pct(j["bubble_over_step"])),
            ("bubble / ideal compute", pct(j["bubble_over_ideal"])),
            ("busy per stage", ", ".join(f"{x:.4g}" for x in j["busy"])),
            ("bubble per stage", ", ".join(pct(x) for x in j["bubble_per_stage"])),
            ("peak micro-batches in flight", ", ".join(f"{x:g}" for x in j["peak_in_flight"])),
        ],
    )
    if is_terminal():
        from rich.text import Text

        console = _console()
        for row in gantt_rows:
            head, body = row.split("|", 1)
            t = Text(head + "|")
            for ch in body:
                t.append(ch, style="green" if ch.isdigit() else ("blue" if ch.isalpha() else "dim"))
            console.print(t)
        for row in axis_rows:
            console.print(row, highlight=False, markup=False)
    else:
        sys.stdout.write("\n".join(gantt_rows + axis_rows) + "\n")
    line(legend)


def config_short(c: dict) -> str:
    """One configuration in a few columns: "tp8 pp8 dp8 vp3 b1 sp sel z1" (cp, ep where used; the
    memory switches' marks last, engine/memory_switches.py)."""
    extra = "".join(f" {k}{c[k]}" for k in ("cp", "ep") if c.get(k, 1) != 1)
    dp = f"dp{c['dp']}"
    if c.get("dp_shard"):  # HSDP: dp_replicate x dp_shard
        dp = f"dp{c['dp'] // c['dp_shard']}x{c['dp_shard']}"
    if c.get("cp", 1) != 1 and c.get("cp_comm_type") == "a2a":
        extra = extra.replace(f"cp{c['cp']}", f"cp{c['cp']}a2a")  # Ulysses' all-to-all
    rc = {"none": "", "selective": " sel", "full": " full"}[c["recompute"]]
    return (
        f"tp{c['tp']} pp{c['pp']} {dp}{extra}"
        + (f" vp{c['vp']}" if c["vp"] > 1 else "")
        + f" b{c['micro_batch_size']}"
        + (" sp" if c["sequence_parallel"] else "")
        + rc
        + f" z{c['zero_stage']}"
        + memory_switches.short(c.get("memory_switch", ""))
    )
