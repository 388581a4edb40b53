"""Sweep speed (issue 40: a sweep of 500 values took 40 s; the target is under 10 s): `perfmodel
sweep` end to end over 500 values of one field, wall and CPU seconds, and the seconds a value.

Run: python benchmarks/sweep_speed.py   (prints figures; asserts nothing: machines are noisy, and
on a shared machine the CPU seconds say more than the wall ones)
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

# (plan, --vary): 500 values each, the kinds of sweep the README shows (batch, link bandwidth)
CASES = [
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
    print(f"{'plan':<22}{'field':<22}{'values':>7}{'wall':>9}{'CPU':>9}{'CPU/value':>11}")
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
        print(f"{name:<22}{field:<22}{n:>7}{wall:>8.1f}s{cpu:>8.1f}s{1e3 * cpu / n:>9.0f}ms")
    print("\nwall: `perfmodel sweep ... --json` end to end, Python start-up included; CPU: its")
    print("user + system seconds (on a machine others share, the figure to compare)")


if __name__ == "__main__":
    main()
