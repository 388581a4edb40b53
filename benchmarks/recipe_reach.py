"""Where a published recipe is tight (issue 37): does the search, with the knobs the model's memory
forced before left free (recompute and the ZeRO stage), reach the recipe's measured step? For every
validation case whose stated layout is tight or does not fit, `plan`'s answer with recompute and
ZeRO free, once with the memory switches held at the plan's values (before them) and once searched
(engine/memory_switches.py), the recipe's activation offloading left unstated: its step, its error
against the measured step, its verdict and what it turned on.

Run: python benchmarks/recipe_reach.py   (prints figures; about a minute)
"""

from __future__ import annotations

from perfmodel.engine.answer import plan_search
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.engine.memory_switches import SWITCHES
from perfmodel.engine.memory_verdict import verdict
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.preset_files import error_bands
from perfmodel.review.validate import measured_step_time
from perfmodel.specs import Plan


def held(plan: Plan) -> Plan:
    """The plan with every switch's fields stated at their current values: nothing to search."""
    fields = {f for s in SWITCHES.values() for f in s.fields}
    return plan.with_training(**{f: getattr(plan.training, f) for f in fields})


def unstated(plan: Plan) -> Plan:
    """The plan with its activation offloading left unstated (a searched switch since issue 37):
    does the search find the recipe's offloading without being told?"""
    given = plan.training.given()
    if not given.get("cpu_offloading_num_layers"):
        return plan
    del given["cpu_offloading_num_layers"]
    return plan.model_copy(update={"training": type(plan.training).model_validate(given)})


def answer(plan: Plan) -> tuple[float, str, str] | None:
    free = plan.with_parallel(recompute=None, zero_stage=None)
    try:
        result = plan_search(free, error_bands(), top=1)
    except PerfModelError:
        return None
    if not result.results:
        return None
    e = result.results[0]
    c = e.config
    what = f"{c.recompute} z{c.zero_stage}" + (f" {c.memory_switch}" if c.memory_switch else "")
    return e.values["step_time_s"], verdict(e.values["total_bytes"], e.values["usable_bytes"]), what


def main() -> None:
    print(f"{'case':44s} {'measured':>8s}  before: step err verdict  |  after: step err verdict")
    errs: dict[str, list[float]] = {"before": [], "after": []}
    for case in presets.validation_cases():
        if case.get("per_layer_ms") or not case.get("measured"):
            continue
        plan = case["plan"]
        measured = measured_step_time(plan, case["measured"])
        v = estimate(plan, resolve_config(plan)).values
        if verdict(v["total_bytes"], v["usable_bytes"]) == "fits":
            continue
        row = [f"{case['name']:44s} {measured:8.3g}"]
        for label, p in (("before", held(plan)), ("after", unstated(plan))):
            got = answer(p)
            if got is None:
                row.append(f"{label}: no answer")
                continue
            step, word, what = got
            err = step / measured - 1
            errs[label].append(abs(err))
            row.append(f"{label}: {step:6.3g} s {100 * err:+5.1f}% {word} ({what})")
        print("  ".join(row[:1]) + "\n    " + "\n    ".join(row[1:]))
    for label, e in errs.items():
        if e:
            print(f"{label}: mean |error| {100 * sum(e) / len(e):.1f}% over {len(e)} tight runs")


if __name__ == "__main__":
    main()
