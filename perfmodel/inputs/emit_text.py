"""Emitted text within 80 columns: launch arguments a line each, and comment lines, wrapped as
the shell and `import megatron` read them back."""

from __future__ import annotations

import textwrap


def wrap_args(args: list[str]) -> list[str]:
    """The arguments a line each, one whose values run past 80 columns (with the line's closing
    backslash) continued on indented lines, as the shell joins them."""
    out: list[str] = []
    for a in args:
        out += textwrap.wrap(
            a, 78, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        ) or [a]
    return out


def wrap_comments(lines: list[str]) -> list[str]:
    """Comment lines within 80 columns, each continued under its first word (a continuation
    starts with '#' too, so the shell and `import megatron` skip it)."""
    return [
        ln
        for c in lines
        for ln in textwrap.wrap(
            c, 80, subsequent_indent="#   ", break_long_words=False, break_on_hyphens=False
        )
    ]
