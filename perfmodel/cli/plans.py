"""The commands that answer for one plan: plan (the search), estimate, memory, schedule."""

from __future__ import annotations

from typing import Any

import click

from perfmodel.cli.common import (
    Finite,
    count,
    format_option,
    json_option,
    launch_options,
    load_plan,
    overrides,
    parallel_options,
    plot_option,
    with_plan_flags,
    write_text,
)


@click.command("plan")
@click.argument("plan_file")
@parallel_options
@click.option(
    "--top", type=count(), default=5, show_default=True, help="How many configurations to list."
)
@click.option(
    "--sort", type=click.Choice(["step_time", "memory"]), default="step_time", show_default=True
)
@click.option("--allow-cross-node-tp", is_flag=True, help="Let TP groups span nodes.")
@click.option("--verbose", is_flag=True, help="Also the closed-form bubble figures (equal stages).")
@plot_option("Step time vs memory of the feasible configurations.")
@click.option(
    "--emit",
    type=click.Choice(["megatron", "torchtitan"]),
    help=(
        "Print only the best configuration, as Megatron-LM arguments ready to paste"
        " (Megatron-DeepSpeed's for framework deepspeed; with --json, as a list), or as a"
        " torchtitan TOML job file (framework fsdp)."
    ),
)
@launch_options
@format_option
@json_option
def plan_cmd(
    plan_file: str,
    top: int,
    sort: str,
    allow_cross_node_tp: bool,
    plot: str | None,
    emit: str | None,
    verbose: bool,
    as_json: bool,
    **kw: Any,
) -> None:
    """Search TP x PP x DP (and micro-batch, vp, SP, recompute, ZeRO) for the fastest plan that
    fits.

    Knobs given in the plan's parallel section or as flags are fixed; the rest are searched.

    \b
    Example:
        perfmodel plan gpt3-175b.yaml --gpus 512
        perfmodel plan gpt3-175b.yaml --gpus 512 --tp 8 --recompute selective \\
            --top 10 --json
    """
    from perfmodel.engine.answer import plan_search
    from perfmodel.inputs import presets
    from perfmodel.output import console, render_plan

    plan = load_plan(plan_file, kw)
    bar = console.LazyProgress() if not as_json else None
    try:
        # under --sort step_time, a pool larger than --top: the configurations the model cannot
        # rank are counted and ranked among all of them (issue 28; engine/answer.py, which every
        # command that resolves free knobs shares: issue 37)
        result = plan_search(
            plan,
            presets.error_bands(),
            top,
            sort,
            allow_cross_node_tp,
            bar,
            keep_points=plot is not None,
        )
    finally:
        if bar:
            bar.close()
    if plot is not None:
        from perfmodel.output import plots

        plots.pareto_or_note(plan, result, plot)
    if emit == "torchtitan" and result.results:
        from perfmodel.inputs.torchtitan_emit import job, toml_text

        best = result.results[0]
        if as_json:
            console.emit_json(job(plan, best.config.as_dict(), best.stage_layers))
        else:
            click.echo(toml_text(plan, best), nl=False)
    elif emit and result.results:
        from perfmodel.engine.memory_switches import applied
        from perfmodel.inputs.megatron_emit import launch_json, launch_text

        # the plan with the memory switches the answer turns on, whose flags the script carries
        first = result.results[0]
        switched = applied(plan, first.config.memory_switch)
        if as_json:
            console.emit_json(launch_json(switched, first))
        else:
            click.echo(launch_text(switched, first))
    elif as_json:
        console.emit_json(result.to_json())
    elif emit:
        # nothing to emit: the search's account is the error, on stderr, not in the arguments
        import contextlib
        import sys

        with contextlib.redirect_stdout(sys.stderr):
            render_plan.plan(plan, result, verbose=verbose)
    else:
        render_plan.plan(plan, result, verbose=verbose)
    if not result.results:
        raise click.exceptions.Exit(1)


