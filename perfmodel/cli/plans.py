"""The commands that read a plan: memory, estimate, plan, validate, check, schedule.

Each loads the plan (perfmodel/presets.py), calls one library function and renders the
result (perfmodel/render.py); ``main`` and the shared error handling are in cli.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from perfmodel.inputs import presets
from perfmodel.output import render
from perfmodel.engine import uncertainty
from perfmodel.cli import Finite, count, format_option, json_option, main
from perfmodel.errors import PerfModelError


# ---------------------------------------------------------------- plans: memory, estimate

def parallel_options(f):
    """The knobs a user may fix on the command line (they override the plan's parallel section)."""
    opts = [
        click.option("--tp", type=count(), help="Tensor-parallel degree."),
        click.option("--pp", type=count(), help="Pipeline stages."),
        click.option("--dp", type=count(), help="Data-parallel replicas."),
        click.option("--vp", type=count(), help="Virtual stages per GPU (interleaving)."),
        click.option("--mbs", type=count(), help="Micro-batch size."),
        click.option("--sp/--no-sp", "sequence_parallel", default=None, help="Sequence parallelism."),
        click.option("--recompute", type=click.Choice(["none", "selective", "full"])),
        click.option("--zero", "zero_stage", type=click.IntRange(0, 3), help="ZeRO stage."),
        click.option("--schedule", type=click.Choice(["gpipe", "1f1b", "interleaved"])),
        click.option("--gpus", type=count(), help="Override the plan's GPU count."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _overrides(kw: dict) -> dict:
    keys = ("tp", "pp", "dp", "vp", "sequence_parallel", "recompute", "zero_stage", "schedule")
    out = {k: kw.get(k) for k in keys if kw.get(k) is not None}
    if kw.get("mbs") is not None:
        out["micro_batch_size"] = kw["mbs"]
    return out


def _launch_plan(path: str, kind: str, kw: dict):
    """A Megatron-LM launch file or NeMo recipe as a plan, its notes on stderr; --gpu is required."""
    from perfmodel.inputs import launch
    if not kw.get("launch_gpu"):
        raise PerfModelError(f"{path} is a {'Megatron-LM launch file' if kind == 'megatron' else 'NeMo recipe'}: "
                             f"give the GPU with --gpu NAME (the file does not name it; estimate, check, compare, "
                             f"plan and report take it), or convert it first with "
                             f"`perfmodel import {kind} {path} --gpu NAME -o plan.yaml`")
    imp = launch.read(path, kind, kw["launch_gpu"], kw.get("gpus"), kw.get("vocab_size"))
    plan = launch.plan_of(imp, path)
    for note in launch.notes(imp):
        click.echo(f"{path}: {note}", err=True)
    return plan


def launch_options(f):
    """For a Megatron-LM launch file or a NeMo recipe given where a plan is expected."""
    f = click.option("--vocab-size", type=count(), help="Megatron or NeMo file: the vocabulary, where it has none.")(f)
    return click.option("--gpu", "launch_gpu", help="Megatron or NeMo file given as the plan: the GPU preset "
                        "(such files do not name it).")(f)


def load_plan_with(plan_arg: str, kw: dict):
    """Load a plan (or a Megatron-LM launch file or NeMo recipe, with --gpu), apply --gpus, and fix the knobs
    given as flags (they override its parallel section)."""
    try:
        plan = presets.load_plan(plan_arg)
    except PerfModelError:  # not a plan: a launch file, or the plan's own error (looked at only on this path)
        from perfmodel.inputs import launch
        kind = launch.kind_of(plan_arg)
        if kind is None:
            raise
        return _launch_plan(plan_arg, kind, kw).with_parallel(**_overrides(kw))
    if kw.get("gpus"):
        try:
            plan = plan.with_system(num_gpus=kw["gpus"])
        except PerfModelError as e:
            raise PerfModelError(f"--gpus {kw['gpus']}: {e}") from None
    return plan.with_parallel(**_overrides(kw))


@main.command()
@click.argument("plan_file", required=False)
@click.option("--model", "model_name", help="Quick case without a plan: model preset or file.")
@click.option("--gpu", "gpu_name", default="a100-80gb", show_default=True, help="Quick case: GPU preset.")
@click.option("--gbs", type=count(), help="Quick case: global batch (default dp x mbs).")
@parallel_options
@click.option("--plot", type=click.Path(dir_okay=False), help="Write stacked memory vs capacity to a PNG.")
@json_option
def memory(plan_file, model_name, gpu_name, gbs, plot, as_json, **kw):
    """Memory budget per GPU by component, against HBM capacity (Rajbhandari et al. 2020; Korthikanti et al. 2022).

    \b
    Example:
        perfmodel memory gpt3-175b-3d.yaml
        perfmodel memory --model gpt3-175b --gpus 64 --tp 8 --pp 8 --sp --recompute selective
    """
    from perfmodel.engine.estimate import estimate, resolve_config
    if plan_file:
        plan = load_plan_with(plan_file, kw)
    elif model_name:
        n = kw.get("gpus") or (kw.get("tp") or 1) * (kw.get("pp") or 1) * (kw.get("dp") or 1)
        dp = n // ((kw.get("tp") or 1) * (kw.get("pp") or 1)) or 1
        plan = presets.plan_from_mapping({
            "model": model_name,
            "system": {"gpu": gpu_name, "num_gpus": n, "gpus_per_node": min(8, n),
                       **presets.default_links(gpu_name)},
            "training": {"global_batch_size": gbs or dp * (kw.get("mbs") or 1) * max(1, kw.get("pp") or 1)},
            "parallel": _overrides(kw),
        }, "command line")
    else:
        raise click.UsageError("give a PLAN file (or bundled plan name), or --model for a quick case")
    cfg = resolve_config(plan)
    est = estimate(plan, cfg)
    mem = est.to_json()["memory"]
    if plot is not None:
        from perfmodel.output import plots
        plots.memory_plot(mem, plot, f"{plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}: "
                          f"tp={cfg.tp} pp={cfg.pp} dp={cfg.dp} mbs={cfg.micro_batch_size} {cfg.recompute} recompute")
    if as_json:
        render.emit_json({**mem, "config": cfg.as_dict()})
    else:
        render.memory(mem, f"Memory per GPU, most loaded stage: {plan.model.name} on {plan.system.num_gpus} x "
                      f"{plan.system.gpu.name}; {render.config_text(cfg.as_dict(), est.stage_layers)}")


@main.command()
@click.argument("plan_file")
@parallel_options
@click.option("--per-layer", is_flag=True, help="Also list every operation of one layer.")
@click.option("--strict", is_flag=True, help="Exit 1 when the configuration does not fit in HBM.")
@launch_options
@format_option
@json_option
def estimate(plan_file, per_layer, strict, as_json, **kw):
    """Per-layer and per-iteration breakdown of one configuration (Narayanan et al. 2021; Korthikanti et al. 2022).

    Knobs the plan and the flags leave free are chosen by the search (the fastest configuration that
    fits), and the first line says which; without a free knob the plan's configuration is estimated
    as it is, and a configuration that does not fit says so first.

    \b
    Example:
        perfmodel estimate gpt3-175b-3d.yaml
        perfmodel estimate gpt3-175b.yaml --tp 8 --pp 8 --mbs 1 --sp --recompute selective --per-layer
    """
    from perfmodel.engine import estimate as est_mod
    from perfmodel.engine import search as srch
    plan = load_plan_with(plan_file, kw)
    est, chosen = srch.estimate_or_search(plan)
    est.band = uncertainty.band(plan, presets.error_bands())
    cfg = est.config
    ops = est_mod.per_layer_ops(plan, cfg) if per_layer else None
    if as_json:
        out = est.to_json()
        out["searched"] = chosen
        if ops is not None:
            out["per_layer"] = est_mod.ops_json(ops)
        render.emit_json(out)
    else:
        if chosen:
            render.line("free knobs chosen by the search (fastest that fits): "
                        + ", ".join(f"{k}={v}" for k, v in chosen.items()))
        render.estimate(plan, est, ops)
    if strict and not est.values["fits"]:
        raise click.exceptions.Exit(1)


@main.command("compare")
@click.argument("plan_files", nargs=-1, required=True)
@click.option("--gpus", type=count(), help="Run every plan on this many GPUs.")
@launch_options
@format_option
@json_option
def compare_cmd(plan_files, gpus, launch_gpu, vocab_size, as_json):
    """Plans side by side: configuration, per-iteration breakdown, memory, MFU and check findings,
    each figure with its difference from the first plan, and what decides the difference.

    Knobs a plan leaves free are chosen by the search, as `estimate` does.

    \b
    Example:
        perfmodel compare examples/clean-plan.yaml examples/troubled-plan.yaml
        perfmodel compare a.yaml b.yaml c.yaml --json
    """
    from perfmodel.review.compare import compare
    if len(plan_files) < 2:
        raise PerfModelError("compare needs two plans or more: perfmodel compare A.yaml B.yaml")
    stems = [Path(f).stem for f in plan_files]
    labels = [s if stems.count(s) == 1 else f"{s} ({i + 1})" for i, s in enumerate(stems)]
    result = compare([(label, load_plan_with(f, {"gpus": gpus, "launch_gpu": launch_gpu,
                                                                       "vocab_size": vocab_size})) for label, f in zip(labels, plan_files)])
    if as_json:
        render.emit_json(result.to_json())
    else:
        render.comparison(result)


@main.command("sweep")
@click.argument("plan_file")
@click.option("--vary", required=True, help="FIELD=V1,V2,...: gpus, gbs, seq, gpu, framework, dtype, "
              "inter_node_bandwidth, intra_node_bandwidth, or any section.field of the plan.")
@click.option("--fixed", is_flag=True, help="Keep the plan's knobs at every value instead of searching.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write the scaling curve (PNG, SVG or PDF).")
@format_option
@json_option
def sweep_cmd(plan_file, vary, fixed, plot, as_json):
    """What if: one field of the plan over several values; at each, the fastest configuration that fits
    (or, with --fixed, the plan's own) with its step time, throughput, MFU and memory.

    \b
    Example:
        perfmodel sweep gpt3-175b.yaml --vary gpus=256,512,1024
        perfmodel sweep examples/clean-plan.yaml --vary inter_node_bandwidth="25 GB/s,12.5 GB/s" --fixed
        perfmodel sweep gpt3-175b.yaml --vary gpu=a100-80gb,h100-sxm --json
    """
    from perfmodel.review import sweep as sw
    plan = presets.load_plan(plan_file)
    path, values = sw.parse_vary(vary)
    result = sw.sweep(plan, path, values, fixed)
    if as_json:
        render.emit_json(result.to_json())
    else:
        render.sweep(result)
    if plot is not None:
        from perfmodel.output import plots
        plots.sweep_plot(result, f"{plan.model.name}, {plan.system.gpu.name}: tokens/s against {path}", plot)
    if all(p.est is None for p in result.points):
        raise click.exceptions.Exit(1)


@main.command("report")
@click.argument("plan_file")
@parallel_options
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="The HTML file to write.")
@launch_options
def report_cmd(plan_file, output, **kw):
    """One self-contained HTML file to share: the plan, the best configurations, the breakdown, memory
    against capacity, the pipeline Gantt chart, step time against memory, and the check findings.

    \b
    Example:
        perfmodel report gpt3-175b.yaml --gpus 512 -o report.html
    """
    from perfmodel.output import gantt
    from perfmodel.output import html as report
    from perfmodel.engine import search as srch
    from perfmodel.review.check import check
    from perfmodel.engine.estimate import pipeline
    from perfmodel.engine.schedule import MAX_GANTT_BLOCKS
    if not output.strip():
        raise PerfModelError("-o needs a file name, e.g. -o report.html")
    plan = load_plan_with(plan_file, kw)
    result = srch.search(plan, top=5, keep_points=True)
    if not result.results:
        raise PerfModelError(result.hint or "no configuration fits")
    best = result.results[0]
    c = best.config
    fixed = plan.with_parallel(**{k: getattr(c, k) for k in (*srch.FREE, "dp", "schedule")})
    sim_svg, note = None, ""
    if c.pp > 1 and 2 * c.pp * c.num_micro_batches * c.vp <= MAX_GANTT_BLOCKS:
        sim_svg = gantt.svg(pipeline(plan, best), f"{plan.model.name}, best configuration", max_width=960)
    else:
        note = ("no pipeline (pp = 1)" if c.pp == 1 else f"{2 * c.pp * c.num_micro_batches * c.vp:,} blocks: too many "
                f"to draw (limit {MAX_GANTT_BLOCKS:,}); `perfmodel schedule` simulates it")
    text = report.html(plan, result, check(fixed), sim_svg, note)
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as e:
        raise PerfModelError(f"cannot write {output}: {e.strerror}") from None
    click.echo(f"wrote {output}", err=True)


@main.command("plan")
@click.argument("plan_file")
@parallel_options
@click.option("--top", type=int, default=5, show_default=True, help="How many configurations to list.")
@click.option("--sort", type=click.Choice(["step_time", "memory"]), default="step_time", show_default=True)
@click.option("--allow-cross-node-tp", is_flag=True, help="Let TP groups span nodes.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Step time vs memory of the feasible configurations.")
@click.option("--emit", type=click.Choice(["megatron"]), help="Print only the best configuration, as Megatron-LM "
              "arguments ready to paste.")
@launch_options
@format_option
@json_option
def plan_cmd(plan_file, top, sort, allow_cross_node_tp, plot, emit, as_json, **kw):
    """Search TP x PP x DP (and micro-batch, vp, SP, recompute, ZeRO) for the fastest plan that fits.

    Knobs given in the plan's parallel section or as flags are fixed; the rest are searched.

    \b
    Example:
        perfmodel plan gpt3-175b.yaml --gpus 512
        perfmodel plan gpt3-175b.yaml --gpus 512 --tp 8 --recompute selective --top 10 --json
    """
    from perfmodel.engine import search as srch
    if top < 1:
        raise click.BadParameter(f"must be at least 1, got {top}", param_hint="--top")
    plan = load_plan_with(plan_file, kw)
    bar = render.LazyProgress() if not as_json else None
    try:
        result = srch.search(plan, top, sort, allow_cross_node_tp, bar, keep_points=plot is not None)
    finally:
        if bar:
            bar.close()
    srch.annotate(plan, result, uncertainty.band(plan, presets.error_bands()))
    if plot is not None:
        if result.points is not None and len(result.points["step_time_s"]):
            from perfmodel.output import plots
            best = result.results[0].values
            plots.pareto_plot(result.points, plot, f"{plan.model.name} on {plan.system.num_gpus} x "
                              f"{plan.system.gpu.name}: step time against memory",
                              (best["step_time_s"], best["total_bytes"]), best["capacity_bytes"])
        else:
            click.echo(f"--plot {plot}: nothing fits, no plot written", err=True)
    if emit and result.results:
        from perfmodel.inputs.megatron import to_args
        best = result.results[0]
        click.echo(f"# {plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}: predicted "
                   f"{best.values['step_time_s']:.3g} s per step, MFU {100 * best.values['mfu']:.1f}%")
        click.echo(f"# launch: torchrun --nproc_per_node {plan.system.gpus_per_node} --nnodes "
                   f"{-(-plan.system.num_gpus // plan.system.gpus_per_node)} pretrain_gpt.py ...; the vocabulary "
                   f"({plan.model.vocab_size:,}) comes from your tokenizer")
        click.echo(" \\\n".join(to_args(plan, best.config.as_dict())))
    elif as_json:
        render.emit_json(result.to_json())
    else:
        render.plan(plan, result)
    if not result.results:
        raise click.exceptions.Exit(1)


@main.command()
@click.argument("cases", nargs=-1)
@click.option("--breakdown", is_flag=True, help="Also print each run's per-iteration breakdown, as `estimate` does.")
@json_option
def validate(cases, breakdown, as_json):
    """Predicted vs measured step times of the published runs (Narayanan 2021, Korthikanti 2022).

    Published TFLOP/s become step times with each source's own FLOP formula. Each run's
    micro-batch and interleaving are shown with their source; knobs no source states would be
    chosen by the search with the stated ones fixed.

    \b
    Example:
        perfmodel validate
        perfmodel validate k22 --json
        perfmodel validate n21-gpt-76.1b --breakdown
    """
    from perfmodel.review import validate as val
    report = val.validate(list(cases) or None)
    if as_json:
        out = report.to_json()
        if breakdown:
            for row, case in zip(out["cases"], report.cases):
                row["estimate"] = case.estimate.to_json()
        render.emit_json(out)
        return
    render.validation(report)
    if breakdown:
        for case in report.cases:
            render.line(f"{case.name}: {case.description} (measured {case.measured_s:.3g} s)")
            render.estimate(case.plan, case.estimate)


@main.command("check")
@click.argument("plan_file", required=False)
@click.option("--ignore", "ignored", multiple=True, help="Silence a rule ID (repeatable); plans may list `ignore:`.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("--list-rules", is_flag=True, help="Print the rule catalogue and why each rule matters.")
@parallel_options
@launch_options
@format_option
@json_option
def check_cmd(plan_file, ignored, strict, list_rules, as_json, **kw):
    """Review a plan like a reviewer would: each problem, its cost, the cheapest fix.

    Exit code 0 when there is no error, 1 when there is (with --strict, also on warnings), so the
    check can run in CI on a team's plan files.

    \b
    Example:
        perfmodel check examples/clean-plan.yaml
        perfmodel check examples/troubled-plan.yaml --ignore PM302 --json
    """
    from perfmodel.review import check as chk
    if list_rules:
        if as_json:
            render.emit_json([{"rule": r.id, "severity": r.severity, "title": r.title, "why": r.why}
                              for r in chk.RULES.values()])
        else:
            render.rules(chk.RULES)
        return
    if not plan_file:
        raise click.UsageError("give a PLAN file (or bundled plan name), or --list-rules")
    plan = load_plan_with(plan_file, kw)
    found = chk.check(plan, list(ignored))
    if as_json:
        render.emit_json([f.to_json() for f in found])
    else:
        render.findings(found, plan_file)
    code = chk.exit_code(found, strict)
    if code:
        raise click.exceptions.Exit(code)


@main.command("schedule")
@click.argument("plan_file", required=False)
@click.option("-m", "--micro-batches", "m", type=count(), help="Micro-batches m (default: the plan's).")
@click.option("-p", "--stages", "p", type=count(), help="Pipeline stages p (default: the plan's).")
@click.option("-v", "--virtual", "v", type=count(), help="Virtual stages per GPU (interleaved).")
@click.option("--schedule", "sched", type=click.Choice(["gpipe", "1f1b", "interleaved"]),
              help="Default: interleaved when v > 1, else 1f1b (or the plan's).")
@click.option("--tf", type=Finite(0, 1e12), default=1.0, show_default=True,
              help="Forward time per stage without a plan (any unit).")
@click.option("--tb", type=Finite(0, 1e12), default=2.0, show_default=True,
              help="Backward time per stage without a plan.")
@click.option("--latency", type=Finite(0, 1e12), default=0.0, show_default=True,
              help="Point-to-point time between stages without a plan.")
@click.option("--width", type=count(30, 1000), default=80, show_default=True, help="Gantt width in columns.")
@click.option("--svg", "svg_file", type=click.Path(dir_okay=False), help="Also write the Gantt chart as SVG.")
@json_option
def schedule_cmd(plan_file, m, p, v, sched, tf, tb, latency, width, svg_file, as_json):
    """Simulate a pipeline schedule and draw its Gantt chart (one row per stage).

    Without a plan the stages are equal (--tf, --tb). With a plan, the stage times come from
    `estimate` (the first stage carries the embedding, the last the output layer and loss),
    in seconds, with the point-to-point time between stages.

    \b
    Example:
        perfmodel schedule -m 8 -p 4
        perfmodel schedule -m 8 -p 4 -v 2 --svg pipeline.svg
        perfmodel schedule gpt3-175b-3d.yaml
    """
    from perfmodel.output import gantt
    from perfmodel.engine.schedule import simulate
    if plan_file:
        from perfmodel.engine.estimate import estimate, pipeline, resolve_config
        plan = presets.load_plan(plan_file)
        over = {k: val for k, val in (("pp", p), ("vp", v), ("schedule", sched)) if val is not None}
        cfg = resolve_config(plan, **over)
        if m is not None:
            cfg = dataclasses.replace(cfg, global_batch_size=m * cfg.dp * cfg.micro_batch_size)
            plan = plan.with_training(global_batch_size=cfg.global_batch_size)
        sim = pipeline(plan, estimate(plan, cfg))
        title = f"{plan.model.name}, stage times from estimate (s)"
    else:
        if m is None or p is None:
            raise click.UsageError("give -m and -p, or a PLAN file")
        v = v or 1
        sched = sched or ("interleaved" if v > 1 else "1f1b")
        title = f"equal stages, t_f={tf:g}, t_b={tb:g}"
        sim = simulate(p, m, v, sched, tf, tb, latency)
    if svg_file is not None:
        if not svg_file.strip():
            raise PerfModelError("--svg needs a file name, e.g. --svg pipeline.svg")
        try:
            with open(svg_file, "w", encoding="utf-8") as fh:
                fh.write(gantt.svg(sim, title))
        except OSError as e:
            raise PerfModelError(f"cannot write {svg_file}: {e.strerror}") from None
        click.echo(f"wrote {svg_file}", err=True)
    if as_json:
        render.emit_json(sim.to_json())
    else:
        render.schedule(sim, gantt.text_rows(sim, width) + gantt.time_axis(sim, width), gantt.legend(sim, width),
                        title)
