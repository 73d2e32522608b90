"""The `--judge-check` part of `emobench validate`: which panels, which data, and the
side-by-side table that helps a user choose a judge (docs/judges.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from emobench.cli_support import Tick
from emobench.config import PanelConfig
from emobench.endpoints.cache import ResponseCache
from emobench.errors import InputError
from emobench.library_paths import library_file
from emobench.validation.epitome.data import MECHANISMS

DATASETS = ("epitome", "esconv")
KEYS = {"epitome": "judge_check", "esconv": "judge_check_esconv"}  # validity.json's key for each
DEFAULT_PANEL = Path("judges") / "panels" / "embedded.yaml"


def _panels(paths: list[Path], judges: list[str], run_dirs: list[Path], root: Path) -> list[tuple[str, PanelConfig]]:
    """Each --panel file, or one panel of the --judge bindings; else the first run's panel, else the embedded panel."""
    from emobench.config import RoleConfig, validate_config
    from emobench.run.rescore import load_panel
    from emobench.rundir import RunDir

    if paths and judges:
        raise InputError("--judge", "", "give --panel files or --judge bindings, not both")
    if judges:
        roles = [RoleConfig(binding=j, label=f"judge-{i}" if len(judges) > 1 else None) for i, j in enumerate(judges)]
        panels = [("+".join(judges), PanelConfig(name="judges", judges=roles))]
    elif paths:
        panels = [(p.stem, load_panel(library_file(p))) for p in paths]
    elif run_dirs:
        rd = RunDir(run_dirs[0])
        panel = validate_config(rd.read_manifest()["config"], rd.manifest, root).panel
        panels = [(panel.name, panel)]
    else:
        panels = [(DEFAULT_PANEL.stem, load_panel(root / DEFAULT_PANEL))]
    labels = [label for label, _ in panels]
    for label in labels:
        if labels.count(label) > 1:
            raise InputError("--panel", "", f"two panels are labelled {label!r}; give panel files with different names")
    return panels


def judge_check_report(
    dataset: str, panel_paths: list[Path], data_dir: Path | None, *, limit: int | None, run_dirs: list[Path],
    root: Path, cache: ResponseCache | None, log_dir: Path, seed: int, n_boot: int, judges: list[str] | None = None,
    splits: str = "train,valid", dry_run: bool = False, tick: Tick | None = None,
) -> dict[str, Any] | None:
    """The data set's block for validity.json; None after a dry run, which only prints."""
    if dataset not in DATASETS:
        raise InputError("--judge-check", "", f"unknown data set {dataset!r}; use {', '.join(DATASETS)}")
    if data_dir is None:
        what = "the EPITOME CSV files (docs/judges.md)" if dataset == "epitome" else "ESConv (docs/validity.md)"
        raise InputError("--data", "", f"missing: pass the folder holding {what}")
    if dataset == "esconv":
        return _esconv(panel_paths, data_dir, judges or [], limit=limit, run_dirs=run_dirs, root=root, cache=cache,
                       log_dir=log_dir, seed=seed, n_boot=n_boot, splits=splits, dry_run=dry_run, tick=tick)
    if dry_run:
        raise InputError("--dry-run", "", "for --judge-check esconv only")
    from emobench.validation.epitome.check import judge_check
    from emobench.validation.epitome.data import read_epitome

    data = read_epitome(data_dir)
    panels = _panels(panel_paths, judges or [], run_dirs, root)
    return judge_check(data, data_dir, panels, limit=limit, root=root, cache=cache, log_dir=log_dir, seed=seed, n_boot=n_boot)


def _esconv(
    panel_paths: list[Path], data_dir: Path, judges: list[str], *, limit: int | None, run_dirs: list[Path], root: Path,
    cache: ResponseCache | None, log_dir: Path, seed: int, n_boot: int, splits: str, dry_run: bool, tick: Tick | None,
) -> dict[str, Any] | None:
    from emobench.validation.esconv.check import Inputs, judge_check_esconv
    from emobench.validation.esconv.data import load_esconv, parse_splits
    from emobench.validation.esconv.report import estimate, print_estimate

    chosen = parse_splits(splits)
    sample = load_esconv(data_dir, splits=chosen, limit=limit, seed=seed)
    panels = _panels(panel_paths, judges, run_dirs, root)
    if dry_run:
        inp = Inputs(sample, root)
        print_estimate(inp, estimate(inp, panels, root), Console())
        return None
    return judge_check_esconv(sample, panels, root=root, cache=cache, log_dir=log_dir, seed=seed, n_boot=n_boot,
                              splits=chosen, limit=limit, tick=tick)


def _ci(stat: dict[str, Any] | None) -> str:
    if not stat or stat.get("value") is None:
        return "–"
    lo, hi = stat.get("lo"), stat.get("hi")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{stat['value']:.2f}{ci}"


def _chance(stat: dict[str, Any] | None) -> str:
    return "–" if not stat or stat.get("mean") is None else f"{stat['mean']:.2f} [{stat['lo']:.2f}, {stat['hi']:.2f}]"


def print_judge_check(block: dict[str, Any], console: Console) -> None:
    """One column per panel, beside the baselines of the first panel's valid pairs."""
    panels = block["panels"]
    limit = f"stratified sample of {block['limit']} per mechanism, seed {block['seed']}" if block["limit"] else "all pairs"
    table = Table(title=f"Judges against EPITOME's human levels ({limit}; {block['n_rated_pairs']} pairs rated)")
    table.add_column("mechanism (axis)")
    table.add_column("statistic")
    for label in panels:
        table.add_column(label, justify="right")
    table.add_column("majority", justify="right")
    table.add_column("chance", justify="right")
    for mechanism in MECHANISMS:
        rows = {label: p["mechanisms"][mechanism] for label, p in panels.items()}
        first = next(iter(rows.values()))
        base = first["baselines"]
        name = f"{mechanism} ({block['mapping'][mechanism].split('.')[0]}), N={first['n']}"
        majority, chance = base.get("majority") or {}, base.get("chance") or {}
        table.add_row(name, "Spearman ρ", *(_ci(r["spearman"]) for r in rows.values()), "–", _chance(chance.get("spearman")))
        alpha = majority.get("alpha")
        table.add_row("", "ordinal α", *(_ci(r["alpha_ordinal"]) for r in rows.values()),
                      "–" if alpha is None else f"{alpha:.2f}", _chance(chance.get("alpha")))
        table.add_row("", "exact agreement", *(_ci(r["exact_agreement"]) for r in rows.values()),
                      f"{majority.get('exact_agreement', 0):.2f}", f"{chance.get('exact_agreement', 0):.2f}")
        table.add_row("", "invalid share", *(_ci(r["invalid_share"]) for r in rows.values()), "", "", end_section=True)
    table.add_row("sum of levels (holistic empathy)", "Spearman ρ",
                  *(_ci(p["holistic_empathy"]["spearman"]) for p in panels.values()), "–", "0.00", end_section=True)
    table.add_row("", "calls / tokens / wall s", *(
        f"{p['cost']['n_calls']} / {p['cost']['prompt_tokens'] + p['cost']['completion_tokens']} / {p['cost']['wall_s']}"
        for p in panels.values()), "", "")
    console.print(table)
