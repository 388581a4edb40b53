"""Commands run on a pseudo-terminal, where rich draws tables and colours (issue 19, item 7:
schedule ended in an internal error on every terminal while piped output worked, and no test ran
that path).
"""

import os
import pty
import re
import select
import subprocess
import sys

import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def on_terminal(args: list[str], columns: int = 80) -> tuple[int, str]:
    """Run ``perfmodel ARGS`` with stdout and stderr on a pty of ``columns``; (exit code, text)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "perfmodel", *args], stdin=follower,
                            stdout=follower, stderr=follower, env=env, close_fds=True)  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(leader, 65536)
        except OSError:  # the follower closed: the command ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=60), ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


@pytest.mark.parametrize(
    "args",
    [
        ["schedule", "-m", "8", "-p", "4"],
        ["schedule", "-m", "8", "-p", "4", "-v", "2"],
        ["schedule", "gpt3-175b-3d.yaml"],
        ["bubble", "-m", "48", "-p", "8"],
        ["estimate", "gpt3-175b-3d.yaml"],
        ["check", "examples/clean-plan.yaml"],
    ],
)
def test_commands_run_on_a_terminal(args):
    code, text = on_terminal(args)
    assert "internal error" not in text and "Traceback" not in text, text
    assert code == 0, text


def test_schedule_draws_its_chart_and_axis_on_a_terminal():
    code, text = on_terminal(["schedule", "-m", "8", "-p", "4"])
    assert code == 0
    rows = [ln for ln in text.splitlines() if ln.startswith("stage ")]
    assert len(rows) == 4 and all("|" in ln for ln in rows)
    assert any(ln.strip().startswith("+---") for ln in text.splitlines()), "the time axis is drawn"
