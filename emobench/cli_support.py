"""How every emobench command reports failure: one line on stderr and a non-zero exit."""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # typer vendors click: its own classes
from typer.core import TyperGroup

from emobench.errors import EmobenchError, InputError


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``finally`` runs: without it the process dies
    at once and leaves the vLLM servers it started running."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@dataclass
class Interruption:
    """What an interrupted command tells the user; ``run_dir`` once the run has one."""

    run_dir: Path | None = None


def _say(text: str) -> None:
    print(" ".join(text.split()), file=sys.stderr)  # one line, whatever the message holds


@contextmanager
def one_line_errors() -> Iterator[Interruption]:
    """Turn an EmobenchError into "error: ..." and its exit code, a file-system error into
    exit 2, Ctrl-C into exit 130, SIGTERM into exit 143.

    Usable as a ``with`` block or as a command decorator (it keeps the signature typer reads).
    """
    previous = signal.signal(signal.SIGTERM, _terminate)
    interruption = Interruption()
    try:
        yield interruption
    except EmobenchError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(exc.exit_code) from None
    except OSError as exc:  # an output path that is a file, a full disk, a missing folder
        _say(f"error: {exc.filename or ''}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt as exc:
        how, code = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
        hint = f"; rerun with --resume {interruption.run_dir} to continue" if interruption.run_dir else ""
        _say(f"{how}: finished work is kept{hint}")
        raise typer.Exit(code) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _usage_in_one_line() -> Iterator[None]:
    try:
        yield
    except NoArgsIsHelpError:
        raise  # typer prints the help
    except UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "emobench"
        _say(f"error: {where}: {exc.format_message()}")
        raise typer.Exit(exc.exit_code) from None


class OneLineUsage(TyperGroup):
    """The command line's own errors (an unknown option, a flag value of the wrong type) are
    one line and exit 2 as well, instead of a usage box."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        with _usage_in_one_line():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _usage_in_one_line():  # a subcommand's arguments are parsed here
            return super().invoke(ctx)


@contextmanager
def against_flags(flags: Mapping[str, str]) -> Iterator[None]:
    """Report a config error in a value a command-line flag gave against that flag.

    ``flags`` maps a config field (``seeds``, ``panel.judges``) to the flag that set it; a role
    flag sets only the role's binding.
    """
    try:
        yield
    except InputError as exc:
        for key, flag in flags.items():
            head = re.match(rf"{re.escape(key)}(?=$|[.\[])", exc.field)
            is_role = key in ("subjects", "user", "panel.judges")
            if head and (not is_role or exc.field.endswith(".binding")):
                raise InputError(flag, exc.field, exc.problem) from None
        raise
