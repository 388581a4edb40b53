"""Re-run every `$ perfmodel ...` command quoted in README.md and replace its output in place,
so the README shows what the tool prints today. Run: python benchmarks/refresh_readme.py"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def main() -> None:
    lines = README.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        m = re.match(r"^\$ (perfmodel .*)$", line)
        if not m:
            continue
        args = shlex.split(m.group(1))[1:]
        run = subprocess.run(
            [sys.executable, "-m", "perfmodel", *args],
            capture_output=True,
            text=True,
            cwd=README.parent,
        )
        out.extend(run.stdout.rstrip("\n").splitlines())
        while i < len(lines) and not lines[i].startswith("$ ") and lines[i] != "```":
            i += 1  # drop the old output
        if i < len(lines) and lines[i].startswith("$ "):
            out.append("")
    README.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
