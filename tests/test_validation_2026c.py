"""The timed runs of shared/validation/published-2026c.yaml as validation cases
(benchmarks/transcribe_2026c_runs.py): each held once, each table runnable by its name."""

import re
from pathlib import Path

import pytest

from perfmodel.cli import main
from perfmodel.inputs import presets
from perfmodel.review.validate import validate

CASES = Path(__file__).resolve().parent.parent / "configs" / "validation"
HEADER = re.compile(r"^# Transcribed from shared/validation/published-2026c\.yaml id (\S+)")
RECORD_ID = re.compile(r"[A-Z][A-Z0-9]+-[\w.-]+")  # a record's id, as the cases' descriptions
# table -> runs of published-2026c.yaml it holds
TABLES_2026C = {
    "torchtitan-2024": 7,
    "mlperf51-llama31": 8,
    "mlperf-llama31": 4,
    "dgxc-2505": 5,
    "dgxc-moe-2505": 3,
}


def _ids_2026c() -> dict[str, str]:
    """case name -> the published-2026c.yaml id its header names."""
    out = {}
    for path in sorted(CASES.glob("*.yaml")):
        m = HEADER.match(path.read_text().splitlines()[0])
        if m:
            out[path.stem] = m.group(1)
    return out


def test_each_timed_run_is_held_once():
    """27 of the 32 timed runs: the MI350X MLPerf run was held already (published-2026b), the two
    Llama 3 8B runs on B200 are the calibration example examples/calibration/torchtitan-b200, the
    two Llama 4 Scout runs are refused (as published, 926 GB of activations a GPU). No run is
    held twice:
    every case's description (the record's id) is its own."""
    ids = _ids_2026c()
    assert len(ids) == len(set(ids.values())) == 27
    cases = presets.validation_cases()
    descriptions = [c["description"] for c in cases if RECORD_ID.fullmatch(c["description"])]
    assert len(descriptions) == len(set(descriptions))
    assert "MLPERF-v5.1-AMD-LLAMA31_8B-8xMI350X-FP8" in descriptions
    assert not any("SCOUT" in i or "xB200-FSDP8" in i for i in ids.values())
    held = CASES.parent.parent / "examples" / "calibration" / "torchtitan-b200" / "runs.yaml"
    assert "8307.5" in held.read_text() and "9969.0" in held.read_text()


def test_tables_hold_their_runs():
    by_name = {c["name"]: c["table"] for c in presets.validation_cases()}
    tables = [by_name[n] for n in _ids_2026c()]
    assert {t: tables.count(t) for t in set(tables)} == TABLES_2026C


def test_validate_selects_a_table_by_its_name():
    """`perfmodel validate TABLE` runs that table's cases, as it runs a case by its name."""
    report = validate(["torchtitan-2024"])
    assert {c.table for c in report.cases} == {"torchtitan-2024"}
    assert len(report.cases) == TABLES_2026C["torchtitan-2024"]


@pytest.mark.parametrize("table", ["dgxc-2505", "mlperf51-llama31"])
def test_cli_validate_table(table):
    from click.testing import CliRunner

    r = CliRunner().invoke(main, ["validate", table])
    assert r.exit_code == 0, r.output
    assert "mean |error|" in r.output


def test_validate_memory_selects_a_table_by_its_name():
    from perfmodel.review.validate_memory import memory_validation

    _, summary = memory_validation(["mlperf51-llama31"])
    assert summary["runs"] == TABLES_2026C["mlperf51-llama31"]
