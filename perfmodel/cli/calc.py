"""The calculators that need no plan: bubble, roofline, comm, sp, presets."""

from __future__ import annotations

import click

from perfmodel.cli.common import Finite, count, json_option, plot_option, quantity

# the dtypes a GPU can list a peak for (perfmodel.specs.precision.DTYPES; tests/test_cli.py keeps
# them equal)
DTYPE_CHOICES = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4", "mxfp6", "mxfp4")


@click.command()
@click.option(
    "-m", "--micro-batches", "m", type=count(), required=True, help="Micro-batches per step m."
)
@click.option("-p", "--stages", "p", type=count(), required=True, help="Pipeline stages p.")
@click.option(
    "-v",
    "--virtual",
    "v",
    type=count(),
    default=1,
    show_default=True,
    help="Virtual stages per GPU (interleaving).",
)
@click.option(
    "--target",
    type=Finite(1e-6, 1, high_open=True),
    default=0.10,
    show_default=True,
    help="Wall-clock bubble to stay strictly below.",
)
@click.option("--sweep", is_flag=True, help="Also tabulate the bubble over a range of m.")
@click.option(
    "--schedules",
    is_flag=True,
    help="Also each schedule's closed form at equal F, B, W (docs/schedules.md).",
)
@plot_option("Write bubble vs m to a PNG (needs perfmodel[plot]).")
@json_option
def bubble(
    m: int,
    p: int,
    v: int,
    target: float,
    sweep: bool,
    schedules: bool,
    plot: str | None,
    as_json: bool,
) -> None:
    """Pipeline bubble under both denominators (Narayanan et al. 2021, Sec. 2.2; Huang et al. 2019).

    \b
    Example:
        perfmodel bubble -m 48 -p 8 --target 0.10
        perfmodel bubble -m 32 -p 8 --schedules
    """
    from perfmodel.engine import calculators
    from perfmodel.output import console, render

    r = calculators.bubble_report(p, m, v, target, sweep, schedules)
    if plot is not None:
        from perfmodel.output import plots

        plots.bubble_plot(r, plot)
    console.emit_json(r) if as_json else render.bubble(r)


@click.command()
@click.option(
    "--mbs",
    type=count(),
    required=True,
    help=(
        "Micro-batch size in sequences; the GEMMs' rows are M = mbs x seq-len tokens (without"
        " --model and --seq-len, mbs counts tokens)."
    ),
)
@click.option(
    "--seq-len",
    type=count(),
    help="Tokens per sequence; M = mbs x seq-len. Default: the --model's seq_length, else 1.",
)
@click.option("--model", "model_name", help="Model preset (or file) for the layer shape.")
@click.option("--hidden", type=count(), help="Hidden size h (default 4096 without --model).")
@click.option("--ffn", type=count(), help="MLP inner size (default 4h).")
@click.option("--heads", type=count(), help="Attention heads (default h/128).")
@click.option("--tp", type=count(), default=8, show_default=True, help="TP degree.")
@click.option("--gpu", "gpu_name", default="a100-80gb", show_default=True, help="GPU preset.")
@click.option("--dtype", type=click.Choice(DTYPE_CHOICES), default="bf16", show_default=True)
@click.option(
    "--flash/--no-flash",
    default=True,
    show_default=True,
    help=(
        "Attention as one fused kernel (FlashAttention), or as its two GEMMs with the scores in"
        " HBM."
    ),
)
@plot_option("Write the roofline to a PNG (needs perfmodel[plot]).")
@json_option
def roofline(
    mbs: int,
    seq_len: int | None,
    model_name: str | None,
    hidden: int | None,
    ffn: int | None,
    heads: int | None,
    tp: int,
    gpu_name: str,
    dtype: str,
    flash: bool,
    plot: str | None,
    as_json: bool,
) -> None:
    """Roofline of every GEMM of one transformer layer (Williams et al. 2009).

    \b
    Example:
        perfmodel roofline --mbs 64            # MLP GEMM memory-bound at AI ~61
        perfmodel roofline --mbs 8 --seq-len 1024
    """
    from perfmodel.engine import calculators
    from perfmodel.inputs import presets
    from perfmodel.output import console, render

    g = presets.gpu(gpu_name)
    model = presets.model(model_name) if model_name else None
    shape = calculators.roofline_shape(model, hidden, ffn, heads, tp)
    note = None
    if seq_len is None:
        seq_len = model.seq_length if model else 1
        note = (
            f"seq-len {seq_len}: the model's seq_length (--seq-len to change it)"
            if model
            else "seq-len 1: no --model, so --mbs counts tokens (--seq-len for sequences)"
        )
    r = calculators.roofline_report(g, dtype, shape, tp, mbs, seq_len, flash=flash)
    r["seq_len"], r["seq_len_assumed"] = seq_len, note
    if plot is not None:
        from perfmodel.output import plots

        plots.roofline_plot(g, dtype, shape, tp, seq_len, plot, mbs)
    console.emit_json(r) if as_json else render.roofline(r)


