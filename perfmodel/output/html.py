"""A shareable report (issue 15, item 5): one self-contained HTML file, no scripts, no network, no
external assets: the plan, the best configurations, the breakdown as a stacked bar, memory against
capacity, the pipeline Gantt chart, the Pareto scatter of step time against memory, and the check
findings.

Every figure is the search's, `estimate`'s, the simulator's or `check`'s; this module only draws
them (SVG written by hand, so the report needs no plotting library)."""

from __future__ import annotations

import re
from html import escape

from perfmodel.output.svg_charts import _bar, _scatter
from perfmodel.units import fmt_bytes, fmt_time

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
CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;
color:#222}
svg{max-width:100%;height:auto}
.wide{overflow-x:auto}
table{border-collapse:collapse;margin:.5em 0}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child,td.t,th.t{text-align:left}
h2{margin-top:1.6em;border-bottom:2px solid #4c78a8}
.error{color:#b00}.warning{color:#a60}.info{color:#06a}.note{color:#666;font-size:90%}"""


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
        + m["verdict"]
        + f" (+-{100 * m['band']:g}%, the memory model's band)</h2>"
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
            + _scatter(
                result.points,
                (j["step_time_s"], m["total_bytes"]),
                m["capacity_bytes"],
                None if best.band is None else best.band.range(j["step_time_s"]),
            )
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
        *render_run.range_rows(run),
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
    from perfmodel.engine.answer import FREE, plan_search
    from perfmodel.engine.pipeline_view import pipeline
    from perfmodel.engine.schedule import MAX_GANTT_BLOCKS
    from perfmodel.errors import PerfModelError
    from perfmodel.output import gantt
    from perfmodel.review.check import check

    if bands is None:
        result = srch.search(plan, top=5, keep_points=True)
    else:  # `plan`'s answer (engine/answer.py: one answer, issue 37)
        result = plan_search(plan, bands, top=5, keep_points=True)
    if not result.results:
        raise PerfModelError(result.hint or "no configuration fits")
    best = result.results[0]
    c = best.config
    fixed = plan.with_parallel(**{k: getattr(c, k) for k in (*FREE, "dp", "schedule")})
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
