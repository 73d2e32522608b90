"""CLI for the regression gate: `emobench gate`.

Thin: parse, call, print. An EmobenchError prints its one line to stderr and exits 2.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from emobench.cli_support import one_line_errors
from emobench.errors import InputError
from emobench.gate.compare import _TWO_WAY, GATE_METRICS
from emobench.publish.runs import SLICE_LEVELS
from emobench.registry.models import AXES, CATEGORIES

# Every slice the gate reads (compare.slice_mask), spelled out for --help.
SLICE_FORMS = "; ".join([
    "overall", f"category={'|'.join(CATEGORIES)}",
    *(f"{family}={'|'.join(levels)}" for family, levels in SLICE_LEVELS.items()),
    *(f"{family}=[{'|'.join(AXES)}/]{'|'.join(modes)}" for family, (_, _, modes) in _TWO_WAY.items()),
])


class Missing(StrEnum):
    """What the gate does when the baseline is not there yet."""

    fail = "fail"
    record = "record"


def gate(
    baseline: Annotated[
        Path, typer.Option(help="Baseline: a run directory, or a published bundle (cases.parquet).")
    ],
    candidate: Annotated[Path, typer.Option(help="Candidate run directory.")],
    metric: Annotated[
        list[str] | None,
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
    baseline_missing: Annotated[
        Missing,
        typer.Option(help="When --baseline does not exist or is an empty folder: fail (exit 2), or "
                          "record the candidate there as the first baseline (exit 0)."),
    ] = Missing.fail,
    n_boot: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
) -> None:
    """Regression gate: exit 0 pass, 1 significant regression beyond tolerance, 2 bad input."""
    from emobench.gate.compare import per_metric, run_gate
    from emobench.gate.record import is_missing, record_baseline
    from emobench.gate.summary import summary_markdown

    metrics = metric or ["epmq"]
    with one_line_errors():
        if baseline_missing is Missing.record and is_missing(baseline):
            _report(record_baseline(candidate, baseline, n_boot=n_boot, seed=seed) + "\n", summary)
            raise typer.Exit(0)
        for spec in slice_ or []:  # an unknown category would select no case and read as no overlap
            family, _, label = spec.partition("=")
            if family == "category" and label not in CATEGORIES:
                raise InputError("--slice", spec, f"unknown category {label!r} (known: {', '.join(CATEGORIES)})")
        known = [m for m in metrics if m in GATE_METRICS]
        report = run_gate(
            baseline, candidate, metrics=metrics, slices=["overall", *(slice_ or [])],
            tolerance=per_metric(tolerance or [], known, "tolerance"),
            detect=per_metric(detect or [], known, "detect"),
            baseline_subject=baseline_subject, candidate_subject=candidate_subject,
            n_boot=n_boot, seed=seed,
        )
    _report(summary_markdown(report), summary)
    raise typer.Exit(report.exit_code)


def _report(text: str, summary: Path | None) -> None:
    print(text, end="")
    if summary is not None:
        with one_line_errors():
            summary.write_text(text, encoding="utf-8")
