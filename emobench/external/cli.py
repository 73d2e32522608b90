"""`emobench external empa RESULTS_DIR -o DIR`: another benchmark's recorded runs as a bundle of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from emobench.cli_support import one_line_errors, progress_bar

app = typer.Typer(
    help="Publish another benchmark's recorded runs, re-scored, beside the leaderboard.", no_args_is_help=True
)


@app.command("empa")
def empa(
    results_dir: Annotated[Path, typer.Argument(help="EMPA's results folder: MODEL/script_*_result.json files.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The bundle's folder, e.g. leaderboard/external/empa-d59757a.")],
    commit: Annotated[
        str | None, typer.Option(help="The EMPA release commit the results come from (default: git, if a checkout).")
    ] = None,
    n_boot: Annotated[
        int, typer.Option(min=1, help="Bootstrap resamples for every CI, and sign patterns for the permutation test.")
    ] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap and of the permutation test.")] = 0,
) -> None:
    """Re-score EMPA's recorded runs and write leaderboard, cases and pairs parquet, index.html and NOTICE."""
    with one_line_errors():
        from emobench.external.bundle import build_empa_bundle
        from emobench.importers.empa import git_commit

        with progress_bar() as tick:
            meta = build_empa_bundle(results_dir, out, commit=commit or git_commit(results_dir) or "unknown",
                                     n_boot=n_boot, seed=seed, tick=tick)
        s = meta["pairs"]["epmq_empa"]
        mdd = "–" if s["median_mdd"] is None else f"{s['median_mdd']:.1f}"  # one model: no pair
        Console(stderr=True).print(
            f"wrote {meta['n_subjects']} models x {meta['n_cases']} cases to {out}: {s['separated']} of "
            f"{s['n_pairs']} pairs separated after Holm, median MDD {mdd}",
            markup=False,
            soft_wrap=True,
        )


@app.command("empa-place")
def empa_place(
    run_dirs: Annotated[list[Path], typer.Argument(help="Finished run directories on the imported EMPA split (one or more).")],
    reference: Annotated[list[str], typer.Option(
        help="A reference model: its subject label in the runs, or LABEL=NAME with its name on the leaderboard "
        "(e.g. \"gemini-2.5-pro=Gemini 2.5 Pro\"). Give both of the protocol's (one strong, one weak)."
    )],
    published: Annotated[Path, typer.Option(
        help="EMPA's leaderboard: results/benchmark_runs/epm-bench/analysis_figures/01_tables/epmq_summary.csv of your "
        "checkout, or a bundle folder of `emobench external empa` (models by EMPA's folder names)."
    )],
    exploratory: Annotated[bool, typer.Option(
        "--exploratory", help="Place runs that leave EMPA's protocol anyway, marked not comparable."
    )] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the placement as JSON here.")] = None,
) -> None:
    """Place each model of the runs on EMPA's published leaderboard through the protocol's two references."""
    with one_line_errors():
        import json

        from emobench.external.placement import place
        from emobench.external.placement_table import placement_table

        result = place(run_dirs, reference, published, exploratory=exploratory)
        if json_out is not None:
            json_out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        if not result["comparable"]:
            Console().print("EXPLORATORY: not EMPA's protocol, not comparable with its leaderboard: "
                            + "; ".join(result["not_comparable"]), markup=False, soft_wrap=True)
        Console().print(placement_table(result))
        for row in result["placed"]:
            within = ", ".join(row["within_interval"]) or "none"
            Console().print(f"{row['subject']}: published models not separated from it (run noise on both sides): {within}",
                          markup=False, soft_wrap=True)
        for note in result["notes"]:
            Console(stderr=True).print(f"note: {note}", markup=False, soft_wrap=True)
