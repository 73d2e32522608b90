"""Synthetic run directories drawn from known truths, for the publish tests and the benchmark.

Generative model, per subject s, case j and seed k (all seeded):
- EPM-Q = mu_s + delta_j - fragility_s * (challenging_j + defensive_j) + noise, clipped to
  [0, 100]; delta_j ~ N(0, case_sd) is shared by all subjects (hard cases are hard for
  everyone) unless case_effects="per_subject", which makes subjects statistically independent.
- success ~ Bernoulli(q_sj), q_sj ~ Beta with mean p_s: success clusters by case, and the
  population success rate is exactly p_s.
- meter, rubric dimensions and the EPM path follow EPM-Q with noise; coherence is sometimes null.
Case attributes are uniform over their levels, so the population truths are closed-form.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import stats as sps

from emobench.scoring.schema import SCORES_SCHEMA

CATEGORIES = ("life", "health", "leisure", "values", "relations", "career")
AXES = ("C", "A", "P")
DIFFICULTIES = ("easy", "medium", "hard", "very_hard")
THRESHOLDS = ("low", "medium", "high")
VALENCES = ("negative", "mixed", "positive")
PROMPT_VERSIONS = {"simulator": "3", "director": "2", "mdep_judge": "4", "rubric_judge": "2"}
JUDGES = ("judge-a", "judge-b")
_SUCCESS_CONCENTRATION = 4.0  # Beta(p*k, (1-p)*k): lower k, stronger clustering by case


@dataclass(frozen=True)
class SubjectTruth:
    label: str
    epmq: float = 60.0  # population mean EPM-Q when fragility is 0
    success: float = 0.5  # population success rate
    fragility: float = 0.0  # EPM-Q lost on a challenging case, and again on a defensive persona
    simulator_invalid: float = 0.0  # share of episodes ended by an invalid simulated user


def _stop_reasons(subjects: Sequence[SubjectTruth], s_idx: np.ndarray, success: np.ndarray, run_id: str) -> np.ndarray:
    # Its own stream, so the other draws of a run stay what they were.
    draw = np.random.default_rng([len(run_id), 7]).random(s_idx.size)
    share = np.array([s.simulator_invalid for s in subjects])[s_idx]
    return np.where(draw < share, "simulator_invalid", np.where(success, "success", "max_turns"))


def expected_epmq(truth: SubjectTruth) -> float:
    """Population mean EPM-Q over the case distribution (half challenging, a third defensive)."""
    return truth.epmq - truth.fragility * (0.5 + 1.0 / 3.0)


def case_attributes(n_cases: int, seed: int, prefix: str = "case") -> dict[str, np.ndarray]:
    """Case cards: one stream per attribute, so case i is the same whatever n_cases is."""

    def stream(i: int) -> np.random.Generator:
        return np.random.default_rng([seed, 1, i])

    return {
        "case_id": np.array([f"{prefix}-{i:05d}" for i in range(n_cases)]),
        "category": np.array(CATEGORIES)[stream(0).integers(0, 6, n_cases)],
        "dominant_axis": np.array(AXES)[stream(1).integers(0, 3, n_cases)],
        "difficulty": np.array(DIFFICULTIES)[stream(2).integers(0, 4, n_cases)],
        "threshold": np.array(THRESHOLDS)[stream(3).integers(0, 3, n_cases)],
        "valence": np.array(VALENCES)[stream(7).integers(0, 3, n_cases)],
        "p0": -stream(4).integers(4, 21, (n_cases, 3)).astype(np.float64),
        "delta_u": stream(5).standard_normal(n_cases),
        "success_u": stream(6).random(n_cases),
    }


def manifest(
    run_id: str,
    subjects: Sequence[SubjectTruth],
    *,
    registry_version: str,
    prompt_versions: dict[str, str],
    split: str,
) -> dict[str, object]:
    sampling = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 512}
    judge_sampling = {"temperature": 0.0, "max_tokens": 1024}
    endpoint = "http://127.0.0.1:8000/v1"

    def role(label: str, model: str, params: dict[str, Any] = sampling) -> dict[str, Any]:
        return {"label": label, "model": model, "endpoint": endpoint, "sampling": params}

    return {
        "run_id": run_id,
        "config_hash": f"cfg-{run_id}",
        "registry_version": registry_version,
        "split": split,
        "prompt_versions": prompt_versions,
        "roles": {
            "subjects": [role(s.label, f"model/{s.label}") for s in subjects],
            "user": role("user", "model/simulator"),
            "director": role("director", "model/director"),
            "judges": [role(j, f"model/{j}", judge_sampling) for j in JUDGES],
        },
        "emobench_version": "0.1.0",
        "git_sha": "0" * 40,
        "created_at": "2025-01-01T00:00:00+00:00",
    }


def write_run(
    run_dir: Path,
    subjects: Sequence[SubjectTruth],
    *,
    n_cases: int = 60,
    n_seeds: int = 3,
    seed: int = 0,
    case_seed: int = 0,
    run_id: str | None = None,
    registry_version: str = "reg-1",
    prompt_versions: dict[str, str] | None = None,
    split: str = "test",
    case_prefix: str = "case",
    case_sd: float = 8.0,
    noise_sd: float = 6.0,
    case_effects: Literal["shared", "per_subject"] = "shared",
    pairwise: bool = False,
    report: bool = True,
) -> Path:
    """Write manifest.json, scores.parquet and optionally pairwise.parquet and report.json."""
    run_id = run_id or run_dir.name
    prompt_versions = prompt_versions or dict(PROMPT_VERSIONS)
    run_dir.mkdir(parents=True, exist_ok=True)
    cases = case_attributes(n_cases, case_seed, case_prefix)
    rng = np.random.default_rng([seed, 2])
    n_sub = len(subjects)

    mu = np.array([s.epmq for s in subjects])
    frag = np.array([s.fragility for s in subjects])
    p = np.array([s.success for s in subjects])
    if case_effects == "shared":
        delta = np.broadcast_to(cases["delta_u"] * case_sd, (n_sub, n_cases))
        su = np.broadcast_to(cases["success_u"], (n_sub, n_cases))
    else:
        delta = rng.standard_normal((n_sub, n_cases)) * case_sd
        su = rng.random((n_sub, n_cases))
    stress = np.isin(cases["difficulty"], ("hard", "very_hard")).astype(float) + (
        cases["threshold"] == "high"
    )
    case_mean = mu[:, None] + delta - frag[:, None] * stress[None, :]
    kappa = _SUCCESS_CONCENTRATION
    q = sps.beta.ppf(su, (p * kappa)[:, None], ((1 - p) * kappa)[:, None])

    # Episode grid in (subject, case, seed) order.
    shape = (n_sub, n_cases, n_seeds)
    s_idx, c_idx, k_idx = (a.ravel() for a in np.indices(shape))
    n = s_idx.size
    epmq = np.clip(case_mean[s_idx, c_idx] + rng.standard_normal(n) * noise_sd, 0, 100)
    success = rng.random(n) < q[s_idx, c_idx]
    meter = np.clip(40 + 0.6 * (epmq - 50) + 25 * success + rng.normal(0, 5, n), 0, 100)

    def rubric() -> np.ndarray:
        return np.clip(1 + 9 * epmq / 100 + rng.normal(0, 0.7, n), 1, 10)

    coherence = rubric()
    coherence_valid = rng.random(n) >= 0.1
    n_turns = rng.integers(6, 13, n)
    path = _epm_paths(cases["p0"][c_idx], epmq, n_turns, rng)

    col: dict[str, pa.Array] = {
        "run_id": pa.array(np.full(n, run_id)),
        "subject": pa.array(np.array([s.label for s in subjects])[s_idx]),
        "case_id": pa.array(cases["case_id"][c_idx]),
        "scenario_id": pa.array(np.char.add("scn-", cases["case_id"][c_idx])),
        "persona_id": pa.array(np.char.add("per-", cases["case_id"][c_idx])),
        "seed": pa.array(k_idx.astype(np.int64)),
        "split": pa.array(np.full(n, split)),
        "p0_norm": pa.array(np.linalg.norm(cases["p0"][c_idx], axis=1)),
        "n_turns": pa.array(n_turns.astype(np.int64)),
        "n_judged_turns": pa.array(n_turns.astype(np.int64)),
        "n_invalid_judgements": pa.array(np.zeros(n, dtype=np.int64)),
        "stop_reason": pa.array(_stop_reasons(subjects, s_idx, success, run_id)),
        "success": pa.array(success),
        "turns_to_success": pa.array(n_turns.astype(np.int64), mask=~success),
        "epmq": pa.array(epmq),
        "energy": pa.array(epmq / 10),
        "epm_path": path,
        "final_meter": pa.array(meter),
        "empathy": pa.array(rubric()),
        "humanlikeness": pa.array(rubric()),
        "persona_adaptation": pa.array(rubric()),
        "coherence": pa.array(coherence, mask=~coherence_valid),
        "registry_version": pa.array(np.full(n, registry_version)),
        "config_hash": pa.array(np.full(n, f"cfg-{run_id}")),
        "emobench_version": pa.array(np.full(n, "0.1.0")),
    }
    for attr in ("category", "dominant_axis", "difficulty", "threshold", "valence"):
        col[attr] = pa.array(cases[attr][c_idx])
    arrays = [col.get(f.name, pa.nulls(n, f.type)).cast(f.type) for f in SCORES_SCHEMA]
    pq.write_table(pa.Table.from_arrays(arrays, schema=SCORES_SCHEMA), run_dir / "scores.parquet")

    man = manifest(
        run_id, subjects, registry_version=registry_version,
        prompt_versions=prompt_versions, split=split,
    )
    (run_dir / "manifest.json").write_text(json.dumps(man, indent=2))
    if pairwise and n_sub > 1:
        _write_pairwise(run_dir, subjects, cases["case_id"], case_mean, rng)
    if report:
        (run_dir / "report.json").write_text(json.dumps(_report(rng), indent=2))
    return run_dir


def _epm_paths(
    p0: np.ndarray, epmq: np.ndarray, n_turns: np.ndarray, rng: np.random.Generator
) -> pa.Array:
    """P_0..P_T per episode: a noisy walk from P0 toward the origin, farther for higher EPM-Q."""
    n_points = n_turns + 1
    offsets = np.concatenate([[0], np.cumsum(n_points)])
    ep = np.repeat(np.arange(epmq.size), n_points)
    t = np.arange(offsets[-1]) - offsets[ep]
    frac = (t / n_turns[ep]) * np.clip(epmq[ep] / 100 * 1.2, 0, 1.1)
    pts = p0[ep] * (1 - frac)[:, None] + rng.normal(0, 0.8, (ep.size, 3)) * (t > 0)[:, None]
    inner = pa.ListArray.from_arrays(
        pa.array(np.arange(0, pts.size + 1, 3, dtype=np.int32)), pa.array(pts.ravel())
    )
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), inner)


def _write_pairwise(
    run_dir: Path,
    subjects: Sequence[SubjectTruth],
    case_ids: np.ndarray,
    case_mean: np.ndarray,
    rng: np.random.Generator,
) -> None:
    rows: dict[str, list[object]] = {k: [] for k in (
        "case_id", "seed", "judge", "dimension", "subject_a", "subject_b", "order", "winner"
    )}
    for a in range(len(subjects)):
        for b in range(a + 1, len(subjects)):
            for judge in JUDGES:
                for order in ("ab", "ba"):
                    gap = (case_mean[a] - case_mean[b]) / 10
                    a_wins = rng.random(case_ids.size) < 1 / (1 + np.exp(-gap))
                    for j, case in enumerate(case_ids):
                        first, second = (a, b) if order == "ab" else (b, a)
                        rows["case_id"].append(case)
                        rows["seed"].append(0)
                        rows["judge"].append(judge)
                        rows["dimension"].append("empathy")
                        rows["subject_a"].append(subjects[first].label)
                        rows["subject_b"].append(subjects[second].label)
                        rows["order"].append(order)
                        rows["winner"].append(subjects[a if a_wins[j] else b].label)
    pq.write_table(pa.table(rows), run_dir / "pairwise.parquet")


def _report(rng: np.random.Generator) -> dict[str, object]:
    items = [f"{ax}_{kind}" for ax in AXES for kind in ("progress", "regression")]
    items += ["empathy", "humanlikeness", "persona_adaptation", "coherence"]
    alpha: dict[str, float | None] = {i: round(float(rng.uniform(0.4, 0.9)), 3) for i in items}
    alpha["coherence"] = None
    return {
        "reliability": {
            "alpha": alpha,
            "flip_rate": round(float(rng.uniform(0.02, 0.15)), 3),
            "spearman_empathy_energy": {"rho": 0.61, "p": 0.0004},
        },
        "invalid_judgements": {JUDGES[0]: 1, JUDGES[1]: 0},
    }


_USER_LINES = (
    "honestly I don't even know why I'm writing this, it's been a long week and nobody at home gets it",
    "yeah. I guess. it's more that I keep thinking I should have said something back then",
    "you sound like my sister now. she also thinks it's simple",
    "ok that actually helps a bit. what would you do first, if you were me?",
)
_REPLIES = (
    "That sounds exhausting, carrying it on your own all week. What part of it sits heaviest right now?",
    "It makes sense that it keeps coming back to you. Looking back, what do you wish you had said?",
    "I hear that it isn't simple at all, and I'm sorry if I made it sound that way. Tell me more.",
    "One small first step could be writing down what you need from them, before you talk. Want to try that?",
)


def write_episodes(run_dir: Path, *, hostile: str | None = None, seed: int = 0) -> Path:
    """episodes.jsonl and judgements.jsonl for the episodes of a run's scores.parquet: the turn
    count, EPM path, stop reason and meter of each row, with plausible text and two judges.
    hostile, when given, is put into every kind of text a page shows."""
    from emobench.records import (
        AuditFlag,
        AxisLevel,
        DimScore,
        DirectorAction,
        Episode,
        EpisodeJudgement,
        EPMPoint,
        HolisticVerdict,
        JudgeVerdict,
        ProbeAnswer,
        RoleInfo,
        Sampling,
        Turn,
        TurnJudgement,
        UserMove,
    )

    rng = np.random.default_rng([seed, 3])
    extra = f" {hostile}" if hostile else ""
    info = RoleInfo(label="x", model="m", endpoint="http://127.0.0.1:1/v1", sampling=Sampling())
    episodes, judgements = [], []
    for row in pq.read_table(run_dir / "scores.parquet").to_pylist():
        key = f"{row['subject']}|{row['case_id']}|{row['seed']}"
        path = row["epm_path"]
        turns = []
        for t in range(1, row["n_turns"] + 1):
            prog = rng.integers(0, 3, 3).tolist()
            reg = rng.integers(0, 2, 3).tolist()
            verdicts = [JudgeVerdict(judge=j, valid=True, axes={
                a: AxisLevel(progress=prog[i], regression=reg[i], evidence=_REPLIES[t % 4][:40] + extra,
                             reason="names the feeling" + extra) for i, a in enumerate(AXES)}) for j in JUDGES]
            step = np.subtract(path[t], path[t - 1])
            turns.append(Turn(
                index=t, user=UserMove(message=_USER_LINES[t % 4] + extra, meter_delta=int(rng.integers(-3, 6)),
                                       inner="still testing" + extra),
                reply=_REPLIES[t % 4] + extra,
                judgement=TurnJudgement(verdicts=verdicts, valid=True, progress=dict(zip(AXES, prog, strict=True)),
                                        regression=dict(zip(AXES, reg, strict=True)), vector=tuple(step)),
                epm=EPMPoint(p=tuple(path[t]), delta_e=float(np.linalg.norm(step)), cos=0.5,
                             energy=float(np.linalg.norm(np.subtract(path[t], path[0])))),
                meter=float(np.clip(30 + 4 * t + rng.normal(0, 3), 0, 100)),
                director=DirectorAction(action="reveal_stage" if t % 3 == 0 else "wait", guidance=extra.strip(),
                                        target=0 if t % 3 == 0 else None),
            ))
        episodes.append(Episode(
            key=key, subject=row["subject"], case_id=row["case_id"], scenario_id=row["scenario_id"],
            persona_id=row["persona_id"], seed=row["seed"], split=row["split"], p0=tuple(path[0]), turns=turns,
            probe=ProbeAnswer(dominant_need="A", threshold="high", big_five={"openness": "high", "neuroticism": "low"},
                              rationale="guarded" + extra),
            final_meter=row["final_meter"], stop_reason=row["stop_reason"] + extra,
            status="success" if row["success"] else None, success_turn=row["n_turns"] if row["success"] else None,
            roles={"subject": info}, templates={}, calls=[], registry_version=row["registry_version"],
            config_hash="c", emobench_version="0", started_at="", finished_at="",
        ))
        dims = ("empathy", "humanlikeness", "persona_adaptation", "coherence")
        judgements.append(EpisodeJudgement(
            key=key, panel="inline", calls=[],
            holistic=[HolisticVerdict(judge=j, valid=True, scores={
                d: DimScore(score=int(rng.integers(1, 11)), evidence="short quote" + extra, reason="ok" + extra)
                for d in dims}) for j in JUDGES],
            audit=[AuditFlag(kind="over_cooperative", turn=2, detail="agrees at once" + extra)] if rng.random() < 0.1 else [],
        ))
    with open(run_dir / "episodes.jsonl", "w") as fh:
        fh.writelines(e.model_dump_json() + "\n" for e in episodes)
    with open(run_dir / "judgements.jsonl", "w") as fh:
        fh.writelines(j.model_dump_json() + "\n" for j in judgements)
    return run_dir
