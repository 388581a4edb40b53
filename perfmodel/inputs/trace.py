"""Profiler traces: GPU kernel time by class, read in bounded memory.

Two formats:
- a PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzipped: the ``traceEvents`` array is
  read a chunk at a time, runs of whole events decoded at once (inputs/trace_stream.py), so a
  1 GB trace never sits in memory; what is kept is 16 bytes per GPU kernel (its start and end)
  for the overlap and idle figures;
- an Nsight Systems summary, ``nsys stats --report cuda_gpu_kern_sum --format csv`` (its "Total
  Time (ns)" and "Name" columns; the NCCL kernels are in it by name): kernel totals only, no
  timeline, so no overlap and no idle time.

Kernels are classified as Holistic Trace Analysis does (facebookresearch/HolisticTraceAnalysis,
hta/common/types.py: communication ``^nccl|ncclKernel|^hccl``, memory ``^Memcpy|^Memset|^dma``,
everything else computation), except that the collectives HTA counts as computation (symmetric-
memory and custom all-reduces, DeepEP's and HybridEP's expert dispatch and combine) are
communication here. Computation is split further by the kernel's own name (its argument list left
out) into GEMMs by format (FP8: e4m3/e5m2; FP4: e2m1; the rest, 16- and 32-bit, as gemm_bf16),
attention (flash/fmha/sdpa kernels) and the rest (elementwise, norms, reductions, optimizer:
memory-bound kernels). Idle is the time in the profiled steps with no kernel running (HTA's
temporal breakdown); exposed communication is communication kernel time with no computation kernel
running beside it (HTA's comm_comp_overlap, inverted).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from perfmodel.errors import PerfModelError
from perfmodel.inputs import trace_stream

COMPUTE_CLASSES = ("gemm_bf16", "gemm_fp8", "gemm_fp4", "attention", "elementwise")
CLASSES = (*COMPUTE_CLASSES, "memcpy", "comm")

_COMM = re.compile(r"^nccl|ncclKernel|ncclDevKernel|^rccl|^hccl", re.I)
# collectives that are not NCCL's and that HTA counts as computation: symmetric-memory and custom
# all-reduces (PyTorch's multimem_all_reduce_kernel, vLLM's cross_device_reduce) and the expert
# all-to-all of DeepEP and HybridEP (deep_ep::intranode::dispatch, ...::internode::combine; in
# DeepSeek's own traces dpsk::ep::internode::*): kernels that move tokens between GPUs
_OTHER_COMM = re.compile(
    r"(?<![a-z])all_?reduce|(?<![a-z])all_?gather|reduce_?scatter|all_?(?:to|2)_?all|"
    r"cross_device_reduce|(?:deep_?ep|\bep|hybrid_?ep)(?:_\w+)?::(?:intra|inter|low_latency)",
    re.I,
)
_MEMORY = re.compile(r"^(hip)?memcpy|^(hip)?memset|^dma", re.I)
_ATTENTION = re.compile(r"flash|fmha|attention|attn|sdpa|\bmha|_mha", re.I)
# a KV cache write (vLLM's reshape_and_cache_flash_kernel) is a copy, whatever its name says
_NOT_ATTENTION = re.compile(r"reshape_and_cache|cache_kernel", re.I)
# PyTorch's own elementwise and reduction kernels (at::native::), fbgemm's casts among them
_ELEMENTWISE = re.compile(r"elementwise_kernel|reduce_kernel|at::native::", re.I)
# cuBLAS/cuBLASLt (sm90_xmma_gemm_*, nvjet_*), CUTLASS's GEMMs (cutlass_80_tensorop_*gemm*,
# device_kernel<...GemmKernel>), TensorRT-LLM's generated batched GEMMs (bmm_MxE4m3_MxE2m1...) and
# ROCm's Tensile kernels (Cijk_*, what rocBLAS and hipBLASLt run); "cutlass" and "cublas" alone
# are no GEMM (cutlass::bfloat16_t is a type any kernel may take, cublasLt::splitKreduce a sum)
_GEMM = re.compile(r"(?<!fb)gemm|xmma|nvjet|matmul|wgmma|^Cijk_|(?:^|[^a-z])bmm_", re.I)
# helpers inside a GEMM library's namespace (DeepSeek's grouped_gemm::cuda::utils::transpose,
# fill_tensormaps_kernel): memory-bound, not GEMMs
_NOT_GEMM = re.compile(r"::utils::|tensormap|splitkreduce", re.I)
_FP8 = re.compile(r"e4m3|e5m2|fp8|f8f8|_f8_", re.I)
_FP4 = re.compile(r"e2m1|fp4|nvf4|_f4_", re.I)
_COLLECTIVE = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)(?:_([A-Z]+))?", re.I)
# the other collectives by kind (_OTHER_COMM): an expert dispatch or combine is an all-to-all
_KINDS = (
    ("AllReduce", re.compile(r"all_?reduce|cross_device_reduce", re.I)),
    ("AllGather", re.compile(r"all_?gather", re.I)),
    ("ReduceScatter", re.compile(r"reduce_?scatter", re.I)),
    ("AllToAll", re.compile(r"all_?(?:to|2)_?all|::(?:intra|inter|low_latency)", re.I)),
)
_STEP = re.compile(r"^ProfilerStep#\d+")
CHUNK = 1 << 20  # characters read at a time
MAX_KERNEL_US = 3.6e9 * 24  # a kernel event longer than a day (microseconds) is corrupt


def collective_kind(name: str) -> str:
    """A communication kernel's collective: NCCL's from its name (ncclDevKernel_AllGather_...), the
    others by _KINDS; "other" where neither says."""
    m = _COLLECTIVE.search(name)
    if m:
        return m.group(1)
    own = own_name(name)
    return next((kind for kind, pattern in _KINDS if pattern.search(own)), "other")


def own_name(name: str) -> str:
    """A kernel's name without its argument list (the last parenthesized group, which names the
    argument types: flashinfer::QuantizationSFLayout is no attention kernel)."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i] if i else name
    return name


