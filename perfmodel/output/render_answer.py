"""The answer first: three lines at the top of `plan` and `estimate` (four with a training run),
so a reader has the configuration, the time with its band and the memory against the usable HBM
before any table."""

from __future__ import annotations

from perfmodel.engine import memory_switches
from perfmodel.output.console import line, pct
from perfmodel.output.render import config_short
from perfmodel.output.render_run import days, hours_text, money, span
from perfmodel.units import fmt_bytes, fmt_time


def answer_lines(j: dict, framework: str) -> list[str]:
    """The answer of one estimate (its `to_json()`), in at most four lines of plain words (and one
    more naming the memory switches it turns on)."""
    c = j["config"]
    schedule = c.get("schedule", "1f1b")
    sched = "" if schedule in ("1f1b", "interleaved") else f" {schedule}"
    moe = ""
    if c.get("ep", 1) > 1 and c.get("moe_token_dispatcher_type"):  # the MoE switches searched
        moe = f" {c['moe_token_dispatcher_type']}" + (
            " a2a-overlap" if c.get("moe_a2a_overlap") else ""
        )
    out = [f"answer: {config_short(c)}{sched}{moe} under {framework}"]
    if c.get("memory_switch"):  # what the answer turns on beyond the plan (issue 37)
        layers = int(sum(j.get("stage_layers", ()))) or None
        out.append("with " + memory_switches.describe(c["memory_switch"], layers))
    band = j.get("expected_error")
    step = f"step {fmt_time(j['step_time_s'])}"
    if band and band.get("step_time_range_s"):
        lo, hi = band["step_time_range_s"]
        step += f" (expected {fmt_time(lo)} to {fmt_time(hi)})"
    out.append(f"{step}, MFU {pct(j['mfu'])}, {j['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU")
    m = j["memory"]
    verdict = m.get("verdict") or ("fits" if m["fits"] else "does not fit")
    gap = m["usable_bytes"] - m["total_bytes"]
    margin = f"{fmt_bytes(abs(gap))} {'to spare' if gap >= 0 else 'over'}"
    band = f", +-{100 * m['band']:g}%" if m.get("band") else ""
    out.append(
        f"memory: {verdict} ({margin}{band}), {fmt_bytes(m['total_bytes'])} of"
        f" {fmt_bytes(m['usable_bytes'])} usable ({fmt_bytes(m['capacity_bytes'])} HBM less"
        f" {fmt_bytes(m['reserve_bytes'])})"
    )
    run = j.get("training_run")
    if run and run.get("days") is None:  # interruptions outpace the checkpoints
        out.append("run: never finishes (interruptions outpace the checkpoints)")
    elif run:

        def ranged(text: str, key: str) -> str:
            return f"{text} ({span(run, key)})" if span(run, key) else text

        cost = (
            f", {ranged(money(run['cost_usd']), 'cost_usd')}"
            if run.get("cost_usd") is not None
            else ""
        )
        good = (run.get("range") or {}).get("goodput")
        goodput = f"goodput {pct(run['goodput'])}" + (
            f", {pct(good[0])} as published fleets ran" if good and good[0] < good[1] else ""
        )
        out.append(
            f"run: {ranged(days(run['days']), 'days')},"
            f" {ranged(hours_text(run['gpu_hours']), 'gpu_hours')} GPU-hours{cost} ({goodput})"
        )
    return out


def answer(j: dict, framework: str) -> None:
    """Print the answer lines, then a blank line before the details."""
    for text in answer_lines(j, framework):
        line(text)
    line()
