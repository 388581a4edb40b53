"""Published runs held for their memory only (configs/memory_runs): runs the project holds to check
that they fit, and peaks measured on runs that are not validation cases (issue 29). Each file is a
plan with the published record's id as its `description`, its `source` and `notes`; none is timed
by `validate` (benchmarks/transcribe_fit_runs.py writes them)."""

from __future__ import annotations

from perfmodel.inputs.preset_files import _bundled
from perfmodel.inputs.presets import plan_from_mapping

RUN_KEYS = ("source", "notes")


def memory_runs(names: list[str] | None = None) -> list[dict]:
    """The runs of configs/memory_runs (those whose name contains one of ``names``, or all):
    name, plan, description, source."""
    out = []
    table = _bundled("memory_runs")
    for name in sorted(table):
        if names and not any(n.lower() in name for n in names):
            continue
        raw = dict(table[name])
        meta = {k: raw.pop(k) for k in RUN_KEYS if k in raw}
        out.append(
            {
                "name": name,
                "plan": plan_from_mapping(raw, f"configs/memory_runs/{name}.yaml"),
                "description": raw.get("description", ""),
                **meta,
            }
        )
    return out
