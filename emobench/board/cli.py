"""`emobench submit` and `emobench verify`: package finished runs for the leaderboard, and check one.

verify exits 0 when the submission holds, 1 when it does not (each problem on a line naming its
file and field), 2 on input it cannot read at all.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from emobench.board.protocol import DEFAULT_PROTOCOL
from emobench.cli_support import one_line_errors

if TYPE_CHECKING:
    from emobench.board.replay import Replay
    from emobench.board.verify import Problem

PROTOCOL_OPTION = typer.Option("--protocol", help="The submission protocol the run is held to.")
SHOWN = 20  # problems printed; the count says how many more


def submit(
    runs: Annotated[list[Path], typer.Argument(help="Finished, scored run directories: one run, or the shards "
                                                    "of one run (merged first, as `emobench merge` does).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The submission folder to write (new or empty).")],
    model_name: Annotated[str, typer.Option("--model-name", help="The model under test, as the submitter declares it.")],
    provider: Annotated[str, typer.Option("--provider", help="Who serves it (an API provider, or self-hosted).")],
    on: Annotated[str | None, typer.Option("--date", help="The declared date of the run (YYYY-MM-DD; default today, UTC).")]
    = None,
    protocol: Annotated[Path, PROTOCOL_OPTION] = DEFAULT_PROTOCOL,
) -> None:
    """Pack runs into a leaderboard submission: every record hashed, a root over them."""
    with one_line_errors():
        from emobench.board.package import submit as package
        from emobench.board.protocol import load_protocol
        from emobench.errors import InputError

        try:
            declared = date.fromisoformat(on).isoformat() if on else datetime.now(UTC).date().isoformat()
        except ValueError:
            raise InputError("--date", "", f"{on!r} is not a date (YYYY-MM-DD)") from None
        declaration = {"model_name": model_name, "provider": provider, "date": declared}
        rules = load_protocol(protocol)
        with tempfile.TemporaryDirectory(prefix="emobench-submit-") as tmp:
            run_dir = runs[0] if len(runs) == 1 else _merged(runs, Path(tmp) / "merged")
            record = package(run_dir, out, rules.version, declaration)
        Console().print(f"wrote {out} ({sum(len(f['records']) for f in record['files'].values())} records, "
                        f"root {record['root'][:16]})", soft_wrap=True)
    _report(out, protocol)


def _replayed(replay: Replay) -> list[Problem]:
    """The replay's line, and its refusal when the submitted scores are above what the model gives now."""
    from emobench.board.verify import Problem

    test = replay.decision
    unscored = f", {len(replay.unscored)} left out (no valid judgement)" if replay.unscored else ""
    if test is None:
        return [Problem("spot-check", "scores.parquet", "epmq", f"none of {len(replay.cells)} cell(s) of "
                        f"{replay.model!r} replayed could be scored")]
    Console().print(f"spot check: {len(replay.cells)} cell(s) of {replay.label} ({replay.model}) played again{unscored}; "
                    f"submitted minus replayed EPM-Q {test.mean_diff:+.2f} points, threshold {test.threshold:+.2f} "
                    f"(one-sided t, false-alarm rate {test.alpha:g}, seed-to-seed SD {test.noise.sd:.2f} on "
                    f"{test.noise.df} df)", soft_wrap=True, markup=False)
    if not test.refused:
        return []
    return [Problem("spot-check", "scores.parquet", "epmq", f"the submitted scores are {test.mean_diff:+.2f} points "
                    f"above {test.n} replay(s) of {replay.model!r}, over the threshold {test.threshold:+.2f} built for "
                    f"a false-alarm rate of {test.alpha:g}")]


def _merged(runs: list[Path], out: Path) -> Path:
    """Several parts of one run (shards, resumed pieces) merged and scored as `emobench merge` does."""
    from emobench.registry import load_registry
    from emobench.run.finalize import finalize_run
    from emobench.run.merge import merge_runs
    from emobench.run.runner import ROOT
    from emobench.rundir import RunDir

    merge_runs(runs, out)
    finalize_run(RunDir(out), load_registry(ROOT))
    return out


def verify(
    submission: Annotated[Path, typer.Argument(help="A submission folder (from `emobench submit`).")],
    protocol: Annotated[Path, PROTOCOL_OPTION] = DEFAULT_PROTOCOL,
    integrity_only: Annotated[bool, typer.Option(
        "--integrity-only", help="Check hashes, hygiene, coverage and recomputation only, not the protocol.")] = False,
    spot_check: Annotated[int, typer.Option(
        "--spot-check", min=0, help="Judge this many episodes again with the submission's judges and compare; with "
                                    "--subject, play this many (case, seed) cells again and test the scores.")] = 0,
    spot_seed: Annotated[int, typer.Option(help="Seed of the spot check's draw of episodes or cells.")] = 0,
    subject: Annotated[str | None, typer.Option(
        "--subject", help="Replay the cells with the subject here, e.g. openai:MODEL@URL; the model must be a recorded "
                          "subject's.")] = None,
    user: Annotated[str | None, typer.Option(
        "--user", help="Where the replay reaches the simulator; the model must be the recorded one. Default: the "
                       "recorded binding.")] = None,
    judge: Annotated[list[str] | None, typer.Option(
        "--judge", help="Where the spot check reaches each judge (panel order), e.g. openai:MODEL@URL; the model must be "
                        "the recorded one. Default: the recorded bindings.")] = None,
) -> None:
    """Check a submission: exit 0 verified, 1 refused (one line per reason), 2 bad input."""
    _report(submission, protocol, spot_check, spot_seed, judge or [], integrity_only=integrity_only,
            subject=subject, user=user)


def _report(folder: Path, protocol: Path, spot: int = 0, spot_seed: int = 0, judges: list[str] | None = None, *,
            integrity_only: bool = False, subject: str | None = None, user: str | None = None) -> None:
    with one_line_errors():
        from emobench.board.protocol import load_protocol
        from emobench.board.verify import verify as check
        from emobench.errors import InputError
        from emobench.registry import load_registry
        from emobench.run.runner import ROOT

        if not folder.is_dir():
            raise InputError(folder, "", "not a submission folder")
        if (subject or user) and not spot:
            raise InputError("--subject" if subject else "--user", "", "a replay needs --spot-check N (cells to play)")
        if user and not subject:
            raise InputError("--user", "", "the simulator is reached only by a replay of the subject (--subject)")
        rules, registry = load_protocol(protocol), load_registry(ROOT)
        verdict = check(folder, rules, registry, integrity_only=integrity_only)
        if verdict.ok and spot and subject is not None:
            from emobench.board.replay import replay_check

            verdict.problems += _replayed(replay_check(folder, registry, spot, spot_seed, rules.spot_check_alpha,
                                                       subject, user, judges or []))
        elif verdict.ok and spot:
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
        held = "integrity only, protocol not checked" if integrity_only else f"protocol v{verdict.protocol_version}"
        console.print(f"verified: {verdict.episodes} episodes of {models} hold under {held}",
                      soft_wrap=True, markup=False)
        return
    err = Console(stderr=True)
    for problem in verdict.problems[:SHOWN]:
        err.print(problem.line(), soft_wrap=True, markup=False)
    more = len(verdict.problems) - SHOWN
    err.print(f"refused: {len(verdict.problems)} problem(s)" + (f", {more} not shown" if more > 0 else ""),
              soft_wrap=True, markup=False)
    raise typer.Exit(1)
