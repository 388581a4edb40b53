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
    kv("Training run (at the predicted step time)", rows)
    for a in run["assumptions"]:
        line(f"assumed: {a}")
    line()
