"""What the commands share: parameter types, the options several commands take, and the plan
argument.

Imports only click and the standard library at module level, so `perfmodel --help` stays fast; what
a command computes with is imported when it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from perfmodel.specs.framework import FRAMEWORK_ALIASES, FRAMEWORKS

# specs.parallel.SCHEDULES, written out so that --help loads no pydantic (tests/test_schedule.py
# checks the two agree)
SCHEDULE_NAMES = (
    "gpipe", "1f1b", "interleaved", "dualpipe", "zb-h1", "zb-h2", "zbv", "v-half", "v-min",
    "dualpipev", "interleaved-zb",
)  # fmt: skip

if TYPE_CHECKING:
    from perfmodel.specs import Plan

F = TypeVar("F", bound=Callable[..., Any])
# any count a user passes (GPUs, micro-batches, sizes) stays a finite float in every formula
MAX_COUNT = 2**40

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Machine-readable output (stable keys)."
)


def _set_markdown(ctx: click.Context, param: click.Parameter, value: str) -> None:
    from perfmodel.output import console

    console.set_markdown(value == "markdown")


format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    expose_value=False,
    callback=_set_markdown,
    help="markdown: tables as GitHub Markdown, to paste into a design document or a pull request.",
)


class _Count(click.IntRange):
    """click's IntRange without its range in the help ("[1<=x<=1099511627776]" reads as noise);
    the bounds still hold, and a value outside them is named with the bound it breaks."""

    name = "integer"

    def _describe_range(self) -> str:
        return ""  # click puts this in the help; the bounds are in the error instead

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        n = click.INT.convert(value, param, ctx)
        if self.min is not None and n < self.min:
            self.fail(f"{n} is below {self.min}; give {self.min} or more", param, ctx)
        if self.max is not None and n > self.max:
            top = f"2^{int(math.log2(self.max))}" if self.max > 1e6 else f"{self.max}"
            self.fail(f"{n} is above {top}, more than any machine or batch", param, ctx)
        return n

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "INTEGER"


def count(min_value: int = 1, max_value: int = MAX_COUNT) -> click.IntRange:
    """A whole number in a range where every formula stays finite."""
    return _Count(min_value, max_value)


class Finite(click.ParamType):
    """A finite float in [low, high] (click's FloatRange lets nan and inf through)."""

    name = "number"

    def __init__(self, low: float, high: float, low_open: bool = False, high_open: bool = False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        text = str(value).strip()
        try:
            # a share may be written as a percentage where the range is a fraction: 10% = 0.10
            x = float(text[:-1]) / 100 if text.endswith("%") and self.high <= 1 else float(text)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        outside = x < self.low or x > self.high
        if outside or (self.low_open and x == self.low) or (self.high_open and x == self.high):
            lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
            self.fail(f"{x:g} is outside {lo}{self.low:g}, {self.high:g}{hi}", param, ctx)
        return x


def quantity(
    dimension: str,
) -> Callable[[click.Context, click.Parameter, str | None], float | None]:
    """click callback: '67.1MB' -> bytes (SI), with the field named on error."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
        from perfmodel.units import EXAMPLES, QuantityError, parse_quantity

        if value is None:
            return None
        try:
            float(value)
        except ValueError:
            pass
        else:  # a bare number on the command line is a mistake waiting: 67.1 would be bytes
            raise click.BadParameter(f"{value!r} has no unit; write it like {EXAMPLES[dimension]}")
        try:
            return parse_quantity(value, dimension)
        except QuantityError as e:
            raise click.BadParameter(str(e)) from None

    return convert


tokens_option = click.option(
    "--tokens",
    help="Tokens to train on (300B, 15.6T): days, GPU-hours, energy, cost, goodput.",
)


calibration_option = click.option(
    "--calibration",
    "calibration",
    metavar="CAL.yaml",
    help="Factors fitted on your own runs (perfmodel calibrate); the band becomes theirs.",
)


def parallel_options(f: F) -> F:
    """The knobs a user may fix on the command line (they override the plan's parallel section)."""
    opts = [
        click.option("--tp", type=count(), help="Tensor-parallel degree."),
        click.option("--pp", type=count(), help="Pipeline stages."),
        click.option("--dp", type=count(), help="Data-parallel replicas."),
        click.option("--cp", type=count(), help="Context-parallel degree."),
        click.option(
            "--dp-shard", "dp_shard", type=count(), help="HSDP: data-parallel ranks per shard."
        ),
        click.option("--vp", type=count(), help="Virtual stages per GPU (interleaving)."),
        click.option("--mbs", type=count(), help="Micro-batch size."),
        click.option(
            "--sp/--no-sp", "sequence_parallel", default=None, help="Sequence parallelism."
        ),
        click.option("--recompute", type=click.Choice(["none", "selective", "full"])),
        click.option("--zero", "zero_stage", type=click.IntRange(0, 3), help="ZeRO stage."),
        click.option(
            "--schedule",
            type=click.Choice(list(SCHEDULE_NAMES)),
            metavar="NAME",
            help="Pipeline schedule: " + ", ".join(SCHEDULE_NAMES) + " (docs/schedules.md).",
        ),
        click.option("--gpus", type=count(), help="Override the plan's GPU count."),
        click.option(
            "--framework",
            type=click.Choice([*FRAMEWORKS, *FRAMEWORK_ALIASES], case_sensitive=False),
            metavar="PROFILE",
            help=(
                f"Framework profile: {', '.join(FRAMEWORKS)}, or what people call them"
                " (torchtitan, megatron, nemo: docs/inputs.md)."
            ),
        ),
        tokens_option,
        calibration_option,
        click.option(
            "--memory-reserve",
            help=(
                "HBM held back (CUDA context, NCCL and cuBLAS workspaces, fragmentation): "
                "a share (5%, 0.05) or a size (4GB); default 5% of HBM."
            ),
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def launch_options(f: F) -> F:
    """For a Megatron-LM launch file or a NeMo recipe given where a plan is expected."""
    f = click.option(
        "--vocab-size",
        type=count(),
        help="Megatron or NeMo file: the vocabulary, where it has none.",
    )(f)
    return click.option(
        "--gpu",
        "launch_gpu",
        help="Megatron or NeMo file given as the plan: the GPU preset (such files do not name it).",
    )(f)


def overrides(kw: dict[str, Any]) -> dict[str, Any]:
    """The parallel knobs given as flags, in the plan's own field names."""
    keys = (
        "tp",
        "pp",
        "dp",
        "cp",
        "dp_shard",
        "vp",
        "sequence_parallel",
        "recompute",
        "zero_stage",
        "schedule",
    )
    out = {k: kw.get(k) for k in keys if kw.get(k) is not None}
    if kw.get("mbs") is not None:
        out["micro_batch_size"] = kw["mbs"]
    return out


def load_plan(source: str, kw: dict[str, Any], refuse_unused: bool = True) -> Plan:
    """The plan argument of a command through the one way in (perfmodel.inputs.load), with --gpus,
    --gpu and --vocab-size as given, the reading's notes on stderr, and the knob flags applied."""
    from perfmodel import inputs

    loaded = inputs.load(
        source,
        gpu=kw.get("launch_gpu"),
        gpus=kw.get("gpus"),
        vocab_size=kw.get("vocab_size"),
        refuse_unused=refuse_unused,
        parallel=overrides(kw),
    )
    import textwrap

    for note in loaded.notes:
        # within 80 columns, continued under a hanging indent, as every other output
        for ln in textwrap.wrap(
            f"{source}: {note}", 80, subsequent_indent="  ", break_on_hyphens=False
        ):
            click.echo(ln, err=True)
    return with_plan_flags(loaded.plan, kw, f"the plan {source}")


def with_plan_flags(plan: Plan, kw: dict[str, Any], source: str = "the plan") -> Plan:
    """The flags that change a plan beyond its knobs: --framework, --tokens, --memory-reserve,
    --calibration (a plan file's and the quick case's alike)."""
    from perfmodel.specs.calibrated_plan import without_calibration

    # the flags change the plan as the presets have it; its calibration is applied last
    cal, plan = plan.calibration, without_calibration(plan)
    if kw.get("framework") is not None:
        name = kw["framework"]
        plan = plan.with_training(framework=FRAMEWORK_ALIASES.get(name, name))
        if name in FRAMEWORK_ALIASES:
            note = f"--framework {name} read as the {FRAMEWORK_ALIASES[name]} profile (an alias)"
            plan = plan.model_copy(update={"read_as": [*plan.read_as, note]})
    if kw.get("tokens") is not None:
        plan = with_tokens(plan, kw["tokens"])
    if kw.get("memory_reserve") is not None:
        plan = with_reserve(plan, kw["memory_reserve"])
    if kw.get("calibration") is not None:
        from perfmodel.errors import PerfModelError
        from perfmodel.inputs import calibration

        if cal is not None:
            raise PerfModelError(
                f"--calibration: {source} is already calibrated (its calibration: key,"
                f" {cal.source}); give one calibration, in the plan or as --calibration"
            )
        cal = calibration.read(kw["calibration"], "--calibration")
    if cal is not None:
        from perfmodel.specs.calibrated_plan import with_calibration

        plan = with_calibration(plan, cal)
    return plan


def with_tokens(plan: Plan, value: str) -> Plan:
    """The plan with --tokens VALUE (300B, 15.6T, 3e11)."""
    from perfmodel.errors import PerfModelError

    try:
        return plan.with_training(tokens=value)
    except PerfModelError as e:
        raise click.BadParameter(str(e).split("tokens: ")[-1], param_hint="--tokens") from None


def with_reserve(plan: Plan, value: str) -> Plan:
    """The plan with --memory-reserve VALUE: a share of HBM (5%, 0.05) or a size (4GB)."""
    from perfmodel.errors import PerfModelError

    try:
        share = float(value)
    except ValueError:
        share = None
    try:
        return plan.with_system(memory_reserve=value if share is None else share)
    except PerfModelError as e:
        raise click.BadParameter(
            str(e).split("memory_reserve: ")[-1], param_hint="--memory-reserve"
        ) from None


def write_text(path: str, text: str, what: str, source: str | None = None) -> None:
    """Write a file a command produces, announced on stderr; an unwritable path, or the command's
    own input file (``source``), is one clear line."""
    import os

    from perfmodel.errors import PerfModelError

    if not path.strip():
        raise PerfModelError(f"{what} needs a file name")
    if (
        source
        and os.path.exists(source)
        and os.path.exists(path)
        and os.path.samefile(source, path)
    ):
        raise PerfModelError(
            f"{what} {path}: that is the input file, which this would overwrite; write elsewhere"
        )
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as e:
        raise PerfModelError(f"cannot write {path}: {e.strerror}") from None
    click.echo(f"wrote {path}", err=True)


def _plot_path(ctx, param, value: str | None) -> str | None:
    """--plot's file, its name checked before any work is done (output/plots.path_problem)."""
    if value is None:
        return None
    from perfmodel.output.plots import path_problem

    problem = path_problem(value)
    if problem:
        raise click.BadParameter(problem, ctx, param)
    return value


def plot_option(help_text: str):
    """--plot FILE, with its extension checked before the command runs."""
    return click.option(
        "--plot", type=click.Path(dir_okay=False), callback=_plot_path, help=help_text
    )
