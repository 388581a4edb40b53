"""Search speed: configurations evaluated, wall time, configurations per second, and the
speed-up of the vectorized path over evaluating the same configurations one by one.

Run: python benchmarks/search_speed.py   (prints figures; asserts nothing: machines are noisy)

Side by side (issue 41): the CPU time (user + sys, best of --repeat) of `perfmodel plan PLAN
--json` for every bundled plan, in this tree and in each earlier checkout given (its own
.venv/bin/python where it has one), run in turn so that both see the same load:

    git worktree add ../prev 27594da   (and a venv there: pip install -e .)
    python benchmarks/search_speed.py --against ../prev [--against ../other] [--repeat 5] [PLAN]

CPU time, not wall: on a shared machine the wall clock counts the others' work. The budgets are
issue 41's, for the wall on a quiet 2-core machine, where the two agree (the search runs on one
core): 2 s a bundled plan, 3 s the GB200 NVL72 racks and DeepSeek-V3 on 1,024 H100.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from perfmodel.engine.estimate import estimate
from perfmodel.engine.search import evaluate_chunked, search
from perfmodel.engine.space import enumerate_space
from perfmodel.inputs import load_plan

# issue 3's cases, and issue 12's: Llama 3.1 405B on 16,384 H100 (cp, uneven pp, vp free) and
# DeepSeek-V3 on 1,024 H100 (ep and etp free), each to run end to end in under 3 s on 2 cores
CASES = [
    ("gpt3-175b.yaml", 512),
    ("gpt-1t.yaml", 3072),
    ("llama3.1-405b-h100.yaml", 16384),
    ("deepseek-v3-h100.yaml", 1024),
    # issue 30: the MoE switches searched too (dispatcher, all-to-all overlap); target < 3 s
    ("deepseek-v3-gb200.yaml", 2304),
]
SCALAR_SAMPLE = 300


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    print(
        f"{'case':<32}{'configs':>10}{'enumerate':>11}{'evaluate':>10}{'configs/s':>12}"
        f"{'search':>9}{'scalar/cfg':>12}{'speed-up':>10}{'CLI wall':>10}"
    )
    for name, gpus in CASES:
        plan = load_plan(name)
        plan = plan.with_system(num_gpus=gpus)
        t_enum = best_of(lambda: enumerate_space(plan))
        space = enumerate_space(plan)
        n = len(space.knobs)
        t_eval = best_of(lambda: evaluate_chunked(plan, space.knobs))
        t_search = best_of(lambda: search(plan, top=5), repeat=2)
        rng = np.random.default_rng(1)
        idx = rng.choice(n, size=min(SCALAR_SAMPLE, n), replace=False)
        gbs = plan.training.global_batch_size
        t0 = time.perf_counter()
        for i in idx:
            estimate(plan, space.knobs.config(int(i), gbs), simulate=False)
        per_cfg = (time.perf_counter() - t0) / len(idx)
        speedup = per_cfg * n / t_eval
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "perfmodel", "plan", name, "--gpus", str(gpus), "--json"],
            check=True,
            capture_output=True,
        )
        cli = time.perf_counter() - t0
        print(
            f"{name + ' @' + str(gpus):<32}{n:>10,}{t_enum:>10.3f}s{t_eval:>9.3f}s"
            f"{n / t_eval:>12,.0f}"
            f"{t_search:>8.2f}s{per_cfg * 1e3:>10.2f}ms{speedup:>9.0f}x{cli:>9.2f}s"
        )
    print(
        "\nscalar/cfg: one configuration through estimate(simulate=False): the same formulas on"
        " one-element"
    )
    print("arrays. search: enumerate + evaluate + re-rank the leaders with the schedule simulator.")
    print(
        "speed-up: scalar/cfg x configs / vectorized evaluate time. CLI wall: `perfmodel plan ..."
        " --json` end to end, Python start-up included."
    )


ROOT = Path(__file__).resolve().parent.parent
# issue 41's budgets (s): the largest MoE and rack plans 3 s, every other bundled plan 2 s
BUDGET = {"deepseek-v3-gb200.yaml": 3.0, "llama3.1-405b-gb200.yaml": 3.0}
BUDGET["deepseek-v3-h100.yaml"] = 3.0
# bytecode cached (a first run writes it) and then read, as an installed package's is
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _python(tree: Path) -> str:
    own = tree / ".venv" / "bin" / "python"
    return str(own) if own.exists() else sys.executable


def cpu_seconds(tree: Path, args: list[str]) -> float:
    """User + sys seconds of one `python -m perfmodel ARGS` run in ``tree`` (its package, not this
    one's: the working directory comes first on the module path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [_python(tree), "-m", "perfmodel", *args], cwd=tree, env=ENV, capture_output=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def side_by_side(trees: list[Path], repeat: int, only: list[str]) -> None:
    """Per bundled plan (or those named), best-of-``repeat`` CPU seconds of `plan PLAN --json` in
    each tree."""
    plans = only or sorted(p.name for p in (ROOT / "configs" / "plans").glob("*.yaml"))
    cases = ([] if only else [["--help"]]) + [["plan", name, "--json"] for name in plans]
    names = [t.name if t != ROOT else "this" for t in trees]
    print(f"CPU s (user + sys), best of {repeat}")
    print(f"{'command':<30}" + "".join(f"{n[:11]:>11}" for n in names) + f"{'budget':>8}")
    for args in cases:
        for tree in trees:  # bytecode written, bundled files read once
            cpu_seconds(tree, args)
        best = [float("inf")] * len(trees)
        for _ in range(repeat):
            for i, tree in enumerate(trees):  # in turn: the same load for each
                best[i] = min(best[i], cpu_seconds(tree, args))
        budget = 0.25 if args == ["--help"] else BUDGET.get(args[1], 2.0)
        label = " ".join(args[:2]).replace(".yaml", "")
        print(f"{label:<30}" + "".join(f"{b:>11.3f}" for b in best) + f"{budget:>8.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", action="append", type=Path, default=[], metavar="TREE")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("plans", nargs="*", help="bundled plans to time (default: all, and --help)")
    opts = ap.parse_args()
    if opts.against:
        side_by_side([ROOT, *(t.resolve() for t in opts.against)], opts.repeat, opts.plans)
    else:
        main()
