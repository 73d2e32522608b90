"""CLI: `emobench anchor RUN… --ratings FILE` and `emobench anchor RUN… --plan N`.

Thin: load the runs' scores, read the ratings, estimate (emobench.scoring.anchoring), print.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from emobench.cli_support import one_line_errors
from emobench.errors import InputError


def anchor(
    runs: Annotated[list[Path], typer.Argument(help="Run directories whose episodes were rated.")],
    ratings: Annotated[Path | None, typer.Option(help="Human ratings, JSONL: one line per rated episode "
                                                "(docs/anchor.md).")] = None,
    plan: Annotated[int | None, typer.Option(min=1, help="Instead: draw this many episodes to rate, at "
                                             "random, and write their list.")] = None,
    seed: Annotated[int, typer.Option(help="The plan's random seed.")] = 0,
    uniform: Annotated[bool, typer.Option(help="Draw the plan uniformly over all episodes, not evenly per "
                                          "subject.")] = False,
    planned: Annotated[Path | None, typer.Option(help="The plan the ratings follow: a rated episode outside "
                                                 "it is refused, and planned episodes left unrated are counted.")] = None,
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Where --plan writes its list (default: "
                                             "standard output).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write every figure as JSON.")] = None,
    alpha: Annotated[float, typer.Option(min=0.001, max=0.5, help="1 − the intervals' confidence.")] = 0.05,
) -> None:
    """Put a run's holistic scores on people's scale from a few human ratings of its episodes (PPI++).

    The ratings of a random draw of the episodes and the panel's scores of all of them give
    prediction-powered estimates and intervals (docs/anchor.md)."""
    from emobench.anchor.plan import draw_plan, plan_lines
    from emobench.scoring.anchoring import anchor as estimate
    from emobench.scoring.anchoring import differences, panel_scores, read_ratings

    with one_line_errors():
        if (ratings is None) == (plan is None):
            raise InputError("--ratings/--plan", "", "give one: --ratings FILE to estimate, or --plan N to draw")
        scores = panel_scores(runs)
        if plan is not None:
            text = plan_lines(draw_plan(scores, plan, seed, per_subject=not uniform))
            if out is None:
                typer.echo(text, nl=False)
            else:
                out.write_text(text, encoding="utf-8")
                typer.echo(f"{plan} episodes to rate written to {out}", err=True)
            return
        assert ratings is not None
        known = set(scores.key)
        rated = read_ratings(ratings, known)
        unrated = _check_plan(planned, rated) if planned is not None else None
        results = estimate(scores, rated, alpha, ratings)
        if not results:
            raise InputError(ratings, "", "no subject has rated episodes from two cases or more and one episode unrated, "
                             "on any dimension")
        pairs = differences(results, alpha)
        _print(results, pairs, alpha, unrated)
        if json_out is not None:
            document: dict[str, Any] = {
                "runs": [str(r) for r in runs], "ratings": str(ratings), "alpha": alpha,
                "estimates": [r.row() for r in results], "differences": pairs,
                "planned_unrated": unrated,
            }
            json_out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def _check_plan(planned: Path, rated: dict[str, dict[str, float]]) -> int:
    try:
        keys = {json.loads(line)["episode"] for line in planned.read_text(encoding="utf-8").splitlines() if line.strip()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(planned, "", f"not a plan written by `emobench anchor --plan` ({exc})") from None
    outside = sorted(set(rated) - keys)
    if outside:
        raise InputError(planned, "", f"{len(outside)} rated episode(s) are not in the plan, e.g. {outside[0]!r}: "
                         "rate the planned episodes only, or the sample is no longer random")
    return len(keys - set(rated))


def _print(results: list[Any], pairs: list[dict[str, Any]], alpha: float, unrated: int | None) -> None:
    from rich.console import Console
    from rich.table import Table

    level = f"{100 * (1 - alpha):g}%"
    table = Table(title=f"What people would say of every episode ({level} intervals, 1–10)")
    for column in ("subject", "dimension", "rated / episodes", "people only", "panel only", "anchored", "λ",
                   "worth (human ratings)"):
        table.add_column(column, justify="left" if column in ("subject", "dimension") else "right")
    for r in results:
        table.add_row(r.subject, r.dimension, f"{r.n_rated} / {r.n_episodes}", _interval(r.people),
                      _interval(r.panel), _interval(r.anchored), f"{r.anchored.weight:.2f}", f"{r.effective_n:.0f}")
    console = Console()
    console.print(table)
    overall = [p for p in pairs if p["dimension"] == "overall"]
    for p in overall:
        a, people = p["anchored"], p["people"]
        console.print(f"{p['subject_a']} − {p['subject_b']} (overall): anchored {a['mean']:+.2f} "
                      f"[{a['low']:+.2f}, {a['high']:+.2f}], people only {people['mean']:+.2f} "
                      f"[{people['low']:+.2f}, {people['high']:+.2f}]", highlight=False)
    console.print("The panel-only column is the panel's own mean: it is off by the panel's bias, which the "
                  "anchored interval corrects and the people-only one never had.", highlight=False)
    if unrated:
        console.print(f"{unrated} planned episode(s) are not rated: if they were skipped for what they hold, the "
                      "sample is no longer random.", highlight=False)


def _interval(e: Any) -> str:
    return f"{e.mean:.2f} [{e.low:.2f}, {e.high:.2f}]"