@click.command()
@click.argument("plan_file")
@parallel_options
@click.option("--per-layer", is_flag=True, help="Also list every operation of one layer.")
@click.option("--verbose", is_flag=True, help="Also the closed-form bubble figures (equal stages).")
@click.option("--strict", is_flag=True, help="Exit 1 when it does not fit (HBM or host memory).")
@launch_options
@format_option
@json_option
def estimate(
    plan_file: str, per_layer: bool, verbose: bool, strict: bool, as_json: bool, **kw: Any
) -> None:
    """Per-layer and per-iteration breakdown of one configuration (Narayanan et al. 2021;
    Korthikanti et al. 2022).

    Knobs the plan and the flags leave free are chosen as `plan` chooses them (its first answer),
    and the first line says which; without a free knob the plan's configuration is estimated
    as it is, and a configuration that does not fit says so first.

    \b
    Example:
        perfmodel estimate gpt3-175b-3d.yaml
        perfmodel estimate gpt3-175b.yaml --tp 8 --pp 8 --sp --recompute selective
        perfmodel estimate gpt3-175b.yaml --tp 8 --pp 8 --per-layer
    """
    from perfmodel.engine import estimate as est_mod
    from perfmodel.engine import uncertainty
    from perfmodel.engine.answer import CHOSEN_AS_PLAN, estimate_or_search, fixed
    from perfmodel.inputs import presets
    from perfmodel.output import console, render_plan

    plan = load_plan(plan_file, kw)
    est, chosen = estimate_or_search(plan, presets.error_bands())
    est.band = uncertainty.of_estimate(plan, presets.error_bands(), est)
    ops = est_mod.per_layer_ops(fixed(plan, chosen), est.config) if per_layer else None
    if as_json:
        out = est.to_json()
        out["searched"] = chosen
        if ops is not None:
            out["per_layer"] = est_mod.ops_json(ops)
        console.emit_json(out)
    else:
        if chosen:
            how = (
                CHOSEN_AS_PLAN
                if est.values["fits"]
                else "the fastest; memory does not depend on them, and it does not fit"
            )
            console.line(f"free knobs {how}: " + ", ".join(f"{k}={v}" for k, v in chosen.items()))
        render_plan.estimate(plan, est, ops, verbose=verbose)
    if strict and not est.values["fits"]:
        raise click.exceptions.Exit(1)


