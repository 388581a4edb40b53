"""The report's hand-written SVG charts (output/html.py): the stacked bar of a breakdown and the
Pareto scatter of step time against memory; no plotting library."""

from __future__ import annotations

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
# points drawn in the Pareto scatter (an even subsample beyond, the front always whole)
MAX_SCATTER = 4000


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


def _band(band: tuple[float, float], top: float, bottom: float, x: float, width: float) -> str:
    """The best configuration's typical range of step times, shaded across the scatter."""
    return (
        f'<rect x="{x}" y="{top:.1f}" width="{width}" height="{bottom - top:.1f}"'
        ' fill="#54a24b" fill-opacity="0.15"><title>the best configuration\'s typical band:'
        f" {fmt_time(band[0])} to {fmt_time(band[1])}</title></rect>"
        f'<text x="{x + width - 4}" y="{top + 14:.1f}" text-anchor="end" fill="#2f6f2a">typical'
        f" band of the best ({fmt_time(band[0])} to {fmt_time(band[1])}): not ranked</text>"
    )


Span = tuple[float, float]


def _scatter(points: dict, best: Span, capacity: float, band: Span | None = None) -> str:
    """Step time against memory of the feasible configurations, the Pareto front, the best, the
    HBM line and the best's typical band (the configurations the model cannot rank against it)."""
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
    if band is not None:
        out.append(_band(band, sy(min(band[1], tmax)), sy(max(band[0], tmin)), pad, w - pad - 20))
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
