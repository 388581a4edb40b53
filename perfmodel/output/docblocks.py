"""The command outputs quoted in README.md and docs/*.md: each ```` ``` ```` block that starts with
`$ perfmodel ...` holds what that command prints. `refresh` reruns every such command and puts
its output in place (benchmarks/refresh_docs.py); `stale` lists the blocks whose output no longer
matches (tests/test_docs.py), so a quoted figure cannot drift from the tool.

A command may end in `| head -N` to quote its first N lines. Timings of the search ("in 0.19 s
(170,163 per second)") vary from run to run and are compared as a placeholder."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

_PROMPT = re.compile(r"^\$ (perfmodel .*?)(?: \| head -(\d+))?$")
_TIMING = re.compile(r"in [0-9.]+ s \([0-9,]+ per second\)")


def run(command: str, cwd: Path) -> list[str]:
    """The lines a `perfmodel ...` command prints to a pipe (plain text, 80 columns), its first N
    with a `| head -N` suffix."""
    m = _PROMPT.match(f"$ {command}")
    if not m:
        raise ValueError(f"not a perfmodel command: {command!r}")
    args = shlex.split(m.group(1))[1:]
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(cwd)}
    done = subprocess.run(
        [sys.executable, "-m", "perfmodel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    lines = done.stdout.rstrip("\n").splitlines()
    return lines[: int(m.group(2))] if m.group(2) else lines


def blocks(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line index of the prompt, command, quoted output lines) of every quoted command."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _PROMPT.match(lines[i])
        if not m:
            i += 1
            continue
        start, command = i, lines[i][2:]
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("$ ") and lines[i] != "```":
            body.append(lines[i])
            i += 1
        if body and body[-1] == "":  # the blank line between two commands
            body.pop()
        yield start, command, body


def refresh(text: str, cwd: Path) -> str:
    """The text with every quoted command's output rerun."""
    lines = text.splitlines()
    out: list[str] = []
    last = 0
    for start, command, body in blocks(text):
        out.extend(lines[last : start + 1])
        out.extend(run(command, cwd))
        last = start + 1 + len(body)
        if last < len(lines) and lines[last] == "":
            out.append("")
            last += 1
    out.extend(lines[last:])
    return "\n".join(out) + "\n"


def normal(lines: list[str]) -> list[str]:
    return [_TIMING.sub("in ~ s", x) for x in lines]


def stale(text: str, cwd: Path) -> list[str]:
    """The commands whose quoted output is not what they print today (two at a time: each is a
    process of its own)."""
    from concurrent.futures import ThreadPoolExecutor

    quoted = [(command, body) for _, command, body in blocks(text)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        printed = list(pool.map(lambda q: run(q[0], cwd), quoted))
    return [c for (c, body), now in zip(quoted, printed) if normal(body) != normal(now)]
