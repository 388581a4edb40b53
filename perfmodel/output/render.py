"""Per-command views: what each command prints, built on the terminal primitives of console.py.

Units are always printed (ms, GB, TFLOP/s). Sizes use decimal units (GB = 1e9 bytes), the SPEC
convention.
"""

from __future__ import annotations

import sys

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
            g["name"].replace(" (column-parallel)", " (col)").replace(" (row-parallel)", " (row)")
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
        right=[False, False, True, True, False, True, True],
        caption=(
            f"AI: FLOP/B; ridge point {r['ridge_point']:.0f} FLOP/B, below it a GEMM is"
            " memory-bound; TFLOP/s: attainable; M = mbs x seq-len tokens; col/row: column- or"
            " row-parallel; attention "
        )
        + (
            "fused (FlashAttention: Q, K, V and the output through HBM once; --no-flash for its two"
            " GEMMs)"
            if r.get("flash_attention")
            else "as two GEMMs with the s x s scores in HBM"
        ),
    )


def comm(r: dict) -> None:
    kv(
        f"{r['collective']} of {fmt_bytes(r['size_bytes'])} on {r['ranks']} ranks over {r['link']}",
        [
            ("bandwidth", f"{r['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s"),
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


def memory(m: dict, title: str) -> None:
    rows = [
        ("weights", fmt_bytes(m["weights_bytes"])),
        ("gradients", fmt_bytes(m["gradients_bytes"])),
        ("optimizer states", fmt_bytes(m["optimizer_bytes"])),
        ("activations", fmt_bytes(m["activations_bytes"])),
        ("other (context, buffers)", fmt_bytes(m["other_bytes"])),
        ("total", fmt_bytes(m["total_bytes"])),
        ("HBM capacity", fmt_bytes(m["capacity_bytes"])),
        ("parameters on this GPU", f"{m['params_per_gpu']:.3g}"),
        ("model states, mean over stages", fmt_bytes(m["model_states_mean_bytes"])),
        ("fits", "yes" if m["fits"] else "NO"),
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
    if (
        kind == "models"
    ):  # a narrower view for 80 columns: heads as a/g; family, vocabulary, sequence in --json
        rows = [
            {
                "name": r["name"],
                "params B": r["params_b"],
                "layers": r["layers"],
                "hidden/ffn": f"{r['hidden']}/{r['ffn']}",
                "heads/kv": f"{r['heads']}/{r['kv_heads']}",
                "experts": r["experts"].replace(" top", " k"),
                "mlp": r["mlp"],
            }
            for r in rows
        ]
        caption = (
            "by family, then size; experts: count x inner size, k routed per token; vocabulary and "
            "sequence length: --json"
        )
    headers = list(rows[0])
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    table(
        f"{kind} presets",
        headers,
        [[fmt(r[h]) for h in headers] for r in rows],
        right=[isinstance(rows[0][h], (int, float)) or "/" in h for h in headers],
        caption=caption,
    )


def config_text(c: dict, stage_layers: list | None = None) -> str:
    """One configuration in the knobs' own names; cp, ep and etp only where they are used, and the
    layers of each stage where the split is uneven."""
    extra = "".join(f" {k}={c[k]}" for k in ("cp", "ep", "etp") if c.get(k, 1) != 1)
    if c.get("cp", 1) > 1:
        extra += f" cp_comm={c['cp_comm_type']}"
    out = (
        f"tp={c['tp']} pp={c['pp']} dp={c['dp']}{extra} vp={c['vp']} mbs={c['micro_batch_size']} "
        f"m={c['num_micro_batches']} gbs={c['global_batch_size']} sp={c['sequence_parallel']} "
        f"recompute={c['recompute']} zero={c['zero_stage']} schedule={c['schedule']}"
    )
    if stage_layers and len(set(stage_layers)) > 1:
        out += " layers/stage=" + "|".join(f"{x:g}" for x in stage_layers)
    return out


def estimate(plan, est, ops=None) -> None:
    """Per-layer table (optional), per-iteration breakdown, throughput and memory of one
    estimate."""
    from perfmodel.engine.estimate import ops_json

    j = est.to_json()
    c = j["config"]
    head = (
        f"{plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}:"
        f" {config_text(c, j['stage_layers'])}"
    )
    if not j["memory"]["fits"]:  # the verdict before the figures
        line(
            f"[red]DOES NOT FIT:[/red] {j['memory']['total_bytes'] / 1e9:.1f} GB needed per GPU, "
            f"{j['memory']['capacity_bytes'] / 1e9:.1f} GB of HBM"
        )
    if ops is not None:
        op_rows = ops_json(ops)
        rows = [
            (
                r["name"],
                f"{r['flops']:.3g}" if r["flops"] else "-",
                fmt_bytes(r["bytes"]),
                r["bound"],
                fmt_time(r["forward_s"]),
                fmt_time(r["backward_s"]),
            )
            for r in op_rows
        ]
        tf = sum(r["forward_s"] for r in op_rows)
        tb = sum(r["backward_s"] for r in op_rows)
        rows.append(("total", "", "", "", fmt_time(tf), fmt_time(tb)))
        table(
            "One layer on one GPU, one micro-batch",
            ["operation", "FLOP", "bytes", "bound", "forward", "backward"],
            rows,
            right=[False, True, True, False, True, True],
            caption=(
                "comm bytes: per rank on the wire; backward comm: the part not hidden; --json gives"
                " each op's kind"
            ),
        )
    step = j["step_time_s"]
    bd = j["breakdown_s"]
    labels = {
        "forward": "forward (compute)",
        "backward": "backward (compute)",
        "recompute": "recompute",
        "bubble": "pipeline bubble",
        "tp_comm": "TP comm (critical path)",
        "pp_comm": "PP point-to-point",
        "dp_comm": "DP grad sync (not hidden)",
        "zero_comm": "ZeRO-3 gathers",
        "optimizer": "optimizer step",
        "overhead": "framework overheads (fitted)",
    }
    table(
        f"Per-iteration breakdown: {head}",
        ["component", "time", "share"],
        [(labels[k], fmt_time(v), pct(v / step)) for k, v in bd.items()]
        + [("step time", fmt_time(step), "100%")],
        right=[False, True, True],
        caption=(
            f"slowest stage: {j['slowest_stage']} (first {fmt_time(j['stage_time_s']['first'])},"
            f" middle {fmt_time(j['stage_time_s']['middle'])}, last"
            f" {fmt_time(j['stage_time_s']['last'])} per micro-batch)"
        ),
    )
    band = j.get("expected_error")
    band_text = (
        ""
        if not band
        else (
            f" (expected {fmt_time(band['step_time_range_s'][0])} to"
            f" {fmt_time(band['step_time_range_s'][1])}: +-{100 * band['mean_abs_error']:.0f}%"
            f" typical, +-{100 * band['max_abs_error']:.0f}% worst, from {band['basis']})"
        )
    )
    kv(
        "Throughput",
        [
            ("step time", fmt_time(step) + band_text),
            ("tokens/s", f"{j['tokens_per_s']:,.0f} ({j['tokens_per_s_per_gpu']:,.0f} per GPU)"),
            (
                "model TFLOP/s per GPU",
                f"{j['model_tflops_per_gpu']:.1f} TFLOP/s (MFU {pct(j['mfu'])})",
            ),
            (
                "hardware TFLOP/s per GPU",
                f"{j['hardware_tflops_per_gpu']:.1f} TFLOP/s (HFU {pct(j['hfu'])})",
            ),
            (
                "pipeline bubble, wall clock",
                (
                    f"{pct(j['bubble_over_step'])} closed form (equal stages),"
                    f" {pct(j['bubble_simulated_over_step'])} simulated; over ideal"
                    f" {pct(j['bubble_over_ideal'])}; {pct(j['bubble_share_of_step'])} of this step"
                ),
            ),
            ("FLOP convention", j["flop_convention"]),
        ],
    )
    m = j["memory"]
    memory(
        m,
        "Memory per GPU (most loaded stage); model states = weights + gradients + optimizer "
        f"= {fmt_bytes(m['weights_bytes'] + m['gradients_bytes'] + m['optimizer_bytes'])}",
    )
    for a in j["assumed"]:
        line(f"assumed: {a}")
    for w in j["warnings"]:
        line(f"[yellow]warning:[/yellow] {w}")


def plan(plan_obj, result) -> None:
    """The top configurations, the best one's breakdown, and the search's accounting."""
    rows = []
    marks = ["~" if e.equivalent_to_best else "" for e in result.results]
    for i, e in enumerate(result.results, 1):
        j = e.to_json()
        c = j["config"]
        sched = {"gpipe": " gpipe", "1f1b": "", "interleaved": ""}[c["schedule"]]
        rows.append(
            (
                f"{i}{marks[i - 1]}",
                config_short(c) + sched,
                fmt_time(j["step_time_s"]),
                f"{j['tokens_per_s_per_gpu']:,.0f}",
                pct(j["mfu"]),
                pct(j["bubble_over_step"]),
                fmt_bytes(j["memory"]["total_bytes"]),
            )
        )
    if rows:
        table(
            f"Top {len(rows)} of {result.feasible:,}: {plan_obj.model.name},"
            f" {plan_obj.system.num_gpus} x {plan_obj.system.gpu.name}, batch"
            f" {plan_obj.training.global_batch_size}, {plan_obj.training.dtype}",
            ["#", "configuration", "step", "tok/s", "MFU", "bubble", "mem/GPU"],
            rows,
            right=[True, False, True, True, True, True, True],
            caption=(
                "tp pp dp (cp ep) vp; b: micro-batch; sp: sequence parallel; rc: recompute;\n"
                "z: ZeRO stage; tok/s: tokens/s per GPU; framework: "
            )
            + plan_obj.training.framework,
        )
        _equivalents(result)
        estimate(plan_obj, result.results[0])
    line(
        f"evaluated {result.evaluated:,} configurations in {result.search_time_s:.2f} s"
        f" ({result.evaluated / max(result.search_time_s, 1e-9):,.0f} per second); feasible"
        f" {result.feasible:,}"
    )
    for reason, count in result.rejected.items():
        line(f"  rejected: {reason}: {count:,}")
    if result.hint:
        line(f"[red]{result.hint}[/red]")


def _equivalents(result) -> None:
    """What separates the configurations the model cannot tell apart (~: inside the best's error
    band)."""
    same = [(i, e) for i, e in enumerate(result.results, 1) if e.equivalent_to_best]
    if len(same) < 2 or same[0][1].band is None:
        return
    line(
        f"~ {len(same)} configurations lie within the model's typical error"
        f" (+-{100 * same[0][1].band.mean:.0f}%) of the best; what separates them:"
    )
    for i, e in same:
        slow = e.slower_link_step_s
        robust = (
            f", {100 * (slow / e.values['step_time_s'] - 1):+.1f}% with a 20% slower inter-node"
            " link"
            if slow
            else ""
        )
        line(f"  #{i}: {fmt_bytes(e.values['total_bytes'])} per GPU{robust}")


def _knobs_note(case: dict) -> tuple[str, str]:
    """(table cell, note beneath) for where a run's unstated knobs come from: the paper, another
    named source, or the search."""
    k = case["knobs"]
    if case["searched"]:
        short = {
            "micro_batch_size": "mbs",
            "sequence_parallel": "sp",
            "recompute": "rc",
            "zero_stage": "zero",
        }
        return "searched", ", ".join(f"{short.get(n, n)} {v}" for n, v in case["chosen"].items())
    if case["knobs_from"]:
        return (
            "other source",
            f"mbs {k['micro_batch_size']}, vp {k['vp']} from the {case['knobs_from']}",
        )
    return "published", ""


def validation(report) -> None:
    """Measured vs predicted step times per table, the SP + selective gain, and Table 4 per
    layer."""
    j = report.to_json()
    for name, summary in j["tables"].items():
        rows, notes = [], []
        for c in j["cases"]:
            if c["table"] != name:
                continue
            cell, note = _knobs_note(c)
            rows.append(
                (
                    c["case"],
                    fmt_time(c["measured_step_time_s"]),
                    fmt_time(c["predicted_step_time_s"]),
                    f"{c['error_pct']:+.1f}%",
                    pct(c["predicted_mfu"]),
                    cell,
                )
            )
            if note:
                notes.append(f"  {c['case']}: {note}")
        table(
            summary["title"],
            ["case", "measured", "predicted", "error", "MFU", "knobs"],
            rows,
            right=[False, True, True, True, True, False],
            caption=(
                f"mean |error| {summary['mean_abs_error_pct']:.2f}%, max"
                f" {summary['max_abs_error_pct']:.2f}% over {summary['cases']}"
                f" run{'s' if summary['cases'] != 1 else ''} (MFU: predicted)\nmean signed error"
                f" {summary['mean_error_pct']:+.2f}%: {summary['runs_predicted_fast']} of"
                f" {summary['cases']} predicted faster than measured"
            ),
        )
        if notes:
            line("knobs no source states, and where they come from:")
            for n in notes:
                line(n)
            line()
    if j["sp_gain"]:
        table(
            "SP + selective recompute over full recompute (Korthikanti Table 5: +29% to +32%)",
            ["model", "measured gain", "predicted gain"],
            [
                (g["model"], f"{g['measured_gain_pct']:+.1f}%", f"{g['predicted_gain_pct']:+.1f}%")
                for g in j["sp_gain"]
            ],
        )
    if j["per_layer"]:
        table(
            "Korthikanti Table 4: one 22B layer on TP8 (ms; backward includes recompute)",
            ["variant", "fwd measured", "fwd predicted", "bwd measured", "bwd predicted"],
            [
                (
                    r["variant"],
                    f"{r['measured_fwd_ms']:.1f}",
                    f"{r['predicted_fwd_ms']:.1f} ({r['fwd_error_pct']:+.1f}%)",
                    f"{r['measured_bwd_ms']:.1f}",
                    f"{r['predicted_bwd_ms']:.1f} ({r['bwd_error_pct']:+.1f}%)",
                )
                for r in j["per_layer"]
            ],
        )


def findings(items, plan_label: str) -> None:
    """Findings grouped by severity, each with its cost and fix."""
    if not items:
        line(f"{plan_label}: no findings")
        return
    colors = {"error": "red", "warning": "yellow", "info": "cyan"}
    for sev in ("error", "warning", "info"):
        group = [f for f in items if f.severity == sev]
        if not group:
            continue
        line(f"[{colors[sev]}]{sev.upper()}S ({len(group)})[/{colors[sev]}]")
        for f in group:
            j = f.to_json()
            line(f"  {j['rule']} {j['title']}")
            line(f"        {j['message']}")
            line(f"        fix: {j['fix']}")
    counts = {s: sum(f.severity == s for f in items) for s in ("error", "warning", "info")}
    line(
        f"{plan_label}: {counts['error']} error(s), {counts['warning']} warning(s),"
        f" {counts['info']} info"
    )


def rules(catalogue) -> None:
    table(
        "perfmodel check rules",
        ["rule", "severity", "title", "why it matters"],
        [(r.id, r.severity, r.title, r.why) for r in catalogue.values()],
        right=[False] * 4,
    )


def schedule(sim, gantt_rows: list[str], legend: str, title: str) -> None:
    """Figures of a simulated step and its Gantt chart."""
    j = sim.to_json()
    kv(
        f"{title}: {sim.schedule}, p={sim.p}, m={sim.m}, v={sim.v}",
        [
            ("step time", f"{j['step_time']:.4g}"),
            ("bubble / step (mean over stages)", pct(j["bubble_over_step"])),
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
    else:
        sys.stdout.write("\n".join(gantt_rows) + "\n")
    line(legend)


def comparison(c) -> None:
    """`compare`: the plans side by side, then the verdicts and each plan's findings."""
    from perfmodel.review.compare import rows

    labels = [s.label for s in c.sides]
    table(
        "Plans side by side (in brackets: the difference from " + labels[0] + ")",
        ["", *labels],
        [(name, *cells) for name, cells in rows(c)],
        right=[False] + [True] * len(labels),
    )
    for v in c.verdicts:
        line(v)
    for s in c.sides:
        for f in s.findings:
            line(f"{s.label}: {f.rule} {f.severity}: {f.message}")


def config_short(c: dict) -> str:
    """One configuration in a few columns: "tp8 pp8 dp8 vp3 b1 sp rc=sel z1" (cp, ep where used)."""
    extra = "".join(f" {k}{c[k]}" for k in ("cp", "ep") if c.get(k, 1) != 1)
    rc = {"none": "", "selective": " rc=sel", "full": " rc=full"}[c["recompute"]]
    return (
        f"tp{c['tp']} pp{c['pp']} dp{c['dp']}{extra}"
        + (f" vp{c['vp']}" if c["vp"] > 1 else "")
        + f" b{c['micro_batch_size']}"
        + (" sp" if c["sequence_parallel"] else "")
        + rc
        + f" z{c['zero_stage']}"
    )


def sweep(result) -> None:
    """`sweep`: one row per value; throughput and per-GPU throughput relative to the first value
    that ran."""
    first = next((p.est.values for p in result.points if p.est is not None), None)
    rows = []
    for p in result.points:
        if p.est is None:
            rows.append((p.value, p.num_gpus, "none runs (below)", "-", "-", "-", "-", "-"))
            continue
        v = p.est.values
        rows.append(
            (
                p.value,
                p.num_gpus,
                config_short(p.est.config.as_dict()),
                fmt_time(v["step_time_s"]),
                f"{v['tokens_per_s_per_gpu']:,.0f}",
                pct(v["mfu"]),
                fmt_bytes(v["total_bytes"]),
                (
                    f"{v['tokens_per_s'] / first['tokens_per_s']:.2f}x / "
                    f"{v['tokens_per_s_per_gpu'] / first['tokens_per_s_per_gpu']:.0%}"
                ),
            )
        )
    what = "the plan's configuration" if result.fixed else "the fastest configuration that fits"
    table(
        f"Sweep of {result.field}: {what} at each value",
        ["value", "GPUs", "configuration", "step", "tok/s/GPU", "MFU", "memory", "vs first"],
        rows,
        right=[False, True, False, True, True, True, True, True],
        caption=(
            "vs first: throughput / throughput per GPU against the first row (strong scaling keeps"
            " the batch, weak scaling grows it with the GPUs)"
        ),
    )
    if result.field == "system.gpu":
        line(
            "the links stay the plan's at every value: vary system.intra_node_link or"
            " system.inter_node_link to change them"
        )
    for p in result.points:
        if p.est is None:
            line(f"{result.field}={p.value}: {p.error}")
