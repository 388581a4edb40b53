"""A shareable report (issue 15, item 5): one self-contained HTML file, no scripts, no network, no
external assets: the plan, the best configurations, the breakdown as a stacked bar, memory against
capacity, the pipeline Gantt chart, the Pareto scatter of step time against memory, and the check
findings.

Every figure is the search's, `estimate`'s, the simulator's or `check`'s; this module only draws
them (SVG written by hand, so the report needs no plotting library)."""

from __future__ import annotations

import re
from html import escape

import numpy as np

from perfmodel.units import fmt_bytes, fmt_time

COLORS = [
    "#4c78a8",
    "#f58518",
    "#e45756",
    "#72b7b2",
    "#54a24b",
    "#eeca3b",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
]
BREAKDOWN = {
    "forward": "forward",
    "backward": "backward",
    "recompute": "recompute",
    "bubble": "pipeline bubble",
    "tp_comm": "TP comm",
    "cp_comm": "CP comm",
    "ep_comm": "EP comm",
    "pp_comm": "PP point-to-point",
    "dp_comm": "DP grad sync",
    "zero_comm": "FSDP/ZeRO-3 traffic",
    "optimizer": "optimizer step",
    "overhead": "framework overheads",
}
MEMORY = {
    "weights_bytes": "weights",
    "gradients_bytes": "gradients",
    "optimizer_bytes": "optimizer states",
    "activations_bytes": "activations",
}
# points drawn in the Pareto scatter (an even subsample beyond, the front always whole)
MAX_SCATTER = 4000
CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;
color:#222}
svg{max-width:100%;height:auto}
.wide{overflow-x:auto}
table{border-collapse:collapse;margin:.5em 0}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child,td.t,th.t{text-align:left}
h2{margin-top:1.6em;border-bottom:2px solid #4c78a8}
.error{color:#b00}.warning{color:#a60}.info{color:#06a}.note{color:#666;font-size:90%}"""


def _bar(
    title: str,
    parts: list[tuple[str, float, str]],
    total_label: str,
    line_at: float | None = None,
    line_label: str = "",
) -> str:
    """A horizontal stacked bar with a legend: parts are (label, value, shown value)."""
    width, left, height = 900, 10, 76 + 18 * len(parts)
    full = max(sum(v for _, v, _ in parts), line_at or 0) or 1.0
    scale = (width - 2 * left) / full
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-size="12"'
        f' role="img"><title>{escape(title)}</title>'
    ]
    x: float = left
    for i, (label, v, shown) in enumerate(parts):
        w = v * scale
        out.append(
            f'<rect x="{x:.1f}" y="10" width="{max(w, 0):.1f}" height="30" fill="{COLORS[i % 10]}">'
            f"<title>{escape(label)}: {escape(shown)}</title></rect>"
        )
        out.append(
            f'<rect x="{left}" y="{52 + 18 * i}" width="12" height="12" fill="{COLORS[i % 10]}"/>'
            f'<text x="{left + 18}" y="{62 + 18 * i}">{escape(label)}: {escape(shown)}</text>'
        )
        x += w
    if line_at is not None:
        # the line's label beside its line, on the side with room; its detail under the legend
        lx = left + line_at * scale
        head, _, detail = line_label.partition(" (")
        anchor, tx = ("end", lx - 4) if lx > width / 2 else ("start", lx + 4)
        out.append(
            f'<line x1="{lx:.1f}" y1="4" x2="{lx:.1f}" y2="46" stroke="#b00"'
            f' stroke-width="2"/><text x="{tx:.1f}" y="58" text-anchor="{anchor}" fill="#b00"'
            f' paint-order="stroke" stroke="white" stroke-width="3">{escape(head)}</text>'
        )
        if detail:
            out.append(
                f'<text x="{left}" y="{height - 6}" fill="#b00">{escape(head)}:'
                f" {escape(detail.rstrip(')'))}</text>"
            )
    total_x = left + sum(v for _, v, _ in parts) * scale
    out.append(
        f'<text x="{min(total_x, width - left):.1f}" y="8" font-size="11"'
        f' text-anchor="end">{escape(total_label)}</text></svg>'
    )
    return "".join(out)


def _scatter(points: dict, best: tuple[float, float], capacity: float) -> str:
    """Step time against memory of the feasible configurations, the Pareto front, the best and the
    HBM line."""
    from perfmodel.output.plots import pareto_front

    t, mem = (
        np.asarray(points["step_time_s"], float),
        np.asarray(points["total_bytes"], float) / 1e9,
    )
    front = pareto_front(t, mem)
    shown = np.flatnonzero(t <= 3 * t.min())  # the interesting range: up to 3x the fastest
    keep = (
        shown
        if shown.size <= MAX_SCATTER
        else shown[np.linspace(0, shown.size - 1, MAX_SCATTER).astype(int)]
    )
    front = front[t[front] <= 3 * t.min()]
    w, h, pad = 900, 420, 60  # the plot's frame; the caption goes below it
    xmax, tmin, tmax = max(mem.max(), capacity / 1e9) * 1.05, t.min() * 0.95, t[shown].max() * 1.02
    sx = lambda x: pad + (x / xmax) * (w - pad - 20)  # noqa: E731
    sy = lambda y: h - pad + 20 - (y - tmin) / (tmax - tmin or 1) * (h - pad - 10)  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 40}" font-size="12"'
        ' role="img"><title>step time against memory per GPU</title>'
    ]
    for i in keep:
        out.append(
            f'<circle cx="{sx(mem[i]):.1f}" cy="{sy(t[i]):.1f}" r="2" fill="#4c78a8"'
            ' fill-opacity="0.35"/>'
        )
    order = front[np.argsort(mem[front])]
    out.append(
        '<polyline fill="none" stroke="#e45756" stroke-width="2" points="'
        + " ".join(f"{sx(mem[i]):.1f},{sy(t[i]):.1f}" for i in order)
        + '"/>'
    )
    bx, by = sx(best[1] / 1e9), sy(best[0])
    anchor, tx = ("end", bx - 10) if bx > w / 2 else ("start", bx + 10)
    out.append(
        f'<circle cx="{bx:.1f}" cy="{by:.1f}" r="7" fill="none" stroke="#000"'
        f' stroke-width="2"/><text x="{tx:.1f}" y="{by - 10:.1f}" text-anchor="{anchor}"'
        ' font-weight="bold" paint-order="stroke" stroke="white" stroke-width="4">best:'
        f" {fmt_time(best[0])}, {fmt_bytes(best[1])}</text>"
    )
    # the step axis starts near the fastest, not at zero: a break mark on it says so
    base = sy(tmin)
    out.append(
        f'<path d="M{pad - 4},{base - 10} l8,-4 M{pad - 4},{base - 5} l8,-4" stroke="#333"'
        ' fill="none"/>'
    )
    if order.size:  # the front's name at its leanest end, above the curve
        fx, fy = sx(mem[order[0]]), sy(t[order[0]])
        out.append(f'<text x="{fx:.1f}" y="{fy - 10:.1f}" fill="#e45756">Pareto front</text>')
    cx = sx(capacity / 1e9)
    out.append(
        f'<line x1="{cx:.1f}" y1="10" x2="{cx:.1f}" y2="{h - pad + 20}" stroke="#b00"'
        f' stroke-dasharray="5,3"/><text x="{cx - 4:.1f}" y="22" text-anchor="end" fill="#b00">HBM'
        f" {fmt_bytes(capacity)}</text>"
    )
    for k in range(6):  # axes with ticks
        xv, yv = xmax * k / 5, tmin + (tmax - tmin) * k / 5
        out.append(
            f'<text x="{sx(xv):.1f}" y="{h - pad + 38}" text-anchor="middle">{xv:.0f}</text>'
            f'<text x="{pad - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.3g}</text>'
        )
    out.append(
        f'<text x="{w / 2}" y="{h - 4}" text-anchor="middle">memory per GPU (GB)</text>'
        f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">step'
        " time (s)"
        f'</text><text x="{pad}" y="{h + 18}" fill="#666">{t.size:,} feasible configurations, '
        f"{t.size - shown.size:,} slower than 3x the fastest not drawn (closed-form bubble; the"
        f' best\'s is simulated);</text><text x="{pad}" y="{h + 34}" fill="#666">the step'
        f" axis starts at {fmt_time(tmin)}, not zero</text></svg>"
    )
    return "".join(out)


