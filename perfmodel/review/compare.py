"""Plans side by side (issue 15, item 1): each plan's configuration, per-iteration breakdown, memory
by component, MFU and check findings, every figure beside its difference from the first plan, and a
verdict naming the components that decide it ("B takes 14% less step time (16% more throughput)
than A: bubble -2.1 s, TP comm +0.6 s"), and a warning where the plans are different jobs.

The figures are `estimate`'s (free knobs chosen as `plan` chooses them: engine/answer.py) and the
findings `check`'s on the configuration compared; nothing here computes a cost of its own."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from perfmodel.engine import uncertainty
from perfmodel.engine.answer import LAYOUT_KNOBS, estimate_or_search, fixed
from perfmodel.engine.estimate import Estimate
from perfmodel.engine.step_figures import BREAKDOWN_KEYS
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.review.check import Finding, check
from perfmodel.specs import Plan
from perfmodel.units import fmt_bytes, fmt_time

# Breakdown components, as `estimate` names them.
COMPONENTS = {
    "forward": "forward",
    "backward": "backward",
    "recompute": "recompute",
    "bubble": "bubble",
    "tp_comm": "TP comm",
    "cp_comm": "CP comm",
    "ep_comm": "EP comm",
    "pp_comm": "PP p2p",
    "dp_comm": "DP grad sync",
    "zero_comm": "FSDP/ZeRO-3 traffic",
    "optimizer": "optimizer",
    "overhead": "overheads",
}
MEMORY = {
    "weights_bytes": "weights",
    "gradients_bytes": "gradients",
    "optimizer_bytes": "optimizer states",
    "activations_bytes": "activations",
    "reserve_bytes": "reserve",
    "total_bytes": "total",
}
# the layout, with the micro-batch count beside the micro-batch size
CONFIG = (*LAYOUT_KNOBS[:7], "num_micro_batches", *LAYOUT_KNOBS[7:])
# a component is named in the verdict when it moves by 1% of the first plan's step or more
DECISIVE_SHARE = 0.01


@dataclass
class Side:
    """One plan as compared."""

    label: str
    plan: Plan
    est: Estimate
    chosen: dict  # knobs the plan left free, as the search chose them
    findings: list[Finding] = field(default_factory=list)


@dataclass
class Comparison:
    sides: list[Side]
    verdicts: list[str]  # one per plan after the first, against the first
    # where plans are different jobs (model, tokens per step, tokens to train) than the first
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        base = self.sides[0].est.to_json()
        plans = []
        for s in self.sides:
            j = s.est.to_json()
            plans.append(
                {
                    "label": s.label,
                    "model": s.plan.model.name,
                    "gpu": s.plan.system.gpu.name,
                    "num_gpus": s.plan.system.num_gpus,
                    "searched": s.chosen,
                    "config": j["config"],
                    "step_time_s": j["step_time_s"],
                    "expected_error": j["expected_error"],
                    "mfu": j["mfu"],
                    "tokens_per_s_per_gpu": j["tokens_per_s_per_gpu"],
                    "breakdown_s": j["breakdown_s"],
                    "memory": j["memory"],
                    "findings": [f.to_json() for f in s.findings],
                    "training_run": j["training_run"],
                    "delta_vs_first": {
                        "training_run": _run_delta(j["training_run"], base["training_run"]),
                        "step_time_s": j["step_time_s"] - base["step_time_s"],
                        "breakdown_s": {
                            k: j["breakdown_s"][k] - base["breakdown_s"][k] for k in BREAKDOWN_KEYS
                        },
                        "memory_total_bytes": (
                            j["memory"]["total_bytes"] - base["memory"]["total_bytes"]
                        ),
                        "mfu": j["mfu"] - base["mfu"],
                    },
                }
            )
        return {"plans": plans, "verdicts": self.verdicts, "warnings": self.warnings}


RUN_KEYS = ("days", "gpu_hours", "energy_mwh", "cost_usd")


def _run_delta(run: dict | None, base: dict | None) -> dict | None:
    """A training run's days, GPU-hours, energy and cost less the first plan's (None where
    either lacks the figure, or the plans name no tokens)."""
    if not run or not base:
        return None
    return {
        k: None if run.get(k) is None or base.get(k) is None else run[k] - base[k] for k in RUN_KEYS
    }


def compare(named: list[tuple[str, Plan]]) -> Comparison:
    """Estimate and check each plan; the verdicts compare each with the first."""
    sides = []
    for label, plan in named:
        try:
            est, chosen = estimate_or_search(plan, presets.error_bands())
        except PerfModelError as e:
            raise PerfModelError(f"{label}: {e}") from None
        fixed_plan = fixed(plan, chosen)
        est.band = uncertainty.of_estimate(plan, presets.error_bands(), est)
        sides.append(Side(label, plan, est, chosen, check(fixed_plan)))
    return Comparison(sides, [verdict(sides[0], s) for s in sides[1:]], different_jobs(sides))


def verdict(a: Side, b: Side) -> str:
    """Which plan is faster, by how much, and the components that decide it, largest change first; a
    plan that does not fit in HBM is said first, since its speed is moot."""
    va, vb = a.est.values, b.est.values
    unfit = [s for s in (a, b) if not s.est.values["fits"]]
    prefix = "".join(
        f"{s.label} does not fit ({fmt_bytes(s.est.values['total_bytes'])} of "
        f"{fmt_bytes(s.est.values['capacity_bytes'])}); "
        for s in unfit
    )
    ta, tb = va["step_time_s"], vb["step_time_s"]
    if abs(tb - ta) <= 1e-9 * ta:
        return f"{prefix}{b.label} and {a.label} take the same time ({fmt_time(ta)} per step)"
    moved = sorted(
        ((vb[k] - va[k], k) for k in BREAKDOWN_KEYS if abs(vb[k] - va[k]) >= DECISIVE_SHARE * ta),
        key=lambda d: -abs(d[0]),
    )
    why = ", ".join(f"{COMPONENTS[k]} {signed_time(d)}" for d, k in moved[:3])
    change = step_change(ta, tb, va["tokens_per_s"], vb["tokens_per_s"])
    # the wider of the two typical bands (out of sample): a difference inside it is not one the
    # model has shown it can see (issue 28)
    bands = [s.est.band for s in (a, b) if s.est.band is not None]
    wider = max(bands, key=lambda x: x.typical, default=None)
    width = wider.typical if wider is not None else 0.0
    basis = f" ({wider.basis})" if wider is not None else ""
    if bands and abs(math.log(tb / ta)) <= width:
        return (
            f"{prefix}{b.label} and {a.label} are equal within the band: {b.label}"
            f" {change.removeprefix('takes ')}, inside the model's +-{100 * width:.0f}% typical"
            f" error out of sample{basis}, so the model cannot rank them"
            + (f" ({why})" if why else "")
        )
    beyond = f"; beyond the +-{100 * width:.0f}% typical band{basis}" if bands else ""
    return f"{prefix}{b.label} {change} than {a.label}" + (f": {why}" if why else "") + beyond


def step_change(ta: float, tb: float, rate_a: float, rate_b: float) -> str:
    """A step time against another's in words that say what they mean: the step's change and the
    throughput's (tokens/s), which differ ("27% less step time" is 37% more throughput for the
    same job)."""
    step = abs(tb - ta) / ta * 100
    more = rate_b >= rate_a
    rate = abs(rate_b / rate_a - 1) * 100
    words = f"{rate:.0f}% {'more' if more else 'less'} throughput"
    return f"takes {step:.0f}% {'less' if tb < ta else 'more'} step time ({words})"


def different_jobs(sides: list[Side]) -> list[str]:
    """What makes the plans different jobs (model, tokens per step, tokens to train), where they
    are: their step times then time different work, and tokens/s or days compare them."""
    first = sides[0].plan
    out = []
    for s in sides[1:]:
        p, why = s.plan, []
        if p.model.name != first.model.name or p.model != first.model:
            why.append(f"model {p.model.name} vs {first.model.name}")
        batch = (
            p.training.global_batch_size * p.seq_length,
            first.training.global_batch_size * first.seq_length,
        )
        if batch[0] != batch[1]:
            why.append(f"{batch[0]:,} tokens a step vs {batch[1]:,}")
        if p.training.tokens != first.training.tokens:
            why.append("different tokens to train")
        if why:
            out.append(
                f"{s.label} and {sides[0].label} are different jobs ({'; '.join(why)}): their"
                " step times time different work; compare tokens/s per GPU or days to train"
            )
    return out


def signed_time(x: float) -> str:
    """A difference of seconds with its sign, in the unit that reads best: "+0.6 s", "-12.1 ms"."""
    return ("+" if x > 0 else "-" if x < 0 else "") + fmt_time(abs(x))


def _days(x: float | None) -> str:
    return "never" if x is None else f"{x:,.1f}"


def _signed_days(d: float | None) -> str:
    return "-" if d is None else f"{d:+,.1f}"


def signed_bytes(x: float) -> str:
    return ("+" if x > 0 else "-" if x < 0 else "") + fmt_bytes(abs(x))


def _figure(js: list[dict], get, fmt, dfmt) -> list[str]:
    """One row's cells: each plan's figure, after the first with its difference in brackets."""
    cells = []
    for i, j in enumerate(js):
        cell = fmt(get(j))
        delta = get(j) - get(js[0])
        cells.append(cell if i == 0 or delta == 0 else f"{cell} ({dfmt(delta)})")
    return cells


def _run_rows(js: list[dict]) -> list[tuple[str, list[str]]]:
    """With the plans' tokens: days to train, GPU-hours and (priced) cost, so a review can trade
    GPUs for days."""
    if not all(j["training_run"] and j["training_run"]["days"] is not None for j in js):
        return []

    def run(key: str):
        return lambda j: j["training_run"][key]

    out = [
        ("days to train", _figure(js, run("days"), _days, _signed_days)),
        (
            "GPU-hours",
            _figure(js, run("gpu_hours"), lambda x: f"{x:,.0f}", lambda d: f"{d:+,.0f}"),
        ),
    ]
    if all(j["training_run"]["cost_usd"] is not None for j in js):
        out.append(
            (
                "cost",
                _figure(
                    js,
                    run("cost_usd"),
                    lambda x: f"${x:,.0f}",
                    lambda d: f"{'+' if d > 0 else '-'}${abs(d):,.0f}",
                ),
            )
        )
    return out


def rows(c: Comparison) -> list[tuple[str, list[str]]]:
    """(row label, one cell per plan) for the table: the configuration, the breakdown, throughput,
    memory and findings; figures after the first plan's carry their difference from it in brackets.
    """
    js = [s.est.to_json() for s in c.sides]

    def figure(get, fmt, dfmt):
        return _figure(js, get, fmt, dfmt)

    out = [
        ("GPUs", [f"{s.plan.system.num_gpus} x {s.plan.system.gpu.name}" for s in c.sides]),
        ("model", [s.plan.model.name for s in c.sides]),
        ("framework", [s.est.framework for s in c.sides]),
    ]
    for key in CONFIG:
        out.append(
            (
                key.replace("_", " "),
                [
                    str(j["config"][key]) + (" (as plan)" if key in s.chosen else "")
                    for j, s in zip(js, c.sides)
                ],
            )
        )
    out.append(("step time", figure(lambda j: j["step_time_s"], fmt_time, signed_time)))
    out.append(
        (
            "  band (typical)",
            [
                (
                    f"+-{100 * s.est.band.typical:.0f}% ({s.est.band.runs} runs)"
                    if s.est.band is not None
                    else "-"
                )
                for s in c.sides
            ],
        )
    )
    for key, name in COMPONENTS.items():
        if any(j["breakdown_s"][key] for j in js):
            out.append(
                (f"  {name}", figure(lambda j, k=key: j["breakdown_s"][k], fmt_time, signed_time))
            )
    out.append(
        (
            "MFU",
            figure(lambda j: j["mfu"], lambda x: f"{100 * x:.1f}%", lambda d: f"{100 * d:+.1f} pt"),
        )
    )
    out.append(
        (
            "tokens/s per GPU",
            figure(
                lambda j: j["tokens_per_s_per_gpu"], lambda x: f"{x:,.0f}", lambda d: f"{d:+,.0f}"
            ),
        )
    )
    out += _run_rows(js)
    for key, name in MEMORY.items():
        out.append(
            (f"memory: {name}", figure(lambda j, k=key: j["memory"][k], fmt_bytes, signed_bytes))
        )
    out.append(
        (
            "fits in HBM",
            [
                ("yes" if j["memory"]["fits"] else "NO")
                + f" ({fmt_bytes(j['memory']['capacity_bytes'])})"
                for j in js
            ],
        )
    )
    out.append(
        ("check findings", [", ".join(f.rule for f in s.findings) or "none" for s in c.sides])
    )
    return out
