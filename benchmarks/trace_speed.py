"""Trace reading speed: seconds and peak memory (RSS) to read generated Kineto traces.

Cases (issue 39 item 2, issue 40 item 5; tests/data/repro/cal_trace_large_corrupt_quadratic):
- a valid trace of --valid-mb MB (default 1000): ProfilerStep marks, GPU kernels and, between
  them, the CPU events that make up most of a real trace's bytes; target under 30 s;
- a corrupt trace of --corrupt-mb MB (default 200): its first event is bad JSON (an unquoted key),
  the rest valid CPU events; it should fail at once, naming the place;
- a trace of --huge-mb MB (default 200) holding one CPU event with a string of that size: read in
  time linear in its size.

Each case is read in a child process (`perfmodel.inputs.trace.read`), so its peak RSS is its own.
The files are written to a temporary folder and removed.

Run: python benchmarks/trace_speed.py [--valid-mb 1000] [--corrupt-mb 200] [--huge-mb 200]
(prints figures; asserts nothing: machines are noisy)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CPU = {
    "ph": "X",
    "cat": "cpu_op",
    "name": "aten::linear",
    "pid": 1,
    "tid": 2,
    "ts": 1000000.0,
    "dur": 3.0,
    "args": {"Input Dims": [[8192, 4096], [4096, 4096]], "External id": 12},
}
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"


def _kernel(name: str, ts: float, dur: float) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7},
    }


def write_valid(path: Path, mb: float, steps: int = 3) -> None:
    """ProfilerStep#i annotations, a GEMM and an elementwise kernel every 10 CPU events."""
    per_step = mb * 1e6 / steps
    t = 0.0
    with open(path, "w") as fh:
        fh.write('{"schemaVersion": 1, "traceEvents": [\n')
        first = True
        for s in range(steps):
            step = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}"}
            fh.write(("" if first else ",\n") + json.dumps({**step, "ts": t, "dur": 1e6}))
            first = False
            start = fh.tell()
            block = []
            for i in range(10):
                block.append(json.dumps({**CPU, "ts": t + i}))
            block.append(json.dumps(_kernel(GEMM, t, 50.0)))
            block.append(json.dumps(_kernel("vectorized_elementwise_kernel", t + 50, 10.0)))
            text = ",\n" + ",\n".join(block)
            while fh.tell() - start < per_step:
                fh.write(text)
            t += 1e6
        fh.write("\n]}\n")


def write_corrupt(path: Path, mb: float) -> None:
    """The reproducer's file (cal_trace_large_corrupt_quadratic/gen.py): a bad first event."""
    line = ",\n" + json.dumps(CPU)
    with open(path, "w") as fh:
        fh.write('{"traceEvents": [\n{"ph": "X", "cat": "kernel", "name": "x", "ts": 1, dur: 2}')
        blob = line * 1000
        while fh.tell() < mb * 1e6:
            fh.write(blob)
        fh.write("\n]}\n")


def write_huge(path: Path, mb: float) -> None:
    """One CPU event whose args hold a string of ``mb`` MB, between two steps of kernels."""
    with open(path, "w") as fh:
        fh.write('{"traceEvents": [\n')
        fh.write(json.dumps({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0"}))
        fh.write(",\n" + json.dumps(_kernel(GEMM, 0.0, 50.0)))
        fh.write(',\n{"ph": "X", "cat": "cpu_op", "name": "aten::big", "args": {"s": "')
        piece = "x" * 1_000_000
        for _ in range(int(mb)):
            fh.write(piece)
        fh.write('"}},\n' + json.dumps(_kernel(GEMM, 100.0, 50.0)) + "\n]}\n")


CHILD = """
import sys, time, resource
from perfmodel.errors import PerfModelError
from perfmodel.inputs import trace
t0, c0 = time.perf_counter(), time.process_time()
try:
    s = trace.read(sys.argv[1])
    what = f"{sum(s.kernels.values())} kernels, {s.steps} steps"
except PerfModelError as e:
    what = f"Error: {e}"
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{dt:.2f}\\t{cpu:.2f}\\t{rss:.0f}\\t{what[:200]}")
"""


def measure(path: Path) -> tuple[float, float, float, str]:
    """(seconds, CPU seconds, peak RSS in MB, what the reader said) reading ``path`` in a child
    (CPU seconds: on a shared machine the wall time counts the others' work too)."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    dt, cpu, rss, what = out.split("\t", 3)
    return float(dt), float(cpu), float(rss), what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--valid-mb", type=float, default=1000)
    ap.add_argument("--corrupt-mb", type=float, default=200)
    ap.add_argument("--huge-mb", type=float, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("valid", args.valid_mb, write_valid),
            ("corrupt", args.corrupt_mb, write_corrupt),
            ("one huge event", args.huge_mb, write_huge),
        ]
        for label, mb, writer in cases:
            if mb <= 0:
                continue
            path = Path(tmp) / f"{label.replace(' ', '_')}.json"
            writer(path, mb)
            size = path.stat().st_size / 1e6
            dt, cpu, rss, what = measure(path)
            print(
                f"{label}, {size:,.0f} MB: {dt:.2f} s ({cpu:.2f} s CPU), peak RSS {rss:,.0f} MB"
                f" ({what})"
            )
            path.unlink()


if __name__ == "__main__":
    main()
