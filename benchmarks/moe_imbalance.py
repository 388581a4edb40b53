"""Where the default MoE load imbalance (specs.Model.moe_load_imbalance) comes from.

The Megatron-Core MoE model zoo (best_practice/Qwen3/readme.md, Long Context table) ran each of four
Qwen3-235B-A22B configurations twice: with the router forced to balance tokens over the experts
(benchmark mode) and with real, dropless routing. The ratio of the two step times isolates what
routing imbalance costs; this script prints perfmodel's ratio for a range of imbalance factors next
to the measured one, so the factor is read off a physical effect rather than fitted to step times.

With --fit it fits each router family's figure where its data is (perfmodel/specs/router.py,
ROUTER_LOAD) and prints it with its error on the runs left out of the fit:
- aux_loss: the four zoo ratios above (dropless over forced balance, Qwen3-235B);
- aux_free_bias: the one published step of DeepSeek-V3's auxiliary-loss-free routing as it trained,
  without token dropping: the DeepSeek-V3 report's whole-run figure (2,048 H800, DualPipe, DeepEP).
  With one run there is no other to leave it out for: its out-of-sample error is at the prior, the
  aux_loss figure (what the family took before it had a run). DeepSeek-V3 on 1,024 H100 (DGX
  Cloud v25.05.01) is not one: its recipe drops tokens at capacity 1 with padding (NeMo
  scripts/performance/llm/pretrain_deepseek_v3.py at the benchmark's NeMo commit 7a8f1cc:
  USE_TOKEN_DROP, whose MegatronTokenDropCallback accepts seq_aux_loss), so its load is the
  capacity's;
- balanced and capacity-padded runs need no fit (1.0, or the capacity factor).

Run: python benchmarks/moe_imbalance.py [--fit]
"""

from __future__ import annotations

import math
import sys

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import presets
from perfmodel.review.validate import run_case
from perfmodel.specs.router import ROUTER_LOAD

# (sequence length, TFLOP/s per GPU forced balance, dropless),
# shared/validation/published-modern.yaml
RUNS = [(16384, 295, 237), (32768, 335, 277), (65536, 368, 320), (131072, 389, 357)]
FACTORS = (1.0, 1.2, 1.4, 1.5, 1.6)


def step(plan, imbalance: float) -> float:
    p = plan.model_copy(
        update={"model": plan.model.model_copy(update={"moe_load_imbalance": imbalance})}
    )
    return estimate(p, resolve_config(p)).values["step_time_s"]


def main() -> None:
    cases = {c["name"]: c for c in presets.validation_cases()}
    print(f"{'tokens':>8} {'measured':>9}  " + "  ".join(f"I={f:<4}" for f in FACTORS))
    for s, forced, dropless in RUNS:
        plan = cases[f"zoo-qwen3-235b-long-{s}"]["plan"]
        base = step(plan, 1.0)
        ratios = [step(plan, f) / base for f in FACTORS]
        print(f"{s:>8} {forced / dropless:>9.3f}  " + "  ".join(f"{r:6.3f}" for r in ratios))
    print("\nmeasured: dropless step / forced-balance step (= forced TFLOP/s / dropless TFLOP/s);")
    print(
        "I=x: perfmodel's step with imbalance x over its step with perfect balance, same"
        " configuration."
    )


def _with_load(plan, imbalance: float):
    return plan.model_copy(
        update={"model": plan.model.model_copy(update={"moe_load_imbalance": imbalance})}
    )


FAMILY_RUNS = {
    # the dropless runs of each router family with a step time (configs/validation)
    "aux_free_bias": ("dsv3-report-h800-fp8-2048gpu",),
}


# what a family takes with no run of its own: the aux_loss figure (specs/router.py's llama4 does)
PRIOR = ROUTER_LOAD["aux_loss"]


def errors(cases: list[dict], imbalance: float) -> list[float]:
    """Each case's error (%) with the router's load set to ``imbalance``."""
    return [run_case({**c, "plan": _with_load(c["plan"], imbalance)}).error_pct for c in cases]


def fit_family(cases: list[dict], grid: list[float]) -> float:
    """The load on ``grid`` with the least sum of squared log ratios (predicted over measured:
    errors as ratios, a run predicted 2x fast as far off as one 2x slow) over ``cases``."""
    return min(grid, key=lambda x: sum(math.log1p(e / 100) ** 2 for e in errors(cases, x)))


def fit() -> None:
    """Each family's figure fitted on all its runs, and each run's error when the figure is
    fitted on the others alone (leave-one-out), or, for a family of one run, at the prior."""
    cases = {c["name"]: c for c in presets.validation_cases()}
    grid = [round(1.2 + 0.01 * i, 2) for i in range(81)]
    for family, names in FAMILY_RUNS.items():
        runs = [cases[n] for n in names]
        best = fit_family(runs, grid)
        print(f"{family}: {best:.2f} on {', '.join(names)} (specs/router.py holds", end=" ")
        print(f"{ROUTER_LOAD[family]})")
        for name, e in zip(names, errors(runs, best)):
            print(f"  {name}: {e:+.1f}% in the fit")
        for i, name in enumerate(names):
            rest = runs[:i] + runs[i + 1 :]
            x = fit_family(rest, grid) if rest else PRIOR
            why = f"the rest fit {x:.2f}" if rest else f"the prior, aux_loss's {x:.2f}"
            print(f"  {name}: {errors([runs[i]], x)[0]:+.1f}% left out ({why})")


if __name__ == "__main__":
    fit() if "--fit" in sys.argv else main()