@click.command()
@click.argument(
    "collective",
    type=click.Choice(
        ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "p2p"]
    ),
)
@click.option(
    "--size", required=True, callback=quantity("bytes"), help="Message size, e.g. 67.1MB or 64KiB."
)
@click.option("--ranks", type=count(), default=8, show_default=True, help="Ranks in the group.")
@click.option("--link", "link_name", default="nvlink3", show_default=True, help="Link preset.")
@click.option(
    "--bandwidth",
    callback=quantity("bytes_per_s"),
    help="Override the link bandwidth, e.g. 25GB/s.",
)
@click.option(
    "--latency", callback=quantity("seconds"), help="Override the link latency, e.g. 2us."
)
@click.option(
    "--efficiency", is_flag=True, help="Scale bandwidth by the link's achievable fraction."
)
@json_option
def comm(
    collective: str,
    size: float,
    ranks: int,
    link_name: str,
    bandwidth: float | None,
    latency: float | None,
    efficiency: bool,
    as_json: bool,
) -> None:
    """Alpha-beta time of one ring collective, latency and bandwidth apart (Thakur et al. 2005).

    \b
    Example:
        perfmodel comm all-reduce --size 67.1MB --ranks 8 --link nvlink3
    """
    from perfmodel.engine import calculators
    from perfmodel.inputs import presets
    from perfmodel.output import console, render

    lk = presets.link(link_name)
    if bandwidth is not None or latency is not None:
        if bandwidth is not None and bandwidth <= 0:
            raise click.BadParameter("must be positive", param_hint="--bandwidth")
        if latency is not None and latency < 0:
            raise click.BadParameter("must not be negative", param_hint="--latency")
        update = {
            k: v
            for k, v in (("bandwidth_bytes_per_s", bandwidth), ("latency_s", latency))
            if v is not None
        }
        lk = lk.model_copy(update=update)
        lk = lk.model_copy(
            update={
                "name": (
                    f"{lk.bandwidth_bytes_per_s / 1e9:g} GB/s, {lk.latency_s * 1e6:g} us "
                    f"latency (--bandwidth/--latency; {link_name} otherwise)"
                )
            }
        )
    if size <= 0:
        raise click.BadParameter("must be positive", param_hint="--size")
    r = calculators.comm_report(collective, size, ranks, lk, efficiency)
    console.emit_json(r) if as_json else render.comm(r)


@click.command()
@click.option("--seq", type=count(), required=True, help="Sequence length s.")
@click.option("--hidden", type=count(), required=True, help="Hidden size h.")
@click.option("--tp", type=count(), required=True, help="TP degree t.")
@click.option("--batch", type=count(), default=1, show_default=True, help="Micro-batch b.")
@click.option("--layers", type=count(), default=1, show_default=True, help="Layers, for totals.")
@json_option
def sp(seq: int, hidden: int, tp: int, batch: int, layers: int, as_json: bool) -> None:
    """TP vs TP+SP: shape trace, resident peaks and the equal communication (Korthikanti et al.
    2022).

    \b
    Example:
        perfmodel sp --seq 4096 --hidden 4096 --tp 8
    """
    from perfmodel.engine import calculators
    from perfmodel.output import console, render

    r = calculators.sp_report(seq, hidden, tp, batch, layers)
    console.emit_json(r) if as_json else render.sp(r)


@click.command("presets")
@click.argument(
    "kind",
    required=False,
    type=click.Choice(["hardware", "links", "models", "frameworks", "plans"]),
)
@json_option
def presets_cmd(kind: str | None, as_json: bool) -> None:
    """List the bundled presets with their key figures.

    \b
    Example:
        perfmodel presets models
    """
    from perfmodel.inputs.describe import describe
    from perfmodel.output import console, render

    kinds = [kind] if kind else ["hardware", "links", "models", "frameworks", "plans"]
    data = {k: describe(k) for k in kinds}
    if as_json:
        console.emit_json(data if not kind else data[kind])
        return
    for k in kinds:
        render.presets(k, data[k])
