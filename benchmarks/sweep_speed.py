"""Sweep speed (issue 40: a sweep of 500 values took 33-36 s; the target is under 10 s): `perfmodel
sweep` end to end over 500 values of one field, wall and CPU seconds, and the seconds a value. The
first case is the issue's own (tests/data/repro/sweep_500_values: Llama 3 8B on 16 H100, batches
16 to 8,000).

Run: python benchmarks/sweep_speed.py   (prints figures; asserts nothing: machines are noisy, and
on a shared machine the CPU seconds say more than the wall ones)
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

REPRO = Path(__file__).resolve().parent.parent / "tests" / "data" / "repro" / "sweep_500_values"

# (plan, --vary): 500 values each: the issue's, and the kinds of sweep the README shows (batch,
# link bandwidth) on the bundled one-node plan
CASES = [
    (str(REPRO / "a.yaml"), "gbs=" + (REPRO / "values.txt").read_text().strip()),
    ("llama3-8b-h100.yaml", "gbs=" + ",".join(str(8 * i) for i in range(1, 501))),
    (
        "llama3-8b-h100.yaml",
        "inter_node_bandwidth=" + ",".join(f"{10 + i / 10:g}GB/s" for i in range(500)),
    ),
]


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    print(f"{'plan':<24}{'field':<22}{'values':>7}{'wall':>9}{'CPU':>9}{'CPU/value':>11}")
    for name, vary in CASES:
        field, values = vary.split("=", 1)
        n = len(values.split(","))
        cpu0, t0 = children_cpu(), time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "perfmodel", "sweep", name, "--vary", vary, "--json"],
            check=True,
            capture_output=True,
        )
        wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
        label = "repro sweep_500_values" if name.startswith(str(REPRO)) else name
        print(f"{label:<24}{field:<22}{n:>7}{wall:>8.1f}s{cpu:>8.1f}s{1e3 * cpu / n:>9.0f}ms")
    print("\nwall: `perfmodel sweep ... --json` end to end, Python start-up included; CPU: its")
    print("user + system seconds (on a machine others share, the figure to compare)")


if __name__ == "__main__":
    main()
