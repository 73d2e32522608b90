"""How every emobench command reports failure: one line on stderr and a non-zero exit."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from emobench.errors import EmobenchError


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn an EmobenchError into "error: ..." and its exit code, a file-system error into
    exit 2, Ctrl-C into exit 130.

    Usable as a ``with`` block or as a command decorator (it keeps the signature typer reads).
    """
    try:
        yield
    except EmobenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(exc.exit_code) from None
    except OSError as exc:  # an output path that is a file, a full disk, a missing folder
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        print("interrupted: finished work is kept; rerun with --resume RUN_DIR to continue", file=sys.stderr)
        raise typer.Exit(130) from None
