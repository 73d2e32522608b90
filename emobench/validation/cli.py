"""`emobench validate RUN... [--human FILE] [--fidelity HUMAN_RUN SIM_RUN]`: the validity report of
one or more runs (docs/validity.md), printed and written to validity.json.

Known groups, test-retest and judge-tracker agreement come from the runs on disk. With
--human, the first run's judge panel rates human-rated conversations on the holistic rubric,
and the report adds its agreement with the human ratings. With --fidelity, the report compares
episodes people played as the user with the simulator's (emobench.validation.fidelity.compare).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from emobench.cli_support import Tick, one_line_errors, progress_bar
from emobench.errors import InputError
from emobench.records import Episode, EpisodeJudgement
from emobench.rundir import RunDir, read_records

if TYPE_CHECKING:
    import pandas as pd


def _episodes(rd: RunDir) -> list[Episode]:
    """A run's episodes as its panel judged them (a rescore's panel folder replays its verdicts)."""
    from emobench.scoring.replay import rejudged

    manifest = rd.read_manifest()
    source = RunDir(Path(manifest["rescored_from"])) if manifest.get("rescored_from") else rd
    min_turns = int(manifest.get("config", {}).get("min_turns", 12))
    replays = {j.key: j.mdep for j in read_records(rd.judgements, EpisodeJudgement) if j.mdep is not None}
    return [rejudged(e, replays[e.key], min_turns) if e.key in replays else e for e in source.read_episodes()]


def _scores(rd: RunDir) -> pd.DataFrame:
    import pandas as pd

    if not rd.path.is_dir():
        raise InputError(rd.path, "", "no such folder: give a run directory (runs/<id>)")
    if not rd.manifest.exists():
        raise InputError(rd.path, "", "not a run directory (no manifest.json)")
    if not rd.scores.exists():
        raise InputError(rd.scores, "", "file not found: score the run first (emobench run / merge / judge)")
    frame = pd.read_parquet(rd.scores, columns=["run_id", "subject", "case_id", "seed", "epmq", "success"])
    return frame.assign(run_id=str(rd.path))  # a replicate is (run directory, seed)


def build_report(
    run_dirs: list[Path], human: Path | None, *, root: Path, cache: Any, n_boot: int, seed: int, tick: Tick | None = None
) -> dict[str, Any]:
    """The report; tick, when given, hears of each run read and then of the checks."""
    import pandas as pd

    from emobench.registry import load_registry
    from emobench.scoring.validity import human_agreement, run_validity
    from emobench.validation.agreement.human import panel_scores, read_human

    runs = [RunDir(p) for p in run_dirs]
    steps = len(runs) + 1 + (human is not None)
    scores = pd.concat([_scores(rd) for rd in runs], ignore_index=True)  # a missing score stops before any work
    roles: dict[str, list[Any]] = {"subjects": []}
    episodes = []
    for done, rd in enumerate(runs):
        if tick is not None:
            tick("reading runs", done, steps)
        roles["subjects"] += rd.read_manifest().get("roles", {}).get("subjects", [])
        episodes += _episodes(rd)
    if tick is not None:
        tick("checks", len(runs), steps)
    report: dict[str, Any] = {"runs": [str(p) for p in run_dirs]}
    report |= run_validity(scores, episodes, roles, n_boot=n_boot, seed=seed)
    if tick is not None:
        tick("judge-human" if human is not None else "done", len(runs) + 1, steps)
    if human is not None:
        registry = load_registry(root)
        conversations = read_human(human, registry)
        panel = asyncio.run(panel_scores(runs[0], conversations, registry, root, cache))
        ratings = {c.id: c.ratings for c in conversations}
        report["human"] = {"file": str(human), "n_conversations": len(conversations), "panel_of": str(runs[0].path),
                           "dimensions": human_agreement(panel, ratings)}
        if tick is not None:
            tick("done", steps, steps)
    return report


def _fmt(x: Any, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def print_report(report: dict[str, Any], console: Console) -> None:
    kg = report["known_groups"]
    style = {"pass": "bold green", "fail": "bold red"}.get(kg["verdict"], "bold yellow")
    console.print(f"[{style}]known groups: {kg['verdict'].upper()}[/] — {kg['summary']}", soft_wrap=True)
    for c in kg["comparisons"]:
        console.print(f"  {c['subject']} − {c['reference']} on {c['metric']}: {_fmt(c['diff'], 2)} "
                      f"[{_fmt(c['lo'], 2)}, {_fmt(c['hi'], 2)}] over {c['n_cases']} case(s): {c['verdict']}", soft_wrap=True)
    tr = report["test_retest"]
    if tr["subjects"] is None:
        console.print(f"test–retest: {tr['note']} ({tr['n_replicates']} replicate(s))")
    else:
        console.print(f"test–retest ({tr['n_replicates']} replicates, Spearman ρ of {tr['metric']}): "
                      f"subjects {_fmt(tr['subjects']['rho'])}, cases {_fmt(tr['cases']['rho'])}")
    jt = report["judge_tracker"]
    console.print(f"judge–tracker per turn (panel A progress vs {jt['tracker']} change): ρ = {_fmt(jt['rho'])} "
                  f"(p = {_fmt(jt['p'], 4)}, {jt['n_turns']} turns)", soft_wrap=True)
    for dim, row in report.get("human", {}).get("dimensions", {}).items():
        console.print(f"judge–human {dim}: ρ = {_fmt(row['spearman'])}, α(panel, humans) = "
                      f"{_fmt(row['alpha_panel_vs_human'])}, α(between humans) = {_fmt(row['alpha_between_humans'])}"
                      f" over {row['n']} conversation(s)", soft_wrap=True)


def _earlier(target: Path) -> dict[str, Any]:
    """The validity.json already at target, to merge into (empty when there is none)."""
    if not target.exists():
        return {}
    try:
        earlier = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        earlier = None
    if not isinstance(earlier, dict):
        raise InputError(target, "", "not a readable validity.json, so it cannot be merged into; give another -o")
    return earlier


def validate(
    run_dirs: Annotated[list[Path] | None, typer.Argument(
        help="Scored run directories (several: seeds and reruns pool); optional with --fidelity or --judge-check.")] = None,
    human: Annotated[Path | None, typer.Option(help="Human-rated conversations (JSONL, docs/validity.md).")] = None,
    fidelity: Annotated[tuple[Path, Path] | None, typer.Option(metavar="HUMAN_RUN SIM_RUN",
        help="Compare a run people played as the user with a simulator run (docs/validity.md).")] = None,
    out: Annotated[Path | None, typer.Option(
        "-o", "--out", help="validity.json path (default: in the first run, else HUMAN_RUN, else here).")] = None,
    n_boot: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed; also the judge check's sample and judge seeds.")] = 0,
    cache: Annotated[bool, typer.Option(help="Answer repeated judge calls from the response cache.")] = True,
    judge_check: Annotated[str | None, typer.Option(
        help="Rate a human-rated data set: epitome (docs/judges.md) or esconv (docs/validity.md).")] = None,
    panel: Annotated[list[Path] | None, typer.Option(help="Judge-check panel file; repeat to compare panels.")] = None,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Judge check: N pairs per mechanism (epitome), N chats per file (esconv).")] = None,
    data: Annotated[Path | None, typer.Option(help="Judge check or replay: the folder (or file) holding the data set.")] = None,
    judge: Annotated[list[str] | None, typer.Option(
        help="Judge check: a judge binding instead of --panel; repeat for several.")] = None,
    user: Annotated[str | None, typer.Option(help="The simulator's binding, for a replay of the data set's seekers.")] = None,
    split: Annotated[str, typer.Option(
        help="ESConv's splits to read (test is held out): train,valid, any of train,valid,test, or all.")] = "train,valid",
    dry_run: Annotated[bool, typer.Option(
        help="ESConv judge check or replay: print the calls and cost it would take, and stop.")] = False,
    fidelity_replay: Annotated[str | None, typer.Option(
        help="Replay a data set's real help-seekers with the --user simulator: esconv (docs/validity.md).")] = None,
) -> None:
    """Validity report: known groups, test–retest, judge–tracker and judge–human agreement; with
    --fidelity, the simulator against people; with --judge-check, the panel against a human-annotated data set."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with one_line_errors():
        from emobench.endpoints.cache import ResponseCache
        from emobench.run.runner import ROOT
        from emobench.user_cache import cache_root

        responses = None
        if cache:
            responses = ResponseCache(Path(os.environ.get("EMOBENCH_RESPONSE_CACHE") or cache_root() / "responses.sqlite"))
        runs = run_dirs or []
        if not runs and judge_check is None and fidelity is None and fidelity_replay is None:
            raise InputError("validate", "RUN_DIRS", "give scored run directories, --fidelity, --judge-check, or several")
        if human is not None and not runs:
            raise InputError("--human", "", "needs a run directory: the run's panel rates the file")
        if human is not None:  # the run's judges rate the file: their keys first, before any work
            from emobench.run.preflight import judge_keys
            judge_keys(runs[0], ROOT)
        with progress_bar() as tick:
            report = build_report(runs, human, root=ROOT, cache=responses, n_boot=n_boot, seed=seed, tick=tick) if runs else {}
        if user is not None and fidelity_replay is None:
            raise InputError("--user", "", "only a replay of the data set's seekers (--fidelity-replay) uses the simulator")
        home = runs[0] if runs else fidelity[0] if fidelity else Path(".")
        target = out or home / "validity.json"
        earlier = _earlier(target) if not dry_run else {}  # read first: a bad file stops before any work
        if fidelity is not None:
            from emobench.validation.fidelity.compare import fidelity_report

            report["fidelity"] = fidelity_report(*fidelity, n_boot=n_boot, seed=seed)
        if judge_check is not None:
            from emobench.validation.judge_check_cli import KEYS, judge_check_report

            with progress_bar() as tick:
                block = judge_check_report(
                    judge_check, panel or [], data, limit=limit, run_dirs=runs, root=ROOT, cache=responses,
                    log_dir=target.parent / "logs", seed=seed, n_boot=n_boot, judges=judge or [], splits=split,
                    dry_run=dry_run, tick=tick)
            if block is None:
                return
            report[KEYS[judge_check]] = block
        if fidelity_replay is not None:
            from emobench.validation.esconv.replay_cli import fidelity_replay_report

            with progress_bar() as tick:
                replayed = fidelity_replay_report(
                    fidelity_replay, data, user, splits=split, limit=limit, seed=seed, n_boot=n_boot, root=ROOT,
                    cache=responses, out_dir=target.parent, dry_run=dry_run, tick=tick)
            if replayed is None:
                return
            report["fidelity_replay"] = replayed
        # Checks run before stay: a judge check added later keeps known groups, fidelity and other data sets.
        target.write_text(json.dumps({**earlier, **report}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if "known_groups" in report:
        print_report(report, Console())
    if "fidelity" in report:
        from emobench.validation.fidelity.report import print_fidelity

        print_fidelity(report["fidelity"], Console())
    if "fidelity_replay" in report:
        from emobench.validation.esconv.replay_cli import print_replay

        print_replay(report["fidelity_replay"], Console())
    if "judge_check" in report:
        from emobench.validation.judge_check_cli import print_judge_check

        print_judge_check(report["judge_check"], Console())
    if "judge_check_esconv" in report:
        from emobench.validation.esconv.report import print_esconv

        print_esconv(report["judge_check_esconv"], Console())
    Console(stderr=True).print(f"wrote {target}", soft_wrap=True)  # a path stays on one line
