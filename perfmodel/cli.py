"""Thin click commands: load, call one library function, render (STYLE.md "CLI and output").

Library errors become one-line messages with exit code 1; usage errors exit 2;
no traceback reaches a user for bad input.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import click
from pydantic import ValidationError

from . import presets, render, reports
from .errors import PerfModelError
from .units import QuantityError, parse_quantity


class Group(click.Group):
    """Turns every user-facing failure into one line and a non-zero exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (PerfModelError, QuantityError) as e:
            raise click.ClickException(str(e)) from None
        except ValidationError as e:
            raise click.ClickException(presets.format_validation_error(e, "input")) from None
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, KeyboardInterrupt):
            raise
        except BrokenPipeError:  # `perfmodel presets | head`: the reader left; stop quietly
            sys.stderr = open(os.devnull, "w")
            sys.stdout = open(os.devnull, "w")
            raise click.exceptions.Exit(0) from None
        except Exception as e:  # a bug, not bad input: still no traceback unless asked for
            if os.environ.get("PERFMODEL_DEBUG"):
                raise
            raise click.ClickException(f"internal error ({e.__class__.__name__}: {e}); "
                                       "rerun with PERFMODEL_DEBUG=1 for the traceback and please report it") from None


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="perfmodel")
def main():
    """perfmodel: an analytical performance model of distributed transformer training.

    Example:

        perfmodel plan gpt3-175b.yaml --gpus 512
    """


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output (stable keys).")


def quantity(dimension: str):
    """click callback: '67.1MB' -> bytes (SI), with the field named on error."""
    def convert(ctx, param, value):
        if value is None:
            return None
        try:
            return parse_quantity(value, dimension)
        except QuantityError as e:
            raise click.BadParameter(str(e)) from None
    return convert


# ---------------------------------------------------------------- bubble

@main.command()
@click.option("-m", "--micro-batches", "m", type=click.IntRange(min=1), required=True, help="Micro-batches per step m.")
@click.option("-p", "--stages", "p", type=click.IntRange(min=1), required=True, help="Pipeline stages p.")
@click.option("-v", "--virtual", "v", type=click.IntRange(min=1), default=1, show_default=True,
              help="Virtual stages per GPU (interleaving).")
@click.option("--target", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.10,
              show_default=True, help="Wall-clock bubble to stay strictly below.")
@click.option("--sweep", is_flag=True, help="Also tabulate the bubble over a range of m.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write bubble vs m to a PNG (needs perfmodel[plot]).")
@json_option
def bubble(m, p, v, target, sweep, plot, as_json):
    """Pipeline bubble under both denominators (SPEC 7).

    Example:

        perfmodel bubble -m 48 -p 8 --target 0.10
    """
    r = reports.bubble_report(p, m, v, target, sweep)
    if plot:
        from . import plots
        plots.bubble_plot(r, plot)
    render.emit_json(r) if as_json else render.bubble(r)


# ---------------------------------------------------------------- roofline

@main.command()
@click.option("--mbs", type=click.IntRange(min=1), required=True, help="Micro-batch size (sequences).")
@click.option("--seq-len", type=click.IntRange(min=1), default=1, show_default=True,
              help="Tokens per sequence; M = mbs x seq-len.")
