"""Thin click commands: load, call one library function, render (STYLE.md "CLI and output").

Library errors become one-line messages with exit code 1; usage errors exit 2;
no traceback reaches a user for bad input.
"""

from __future__ import annotations

import math
import os
import sys

import click
from pydantic import ValidationError

from perfmodel.inputs import presets
from perfmodel.output import render
from perfmodel.engine import calculators as reports
from perfmodel.errors import PerfModelError
from perfmodel.specs import DTYPES
from perfmodel.units import QuantityError, parse_quantity


class Group(click.Group):
    """Turns every user-facing failure into one line and a non-zero exit code."""

    def invoke(self, ctx):
        render.set_markdown(False)  # --format markdown lasts one command (tests run many in one process)
        try:
            return super().invoke(ctx)
        except (PerfModelError, QuantityError) as e:
            raise click.ClickException(_short(str(e))) from None
        except ValidationError as e:
            raise click.ClickException(_short(presets.format_validation_error(e, "input"))) from None
        except RecursionError:
            raise click.ClickException("input nested too deeply to read") from None
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


def _short(message: str, limit: int = 600) -> str:
    """Error messages stay a few lines long, whatever value a user's input expanded to."""
    return message if len(message) <= limit else message[:limit] + f"... ({len(message) - limit:,} more characters)"


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="perfmodel")
def main():
    """perfmodel: an analytical performance model of distributed transformer training.

    \b
    Example:
        perfmodel plan gpt3-175b.yaml --gpus 512
    """


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output (stable keys).")
format_option = click.option(
    "--format", "output_format", type=click.Choice(["text", "markdown"]), default="text", show_default=True,
    expose_value=False, callback=lambda ctx, param, value: render.set_markdown(value == "markdown"),
    help="markdown: tables as GitHub Markdown, to paste into a design document or a pull request.")
MAX_COUNT = 2**40  # any count a user passes (GPUs, micro-batches, sizes) stays a finite float in every formula


def count(min_value: int = 1, max_value: int = MAX_COUNT) -> click.IntRange:
    """A whole number in a range where every formula stays finite."""
    return click.IntRange(min_value, max_value)


