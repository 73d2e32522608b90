"""CLI for the regression gate: `emobench gate`.

Thin: parse, call, print. An EmobenchError prints its one line to stderr and exits 2.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from emobench.cli_support import one_line_errors, response_cache
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
    seed: Annotated[int, typer.Option(help="Bootstrap seed, and the case order of --sequential.")] = 0,
    sequential: Annotated[bool, typer.Option(
        "--sequential", help="Play the candidate on the baseline's cases in the gate's order, in waves, and stop as "
        "soon as a regression beyond the tolerance, or its absence, is certain (docs/adaptive.md).",
    )] = False,
    play: Annotated[Path | None, typer.Option(
        help="With --sequential: the run config that plays the candidate into --candidate when no run is there yet.",
    )] = None,
    wave: Annotated[int | None, typer.Option(
        min=1, help="With --sequential: episodes (case × seed) per wave; default a tenth of them.")] = None,
    subject: Annotated[list[str] | None, typer.Option(help="With --play: the candidate's binding, as `run --subject`.")] = None,
    user: Annotated[str | None, typer.Option(help="With --play: the user simulator's binding, as `run --user`.")] = None,
    judge: Annotated[list[str] | None, typer.Option(help="With --play: a judge's binding, as `run --judge`.")] = None,
) -> None:
    """Regression gate: exit 0 pass, 1 significant regression beyond tolerance, 2 bad input."""
    from emobench.gate.baseline import load_side
    from emobench.gate.compare import per_metric, run_gate
    from emobench.gate.record import is_missing, record_baseline
    from emobench.gate.summary import summary_markdown

    metrics = metric or ["epmq"]
    with one_line_errors():
        if sequential:
            _sequential_only(metrics, slice_)
        elif play is not None or wave is not None:
            raise InputError("--play" if play is not None else "--wave", "", "plays the candidate only with --sequential")
        from emobench.run.flags import flag_overrides

        bindings = flag_overrides(subject, user, judge, None, None, None, None, None)
        if bindings and play is None:
            raise InputError("--" + next(iter(bindings)).rstrip("s"), "", "binds a role of the run --play starts; give --play")
        if sequential and baseline_missing is Missing.record and is_missing(baseline) and play is not None:
            from emobench.gate.sequential import play_all

            play_all(candidate, play, bindings, response_cache(True, None))
        if baseline_missing is Missing.record and is_missing(baseline):
            _report(record_baseline(candidate, baseline, n_boot=n_boot, seed=seed) + "\n", summary)
            raise typer.Exit(0)
        for spec in slice_ or []:  # an unknown category would select no case and read as no overlap
            family, _, label = spec.partition("=")
            if family == "category" and label not in CATEGORIES:
                raise InputError("--slice", spec, f"unknown category {label!r} (known: {', '.join(CATEGORIES)})")
        known = [m for m in metrics if m in GATE_METRICS]
        tolerances = per_metric(tolerance or [], known, "tolerance")
        if sequential:
            from emobench.gate.sequential import play_candidate, sequential_markdown

            seq = play_candidate(baseline, candidate, play=play, tolerance=tolerances.get("epmq", 0.0),
                                 baseline_subject=baseline_subject, requested=candidate_subject, seed=seed, wave=wave,
                                 bindings=bindings, cache=response_cache(True, None))
            if seq.state.get("stopped"):
                base = load_side(baseline, baseline_subject, "--baseline-subject")
                _report(sequential_markdown(seq, base.source, str(candidate), base.subject), summary)
                raise typer.Exit(1 if seq.state["decision"] == "fail" else 0)
        report = run_gate(
            baseline, candidate, metrics=metrics, slices=["overall", *(slice_ or [])],
            tolerance=tolerances,
            detect=per_metric(detect or [], known, "detect"),
            baseline_subject=baseline_subject, candidate_subject=candidate_subject,
            n_boot=n_boot, seed=seed,
        )
    text = summary_markdown(report)
    if sequential:
        text += (f"- Sequential: the candidate played all {seq.population} of its episodes of the baseline's cases and "
                 "the confidence sequence settled nothing earlier; the verdict is the bootstrap's, as without "
                 "--sequential.\n")
    _report(text, summary)
    raise typer.Exit(report.exit_code)


def _sequential_only(metrics: list[str], slices: list[str] | None) -> None:
    """--sequential stops on one question: EPM-Q, overall (the range of the others is not a profile's)."""
    other = [m for m in metrics if m != "epmq"] + [s for s in slices or [] if s not in ("overall", "overall=all")]
    if other:
        raise InputError("--sequential", "", f"gates epmq on the overall slice only, not {', '.join(other)}; "
                         "gate those without --sequential")


def _report(text: str, summary: Path | None) -> None:
    print(text, end="")
    if summary is not None:
        with one_line_errors():
            summary.write_text(text, encoding="utf-8")
