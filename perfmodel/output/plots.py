"""PNG plots through matplotlib, an optional extra (`pip install 'perfmodel[plot]'`).

The only module that imports matplotlib; every figure is computed by the same
library functions the tables use.
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import pipeline as pipe
from perfmodel.cost import roofline as rl
from perfmodel.errors import PerfModelError


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PerfModelError("plotting needs matplotlib: pip install 'perfmodel[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# the formats matplotlib writes (FigureCanvasBase.get_supported_filetypes())
FORMATS = ("png", "svg", "pdf", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp", "pgf")


def path_problem(path: str) -> str | None:
    """What is wrong with a figure's file name (no extension, or no image format's), or None; the
    CLI asks before any work is done."""
    import os

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if not os.path.basename(path) or not ext:
        return f"{path!r}: give the file an extension (.png, .svg or .pdf)"
    if ext not in FORMATS:
        return f"{path!r}: .{ext} is no image format; use .png, .svg or .pdf"
    return None


def _save(fig, path: str) -> None:
    """Write the figure where asked, in the format its extension names, and say so on stderr."""
    import sys

    problem = path_problem(path)
    if problem:
        import matplotlib.pyplot as plt

        plt.close(fig)
        raise PerfModelError(f"--plot {problem}")
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
        sys.stderr.write(f"wrote {path}\n")
    except OSError as e:
        raise PerfModelError(f"cannot write {path}: {e.strerror}") from None
    except ValueError as e:  # matplotlib: an extension it has no writer for
        raise PerfModelError(
            f"--plot {path}: {str(e).splitlines()[0][:160]}; use a .png, .svg or .pdf name"
        ) from None
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def roofline_plot(gpu, dtype, shape, tp, seq, path: str, mbs: int = 1) -> None:
    """The roofline with each GEMM of the layer as a point, for GEMM rows M from 16 to 16,384 tokens
    and the requested M = mbs x seq marked (Williams et al. 2009)."""
    from perfmodel.engine.calculators import roofline_report

    plt = _pyplot()
    peak, bw = gpu.peak(dtype), gpu.hbm_bandwidth_bytes_per_s
    ai = np.logspace(-1, 4, 200)
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.loglog(
        ai, rl.attainable_flops(ai, peak, bw) / 1e12, "k-", label=f"{gpu.name} {dtype} roofline"
    )
    ax.axvline(
        rl.ridge_point(peak, bw),
        color="grey",
        ls=":",
        label=f"ridge {rl.ridge_point(peak, bw):.0f} FLOP/B",
    )
    for tokens, marker in zip((16, 64, 256, 1024, 4096, 16384), "os^vD<"):
        rows = [
            r
            for r in roofline_report(gpu, dtype, shape, tp, tokens, 1)["gemms"]
            if "attention" not in r["name"]
        ]
        ax.scatter(
            [r["arithmetic_intensity"] for r in rows],
            [r["attainable_flops_per_s"] / 1e12 for r in rows],
            marker=marker,
            alpha=0.6,
            label=f"M = {tokens:,} tokens",
        )
    rows = [
        r
        for r in roofline_report(gpu, dtype, shape, tp, mbs, seq)["gemms"]
        if "attention" not in r["name"]
    ]
    ax.scatter(
        [r["arithmetic_intensity"] for r in rows],
        [r["attainable_flops_per_s"] / 1e12 for r in rows],
        s=120,
        facecolors="none",
        edgecolors="red",
        linewidths=2,
        label=f"requested: mbs {mbs} x seq {seq} = {mbs * seq:,} tokens",
    )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"Layer GEMMs on {gpu.name} ({dtype}): h={shape.hidden}, f={shape.ffn}, TP={tp}")
    ax.legend(fontsize=7)
    _save(fig, path)


def bubble_plot(report: dict, path: str) -> None:
    """Bubble vs m for several p, under both denominators (Narayanan et al. 2021, Sec. 2.2), the
    request marked."""
    plt = _pyplot()
    v = report["v"]
    m = np.arange(1, max(257, 2 * report["m"]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for p in sorted({2, 4, 8, 16, report["p"]}):
        (line,) = ax.plot(m, 100 * pipe.bubble_over_step(p, m, v), label=f"p={p}, bubble / step")
        ax.plot(
            m,
            100 * np.minimum(pipe.bubble_over_ideal(p, m, v), 1.5),
            ls="--",
            color=line.get_color(),
            label=f"p={p}, bubble / ideal",
        )
    ax.axhline(
        100 * report["target"], color="grey", ls=":", label=f"target {100 * report['target']:.0f}%"
    )
    ax.set_xscale("log")
    ax.set_ylim(0, 100)
    ax.set_xlabel("micro-batches m")
    ax.set_ylabel("bubble (%)")
    m0, p0 = report["m"], report["p"]
    ax.plot(
        [m0],
        [100 * pipe.bubble_over_step(p0, m0, v)],
        "ro",
        ms=9,
        label=f"requested: m={m0}, p={p0}",
    )
    ax.set_title(f"Pipeline bubble against micro-batches, v={v} (requested m={m0}, p={p0})")
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)


def memory_plot(mem: dict, path: str, title: str = "") -> None:
    """Stacked memory components against HBM capacity, the plan and verdict in the title."""
    plt = _pyplot()
    parts = (
        "weights_bytes",
        "gradients_bytes",
        "optimizer_bytes",
        "activations_bytes",
    )
    fig, ax = plt.subplots(figsize=(7.5, 6))
    bottom = 0.0
    for key in parts:
        ax.bar(
            ["most loaded GPU"], [mem[key] / 1e9], bottom=bottom, label=key.replace("_bytes", "")
        )
        bottom += mem[key] / 1e9
    ax.axhline(
        mem["capacity_bytes"] / 1e9,
        color="red",
        ls="--",
        label=f"HBM {mem['capacity_bytes'] / 1e9:.0f} GB",
    )
    ax.axhline(
        mem["usable_bytes"] / 1e9,
        color="darkorange",
        ls=":",
        label=f"usable {mem['usable_bytes'] / 1e9:.1f} GB (HBM - reserve)",
    )
    ax.set_ylabel("GB")
    verdict = ("tight" if mem["tight"] else "fits") if mem["fits"] else "does NOT fit"
    ax.set_title(
        f"{title}\n{mem['total_bytes'] / 1e9:.1f} of {mem['usable_bytes'] / 1e9:.1f} GB usable:"
        f" {verdict}",
        fontsize=9,
    )
    # beside the bar, never over it
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    _save(fig, path)


def pareto_front(step_time, memory) -> np.ndarray:
    """Indices of the configurations no other beats on both step time and memory."""
    order = np.lexsort((memory, step_time))
    best, front = np.inf, []
    for i in order:
        if memory[i] < best:
            front.append(i)
            best = memory[i]
    return np.array(front, dtype=int)


def pareto_plot(
    points: dict,
    path: str,
    title: str = "",
    best: tuple[float, float] | None = None,
    capacity: float | None = None,
) -> None:
    """Step time vs memory of every feasible configuration, the Pareto front, the best one and the
    HBM line."""
    plt = _pyplot()
    t, mem = np.asarray(points["step_time_s"]), np.asarray(points["total_bytes"]) / 1e9
    front = pareto_front(t, mem)
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.scatter(
        mem, t, s=4, alpha=0.3, label=f"{t.size:,} feasible configurations (closed-form bubble)"
    )
    ax.plot(mem[front], t[front], "r.-", label="Pareto front")
    if best is not None:
        ax.plot(
            [best[1] / 1e9],
            [best[0]],
            "k*",
            ms=14,
            label=f"best, pipeline simulated: {best[0]:.3g} s, {best[1] / 1e9:.1f} GB",
        )
    if capacity is not None:
        ax.axvline(capacity / 1e9, color="red", ls="--", label=f"HBM {capacity / 1e9:.1f} GB")
    ax.set_xlabel("memory per GPU (GB)")
    ax.set_ylabel("step time (s)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(plt.FuncFormatter(_log_minor_label))
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    _save(fig, path)


def _log_minor_label(v: float, _pos: object) -> str:
    """On a log axis, label the minor ticks at 2, 3, 4 and 6 of each decade, plainly."""
    if v <= 0:
        return ""
    lead = round(v / 10 ** np.floor(np.log10(v)))
    return f"{v:g}" if lead in (2, 3, 4, 6) else ""


def sweep_plot(result, title: str, path: str) -> None:
    """Throughput against the swept value, with the ideal (linear in GPUs) line when GPUs are
    swept. Numeric values sit at their value, on a log axis for GPU counts (evenly spaced ticks
    made linear scaling look exponential) or values spanning more than 4x; a linear y axis starts
    at zero, so a 6% drop looks like one."""
    plt = _pyplot()
    ok = [p for p in result.points if p.est is not None]
    if not ok:
        raise PerfModelError("--plot: no value of the sweep ran, nothing to draw")
    numbers = _numeric([p.value for p in ok])
    x = numbers if numbers is not None else list(range(len(ok)))
    y = [p.est.values["tokens_per_s"] for p in ok]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(x, y, "o-", label="predicted tokens/s")
    if result.field == "system.num_gpus":
        ax.plot(x, [y[0] * p.num_gpus / ok[0].num_gpus for p in ok], "k--", label="linear in GPUs")
    gpus = result.field == "system.num_gpus"
    if numbers is not None and min(numbers) > 0 and (gpus or max(numbers) > 4 * min(numbers)):
        ax.set_xscale("log", base=2)
        if gpus:
            ax.set_yscale("log", base=2)  # linear scaling is then a straight line
    ax.set_xticks(x, [str(p.value) for p in ok])
    if ax.get_yscale() == "linear":
        ax.set_ylim(0, 1.15 * max(y))  # from zero, with room for the legend above the curve
        ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    else:
        ax.set_yticks(y, [f"{v:,.0f}" for v in y])  # on a log axis, the predictions themselves
    ax.minorticks_off()
    ax.set_xlabel(result.field)
    ax.set_ylabel("tokens/s")
    ax.set_title(title)
    ax.legend(loc="lower right")
    _save(fig, path)


def _numeric(values: list) -> list[float] | None:
    """The swept values as numbers, or None where any is not one (a GPU name)."""
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        return None


def pareto_or_note(plan, result, path: str) -> None:
    """`plan --plot`: step time against memory of every feasible configuration, or a note that none
    fits."""
    import click

    if result.points is None or not len(result.points["step_time_s"]):
        click.echo(f"--plot {path}: nothing fits, no plot written", err=True)
        return
    best = result.results[0].values
    pareto_plot(
        result.points,
        path,
        f"{plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}: "
        "step time against memory",
        (best["step_time_s"], best["total_bytes"]),
        best["capacity_bytes"],
    )
