"""The emobench command line: parse, call, print. Errors are one line and a non-zero exit.

Only run, merge and judge live here; every other command's module is imported when that command
runs (COMMANDS), so `emobench --help` starts without pyarrow, numpy or the endpoint stack.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from emobench.cli_support import (
    Interruption,
    Lazy,
    LazyGroup,
    SplitName,
    against_flags,
    one_line_errors,
    parse_shard,
    progress_bar,
    response_cache,
    roles_kept,
)
from emobench.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from emobench.config import RunConfig

# name -> where the command lives and its line in `emobench --help` (a test checks the lines).
COMMANDS = {
    "show": Lazy("emobench.viewer.cli:show", "List a run's episodes, or print one conversation turn by turn."),
    "report": Lazy(
        "emobench.viewer.cli:report",
        "Write one self-contained HTML page of a run: episodes, transcripts, plots, reliability.",
    ),
    "validate": Lazy(
        "emobench.validation.cli:validate",
        "Validity report: known groups, test–retest, judge–tracker and judge–human agreement; with --fidelity, "
        "the simulator against people; with --judge-check, the panel against a human-annotated data set.",
    ),
    "gate": Lazy(
        "emobench.gate.cli:gate", "Regression gate: exit 0 pass, 1 significant regression beyond tolerance, 2 bad input."
    ),
    "leaderboard": Lazy("emobench.publish.cli:leaderboard_app", "Build and show the leaderboard."),
    "scenarios": Lazy("emobench.registry.cli:app", "Browse and check the scenario and persona library."),
    "calibrate": Lazy(
        "emobench.judging.calibrate_cli:calibrate",
        "Rate a split's cases with an IEDR judge and report disagreements with the authored levels.",
    ),
    "play": Lazy(
        "emobench.play.cli:play",
        "Serve a page where people play the user or the supporter; episodes go to a normal run directory.",
    ),
    "anchor": Lazy(
        "emobench.anchor.cli:anchor",
        "Put a run's holistic scores on people's scale from a few human ratings of its episodes (PPI++).",
    ),
    "import": Lazy("emobench.importers.cli:app", "Import another benchmark's recorded runs as an emobench run directory."),
    "submit": Lazy(
        "emobench.board.cli:submit", "Pack runs into a leaderboard submission: every record hashed, a root over them."
    ),
    "verify": Lazy(
        "emobench.board.cli:verify", "Check a submission: exit 0 verified, 1 refused (one line per reason), 2 bad input."
    ),
    "external": Lazy(
        "emobench.external.cli:app", "Publish another benchmark's recorded runs, re-scored, beside the leaderboard."
    ),
}


class Commands(LazyGroup):
    lazy = COMMANDS
    order = ("run", "merge", "judge", *COMMANDS)


app = typer.Typer(
    help="emobench: a dynamic emotional-intelligence benchmark for chat models.",
    no_args_is_help=True,
    add_completion=False,
    cls=Commands,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("emobench")
        except PackageNotFoundError:  # a source checkout on PYTHONPATH, not installed
            from emobench import __version__ as number
        typer.echo(f"emobench {number}")
        raise typer.Exit()


@app.callback()
def options(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_version, help="Print the version and exit.")
    ] = False,
) -> None:
    """emobench: a dynamic emotional-intelligence benchmark for chat models."""
    # litellm fetches its price map at import unless told not to: offline, 2-4 warning lines and
    # seconds of retries in every command that loads it. A user's own setting stands.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def err() -> Console:
    # Built per use so output follows the current sys.stdout/stderr (CliRunner swaps them).
    from rich.console import Console

    return Console(stderr=True)


def console() -> Console:
    from rich.console import Console

    return Console()


@app.command()
def run(
    config: Annotated[Path | None, typer.Option(help="Run config YAML (default: configs/demo.yaml).")] = None,
    subject: Annotated[list[str] | None, typer.Option(help="Subject binding; repeat for several.")] = None,
    user: Annotated[str | None, typer.Option(help="User-simulator binding.")] = None,
    judge: Annotated[list[str] | None, typer.Option(help="Judge binding; repeat for a panel.")] = None,
    split: Annotated[SplitName | None, typer.Option(help="Split to run (default: the config's).")] = None,
    seeds: Annotated[str | None, typer.Option(help="Comma-separated seeds, e.g. 0,1,2.")] = None,
    max_turns: Annotated[
        int | None, typer.Option(help="Turn limit per episode; below the config's min_turns, it lowers min_turns too.")
    ] = None,
    min_turns: Annotated[int | None, typer.Option(help="First turn at which EPM and meter stop rules apply.")] = None,
    limit: Annotated[int | None, typer.Option(help="Run only the first N cases of the split.")] = None,
    local_split: Annotated[Path | None, typer.Option(
        help="Play the cases of this local split folder (from `emobench import empa-cases`) instead of a library split.",
    )] = None,
    references: Annotated[bool, typer.Option(
        "--references/--no-references",
        help="Play the config's reference subjects beside the subjects (the validity check's known groups).",
    )] = True,
    out_dir: Annotated[Path, typer.Option("--out", help="Where run directories go.")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="Run directory name (default: a timestamp).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue this run directory, skipping finished episodes.")] = None,
    force: Annotated[bool, typer.Option(help="Resume even when the config hash differs.")] = False,
    shard: Annotated[str | None, typer.Option(help="Run only shard I/N of the (case, seed) pairs, e.g. 0/4.")] = None,
    stop_when: Annotated[list[str] | None, typer.Option(
        metavar="SPEC", help="Play the cases in a seeded random order, in waves, and stop once SPEC holds: "
        "half-width<=H, pairs-resolved, pair=A,B, calls<=N or cost<=USD; repeat for any of several (docs/adaptive.md).",
    )] = None,
    wave: Annotated[int | None, typer.Option(
        min=1, help="Cases per wave of a --stop-when run (default: see docs/adaptive.md).")] = None,
    ray: Annotated[str | None, typer.Option(
        "--ray", is_flag=False, flag_value="local", metavar="[ADDRESS]",
        help="Play and score the episodes on Ray workers: --ray alone starts a local Ray, --ray auto or an "
        "address joins a cluster (needs the ray extra).",
    )] = None,
    batch: Annotated[bool, typer.Option(help="Send the holistic and pairwise judging through the OpenAI Batch API "
                                             "after each wave (half price; a batch may take up to 24 hours; the per-turn "
                                             "judge stays direct; docs/cost.md).")] = False,
    batch_poll: Annotated[float, typer.Option(min=0.01, help="With --batch: seconds between polls of a batch.")] = 30.0,
    cache: Annotated[bool, typer.Option(help="Answer repeated model calls from the on-disk response cache.")] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache folder (default: the user cache dir).")] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Run the whole preflight (keys, endpoints, templates, weights), print episodes, the most model "
            "calls per role, tokens and cost, and exit without a model call.",
        ),
    ] = False,
) -> None:
    """Run episodes, judge and score them, and print the leaderboard."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    notes: list[str] = []  # printed once every input is checked, so that a refusal stays one line

    def load_config() -> tuple[RunConfig, dict[str, str]]:
        from emobench.run.flags import flag_overrides, load_run_config
        from emobench.run.stop_spec import parse_stop_when

        parse_stop_when(stop_when)  # a bad SPEC is refused before any file is read
        flagged = flag_overrides(subject, user, judge, split, seeds, max_turns, min_turns, limit, local_split)
        if not references:
            flagged["references"] = []
        loaded = load_run_config(config, resume, flagged, notes)
        source = config or resume or Path("configs/demo.yaml")
        warning = roles_kept(loaded[0], loaded[1], source, demo=config is None and resume is None)
        if warning:  # before preflight, which may refuse a role the user did not know was kept
            typer.echo(warning, err=True)
        return loaded

    def go(interruption: Interruption) -> None:
        import asyncio
        from contextlib import AbstractContextManager, nullcontext
        from datetime import UTC, datetime

        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.publish.show import render_table
        from emobench.run.accounting import summary_line
        from emobench.run.adaptive import stop_line
        from emobench.run.finalize import finalize_run
        from emobench.run.flags import stop_plan
        from emobench.run.runner import ROOT, run_benchmark, run_registry
        from emobench.rundir import RunDir
        from emobench.scoring.epmq import EPMQ_WEIGHTS
        from emobench.scoring.invalid_outputs import invalid_summary
        from emobench.trackers.pool import Reader, read_locally

        if run_id is not None and (Path(run_id).name != run_id or run_id in ("", ".", "..") or "\x00" in run_id):
            raise InputError("--run-id", "", f"{run_id!r} is not a plain directory name")
        cfg, flags = load_config()
        with against_flags(flags):  # an unknown --split is found when the registry is read
            stop = stop_plan(stop_when, wave, shard, cfg)
        if batch:  # before Ray or a server starts
            from emobench.run.batch_judging import refuse_unbatchable

            refuse_unbatchable(cfg, ray)
        run_dir = resume or out_dir / (run_id or datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
        interruption.run_dir = run_dir
        log = err()
        responses = response_cache(cache, cache_dir)
        # Under --ray one Ray connection serves the play workers, then the scoring actors.
        session: AbstractContextManager[Reader] = nullcontext(read_locally)
        if ray is not None:
            from emobench.run.ray_scoring import ray_session

            session = ray_session(ray, cfg, log.print)
        with session as reader:
            with against_flags(flags):  # an unknown --split is found when the registry is read
                result = asyncio.run(
                    run_benchmark(
                        cfg,
                        run_dir,
                        resume=resume is not None,
                        force=force,
                        console=log,
                        show_progress=progress,
                        cache=responses,
                        shard=parse_shard(shard),
                        notes=notes,
                        ray=ray,
                        stop=stop,
                        batch_poll_s=batch_poll if batch else None,
                    )
                )
            rd = RunDir(result.run_dir)
            with progress_bar(progress) as tick:
                finalize_run(rd, run_registry(cfg, ROOT), tick=tick, reader=reader)
        table = build_leaderboard([rd.path])
        write_leaderboard(table, rd.path)
        render_table(table, console())
        log.print("EPM-Q = " + " + ".join(f"{w:g}·{group.capitalize()}" for group, w in EPMQ_WEIGHTS.items()))
        report = rd.read_report()
        log.print(f"{result.new_episodes} new episode(s), {result.total_episodes} in total · {summary_line(report)} · {rd.path}")
        log.print(invalid_summary(report))
        if report.get("adaptive"):
            log.print(stop_line(report["adaptive"]), soft_wrap=True)

    def plan() -> None:
        from emobench.run.dry_run import estimate, print_estimate
        from emobench.run.flags import stop_plan
        from emobench.run.runner import ROOT
        from emobench.rundir import RunDir

        cfg, flags = load_config()
        with against_flags(flags):
            stop_plan(stop_when, wave, shard, cfg)  # checked as a real run would check it
            if batch:
                from emobench.run.batch_judging import refuse_unbatchable

                refuse_unbatchable(cfg, ray)
            est = estimate(cfg, ROOT, shard=parse_shard(shard), resume=RunDir(resume) if resume else None, force=force,
                           out_dir=out_dir)
        for line in notes:
            typer.echo(line, err=True)
        print_estimate(est, console())

    with one_line_errors() as interruption:
        plan() if dry_run else go(interruption)


@app.command()
def merge(
    run_dirs: Annotated[list[Path], typer.Argument(help="Shard run directories.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The merged run directory to write.")],
    force: Annotated[bool, typer.Option(help="Merge even when configs or versions differ.")] = False,
) -> None:
    """Merge shard run directories into one, then score it."""

    def go() -> None:
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.publish.show import render_table
        from emobench.registry import load_registry
        from emobench.run.finalize import finalize_run
        from emobench.run.merge import merge_runs
        from emobench.run.runner import ROOT
        from emobench.rundir import RunDir

        counts = merge_runs(run_dirs, out, force=force)
        rd = RunDir(out)
        with progress_bar() as tick:
            finalize_run(rd, load_registry(ROOT), tick=tick)
        table = build_leaderboard([rd.path], force=force)
        write_leaderboard(table, rd.path)
        render_table(table, console())
        err().print(
            f"merged {counts['sources']} run(s): {counts['episodes']} episodes, {counts['judgements']} judgement(s), "
            f"{counts['pairwise']} pairwise verdict(s), {counts['duplicates']} duplicate episode(s) dropped → {out}"
        )
        if counts["panels"]:
            err().print(f"note: {counts['panels']} (rescores) not merged; run emobench judge on {out} for them")

    with one_line_errors():
        go()


@app.command()
def judge(
    run_dir: Annotated[Path, typer.Argument(help="A finished run directory.")],
    panel: Annotated[Path, typer.Option(help="Panel definition, e.g. judges/panels/embedded-pair.yaml.")],
    cache: Annotated[bool, typer.Option(help="Answer repeated model calls from the on-disk response cache.")] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache folder.")] = None,
    force: Annotated[bool, typer.Option(help="Rescore even when the case cards changed since the run.")] = False,
    batch: Annotated[bool, typer.Option(help="Send the judge calls through the OpenAI Batch API (half price; a batch "
                                             "may take up to 24 hours; a killed command resumes its batches).")] = False,
    batch_poll: Annotated[float, typer.Option(min=0.01, help="With --batch: seconds between polls of a batch.")] = 30.0,
) -> None:
    """Rescore a run with another judge panel; no conversation is regenerated."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def go() -> None:
        import asyncio

        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.publish.show import render_table
        from emobench.registry.local import registry_for
        from emobench.run.accounting import summary_line
        from emobench.run.finalize import finalize_run
        from emobench.run.rescore import rescore
        from emobench.run.runner import ROOT
        from emobench.rundir import RunDir

        log = err()
        with progress_bar() as tick:
            rescored = asyncio.run(rescore(run_dir, panel, cache=response_cache(cache, cache_dir), force=force,
                                           console=log, tick=tick, batch_poll_s=batch_poll if batch else None))
            finalize_run(rescored, registry_for(run_dir, ROOT), source=RunDir(run_dir), tick=tick)
        table = build_leaderboard([rescored.path], force=force)
        write_leaderboard(table, rescored.path)
        render_table(table, console())
        log.print(f"new judgements and scores in {rescored.path} · {summary_line(rescored.read_report())}")

    with one_line_errors():
        go()


def main() -> None:
    import sys

    from emobench.cli_support import bare_ray_flag

    app(args=bare_ray_flag(sys.argv[1:]), prog_name="emobench")


if __name__ == "__main__":
    main()