class Finite(click.ParamType):
    """A finite float in [low, high] (click's FloatRange lets nan and inf through)."""

    name = "number"

    def __init__(self, low: float, high: float, low_open: bool = False, high_open: bool = False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if x < self.low or x > self.high or (self.low_open and x == self.low) or (self.high_open and x == self.high):
            lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
            self.fail(f"{x:g} is outside {lo}{self.low:g}, {self.high:g}{hi}", param, ctx)
        return x


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
@click.option("-m", "--micro-batches", "m", type=count(), required=True, help="Micro-batches per step m.")
@click.option("-p", "--stages", "p", type=count(), required=True, help="Pipeline stages p.")
@click.option("-v", "--virtual", "v", type=count(), default=1, show_default=True,
              help="Virtual stages per GPU (interleaving).")
@click.option("--target", type=Finite(1e-6, 1, high_open=True), default=0.10,
              show_default=True, help="Wall-clock bubble to stay strictly below.")
@click.option("--sweep", is_flag=True, help="Also tabulate the bubble over a range of m.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write bubble vs m to a PNG (needs perfmodel[plot]).")
@json_option
def bubble(m, p, v, target, sweep, plot, as_json):
    """Pipeline bubble under both denominators (Narayanan et al. 2021, Sec. 2.2; Huang et al. 2019).

    \b
    Example:
        perfmodel bubble -m 48 -p 8 --target 0.10
    """
    r = reports.bubble_report(p, m, v, target, sweep)
    if plot is not None:
        from perfmodel.output import plots
        plots.bubble_plot(r, plot)
    render.emit_json(r) if as_json else render.bubble(r)


# ---------------------------------------------------------------- roofline

@main.command()
@click.option("--mbs", type=count(), required=True, help="Micro-batch size in sequences; the GEMMs' rows are "
              "M = mbs x seq-len tokens, so with the default --seq-len 1 it counts tokens.")
@click.option("--seq-len", type=count(), default=1, show_default=True,
              help="Tokens per sequence; M = mbs x seq-len.")
@click.option("--model", "model_name", help="Model preset (or file) for the layer shape.")
@click.option("--hidden", type=count(), help="Hidden size h (default 4096 without --model).")
@click.option("--ffn", type=count(), help="MLP inner size (default 4h).")
@click.option("--heads", type=count(), help="Attention heads (default h/128).")
@click.option("--tp", type=count(), default=8, show_default=True, help="TP degree.")
@click.option("--gpu", "gpu_name", default="a100-80gb", show_default=True, help="GPU preset.")
@click.option("--dtype", type=click.Choice(DTYPES), default="bf16", show_default=True)
@click.option("--flash/--no-flash", default=True, show_default=True,
              help="Attention as one fused kernel (FlashAttention), or as its two GEMMs with the scores in HBM.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write the roofline to a PNG (needs perfmodel[plot]).")
@json_option
def roofline(mbs, seq_len, model_name, hidden, ffn, heads, tp, gpu_name, dtype, flash, plot, as_json):
    """Roofline of every GEMM of one transformer layer (Williams et al. 2009).

    \b
    Example:
        perfmodel roofline --mbs 64            # MLP GEMM memory-bound at AI ~61
        perfmodel roofline --mbs 8 --seq-len 1024
    """
    from perfmodel.cost.transformer import LayerShape
    g = presets.gpu(gpu_name)
    swiglu, groups = False, None
    if model_name:
        mdl = presets.model(model_name)
        hidden, ffn, heads = hidden or mdl.hidden_size, ffn or mdl.ffn, heads or mdl.num_attention_heads
        swiglu, groups = mdl.mlp == "swiglu", mdl.groups
    hidden = hidden or 4096
    ffn = ffn or 4 * hidden
    heads = heads or max(1, hidden // 128)
    groups = groups or heads
    if hidden % heads:
        raise PerfModelError(f"--hidden({hidden}) is not divisible by --heads({heads})")
    for name, value in (("--heads", heads), ("--ffn", ffn)):
        if value % tp:
            raise PerfModelError(f"{name}({value}) is not divisible by --tp({tp}); pick tp dividing it")
    if groups % tp and tp % groups:
        raise PerfModelError(f"the model's {groups} query groups and --tp({tp}) do not divide one another")
    shape = LayerShape(hidden=hidden, heads=heads, groups=groups, ffn=ffn, vocab=1, gated=swiglu, bias=False,
                       norm="layernorm", learned_positions=False, tied=True)
    r = reports.roofline_report(g, dtype, shape, tp, mbs, seq_len, flash=flash)
    if plot is not None:
        from perfmodel.output import plots
        plots.roofline_plot(g, dtype, shape, tp, seq_len, plot, mbs)
    render.emit_json(r) if as_json else render.roofline(r)


# ---------------------------------------------------------------- comm

@main.command()
@click.argument("collective", type=click.Choice(["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "p2p"]))
@click.option("--size", required=True, callback=quantity("bytes"), help="Message size, e.g. 67.1MB or 64KiB.")
@click.option("--ranks", type=count(), default=8, show_default=True, help="Ranks in the group.")
@click.option("--link", "link_name", default="nvlink3", show_default=True, help="Link preset.")
@click.option("--bandwidth", callback=quantity("bytes_per_s"), help="Override the link bandwidth, e.g. 25GB/s.")
@click.option("--latency", callback=quantity("seconds"), help="Override the link latency, e.g. 2us.")
@click.option("--efficiency", is_flag=True, help="Scale bandwidth by the link's achievable fraction.")
@json_option
def comm(collective, size, ranks, link_name, bandwidth, latency, efficiency, as_json):
    """Alpha-beta time of one ring collective, latency and bandwidth apart (Thakur et al. 2005).

    \b
    Example:
        perfmodel comm all-reduce --size 67.1MB --ranks 8 --link nvlink3
    """
    lk = presets.link(link_name)
    if bandwidth is not None or latency is not None:
        if bandwidth is not None and bandwidth <= 0:
            raise click.BadParameter("must be positive", param_hint="--bandwidth")
        if latency is not None and latency < 0:
            raise click.BadParameter("must not be negative", param_hint="--latency")
        update = {k: v for k, v in (("bandwidth_bytes_per_s", bandwidth), ("latency_s", latency)) if v is not None}
        lk = lk.model_copy(update=update)
        lk = lk.model_copy(update={"name": f"{lk.bandwidth_bytes_per_s / 1e9:g} GB/s, {lk.latency_s * 1e6:g} us "
                                           f"latency (--bandwidth/--latency; {link_name} otherwise)"})
    if size <= 0:
        raise click.BadParameter("must be positive", param_hint="--size")
    r = reports.comm_report(collective, size, ranks, lk, efficiency)
    render.emit_json(r) if as_json else render.comm(r)


# ---------------------------------------------------------------- sp

@main.command()
@click.option("--seq", type=count(), required=True, help="Sequence length s.")
@click.option("--hidden", type=count(), required=True, help="Hidden size h.")
@click.option("--tp", type=count(), required=True, help="TP degree t.")
@click.option("--batch", type=count(), default=1, show_default=True, help="Micro-batch b.")
@click.option("--layers", type=count(), default=1, show_default=True, help="Layers, for totals.")
@json_option
def sp(seq, hidden, tp, batch, layers, as_json):
    """TP vs TP+SP: shape trace, resident peaks and the equal communication (Korthikanti et al. 2022).

    \b
    Example:
        perfmodel sp --seq 4096 --hidden 4096 --tp 8
    """
    r = reports.sp_report(seq, hidden, tp, batch, layers)
    render.emit_json(r) if as_json else render.sp(r)


# ---------------------------------------------------------------- presets

@main.command("presets")
@click.argument("kind", required=False, type=click.Choice(["hardware", "links", "models", "frameworks", "plans"]))
@json_option
def presets_cmd(kind, as_json):
    """List the bundled presets with their key figures.

    \b
    Example:
        perfmodel presets models
    """
    kinds = [kind] if kind else ["hardware", "links", "models", "frameworks", "plans"]
    data = {k: presets.describe(k) for k in kinds}
    if as_json:
        render.emit_json(data if not kind else data[kind])
        return
    for k in kinds:
        render.presets(k, data[k])


# the commands that read a plan file register themselves on ``main``
from perfmodel.cli import imports as cli_import
from perfmodel.cli import plans as cli_plans  # noqa: E402,F401
