"""Validity evidence for a run (docs/validity.md): known groups, test-retest, judge-tracker and
judge-human agreement.

Pure functions over scores frames, episodes and ratings; the CLI (emobench.validation.cli)
and finalize_run (report.json) only gather the inputs.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from emobench.records import Episode
from emobench.scoring.reliability import krippendorff_alpha, spearman, spearman_rho
from emobench.scoring.stats import paired_difference
from emobench.trackers.affect import valence

REFERENCE_PREFIX = "scripted:"
KNOWN_GROUP_METRICS = {"epmq": "EPM-Q", "success": "success"}


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), 4) + 0.0  # + 0.0: no -0.0


def reference_subjects(roles: Mapping[str, Any], labels: Iterable[str]) -> list[str]:
    """Subject labels played by a scripted reference: from the manifest's roles, else the label."""
    models = {r.get("label"): str(r.get("model", "")) for r in roles.get("subjects", []) if isinstance(r, dict)}
    return sorted(s for s in set(labels) if (models.get(s) or s).startswith(REFERENCE_PREFIX))


def _per_case(scores: pd.DataFrame, metric: str) -> pd.DataFrame:
    """subject x case: the mean over seeds (and replicate runs) of a metric, NaN where missing."""
    values = scores[metric].astype(float)
    return values.groupby([scores["subject"], scores["case_id"]]).mean().unstack("case_id")


