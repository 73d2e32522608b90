"""CLI for publishing: `emobench leaderboard build|show`.

Thin: parse, call, print. An EmobenchError prints its one line to stderr and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from emobench.cli_support import one_line_errors
from emobench.publish.columns import FAMILIES

leaderboard_app = typer.Typer(
    help="Build and show the leaderboard.", no_args_is_help=True, add_completion=False
)


@leaderboard_app.command("build")
def build(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run directories to merge.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Output directory.")] = Path(
        "leaderboard"
    ),
    n_boot: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    force: Annotated[
        bool, typer.Option(help="Merge runs whose registry/prompt versions or split differ.")
    ] = False,
    html: Annotated[bool, typer.Option("--html/--no-html", help="Also write index.html.")] = True,
    ratings: Annotated[Path | None, typer.Option(
        help="Human ratings of the runs' episodes (JSONL, docs/anchor.md): adds anchored columns to the "
             "overall rows.")] = None,
) -> None:
    """Merge runs into leaderboard.parquet (and index.html)."""
    from emobench.publish.case_scores import build_cases, write_cases
    from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
    from emobench.publish.pairs import build_pairs, write_pairs
    from emobench.publish.runs import load_run
    from emobench.publish.show import render_table

    with one_line_errors():
        table = build_leaderboard(run_dirs, n_boot=n_boot, seed=seed, force=force)
        runs = [load_run(Path(d)) for d in run_dirs]
        if ratings is not None:
            from emobench.publish.anchored_columns import add_anchored

            table = add_anchored(table, runs, ratings)
        write_leaderboard(table, out)
        # The per-case scores that let the bundle serve as the regression gate's baseline.
        write_cases(build_cases(runs), out)
        write_pairs(build_pairs(runs, table), out)
        if html:
            # Imported here: matplotlib is only needed for the page, not for the table.
            from emobench.publish.html import write_page

            write_page(table, out, run_dirs)
        from emobench.board.hub import write_card

        write_card(out)
    console = Console()
    render_table(table, console)
    written = "leaderboard.parquet, cases.parquet, pairs.parquet, README.md (its dataset card)" + (
        " and index.html" if html else "")
    console.print(f"wrote {written} to {out}", soft_wrap=True)


@leaderboard_app.command("show")
def show(
    directory: Annotated[
        Path, typer.Argument(help="Directory holding leaderboard.parquet (or the file).")
    ] = Path("leaderboard"),
    family: Annotated[str, typer.Option(
        help=f"Slice family to show: one of {', '.join(FAMILIES)}, or another the leaderboard has "
             "(an EMPA bundle's dominant_axis, difficulty).",
    )] = "overall",
) -> None:
    """Print the leaderboard in the terminal."""
    from emobench.publish.leaderboard import read_leaderboard
    from emobench.publish.show import render_table

    with one_line_errors():
        render_table(read_leaderboard(directory), Console(), slice_family=family)


@leaderboard_app.command("add")
def add(
    submission: Annotated[Path, typer.Argument(help="A submission folder (from `emobench submit`).")],
    board: Annotated[Path, typer.Option("--board", help="The leaderboard folder: its submissions/ and tables.")] = Path(
        "leaderboard"),
    protocol: Annotated[Path, typer.Option("--protocol", help="The submission protocol the run is held to.")] = Path(
        "configs/board.yaml"),
    n_boot: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
) -> None:
    """Verify a submission, keep it under BOARD/submissions/ and rebuild leaderboard.parquet and cases.parquet
    from every submission kept there; a submission that does not verify changes nothing (exit 1)."""
    from emobench.board.accept import add_submission
    from emobench.board.protocol import load_protocol
    from emobench.registry import load_registry
    from emobench.run.runner import ROOT

    with one_line_errors():
        verdict, sources = add_submission(submission, board, load_protocol(protocol), load_registry(ROOT), n_boot=n_boot)
    if not verdict.ok:
        err = Console(stderr=True)
        for problem in verdict.problems[:20]:
            err.print(problem.line(), soft_wrap=True, markup=False)
        err.print(f"refused: {len(verdict.problems)} problem(s); the board is unchanged", soft_wrap=True, markup=False)
        raise typer.Exit(1)
    Console().print(f"added {', '.join(verdict.subjects)}: {board} now rests on {len(sources)} verified submission(s)",
                    soft_wrap=True, markup=False)


@leaderboard_app.command("publish")
def publish(
    board: Annotated[Path, typer.Argument(help="The leaderboard folder to publish.")],
    repo: Annotated[str, typer.Option("--repo", help="The Hugging Face dataset repository, OWNER/NAME.")],
    stage_dir: Annotated[Path | None, typer.Option(
        "--stage", help="Where to stage the files and the dataset card (default: a temporary folder).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Stage and list what would be uploaded; upload nothing (the default without HF_TOKEN).")] = False,
) -> None:
    """Stage the leaderboard's tables, page and verified submissions with a dataset card (README.md), then
    upload them to a Hugging Face dataset; the token comes from HF_TOKEN, never from a file or a flag."""
    import os
    import tempfile

    from emobench.board.hub import TOKEN_ENV, stage, upload

    why = "" if dry_run or os.environ.get(TOKEN_ENV) else f" ({TOKEN_ENV} is not set)"

    with one_line_errors(), tempfile.TemporaryDirectory() as tmp:
        staged = stage_dir or Path(tmp) / "stage"
        files = stage(board, staged)
        console = Console()
        for name in files:
            console.print(f"  {name}", soft_wrap=True, markup=False)
        if dry_run or why:
            console.print(f"dry run{why}: {len(files)} file(s) staged in {staged} for {repo}; nothing uploaded",
                          soft_wrap=True, markup=False)
            return
        console.print(f"uploaded to {repo}: {upload(staged, repo)}", soft_wrap=True, markup=False)
