"""nccl-tests' (and rccl-tests') standard output, read into sizes and times (issue 39).

NVIDIA/nccl-tests prints, for each message size, ``size count type redop root`` and then, out of
place and in place, ``time algbw busbw #wrong`` (src/common.cu, printHeader/printLine; older
releases have no ``root`` column and call the last one ``error``; ROCm/rccl-tests prints the same).
Sizes are in bytes, times in microseconds, bandwidths in GB/s (1e9 bytes/s). The bus bandwidth is
the algorithm bandwidth (size / time) times 2 (n - 1) / n for an all-reduce, (n - 1) / n for an
all-gather, a reduce-scatter or an all-to-all, and 1 for send/receive
(doc/PERFORMANCE.md, "Bus bandwidth"). The header lists one ``#  Rank`` line per rank with the host
it runs on, so the file itself says how many ranks and nodes it measured.

Which collective a file measured is not printed: it comes from the caller, or from the file's name
(``all_reduce_perf.txt``), or from the ratio of busbw to algbw where that ratio tells it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from perfmodel.errors import PerfModelError

# nccl-tests' binaries and the collective each times (cost/collectives.py names)
COLLECTIVES = {
    "all_reduce": "all-reduce",
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "alltoall": "all-to-all",
    "sendrecv": "p2p",
}
_RANK = re.compile(r"^#\s*Rank\s+\d+\s+.*?\bon\s+(\S+)\s+device")
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class NcclTest:
    """One nccl-tests run: its collective, ranks and nodes, and per message size (bytes, sorted)
    the out-of-place time (s), algorithm and bus bandwidth (bytes/s)."""

    path: str
    collective: str
    ranks: int
    nodes: int
    gpu: str
    sizes: tuple[float, ...]
    times_s: tuple[float, ...]
    algbw: tuple[float, ...]
    busbw: tuple[float, ...]


def bus_factor(collective: str, n: int) -> float:
    """busbw / algbw of a collective on n ranks (nccl-tests doc/PERFORMANCE.md)."""
    if collective == "all-reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    return 1.0


def collective_of_name(path: str) -> str | None:
    """The collective a file's name says (``all_gather_perf.log``, ``ar-8gpu.txt`` says none)."""
    stem = Path(path).name.lower().replace("-", "_")
    for key, name in COLLECTIVES.items():
        if key in stem:
            return name
    return None


def _header(text: str, where: str) -> tuple[list[str], float, list[str], int]:
    """(column names, seconds per time unit, rank hosts, nGpus per thread x threads)."""
    columns: list[str] = []
    unit = 1e-6
    hosts: list[str] = []
    for line in text.splitlines():
        if not line.startswith("#"):
            continue
        words = line.lstrip("#").split()
        m = _RANK.match(line)
        if m:
            hosts.append(m.group(1))
        elif "size" in words and "busbw" in words and not columns:
            columns = words
        elif columns and words[:1] == ["(B)"]:
            for w in words:
                if w.strip("()") in _TIME_UNITS:
                    unit = _TIME_UNITS[w.strip("()")]
                    break
    if not columns or "time" not in columns:
        raise PerfModelError(
            f"{where}: not nccl-tests output (no '# size count type ... time algbw busbw' header);"
            " give the standard output of all_reduce_perf, all_gather_perf, reduce_scatter_perf,"
            " alltoall_perf or sendrecv_perf"
        )
    m = re.search(r"nThread\s+(\d+)\s+nGpus\s+(\d+)", text)
    per_process = int(m.group(1)) * int(m.group(2)) if m else 0
    return columns, unit, hosts, per_process


def _rows(text: str, columns: list[str], unit: float, where: str) -> list[tuple[float, ...]]:
    t = columns.index("time")
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or line.lstrip().startswith("#") or not words[0].isdigit():
            continue
        if len(words) < t + 3:
            raise PerfModelError(
                f"{where}: line {lineno}: {len(words)} columns, expected the header's"
            )
        try:
            size, time, alg, bus = (float(words[i]) for i in (0, t, t + 1, t + 2))
        except ValueError:
            raise PerfModelError(
                f"{where}: line {lineno}: size, time, algbw and busbw must be numbers"
            ) from None
        if not all(math.isfinite(v) and v >= 0 for v in (size, time, alg, bus)):
            raise PerfModelError(f"{where}: line {lineno}: a negative or non-finite figure")
        if size > 0 and time > 0:
            rows.append((size, time * unit, alg * 1e9, bus * 1e9))
    if not rows:
        raise PerfModelError(f"{where}: no measured sizes (lines of size, count, ..., time)")
    return sorted(rows)


def _infer(rows: list[tuple[float, ...]], ranks: int, where: str) -> str:
    """The collective the busbw / algbw ratio tells (all-reduce, p2p), or an error asking."""
    big = [r for r in rows if r[2] > 0]
    if not big or ranks < 2:
        raise PerfModelError(f"{where}: say which collective it measured (collective:)")
    ratio = big[-1][3] / big[-1][2]
    for name in ("all-reduce", "p2p"):
        if abs(ratio - bus_factor(name, ranks)) < 0.02:
            return name
    raise PerfModelError(
        f"{where}: busbw/algbw {ratio:.3f} fits all-gather, reduce-scatter and all-to-all alike;"
        " say which (collective: all_gather, reduce_scatter or alltoall)"
    )


def read(
    path: str | Path, collective: str | None = None, ranks: int | None = None, label: str = ""
) -> NcclTest:
    """One nccl-tests output file. ``collective``: an nccl-tests name (all_reduce ...) or a
    perfmodel one; ``ranks`` where the file lists none (a run without its header)."""
    where = label or str(path)
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise PerfModelError(f"{where}: no such file") from None
    except OSError as e:
        raise PerfModelError(f"{where}: cannot read ({e.strerror})") from None
    columns, unit, hosts, per_process = _header(text, where)
    rows = _rows(text, columns, unit, where)
    n = ranks or len(hosts) or per_process
    if not n:
        raise PerfModelError(f"{where}: the file lists no '#  Rank' lines; give ranks:")
    name = None
    if collective is not None:
        key = collective.strip().lower().replace("-", "_").removesuffix("_perf")
        name = COLLECTIVES.get(key) or (collective if collective in COLLECTIVES.values() else None)
        if name is None:
            raise PerfModelError(
                f"{where}: collective {collective!r}: use one of {', '.join(COLLECTIVES)}"
            )
    name = name or collective_of_name(str(path)) or _infer(rows, n, where)
    gpu = ""
    m = re.search(r"device\s+\d+\s+\[[^\]]*\]\s+(.+)", text)
    if m:
        gpu = m.group(1).strip()
    return NcclTest(
        str(path),
        name,
        int(n),
        max(1, len(set(hosts))),
        gpu,
        tuple(r[0] for r in rows),
        tuple(r[1] for r in rows),
        tuple(r[2] for r in rows),
        tuple(r[3] for r in rows),
    )
