"""The emobench command line: parse, call, print. Errors are one line and a non-zero exit."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from emobench.cli_support import Interruption, OneLineUsage, against_flags, one_line_errors
from emobench.errors import InputError
from emobench.gate import cli as gate_cli
from emobench.importers import cli as import_cli
from emobench.judging import calibrate_cli
from emobench.publish import cli as publish_cli
from emobench.publish import validity_cli, viewer_cli
from emobench.registry import cli as registry_cli

app = typer.Typer(
    help="emobench: a dynamic emotional-intelligence benchmark for chat models.",
    no_args_is_help=True,
    add_completion=False,
    cls=OneLineUsage,
)
app.add_typer(registry_cli.app, name="scenarios")
app.add_typer(publish_cli.leaderboard_app, name="leaderboard")
app.add_typer(import_cli.app, name="import")
app.command("gate")(gate_cli.gate)
app.command("calibrate")(calibrate_cli.calibrate)
app.command("show")(viewer_cli.show)
app.command("report")(viewer_cli.report)
app.command("validate")(validity_cli.validate)


def err() -> Console:
    # Built per use so output follows the current sys.stdout/stderr (CliRunner swaps them).
    return Console(stderr=True)


def _overrides(
    subject: list[str] | None,
    user: str | None,
    judge: list[str] | None,
    split: str | None,
    seeds: str | None,
    max_turns: int | None,
    min_turns: int | None,
    limit: int | None,
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if subject:
        data["subjects"] = [{"binding": s} for s in subject]
    if user:
        data["user"] = {"binding": user}
    if judge:
        data["judges"] = [{"binding": j, "label": f"judge-{i}" if len(judge) > 1 else None} for i, j in enumerate(judge)]
    if split:
        data["split"] = split
    if seeds is not None:
        try:
            data["seeds"] = [int(s) for s in seeds.split(",") if s.strip()]
        except ValueError:
            raise InputError("--seeds", "", f"{seeds!r} is not a comma-separated list of integers") from None
        if not data["seeds"]:
            raise InputError("--seeds", "", f"{seeds!r} holds no seed")
    for key, value in (("max_turns", max_turns), ("min_turns", min_turns), ("limit_cases", limit)):
        if value is not None:
            data[key] = value
    return data


# The config field each flag of `run` sets (the key _overrides uses -> the validated field).
FLAGS = {
    "subjects": "--subject", "user": "--user", "judges": "--judge", "split": "--split", "seeds": "--seeds",
    "max_turns": "--max-turns", "min_turns": "--min-turns", "limit_cases": "--limit",
}
FLAG_FIELDS = {key: "panel.judges" if key == "judges" else key for key in FLAGS}


def _merge_roles(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """CLI bindings replace the config's binding but keep its sampling when the role exists."""
    merged = {**base, **override}
    if "judges" in override:
        # The panel's judges are replaced; its other settings (rubrics, holistic, pairwise) stay.
        old, new = base["panel"]["judges"], merged.pop("judges")
        if len(old) == len(new):
            new = [{**b, "binding": o["binding"], "label": o["label"]} for b, o in zip(old, new, strict=True)]
        merged["panel"] = {**base["panel"], "judges": new}
    if "subjects" in override and "subjects" in base and len(base["subjects"]) == len(override["subjects"]):
        merged["subjects"] = [
            {**b, "binding": o["binding"], "label": None} for b, o in zip(base["subjects"], override["subjects"], strict=True)
        ]
    if "user" in override and "user" in base:
        merged["user"] = {**base["user"], "binding": override["user"]["binding"], "label": None}
    return merged


def _response_cache(enabled: bool, folder: Path | None) -> Any:
    from emobench.endpoints.cache import ResponseCache
    from emobench.endpoints.embedded import cache_root

    if not enabled:
        return None
    default = Path(os.environ.get("EMOBENCH_RESPONSE_CACHE") or cache_root() / "responses.sqlite")
    return ResponseCache(folder / "responses.sqlite" if folder else default)


def _parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()) or not 0 <= int(index) < int(count):
        raise InputError("--shard", "shard", f"{text!r} is not I/N with 0 <= I < N")
    return int(index), int(count)