def html(plan, result, findings, gantt_svg: str | None, note: str = "") -> str:
    """The report as one HTML document."""
    best = result.results[0]
    j = best.to_json()
    m = j["memory"]
    title = f"{plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}"
    parts = [
        (
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><meta name='viewport'"
            " content='width=device-width, initial-scale=1'><title>perfmodel:"
            f" {escape(title)}</title><style>{CSS}</style></head><body><h1>perfmodel report:"
            f" {escape(title)}</h1>"
        ),
        _plan_table(plan),
        _best_table(result),
        "<h2>Where the step goes (best configuration)</h2>"
        + _bar(
            "per-iteration breakdown",
            [(BREAKDOWN[k], val, fmt_time(val)) for k, val in j["breakdown_s"].items() if val > 0],
            f"step {fmt_time(j['step_time_s'])}"
            + (
                ""
                if best.band is None
                else (
                    f" (expected {_range(best.band, j['step_time_s'])},"
                    f" +-{100 * best.band.typical:.0f}% typical)"
                )
            ),
        ),
        "<h2>Memory per GPU against capacity: "
        + (("tight" if m["tight"] else "fits") if m["fits"] else "does NOT fit")
        + "</h2>"
        + _bar(
            "memory",
            [(MEMORY[k], m[k], fmt_bytes(m[k])) for k in MEMORY if m[k] > 0],
            f"total {fmt_bytes(m['total_bytes'])}",
            m["usable_bytes"],
            f"usable {fmt_bytes(m['usable_bytes'])} (HBM {fmt_bytes(m['capacity_bytes'])} less "
            f"a {fmt_bytes(m['reserve_bytes'])} reserve)",
        ),
        "<h2>Pipeline schedule (best configuration)</h2>"
        + (gantt_svg or f"<p class='note'>{escape(note)}</p>"),
    ]
    if result.points is not None and len(result.points["step_time_s"]):
        parts.append(
            "<h2>Step time against memory</h2>"
            + _scatter(result.points, (j["step_time_s"], m["total_bytes"]), m["capacity_bytes"])
        )
    run = j["training_run"]
    if run:
        parts.append(_run_table(run))
    parts.append("<h2>Design review (check)</h2>" + _findings(findings))
    notes = ["assumed: " + x for x in best.assumed] + ["warning: " + w for w in best.warnings]
    notes += ["assumed: " + x for x in (run["assumptions"] if run else [])]
    parts.append("<p class='note'>" + "<br>".join(escape(a) for a in notes) + "</p>")
    parts.append(
        "<p class='note'>Written by perfmodel; every figure is a model"
        " prediction.</p></body></html>"
    )
    return _scalable("\n".join(parts) + "\n")


