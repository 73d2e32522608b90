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
    spot_check: Annotated[int, typer.Option(
        "--spot-check", min=0, help="Judge this many episodes again with the submission's judges and compare.")] = 0,
    spot_seed: Annotated[int, typer.Option(help="Seed of the spot check's draw of episodes.")] = 0,
    judge: Annotated[list[str] | None, typer.Option(
        "--judge", help="Where the spot check reaches each judge (panel order), e.g. openai:MODEL@URL; the model must be "
                        "the recorded one. Default: the recorded bindings.")] = None,
) -> None:
    """Check a submission's hashes, hygiene, protocol, coverage, and recompute every score from its calls;
    with --spot-check, also ask its judges again."""
    _report(submission, protocol, spot_check, spot_seed, judge or [])


def _report(folder: Path, protocol: Path, spot: int = 0, spot_seed: int = 0, judges: list[str] | None = None) -> None:
    with one_line_errors():
        from emobench.board.protocol import load_protocol
        from emobench.board.verify import verify as check
        from emobench.registry import load_registry
        from emobench.run.runner import ROOT

        if not folder.is_dir():
            from emobench.errors import InputError

            raise InputError(folder, "", "not a submission folder")
        rules, registry = load_protocol(protocol), load_registry(ROOT)
        verdict = check(folder, rules, registry)
        if verdict.ok and spot:
            from emobench.board.spot import spot_check
            from emobench.board.verify import Problem

            asked = spot_check(folder, registry, spot, spot_seed, judges or [])
            Console().print(f"spot check: {len(asked.episodes)} episode(s) judged again, {asked.agreed}/{asked.items} "
                            f"MDEP items agree ({asked.agreement:.0%}), the record lifts {asked.mean_lift:+.2f} levels "
                            "per verdict",
                            soft_wrap=True, markup=False)
            if asked.agreement < rules.spot_check_agreement or asked.mean_lift > rules.spot_check_max_lift:
                verdict.problems += [Problem("spot-check", "episodes.jsonl", "", f"{asked.agreement:.0%} of the items "
                                             f"agree (protocol: {rules.spot_check_agreement:.0%}) and the record is "
                                             f"{asked.mean_lift:+.2f} levels per verdict kinder than the judges now "
                                             f"(protocol: at most {rules.spot_check_max_lift:+.2f})")]
                verdict.problems += [Problem("spot-check", "episodes.jsonl", where, f"the judge now says otherwise on {items}")
                                     for where, items in asked.differing]
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