def kernel_class(name: str) -> str:
    """One of CLASSES for a GPU kernel's name: HTA's communication and memory kernels, then the
    other collectives, then computation split by the kernel's own name (own_name)."""
    if _COMM.search(name):
        return "comm"
    if _MEMORY.search(name):
        return "memcpy"
    own = own_name(name)
    if _OTHER_COMM.search(own):
        return "comm"
    if _ATTENTION.search(own) and not _NOT_ATTENTION.search(own):
        return "attention"
    if _GEMM.search(own) and not _ELEMENTWISE.search(own) and not _NOT_GEMM.search(own):
        if _FP4.search(own):
            return "gemm_fp4"
        return "gemm_fp8" if _FP8.search(own) else "gemm_bf16"
    return "elementwise"


@dataclass
class TraceSummary:
    """Kernel seconds by class over the profiled steps of one GPU."""

    source: str
    steps: int
    kernel_s: dict[str, float]
    kernels: dict[str, int]
    collectives_s: dict[str, float] = field(default_factory=dict)
    span_s: float | None = None  # first kernel start to last kernel end (None: no timeline)
    idle_s: float | None = None
    exposed_comm_s: float | None = None

    def per_step(self) -> dict[str, float | None]:
        """Seconds a step: each class, exposed communication, idle and the step itself."""
        n = self.steps
        out: dict[str, float | None] = {c: self.kernel_s.get(c, 0.0) / n for c in CLASSES}
        out["exposed_comm"] = None if self.exposed_comm_s is None else self.exposed_comm_s / n
        out["idle"] = None if self.idle_s is None else self.idle_s / n
        out["step"] = None if self.span_s is None else self.span_s / n
        return out


def _open(path: Path) -> IO[str]:
    try:
        if path.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
        return open(path, encoding="utf-8")
    except FileNotFoundError:
        raise PerfModelError(f"{path}: no such file") from None
    except OSError as e:
        raise PerfModelError(f"{path}: cannot read ({e.strerror})") from None


_KEY = re.compile(r'"traceEvents"\s*:\s*\[')


def iter_events(path: str | Path, chunk: int | None = None) -> Iterator[dict[str, Any]]:
    """The events of a Chrome trace one at a time: the ``traceEvents`` array of an object, or a
    bare array, never more than a few chunks of text and the events of a quarter chunk in memory
    (inputs/trace_stream.py: runs of whole events decoded at once, a corrupt event named by its
    place in the file, a truncated file told from it)."""
    for batch in iter_batches(path, chunk):
        yield from (e for e in batch if isinstance(e, dict))


