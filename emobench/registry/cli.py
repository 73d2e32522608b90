"""`emobench scenarios ...`: list, show, validate and stratify the case library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from emobench.cli_support import SPLITS, one_line_errors
from emobench.errors import InputError
from emobench.library_paths import library_root
from emobench.registry.card_files import HELD_OUT_EDITION, OTHER_LANGUAGES
from emobench.registry.checks.engine import check_library
from emobench.registry.checks.held_out import overlap_rows
from emobench.registry.checks.meaning import skipped
from emobench.registry.checks.story_shape import asking_shares, shape_shares
from emobench.registry.filters import (
    MIN_COUNTERFACTUAL_SETS,
    TARGETS,
    filter_cases,
    stratification,
    stratum_count,
)
from emobench.registry.loader import (
    Registry,
    load_library_info,
    load_persona,
    load_registry,
    load_scenario,
    split_language,
)
from emobench.registry.models import (
    AXES,
    CATEGORIES,
    DEFAULT_LANGUAGE,
    DIFFICULTIES,
    THRESHOLDS,
    VALENCES,
    Case,
    Language,
)

app = typer.Typer(
    help="Browse and check the scenario and persona library.", no_args_is_help=True
)


def console() -> Console:
    # Built per use: one built at import keeps the width COLUMNS had then.
    return Console()


DEFAULT_ROOT = library_root()
RootOpt = Annotated[
    Path, typer.Option("--root", help="Library root holding scenarios/ and personas/.")
]



def _say(text: str) -> None:
    # Card text is data, not rich markup: "[...]" in a card must print as written.
    console().print(text, markup=False, highlight=False)


def _fmt_p0(case: Case) -> str:
    c, a, p = case.p0
    return f"({c}, {a}, {p})"


@app.command("list")
@one_line_errors()
def list_cases(
    split: Annotated[str | None, typer.Option(help=f"Only this split (bundled library: {', '.join(SPLITS)}).")] = None,
    category: Annotated[str | None, typer.Option(help=f"One of {', '.join(CATEGORIES)}.")] = None,
    difficulty: Annotated[str | None, typer.Option(help=f"One of {', '.join(DIFFICULTIES)}.")] = None,
    axis: Annotated[str | None, typer.Option(help="Dominant axis: C, A or P.")] = None,
    threshold: Annotated[str | None, typer.Option(help=f"One of {', '.join(THRESHOLDS)}.")] = None,
    valence: Annotated[str | None, typer.Option(help=f"One of {', '.join(VALENCES)}.")] = None,
    archived: Annotated[
        bool, typer.Option("--archived", help="Also list archived editions' cases (splits named like test-v1).")
    ] = False,
    language: Annotated[Language | None, typer.Option(help="Only cases in this language (en, zh).")] = None,
    root: RootOpt = DEFAULT_ROOT,
) -> None:
    """List the current edition's cases as a table, optionally filtered."""
    reg = load_registry(root)
    # A split named on the command line is listed even when archived: it was asked for.
    pool = reg.cases(split) if split else reg.all_cases() if archived else reg.edition_cases()
    pool = [case for case in pool if language is None or case.language == language]
    cases = filter_cases(pool, category=category, difficulty=difficulty,
                         dominant_axis=axis, threshold=threshold, valence=valence)
    archived_note = f" and archived {', '.join(reg.archived_splits)}" if archived and not split else ""
    # The split column is redundant when filtering by split; dropping it keeps 80 columns readable.
    columns = ["case", *([] if split else ["split"]), "category", "scenario", "persona", "axis",
               "thr", "‖P0‖", "difficulty", "cf"]
    edition = "" if split else f", edition {reg.info.edition}{archived_note}"
    table = Table(title=f"{len(cases)} cases{edition}", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for column in columns:
        wraps_ok = column in ("scenario", "persona")
        table.add_column(column, no_wrap=not wraps_ok, overflow="fold" if wraps_ok else "ellipsis")
    for case in cases:
        row = {"case": case.id, "split": case.split, "category": case.scenario.category,
               "scenario": case.scenario.id, "persona": case.persona.id,
               "axis": case.dominant_axis, "thr": case.persona.threshold,
               "‖P0‖": f"{case.p0_norm:.1f}", "difficulty": case.difficulty,
               "cf": "✓" if case.counterfactual_set else ""}
        table.add_row(*(row[column] for column in columns))
    console().print(table)


@app.command()
@one_line_errors()
def show(
    case_id: Annotated[str, typer.Argument(metavar="CASE", help="A case id, e.g. demo4-01.")], root: RootOpt = DEFAULT_ROOT
) -> None:
    """Show one case: both cards, the IEDR levels, P0, difficulty and dominant axis."""
    case = load_registry(root).case(case_id)
    sc, pe = case.scenario, case.persona
    console().print(f"[bold]{case.id}[/bold]  split={case.split}  hash={case.content_hash[:16]}")
    _say(f"P0 = {_fmt_p0(case)}   ‖P0‖ = {case.p0_norm:.2f}   difficulty = {case.difficulty}   "
         f"dominant axis = {case.dominant_axis}   counterfactual set = {case.counterfactual_set or '-'}")
    levels = case.iedr.model_dump()
    iedr = Table(title="IEDR levels")
    for item in levels:
        iedr.add_column(item, justify="center")
    iedr.add_row(*(str(v) for v in levels.values()))
    console().print(iedr)

    console().print(f"\n[bold]Scenario[/bold] {sc.id} v{sc.version}")
    _say(f"category: {sc.category}   valence: {case.valence}"
         f"{'   (professional help)' if sc.professional_help else ''}")
    _say(f"topic: {sc.topic}\nhidden need: {case.hidden_need}")
    for i, stage in enumerate(sc.stages, 1):
        _say(f"  stage {i}: {stage}")
    for memory in sc.memories:
        _say(f"  memory ({memory.period}): {memory.text}")
    _say(f"opening: {case.opening}")

    console().print(f"\n[bold]Persona[/bold] {pe.id} v{pe.version}")
    _say(f"{pe.name}, {pe.age}. {pe.identity}\n{pe.background}")
    _say("big five: " + ", ".join(f"{t} {v}" for t, v in pe.big_five.items()))
    _say(f"style: {pe.style.length}; {pe.style.register}; " + "; ".join(pe.style.habits))
    _say(f"threshold: {pe.threshold}   meter start: {pe.meter_start}   resistance: {', '.join(pe.resistance)}")
    for axis in AXES:
        need = pe.needs[axis]
        _say(f"  need {axis}: {need.level} - {need.why}")


def _edition_of(root: Path) -> int | None:
    """The edition library.yaml names, when the card sits in a library that has one."""
    info = root / "library.yaml"
    return load_library_info(info).edition if info.is_file() else None


@app.command()
@one_line_errors()
def validate(
    path: Annotated[Path | None, typer.Argument(help="Library root, or one card file.")] = None,
    root: RootOpt = DEFAULT_ROOT,
    reader: Annotated[str | None, typer.Option(
        "--reader", metavar="BINDING",
        help="Also have a model read each case's prose against its facts and needs (a call per "
             "case not in the cache; never run by default). See scenarios/README.md.")] = None,
) -> None:
    """Validate the whole library (or one card) against its authoring rules and print a summary.

    Every broken rule, and every finding of a --reader, is one line naming file and field, on
    stderr; any problem exits 2.
    """
    target = path or root
    if reader is not None and target.is_file() and target.parent.name != "splits":
        raise InputError("--reader", "binding", "reads a library's cases, not one card: give the library root")
    if target.is_file():
        # personas/zh/x.yaml is a persona card like personas/x.yaml
        kind = target.parents[1].name if target.parent.name in OTHER_LANGUAGES else target.parent.name
        if kind == "personas":
            card = load_persona(target)
            typer.echo(f"ok: persona {card.id} ({card.content_hash[:12]})")
            return
        if kind == "scenarios":
            library = target.parents[2] if target.parent.name in OTHER_LANGUAGES else target.parents[1]
            scenario = load_scenario(target, _edition_of(library))
            typer.echo(f"ok: scenario {scenario.id} ({scenario.content_hash[:12]})")
            return
        if kind != "splits":
            raise InputError(target, "", "not under personas/, scenarios/ or scenarios/splits/")
        target = target.parents[2]
    reg = load_registry(target)
    problems = check_library(reg)
    if reader is not None:
        from emobench.registry.reader import read  # the endpoints' stack only when asked for

        problems += read(reg, reader)
    for problem in problems:
        typer.echo(f"error: {problem}", err=True)
    if note := skipped(reg):
        typer.echo(f"note: {note}", err=True)
    if problems:
        raise typer.Exit(2)
    typer.echo(f"ok: edition {reg.info.edition}, {len(reg.personas)} personas, {len(reg.scenarios)} scenarios, "
               f"{len(reg.counterfactual_sets())} counterfactual sets")
    for split in reg.splits:
        archived = "  (archived)" if split in reg.archived_splits else ""
        typer.echo(f"  {split}: {len(reg.cases(split))} cases, version {reg.version(split)[:16]}{archived}")


def _stats_table(library: Registry, split: str) -> tuple[Table, bool]:
    cases = library.cases(split)
    # library-wide measures (counterfactual sets, shapes, held-out) within the split's language
    reg = library.view(library.language(split)) if split in library.edition_splits else library
    counts = stratification(cases)
    targets = {(t.dimension, t.value): t for t in TARGETS.get(split, [])}
    table = Table(title=f"split {split} ({library.language(split)}): stratification "
                        f"(version {library.version(split)[:16]})")
    for column in ("dimension", "value", "count", "target", ""):
        table.add_column(column)
    all_met = True
    order: dict[str, tuple[str, ...]] = {"total": ("cases",), "category": CATEGORIES,
                                         "dominant_axis": AXES, "difficulty": DIFFICULTIES,
                                         "threshold": THRESHOLDS, "valence": VALENCES}
    rows = [(dim, value) for dim, values in order.items() for value in values]
    rows += [key for key in targets if key not in rows]  # combined strata and margins
    total = len(cases)
    for i, (dim, value) in enumerate(rows):
        actual = stratum_count(counts, dim, value)
        target = targets.get((dim, value))
        met = target is None or target.met(actual, total)
        all_met &= met
        mark = "" if target is None else ("✓" if met else "✗")
        table.add_row(dim, value, str(actual), target.label(total) if target else "-", mark)
        if i + 1 < len(rows) and rows[i + 1][0] != dim:
            table.add_section()
    table.add_section()
    library_sets = len(reg.counterfactual_sets())
    in_split = len({c.counterfactual_set for c in cases if c.counterfactual_set})
    met = library_sets >= MIN_COUNTERFACTUAL_SETS
    all_met &= met
    table.add_row("counterfactual sets", "library", str(library_sets),
                  f"≥ {MIN_COUNTERFACTUAL_SETS}", "✓" if met else "✗")
    table.add_row("counterfactual sets", f"used in {split}", str(in_split), "-", "")
    table.add_section()
    asking = asking_shares(reg, split) if reg.info.edition >= HELD_OUT_EDITION else []
    for share in [*asking, *shape_shares(reg)]:
        all_met &= share.met
        table.add_row(f"shape: {share.name}", share.detail, f"{share.count}/{share.total}",
                      share.bound, "✓" if share.met else "✗")
    if reg.info.edition >= HELD_OUT_EDITION:
        table.add_section()
        for name, detail, value, bound, met in overlap_rows(reg):
            all_met &= met
            table.add_row(name, detail, value, bound, "✓" if met else "✗")
    return table, all_met


@app.command()
@one_line_errors()
def stats(
    split: Annotated[str, typer.Option(help=f"Split to stratify (bundled library: {', '.join(SPLITS)}).")] = "test",
    language: Annotated[Language | None, typer.Option(
        help="Stratify this language's split of that name (--split dev --language zh: dev-zh).")] = None,
    root: RootOpt = DEFAULT_ROOT,
) -> None:
    """Show a split's stratification next to its targets; exit 1 when a target is missed.

    Each language's library is measured on its own: a Chinese split against the Chinese cards.
    """
    reg = load_registry(root)
    if language is not None and language != DEFAULT_LANGUAGE and split_language(split) != language:
        split = f"{split}-{language}"
    table, all_met = _stats_table(reg, split)
    console().print(table)
    console().print("all targets met" if all_met else "[red]some targets missed[/red]")
    if not all_met:
        raise typer.Exit(1)
