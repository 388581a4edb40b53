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


def width() -> int:
    """Columns to fit: the terminal's; in a pipe, COLUMNS when it is set, else 80."""
    if is_terminal():
        return int(_console().width)
    import os

    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 80


def line(text: str = "") -> None:
    """One line of text; a longer one wraps at the width with a hanging indent, never between a
    number and its unit."""
    if MARKDOWN["on"]:
        _markdown_line(_strip_markup(text))
        return
    w = width()
    plain = _strip_markup(text)
    if is_terminal() and len(plain) <= w:
        _console().print(text)
        return
    lead = len(plain) - len(plain.lstrip())
    parts = wrap_keeping_units(plain.strip(), w - lead, hang=2) if plain.strip() else [""]
    out = "\n".join(" " * lead + p for p in parts)
    if is_terminal():
        _console().print(out, highlight=False, markup=False)
    else:
        sys.stdout.write(out + "\n")


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
    """An aligned table that fits the width (the terminal's; in a pipe COLUMNS, or 80): text
    columns wrap inside their cells, numbers never do, and a number never parts from its unit. On
    a terminal the same text, with the title bold and the caption dim."""
    cells = [[str(c) for c in r] for r in rows]
    right = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    if MARKDOWN["on"]:
        _markdown_table(title, headers, cells, right, caption)
        return
    w = width()
    lines = plain_table(title, headers, cells, right, caption, w)
    if is_terminal():
        # the same aligned text a pipe gets, so the widths are exact
        console = _console()
        n_title = len(wrap_keeping_units(title, w))
        n_caption = sum(len(wrap_keeping_units(ln, w)) for ln in (caption or "").splitlines())
        body_end = len(lines) - n_caption
        for k, ln in enumerate(lines):
            style = "bold" if k < n_title else "dim" if k >= body_end else None
            console.print(ln, highlight=False, markup=False, style=style)
        console.print()
        return
    sys.stdout.write("\n".join(lines) + "\n\n")


def fit_widths(
    headers: Sequence[str], rows: list[list[str]], right: Sequence[bool], limit: int
) -> list[int]:
    """Column widths that fit ``limit`` columns with two spaces between: numbers keep their
    natural width; the widest text column gives way first, down to 8 columns (or its longest
    word), until the table fits."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    widths = list(natural)
    # a column gives way down to its longest word, or 16 columns where a word is longer (a path or
    # a list without spaces then breaks inside the word)
    floor = [
        max(8, min(16, max(len(x) for c in [h, *(r[i] for r in rows)] for x in _words(c))))
        for i, h in enumerate(headers)
    ]
    text = [i for i, r in enumerate(right) if not r]
    # then, where the text alone cannot give way enough, a number column whose cells hold several
    # words ("9.08 GB (-739.6 MB)", "1.00x / 100%") wraps between them, down to its longest word
    longest = [
        max(len(x) for c in [h, *(r[i] for r in rows)] for x in _words(c))
        for i, h in enumerate(headers)
    ]
    for columns, least in ((text, floor), ([i for i, r in enumerate(right) if r], longest)):
        while sum(widths) + 2 * (len(widths) - 1) > limit:
            shrinkable = [i for i in columns if widths[i] > least[i]]
            if not shrinkable:
                break
            i = max(shrinkable, key=lambda j: widths[j])
            widths[i] -= 1
    return widths


def _words(cell: str) -> list[str]:
    return _UNIT.sub("\\1\x00", cell).split() or [""]


def plain_table(
    title: str,
    headers: Sequence[str],
    rows: list[list[str]],
    right: Sequence[bool],
    caption: str | None,
    limit: int,
) -> list[str]:
    """The table as aligned plain text within ``limit`` columns (fit_widths): a text cell wider
    than its column wraps onto more lines of the row."""
    import itertools

    widths = fit_widths(headers, rows, right, limit)

    def fmt(cells: Sequence[str]) -> list[str]:
        parts = [
            ([c] if r and len(c) <= w else wrap_keeping_units(c, w, floor=1, break_words=not r))
            for c, w, r in zip(cells, widths, right)
        ]
        out = []
        for lines in itertools.zip_longest(*parts, fillvalue=""):
            out.append(
                "  ".join(
                    c.rjust(w) if r else c.ljust(w) for c, w, r in zip(lines, widths, right)
                ).rstrip()
            )
        return out

    out = [*wrap_keeping_units(title, limit), *fmt(headers), "  ".join("-" * w for w in widths)]
    for r in rows:
        out += fmt(r)
    for ln in (caption or "").splitlines():
        out += wrap_keeping_units(ln, limit)
    return out


_UNIT = re.compile(
    r"(\d) (?=(?:s|ms|us|min|h|days?|GB|MB|TB|KB|B|GiB|TFLOP/s|PFLOP/s|GB/s|Gb/s|TB/s|FLOP/B|FLOP"
    r"|GPUs?|W|kW|MWh|%)(?![\w/]))"
)


def wrap_keeping_units(
    text: str, width: int, hang: int = 0, floor: int = 20, break_words: bool = False
) -> list[str]:
    """Wrap at spaces, never between a number and its unit ("1.38 s" stays on one line); lines
    after the first are indented by ``hang``."""
    import textwrap

    glued = _UNIT.sub("\\1\x00", _strip_markup(text))
    return [
        ln.replace("\x00", " ")
        for ln in textwrap.wrap(
            glued,
            max(floor, width),
            subsequent_indent=" " * hang,
            break_long_words=break_words,
            break_on_hyphens=False,
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
    return f"{x / 1e12:,.1f} TFLOP/s"


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
