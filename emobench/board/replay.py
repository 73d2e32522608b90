"""Spot check by replay: play n of a submission's (case, seed) cells again, as fresh episodes,
with the subject at the verifier's binding, and test whether the submitted scores are higher than
the named model gives now.

The cells are played by the runner `emobench run` uses (run_benchmark, on a temporary run folder
per seed, with the submission's config restricted to those cells and to the named subject), and
scored by scoring's own function. The statistic is the mean over the cells of the submitted minus
the replayed EPM-Q. An honest replay of a cell is another draw of the same episode distribution,
so each difference has mean 0 and variance 2 s^2, where s is the submission's own seed-to-seed
spread (the SD of its episodes around their case's mean, pooled over cases, with
sum(seeds - 1) degrees of freedom). One-sided, since a forger inflates: refused when the mean
exceeds t(1 - alpha, df) * s * sqrt(2 / n). A replay under the recorded seed varies no more than
another seed does, so the false-alarm rate is alpha or below where scores are near normal
(bench/bench_spot_check.py measures it, and the power, on EMPA's per-case scores).
"""

from __future__ import annotations

import asyncio
import io
import math
import random
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
from rich.console import Console
from scipy import stats

from emobench.board.spot import judges_for
from emobench.config import RoleConfig, RunConfig, resolve_panel
from emobench.endpoints.binding import parse_binding
from emobench.errors import InputError
from emobench.records import Episode, EpisodeJudgement
from emobench.registry import Registry
from emobench.run.runner import ROOT, run_benchmark
from emobench.rundir import RunDir, read_records
from emobench.scoring.episode_scores import score_episode

Cell = tuple[str, int]  # (case, seed)


@dataclass(frozen=True)
class Noise:
    sd: float  # pooled seed-to-seed SD of the submission's episodes within a case
    df: int  # its degrees of freedom: episodes minus cases


@dataclass(frozen=True)
class Decision:
    n: int
    mean_diff: float  # submitted minus replayed, mean over the cells
    threshold: float
    alpha: float
    noise: Noise

    @property
    def refused(self) -> bool:
        return self.mean_diff > self.threshold


def pooled_noise(scores: Iterable[tuple[str, float]]) -> Noise:
    """Pooled within-case SD of (case, score) pairs: every case's squared deviations from its own
    mean over the sum of (episodes - 1); cases played once add nothing."""
    by_case: dict[str, list[float]] = defaultdict(list)
    for case, score in scores:
        by_case[case].append(score)
    df = sum(len(v) - 1 for v in by_case.values())
    if df == 0:
        return Noise(math.nan, 0)
    ss = sum(sum((x - sum(v) / len(v)) ** 2 for x in v) for v in by_case.values())
    return Noise(math.sqrt(ss / df), df)


def decide(submitted: list[float], replayed: list[float], noise: Noise, alpha: float) -> Decision:
    """The one-sided test of the module's docstring over paired cells."""
    n = len(submitted)
    if n == 0 or n != len(replayed) or noise.df < 1:
        raise ValueError("paired scores of one cell or more, and a spread with a degree of freedom")
    mean = sum(a - b for a, b in zip(submitted, replayed, strict=True)) / n
    threshold = float(stats.t.ppf(1 - alpha, noise.df)) * noise.sd * math.sqrt(2 / n)
    return Decision(n, mean, threshold, alpha, noise)


@dataclass(frozen=True)
class Replay:
    label: str
    model: str
    cells: list[Cell]
    unscored: list[Cell]  # replayed with no valid judgement, so no EPM-Q: left out of the test
    decision: Decision | None  # None when no cell replayed could be scored


def _moved(role: RoleConfig, binding: str, recorded: str, option: str) -> RoleConfig:
    """The role at the verifier's binding, its label kept; the model must be the recorded one."""
    model = parse_binding(binding).model
    if model != recorded:
        raise InputError(option, "", f"{model!r} is not the recorded {role.name} model {recorded!r}")
    return role.model_copy(update={"binding": binding, "label": role.name})


def _subject(config: RunConfig, manifest: dict[str, Any], binding: str) -> tuple[RoleConfig, str]:
    model = parse_binding(binding).model
    recorded = {s["label"]: s["model"] for s in manifest.get("roles", {}).get("subjects", [])}
    for role in config.subjects:
        if recorded.get(role.name) == model:
            return _moved(role, binding, model, "--subject"), model
    raise InputError("--subject", "", f"{model!r} is not a recorded subject model ({', '.join(sorted(set(recorded.values())))})")


def _play(config: RunConfig, cells: list[Cell], registry: Registry, work: Path) -> dict[Cell, float | None]:
    """Each seed's drawn cases played by the runner into its own run folder, then scored."""
    by_seed: dict[int, list[str]] = defaultdict(list)
    for case, seed in cells:
        by_seed[seed].append(case)
    quiet = Console(file=io.StringIO())
    out: dict[Cell, float | None] = {}
    for seed, cases in sorted(by_seed.items()):
        part = config.model_copy(update={"cases": sorted(cases), "seeds": [seed], "limit_cases": None})
        rd = RunDir(work / f"seed-{seed}")
        asyncio.run(run_benchmark(part, rd.path, console=quiet, show_progress=False))
        judged = {j.key: j for j in read_records(rd.judgements, EpisodeJudgement)}
        for episode in read_records(rd.episodes, Episode):
            row = score_episode(episode, registry.case(episode.case_id), "replay", judged.get(episode.key), None,
                                config.scoring_profile)
            out[(episode.case_id, episode.seed)] = row["epmq"]
    return out


def replay_check(folder: Path, registry: Registry, n: int, seed: int, alpha: float, subject: str,
                 user: str | None = None, judges: list[str] | None = None) -> Replay:
    """Play n cells of the named subject (drawn with seed) again and test the submitted scores."""
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    config = RunConfig.model_validate(resolve_panel(manifest["config"], "manifest", ROOT))
    role, model = _subject(config, manifest, subject)
    update: dict[str, Any] = {"subjects": [role],
                              "panel": config.panel.model_copy(update={"judges": judges_for(config, judges or [])})}
    if user is not None:
        update["user"] = _moved(config.user, user, str((manifest["roles"].get("user") or {}).get("model")), "--user")
    rows = pq.read_table(folder / "scores.parquet", columns=["subject", "case_id", "seed", "epmq"]).to_pylist()
    scores = {(r["case_id"], r["seed"]): r["epmq"] for r in rows if r["subject"] == role.name and r["epmq"] is not None}
    noise = pooled_noise((case, x) for (case, _), x in scores.items())
    if noise.df == 0:
        raise InputError("scores.parquet", "seed", "one seed per case: a replay needs the seed-to-seed spread "
                                                   "(two seeds or more)")
    cells = random.Random(seed).sample(sorted(scores), min(n, len(scores)))
    with tempfile.TemporaryDirectory(prefix="emobench-replay-") as work:
        again = _play(config.model_copy(update=update), cells, registry, Path(work))
    replayed = {c: x for c, x in again.items() if x is not None}
    kept = [c for c in cells if c in replayed]
    decision = decide([scores[c] for c in kept], [replayed[c] for c in kept], noise, alpha) if kept else None
    return Replay(role.name, model, cells, [c for c in cells if c not in kept], decision)