@click.command()
@click.argument("plan_file", required=False)
@click.option("--model", "model_name", help="Quick case without a plan: model preset or file.")
@click.option(
    "--gpu",
    "gpu_name",
    help="Quick case: GPU preset (default a100-80gb); or the GPU of a Megatron or NeMo file.",
)
@click.option("--gbs", type=count(), help="Quick case: global batch (default dp x mbs).")
@click.option(
    "--vocab-size", type=count(), help="Megatron or NeMo file: the vocabulary, where it has none."
)
@parallel_options
@plot_option("Write stacked memory vs capacity to a PNG.")
@json_option
def memory(
    plan_file: str | None,
    model_name: str | None,
    gpu_name: str | None,
    gbs: int | None,
    plot: str | None,
    as_json: bool,
    **kw: Any,
) -> None:
    """Memory budget per GPU by component, against HBM capacity (Rajbhandari et al. 2020;
    Korthikanti et al. 2022).

    \b
    Example:
        perfmodel memory gpt3-175b-3d.yaml
        perfmodel memory --model gpt3-175b --gpus 64 --tp 8 --pp 8 --sp \\
            --recompute selective
    """
    from perfmodel.inputs import presets
    from perfmodel.output import console, render

    if plan_file:
        quick = [o for o, v in (("--model", model_name), ("--gbs", gbs)) if v is not None]
        if quick:
            raise click.UsageError(
                f"{' and '.join(quick)} are for the quick case without a plan file; the plan"
                f" {plan_file} names its model and batch (edit it, or drop the plan file)"
            )
        plan = load_plan(plan_file, {**kw, "launch_gpu": gpu_name})
    elif model_name:
        if kw.get("vocab_size") is not None:
            raise click.UsageError(
                "--vocab-size is for a Megatron or NeMo file; the quick case takes the model"
                " preset's vocabulary"
            )
        plan = presets.quick_plan(
            model_name, gpu_name or "a100-80gb", kw.get("gpus"), gbs, overrides(kw)
        )
        plan = with_plan_flags(plan, kw)
    else:
        raise click.UsageError(
            "give a PLAN file (or bundled plan name), or --model for a quick case"
        )
    est, chosen = _memory_estimate(plan)
    cfg = est.config
    mem = est.to_json()["memory"]
    where = f"{plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}"
    if plot is not None:
        from perfmodel.output import plots

        plots.memory_plot(
            mem,
            plot,
            f"{where}: tp={cfg.tp} pp={cfg.pp} dp={cfg.dp} "
            f"mbs={cfg.micro_batch_size} {cfg.recompute} recompute",
        )
    # a calibration scales times only: it moves the knobs the search chooses, not their memory
    said = None if plan.calibration is None else plan.calibration.summary() + MEMORY_NOT_CALIBRATED
    if as_json:
        extra = {} if said is None else {"calibration": said}
        console.emit_json({**mem, "config": cfg.as_dict(), "chosen": chosen, **extra})
    else:
        if said is not None:
            console.line(said)
        render.memory(
            mem,
            f"Memory per GPU, most loaded stage: {where}; "
            + render.config_text(cfg.as_dict(), est.stage_layers),
        )
        if chosen["free"]:
            console.line(chosen["how"])
        from perfmodel.engine.reserve import reserve_text

        console.line(reserve_text(plan.system))


MEMORY_NOT_CALIBRATED = "; memory is not calibrated (the factors scale times only)"


def _memory_estimate(plan: Any) -> tuple[Any, dict]:
    """The estimate `memory` prints and how its knobs were chosen: with knobs left free, the
    configuration `plan` recommends (its first answer, by the same search); when nothing
    fits, the defaults of a single estimate (tp 1, pp 1, ZeRO 0, ...), said so."""
    from perfmodel.engine.answer import CHOSEN_AS_PLAN, LAYOUT_KNOBS, plan_search
    from perfmodel.engine.estimate import estimate, resolve_config
    from perfmodel.errors import PerfModelError
    from perfmodel.inputs import presets

    # the knobs a plan may leave free that `memory` reports choosing (the rest follow from them),
    # ep last as it always said them
    knobs_ = [*(k for k in LAYOUT_KNOBS if k != "ep"), "ep"]
    free = [
        k for k in knobs_ if getattr(plan.parallel, k) is None and (k != "ep" or plan.model.is_moe)
    ]
    if not free:
        return estimate(plan, resolve_config(plan)), {"free": [], "by": "plan", "how": ""}
    try:
        best = plan_search(plan, presets.error_bands(), top=1)
        why = "no configuration of the free knobs fits (`perfmodel plan` finds none)"
    except PerfModelError as e:
        best, why = None, f"the search may pick none ({str(e).rstrip('.')})"
    if best is not None and best.results:
        est = best.results[0]
        knobs = ", ".join(f"{k} {getattr(est.config, k)}" for k in free)
        how = f"knobs the plan leaves free {CHOSEN_AS_PLAN}: {knobs}"
        return est, {"free": free, "by": "search", "how": how}
    est = estimate(plan, resolve_config(plan))
    knobs = ", ".join(f"{k} {getattr(est.config, k)}" for k in free)
    how = f"{why}; shown at the defaults of a single estimate: {knobs}"
    return est, {"free": free, "by": "defaults", "how": how}


