"""Read EMPA's per-case result files (one JSON per model and case) into typed records.

Only the recorded facts are read: the transcript, the judge's per-turn MDEP levels with their
evidence, the trajectory's turn vectors, the filled IEDR levels, and the stop. EMPA's quirks are
kept visible: a turn without a judgement (EMPA scored v = 0) is `lost`, and a level under a
misspelt key (EMPA read it as 0) is listed in `mistyped`.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emobench.errors import InputError

AXES = ("C", "A", "P")
IEDR_ITEMS = tuple(f"{axis}.{i}" for axis in AXES for i in (1, 2, 3))
# EMPA's stop messages -> emobench stop reasons (docs/method.md §4).
_STOPS = (
    ("Success", "epm_success"),
    ("Collapse", "epm_collapse"),
    ("Stagnation", "epm_stagnation_regression"),
    ("Oscillation", "epm_oscillation"),
    ("max turns", "max_turns"),
)
# A level key in any spelling: "P_Neg_level", "PNeg_level", "P neg_level", "C_neg_level", ...
_LEVEL_KEY = re.compile(r"^([CAP])[ _-]?(prog|neg)_level$", re.IGNORECASE)
_KIND = {"prog": "progress", "neg": "regression"}


@dataclass(frozen=True)
class AxisJudgement:
    progress: int
    regression: int
    progress_evidence: str
    progress_reason: str
    regression_evidence: str
    regression_reason: str


@dataclass(frozen=True)
class EmpaTurn:
    index: int  # 1-based
    user: str
    reply: str
    vector: tuple[int, int, int]  # v_t as EMPA scored it
    axes: dict[str, AxisJudgement] | None  # None: the judgement was lost
    mistyped: list[tuple[str, int]] = field(default_factory=list)  # (key, level EMPA read as 0)


@dataclass(frozen=True)
class EmpaCase:
    path: Path
    subject: str  # the model's folder name
    subject_model: str  # the model name EMPA recorded
    script_id: str
    judge: str
    actor: str
    director: str
    iedr: dict[str, int]  # "C1".."P3"
    iedr_reasons: dict[str, str]  # "C3" -> the IEDR judge's reasoning
    p0: tuple[int, int, int]
    story: list[str]  # the scenario's phases, in order
    story_outcome: str
    story_interlude: str
    turns: list[EmpaTurn]
    stop_reason: str
    termination: str  # EMPA's own stop message
    timestamp: str


def _get(data: Any, path: Path, *keys: str) -> Any:
    here = data
    for i, key in enumerate(keys):
        if not isinstance(here, dict) or key not in here:
            raise InputError(path, ".".join(keys[: i + 1]), "missing in this EMPA result file")
        here = here[key]
    return here


def _level(value: Any) -> int:
    # EMPA's judge wrote regression levels as 0/-1/-2 and sometimes as strings.
    return abs(int(value or 0))


def _turn(step: dict[str, Any], index: int, user: str, reply: str, path: Path) -> EmpaTurn:
    vector = tuple(int(x) for x in _get(step, path, "v_t"))
    analysis = step.get("mdep_analysis")
    if not analysis:
        return EmpaTurn(index, user, reply, vector, None)  # type: ignore[arg-type]
    axes: dict[str, AxisJudgement] = {}
    for axis in AXES:

        def text(kind: str, what: str, axis: str = axis) -> str:
            return str(analysis.get(f"{axis}_{kind}_{what}", ""))

        axes[axis] = AxisJudgement(
            progress=_level(analysis.get(f"{axis}_Prog_level")),
            regression=_level(analysis.get(f"{axis}_Neg_level")),
            progress_evidence=text("Prog", "evidence"),
            progress_reason=text("Prog", "reasoning"),
            regression_evidence=text("Neg", "evidence"),
            regression_reason=text("Neg", "reasoning"),
        )
    exact = {f"{axis}_{kind}_level" for axis in AXES for kind in ("Prog", "Neg")}
    mistyped = [(key, _level(value)) for key, value in analysis.items() if _LEVEL_KEY.match(key) and key not in exact]
    return EmpaTurn(index, user, reply, vector, axes, mistyped)  # type: ignore[arg-type]


def _stop_reason(message: str, path: Path) -> str:
    for marker, reason in _STOPS:
        if marker in message:
            return reason
    raise InputError(path, "termination_reason", f"unknown EMPA stop {message[:60]!r}")


def read_case(path: Path, subject: str) -> EmpaCase:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(path, "", f"not a readable EMPA result file: {exc}") from None
    epj = _get(data, path, "epj")
    trajectory = _get(epj, path, "trajectory")
    history = _get(data, path, "history")
    turns_total = int(_get(data, path, "total_turns"))
    if len(trajectory) != turns_total + 1 or len(history) != 2 * turns_total:
        raise InputError(path, "epj.trajectory", f"{len(trajectory)} points and {len(history)} messages for {turns_total} turns")
    filled = _get(epj, path, "iedr_details", "filled_iedr")
    detail = filled.get("_detailed", {})
    scenario = _get(data, path, "scenario")
    phases = scenario.get("story_progression", {})
    turns = [
        _turn(trajectory[t], t, str(history[2 * t - 2]["content"]), str(history[2 * t - 1]["content"]), path)
        for t in range(1, turns_total + 1)
    ]
    termination = str(_get(data, path, "termination_reason"))
    return EmpaCase(
        path=path,
        subject=subject,
        subject_model=str(data.get("test_model_name", subject)),
        script_id=str(_get(data, path, "script_id")),
        judge=str(data.get("judger_model", "unknown")),
        actor=str(data.get("actor_model", "unknown")),
        director=str(data.get("director_model", "unknown")),
        iedr={item.replace(".", ""): int(_get(filled, path, item)) for item in IEDR_ITEMS},
        iedr_reasons={item.replace(".", ""): str(detail.get(f"{item}_reasoning", "")) for item in IEDR_ITEMS},
        p0=tuple(int(x) for x in _get(epj, path, "P_0_initial_deficit")),  # type: ignore[arg-type]
        story=[str(p.get("content", "")) for _, p in sorted(phases.items())],
        story_outcome=str(scenario.get("story_outcome", "")),
        story_interlude=str(scenario.get("story_interlude", "")),
        turns=turns,
        stop_reason=_stop_reason(termination, path),
        termination=termination,
        timestamp=str(data.get("timestamp", "")),
    )


def read_metadata(folder: Path) -> dict[str, dict[str, str]]:
    """EMPA's per-model descriptive_statistics.csv: case id -> its row (category, threshold, ...)."""
    path = folder / "descriptive_statistics.csv"
    if not path.exists():
        raise InputError(path, "", "missing: EMPA writes one per model folder, and it gives each case's category")
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return {row["Case_ID"]: row for row in csv.DictReader(fh)}


def result_folders(results: Path) -> list[Path]:
    """The model folders under an EMPA results directory (or the directory itself, for one model)."""
    if not results.is_dir():
        raise InputError(results, "", "not a directory")
    if any(results.glob("script_*_result.json")):
        return [results]
    folders = sorted(p.parent for p in results.glob("*/script_*_result.json"))
    unique = sorted(set(folders))
    if not unique:
        raise InputError(results, "", "no EMPA result files (MODEL/script_*_result.json) found")
    return unique
