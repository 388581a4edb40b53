"""The planning answer in words and tables: a run's days, GPU-hours, energy, cost and goodput
(engine/run.py), and the short form compare and sweep print beside a step time."""

from __future__ import annotations

from typing import Any

from perfmodel.output.console import kv, line, pct
from perfmodel.units import fmt_count, fmt_duration


def days(x: float | None) -> str:
    if x is None:
        return "never"  # interruptions outpace the checkpoints
    return f"{x:,.1f} days" if x >= 1 else f"{24 * x:.3g} h"


def money(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x / 1e6:,.2f}M" if x >= 1e6 else f"${x:,.0f}"


def _maybe(seconds: float | None) -> str:
    """A duration, or "never" where it is infinite (no failures: no checkpoint needed)."""
    return "never" if seconds is None else fmt_duration(seconds)


def _checkpoints(run: dict[str, Any]) -> str:
    save = _maybe(run["checkpoint_s"])
    if run["checkpoint_interval_s"] is None:
        return f"{save} a save; none needed without failures"
    return (
        f"{save} a save, every {fmt_duration(run['checkpoint_interval_s'])};"
        f" {_maybe(run['restart_s'])} to restart"
    )


def _interruptions(run: dict[str, Any]) -> str:
    if run["job_mtbf_s"] is None:
        return "none expected (no failure rate)"
    if run["interruptions"] is None:
        return "-"
    return f"{run['interruptions']:,.1f} expected, one every {fmt_duration(run['job_mtbf_s'])}"


def hours_text(h: float) -> str:
    return f"{h / 1e6:,.2f}M" if h >= 1e6 else f"{h:,.0f}"


def span(run: dict[str, Any], key: str) -> str:
    """A run figure's range (engine/run.py run_range), as "a to b"; "" without one."""
    r = (run.get("range") or {}).get(key)
    if not r:
        return ""
    shown = {"days": days, "cost_usd": money, "gpu_hours": hours_text}.get(
        key, lambda x: f"{x:,.0f}"
    )
    return f"{shown(r[0])} to {shown(r[1])}"


def range_rows(run: dict[str, Any]) -> list[tuple[str, str]]:
    """The run's range: its figures over the step band and the goodput's own uncertainty, and what
    the goodput counts beside published fleets (engine/run.py GOODPUT_BASIS)."""
    r = run.get("range")
    if not r:
        return []
    lo, hi = r["step_band"]
    good = r["goodput"]
    figures = [
        f"{what} {span(run, key)}"
        for what, key in (
            ("time", "days"),
            ("GPU-hours", "gpu_hours"),
            ("energy (MWh)", "energy_mwh"),
            ("cost", "cost_usd"),
        )
        if span(run, key)
    ]
    return [
        (
            "expected range",
            "; ".join(figures)
            + f" (step {100 * (lo - 1):+.0f}% to {100 * (hi - 1):+.0f}%, goodput"
            f" {pct(good[0])} to {pct(good[1])})",
        ),
        ("goodput basis", r["basis"]),
    ]


def short(run: dict[str, Any] | None) -> tuple[str, str]:
    """(days with goodput, cost) of a run's JSON, for a table cell."""
    if not run:
        return "-", "-"
    return days(run["days"]), money(run["cost_usd"])


def training_run(run: dict[str, Any] | None) -> None:
    """`estimate` and `plan`: the whole run at the predicted step time, each assumption after it."""
    if not run:
        return
    energy = run["energy_mwh"]
    hours = run["gpu_hours"]
    rows = [
        (
            "tokens",
            (
                f"{fmt_count(run['tokens'])} in {run['steps']:,} steps of"
                f" {fmt_count(run['tokens_per_step'])}"
            ),
        ),
        ("time, nothing lost", days(run["ideal_days"])),
        (
            "time, with failures",
            (
                "never: interruptions come faster than the work between them can be saved"
                if run["days"] is None
                else (
                    f"{days(run['days'])} (goodput {pct(run['goodput'])}: checkpoints, lost"
                    " work, restarts)"
                )
            ),
        ),
        (
            "GPU-hours",
            "-" if hours is None else fmt_count(hours) if hours >= 1e6 else f"{hours:,.0f}",
        ),
        (
            "energy",
            (
                (
                    "-"
                    if run["gpu_energy_mwh"] is None
                    else f"the GPUs alone {run['gpu_energy_mwh']:,.0f} MWh (no node figure)"
                )
                if energy is None
                else (
                    f"{energy:,.0f} MWh (facility, PUE included; the GPUs alone"
                    f" {run['gpu_energy_mwh']:,.0f} MWh)"
                )
            ),
        ),
        ("cost", money(run["cost_usd"])),
        ("interruptions", _interruptions(run)),
        ("checkpoints", _checkpoints(run)),
    ]
    rows += range_rows(run)
    kv("Training run (at the predicted step time, and its range)", rows)
    for a in run["assumptions"]:
        line(f"assumed: {a}")
    line()
