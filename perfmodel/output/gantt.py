"""Gantt charts of a simulated pipeline step: plain text scaled to a terminal, and SVG (no
dependency).

Forward blocks show the micro-batch number (mod 10), backward blocks a letter (a = 0, b = 1, ...),
idle time '.'; with interleaving, each chunk pass is one block.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from perfmodel.engine.schedule import Simulation

LEGEND = "digits: forward of micro-batch n (mod 10); letters: backward (a=0, b=1, ...); '.': idle"
COARSE_LEGEND = (
    "F: forward, B: backward, '.': idle (too many blocks to number at this width: --width, or "
    "--svg for every block)"
)


def _glyph(kind: str, mb: int, coarse: bool = False) -> str:
    if coarse:
        return kind
    if kind == "W":  # the zero-bubble schedules' weight gradient
        return "ABCDEFGHIJ"[mb % 10]
    return str(mb % 10) if kind == "F" else "abcdefghij"[mb % 10]


def _columns(sim: Simulation, width: int) -> int:
    return max(10, width - len(f"stage {sim.p - 1} |") - 1)


def is_coarse(sim: Simulation, width: int = 80) -> bool:
    """Whether a stage's blocks outnumber half the columns: then each column shows only F, B or
    idle."""
    return 2 * sim.m * sim.v > _columns(sim, width) // 2


def legend(sim: Simulation, width: int = 80) -> str:
    split = any(b.kind == "W" for b in sim.blocks)
    if is_coarse(sim, width):
        return (
            COARSE_LEGEND.replace("B: backward", "B: input grad, W: weight grad")
            if split
            else COARSE_LEGEND
        )
    return (
        LEGEND.replace("letters: backward", "a-j: input grad, A-J: weight grad")
        if split
        else LEGEND
    )


def text_rows(sim: Simulation, width: int = 80) -> list[str]:
    """One line per stage, time scaled so that the whole step fits in ``width`` columns."""
    label = len(f"stage {sim.p - 1} |")
    cols = _columns(sim, width)
    coarse = is_coarse(sim, width)
    scale = sim.step_time / cols if sim.step_time > 0 else 1.0
    rows = []
    for s in range(sim.p):
        cover = [0.0] * cols
        cells = ["."] * cols
        for b in (x for x in sim.blocks if x.stage == s):
            first, last = int(b.start / scale), min(
                cols - 1, int(max(b.start, b.end - 1e-12) / scale)
            )
            for c in range(first, last + 1):
                overlap = min(b.end, (c + 1) * scale) - max(b.start, c * scale)
                if overlap > cover[c]:
                    cover[c], cells[c] = overlap, _glyph(b.kind, b.micro_batch, coarse)
        rows.append(f"stage {s:<{label - 8}}|" + "".join(cells))
    return rows


def time_axis(sim: Simulation, width: int = 80) -> list[str]:
    """Two lines to print under text_rows: ticks at 0, 1/4, 1/2, 3/4 and the end of the step, in the
    unit of the stage times."""
    step, cols, pad = sim.step_time, _columns(sim, width), len(f"stage {sim.p - 1} |") - 1
    marks, labels = [" "] * cols, [" "] * (cols + 12)
    for k in range(5):
        c = min(cols - 1, round(k * (cols - 1) / 4))
        marks[c] = "|" if k else "-"  # the "+" below the stage labels' bar marks 0
        text = f"{step * k / 4:.3g}"
        start = max(0, min(c - len(text) // 2, cols - len(text))) if k else 0
        labels[start : start + len(text)] = text
    return [
        " " * pad + "+" + "".join(marks).replace(" ", "-"),
        " " * (pad + 1) + "".join(labels).rstrip(),
    ]


FORWARD = ("#4c9a2a", "#7cc35a", "#2f6b16", "#a4d88a")  # one shade per interleaved chunk
BACKWARD = ("#2a5d9a", "#5a8fd0", "#183d6b", "#8fb6e6")
WEIGHT = ("#d08a2a", "#e8b46a", "#9a5d16", "#f2cf9a")  # the zero-bubble schedules' W blocks


BUSY = "#4c78a8"  # an aggregated stage's busy time


def _busy_spans(sim: Simulation, stage: int, join: float) -> list[tuple[float, float]]:
    """A stage's blocks merged into busy spans, gaps shorter than ``join`` closed."""
    spans: list[list[float]] = []
    for b in sorted((x for x in sim.blocks if x.stage == stage), key=lambda x: x.start):
        if spans and b.start - spans[-1][1] <= join:
            spans[-1][1] = max(spans[-1][1], b.end)
        else:
            spans.append([b.start, b.end])
    return [(a, b) for a, b in spans]


