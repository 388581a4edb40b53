"""A sweep row is `plan`'s answer for the plan with the value applied (issue 40, item 5): however
the sweep computes its rows (values that give the same plan answered once, bands reused), each
row holds the configuration and the figures `perfmodel plan --top 1` gives for a plan file that
states the value itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from perfmodel.cli import main

PLANS = Path(__file__).resolve().parent.parent / "configs" / "plans"


def invoke(*args: str) -> dict:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


LINKS = yaml.safe_load((PLANS.parent / "hardware" / "links.yaml").read_text())


def plan_file(tmp_path: Path, section: str, key: str, value, gpus: int = 32) -> str:
    """Llama 3 8B on ``gpus`` H100 (the bundled one-node plan on 4 nodes unless told, so that the
    inter-node link matters) with ``section.key`` set to ``value``, as a file of its own."""
    data = yaml.safe_load((PLANS / "llama3-8b-h100.yaml").read_text())
    data["system"]["num_gpus"] = gpus
    if key == "bandwidth_bytes_per_s":  # the plan's own link, at this bandwidth
        data["system"]["inter_node_link"] = {**LINKS["ib-ndr"], key: value}
    elif key:
        data[section][key] = value
    out = tmp_path / f"{gpus}-{key}-{value}.yaml".replace(" ", "").replace("/", "")
    out.write_text(yaml.safe_dump(data))
    return str(out)


# (field as --vary names it, its place in a plan file, sampled values, GPUs: on one node the
# inter-node link is never used, and the sweep answers every value at once)
CASES = [
    ("gbs", "training", "global_batch_size", [16, 64, 1000], 32),
    (
        "inter_node_bandwidth",
        "system",
        "bandwidth_bytes_per_s",
        ["2 GB/s", "25 GB/s", "400 GB/s"],
        32,
    ),
    ("inter_node_bandwidth", "system", "bandwidth_bytes_per_s", ["1 GB/s", "400 GB/s"], 8),
]


@pytest.mark.parametrize("field,section,key,values,gpus", CASES)
def test_each_row_is_plans_answer(tmp_path, field, section, key, values, gpus):
    vary = ",".join(str(v) for v in values)
    base = plan_file(tmp_path, section, "", None, gpus)
    rows = invoke("sweep", base, "--vary", f"{field}={vary}", "--json")["points"]
    assert [r["value"] for r in rows] == [str(v) for v in values]
    for row, value in zip(rows, values, strict=True):
        given = plan_file(tmp_path, section, key, value, gpus)
        best = invoke("plan", given, "--top", "1", "--json")["results"][0]
        assert row["config"] == best["config"], value
        assert row["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)
        assert row["memory_total_bytes"] == pytest.approx(best["memory"]["total_bytes"])
        assert row["expected_error"] == best["expected_error"]


def test_values_that_give_the_same_plan_give_the_same_row():
    """ "25GB/s" and "25 GB/s" are one plan: the row is computed once and shown for each."""
    rows = invoke(
        "sweep", "llama3-8b-h100.yaml", "--vary", "inter_node_bandwidth=25GB/s,25 GB/s", "--json"
    )["points"]
    assert [r["value"] for r in rows] == ["25GB/s", "25 GB/s"]
    assert {k: v for k, v in rows[0].items() if k != "value"} == {
        k: v for k, v in rows[1].items() if k != "value"
    }


@pytest.mark.parametrize("gpus,same", [(8, True), (32, False)])
def test_inter_node_figures_give_one_answer_inside_one_node(gpus, same):
    """One node: the inter-node link is priced nowhere, so its bandwidths are one answer (the
    sweep computes it once); across nodes each bandwidth is an answer of its own."""
    from perfmodel.inputs import load_plan
    from perfmodel.review.sweep import changed, same_answer_key

    plan = load_plan("llama3-8b-h100.yaml").with_system(num_gpus=gpus)
    path = "system.inter_node_link.bandwidth_bytes_per_s"
    keys = {same_answer_key(changed(plan, path, v)) for v in ("1 GB/s", "400 GB/s")}
    assert (len(keys) == 1) is same


def test_a_sweep_over_processes_gives_the_rows_of_one_process():
    """--jobs: the distinct plans of a sweep are answered in worker processes (forked or spawned:
    sweep._start), each by the same search, so every row is the one a single process gives, in
    the values' order."""
    from perfmodel.inputs import load_plan
    from perfmodel.review import sweep as sw

    plan = load_plan("llama3-8b-h100.yaml")
    values = [str(64 * i) for i in range(1, sw.PARALLEL_FROM + 2)]
    seen: list[tuple[int, int]] = []
    one = sw.sweep(plan, "training.global_batch_size", values, jobs=1).to_json()
    two = sw.sweep(
        plan,
        "training.global_batch_size",
        values,
        jobs=2,
        progress=lambda d, n: seen.append((d, n)),
    ).to_json()
    assert two == one
    assert seen[-1] == (len(values), len(values))


def test_workers_are_spawned_where_another_thread_runs():
    """A worker forked while another thread holds a lock would inherit the lock held: with any
    thread besides the main one alive, the sweep spawns its workers."""
    import threading

    from perfmodel.review import sweep as sw

    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        assert sw._start() == "spawn"
    finally:
        release.set()
        other.join()
