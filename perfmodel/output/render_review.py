"""What the review commands print: `validate`'s tables, `check`'s findings and rule catalogue,
`compare`'s plans side by side, `sweep`'s rows."""

from __future__ import annotations

from typing import Any

from perfmodel.output import render_run
from perfmodel.output.console import line, pct, table
from perfmodel.output.render import config_short
from perfmodel.units import fmt_bytes, fmt_time


def _knobs_note(case: dict) -> tuple[str, str]:
    """(table cell, note beneath) for where a run's unstated knobs come from: the paper, another
    named source, or the search."""
    k = case["knobs"]
    short = {
        "micro_batch_size": "mbs",
        "sequence_parallel": "sp",
        "recompute": "rc",
        "zero_stage": "zero",
        "reduce_dtype": "grad sync",
        "fused_cross_entropy": "fused CE",
        "tp_comm_overlap_ub": "TP overlap (ub)",
        "p2p_overlap": "p2p overlap",
        "fp8_param_gather": "FP8 params",
    }
    if case["searched"]:
        return "searched", ", ".join(f"{short.get(n, n)} {v}" for n, v in case["chosen"].items())
    if case["knobs_from"]:
        given = ", ".join(f"{short.get(n, n)} {k[n]}" for n in case["knobs_from_fields"])
        return "other source", f"{given} from the {case['knobs_from']}"
    return "published", ""


def memory_validation(rows: list, summary: dict) -> None:
    """`validate --memory`: each measured peak beside the model's figure for the same counter."""
    if rows:
        _peaks_table(rows, summary)
    else:
        line("no measured peak among these runs")
    n, bad = summary["runs"], summary["not_fitting"]
    if not bad:
        line(f"all {n} published runs fit under the default reserve")
        return
    line(f"{len(bad)} of {n} published runs predicted not to fit under the default reserve:")
    for name in bad:
        line(f"  {name}")


def _peaks_table(rows: list, summary: dict) -> None:
    table(
        "Memory peaks per GPU: measured vs predicted, the counter each source printed",
        ["case", "counter", "measured", "predicted", "error", "fits"],
        [
            (
                r.case,
                r.quantity,
                f"{r.measured_bytes / 2**30:.1f} GiB",
                f"{r.predicted_bytes / 2**30:.1f} GiB",
                f"{r.error_pct:+.1f}%",
                "yes" if r.fits else "no",
            )
            for r in rows
        ],
        right=[False, False, True, True, True, False],
        caption=(
            f"mean |error| {summary['mean_abs_error_pct']:.1f}%, max"
            f" {summary['max_abs_error_pct']:.1f}% over {summary['peaks']} peaks; reserved ="
            f" allocated x {summary['reserved_over_allocated']:g} + cuBLAS workspaces"
            " (fitted), device = reserved + the CUDA context; Primus read after the first step"
            " (docs/memory.md)"
        ),
    )


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
                + _out_of_sample(summary)
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
    _ranking(j["ranking"])
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


def _ranking(r: dict) -> None:
    """Each family's layouts ordered as measured (review/ranking.py): pairs, top-1, totals."""
    if not r["families"]:
        return

    def share(n: int, d: int) -> str:
        return "-" if d == 0 else f"{n}/{d} ({100 * n / d:.0f}%)"

    t = r["totals"]
    table(
        "Ranking: runs of one model, hardware, sequence, precision and batch, by per-GPU"
        " throughput",
        ["family", "runs", "ordered right", "gap >= 10%", "top-1"],
        [
            (
                f["family"],
                str(len(f["runs"])),
                share(f["ordered_right"], f["pairs"]),
                share(f["ordered_right_gap_10pct"], f["pairs_gap_10pct"]),
                "yes" if f["top1_agrees"] else "no",
            )
            for f in r["families"]
        ],
        right=[False, True, True, True, False],
        caption=(
            f"pairs ordered right {share(t['ordered_right'], t['pairs'])}, with a measured gap >="
            f" {r['wide_from_pct']:.0f}%"
            f" {share(t['ordered_right_gap_10pct'], t['pairs_gap_10pct'])}; top-1 agrees in"
            f" {share(t['top1_agree'], t['families'])} families\n{t['ties']} pair(s) measured"
            f" within {r['tie_below_pct']:.0f}% are ties, left out"
        ),
    )
    for f in r["families"]:
        for w in f["misordered"]:
            line(f"  mis-ordered ({f['family']}): {w}")


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
    for w in c.warnings:
        line(f"[yellow]warning:[/yellow] {w}")
    for v in c.verdicts:
        line(v)
    _assumed_by(c.sides[0].est.assumed, [(s.label, s.est.assumed) for s in c.sides])
    for s in c.sides:
        for f in s.findings:
            line(f"{s.label}: {f.rule} {f.severity}: {f.message}")


