"""The commands of a design review: check, compare, sweep, validate, report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from perfmodel.cli.common import (
    calibration_option,
    count,
    format_option,
    json_option,
    launch_options,
    load_plan,
    parallel_options,
    plot_option,
    tokens_option,
    write_text,
)


@click.command("check")
@click.argument("plan_file", required=False)
@click.option(
    "--ignore",
    "ignored",
    multiple=True,
    help="Silence a rule ID (repeatable); plans may list `ignore:`.",
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option(
    "--list-rules", is_flag=True, help="Print the rule catalogue and why each rule matters."
)
@parallel_options
@launch_options
@format_option
@json_option
def check_cmd(
    plan_file: str | None,
    ignored: tuple[str, ...],
    strict: bool,
    list_rules: bool,
    as_json: bool,
    **kw: Any,
) -> None:
    """Review a plan like a reviewer would: each problem, its cost, the cheapest fix.

    Exit code 0 when there is no error, 1 when there is (with --strict, also on warnings), so the
    check can run in CI on a team's plan files.

    \b
    Example:
        perfmodel check examples/clean-plan.yaml
        perfmodel check examples/troubled-plan.yaml --ignore PM302 --json
    """
    from perfmodel.engine.answer import CHOSEN_AS_PLAN
    from perfmodel.output import console, render_review
    from perfmodel.review import check as chk

    if list_rules:
        if as_json:
            console.emit_json(
                [
                    {"rule": r.id, "severity": r.severity, "title": r.title, "why": r.why}
                    for r in chk.RULES.values()
                ]
            )
        else:
            render_review.rules(chk.RULES)
        return
    if not plan_file:
        raise click.UsageError("give a PLAN file (or bundled plan name), or --list-rules")
    plan = load_plan(plan_file, kw)
    found, chosen = chk.check_resolved(plan, list(ignored))
    if as_json:
        if plan.calibration is not None:  # the findings are a list: said beside it
            click.echo(plan.calibration.summary(), err=True)
        console.emit_json([f.to_json() for f in found])
    else:
        if plan.calibration is not None:
            console.line(plan.calibration.summary())
        if chosen:
            console.line(
                f"free knobs {CHOSEN_AS_PLAN}: " + ", ".join(f"{k}={v}" for k, v in chosen.items())
            )
        render_review.findings(found, plan_file)
    code = chk.exit_code(found, strict)
    if code:
        raise click.exceptions.Exit(code)


@click.command("compare")
@click.argument("plan_files", nargs=-1, required=True)
@click.option("--gpus", type=count(), help="Run every plan on this many GPUs.")
@tokens_option
@calibration_option
@launch_options
@format_option
@json_option
def compare_cmd(
    plan_files: tuple[str, ...],
    gpus: int | None,
    tokens: str | None,
    launch_gpu: str | None,
    vocab_size: int | None,
    as_json: bool,
    calibration: str | None,
) -> None:
    """Plans side by side: configuration, per-iteration breakdown, memory, MFU and check findings,
    each figure with its difference from the first plan, and what decides the difference.

    Knobs a plan leaves free are chosen as `plan` chooses them (its answer, step time included).

    \b
    Example:
        perfmodel compare examples/clean-plan.yaml examples/troubled-plan.yaml
        perfmodel compare a.yaml b.yaml c.yaml --json
    """
    from perfmodel.errors import PerfModelError
    from perfmodel.output import console, render_review
    from perfmodel.review.compare import compare

    if len(plan_files) < 2:
        raise PerfModelError("compare needs two plans or more: perfmodel compare A.yaml B.yaml")
    stems = [Path(f).stem for f in plan_files]
    labels = [s if stems.count(s) == 1 else f"{s} ({i + 1})" for i, s in enumerate(stems)]
    kw = {
        "gpus": gpus,
        "launch_gpu": launch_gpu,
        "vocab_size": vocab_size,
        "tokens": tokens,
        "calibration": calibration,
    }
    result = compare(
        [(label, load_plan(f, kw, refuse_unused=False)) for label, f in zip(labels, plan_files)]
    )
    console.emit_json(result.to_json()) if as_json else render_review.comparison(result)


@click.command("sweep")
@click.argument("plan_file")
@click.option(
    "--vary",
    required=True,
    help=(
        "FIELD=V1,V2,...: gpus, gbs, seq, gpu, framework, dtype, "
        "inter_node_bandwidth, intra_node_bandwidth, or any section.field of the plan."
    ),
)
@click.option(
    "--fixed", is_flag=True, help="Keep the plan's knobs at every value instead of searching."
)
@click.option(
    "--jobs",
    type=click.IntRange(0, 256),
    default=0,
    show_default=True,
    help="Processes that answer the values, each `plan`'s search (0: one a core; 1: in turn).",
)
@plot_option("Write the scaling curve (PNG, SVG or PDF).")
@tokens_option
@calibration_option
@launch_options
@format_option
@json_option
def sweep_cmd(
    plan_file: str,
    vary: str,
    fixed: bool,
    jobs: int,
    plot: str | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """What if: one field of the plan over several values; at each, the configuration `plan`
    recommends (or, with --fixed, the plan's own) with its step time, throughput, MFU and memory.

    \b
    Example:
        perfmodel sweep gpt3-175b.yaml --vary gpus=256,512,1024
        perfmodel sweep examples/clean-plan.yaml --fixed \\
            --vary inter_node_bandwidth="25 GB/s,12.5 GB/s"
        perfmodel sweep gpt3-175b.yaml --vary gpu=a100-80gb,h100-sxm --json
    """
    from perfmodel.output import console, render_review
    from perfmodel.review import sweep as sw

    plan = load_plan(plan_file, kw)
    path, values = sw.parse_vary(vary)
    bar = console.LazyProgress(f"sweeping {path}")
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        result = sw.sweep(plan, path, values, fixed, progress=bar, jobs=jobs or cores or 1)
    finally:
        bar.close()
    console.emit_json(result.to_json()) if as_json else render_review.sweep(result)
    if plot is not None:
        from perfmodel.output import plots

        plots.sweep_plot(
            result, f"{plan.model.name}, {plan.system.gpu.name}: tokens/s against {path}", plot
        )
    if all(p.est is None for p in result.points):
        raise click.exceptions.Exit(1)


@click.command()
@click.argument("cases", nargs=-1)
@click.option(
    "--breakdown",
    is_flag=True,
    help="Also print each run's per-iteration breakdown, as `estimate` does.",
)
@click.option(
    "--memory",
    "memory_table",
    is_flag=True,
    help=(
        "Print measured vs predicted memory peaks (allocated or reserved, as each source"
        " measured) and the runs predicted not to fit, instead of step times."
    ),
)
@calibration_option
@json_option
def validate(
    cases: tuple[str, ...],
    breakdown: bool,
    memory_table: bool,
    as_json: bool,
    calibration: str | None,
) -> None:
    """Predicted vs measured step times of the published runs (Narayanan 2021, Korthikanti 2022).

    Published TFLOP/s become step times with each source's own FLOP formula. Each run's
    micro-batch and interleaving are shown with their source; knobs no source states would be
    chosen by the search with the stated ones fixed. CASES are parts of case names or whole
    table names.

    \b
    Example:
        perfmodel validate
        perfmodel validate k22 --json
        perfmodel validate mlperf51-llama31
        perfmodel validate n21-gpt-76.1b --breakdown
        perfmodel validate --memory
        perfmodel validate llmf --calibration cal.yaml
        perfmodel validate vtrain
    """
    from perfmodel.output import console, render_plan, render_review
    from perfmodel.review import validate as val
    from perfmodel.review import validate_memory as vm

    cal = None
    if calibration is not None:
        from perfmodel.inputs.calibration import read

        cal = read(calibration, "--calibration")
        if not as_json:
            console.line(cal.summary())
    if memory_table:
        rows, summary = vm.memory_validation(list(cases) or None, cal)
        if as_json:
            extra = {} if cal is None else {"calibration": cal.summary()}
            console.emit_json({"memory": [r.to_json() for r in rows], "summary": summary, **extra})
        else:
            render_review.memory_validation(rows, summary)
        return
    if any(c.lower() == "vtrain" for c in cases):
        _validate_vtrain(cases, breakdown, as_json, cal)
        return
    report = val.validate(list(cases) or None, calibration=cal)
    if as_json:
        out = report.to_json()
        if cal is not None:
            out["calibration"] = cal.summary()
        if breakdown:
            for row, case in zip(out["cases"], report.cases):
                row["estimate"] = case.estimate.to_json()
        console.emit_json(out)
        return
    render_review.validation(report)
    if breakdown:
        for case in report.cases:
            console.line(f"{case.name}: {case.description} (measured {case.measured_s:.3g} s)")
            render_plan.estimate(case.plan, case.estimate)


def _validate_vtrain(cases: tuple[str, ...], breakdown: bool, as_json: bool, cal: Any) -> None:
    """`validate vtrain`: vTrain's 1,440 single-node runs, as a table of their own (issue 38)."""
    from perfmodel.errors import PerfModelError
    from perfmodel.output import console, render_review
    from perfmodel.review.validate_vtrain import validate_vtrain

    if len(cases) > 1:
        raise PerfModelError("run `perfmodel validate vtrain` on its own, without other cases")
    if breakdown:
        raise PerfModelError(
            "--breakdown prints one run's estimate; vTrain's 1,440 runs are a summary: drop"
            " --breakdown (or use --json for every run's times)"
        )
    report = validate_vtrain(calibration=cal)
    if as_json:
        out = report.to_json()
        if cal is not None:
            out["calibration"] = cal.summary()
        console.emit_json(out)
        return
    render_review.vtrain_validation(report)


@click.command("report")
@click.argument("plan_file")
@parallel_options
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), required=True, help="The HTML file to write."
)
@launch_options
@json_option
def report_cmd(plan_file: str, output: str, as_json: bool, **kw: Any) -> None:
    """One self-contained HTML file to share: the plan, the best configurations, the breakdown,
    memory against capacity, the pipeline Gantt chart, step time against memory, and the check
    findings.

    \b
    Example:
        perfmodel report gpt3-175b.yaml --gpus 512 -o report.html
    """
    from perfmodel.errors import PerfModelError
    from perfmodel.inputs import presets
    from perfmodel.output import html

    if not output.strip():
        raise PerfModelError("-o needs a file name, e.g. -o report.html")
    plan = load_plan(plan_file, kw)
    summary: dict[str, Any] = {}
    page = html.report(plan, summary, presets.error_bands())
    write_text(output, page, "-o", source=plan_file)
    if as_json:
        from perfmodel.output import console

        console.emit_json({"written": output, "plan": plan_file, **summary})