def known_groups(scores: pd.DataFrame, references: Sequence[str], *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Does the panel rank every real subject above every reference subject, on EPM-Q and success?

    Each comparison is the mean over shared cases of the paired difference (real - reference),
    with a bootstrap CI by case. "above": the CI lies above 0; "below": under 0; otherwise
    "not separated". The verdict passes only when every comparison is "above".
    """
    subjects = sorted(set(scores["subject"]))
    refs = [s for s in subjects if s in set(references)]
    real = [s for s in subjects if s not in set(refs)]
    if not refs or not real:
        missing = "reference subject (scripted:...)" if not refs else "real subject"
        return {"verdict": "not run", "summary": f"no {missing} in the run(s)", "comparisons": []}
    comparisons = []
    for metric, title in KNOWN_GROUP_METRICS.items():
        table = _per_case(scores, metric)
        for subject, ref in itertools.product(real, refs):
            diffs = (table.loc[subject] - table.loc[ref]).dropna().to_numpy(dtype=float)
            row: dict[str, Any] = {"subject": subject, "reference": ref, "metric": title, "n_cases": int(diffs.size)}
            if diffs.size < 2:
                row.update(diff=_num(diffs.mean()) if diffs.size else None, lo=None, hi=None, verdict="too few cases")
            else:
                est = paired_difference(diffs, n_boot=n_boot, seed=seed)
                verdict = "above" if est.lo > 0 else "below" if est.hi < 0 else "not separated"
                row.update(diff=_num(est.mean), lo=_num(est.lo), hi=_num(est.hi), verdict=verdict)
            comparisons.append(row)
    failed = [c for c in comparisons if c["verdict"] != "above"]
    if not failed:
        summary = f"the panel ranks every real subject above every reference subject ({len(comparisons)} comparisons)"
    else:
        worst = failed[0]
        summary = (
            f"the panel does NOT rank every real subject above every reference subject: {len(failed)} of "
            f"{len(comparisons)} comparisons fail, e.g. {worst['subject']} vs {worst['reference']} on "
            f"{worst['metric']}: {worst['verdict']}"
        )
    return {"verdict": "fail" if failed else "pass", "summary": summary, "comparisons": comparisons}


def retest_agreement(scores: pd.DataFrame, metric: str = "epmq") -> dict[str, Any]:
    """Rank correlation of subjects and of cases between replicates, a replicate being one
    (run, seed). Mean Spearman rho over every pair of replicates; None where undefined
    (fewer than two replicates, or fewer than three subjects for the subject ranking)."""
    frame = scores.assign(replicate=scores["run_id"].astype(str) + "#" + scores["seed"].astype(str))
    reps = sorted(set(frame["replicate"]))
    out: dict[str, Any] = {"metric": metric, "n_replicates": len(reps)}
    if len(reps) < 2:
        return {**out, "subjects": None, "cases": None, "note": "needs at least two seeds or runs"}
    values = frame[metric].astype(float)
    by_subject = values.groupby([frame["subject"], frame["replicate"]]).mean().unstack("replicate")
    by_unit = values.groupby([frame["subject"], frame["case_id"], frame["replicate"]]).mean().unstack("replicate")
    result = {}
    for name, table in (("subjects", by_subject), ("cases", by_unit)):
        rhos = [spearman_rho(table[a].to_numpy(), table[b].to_numpy()) for a, b in itertools.combinations(reps, 2)]
        rhos = [r for r in rhos if not math.isnan(r)]
        result[name] = {"rho": _num(float(np.mean(rhos))) if rhos else None, "pairs": len(rhos), "n": len(table)}
    return {**out, **result}


def judge_tracker(episodes: Sequence[Episode], paths: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """Per turn: the panel's affective progress (median A progress minus A regression) against
    the change of the user's valence from the message the reply answered to the next one.

    paths: per episode key, the valence of its turns' user messages as scoring stored them
    (scores' valence_path); only the messages not covered there are read again."""
    paths = paths or {}
    texts: list[str] = []
    for episode in episodes:
        if episode.key not in paths:
            texts += [t.user.message for t in episode.turns]
        texts += [episode.last_user.message] if episode.last_user else []
    read = iter(valence(texts))  # one batched read for the whole run
    judged: list[float] = []
    change: list[float] = []
    for episode in episodes:
        stored = paths.get(episode.key)
        scores = list(stored) if stored is not None else [next(read) for _ in episode.turns]
        scores += [next(read)] if episode.last_user else []
        for i, turn in enumerate(episode.turns):
            if i + 1 >= len(scores) or not turn.judgement.valid or "A" not in turn.judgement.progress:
                continue
            judged.append(turn.judgement.progress["A"] - turn.judgement.regression.get("A", 0))
            change.append(scores[i + 1] - scores[i])
    rho, p = spearman(judged, change)
    return {"rho": _num(rho), "p": _num(p), "n_turns": len(judged), "tracker": "affect valence (head + VADER)"}


def _stored_paths(scores: pd.DataFrame) -> dict[str, Sequence[float]]:
    """Episode key -> the valence path scoring stored, where the frame carries one."""
    if "valence_path" not in scores:
        return {}
    rows = scores[["subject", "case_id", "seed", "valence_path"]].dropna()
    return {f"{r.subject}|{r.case_id}|{r.seed}": r.valence_path for r in rows.itertuples()}


def human_agreement(
    panel: Mapping[str, Mapping[str, float | None]], human: Mapping[str, Mapping[str, Mapping[str, float]]]
) -> dict[str, Any]:
    """Per dimension: Spearman rho and Krippendorff's alpha (interval) of the panel's score
    against the mean human rating over conversations, and the humans' own alpha as a ceiling.

    panel: conversation -> dimension -> panel score (None when no judge was valid).
    human: conversation -> rater -> dimension -> rating.
    """
    ids = sorted(human)
    dims = sorted({d for ratings in human.values() for r in ratings.values() for d in r})
    raters = sorted({r for ratings in human.values() for r in ratings})
    out: dict[str, Any] = {}
    for dim in dims:
        grid = np.array([[human[i].get(r, {}).get(dim, np.nan) for i in ids] for r in raters], dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a conversation no rater scored on dim
            mean = np.nanmean(grid, axis=0)
        scored = np.array([np.nan if panel.get(i, {}).get(dim) is None else float(panel[i][dim]) for i in ids])  # type: ignore[arg-type]
        rho, p = spearman(scored, mean)
        alpha = krippendorff_alpha(np.vstack([scored, mean]), level="interval")
        ceiling = krippendorff_alpha(grid, level="interval")
        out[dim] = {
            "spearman": _num(rho),
            "p": _num(p),
            "alpha_panel_vs_human": _num(alpha),
            "alpha_between_humans": _num(ceiling),
            "n": int((~np.isnan(scored) & ~np.isnan(mean)).sum()),
            "n_raters": len(raters),
        }
    return out


def run_validity(
    scores: pd.DataFrame, episodes: Sequence[Episode], roles: Mapping[str, Any], *, n_boot: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """What every run's report.json carries, and `emobench validate` over several runs."""
    references = reference_subjects(roles, scores["subject"])
    return {
        "reference_subjects": references,
        "known_groups": known_groups(scores, references, n_boot=n_boot, seed=seed),
        "test_retest": retest_agreement(scores),
        "judge_tracker": judge_tracker(episodes, _stored_paths(scores)),
    }