_SVG = re.compile(r"<svg [^>]*>")
_SIZE = re.compile(r'width="([\d.]+)" height="([\d.]+)"')


def _scalable(doc: str) -> str:
    """Every chart with a viewBox, so that CSS (svg{max-width:100%;height:auto}) shrinks it to a
    narrow window instead of letting it overflow (a fixed-size SVG does not scale)."""

    def box(m: re.Match) -> str:
        tag, size = m[0], _SIZE.search(m[0])
        if "viewBox" in tag or size is None:
            return tag
        return tag.replace("<svg ", f'<svg viewBox="0 0 {size[1]} {size[2]}" ', 1)

    return _SVG.sub(box, doc)


def _plan_table(plan) -> str:
    """The plan in three rows: model, system, training."""
    md, sy, tr = plan.model, plan.system, plan.training
    experts = f", {md.num_moe_experts} experts" if md.is_moe else ""
    return _table(
        "The plan",
        ["", ""],
        [
            (
                "model",
                (
                    f"{md.name}: {md.num_layers} layers, hidden {md.hidden_size}, "
                    f"{md.num_attention_heads} heads{experts}"
                ),
            ),
            (
                "system",
                (
                    f"{sy.num_gpus} x {sy.gpu.name}, {sy.gpus_per_node} per node; "
                    f"{sy.intra_node_link.name} inside, {sy.inter_node_link.name} across"
                ),
            ),
            (
                "training",
                (
                    f"global batch {tr.global_batch_size}, sequence {plan.seq_length}, "
                    f"{tr.dtype}, framework {tr.framework}"
                ),
            ),
        ],
    )


def _best_table(result) -> str:
    """The best configurations, one row each."""
    rows = []
    for i, e in enumerate(result.results, 1):
        c, v = e.config, e.values
        layout = (
            f"tp {c.tp}, pp {c.pp}, dp {c.dp}"
            + (f", cp {c.cp} ({c.cp_comm_type})" if c.cp > 1 else "")
            + (f", ep {c.ep}" if c.ep > 1 else "")
            + f", vp {c.vp}, mbs {c.micro_batch_size}, "
            f"SP {'on' if c.sequence_parallel else 'off'}, {c.recompute}, ZeRO {c.zero_stage}"
            + (f", {c.schedule}" if c.pp > 1 else "")
        )
        b = e.band
        expected = "" if b is None else f"{_range(b, v['step_time_s'])} (+-{100 * b.typical:.0f}%)"
        rows.append(
            (
                f"{i}{'~' if e.equivalent_to_best else ''}",
                layout,
                fmt_time(v["step_time_s"]),
                expected,
                f"{100 * v['mfu']:.1f}%",
                fmt_bytes(v["total_bytes"]),
            )
        )
    table = _table(
        f"Best configurations ({result.feasible:,} feasible of {result.evaluated:,})",
        ["#", "configuration", "step time", "expected (typical band)", "MFU", "memory/GPU"],
        rows,
    )
    first = result.results[0].band
    if first is None:
        return table
    fastest = min(result.results, key=lambda e: e.values["step_time_s"])
    same = result.equivalents or 0
    note = (
        f"Band of #1, out of sample: +-{100 * first.typical:.0f}% typical, "
        f"+-{100 * first.worst:.0f}% worst; {first.basis}."
        + (
            f" ~: {same} configurations lie within +-{100 * fastest.band.typical:.0f}% of the"
            " fastest: the model cannot rank them; #1 is the nearest validated practice."
            if same > 1 and fastest.band is not None
            else ""
        )
    )
    return table + f"<p class='note'>{escape(note)}</p>"