@click.option("--model", "model_name", help="Model preset (or file) for the layer shape.")
@click.option("--hidden", type=click.IntRange(min=1), help="Hidden size h (default 4096 without --model).")
@click.option("--ffn", type=click.IntRange(min=1), help="MLP inner size (default 4h).")
@click.option("--heads", type=click.IntRange(min=1), help="Attention heads (default h/128).")
@click.option("--tp", type=click.IntRange(min=1), default=8, show_default=True, help="TP degree.")
@click.option("--gpu", "gpu_name", default="a100-80gb", show_default=True, help="GPU preset.")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32", "tf32", "fp8"]), default="bf16", show_default=True)
@click.option("--plot", type=click.Path(dir_okay=False), help="Write the roofline to a PNG (needs perfmodel[plot]).")
@json_option
def roofline(mbs, seq_len, model_name, hidden, ffn, heads, tp, gpu_name, dtype, plot, as_json):
    """Roofline of every GEMM of one transformer layer (SPEC 4).

    Example:

        perfmodel roofline --mbs 64            # MLP GEMM memory-bound at AI ~61
        perfmodel roofline --mbs 8 --seq-len 1024
    """
    g = presets.gpu(gpu_name)
    swiglu, groups = False, None
    if model_name:
        mdl = presets.model(model_name)
        hidden, ffn, heads = hidden or mdl.hidden_size, ffn or mdl.ffn, heads or mdl.num_attention_heads
        swiglu, groups = mdl.mlp == "swiglu", mdl.groups
    hidden = hidden or 4096
    ffn = ffn or 4 * hidden
    heads = heads or max(1, hidden // 128)
    if hidden % heads:
        raise PerfModelError(f"--hidden({hidden}) is not divisible by --heads({heads})")
    r = reports.roofline_report(g, dtype, hidden, ffn, heads, groups or heads, tp, mbs, seq_len, swiglu)
    if plot:
        from . import plots
        plots.roofline_plot(g, dtype, hidden, ffn, heads, groups or heads, tp, seq_len, swiglu, plot)
    render.emit_json(r) if as_json else render.roofline(r)


# ---------------------------------------------------------------- comm

@main.command()
@click.argument("collective", type=click.Choice(["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "p2p"]))
@click.option("--size", required=True, callback=quantity("bytes"), help="Message size, e.g. 67.1MB or 64KiB.")
@click.option("--ranks", type=click.IntRange(min=1), default=8, show_default=True, help="Ranks in the group.")
@click.option("--link", "link_name", default="nvlink3", show_default=True, help="Link preset.")
@click.option("--bandwidth", callback=quantity("bytes_per_s"), help="Override the link bandwidth, e.g. 25GB/s.")
@click.option("--latency", callback=quantity("seconds"), help="Override the link latency, e.g. 2us.")
@click.option("--efficiency", is_flag=True, help="Scale bandwidth by the link's achievable fraction.")
@json_option
def comm(collective, size, ranks, link_name, bandwidth, latency, efficiency, as_json):
    """Alpha-beta time of one ring collective, latency and bandwidth apart (SPEC 3).

    Example:

        perfmodel comm all-reduce --size 67.1MB --ranks 8 --link nvlink3
    """
    lk = presets.link(link_name)
    if bandwidth is not None or latency is not None:
        if bandwidth is not None and bandwidth <= 0:
            raise click.BadParameter("must be positive", param_hint="--bandwidth")
        if latency is not None and latency < 0:
            raise click.BadParameter("must not be negative", param_hint="--latency")
        lk = lk.model_copy(update={k: v for k, v in (("bandwidth_bytes_per_s", bandwidth),
                                                       ("latency_s", latency)) if v is not None})
    if size <= 0:
        raise click.BadParameter("must be positive", param_hint="--size")
    r = reports.comm_report(collective, size, ranks, lk, efficiency)
    render.emit_json(r) if as_json else render.comm(r)


# ---------------------------------------------------------------- sp

@main.command()
@click.option("--seq", type=click.IntRange(min=1), required=True, help="Sequence length s.")
@click.option("--hidden", type=click.IntRange(min=1), required=True, help="Hidden size h.")
@click.option("--tp", type=click.IntRange(min=1), required=True, help="TP degree t.")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Micro-batch b.")
@click.option("--layers", type=click.IntRange(min=1), default=1, show_default=True, help="Layers, for totals.")
@json_option
def sp(seq, hidden, tp, batch, layers, as_json):
    """TP vs TP+SP: shape trace, resident peaks and the equal communication (seed 002).

    Example:

        perfmodel sp --seq 4096 --hidden 4096 --tp 8
    """
    r = reports.sp_report(seq, hidden, tp, batch, layers)
    render.emit_json(r) if as_json else render.sp(r)


# ---------------------------------------------------------------- presets

@main.command("presets")
@click.argument("kind", required=False, type=click.Choice(["hardware", "links", "models", "plans"]))
@json_option
def presets_cmd(kind, as_json):
    """List the bundled presets with their key figures.

    Example:

        perfmodel presets models
    """
    kinds = [kind] if kind else ["hardware", "links", "models", "plans"]
    data = {k: presets.describe(k) for k in kinds}
    if as_json:
        render.emit_json(data if not kind else data[kind])
        return
    for k in kinds:
        render.presets(k, data[k])


# ---------------------------------------------------------------- plans: memory, estimate

def parallel_options(f):
    """The knobs a user may fix on the command line (they override the plan's parallel section)."""
    opts = [
        click.option("--tp", type=click.IntRange(min=1), help="Tensor-parallel degree."),
        click.option("--pp", type=click.IntRange(min=1), help="Pipeline stages."),
        click.option("--dp", type=click.IntRange(min=1), help="Data-parallel replicas."),
        click.option("--vp", type=click.IntRange(min=1), help="Virtual stages per GPU (interleaving)."),
        click.option("--mbs", type=click.IntRange(min=1), help="Micro-batch size."),
        click.option("--sp/--no-sp", "sequence_parallel", default=None, help="Sequence parallelism."),
        click.option("--recompute", type=click.Choice(["none", "selective", "full"])),
        click.option("--zero", "zero_stage", type=click.IntRange(0, 3), help="ZeRO stage."),
        click.option("--schedule", type=click.Choice(["gpipe", "1f1b", "interleaved"])),
        click.option("--gpus", type=click.IntRange(min=1), help="Override the plan's GPU count."),
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


def load_plan_with(plan_arg: str, kw: dict):
    """Load a plan, apply --gpus, and fix the knobs given as flags (they override its parallel section)."""
    plan = presets.load_plan(plan_arg)
    if kw.get("gpus"):
        plan = plan.with_system(num_gpus=kw["gpus"])
        n, gpn = kw["gpus"], plan.system.gpus_per_node
        if n > gpn and n % gpn:
            raise PerfModelError(f"--gpus({n}) is not a multiple of gpus_per_node({gpn}); use whole nodes")
    fixed = {**plan.parallel.model_dump(exclude_none=True), **_overrides(kw)}
    return plan.model_copy(update={"parallel": plan.parallel.model_validate(fixed)})


@main.command()
@click.argument("plan_file", required=False)
@click.option("--model", "model_name", help="Quick case without a plan: model preset or file.")
@click.option("--gpu", "gpu_name", default="a100-80gb", show_default=True, help="Quick case: GPU preset.")
@click.option("--gbs", type=click.IntRange(min=1), help="Quick case: global batch (default dp x mbs).")
@parallel_options
@click.option("--plot", type=click.Path(dir_okay=False), help="Write stacked memory vs capacity to a PNG.")
@json_option
def memory(plan_file, model_name, gpu_name, gbs, plot, as_json, **kw):
    """Memory budget per GPU by component, against HBM capacity (SPEC 6).

    Example:

        perfmodel memory gpt3-175b-3d.yaml
        perfmodel memory --model gpt3-175b --gpus 64 --tp 8 --pp 8 --sp --recompute selective
    """
    from .estimate import estimate, resolve_config
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
    if plot:
        from . import plots
        plots.memory_plot(mem, plot)
    if as_json:
        render.emit_json({**mem, "config": cfg.as_dict()})
    else:
        c = cfg
        render.memory(mem, f"Memory per GPU, most loaded stage: {plan.model.name} on {plan.system.num_gpus} x "
                      f"{plan.system.gpu.name}; tp={c.tp} pp={c.pp} dp={c.dp} mbs={c.micro_batch_size} "
                      f"m={c.num_micro_batches} sp={c.sequence_parallel} recompute={c.recompute} "
                      f"zero={c.zero_stage} {c.schedule}")


@main.command()
@click.argument("plan_file")
@parallel_options
@click.option("--per-layer", is_flag=True, help="Also list every operation of one layer.")
@json_option
def estimate(plan_file, per_layer, as_json, **kw):
    """Per-layer and per-iteration breakdown of one configuration (SPEC 5-8).

    Example:

        perfmodel estimate gpt3-175b-3d.yaml
        perfmodel estimate gpt3-175b.yaml --tp 8 --pp 8 --mbs 1 --sp --recompute selective --per-layer
    """
    from . import estimate as est_mod
    plan = load_plan_with(plan_file, kw)
    cfg = est_mod.resolve_config(plan)
    est = est_mod.estimate(plan, cfg)
    ops = est_mod.per_layer_ops(plan, cfg) if per_layer else None
    if as_json:
        out = est.to_json()
        if ops is not None:
            out["per_layer"] = est_mod.ops_json(ops)
        render.emit_json(out)
    else:
        render.estimate(plan, est, ops)


@main.command("plan")
@click.argument("plan_file")
@parallel_options
@click.option("--top", type=int, default=5, show_default=True, help="How many configurations to list.")
@click.option("--sort", type=click.Choice(["step_time", "memory"]), default="step_time", show_default=True)
@click.option("--allow-cross-node-tp", is_flag=True, help="Let TP groups span nodes.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Step time vs memory of the feasible configurations.")
@json_option
def plan_cmd(plan_file, top, sort, allow_cross_node_tp, plot, as_json, **kw):
    """Search TP x PP x DP (and micro-batch, vp, SP, recompute, ZeRO) for the fastest plan that fits.

    Knobs given in the plan's parallel section or as flags are fixed; the rest are searched.

    Example:

        perfmodel plan gpt3-175b.yaml --gpus 512
        perfmodel plan gpt3-175b.yaml --gpus 512 --tp 8 --recompute selective --top 10 --json
    """
    from . import search as srch
    if top < 1:
        raise click.BadParameter(f"must be at least 1, got {top}", param_hint="--top")
    plan = load_plan_with(plan_file, kw)
    bar = render.LazyProgress() if not as_json else None
    try:
        result = srch.search(plan, top, sort, allow_cross_node_tp, bar, keep_points=bool(plot))
    finally:
        if bar:
            bar.close()
    if plot and result.points is not None:
        from . import plots
        plots.pareto_plot(result.points, plot)
    if as_json:
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

    Example:

        perfmodel validate
        perfmodel validate k22 --json
        perfmodel validate n21-gpt-76.1b --breakdown
    """
    from . import validate as val
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
@json_option
def check_cmd(plan_file, ignored, strict, list_rules, as_json, **kw):
    """Review a plan like a reviewer would: each problem, its cost, the cheapest fix.

    Exit code 0 when there is no error, 1 when there is (with --strict, also on warnings), so the
    check can run in CI on a team's plan files.

    Example:

        perfmodel check examples/clean-plan.yaml
        perfmodel check examples/troubled-plan.yaml --ignore PM302 --json
    """
    from . import check as chk
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
@click.option("-m", "--micro-batches", "m", type=click.IntRange(min=1), help="Micro-batches m (default: the plan's).")
@click.option("-p", "--stages", "p", type=click.IntRange(min=1), help="Pipeline stages p (default: the plan's).")
@click.option("-v", "--virtual", "v", type=click.IntRange(min=1), help="Virtual stages per GPU (interleaved).")
@click.option("--schedule", "sched", type=click.Choice(["gpipe", "1f1b", "interleaved"]),
              help="Default: interleaved when v > 1, else 1f1b (or the plan's).")
@click.option("--tf", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Forward time per stage without a plan (any unit).")
@click.option("--tb", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Backward time per stage without a plan.")
@click.option("--latency", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Point-to-point time between stages without a plan.")
@click.option("--width", type=click.IntRange(min=30), default=80, show_default=True, help="Gantt width in columns.")
@click.option("--svg", "svg_file", type=click.Path(dir_okay=False), help="Also write the Gantt chart as SVG.")
@json_option
def schedule_cmd(plan_file, m, p, v, sched, tf, tb, latency, width, svg_file, as_json):
    """Simulate a pipeline schedule and draw its Gantt chart (one row per stage).

    Without a plan the stages are equal (--tf, --tb). With a plan, the stage times come from
    `estimate` (the first stage carries the embedding, the last the output layer and loss),
    in seconds, with the point-to-point time between stages.

    Example:

        perfmodel schedule -m 8 -p 4
        perfmodel schedule -m 8 -p 4 -v 2 --svg pipeline.svg
        perfmodel schedule gpt3-175b-3d.yaml
    """
    from . import gantt
    from .schedule import simulate
    if plan_file:
        from .estimate import estimate, resolve_config, stage_times
        plan = presets.load_plan(plan_file)
        over = {k: val for k, val in (("pp", p), ("vp", v), ("schedule", sched)) if val is not None}
        cfg = resolve_config(plan, **over)
        if m is not None:
            cfg = dataclasses.replace(cfg, global_batch_size=m * cfg.dp * cfg.micro_batch_size)
            plan = plan.with_training(global_batch_size=cfg.global_batch_size)
        vals = estimate(plan, cfg).values
        p, m, v, sched = cfg.pp, cfg.num_micro_batches, cfg.vp, cfg.schedule
        tf, tb = stage_times(vals, p)
        latency = vals["p2p_s"]
        title = f"{plan.model.name}, stage times from estimate (s)"
        blocking = not plan.training.p2p_overlap
    else:
        if m is None or p is None:
            raise click.UsageError("give -m and -p, or a PLAN file")
        v = v or 1
        sched = sched or ("interleaved" if v > 1 else "1f1b")
        title = f"equal stages, t_f={tf:g}, t_b={tb:g}"
        blocking = False
    sim = simulate(p, m, v, sched, tf, tb, latency, blocking=blocking)
    if svg_file:
        try:
            with open(svg_file, "w", encoding="utf-8") as fh:
                fh.write(gantt.svg(sim, title))
        except OSError as e:
            raise PerfModelError(f"cannot write {svg_file}: {e.strerror}") from None
    if as_json:
        render.emit_json(sim.to_json())
    else:
        render.schedule(sim, gantt.text_rows(sim, width), gantt.LEGEND, title)
