"""`emobench show RUN` and `emobench report RUN`: read what happened in a run.

Thin: parse, call, print. An EmobenchError prints its one line to stderr and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from emobench.cli_support import one_line_errors
from emobench.errors import InputError
from emobench.library_paths import library_root
from emobench.registry import Case, load_registry
from emobench.viewer.episodes import RunView, open_run

RunArg = Annotated[Path, typer.Argument(help="A run directory, e.g. runs/<id>.")]
PanelOpt = Annotated[str | None, typer.Option(help="Show the rescore in RUN/panels/<PANEL>/, not the run's own judges.")]
LIBRARY = library_root()


def _open(run_dir: Path, panel: str | None) -> RunView:
    if not run_dir.is_dir():
        raise InputError(run_dir, "", "run directory not found")
    cards: dict[str, Case] = {}
    try:
        cards = {c.id: c for c in load_registry(LIBRARY).all_cases()}
    except InputError:
        pass  # no case library here (an installed wheel): the probe's card column shows "–"
    return open_run(run_dir, panel, cards.get)


def show(
    run_dir: RunArg,
    episode: Annotated[str | None, typer.Option(help="Print one episode: key subject|case|seed, or # in the list.")] = None,
    case: Annotated[str | None, typer.Option(help="Only this case.")] = None,
    subject: Annotated[str | None, typer.Option(help="Only this subject.")] = None,
    seed: Annotated[int | None, typer.Option(help="Only this seed.")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only episodes that did not succeed.")] = False,
    sort: Annotated[str, typer.Option(help="key, case, subject, seed, epmq, meter or turns.")] = "key",
    evidence: Annotated[bool, typer.Option("--evidence", help="Also print the judges' evidence.")] = False,
    panel: PanelOpt = None,
    pager: Annotated[bool | None, typer.Option("--pager/--no-pager", help="Page the output (default: on a terminal).")] = None,
) -> None:
    """List a run's episodes, or print one conversation turn by turn."""
    from emobench.viewer.episodes import select
    from emobench.viewer.transcript import episode_table, episode_view, print_paged

    console = Console()
    with one_line_errors():
        run = _open(run_dir, panel)
        rows = select(run.rows, case=case, subject=subject, seed=seed, failed=failed, sort=sort)
        key = episode
        if key is not None and key.isdigit():
            if not 1 <= int(key) <= len(rows):
                raise InputError("--episode", "episode", f"#{key} is not in the list of {len(rows)}")
            key = rows[int(key) - 1].key
        elif key is None and case is not None and seed is not None and len(rows) == 1:
            key = rows[0].key  # case and seed (and subject, with several) name one episode
        if key is None:
            long_list = pager is not None or len(rows) > console.height  # a short list never pages
            print_paged(console, episode_table(run, rows, console.width), pager=pager if long_list else False)
            if (run.manifest.get("adaptive") or {}).get("mode") == "run":  # a --stop-when run: where and why it stopped
                from emobench.run.adaptive import stop_line

                console.print(stop_line(run.manifest["adaptive"]), soft_wrap=True, markup=False, highlight=False)
            if run.manifest.get("accounting"):  # what the calls cost, the prompt cache's share among them
                from emobench.run.accounting import summary_line

                console.print(summary_line(run.manifest), soft_wrap=True, markup=False, highlight=False)
        else:
            print_paged(console, episode_view(run.episode(key), evidence=evidence), pager=pager)


def report(
    run_dir: RunArg,
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="The page to write (default: report.html in the run or its panel folder).")
    ] = None,
    panel: PanelOpt = None,
) -> None:
    """Write one self-contained HTML page of a run: episodes, transcripts, plots, reliability."""
    from emobench.viewer.run_report import write_run_report

    with one_line_errors():
        run = _open(run_dir, panel)
        target = out or run.path / "report.html"
        write_run_report(run, target)
    Console().print(f"wrote {target} ({len(run.rows)} episodes)", soft_wrap=True)
