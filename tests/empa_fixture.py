"""A small synthetic EMPA results folder in EMPA's file format, written here (no EMPA text or number).

Each episode is a list of per-turn MDEP levels (progress, regression) applied to every axis,
or None for a lost judgement. The stop is the `empa` engine's, and the per-case indices in
descriptive_statistics.csv are EPM-Q under the `empa` profile computed straight from the turn
vectors (not through the importer), standing in for EMPA's published numbers. Every free text
carries the marker TEXT_MARKER so a test can prove none of it reaches a published bundle.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

from emobench.profiles import load_profile
from emobench.scoring.epmq import epmq
from emobench.scoring.mdep import AXES, turn_vector
from emobench.trackers.epm import EPMEngine

TEXT_MARKER = "FIXTURE-TEXT"
P0 = (-17, -18, -13)
P0_LEVELS = {"C.1": 2, "C.2": 2, "C.3": 3, "A.1": 2, "A.2": 2, "A.3": 2, "P.1": 1, "P.2": 2, "P.3": 1}
Levels = list[tuple[int, int] | None]
GOOD: Levels = [(2, 0)] * 12  # v = (3, 3, 3) every turn: success at turn 12
MIXED: Levels = [(1, 0)] * 3 + [(1, 1)] * 9  # progress then regression: a collapse
BAD: Levels = [(0, 2)] * 11 + [None]  # regression every turn, then a lost judgement
_MESSAGES = {
    "success": "EPM v2.0 Success: Positional Victory",
    "collapse": "EPM v2.0 Failure: Direction Collapse",
    "stagnation_regression": "EPM v2.0 Failure: Stagnation",
    "oscillation": "EPM v2.0 Failure: Oscillation",
}
_INDEX_COLUMNS = {"rdi": "Idx_RDI", "etot": "Idx_Etot", "snet": "Idx_Snet", "rho": "Idx_Rho", "sproj": "Idx_Sproj",
                  "tau": "Idx_Tau", "rpos": "Idx_Rpos", "align": "Idx_Align", "pen": "Idx_Pen"}


def _text(kind: str, *where: object) -> str:
    return f"{TEXT_MARKER} {kind} " + " ".join(str(w) for w in where)


def _episode(script: str, levels: Levels) -> tuple[dict[str, Any], dict[str, float]]:
    """One result file and its indices; the episode stops where the `empa` engine stops it."""
    engine = EPMEngine(P0, min_turns=12, rules=load_profile("empa").engine)
    p = list(P0)
    trajectory: list[dict[str, Any]] = [{"turn": 0, "P_t": list(p), "v_t": [0, 0, 0]}]
    history: list[dict[str, str]] = []
    vectors, net, regression, status = [], 0, 0, None
    for t, lv in enumerate(levels, start=1):
        step: dict[str, Any] = {"turn": t}
        if lv is None:
            v = (0, 0, 0)
        else:
            prog, reg = lv
            v = tuple(int(x) for x in turn_vector(dict.fromkeys(AXES, prog), dict.fromkeys(AXES, reg)))  # type: ignore[arg-type]
            step["mdep_analysis"] = {
                key: value
                for axis in AXES
                for key, value in (
                    (f"{axis}_Prog_level", prog), (f"{axis}_Neg_level", -reg),
                    (f"{axis}_Prog_evidence", _text("evidence", script, t, axis)),
                    (f"{axis}_Prog_reasoning", _text("reasoning", script, t, axis)),
                )
            }
            net += 3 * (prog - reg)
            regression += 3 * reg
        vectors.append(tuple(float(x) for x in v))
        p = [a + b for a, b in zip(p, v, strict=True)]
        step.update({"P_t": list(p), "v_t": list(v)})
        trajectory.append(step)
        history += [{"role": "actor", "content": _text("user says", script, t)},
                    {"role": "test_model", "content": _text("model replies", script, t)}]
        status = engine.step(v).status
        if status is not None:
            break
    n = len(vectors)
    q = epmq(P0, vectors, net_levels=net, regression_levels=regression, n_turns=n, profile=load_profile("empa"))
    result = {
        "script_id": script,
        "total_turns": n,
        "termination_reason": _MESSAGES[status] if status else f"Reached max turns ({n}), timeout",
        "scenario": {
            "script_id": script,
            "story_progression": {f"phase_{i}": {"title": _text("title", i), "content": _text("stage", script, i)}
                                  for i in (1, 2, 3)},
            "story_outcome": _text("outcome", script),
            "story_interlude": _text("interlude", script),
        },
        "history": history,
        "test_model_name": "fixture-model",
        "actor_model": "actor-model",
        "judger_model": "judge-model",
        "director_model": "director-model",
        "epj": {
            "P_0_initial_deficit": list(P0),
            "trajectory": trajectory,
            "iedr_details": {"filled_iedr": {**P0_LEVELS, "_detailed": {"C.3_reasoning": _text("iedr", script)}}},
        },
        "timestamp": "2025-12-24T00:00:00",
    }
    return result, {name: getattr(q, name) for name in _INDEX_COLUMNS}


def write_empa_results(root: Path, plan: dict[str, dict[str, Levels]], attributes: dict[str, tuple[str, str]]) -> Path:
    """plan: model -> script -> levels; attributes: script -> (dominant axis, category)."""
    for model, scripts in plan.items():
        folder = root / model
        folder.mkdir(parents=True)
        rows = []
        for script, levels in scripts.items():
            result, indices = _episode(script, levels)
            (folder / f"{script}_result.json").write_text(json.dumps(result), encoding="utf-8")
            axis, category = attributes[script]
            rows.append({"Case_ID": script, "Dominant_Axis": axis, "Difficulty": "Hard", "Category": category,
                         "SP_Empathy_Threshold": "Medium", "SP_Emotional_Priority": "Medium",
                         "SP_Motivational_Priority": "Low", "SP_Cognitive_Priority": "High",
                         **{_INDEX_COLUMNS[k]: v for k, v in indices.items()}})
        with (folder / "descriptive_statistics.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return root


def varied_plan(n_models: int, n_scripts: int, seed: int) -> tuple[dict[str, dict[str, Levels]], dict[str, tuple[str, str]]]:
    """A seeded plan of many different episodes: 12 turns of random levels, now and then a lost
    judgement, so the scores take many distinct values (and the bootstrap sums many roundings)."""
    rnd = random.Random(seed)
    scripts = [f"script_{i:03d}" for i in range(1, n_scripts + 1)]
    plan = {f"model-{m}": {s: [None if rnd.random() < 0.05 else (rnd.randint(0, 2), rnd.randint(0, 2)) for _ in range(12)]
                          for s in scripts} for m in range(n_models)}
    categories = ("Life", "Health", "Leisure", "Career")
    return plan, {s: ("CAP"[i % 3], categories[i % 4]) for i, s in enumerate(scripts)}