@click.command("schedule")
@click.argument("plan_file", required=False)
@click.option(
    "-m", "--micro-batches", "m", type=count(), help="Micro-batches m (default: the plan's)."
)
@click.option("-p", "--stages", "p", type=count(), help="Pipeline stages p (default: the plan's).")
@click.option("-v", "--virtual", "v", type=count(), help="Virtual stages per GPU (interleaved).")
@click.option(
    "--schedule",
    "sched",
    type=click.Choice(
        [
            "gpipe",
            "1f1b",
            "interleaved",
            "zb-h1",
            "zb-h2",
            "zbv",
            "v-half",
            "v-min",
            "interleaved-zb",
        ]
    ),
    metavar="NAME",
    help=(
        "gpipe, 1f1b, interleaved, zb-h1, zb-h2, zbv, v-half, v-min or interleaved-zb. Default:"
        " interleaved when v > 1, else 1f1b (or the plan's). zbv, v-half, v-min: v 2;"
        " interleaved-zb: v > 1."
    ),
)
@click.option(
    "--tf",
    type=Finite(0, 1e12),
    default=1.0,
    show_default=True,
    help="Forward time per stage without a plan (any unit).",
)
@click.option(
    "--tb",
    type=Finite(0, 1e12),
    default=2.0,
    show_default=True,
    help="Backward time per stage without a plan.",
)
@click.option(
    "--tw",
    type=Finite(0, 1e12),
    default=0.0,
    show_default=True,
    help="Weight-gradient part of --tb (the zero-bubble schedules run it apart).",
)
@click.option(
    "--latency",
    type=Finite(0, 1e12),
    default=0.0,
    show_default=True,
    help="Point-to-point time between stages without a plan.",
)
@click.option(
    "--width", type=count(30, 1000), default=80, show_default=True, help="Gantt width in columns."
)
@click.option(
    "--svg", "svg_file", type=click.Path(dir_okay=False), help="Also write the Gantt chart as SVG."
)
@json_option
def schedule_cmd(
    plan_file: str | None,
    m: int | None,
    p: int | None,
    v: int | None,
    sched: str | None,
    tf: float,
    tb: float,
    tw: float,
    latency: float,
    width: int,
    svg_file: str | None,
    as_json: bool,
) -> None:
    """Simulate a pipeline schedule and draw its Gantt chart (one row per stage).

    Without a plan the stages are equal (--tf, --tb). With a plan, the stage times come from
    `estimate` (the first stage carries the embedding, the last the output layer and loss),
    in seconds, with the point-to-point time between stages.

    \b
    Example:
        perfmodel schedule -m 8 -p 4
        perfmodel schedule -m 8 -p 4 -v 2 --svg pipeline.svg
        perfmodel schedule -m 8 -p 4 --schedule zbv --tb 2 --tw 1
        perfmodel schedule gpt3-175b-3d.yaml
    """
    from perfmodel.engine.schedule import simulate
    from perfmodel.output import console, gantt, render

    if plan_file:
        from perfmodel.engine.pipeline_view import plan_pipeline

        plan = load_plan(plan_file, {})
        sim = plan_pipeline(plan, m, p, v, sched)
        title = f"{plan.model.name}, stage times from estimate (s)"
    else:
        if m is None or p is None:
            raise click.UsageError("give -m and -p, or a PLAN file")
        v = v or (2 if sched in ("zbv", "v-half", "v-min", "interleaved-zb") else 1)
        sched = sched or ("interleaved" if v > 1 else "1f1b")
        title = f"equal stages, t_f={tf:g}, t_b={tb:g}" + (f", t_w={tw:g}" if tw else "")
        sim = simulate(p, m, v, sched, tf, tb, latency, t_w=tw)
    if svg_file is not None:
        write_text(svg_file, gantt.svg(sim, title), "--svg")
    if as_json:
        console.emit_json(sim.to_json())
    else:
        render.schedule(
            sim,
            gantt.text_rows(sim, width),
            gantt.time_axis(sim, width),
            gantt.legend(sim, width),
            title,
        )
