"""Calibration inputs checked (issue 39 item 2): CAL.yaml on load, RUNS.yaml's fit: and paths, and
traces read fast and truthfully (a corrupt event named at once, a truncated file told from it, one
huge event read in linear time, a negative or endless kernel refused)."""

import json
import re
from pathlib import Path

import pytest
import yaml

from perfmodel.errors import PerfModelError
from perfmodel.inputs import calibration, load_plan, trace, trace_stream
from perfmodel.review import calibrate_checks as checks
from perfmodel.specs.calibrated_plan import with_calibration
from perfmodel.specs.calibration import Calibration

GOOD = {
    "factors": {"compute": 1.2, "overhead_s": 0.01},
    "fitted_from": "step_times",
    "runs": [],
    "out_of_sample": {"all": 0.05},
}


def write_cal(tmp_path: Path, **changes) -> Path:
    data = {**GOOD, **changes}
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_good_calibration_reads() -> None:
    cal = calibration.read(write_cal(Path(__import__("tempfile").mkdtemp())))
    assert cal.factors == {"compute": 1.2, "overhead_s": 0.01} and cal.version == 1


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"factors": {"compute": float("nan")}}, "factors.compute must be a finite number above 0"),
        ({"factors": {"comm": 0}}, "factors.comm must be a finite number above 0"),
        ({"factors": {"comm": True}}, "factors.comm must be a finite number above 0"),
        ({"factors": {"comm": "fast"}}, "factors.comm must be a finite number above 0"),
        ({"factors": {"overhead_s": -0.5}}, "factors.overhead_s must be a finite number"),
        ({"factors": {"overhead_s": float("inf")}}, "factors.overhead_s must be a finite"),
        ({"factors": {"zzz": 1.0}}, "unknown factor 'zzz'; known: rate, compute"),
        ({"factors": {"comms": 1.0}}, "did you mean 'comm'?"),
        ({"factors": [1.0]}, "factors must be a mapping"),
        ({"out_of_sample": {"scale": float("nan")}}, "out_of_sample.scale must be a finite"),
        ({"out_of_sample_max": {"all": -0.1}}, "out_of_sample_max.all must be a finite"),
        ({"out_of_sample": [0.1]}, "out_of_sample must be a mapping"),
        ({"version": 99}, "version 99 is newer than this perfmodel reads (1)"),
        ({"version": "one"}, "version must be a whole number"),
        ({"gpu": 7}, "gpu must name the GPU"),
    ],
)
def test_bad_calibration_named_by_key(tmp_path: Path, changes: dict, message: str) -> None:
    path = write_cal(tmp_path, **changes)
    with pytest.raises(PerfModelError) as e:
        calibration.read(path)
    assert message in str(e.value) and str(path) in str(e.value)
    assert "\n" not in str(e.value)


def test_calibration_of_another_gpu_says_so() -> None:
    """A calibration fitted on H100 applied to a B200 plan: an assumption line, not an error; on
    its own GPU (or a calibration that does not say) nothing is added."""
    plan = load_plan("llama3-8b-h100")
    h100 = plan.system.gpu.name
    own = with_calibration(plan, Calibration(**GOOD, gpu=h100))
    assert not [n for n in own.read_as if "fitted on" in n]
    other = with_calibration(plan, Calibration(**GOOD, gpu="B200-SXM-180GB", source="c.yaml"))
    said = [n for n in other.read_as if "fitted on" in n]
    assert said == [
        f"calibration (c.yaml) fitted on B200-SXM-180GB, applied to {h100} as it is: its"
        " factors are of the B200-SXM-180GB runs' kernels and links"
    ]
    unsaid = with_calibration(plan, Calibration(**GOOD))
    assert unsaid.read_as == plan.read_as


@pytest.mark.parametrize(
    "fit, message",
    [
        (["comm", "comm"], "fit: comm is named twice"),
        (["rate", "compute"], "fit: rate already holds compute"),
        (["rate", "gemm_fp8"], "fit: rate already holds gemm_fp8"),
        (["compute", "memory"], "fit: compute already holds memory"),
        (["attention"], "fit: attention is a kernel-class factor"),
    ],
)
def test_fit_names(fit: list[str], message: str) -> None:
    with pytest.raises(PerfModelError, match=message):
        checks.fit_names(fit, "runs.yaml")
    checks.fit_names(["compute", "comm", "overhead_s"], "runs.yaml")  # what step times fit
    checks.fit_names(["rate", "overhead_s"], "runs.yaml")


