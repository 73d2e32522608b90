"""CLI for publishing: `emobench leaderboard build|show` and `emobench gate`.

Thin: parse, call, print. An EmobenchError prints its one line to stderr and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console

from emobench.cli_support import one_line_errors
from emobench.publish.columns import FAMILIES
from emobench.publish.gate import _TWO_WAY, GATE_METRICS
from emobench.publish.runs import SLICE_LEVELS
from emobench.registry.models import AXES, CATEGORIES

if TYPE_CHECKING:
    Family = str
else:
    Family = Literal[FAMILIES]  # typer lists and checks the choices

# Every slice the gate reads (gate.slice_mask), spelled out for --help.
SLICE_FORMS = "; ".join([
    "overall", f"category={'|'.join(CATEGORIES)}",
    *(f"{family}={'|'.join(levels)}" for family, levels in SLICE_LEVELS.items()),
    *(f"{family}=[{'|'.join(AXES)}/]{'|'.join(modes)}" for family, (_, _, modes) in _TWO_WAY.items()),
])

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
) -> None:
    """Merge runs into leaderboard.parquet (and index.html)."""
    from emobench.publish.case_scores import build_cases, write_cases
    from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
    from emobench.publish.runs import load_run
    from emobench.publish.show import render_table

    with one_line_errors():
        table = build_leaderboard(run_dirs, n_boot=n_boot, seed=seed, force=force)
        write_leaderboard(table, out)
        # The per-case scores that let the bundle serve as the regression gate's baseline.
        write_cases(build_cases([load_run(Path(d)) for d in run_dirs]), out)
        if html:
            # Imported here: matplotlib is only needed for the page, not for the table.
            from emobench.publish.html import write_page

            write_page(table, out, run_dirs)
    console = Console()
    render_table(table, console)
    written = "leaderboard.parquet, cases.parquet" + (" and index.html" if html else "")
    console.print(f"wrote {written} to {out}")


@leaderboard_app.command("show")
def show(
    directory: Annotated[
        Path, typer.Argument(help="Directory holding leaderboard.parquet (or the file).")
    ] = Path("leaderboard"),
    family: Annotated[Family, typer.Option(help="Slice family to show.")] = "overall",
) -> None:
    """Print the leaderboard in the terminal."""
    from emobench.publish.leaderboard import read_leaderboard
    from emobench.publish.show import render_table

    with one_line_errors():
        render_table(read_leaderboard(directory), Console(), slice_family=family)


def gate(
    baseline: Annotated[
        Path, typer.Option(help="Baseline: a run directory, or a published bundle (cases.parquet).")
    ],
    candidate: Annotated[Path, typer.Option(help="Candidate run directory.")],
    metric: Annotated[
        list[str] | None,  # typer takes no list of choices: run_gate checks the names
        typer.Option(help=f"Score to gate (higher is better); repeat for several. One of: {', '.join(GATE_METRICS)}. "
                     "Default: epmq."),
    ] = None,
    slice_: Annotated[
        list[str] | None,
        typer.Option("--slice", help=f"Also gate a slice; repeatable. One of: {SLICE_FORMS}."),
    ] = None,
    tolerance: Annotated[
        list[str] | None,
        typer.Option(help="Largest regression that still passes: X, or METRIC=X; repeatable."),
    ] = None,
    detect: Annotated[
        list[str] | None,
        typer.Option(help="Size a study for this difference: X, or METRIC=X (default: the tolerance)."),
    ] = None,
    summary: Annotated[
        Path | None, typer.Option(help="Write the markdown summary here, e.g. a CI job summary.")
    ] = None,
    baseline_subject: Annotated[
        str | None, typer.Option(help="Subject in the baseline, if it has several.")
    ] = None,
    candidate_subject: Annotated[
        str | None, typer.Option(help="Subject in the candidate run, if it has several.")
    ] = None,
    n_boot: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Regression gate: exit 0 pass, 1 significant regression beyond tolerance, 2 bad input."""
    from emobench.publish.gate import GATE_METRICS, per_metric, run_gate
    from emobench.publish.gate_summary import summary_markdown

    metrics = metric or ["epmq"]
    with one_line_errors():
        known = [m for m in metrics if m in GATE_METRICS]
        report = run_gate(
            baseline, candidate, metrics=metrics, slices=["overall", *(slice_ or [])],
            tolerance=per_metric(tolerance or [], known, "tolerance"),
            detect=per_metric(detect or [], known, "detect"),
            baseline_subject=baseline_subject, candidate_subject=candidate_subject,
            n_boot=n_boot, seed=seed,
        )
    text = summary_markdown(report)
    print(text, end="")
    if summary is not None:
        with one_line_errors():
            summary.write_text(text, encoding="utf-8")
    raise typer.Exit(report.exit_code)
