"""Where the default MoE load imbalance (specs.Model.moe_load_imbalance) comes from.

The Megatron-Core MoE model zoo (best_practice/Qwen3/readme.md, Long Context table) ran each of four
Qwen3-235B-A22B configurations twice: with the router forced to balance tokens over the experts
(benchmark mode) and with real, dropless routing. The ratio of the two step times isolates what
routing imbalance costs; this script prints perfmodel's ratio for a range of imbalance factors next
to the measured one, so the factor is read off a physical effect rather than fitted to step times.

With --fit it fits each router family's figure where its data is (perfmodel/specs/router.py,
ROUTER_LOAD) and prints it with its error on the runs left out of the fit:
- aux_loss: the four zoo ratios above (dropless over forced balance, Qwen3-235B);
- aux_free_bias: DeepSeek-V3 on 1,024 H100 (DGX Cloud v25.05.01, dropless, the alltoall
  dispatcher), the one published step of that routing without token dropping; left out: the
  DeepSeek-V3 report's whole-run figure (2,048 H800, DualPipe, DeepEP);
- balanced and capacity-padded runs need no fit (1.0, or the capacity factor).

Run: python benchmarks/moe_imbalance.py [--fit]
"""

from __future__ import annotations

import sys

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import presets
from perfmodel.review.validate import measured_step_time, validate
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


def fit_one(case: dict, lo: float = 1.0, hi: float = 3.0) -> float:
    """The load at which the case's predicted step equals its measured one (bisection: the step
    rises with the load)."""
    target = measured_step_time(case["plan"], case["measured"])
    for _ in range(30):
        mid = (lo + hi) / 2
        if step(case["plan"], mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def fit() -> None:
    cases = {c["name"]: c for c in presets.validation_cases()}
    fitted = fit_one(cases["dgxc-deepseek-v3-h100-bf16-1024gpu"])
    print(f"aux_free_bias: fitted {fitted:.3f} on dgxc-deepseek-v3-h100-bf16-1024gpu", end="")
    print(f" (specs/router.py holds {ROUTER_LOAD['aux_free_bias']})")
    report = validate(["dsv3-report"])
    for c in report.cases:
        print(f"  left out: {c.name} {c.error_pct:+.1f}% at {ROUTER_LOAD['aux_free_bias']}")


if __name__ == "__main__":
    fit() if "--fit" in sys.argv else main()