def _range(band, step_s: float) -> str:
    lo, hi = band.range(step_s)
    return f"{fmt_time(lo)} to {fmt_time(hi)}"


def _findings(findings) -> str:
    """check's findings as a list, each with its fix."""
    if not findings:
        return "<p>No findings.</p>"
    return (
        "<ul>"
        + "".join(
            f"<li class='{f.severity}'><b>{f.rule} {f.severity}</b>: {escape(f.message)}"
            f"<br><i>fix</i>: {escape(f.fix)}</li>"
            for f in findings
        )
        + "</ul>"
    )


def _run_table(run: dict) -> str:
    """The whole run at the best configuration's step time (engine/run.py)."""
    from perfmodel.output import render_run
    from perfmodel.units import fmt_count

    energy = run["energy_mwh"]
    rows = [
        ("tokens", f"{fmt_count(run['tokens'])} in {run['steps']:,} steps"),
        ("time, nothing lost", render_run.days(run["ideal_days"])),
        ("time, with failures", render_run.days(run["days"])),
        ("goodput", f"{100 * run['goodput']:.1f}%"),
        ("GPU-hours", "-" if run["gpu_hours"] is None else f"{run['gpu_hours']:,.0f}"),
        ("energy", "-" if energy is None else f"{energy:,.0f} MWh"),
        ("cost", render_run.money(run["cost_usd"])),
        ("interruptions", f"{run['interruptions'] or 0:,.1f}"),
        ("checkpoint interval", render_run._maybe(run["checkpoint_interval_s"])),
    ]
    return _table("The training run (best configuration)", ["", ""], rows)


def _table(title: str, headers: list[str], rows) -> str:
    """Numbers right-aligned, text (any cell with a letter beyond its unit) left-aligned."""
    text = [
        any(sum(ch.isalpha() for ch in str(r[i])) > 3 for r in rows) for i in range(len(headers))
    ]
    head = "".join(
        f"<th{' class=t' if tx else ''}>{escape(h)}</th>" for h, tx in zip(headers, text)
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=t' if tx else ''}>{escape(str(c))}</td>" for c, tx in zip(r, text))
        + "</tr>"
        for r in rows
    )
    return f"<h2>{escape(title)}</h2><div class=wide><table><tr>{head}</tr>{body}</table></div>"


def report(plan, summary: dict | None = None, bands: dict | None = None) -> str:
    """`perfmodel report`: search the plan, simulate the best configuration's pipeline, check it,
    and draw it all as one page; ``summary`` (a dict) receives the best configurations' estimates
    and the findings, for --json. With ``bands`` (configs/error_bands.yaml), each configuration
    carries its out-of-sample band and the ones the model cannot rank are ranked by validated
    practice, as `plan` does (issue 28)."""
    from perfmodel.engine import search as srch
    from perfmodel.engine.estimate import pipeline
    from perfmodel.engine.schedule import MAX_GANTT_BLOCKS
    from perfmodel.errors import PerfModelError
    from perfmodel.output import gantt
    from perfmodel.review.check import check

    result = srch.search(plan, top=5 if bands is None else srch.RANK_POOL, keep_points=True)
    if bands is not None:
        srch.annotate(plan, result, bands, keep=5)
    if not result.results:
        raise PerfModelError(result.hint or "no configuration fits")
    best = result.results[0]
    c = best.config
    fixed = plan.with_parallel(**{k: getattr(c, k) for k in (*srch.FREE, "dp", "schedule")})
    sim_svg, note = None, ""
    blocks = 2 * c.pp * c.num_micro_batches * c.vp
    closed = c.schedule in ("dualpipe", "dualpipev")
    if c.pp > 1 and blocks <= MAX_GANTT_BLOCKS and not closed:
        sim_svg = gantt.svg(
            pipeline(plan, best), f"{plan.model.name}, best configuration", max_width=960
        )
    else:
        note = (
            "no pipeline (pp = 1)"
            if c.pp == 1
            else (
                f"{c.schedule} is not simulated: its bubble is the closed form of the DeepSeek-V3"
                " report's Table 2"
                if closed
                else (
                    f"{blocks:,} blocks: too many to draw (limit "
                    f"{MAX_GANTT_BLOCKS:,}); `perfmodel schedule` simulates it"
                )
            )
        )
    findings = check(fixed)
    if summary is not None:
        summary["results"] = [e.to_json() for e in result.results]
        summary["findings"] = [f.to_json() for f in findings]
    return html(plan, result, findings, sim_svg, note)
