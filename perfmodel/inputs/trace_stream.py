"""The events of a Chrome trace's ``traceEvents`` array, read in bounded time and memory.

The array is read a chunk at a time. A run of whole events is decoded at once: the text up to the
last ``}`` of a chunk that closes an event, between ``[`` and ``]``, by one json.loads (C speed,
no Python call per event). JSON is read left to right with no look-ahead, so a prefix of the array
that decodes as a list ends between two of its elements: a cut inside a string or a nested object
fails to decode, and the events are then read one at a time (json.JSONDecoder.raw_decode). That
slow path tells a corrupt trace from a read that stopped inside an event: raw_decode reports a
syntax error where it found it, and a read cut short only at the end of the text (or, for a
string still open, where the string starts), so an error more than TAIL characters before the end
of what was read is a syntax error at once, named by its character in the file; an event longer
than a chunk is read on with reads as long as what is held (geometric growth: linear time), up to
MAX_EVENT characters.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from perfmodel.errors import PerfModelError

# how far before the end of the text a read cut short can leave raw_decode's error: a literal cut
# inside (fals), a number's exponent (1e), a \uXXXX escape split in two (\ud83d\ud)
TAIL = 16
MAX_EVENT = 1 << 30  # characters: an event longer (or a string that never closes) is refused
_SEP = " \t\r\n,"
_NEXT = re.compile(r"[ \t\r\n]*(?:,[ \t\r\n]*\{|\])")  # what follows an event's closing brace


class _Reader:
    """A text buffer over a file: ``buf[pos:]`` not yet read, ``base`` characters dropped."""

    def __init__(self, fh: IO[str], chunk: int, label: str) -> None:
        self.fh, self.chunk, self.label = fh, chunk, label
        self.buf, self.pos, self.base, self.eof = "", 0, 0, False

    def more(self, size: int | None = None) -> bool:
        """Read on (``size`` characters, default a chunk), dropping what was read; False at EOF."""
        text = self.fh.read(size or self.chunk)
        if not text:
            self.eof = True
            return False
        self.base += self.pos
        self.buf, self.pos = self.buf[self.pos :] + text, 0
        return True

    def skip(self) -> None:
        """Past the separators between events, reading on where the buffer runs out."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _SEP:
                pos += 1
            self.pos = pos
            if pos < len(buf) or not self.more():
                return

    def where(self, index: int) -> str:
        return f"character {self.base + index:,} of the file"

    def one(self, dec: json.JSONDecoder) -> Any:
        """The event at ``pos`` (raw_decode), reading on while the text ends inside it."""
        while True:
            try:
                event, end = dec.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise PerfModelError(
                    f"{self.label}: traceEvents: the event at {self.where(self.pos)} nests too"
                    " deeply to read: the trace is corrupt"
                ) from None
            except json.JSONDecodeError as e:
                open_string = e.msg.startswith("Unterminated string")
                if (e.pos >= len(self.buf) - TAIL or open_string) and not self.eof:
                    held = len(self.buf) - self.pos
                    if held > MAX_EVENT:
                        raise PerfModelError(
                            f"{self.label}: traceEvents: the event at {self.where(self.pos)} runs"
                            f" over {MAX_EVENT >> 20} MB without closing: the trace is corrupt"
                        ) from None
                    self.more(max(self.chunk, held))  # as long as what is held: linear time
                    continue
                if open_string or e.pos >= len(self.buf.rstrip()):
                    raise PerfModelError(
                        f"{self.label}: traceEvents: the file ends inside the event at"
                        f" {self.where(self.pos)} ({e.msg}): the trace is truncated"
                    ) from None
                raise PerfModelError(
                    f"{self.label}: traceEvents: bad JSON at {self.where(e.pos)} ({e.msg}): the"
                    " trace is corrupt"
                ) from None
            self.pos = end
            return event

    def batch(self, decode: Any) -> list[Any] | None:
        """The whole events from ``pos`` to the last one that closes within a window of the
        buffer (a quarter chunk) and is followed by another or by the array's end, decoded at
        once; None where no such cut decodes (the caller then reads this buffer one event at a
        time)."""
        buf, pos = self.buf, self.pos
        end = min(len(buf), pos + max(self.chunk // 4, 4096))
        tried = 0
        for _ in range(256):  # closing braces looked at, from the window's end back
            cut = buf.rfind("}", pos, end)
            if cut < 0 or tried == 3:
                break
            end = cut
            if not _NEXT.match(buf, cut + 1):
                continue
            tried += 1
            collect = gc.isenabled()
            gc.disable()  # every event decoded lives until the batch is read: nothing to collect
            try:
                events = decode("[" + buf[pos : cut + 1] + "]")
            except (json.JSONDecodeError, RecursionError):
                continue
            finally:
                if collect:
                    gc.enable()
            self.pos = cut + 1
            return events if isinstance(events, list) else None
        return None


def batches(fh: IO[str], label: str, chunk: int, key: Any) -> Iterator[list[Any]]:
    """Lists of the events (dicts and any other values) of the array that ``key`` (a compiled
    pattern for ``"traceEvents": [``) opens, or of a bare array: ``fh`` read ``chunk``
    characters at a time."""
    r = _Reader(fh, chunk, label)
    r.more()
    start = len(r.buf) - len(r.buf.lstrip())
    if r.buf[start : start + 1] == "[":
        r.pos = start + 1
    else:
        m = key.search(r.buf)
        while m is None and not r.eof:
            r.pos = max(len(r.buf) - 64, 0)  # the key may straddle two reads
            r.more()
            m = key.search(r.buf)
        if m is None:
            raise PerfModelError(
                f"{label}: no traceEvents array: not a Chrome trace (PyTorch profiler's"
                " export_chrome_trace or tensorboard_trace_handler writes one)"
            )
        r.pos = m.end()
    dec = json.JSONDecoder()
    decode = dec.decode
    slow_until = 0  # characters of the file to read one event at a time
    while True:
        r.skip()
        if r.pos >= len(r.buf):
            raise PerfModelError(f"{label}: the traceEvents array never closes (truncated?)")
        if r.buf[r.pos] == "]":
            return
        many = r.batch(decode) if r.base + r.pos >= slow_until else None
        if many is not None:
            yield many
            continue
        # no cut decodes: this buffer one event at a time (a corrupt event is named there)
        slow_until = max(slow_until, r.base + len(r.buf))
        yield [r.one(dec)]
        if r.pos < len(r.buf) and r.buf[r.pos] not in _SEP + "]":
            raise PerfModelError(
                f"{label}: traceEvents: bad JSON at {r.where(r.pos)} (expected ',' between"
                " events): the trace is corrupt"
            )


def open_batches(path: Path, fh: IO[str], chunk: int, key: Any) -> Iterator[list[Any]]:
    """batches() over an open file, a read failure one line naming the file."""
    try:
        yield from batches(fh, str(path), chunk, key)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise PerfModelError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
