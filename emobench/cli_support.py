"""How every emobench command reports failure: one line on stderr and a non-zero exit."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from emobench.errors import EmobenchError


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``finally`` runs: without it the process dies
    at once and leaves the vLLM servers it started running."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn an EmobenchError into "error: ..." and its exit code, a file-system error into
    exit 2, Ctrl-C into exit 130, SIGTERM into exit 143.

    Usable as a ``with`` block or as a command decorator (it keeps the signature typer reads).
    """
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    except EmobenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(exc.exit_code) from None
    except OSError as exc:  # an output path that is a file, a full disk, a missing folder
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    except KeyboardInterrupt as exc:
        how, code = ("terminated", 143) if isinstance(exc, Terminated) else ("interrupted", 130)
        print(f"{how}: finished work is kept; rerun with --resume RUN_DIR to continue", file=sys.stderr)
        raise typer.Exit(code) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
