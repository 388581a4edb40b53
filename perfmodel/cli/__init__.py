"""The `perfmodel` command group: one-line errors, and commands loaded when they are asked for.

Library errors become one-line messages with exit code 1; usage errors exit 2; no traceback reaches
a user for bad input. Each command lives in the module of its family (COMMANDS below) and is
imported only when it runs or when `--help` lists it; those modules import the heavy parts
(pydantic, numpy, rich) inside the command, so `perfmodel --help` starts in a fraction of a second.
The command modules import perfmodel.cli.common, never this module: the group knows them by name,
they do not know it.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

# command name -> (module under perfmodel.cli, attribute), in the order `--help` lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("plans", "plan_cmd"),
    "estimate": ("plans", "estimate"),
    "memory": ("plans", "memory"),
    "schedule": ("plans", "schedule_cmd"),
    "check": ("review", "check_cmd"),
    "compare": ("review", "compare_cmd"),
    "sweep": ("review", "sweep_cmd"),
    "validate": ("review", "validate"),
    "report": ("review", "report_cmd"),
    "calibrate": ("calibrate", "calibrate_cmd"),
    "import": ("imports", "import_group"),
    "bubble": ("calc", "bubble"),
    "roofline": ("calc", "roofline"),
    "comm": ("calc", "comm"),
    "sp": ("calc", "sp"),
    "presets": ("calc", "presets_cmd"),
}


def short(message: str, limit: int = 600) -> str:
    """Error messages stay a few lines long, whatever value a user's input expanded to."""
    if len(message) <= limit:
        return message
    return message[:limit] + f"... ({len(message) - limit:,} more characters)"


WIDTH = 80  # the widest line the tool prints (the guide's "at most 80 columns")


def wrapped(text: str, first: str = "Error: ") -> str:
    """``text`` as it is printed after ``first``: each of its lines filled to WIDTH columns, the
    continuations indented two spaces (words are not split: a path longer than a line stays whole).
    """
    import textwrap

    lines = []
    for i, line in enumerate(text.splitlines() or [""]):
        lead = first if i == 0 else ""
        lines.append(
            textwrap.fill(
                lead + line,
                WIDTH,
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )[len(lead) :]
            or line
        )
    return "\n".join(lines)


def _wrap_message(e: click.ClickException) -> click.ClickException:
    """The exception, its message to be filled to the terminal's 80 columns when click prints it
    ("Error: " and the message; a usage error's hint line stays as click writes it)."""
    plain = e.format_message
    e.format_message = lambda: wrapped(plain())  # type: ignore[method-assign]
    return e


def _user_error(e: Exception) -> str | None:
    """The one-line message of an error a user's input caused, or None for a bug."""
    from perfmodel.errors import PerfModelError
    from perfmodel.units import QuantityError

    if isinstance(e, (PerfModelError, QuantityError)):
        return str(e)
    if "pydantic" in sys.modules:
        from pydantic import ValidationError

        if isinstance(e, ValidationError):
            from perfmodel.specs.base import format_validation_error

            return format_validation_error(e, "input")
    if isinstance(e, RecursionError):
        return "input nested too deeply to read"
    return None


class Group(click.Group):
    """Loads commands by name and turns every user-facing failure into one line and a non-zero
    exit."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"perfmodel.cli.{module}"), attr)
        assert isinstance(command, click.Command)  # a bug in COMMANDS, not bad input
        return command

    def invoke(self, ctx: click.Context) -> Any:
        # --format markdown lasts one command (tests run many)
        if "perfmodel.output.console" in sys.modules:
            sys.modules["perfmodel.output.console"].set_markdown(False)
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            _wrap_message(e)
            raise
        except (
            click.exceptions.Exit,
            click.exceptions.Abort,
            KeyboardInterrupt,
        ):
            raise
        except BrokenPipeError:  # `perfmodel presets | head`: the reader left; stop quietly
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (stays open until the process ends)
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            raise click.exceptions.Exit(0) from None
        except Exception as e:
            message = _user_error(e)
            if message is not None:
                raise _wrap_message(click.ClickException(short(message))) from None
            # a bug, not bad input: still no traceback unless asked
            if os.environ.get("PERFMODEL_DEBUG"):
                raise
            raise _wrap_message(
                click.ClickException(
                    f"internal error ({e.__class__.__name__}: {e}); rerun with "
                    "PERFMODEL_DEBUG=1 for the traceback and please report it"
                )
            ) from None


@click.group(
    cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(package_name="perfmodel")
def main() -> None:
    """perfmodel: an analytical performance model of distributed transformer training.

    \b
    Example:
        perfmodel plan gpt3-175b.yaml --gpus 512
    """
