"""Search speed: configurations evaluated, wall time, configurations per second, and the
speed-up of the vectorized path over evaluating the same configurations one by one.

Run: python benchmarks/search_speed.py   (prints figures; asserts nothing: machines are noisy)
"""

from __future__ import annotations

import subprocess
import sys
import time

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


if __name__ == "__main__":
    main()
