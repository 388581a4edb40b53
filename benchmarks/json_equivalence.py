"""Prove a refactor moves no number: the JSON of validate, plan, estimate, check and memory on every
bundled plan, written to a file, then compared with an earlier file to a relative 1e-9.

    python benchmarks/json_equivalence.py dump before.json     # on the old tree
    python benchmarks/json_equivalence.py dump after.json      # on the new tree
    python benchmarks/json_equivalence.py diff before.json after.json

Runs the commands in-process through click's CliRunner (the same path a user's shell takes).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("plan", "estimate", "check", "memory")


def plans() -> list[str]:
    """Every bundled plan and every example plan."""
    out = sorted(str(p) for p in (ROOT / "configs" / "plans").glob("*.yaml"))
    return out + sorted(str(p) for p in (ROOT / "examples").glob("*.yaml"))


def dump(target: str) -> None:
    from click.testing import CliRunner

    from perfmodel.cli import main

    runner = CliRunner()
    results: dict[str, object] = {}
    for plan in plans():
        for cmd in COMMANDS:
            r = runner.invoke(main, [cmd, plan, "--json"])
            key = f"{cmd} {Path(plan).relative_to(ROOT)}"
            try:
                results[key] = {"exit": r.exit_code, "json": json.loads(r.stdout)}
            except ValueError:
                results[key] = {"exit": r.exit_code, "text": r.output}
    r = runner.invoke(main, ["validate", "--json"])
    results["validate"] = {"exit": r.exit_code, "json": json.loads(r.stdout)}
    Path(target).write_text(json.dumps(results, indent=1, sort_keys=True))
    print(f"wrote {target}: {len(results)} outputs")


def _diff(a: object, b: object, path: str, out: list[str], rel: float = 1e-9) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out, rel)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} -> {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out, rel)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if path.endswith("search_time_s"):  # the search's own wall-clock time, not a prediction
            return
        if not math.isclose(a, b, rel_tol=rel, abs_tol=1e-15):
            out.append(f"{path}: {a!r} -> {b!r}")
    elif a != b:
        out.append(f"{path}: {a!r} -> {b!r}")


def diff(before: str, after: str) -> int:
    a = json.loads(Path(before).read_text())
    b = json.loads(Path(after).read_text())
    out: list[str] = []
    _diff(a, b, "", out)
    for line in out[:200]:
        print(line)
    print(f"{len(out)} differences over {len(a)} outputs (relative tolerance 1e-9)")
    return 1 if out else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "diff":
        sys.exit(diff(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
