"""`emobench board submit|verify`: package a finished run for the leaderboard, and check one.

verify exits 0 when the submission holds, 1 when it does not (each problem on a line naming its
file and field), 2 on input it cannot read at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from emobench.board.protocol import DEFAULT_PROTOCOL
from emobench.cli_support import one_line_errors

app = typer.Typer(help="Package a run for the leaderboard and verify a submission.", no_args_is_help=True,
                  add_completion=False)
PROTOCOL_OPTION = typer.Option("--protocol", help="The submission protocol the run is held to.")
SHOWN = 20  # problems printed; the count says how many more


@app.command("submit")
def submit(
    run_dir: Annotated[Path, typer.Argument(help="A finished, scored run directory.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The submission folder to write (new or empty).")],
    protocol: Annotated[Path, PROTOCOL_OPTION] = DEFAULT_PROTOCOL,
) -> None:
    """Copy the run's records into a submission folder with their hashes (submission.json), then verify it."""
    with one_line_errors():
        from emobench.board.package import submit as package
        from emobench.board.protocol import load_protocol

        rules = load_protocol(protocol)
        record = package(run_dir, out, rules.version)
        Console().print(f"wrote {out} ({len(record['files'])} files, digest {record['digest'][:16]})", soft_wrap=True)
    _report(out, protocol)


@app.command("verify")
def verify(
    submission: Annotated[Path, typer.Argument(help="A submission folder (from `emobench board submit`).")],
    protocol: Annotated[Path, PROTOCOL_OPTION] = DEFAULT_PROTOCOL,
) -> None:
    """Check a submission's hashes, hygiene, protocol, coverage, and recompute every score from its calls."""
    _report(submission, protocol)


def _report(folder: Path, protocol: Path) -> None:
    with one_line_errors():
        from emobench.board.protocol import load_protocol
        from emobench.board.verify import verify as check
        from emobench.registry import load_registry
        from emobench.run.runner import ROOT

        if not folder.is_dir():
            from emobench.errors import InputError

            raise InputError(folder, "", "not a submission folder")
        verdict = check(folder, load_protocol(protocol), load_registry(ROOT))
    console = Console()
    models = ", ".join(f"{label} ({model})" for label, model in verdict.subjects.items())
    if verdict.ok:
        console.print(f"verified: {verdict.episodes} episodes of {models} hold under protocol v{verdict.protocol_version}",
                      soft_wrap=True, markup=False)
        return
    err = Console(stderr=True)
    for problem in verdict.problems[:SHOWN]:
        err.print(problem.line(), soft_wrap=True, markup=False)
    more = len(verdict.problems) - SHOWN
    err.print(f"refused: {len(verdict.problems)} problem(s)" + (f", {more} not shown" if more > 0 else ""),
              soft_wrap=True, markup=False)
    raise typer.Exit(1)