@app.command()
def run(
    config: Annotated[Path | None, typer.Option(help="Run config YAML (default: configs/demo.yaml).")] = None,
    subject: Annotated[list[str] | None, typer.Option(help="Subject binding; repeat for several.")] = None,
    user: Annotated[str | None, typer.Option(help="User-simulator binding.")] = None,
    judge: Annotated[list[str] | None, typer.Option(help="Judge binding; repeat for a panel.")] = None,
    split: Annotated[str | None, typer.Option(help="Split to run (demo, test, dev).")] = None,
    seeds: Annotated[str | None, typer.Option(help="Comma-separated seeds, e.g. 0,1,2.")] = None,
    max_turns: Annotated[int | None, typer.Option(help="Turn limit per episode.")] = None,
    min_turns: Annotated[int | None, typer.Option(help="First turn at which EPM and meter stop rules apply.")] = None,
    limit: Annotated[int | None, typer.Option(help="Run only the first N cases of the split.")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Where run directories go.")] = Path("runs"),
    run_id: Annotated[str | None, typer.Option(help="Run directory name (default: a timestamp).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue this run directory, skipping finished episodes.")] = None,
    force: Annotated[bool, typer.Option(help="Resume even when the config hash differs.")] = False,
    shard: Annotated[str | None, typer.Option(help="Run only shard I/N of the (case, seed) pairs, e.g. 0/4.")] = None,
    cache: Annotated[bool, typer.Option(help="Answer repeated model calls from the on-disk response cache.")] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache folder (default: the user cache dir).")] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Run episodes, judge and score them, and print the leaderboard."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def go(interruption: Interruption) -> None:
        from emobench.config import load_config_data, resolve_panel, validate_config
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.publish.show import render_table
        from emobench.registry import load_registry
        from emobench.report import finalize_run, summary_line
        from emobench.rundir import RunDir
        from emobench.runner import ROOT, run_benchmark
        from emobench.scoring.epmq import EPMQ_WEIGHTS
        from emobench.scoring.invalid_outputs import invalid_summary

        if run_id is not None and (Path(run_id).name != run_id or run_id in ("", ".", "..") or "\x00" in run_id):
            raise InputError("--run-id", "", f"{run_id!r} is not a plain directory name")
        if resume is not None and not RunDir(resume).manifest.exists():
            raise InputError(resume, "", "no manifest.json: not a run directory to resume")
        source = config or (resume / "manifest.json" if resume else ROOT / "configs" / "demo.yaml")
        base = RunDir(resume).read_config() if resume and config is None else load_config_data(source)
        overrides = _overrides(subject, user, judge, split, seeds, max_turns, min_turns, limit)
        flags = {FLAG_FIELDS[key]: flag for key, flag in FLAGS.items() if key in overrides}
        with against_flags(flags):
            cfg = validate_config(_merge_roles(resolve_panel(base, source, ROOT), overrides), source)
        run_dir = resume or out_dir / (run_id or datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
        interruption.run_dir = run_dir
        log = err()
        responses = _response_cache(cache, cache_dir)
        with against_flags(flags):  # an unknown --split is found when the registry is read
            result = asyncio.run(
                run_benchmark(
                    cfg,
                    run_dir,
                    resume=resume is not None,
                    force=force,
                    console=log,
                    show_progress=progress,
                    cache=responses,
                    shard=_parse_shard(shard),
                )
            )
        rd = RunDir(result.run_dir)
        finalize_run(rd, load_registry(ROOT))
        table = build_leaderboard([rd.path])
        write_leaderboard(table, rd.path)
        render_table(table, Console())
        log.print("EPM-Q = " + " + ".join(f"{w:g}·{group.capitalize()}" for group, w in EPMQ_WEIGHTS.items()))
        report = rd.read_report()
        log.print(f"{result.new_episodes} new episode(s), {result.total_episodes} in total · {summary_line(report)} · {rd.path}")
        log.print(invalid_summary(report))

    with one_line_errors() as interruption:
        go(interruption)


@app.command()
def merge(
    run_dirs: Annotated[list[Path], typer.Argument(help="Shard run directories.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The merged run directory to write.")],
    force: Annotated[bool, typer.Option(help="Merge even when configs or versions differ.")] = False,
) -> None:
    """Merge shard run directories into one, then score it."""

    def go() -> None:
        from emobench.merge import merge_runs
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.publish.show import render_table
        from emobench.registry import load_registry
        from emobench.report import finalize_run
        from emobench.rundir import RunDir
        from emobench.runner import ROOT

        counts = merge_runs(run_dirs, out, force=force)
        rd = RunDir(out)
        finalize_run(rd, load_registry(ROOT))
        table = build_leaderboard([rd.path], force=force)
        write_leaderboard(table, rd.path)
        render_table(table, Console())
        err().print(
            f"merged {counts['sources']} run(s): {counts['episodes']} episodes, "
            f"{counts['duplicates']} duplicate(s) dropped → {out}"
        )

    with one_line_errors():
        go()


@app.command()
def judge(
    run_dir: Annotated[Path, typer.Argument(help="A finished run directory.")],
    panel: Annotated[Path, typer.Option(help="Panel definition, e.g. judges/panels/embedded-pair.yaml.")],
    cache: Annotated[bool, typer.Option(help="Answer repeated model calls from the on-disk response cache.")] = True,
    cache_dir: Annotated[Path | None, typer.Option(help="Response cache folder.")] = None,
    force: Annotated[bool, typer.Option(help="Rescore even when the case cards changed since the run.")] = False,
) -> None:
    """Rescore a run with another judge panel; no conversation is regenerated."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def go() -> None:
        from emobench.importers.cards import registry_for
        from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
        from emobench.publish.show import render_table
        from emobench.report import finalize_run
        from emobench.rescore import rescore
        from emobench.rundir import RunDir
        from emobench.runner import ROOT

        log = err()
        out = asyncio.run(rescore(run_dir, panel, cache=_response_cache(cache, cache_dir), force=force, console=log))
        finalize_run(out, registry_for(run_dir, ROOT), source=RunDir(run_dir))
        table = build_leaderboard([out.path], force=force)
        write_leaderboard(table, out.path)
        render_table(table, Console())
        log.print(f"new judgements and scores in {out.path}")

    with one_line_errors():
        go()


def main() -> None:
    app(prog_name="emobench")


if __name__ == "__main__":
    main()
