"""Megatron-Core's --pipeline-model-parallel-layout (Megatron-Core 0.13+,
docs/source/api-guide/pipeline_parallel_layout.md), written and read: one '|'-separated entry per
virtual stage, virtual stage v of pipeline rank r at position v * pp + r; 'E' the embedding, 't' a
decoder layer, 'm' a multi-token-prediction layer, 'L' the loss; 'x*n' and '(...)*n' repeat."""

from __future__ import annotations

import re

from perfmodel.errors import PerfModelError

FLAG = "--pipeline-model-parallel-layout"


def layout_text(layers: list[int], vp: int, mtp: int = 0) -> str:
    """The layout for the layers on each pipeline rank over its vp chunks: the embedding counts
    as a unit in the first rank's first chunk and the loss in the last rank's last chunk, and each
    rank's units are spread as evenly as they go, larger chunks first (the cost model gives a
    rank's chunks equal shares, exact when vp divides its layers); the MTP layers ('m') just
    before the loss, where the cost model holds them."""
    pp = len(layers)
    per_rank = [_chunks(layers[r], vp, int(r == 0), int(r == pp - 1)) for r in range(pp)]
    out = []
    for v in range(vp):
        for r in range(pp):
            e, loss = r == 0, r == pp - 1
            out.append(
                ("E" if e and v == 0 else "")
                + "t" * per_rank[r][v]
                + ("m" * mtp + "L" if loss and v == vp - 1 else "")
            )
    return compact(out)


def compact(entries: list[str]) -> str:
    """Stage entries joined by '|', written short with the layout's own repeats (the form of
    Megatron-Core's docs, "Et*3|(tt|)*29,m|L"): a run of k equal entries as '(e|)*k', a letter
    repeated n times as 'x*n', wherever that is shorter; so a 64-stage layout fits one line."""

    def word(e: str) -> str:
        return re.sub(r"([EtmL])\1{3,}", lambda m: f"{m.group(1)}*{len(m.group(0))}", e)

    out, i = [], 0
    while i < len(entries):
        j = i
        while j < len(entries) and entries[j] == entries[i]:
            j += 1
        k, last = j - i, j == len(entries)
        plain = "|".join([word(entries[i])] * k) + ("" if last else "|")
        # the last run keeps its last entry outside the group (no trailing '|' to repeat)
        reps = k - 1 if last else k
        group = f"({word(entries[i])}|)*{reps}" + (word(entries[i]) if last else "")
        out.append(group if reps > 1 and len(group) < len(plain) else plain)
        i = j
    return "".join(out)


def _chunks(layers: int, vp: int, e: int, loss: int) -> list[int]:
    """A rank's decoder layers over its vp chunks, the embedding (e) and loss units counted in the
    first and last chunk: units as even as they go, larger chunks first; a chunk whose unit is all
    it holds gives its share to the largest other chunk, so the layers add up."""
    units = layers + e + loss
    sizes = [units // vp + (v < units % vp) for v in range(vp)]
    sizes[0] -= e
    sizes[-1] -= loss
    while min(sizes) < 0:
        low = sizes.index(min(sizes))
        high = sizes.index(max(sizes))
        sizes[low] += 1
        sizes[high] -= 1
    return sizes


def _expand(text: str) -> str:
    """'(...)*n' and 'x*n' repeated out, innermost group first."""
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while group.search(text):
        text = group.sub(lambda m: m.group(1) * int(m.group(2)), text)
    text = re.sub(r"([EtmL])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    if re.search(r"[^EtmL|,]", text):
        raise PerfModelError(
            f"{FLAG}: {text!r} has characters besides E, t, m, L, '|', ',' and repeats x*n, (...)*n"
        )
    return text.replace(",", "")


def read_layout(text: str, pp: int, vp: int, mtp: int = 0) -> list[int]:
    """The layers on each pipeline rank of a layout, checked as Megatron-Core and the cost model
    need it: pp x vp virtual stages, the embedding first, the loss last, the ``mtp`` MTP layers
    ('m') in the last stage (the cost model gives a rank's chunks equal shares of its layers)."""
    stages = _expand(text.strip().strip("'\"")).split("|")
    if len(stages) != pp * vp:
        raise PerfModelError(
            f"{FLAG}: {len(stages)} stages for pp({pp}) x vp({vp}) = {pp * vp}; give one entry per"
            " virtual stage"
        )
    placed = "".join(stages).count("m")
    if placed != mtp or "m" in "".join(stages[:-1]):
        raise PerfModelError(
            f"{FLAG}: {placed} MTP layer(s) ('m') for --mtp-num-layers {mtp}, and perfmodel models"
            " them in the last stage, as Megatron-Core places them by default; put every 'm' in"
            " the last entry"
        )
    if not stages[0].startswith("E") or not stages[-1].endswith("L"):
        raise PerfModelError(f"{FLAG}: the first stage must hold E and the last L")
    chunks = [[stages[v * pp + r].count("t") for v in range(vp)] for r in range(pp)]
    return [sum(c) for c in chunks]


def first_last(layers: list[int]) -> tuple[int, int]:
    """The first and last stage layers of a split the cost model can hold: any first and last,
    the middle stages sharing the rest as evenly as it goes (cost/stages.split_layers)."""
    middle = layers[1:-1]
    if middle and max(middle) - min(middle) > 1:
        raise PerfModelError(
            f"{FLAG}: middle stages of {min(middle)} to {max(middle)} layers; perfmodel models"
            " any first and last stage with the middle ones sharing the rest within one layer"
        )
    return layers[0], layers[-1]
