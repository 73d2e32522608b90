"""`emobench import ...`: bring another benchmark's recorded runs in as an emobench run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from emobench.cli_support import one_line_errors, progress_bar

app = typer.Typer(help="Import another benchmark's recorded runs as an emobench run directory.", no_args_is_help=True)


@app.command("empa")
def empa(
    results_dir: Annotated[Path, typer.Argument(help="EMPA's results folder: MODEL/script_*_result.json files.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The new run directory, e.g. runs/empa.")],
    commit: Annotated[
        str | None, typer.Option(help="The EMPA commit the results come from (default: git, if a checkout).")
    ] = None,
) -> None:
    """Import EMPA's recorded runs, scored under the `empa` profile and marked external."""
    with one_line_errors():
        from emobench.importers.empa import import_empa
        from emobench.run.runner import ROOT

        with progress_bar() as tick:
            section = import_empa(results_dir, out, root=ROOT, commit=commit, tick=tick)
        quirks = ", ".join(f"{k} {v}" for k, v in section["quirks"].items())
        Console(stderr=True).print(f"imported {section['episodes']} EMPA episode(s) into {out}: {quirks}", markup=False)


@app.command("empa-cases")
def empa_cases(
    empa_dir: Annotated[Path, typer.Argument(help="Your EMPA checkout (the folder holding empa/data/official_cases.txt).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The local split folder to write; kept outside the package.")] = Path(
        "empa-zh"
    ),
    commit: Annotated[
        str | None, typer.Option(help="The EMPA commit the cards come from (default: git, if a checkout).")
    ] = None,
) -> None:
    """Turn the official cases of your EMPA checkout into a local zh split for `emobench run --local-split`."""
    with one_line_errors():
        from emobench.importers.empa_cases import import_empa_cases

        info = import_empa_cases(empa_dir, out, commit=commit)
        Console(stderr=True).print(
            f"imported {len(info['cases'])} EMPA case(s) into {out} as split {info['split']} "
            f"({info['precomputed_levels']} with precomputed IEDR levels); EMPA's text is CC BY-NC: keep the folder to yourself",
            markup=False, soft_wrap=True,
        )


@app.command("inspect")
def inspect_logs(
    logs: Annotated[list[Path], typer.Argument(help="Logs of `inspect eval emobench/emobench` (.eval or .json files).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The new run directory, e.g. runs/inspect.")],
) -> None:
    """Turn inspect logs of the emobench task into a run directory every command reads (docs/inspect.md)."""
    with one_line_errors():
        from emobench.errors import InputError
        from emobench.run.runner import ROOT

        try:
            from emobench.importers.inspect_log import import_inspect
        except ModuleNotFoundError as exc:  # the light install has no inspect-ai
            package = (exc.name or "inspect_ai").split(".")[0]
            raise InputError(package, "", 'not installed: pip install "emobench[inspect]"') from None

        done = import_inspect(logs, out, root=ROOT)
        unfinished = sum(done["unfinished"].values())
        left = f"; {unfinished} unfinished sample(s) left out (rerun them with `inspect eval-retry`)" if unfinished else ""
        Console(stderr=True).print(f"imported {done['episodes']} episode(s) from {done['logs']} inspect log(s) into {out}{left}",
                                   markup=False, soft_wrap=True)