def _axis(
    sim: Simulation, left: int, scale: float, axis_y: int, height: int, unit: str, aggregate: bool
) -> list[str]:
    """The time axis and the legend under the rows."""
    out = []
    for k in range(6):  # the time axis, in the unit of the stage times given; the last label
        t = sim.step_time * k / 5  # ends at its tick, so it is never clipped
        anchor = "end" if k == 5 else "middle" if k else "start"
        out.append(
            f'<line x1="{left + t * scale:.1f}" y1="{axis_y}" x2="{left + t * scale:.1f}"'
            f' y2="{axis_y + 4}" stroke="#333"/><text x="{left + t * scale:.1f}" y="{axis_y + 15}"'
            f' text-anchor="{anchor}">{t:.3g}</text>'
        )
    if aggregate:
        legend = (
            f"time ({unit}); {len(sim.blocks):,} blocks are too thin to draw one by one at this"
            " width: dark = busy, grey = idle (perfmodel schedule draws each)"
        )
    else:
        chunks = (
            f" (shade: chunk 0-{sim.v - 1}; labels F<micro-batch>.<chunk>)" if sim.v > 1 else ""
        )
        weights = ", orange: weight grad" if any(b.kind == "W" for b in sim.blocks) else ""
        legend = f"time ({unit}); green: forward, blue: backward{weights}, grey: idle{chunks}"
    out.append(f'<text x="{left}" y="{height - 8}">{escape(legend)}</text>')
    return out


def svg(sim: Simulation, title: str = "", unit: str = "s", max_width: int = 8000) -> str:
    """The Gantt chart as a standalone SVG document: one <g class="stage"> per stage."""
    left, row_h, gap = 70, 26, 6
    shortest = min(
        (b.end - b.start for b in sim.blocks if b.end > b.start), default=sim.step_time or 1.0
    )
    # wide enough that the shortest block (about 7 px a character) carries its label; 900 to
    # max_width px
    width = int(
        min(max_width, max(900, left + 10 + 30 * (sim.step_time / shortest if shortest else 1)))
    )
    scale = (width - left - 10) / sim.step_time if sim.step_time > 0 else 1.0
    height = 40 + sim.p * (row_h + gap) + 48
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">'
        ),
        f'<title>{escape(title or f"{sim.schedule} p={sim.p} m={sim.m} v={sim.v}")}</title>',
        (
            f'<text x="{left}" y="20">{escape(title or "")} {escape(sim.schedule)}: p={sim.p},'
            f" m={sim.m}, v={sim.v}, idle {100 * sim.bubble_over_step:.1f}% (mean over"
            " stages)</text>"
        ),
    ]
    # blocks thinner than 3 px on average blur into grey: draw each stage's busy spans instead
    blocks_per_row = len(sim.blocks) / max(sim.p, 1)
    aggregate = blocks_per_row and (width - left - 10) / blocks_per_row < 3
    for s in range(sim.p):
        y = 36 + s * (row_h + gap)
        out.append(f'<g class="stage" id="stage-{s}">')
        out.append(f'<text x="4" y="{y + row_h * 0.65:.1f}">stage {s}</text>')
        out.append(
            f'<rect x="{left}" y="{y}" width="{sim.step_time * scale:.2f}" height="{row_h}"'
            ' fill="#eeeeee"/>'
        )
        if aggregate:
            for a, z in _busy_spans(sim, s, 1.0 / scale):
                out.append(
                    f'<rect x="{left + a * scale:.2f}" y="{y}" width="{(z - a) * scale:.2f}"'
                    f' height="{row_h}" fill="{BUSY}"><title>busy {a:.4g}-{z:.4g}</title></rect>'
                )
            out.append("</g>")
            continue
        for b in (x for x in sim.blocks if x.stage == s):
            x0, w = left + b.start * scale, max(0.5, (b.end - b.start) * scale)
            shades = {"F": FORWARD, "W": WEIGHT}.get(b.kind, BACKWARD)
            color = shades[b.chunk % len(FORWARD)]
            out.append(
                f'<rect x="{x0:.2f}" y="{y}" width="{w:.2f}" height="{row_h}" fill="{color}"'
                f' stroke="white" stroke-width="0.5"><title>{b.kind}{b.micro_batch} chunk'
                f" {b.chunk}: {b.start:.4g}-{b.end:.4g}</title></rect>"
            )
            label = f"{b.kind}{b.micro_batch}" + (f".{b.chunk}" if sim.v > 1 else "")
            if w > 7 * len(label):
                out.append(
                    f'<text x="{x0 + w / 2:.2f}" y="{y + row_h * 0.65:.1f}" fill="white" '
                    f'text-anchor="middle">{label}</text>'
                )
        out.append("</g>")
    out += _axis(sim, left, scale, 36 + sim.p * (row_h + gap), height, unit, bool(aggregate))
    out.append("</svg>")
    return "\n".join(out) + "\n"
