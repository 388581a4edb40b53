"""Where the default MoE load imbalance (specs.Model.moe_load_imbalance) comes from.

The Megatron-Core MoE model zoo (best_practice/Qwen3/readme.md, Long Context table) ran each of four
Qwen3-235B-A22B configurations twice: with the router forced to balance tokens over the experts
(benchmark mode) and with real, dropless routing. The ratio of the two step times isolates what
routing imbalance costs; this script prints perfmodel's ratio for a range of imbalance factors next
to the measured one, so the factor is read off a physical effect rather than fitted to step times.

Run: python benchmarks/moe_imbalance.py
"""

from __future__ import annotations

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import presets

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


if __name__ == "__main__":
    main()
