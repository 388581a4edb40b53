"""Start-up and single-estimate speed (issue 18): each figure printed, nothing asserted (machines
are noisy).

    python benchmarks/startup.py

- `perfmodel --help` and `perfmodel bubble -m 48 -p 8`: a fresh interpreter each time, with
  PYTHONDONTWRITEBYTECODE=1 as our machines set it (bytecode already cached by an earlier run);
  the best of several runs. Target: 0.25 s.
- `plan gpt3-175b.yaml --gpus 512` end to end (target 0.6 s) and the DeepSeek-V3 search on 1,024
  H100 (target 2 s).
- one in-process `estimate()` of GPT-3 175B at TP 8 x PP 8 x DP 8 with equal stages (target 1 ms),
  and with the pipeline simulated.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
CLI = [sys.executable, "-m", "perfmodel"]


def wall(args: list[str], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(args, check=False, capture_output=True, env=ENV)
        best = min(best, time.perf_counter() - t0)
    return best


def per_call(fn, repeat: int = 200) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def main() -> None:
    subprocess.run([*CLI, "--help"], capture_output=True)  # fill the bytecode cache once
    rows = [
        ("python -c pass", wall([sys.executable, "-c", "pass"]), None),
        ("perfmodel --help", wall([*CLI, "--help"]), 0.25),
        ("perfmodel bubble -m 48 -p 8", wall([*CLI, "bubble", "-m", "48", "-p", "8"]), 0.25),
        (
            "plan gpt3-175b.yaml --gpus 512",
            wall([*CLI, "plan", "gpt3-175b.yaml", "--gpus", "512"], 3),
            0.6,
        ),
        (
            "plan deepseek-v3-h100.yaml (1,024 H100)",
            wall([*CLI, "plan", "deepseek-v3-h100.yaml"], 2),
            2.0,
        ),
    ]
    from perfmodel.engine.estimate import estimate, resolve_config
    from perfmodel.inputs import load_plan

    plan = load_plan("gpt3-175b-3d.yaml")
    cfg = resolve_config(plan, tp=8, pp=8)
    from perfmodel.engine.schedule import _run_cached

    def cold() -> None:
        _run_cached.cache_clear()  # a pipeline not simulated before
        estimate(plan, cfg)

    closed = per_call(lambda: estimate(plan, cfg, simulate=False))
    rows.append(("estimate() 175B TP8 PP8 DP8, closed form", closed, 1e-3))
    rows.append(("estimate() simulated, a new pipeline", per_call(cold, 50), None))
    rows.append(
        ("estimate() simulated, simulated before", per_call(lambda: estimate(plan, cfg)), None)
    )
    print(f"{'figure':<44}{'measured':>12}{'target':>10}")
    for name, seconds, target in rows:
        t = f"{seconds * 1e3:.2f} ms" if seconds < 0.1 else f"{seconds:.3f} s"
        goal = (
            "" if target is None else (f"{target * 1e3:g} ms" if target < 0.1 else f"{target:g} s")
        )
        print(f"{name:<44}{t:>12}{goal:>10}")


if __name__ == "__main__":
    main()
