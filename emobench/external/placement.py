"""Placing a model on EMPA's published leaderboard through references played beside it.

EMPA generated each published episode once, unseeded, with its own prompts; a new run on its
cases cannot reproduce a published score. So the comparison is relative: the protocol
(configs/empa-protocol.yaml) plays two published models, one strong and one weak on EMPA's
table, k times each beside the user's model on EMPA's 30 official cases, and each reference's
offset (our mean minus its published score) carries the user's model onto EMPA's scale. The two
offsets test whether the protocol moves strong and weak models alike; the arithmetic is in
placement_math, the comparability checks in protocol. A run score is the mean over the cases of
one seed's episodes.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from emobench.errors import InputError
from emobench.external.placement_math import (
    CI,
    Side,
    by_line,
    by_offset,
    interval,
    offset,
    offset_difference,
    rank_range,
    sd,
    separated,
    t_quantile,
)
from emobench.external.protocol import load_protocol, manifest_problems, run_problems
from emobench.rundir import RunDir

METRIC = "epmq_empa"  # EPM-Q under EMPA's own definitions: what its leaderboard reports
NAME_COLUMN, SCORE_COLUMN = "Model", "EPM-Q Score"


@dataclass(frozen=True)
class Runs:
    subject: str
    scores: list[float]  # one per seed: the mean over the cases

    @property
    def k(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float:
        return sum(self.scores) / self.k

    @property
    def sd(self) -> float:
        return sd(self.scores)


def read_published(path: Path) -> dict[str, float]:
    """EMPA's leaderboard: model name -> its EPM-Q, from its analysis_figures/01_tables/epmq_summary.csv
    or from a bundle of `emobench external empa` (EMPA's own per-case values averaged, by folder name)."""
    if path.is_dir() or path.suffix == ".parquet":
        return _bundle_published(path / "leaderboard.parquet" if path.is_dir() else path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(path, "", f"not readable: {exc.strerror}") from None
    if not rows or NAME_COLUMN not in rows[0] or SCORE_COLUMN not in rows[0]:
        raise InputError(path, f"{NAME_COLUMN}/{SCORE_COLUMN}", "missing column")
    published = {}
    for number, row in enumerate(rows, start=2):
        try:
            published[row[NAME_COLUMN].strip()] = float(row[SCORE_COLUMN])
        except (TypeError, ValueError):
            raise InputError(path, f"line {number}: {SCORE_COLUMN}", f"not a number: {row[SCORE_COLUMN]!r}") from None
    return published


def _bundle_published(path: Path) -> dict[str, float]:
    try:
        table = pd.read_parquet(path, columns=["slice_family", "subject", "epmq_empa_published"])
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(path, "epmq_empa_published", f"not a bundle leaderboard: {exc}") from None
    overall = table[table["slice_family"] == "overall"]
    if overall.empty:
        raise InputError(path, "slice_family", "no overall rows")
    return {str(s): float(v) for s, v in zip(overall["subject"], overall["epmq_empa_published"], strict=True)}


def run_scores(run_dirs: list[Path]) -> tuple[dict[str, Runs], set[str], str]:
    """Per subject, its run scores (one per seed), from finished runs on one split version; the cases played."""
    frames, versions = [], set()
    for path in run_dirs:
        rd = RunDir(path)
        manifest = rd.read_manifest()
        versions.add((manifest.get("split"), manifest.get("registry_version")))
        if not rd.scores.exists():
            raise InputError(rd.scores, "", "missing: the run is not finished (emobench run --resume finishes it)")
        frames.append(pd.read_parquet(rd.scores, columns=["subject", "case_id", "seed", METRIC]))
    if len(versions) != 1:
        raise InputError(run_dirs[-1] / "manifest.json", "registry_version", "the runs are of different splits or cards")
    ((split, _),) = versions
    scores = pd.concat(frames).drop_duplicates(["subject", "case_id", "seed"])
    if scores[METRIC].isna().any():
        bad = scores[scores[METRIC].isna()].iloc[0]
        raise InputError(run_dirs[0] / "scores.parquet", METRIC, f"no score for {bad.subject} on {bad.case_id} seed {bad.seed}")
    cases = set(scores["case_id"])
    runs = {}
    for subject, rows in scores.groupby("subject"):
        for seed, seed_rows in rows.groupby("seed"):
            missing = sorted(cases - set(seed_rows["case_id"]))
            if missing:
                raise InputError(run_dirs[0], "episodes", f"{subject} seed {seed} has no episode on {', '.join(missing[:3])}")
        per_seed = rows.groupby("seed")[METRIC].mean()
        runs[str(subject)] = Runs(str(subject), [float(x) for x in per_seed])
    return runs, {str(c) for c in cases}, str(split)


def resolve_reference(spec: str, runs: dict[str, Runs], published: dict[str, float], where: Path,
                      file: Path) -> dict[str, Any]:
    """A reference "label" or "label=name on the leaderboard": its runs, published score and offset."""
    label, _, name = spec.partition("=")
    label, name = label.strip(), (name.strip() or label.strip())
    if name not in published:
        raise InputError(file, NAME_COLUMN, f"no model {name!r} (known: {', '.join(published)})")
    if label not in runs:
        raise InputError(where, "subject", f"no reference subject {label!r} (found: {', '.join(runs)})")
    own = runs[label]
    if own.k < 2:
        raise InputError(where, "seeds", f"{label} has {own.k} run; the offset needs at least 2 (3 by default)")
    side = Side.of(own.scores)
    o = offset(side, published[name])
    return {"subject": label, "published_name": name, "published": published[name], "runs": own.scores, "k": own.k,
            "mean": side.mean, "sd": side.sd, "offset": o.value, "offset_se": o.se,
            "offset_ci": list(interval(o.value, o.se, o.dof)), "t": t_quantile(o.dof), "_side": side, "_offset": o}


def _method(refs: list[dict[str, Any]]) -> dict[str, Any]:
    """How the model is carried onto EMPA's scale: one offset, the mean offset, or the line."""
    if len(refs) == 1:
        return {"method": "offset", "why": "one reference: the offset is assumed to be the same for every model, "
                "not tested (the protocol plays two references to test it)"}
    strong, weak = sorted(refs, key=lambda r: -r["published"])
    d = offset_difference(strong["_offset"], weak["_offset"])
    lo, hi = interval(d.value, d.se, d.dof)
    test = {"strong": strong["subject"], "weak": weak["subject"], "difference": d.value, "difference_se": d.se,
            "difference_ci": [lo, hi], "dof": d.dof}
    if lo <= 0 <= hi:
        why = (f"the offsets agree: their difference {d.value:+.1f} [{lo:.1f}, {hi:.1f}] holds 0, so the model is "
               "placed by their mean (agreement at this k is weak evidence: the interval is wide)")
        return {"method": "offset", "why": why, "offset_test": test}
    apart, (gap_lo, gap_hi) = separated(strong["_side"], weak["_side"], d.dof)
    if not apart:  # the line's slope would be noise, or infinite
        raise InputError(Path("--reference"), "", f"the offsets differ, but {strong['subject']} and {weak['subject']} are "
                         f"not separated in these runs (difference [{gap_lo:.1f}, {gap_hi:.1f}]): no line through them "
                         "places a model")
    why = (f"the offsets differ: their difference {d.value:+.1f} [{lo:.1f}, {hi:.1f}] excludes 0, so the protocol "
           "moves strong and weak models differently and the model is placed by the line through both references")
    return {"method": "line", "why": why, "offset_test": test, "_pair": (strong, weak)}


def place(run_dirs: list[Path], references: list[str], published_file: Path, *, exploratory: bool = False,
          root: Path | None = None) -> dict[str, Any]:
    """Every subject other than the references placed on the published leaderboard. `references`:
    "label" or "label=name on the leaderboard". Runs outside the protocol are refused unless
    `exploratory`, and then marked not comparable."""
    published = read_published(published_file)
    runs, cases, split = run_scores(run_dirs)
    refs = [resolve_reference(spec, runs, published, run_dirs[0], published_file) for spec in references]
    if not 1 <= len(refs) <= 2 or len({r["subject"] for r in refs}) != len(refs):
        raise InputError(Path("--reference"), "", "give one or two different references (the protocol's two)")
    protocol = load_protocol(root)
    problems = [p for path in run_dirs
                for p in manifest_problems(RunDir(path).read_manifest(), str(RunDir(path).manifest), protocol)]
    problems += run_problems(cases, [r["subject"] for r in refs], protocol, str(run_dirs[0]))
    if problems and not exploratory:
        where, field, what = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(Path(where), field, f"{what}{more}; not EMPA's protocol, so not comparable with its "
                         "leaderboard (--exploratory places it anyway, marked not comparable)")
    return {"split": split, "n_cases": len(cases), **placement(runs, refs, published, run_dirs[0]),
            "comparable": not problems, "not_comparable": [f"{w}: {f}: {m}" if f else f"{w}: {m}" for w, f, m in problems]}


def placement(runs: dict[str, Runs], refs: list[dict[str, Any]], published: dict[str, float], where: Path) -> dict[str, Any]:
    """The arithmetic of `place`, on run scores already read and references already resolved."""
    method = _method(refs)
    published_sd = math.sqrt(sum(r["sd"] ** 2 for r in refs) / len(refs))
    scores = list(published.values())
    placed = []
    for subject, own in sorted(runs.items()):
        if subject in {r["subject"] for r in refs}:
            continue
        if own.k < 2:
            raise InputError(where, "seeds", f"{subject} has {own.k} run; placing it needs at least 2")
        side = Side.of(own.scores)
        if method["method"] == "line":
            strong, weak = method["_pair"]
            p = by_line(side, strong["_side"], strong["published"], weak["_side"], weak["published"])
        else:
            p = by_offset(side, [r["_offset"] for r in refs])
        lo, hi = interval(p.score, p.se, p.dof)
        best, worst = rank_range(p, scores, published_sd)
        placed.append({
            "subject": subject, "runs": own.scores, "k": own.k, "mean": side.mean, "sd": side.sd,
            "placed": p.score, "placed_se": p.se, "placed_ci": [lo, hi], "dof": p.dof,
            "rank": 1 + sum(v > p.score for v in scores),
            "rank_range": [best, worst],
            "rank_range_if_published_exact": list(rank_range(p, scores, 0.0)),
            "within_interval": sorted((m for m, v in published.items()
                                       if abs(p.score - v) <= t_quantile(p.dof) * math.hypot(p.se, published_sd)),
                                      key=lambda m: -published[m]),
        })
    clean = [{k: v for k, v in r.items() if not k.startswith("_")} for r in refs]
    t_ref = t_quantile(min(r["k"] for r in refs) - 1)
    return {
        "metric": METRIC, "ci": CI,
        "reference": clean[0], "references": clean,
        **{k: v for k, v in method.items() if not k.startswith("_")},
        "published_run_sd": published_sd,
        "placed": placed,
        "published": dict(sorted(published.items(), key=lambda kv: -kv[1])),
        "notes": [
            f"{min(r['k'] for r in refs)} runs of the references: the 95% intervals use t = {t_ref:.2f}, so they are wide; "
            "more runs (--seeds) narrow them.",
            "Conditional on EMPA's 30 official cases: the published scores and ours are means over the same cases, so "
            "the placement has no case-sampling term; it says where the model stands on these cases, not on others.",
            f"Each published score is one unseeded run: its run-to-run spread is taken as the references' "
            f"(s = {published_sd:.1f}) and carried into the rank range and the models within the interval.",
            method["why"],
        ],
    }
