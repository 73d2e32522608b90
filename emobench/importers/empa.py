"""`emobench import empa RESULTS_DIR -o runs/NAME`: EMPA's recorded runs as an emobench run directory.

Each EMPA result file becomes one episode: the transcript, the original judge's per-turn levels
with evidence, P0 and the stop. The run is scored by the normal finalize path under the `empa`
profile (docs/method.md §5.8), is marked external in its manifest, and keeps its case cards in
cases.jsonl. EMPA's quirks are counted in report.json: turns whose judgement was lost (EMPA
scored them as v = 0, and so does this replay, visibly: the original verdict is invalid) and
level keys EMPA misread because they were misspelt.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import emobench
from emobench.errors import InputError
from emobench.importers.cards import PLACEHOLDERS, SPLIT, build_case, write_cases
from emobench.importers.empa_format import AXES, EmpaCase, EmpaTurn, read_case, read_metadata, result_folders
from emobench.profiles import load_profile
from emobench.records import AxisLevel, Episode, EPMPoint, JudgeVerdict, RoleInfo, Sampling, Turn, TurnJudgement, UserMove
from emobench.registry import Case
from emobench.registry.hashing import registry_version
from emobench.registry.local import registry_for
from emobench.run.finalize import finalize_run
from emobench.rundir import RunDir
from emobench.scoring.mdep import regression_points, turn_vector
from emobench.trackers.epm import EPMEngine

EMPA_REPOSITORY = "KAYA-HAI/EMPA-Benchmark-EPMSandbox"
MIN_TURNS, MAX_TURNS = 12, 45  # EMPA's protocol
LOST = "judgement lost in EMPA's record; EMPA scored this turn as v = 0, and so does the import"


def _judgement(turn: EmpaTurn, judge: str) -> TurnJudgement:
    if turn.axes is None:
        zero = dict.fromkeys(AXES, 0)
        verdict = JudgeVerdict(judge=judge, valid=False, error=LOST)
        return TurnJudgement(verdicts=[verdict], valid=True, progress=zero, regression=zero, vector=(0.0, 0.0, 0.0))  # type: ignore[arg-type]
    axes = {
        axis: AxisLevel(
            progress=a.progress,
            regression=a.regression,
            evidence="\n".join(e for e in (a.progress_evidence, a.regression_evidence) if e and e != "0"),
            reason="\n".join(r for r in (a.progress_reason, a.regression_reason) if r),
        )
        for axis, a in turn.axes.items()
    }
    progress = {axis: a.progress for axis, a in turn.axes.items()}
    regression = {axis: a.regression for axis, a in turn.axes.items()}
    return TurnJudgement(
        verdicts=[JudgeVerdict(judge=judge, valid=True, axes=axes)],  # type: ignore[arg-type]
        valid=True,
        progress=progress,  # type: ignore[arg-type]
        regression=regression,  # type: ignore[arg-type]
        vector=turn_vector(progress, regression),
        regression_points=regression_points(regression),
    )


def to_episode(empa: EmpaCase, case: Case, version: str, config_hash: str, quirks: Counter[str]) -> Episode:
    judge = f"empa:{empa.judge}"
    engine = EPMEngine(empa.p0, min_turns=MIN_TURNS, rules=load_profile("empa").engine)
    turns: list[Turn] = []
    status: str | None = None
    stop_turn: int | None = None
    for t in empa.turns:
        judgement = _judgement(t, judge)
        if judgement.vector != tuple(float(x) for x in t.vector):
            quirks["vector_differs_from_levels"] += 1
        quirks["lost_judgements"] += t.axes is None
        quirks["mistyped_level_keys"] += len(t.mistyped)
        quirks["mistyped_nonzero_levels_read_as_0"] += sum(level > 0 for _, level in t.mistyped)
        # EMPA's own v_t is what it scored; the levels above reproduce it wherever keys were spelt right.
        step = engine.step(t.vector)
        if status is None and step.status is not None:
            status, stop_turn = step.status, t.index
        point = EPMPoint(p=step.p, delta_e=step.delta_e, cos=step.cos, energy=step.energy)
        judgement = judgement.model_copy(update={"vector": tuple(float(x) for x in t.vector)})
        user = UserMove(message=t.user, meter_delta=0)
        turns.append(
            Turn(index=t.index, user=user, reply=t.reply, judgement=judgement, epm=point, meter=float(case.persona.meter_start))
        )
    ours = f"epm_{status}" if status else "max_turns"
    agree = ours == empa.stop_reason and (stop_turn or len(empa.turns)) == len(empa.turns)
    quirks["stops_agreeing"] += agree
    quirks["stops_differing"] += not agree
    unknown = Sampling()

    def role(label: str, model: str) -> RoleInfo:
        return RoleInfo(label=label, model=model, endpoint=f"external:{EMPA_REPOSITORY}", sampling=unknown)

    return Episode(
        key=f"{empa.subject}|{case.id}|0",
        subject=empa.subject,
        case_id=case.id,
        scenario_id=case.scenario.id,
        persona_id=case.persona.id,
        seed=0,
        split=SPLIT,
        language=case.language,
        p0=tuple(float(x) for x in empa.p0),  # type: ignore[arg-type]
        turns=turns,
        final_meter=float(case.persona.meter_start),
        stop_reason=empa.stop_reason,
        status=status,
        success_turn=stop_turn if status == "success" else None,
        roles={
            "subject": role(empa.subject, empa.subject_model),
            "user": role("empa-actor", empa.actor),
            "judges": [role(judge, empa.judge)],
            "director": role("empa-director", empa.director),
        },
        templates={"judge": "empa-original"},
        calls=[],
        registry_version=version,
        config_hash=config_hash,
        emobench_version=emobench.__version__,
        started_at=empa.timestamp,
        finished_at=empa.timestamp,
    )


def _config(subjects: list[str], judge: str) -> dict[str, Any]:
    # Bindings name the external models; an imported run never calls its subjects or its user.
    return {
        "subjects": [{"binding": f"litellm:external/{s}", "label": s} for s in subjects],
        "user": {"binding": "litellm:external/empa-actor", "label": "empa-actor"},
        "panel": {"name": "empa-original", "judges": [{"binding": f"litellm:external/{judge}", "label": f"empa:{judge}"}]},
        "split": SPLIT,
        "max_turns": MAX_TURNS,
        "min_turns": MIN_TURNS,
        "scoring_profile": "empa",
    }


def git_commit(folder: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def import_empa(
    results: Path, out_dir: Path, *, root: Path, commit: str | None = None, repository: str = EMPA_REPOSITORY,
    tick: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Write the run directory and return its report's `external` section; tick, when given,
    hears of each results file read and each episode scored."""
    from emobench.config import validate_config

    out = RunDir(out_dir)
    if out.manifest.exists():
        raise InputError(out.manifest, "", "already exists; import into a new run directory")
    empa_cases: list[EmpaCase] = []
    metadata: dict[str, dict[str, str]] = {}
    folders = result_folders(results)
    files = [(folder, path) for folder in folders for path in sorted(folder.glob("script_*_result.json"))]
    rows_of = {folder: read_metadata(folder) for folder in folders}
    for read, (folder, path) in enumerate(files, start=1):
        case = read_case(path, folder.name)
        if case.script_id not in rows_of[folder]:
            raise InputError(folder / "descriptive_statistics.csv", "Case_ID", f"no row for {case.script_id}")
        empa_cases.append(case)
        metadata.setdefault(case.script_id, rows_of[folder][case.script_id])
        if tick is not None:
            tick("reading", read, len(files))
    cards: dict[str, Case] = {}
    for empa in empa_cases:
        card = cards.setdefault(empa.script_id, build_case(empa, metadata[empa.script_id]))
        if tuple(card.p0) != tuple(empa.p0):
            raise InputError(empa.path, "epj.P_0_initial_deficit", f"{empa.p0} differs from the filled IEDR's P0 {card.p0}")
    judges = sorted({c.judge for c in empa_cases})
    if len(judges) != 1:
        raise InputError(results, "judger_model", f"one original judge expected, found {judges}")
    config = validate_config(_config(sorted({c.subject for c in empa_cases}), judges[0]), out.manifest, root)
    version = registry_version((c.id, c.content_hash) for c in cards.values())
    out.create()
    write_cases(out.path, list(cards.values()))
    quirks: Counter[str] = Counter()
    episodes = [to_episode(e, cards[e.script_id], version, config.config_hash(), quirks) for e in empa_cases]
    for episode in episodes:
        out.append_episode(episode)
    external = {
        "source": "EMPA",
        "repository": repository,
        "commit": commit or git_commit(results) or "unknown",
        "results_dir": str(results),
        "original_judge": judges[0],
        "imported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "placeholders": list(PLACEHOLDERS),
    }
    out.write_json(
        out.manifest,
        {
            "run_id": out.path.name,
            "config": config.model_dump(mode="json"),
            "config_hash": config.config_hash(),
            "split": SPLIT,
            "registry_version": version,
            "prompt_versions": {
                "simulator": "empa",
                "judge": "empa-original",
                "subject_system": "none",
                "director": "empa",
                "probe": "none",
            },
            "roles": {"judges": [{"label": f"empa:{judges[0]}", "model": judges[0]}], "panel": "empa-original"},
            "emobench_version": emobench.__version__,
            "created_at": external["imported_at"],
            "external": external,
        },
    )
    finalize_run(out, registry_for(out.path, root), tick=tick)
    section = {**external, "episodes": len(episodes), "quirks": {k: int(v) for k, v in sorted(quirks.items())}}
    out.write_json(out.report, {**out.read_report(), "external": section})
    return section