def iter_batches(path: str | Path, chunk: int | None = None) -> Iterator[list[Any]]:
    """The events of a Chrome trace in lists (runs of events decoded at once; iter_events)."""
    p = Path(path)
    with _open(p) as fh:
        yield from trace_stream.open_batches(p, fh, chunk or CHUNK, _KEY)


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint intervals covering the given ones (HTA's merge_kernel_intervals)."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def _covered(s: np.ndarray, e: np.ndarray, us: np.ndarray, ue: np.ndarray) -> float:
    """Length of the disjoint intervals (s, e) that the disjoint intervals (us, ue) cover."""
    if s.size == 0 or us.size == 0:
        return 0.0
    # cumulative covered length of (us, ue) up to any time x: piecewise linear
    cum = np.r_[0.0, np.cumsum(ue - us)]

    def upto(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(us, x, side="right")  # intervals starting at or before x
        before = cum[np.maximum(i - 1, 0)]
        last = np.where(i > 0, np.clip(x - us[np.maximum(i - 1, 0)], 0.0, None), 0.0)
        last = np.minimum(last, np.where(i > 0, (ue - us)[np.maximum(i - 1, 0)], 0.0))
        return np.where(i > 0, before + last, 0.0)

    return float(np.sum(upto(e) - upto(s)))


_KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_STEP_CATS = ("cpu_op", "user_annotation", None)


def _kernel_times(ev: dict[str, Any], name: str, path: str | Path) -> tuple[float, float]:
    """A kernel event's start and duration (microseconds): numbers, finite, the duration 0 or
    more (a negative one would be summed into its class and hide the class's kernels)."""
    try:
        ts, dur = float(ev["ts"]), float(ev["dur"])
    except (KeyError, TypeError, ValueError):
        raise PerfModelError(
            f"{path}: kernel event {name[:60]!r} has no numeric ts and dur"
        ) from None
    if not (math.isfinite(ts) and math.isfinite(dur) and dur >= 0):
        bad = ("dur", ev["dur"]) if math.isfinite(ts) else ("ts", ev["ts"])
        what = "negative" if bad[0] == "dur" and dur < 0 else "non-finite"
        raise PerfModelError(
            f"{path}: kernel event {name[:60]!r} has a {what} {bad[0]} {bad[1]!r}: the trace is"
            " corrupt"
        )
    if dur > MAX_KERNEL_US:
        raise PerfModelError(
            f"{path}: kernel event {name[:60]!r} has a dur of {dur:.3g} us (over"
            f" {MAX_KERNEL_US / 3.6e9:.0f} hours): the trace is corrupt"
        )
    return ts, dur


def read_kineto(path: str | Path, steps: int | None = None) -> TraceSummary:
    """Kernel seconds by class, exposed communication and idle of a Kineto trace of one GPU.

    The steps are the trace's ``ProfilerStep#N`` annotations (torch.profiler's schedule writes one
    a step), or ``steps`` where the trace has none."""
    kernel_s = dict.fromkeys(CLASSES, 0.0)
    counts = dict.fromkeys(CLASSES, 0)
    coll: dict[str, float] = {}
    starts, ends, comm = array("d"), array("d"), array("b")
    step_names: set[str] = set()
    devices: set[Any] = set()
    classes: dict[str, str] = {}  # kernel_class by name: a trace runs few kernels many times
    for batch in iter_batches(path):
        for ev in batch:
            if not isinstance(ev, dict):
                continue
            cat = ev.get("cat")
            if cat in _KERNEL_CATS:
                name = ev.get("name")
                if not isinstance(name, str) or ev.get("ph") != "X":
                    continue
                ts, dur = _kernel_times(ev, name, path)
                args = ev["args"] if isinstance(ev.get("args"), dict) else {}
                devices.add(args.get("device", ev.get("pid")))
                c = classes.get(name) or classes.setdefault(name, kernel_class(name))
                kernel_s[c] += dur * 1e-6  # Chrome traces count microseconds
                counts[c] += 1
                if c == "comm":
                    key = collective_kind(name)
                    coll[key] = coll.get(key, 0.0) + dur * 1e-6
                starts.append(ts)
                ends.append(ts + dur)
                comm.append(1 if c == "comm" else (2 if c == "memcpy" else 0))
            elif cat in _STEP_CATS:
                name = ev.get("name")
                if isinstance(name, str) and name.startswith("ProfilerStep#") and _STEP.match(name):
                    step_names.add(name)
    if len(devices) > 1:
        raise PerfModelError(
            f"{path}: kernels of {len(devices)} GPUs in one trace; give one rank's trace"
            " (torch.profiler writes one file per rank)"
        )
    n = len(step_names) or steps
    if not n:
        raise PerfModelError(
            f"{path}: no ProfilerStep#N annotations to count the steps by; give the run's"
            " trace_steps: (how many steps the trace holds)"
        )
    s, e, k = (np.frombuffer(a, dtype=t) for a, t in ((starts, "d"), (ends, "d"), (comm, "b")))
    if s.size == 0:
        raise PerfModelError(f"{path}: no GPU kernel events (cat 'kernel'); profile with CUDA")
    all_s, all_e = _union(s, e)
    comm_s, comm_e = _union(s[k == 1], e[k == 1])
    comp_s, comp_e = _union(s[k == 0], e[k == 0])
    span = float(all_e.max() - all_s.min())
    busy = float(np.sum(all_e - all_s))
    exposed = float(np.sum(comm_e - comm_s)) - _covered(comm_s, comm_e, comp_s, comp_e)
    return TraceSummary(
        str(path),
        int(n),
        kernel_s,
        counts,
        coll,
        span * 1e-6,
        (span - busy) * 1e-6,
        exposed * 1e-6,
    )


def read_nsys_csv(path: str | Path, steps: int | None) -> TraceSummary:
    """Kernel seconds by class from ``nsys stats --report cuda_gpu_kern_sum --format csv``."""
    p = Path(path)
    if not steps:
        raise PerfModelError(
            f"{p}: an nsys summary does not say how many steps it covers; give the run's"
            " trace_steps:"
        )
    kernel_s = dict.fromkeys(CLASSES, 0.0)
    counts = dict.fromkeys(CLASSES, 0)
    coll: dict[str, float] = {}
    with _open(p) as fh:
        text = fh.read(64 << 20)  # a summary is one row per kernel name: small
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = next((i for i, ln in enumerate(lines) if "Total Time" in ln and "Name" in ln), None)
    if head is None:
        raise PerfModelError(
            f"{p}: no 'Total Time (ns)' and 'Name' columns: write it with `nsys stats --report"
            " cuda_gpu_kern_sum --format csv`"
        )
    for row in csv.DictReader(lines[head:]):
        total_key = next((k for k in row if k and k.startswith("Total Time")), None)
        name = row.get("Name") or ""
        try:
            ns = float(str(row[total_key]).replace(",", "")) if total_key else float("nan")
        except ValueError:
            raise PerfModelError(f"{p}: Total Time of {name[:60]!r} is not a number") from None
        if not (math.isfinite(ns) and ns >= 0):
            raise PerfModelError(
                f"{p}: Total Time of {name[:60]!r} must be a finite number of 0 or more, got"
                f" {row[total_key]!r}"
            )
        scale = 1e-6 if total_key and "(us)" in total_key else 1e-9
        c = kernel_class(name)
        kernel_s[c] += ns * scale
        counts[c] += _instances(row.get("Instances"), name, p)
        if c == "comm":
            key = collective_kind(name)
            coll[key] = coll.get(key, 0.0) + ns * scale
    if not sum(counts.values()):
        raise PerfModelError(f"{p}: no kernel rows")
    return TraceSummary(str(p), int(steps), kernel_s, counts, coll)


def _instances(cell: Any, name: str, path: Path) -> int:
    """An nsys summary's Instances cell: a whole number of launches (1 without the column)."""
    text = str(cell or 1).replace(",", "").strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise PerfModelError(
            f"{path}: Instances of {name[:60]!r} is not a whole number ({text[:20]!r}); write the"
            " summary again with `nsys stats --report cuda_gpu_kern_sum --format csv`"
        )
    return int(value)


def read(path: str | Path, steps: int | None = None) -> TraceSummary:
    """A Kineto trace (.json, .json.gz) or an nsys stats CSV (.csv), by its name."""
    name = str(path).lower()
    if name.endswith(".csv"):
        return read_nsys_csv(path, steps)
    if name.endswith((".json", ".json.gz")):
        return read_kineto(path, steps)
    raise PerfModelError(
        f"{path}: trace must be a PyTorch profiler trace (.json or .json.gz) or an `nsys stats`"
        " CSV (.csv)"
    )