def test_paths_beside_runs_yaml_only(tmp_path: Path, monkeypatch) -> None:
    """plan: and trace: come from RUNS.yaml's folder (a plan may be a bundled name), never the
    working directory's file of that name."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "p.yaml").write_text("base: llama3-8b-h100\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PerfModelError, match=r"runs\[0\].plan: no sub/p.yaml"):
        checks.resolve(Path("sub"), "p.yaml", "sub/runs.yaml: runs[0].plan", True)
    with pytest.raises(PerfModelError, match=r"trace: no sub/t.json"):
        checks.resolve(Path("sub"), "t.json", "sub/runs.yaml: runs[0].trace", False)
    assert checks.resolve(Path("sub"), "llama3-8b-h100", "x", True) == "llama3-8b-h100"
    assert checks.resolve(Path("."), "p.yaml", "x", True) == "p.yaml"


def test_output_may_not_be_an_input(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("base: llama3-8b-h100\n")
    (tmp_path / "t.json").write_text("{}")
    runs = tmp_path / "runs.yaml"
    runs.write_text("runs:\n  - plan: p.yaml\n    trace: t.json\n  - plan: llama3-8b-h100\n")
    for name, field in (("p.yaml", "runs[0].plan"), ("t.json", "runs[0].trace")):
        with pytest.raises(
            PerfModelError, match=rf"that is .*runs.yaml's {field.replace('[', '.')}"
        ):
            checks.output_not_input(str(tmp_path / name), str(runs))
    with pytest.raises(PerfModelError, match=r"that is the RUNS\.yaml"):
        checks.output_not_input(str(runs), str(runs))
    checks.output_not_input(str(tmp_path / "cal.yaml"), str(runs))  # a new file: fine


# --- traces ---------------------------------------------------------------------------------


def kernel(name: str, ts: float, dur) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"device": 0}}


STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 10}


def write_trace(path: Path, events: list) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize(
    "dur, message",
    [
        (-5000000, "kernel event 'gemm_bf16_k' has a negative dur -5000000"),
        (float("nan"), "kernel event 'gemm_bf16_k' has a non-finite dur"),
        (1e300, "kernel event 'gemm_bf16_k' has a dur of 1e+300 us"),
    ],
)
def test_bad_kernel_duration_named(tmp_path: Path, dur, message: str) -> None:
    path = write_trace(
        tmp_path / "t.json", [STEP, kernel("gemm_bf16_k", 0, 5), kernel("gemm_bf16_k", 5, dur)]
    )
    with pytest.raises(PerfModelError, match=re.escape(message)):
        trace.read(path)


def test_nsys_cells_checked(tmp_path: Path) -> None:
    head = '"Time (%)","Total Time (ns)","Instances","Name"'
    for row, message in (
        ('100,1000,2.5,"gemm_k"', "Instances of 'gemm_k' is not a whole number"),
        ('100,1000,0,"gemm_k"', "Instances of 'gemm_k' is not a whole number"),
        ('100,-1000,2,"gemm_k"', "Total Time of 'gemm_k' must be a finite number of 0 or more"),
        ('100,1e999,2,"gemm_k"', "Total Time of 'gemm_k' must be a finite number"),
    ):
        path = tmp_path / "k.csv"
        path.write_text(f"{head}\n{row}\n")
        with pytest.raises(PerfModelError, match=message):
            trace.read(path, steps=1)


def count_reads(monkeypatch) -> list[int]:
    reads: list[int] = []
    more = trace_stream._Reader.more

    def counted(self, size=None):
        reads.append(size or self.chunk)
        return more(self, size)

    monkeypatch.setattr(trace_stream._Reader, "more", counted)
    return reads


def test_syntax_error_fails_at_once(tmp_path: Path, monkeypatch) -> None:
    """A bad first event in a 2 MB trace read 64 KB at a time: refused after the first read,
    naming its character in the file (the old reader re-read to the end, quadratically)."""
    path = tmp_path / "bad.json"
    cpu = json.dumps({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2})
    head = '{"traceEvents": [\n{"ph": "X", "cat": "kernel", "ts": 1, dur: 2}'
    with open(path, "w") as fh:
        fh.write(head)
        while fh.tell() < 2e6:
            fh.write((",\n" + cpu) * 100)
        fh.write("]}")
    reads = count_reads(monkeypatch)
    at = head.index("dur: 2")
    with pytest.raises(PerfModelError, match=rf"bad JSON at character {at} of the file .* corrupt"):
        list(trace.iter_events(path, chunk=1 << 16))
    assert len(reads) <= 2


def test_syntax_error_later_named_where_it_is(tmp_path: Path) -> None:
    good = [STEP] + [kernel("gemm_k", i, 1) for i in range(2000)]
    text = json.dumps({"traceEvents": good})
    at = text.index('"ts": 1500')
    bad = text[:at] + "ts: 1500" + text[at + len('"ts": 1500') :]
    path = tmp_path / "t.json"
    path.write_text(bad)
    with pytest.raises(PerfModelError, match=f"bad JSON at character {at:,} of the file"):
        trace.read(path)


def test_truncated_told_from_corrupt(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [STEP] + [kernel("gemm_k", i, 1) for i in range(500)]})
    path = tmp_path / "t.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(PerfModelError, match=r"the file ends inside the event at .* truncated"):
        list(trace.iter_events(path, chunk=4096))


def test_one_huge_event_read_in_linear_time(tmp_path: Path, monkeypatch) -> None:
    """A 4 MB string in one event read 64 KB at a time: reads as long as what is held (about
    log2(64) of them), not 64 reads each re-decoding all that came before."""
    path = tmp_path / "t.json"
    huge = {"ph": "X", "cat": "cpu_op", "name": "big", "args": {"s": "x" * 4_000_000}}
    write_trace(path, [STEP, kernel("gemm_k", 0, 1), huge, kernel("gemm_k", 2, 1)])
    reads = count_reads(monkeypatch)
    s = trace.read(path)
    assert s.kernels["gemm_bf16"] == 2
    assert len(reads) < 12 and max(reads) >= 1_000_000


@pytest.mark.parametrize("chunk", [7, 100, 4096, 1 << 20])
def test_batches_read_exactly_the_events(tmp_path: Path, chunk: int) -> None:
    """Strings that hold what looks like the end of an event ("}, {", "}]"), nested objects and
    lists of objects: the runs of events decoded at once are the events, at any chunk size."""
    events = [STEP]
    for i in range(300):
        events.append(kernel(f"k{i}" + ' "}, {"cat": "kernel"}' * (i % 3), i, 1))
        events.append({"ph": "X", "args": {"a": [{"b": {}}, {"c": "}]"}], "d": '\\"}, {'}})
        events.append([1, {"x": "}"}])
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    assert list(trace.iter_events(path, chunk=chunk)) == [e for e in events if isinstance(e, dict)]


def test_too_deep_event_named(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(PerfModelError, match="character 17 of the file nests too deeply"):
        list(trace.iter_events(path))
