"""The layer split of a pipeline whose degree does not divide the layers: the split the estimate
assumes (cost/stages.split_layers: the one whose slowest stage is fastest, the embedding and the
loss counted), in words, and what Megatron-Core needs to run a split of that kind.

Megatron-Core splits evenly unless told: --decoder-first-pipeline-num-layers and
--decoder-last-pipeline-num-layers take the ends, and TransformerConfig requires the rest to divide
evenly over the middle stages (and each stage by vp); --pipeline-model-parallel-layout takes any
split (megatron/core/transformer/transformer_config.py, pipeline_parallel_layout.py)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache


def uneven(num_layers: int, pp: int, first: int | None, last: int | None) -> bool:
    """Whether the split is the model's choice: pp > 1 does not divide the layers and the plan
    gives neither end's layers."""
    return pp > 1 and num_layers % pp != 0 and not first and not last


def split_text(layers: Sequence[float]) -> str:
    """13|14|14|13|13|13: the decoder layers of each stage, first stage first."""
    return "|".join(f"{x:g}" for x in layers)


def flags_split(num_layers: int, pp: int, vp: int, near: Sequence[float]) -> list[int] | None:
    """The split nearest ``near`` that --decoder-first/last-pipeline-num-layers can launch: the
    middle stages share the rest evenly and vp divides every stage (ends kept light on a tie: they
    hold the embedding and the loss); None when none exists."""
    split = _flags_split(num_layers, pp, vp, int(near[0]), int(near[-1]))
    return None if split is None else list(split)


@lru_cache(maxsize=1024)
def _flags_split(num_layers: int, pp: int, vp: int, f0: int, l0: int) -> tuple[int, ...] | None:
    """flags_split given the ends of ``near`` (all it reads), once per input: a search asks it of
    every configuration it details, and many share a pipeline."""
    best: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    mid_n = pp - 2
    w = 2 * pp * vp  # the ends move at most this far to make the middle divide
    for f in range(max(1, f0 - w), min(num_layers, f0 + w + 1)):
        for last in range(max(1, l0 - w), min(num_layers - f, l0 + w) + 1):
            rest = num_layers - f - last
            if (mid_n == 0 and rest) or (mid_n and (rest < mid_n or rest % mid_n)):
                continue
            mid = rest // mid_n if mid_n else f  # every middle stage's layers
            if f % vp or last % vp or mid % vp:
                continue
            key = (
                abs(f - f0) + abs(last - l0),
                max(f, mid, last),
                max(abs(f - f0), abs(last - l0)),
                f + last,
            )
            if best is None or key < best[0]:
                best = (key, (f, *([mid] * mid_n), last))
    return None if best is None else best[1]


def pp_dividing(num_layers: int, pp: int, ranks: int | None = None) -> list[int]:
    """The pipeline degrees nearest pp (one below, one above) that divide the layers and, given,
    the ``ranks`` a pipeline can take (num_gpus / (tp cp): dp takes the rest)."""

    def fits(d: int) -> bool:
        return num_layers % d == 0 and (ranks is None or ranks % d == 0)

    below = [d for d in range(pp - 1, 1, -1) if fits(d)][:1]
    above = [d for d in range(pp + 1, num_layers + 1) if fits(d)][:1]
    return below + above


def megatron_needs(
    num_layers: int, pp: int, vp: int, layers: Sequence[float] | None, ranks: int | None = None
) -> str:
    """What Megatron-Core needs to run a pp that does not divide the layers: the first/last stage
    flags (the split they give), the layout flag for ``layers`` itself when the flags cannot give
    it, or a pp that divides."""
    near = layers if layers else [num_layers // pp] * pp
    flags = flags_split(num_layers, pp, vp, near)
    if flags is not None and layers and max(flags) > max(layers):
        flags = None  # the flags' nearest split has a fuller stage: slower, so not offered
    out = []
    if flags is not None:
        out.append(
            f"--decoder-first-pipeline-num-layers {flags[0]} --decoder-last-pipeline-num-layers"
            f" {flags[-1]} (split {split_text(flags)}; parallel.decoder_first_pipeline_num_layers"
            " / decoder_last_pipeline_num_layers)"
        )
    if layers and (flags is None or list(flags) != [int(x) for x in layers]):
        out.append(f"--pipeline-model-parallel-layout for {split_text(layers)} itself")
    divisors = pp_dividing(num_layers, pp, ranks)
    if divisors:
        of = f" and the {ranks:,} ranks tp x cp leave" if ranks is not None else ""
        out.append(f"pp {' or '.join(str(d) for d in divisors)} (divides {num_layers}{of})")
    return "; or ".join(out)


def assumed_text(
    num_layers: int, pp: int, vp: int, layers: Sequence[float], ranks: int | None = None
) -> str:
    """The assumption line of an estimate whose pp does not divide the layers (``ranks``: what
    tp x cp leave to pp x dp)."""
    return (
        f"layer split: pp {pp} does not divide the {num_layers} layers; the estimate uses"
        f" {split_text(layers)} (first stage first; the stages balanced with the embedding and the"
        " loss). Megatron-Core runs it only when told:"
        f" {megatron_needs(num_layers, pp, vp, layers, ranks)}"
    )