def _sweep_assumed(result) -> None:
    """What the figures rest on, as plan prints it (_assumed_by)."""
    ran = [p for p in result.points if p.est is not None]
    if ran:
        _assumed_by(ran[0].est.assumed, [(f"at {p.value}", p.est.assumed) for p in ran])


def _assumed_by(first: list[str], each: list[tuple[str, list[str]]]) -> None:
    """Assumptions once where every row shares them, with their row where only some do (a GPU
    whose efficiencies are assumed, say)."""
    common = set.intersection(*(set(a) for _, a in each))
    for a in first:
        if a in common:
            line(f"assumed: {a}")
    for label, assumed in each:
        for a in assumed:
            if a not in common:
                line(f"assumed ({label}): {a}")


def _links_followed(point) -> bool:
    return any(a.startswith("links:") for a in point.est.assumed)


def _sweep_runs(result) -> None:
    """With the plan's tokens: the whole run at each value, so GPUs can be traded for days."""
    runs = [(p, p.est.run.to_json()) for p in result.points if p.est is not None and p.est.run]
    if not runs:
        return
    rows = []
    for p, r in runs:
        d, cost = render_run.short(r)
        energy = "-" if r["energy_mwh"] is None else f"{r['energy_mwh']:,.0f} MWh"
        hours = "-" if r["gpu_hours"] is None else f"{r['gpu_hours']:,.0f}"
        rows.append((p.value, p.num_gpus, d, pct(r["goodput"]), hours, energy, cost))
    table(
        f"Training run of {render_run.fmt_count(runs[0][1]['tokens'])} tokens at each value",
        ["value", "GPUs", "time", "goodput", "GPU-hours", "energy", "cost"],
        rows,
        right=[False, True, True, True, True, True, True],
        caption="time with failures, checkpoints and restarts (the assumptions: estimate)",
    )


def _sweep_bands(result) -> None:
    """Each row's band (the step's typical error out of sample: about 68% of unseen runs inside)
    and what it rests on, once for the rows that share both."""
    bands: dict[tuple[float, str], list[str]] = {}
    for p in result.points:
        if p.est is not None and p.est.band is not None:
            bands.setdefault((p.est.band.typical, p.est.band.basis), []).append(p.value)
    for (typical, basis), values in bands.items():
        which = "every row" if len(bands) == 1 else f"{result.field}={', '.join(values)}"
        line(f"band +-{100 * typical:.0f}% typical ({which}): {basis}")


