"""Terminal primitives, the only place rich is imported: tables on a terminal, plain aligned text in
pipes, GitHub Markdown with --format markdown, JSON for scripts.

Imports nothing heavy at module level (rich and numpy load when a table or a numpy value is
printed), so the CLI starts fast. Units are always printed; sizes use decimal units (GB = 1e9
bytes).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def _default(o: Any) -> Any:
    import numpy as np  # only a command that computed with numpy hands numpy values here

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=_default) + "\n")


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


MARKDOWN = {
    "on": False
}  # set by --format markdown: tables as GitHub Markdown, for design documents


def set_markdown(on: bool) -> None:
    MARKDOWN.update(on=on, in_list=False)


def is_terminal() -> bool:
    return sys.stdout.isatty() and not MARKDOWN["on"]


def line(text: str = "") -> None:
    if MARKDOWN["on"]:
        _markdown_line(_strip_markup(text))
    elif is_terminal():
        _console().print(text)
    else:
        sys.stdout.write(_strip_markup(text) + "\n")


def _markdown_line(text: str) -> None:
    """Indented lines become list items (two levels), others paragraphs; a list ends with a blank
    line."""
    indent = len(text) - len(text.lstrip())
    if indent and text.strip():
        sys.stdout.write(
            ("  " if indent > 2 else "") + "- " + text.strip().replace("`", "'") + "\n"
        )
        MARKDOWN["in_list"] = True
        return
    if MARKDOWN.get("in_list"):
        sys.stdout.write("\n")
        MARKDOWN["in_list"] = False
    if text.strip():
        sys.stdout.write(text + "\n\n")


def _strip_markup(text: str) -> str:
    return re.sub(r"\[/?[a-z ]+\]", "", text)


def table(
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    right: Sequence[bool] | None = None,
    caption: str | None = None,
) -> None:
    """A rich table on a terminal wide enough for it; aligned plain text otherwise (pipes too)."""
    rows = [[str(c) for c in r] for r in rows]
    right = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    if MARKDOWN["on"]:
        _markdown_table(title, headers, rows, right, caption)
        return
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    if is_terminal():
        console = _console()
        wide = sum(widths) + 3 * len(widths) + 1 > console.width
        text_cols = [i for i, r in enumerate(right) if not r]
        # too wide: the widest text column wraps inside its cell; numbers (right-aligned) never wrap
        fold = max(text_cols, key=lambda i: widths[i]) if wide and text_cols else None
        if not wide or (
            fold is not None and sum(widths) - widths[fold] + 3 * len(widths) + 16 <= console.width
        ):
            from rich import box
            from rich.table import Table

            for ln in wrap_keeping_units(title, console.width):
                console.print(ln, highlight=False, markup=False)
            t = Table(box=box.SIMPLE_HEAD)
            for i, (h, is_number) in enumerate(zip(headers, right)):
                t.add_column(
                    h, justify="right" if is_number else "left", no_wrap=i != fold, overflow="fold"
                )
            for row in rows:
                t.add_row(*row)
            console.print(t)
            for ln in (caption or "").splitlines():
                for part in wrap_keeping_units(ln, console.width):
                    console.print(part, highlight=False, markup=False, style="dim")
            return

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)
        ).rstrip()

    out = [title, fmt(headers), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]
    if caption:
        out.append(caption)
    sys.stdout.write("\n".join(out) + "\n\n")


_UNIT = re.compile(r"(\d) (?=(?:s|ms|us|GB|MB|TB|KB|B|TFLOP/s|GB/s|Gb/s|FLOP/B|FLOP|GPUs?|%)\b)")


def wrap_keeping_units(text: str, width: int) -> list[str]:
    """Wrap at spaces, never between a number and its unit ("1.38 s" stays on one line)."""
    import textwrap

    glued = _UNIT.sub("\\1\x00", _strip_markup(text))
    return [
        ln.replace("\x00", " ")
        for ln in textwrap.wrap(
            glued, max(20, width), break_long_words=False, break_on_hyphens=False
        )
    ] or [""]


def _markdown_table(title, headers, rows, right, caption) -> None:
    cell = lambda c: str(c).replace("|", "\\|") or " "  # noqa: E731
    out = [
        f"**{_strip_markup(title)}**",
        "",
        "| " + " | ".join(cell(h) or " " for h in headers) + " |",
        "|" + "|".join("---:" if r else "---" for r in right) + "|",
    ]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    if caption:
        out += ["", f"*{_strip_markup(caption)}*"]
    sys.stdout.write("\n".join(out) + "\n\n")


def kv(title: str, items: Sequence[tuple[str, Any]]) -> None:
    table(title, ["quantity", "value"], [(k, v) for k, v in items], right=[False, False])


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def tflops(x: float) -> str:
    return f"{x / 1e12:.1f} TFLOP/s"


class LazyProgress:
    """A rich progress bar that appears only on a terminal and only once a search has run for a
    second."""

    def __init__(self, label: str = "evaluating configurations"):
        import time

        self._t0, self._time, self._label = time.perf_counter(), time.perf_counter, label
        self._bar: Any = None  # a rich Progress once shown
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if not is_terminal() or self._time() - self._t0 < 1.0:
                return
            from rich.progress import Progress

            self._bar = Progress(transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self._label, total=total)
        self._bar.update(self._task, completed=done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