def sweep(result) -> None:
    """`sweep`: one row per value; throughput and per-GPU throughput relative to the first value
    that ran; a row that does not fit says so (its memory marked NO, and a line beneath)."""
    from perfmodel.engine.reserve import usable_text

    # the first value that ran; every row that divides by it has run too
    first: dict[str, Any] = next((p.est.values for p in result.points if p.est is not None), {})
    # the peak each row's MFU is against (its compute dtype's: FP8 rows against the FP8 peak)
    peaks = sorted(
        {(p.est.mfu_peak, p.est.values["mfu_peak_flops_per_s"]) for p in result.points if p.est}
    )
    mixed = len({name for name, _ in peaks}) > 1
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
                pct(v["mfu"]) + (f" {p.est.mfu_peak}" if mixed else ""),
                fmt_bytes(v["total_bytes"]) + ("" if v["fits"] else " NO"),
                (
                    f"{v['tokens_per_s'] / first['tokens_per_s']:.2f}x / "
                    f"{v['tokens_per_s_per_gpu'] / first['tokens_per_s_per_gpu']:.0%}"
                ),
            )
        )
    what = "the plan's configuration" if result.fixed else "the configuration plan recommends"
    table(
        f"Sweep of {result.field}: {what} at each value",
        [
            "value",
            "GPUs",
            "configuration",
            "step",
            "tok/s/GPU",
            "MFU",
            "memory",
            "vs first",
        ],
        rows,
        right=[False, True, False, True, True, True, True, True],
        caption=(
            "vs first: throughput / throughput per GPU against the first row (strong scaling keeps"
            " the batch, weak scaling grows it with the GPUs); "
            + _mfu_caption(peaks, mixed)
        ),
    )
    _sweep_bands(result)
    _sweep_runs(result)
    _sweep_assumed(result)
    if result.field == "system.gpu":
        followed = any(p.est is not None and _links_followed(p) for p in result.points)
        line(
            "the links follow each GPU's usual ones (the plan names none)"
            if followed
            else (
                "the links stay the plan's at every value: vary system.intra_node_link or"
                " system.inter_node_link to change them"
            )
        )
    for p in result.points:
        if p.est is None:
            line(f"{result.field}={p.value}: {p.error}")
        elif not p.est.values["fits"]:
            v = p.est.values
            line(
                f"{result.field}={p.value}: DOES NOT FIT (memory NO): "
                + usable_text(v["total_bytes"], v["capacity_bytes"], v["reserve_bytes"])
            )


def _mfu_caption(peaks: list[tuple[str, float]], mixed: bool) -> str:
    """Which peak a sweep's MFU column is against: one, each row's GPU's, or each row's dtype's
    (an FP8 row against the FP8 peak, marked beside its MFU)."""
    if not peaks:  # no row ran
        return "no MFU (no row ran)"
    if len(peaks) == 1:
        return f"MFU against the {peaks[0][0].upper()} peak ({peaks[0][1] / 1e12:,.0f} TFLOP/s)"
    if not mixed:
        return f"MFU against each row's GPU's {peaks[0][0].upper()} peak"
    figures = ", ".join(f"{name.upper()} {flops / 1e12:,.0f}" for name, flops in peaks)
    return f"MFU against the peak of each row's dtype, marked beside it ({figures} TFLOP/s)"


def _out_of_sample(summary: dict) -> str:
    """The table's error with its source left out of every fit (configs/error_bands.yaml)."""
    if summary.get("oos_runs") is None:
        return (
            "\nout of sample: not in configs/error_bands.yaml (benchmarks/refresh_error_bands.py)"
        )
    return (
        "\nout of sample (its source left out of every fit): mean |error|"
        f" {summary['oos_mean_abs_error_pct']:.2f}%, max {summary['oos_max_abs_error_pct']:.2f}%"
        f" over {summary['oos_runs']} runs; {summary['oos_refit']}"
    )


def vtrain_validation(report) -> None:
    """vTrain's single-node runs: the step error by GPU count and the families' ordering."""
    s = report.summary()
    order, order10 = s["ordering"], s["ordering_gap_10pct"]
    table(
        s["title"],
        ["GPUs", "runs", "mean |error|", "mean error"],
        [
            (
                str(g["gpus"]),
                str(g["runs"]),
                f"{g['mean_abs_error_pct']:.1f}%",
                f"{g['mean_error_pct']:+.1f}%",
            )
            for g in report.by_gpus()
        ],
        right=[True, True, True, True],
        caption=(
            f"{s['runs']} runs: mean |error| {s['mean_abs_error_pct']:.1f}%, median"
            f" {s['median_abs_error_pct']:.1f}%, max {s['max_abs_error_pct']:.1f}%; mean signed"
            f" {s['mean_error_pct']:+.1f}% ({s['runs_predicted_fast']} predicted faster than"
            f" measured)\nlayout pairs ordered as measured, within {order['families']} families"
            f" (one model, batch and GPU count): {100 * order['pair_accuracy']:.1f}% of"
            f" {order['pairs']:,} (gap 3% or more), {100 * order10['pair_accuracy']:.1f}% of"
            f" {order10['pairs']:,} (gap 10% or more); predicted fastest within 3% of the"
            f" measured fastest in {100 * order['top1_agreement']:.0f}% of families"
        ),
    )
    line("assumed (the source does not state): " + "; ".join(s["assumed"]))
