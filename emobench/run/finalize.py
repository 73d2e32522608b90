"""After a run: scores.parquet, report.json (accounting, invalid judgements, faults)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from emobench.config import Price, RoleConfig, RunConfig, resolve_panel
from emobench.judging.pairwise import pairwise_table, verdicts_frame
from emobench.profiles import DEFAULT_PROFILE, load_profile
from emobench.records import Episode, EpisodeJudgement, PairwiseCall, PairwiseVerdict
from emobench.registry import Registry
from emobench.run.accounting import accounting
from emobench.rundir import RunDir, read_records
from emobench.scoring.agreement import original_judge_agreement, reliability
from emobench.scoring.episode_scores import score_episode, scores_table
from emobench.scoring.invalid_outputs import invalid_output_rates
from emobench.scoring.probe import counterfactual_spread
from emobench.scoring.replay import rejudged
from emobench.scoring.validity import run_validity
from emobench.trackers.affect import default_tracker
from emobench.trackers.languages import tracker_absence, trackers_note
from emobench.trackers.pool import Reader, read_locally


def invalid_judgements(episodes: list[Episode]) -> dict[str, int]:
    """Invalid MDEP verdicts per judge over every turn."""
    counts: Counter[str] = Counter()
    for episode in episodes:
        for turn in episode.turns:
            for verdict in turn.judgement.verdicts:
                counts[verdict.judge] += int(not verdict.valid)
    return dict(counts)


def finalize_run(
    out: RunDir, registry: Registry, *, source: RunDir | None = None, tick: Callable[[str, int, int], None] | None = None,
    workers: int | None = None, reader: Reader = read_locally,
) -> list[Episode]:
    """Score every episode and write scores.parquet, pairwise.parquet and report.json to out.

    source is the run whose episodes a rescore judged again (out is then its panel folder);
    tick, when given, hears of each episode scored; workers: the processes that read the
    trackers (None: EMOBENCH_SCORING_WORKERS or the cores; trackers/pool.py); reader: where they
    read (this machine, or under --ray the cluster: run/ray_scoring.py). The manifest's
    "scoring" says where, and the messages read per CPU second.
    """
    origin = source or out
    origin_manifest = origin.read_manifest()
    config = origin_manifest.get("config", {})
    min_turns = int(config.get("min_turns", 12))
    profile = config.get("scoring_profile", DEFAULT_PROFILE)  # runs older than profiles: emobench
    panel = (out.read_manifest() if source is not None else config).get("panel", {})
    judges = [RoleConfig.model_validate(j).name for j in panel.get("judges", [])]
    episodes = origin.read_episodes()
    judgements = {j.key: j for j in read_records(out.judgements, EpisodeJudgement)}
    # An imported run (another benchmark's transcripts, e.g. EMPA's Chinese ones) skips the
    # English MiniLM affect tracker: it does not apply, and it is most of finalize's time.
    # Nor does it read a language it was not made for: a Chinese run never loads it.
    tracked = ["external" not in origin_manifest and tracker_absence(registry.case(e.case_id).language) is None
               for e in episodes]
    # The tracker's readings first, on every core (trackers/pool.py): they are most of the time.
    texts = [[t.user.message for t in e.turns] for e, read in zip(episodes, tracked, strict=True) if read]
    read_all = reader(texts, workers, tick and (lambda done: tick("scoring", done, len(episodes))))
    readings = iter(read_all.episodes)
    tracker = default_tracker() if texts else None
    scored = []
    rows = []
    for episode, read in zip(episodes, tracked, strict=True):
        judgement = judgements.get(episode.key)
        if judgement is not None and judgement.mdep is not None:
            episode = rejudged(episode, judgement.mdep, min_turns, load_profile(profile).engine)
        scored.append(episode)
        case = registry.case(episode.case_id)
        rows.append(score_episode(episode, case, out.path.name, judgement, tracker, profile,
                                  readings=next(readings) if read else None))
    if tick is not None:
        tick("scoring", len(episodes), len(episodes))
    table = scores_table(rows)
    pq.write_table(table, out.scores)
    verdicts = read_records(out.pairwise_log, PairwiseVerdict)
    if verdicts:
        pq.write_table(pairwise_table(verdicts), out.pairwise)
    frame = verdicts_frame(verdicts) if verdicts else None
    scores = table.to_pandas()
    invalid = invalid_judgements(scored)
    for judgement in judgements.values():
        for verdict in judgement.holistic:
            invalid[f"{verdict.judge} (holistic)"] = invalid.get(f"{verdict.judge} (holistic)", 0) + int(not verdict.valid)
    if frame is not None:
        for judge, n in frame.attrs.get("invalid_by_judge", {}).items():
            invalid[f"{judge} (pairwise)"] = n
    stops = Counter(ep.stop_reason for ep in episodes)
    audit = Counter(flag.kind for j in judgements.values() for flag in j.audit)
    judge_reliability = reliability(scored, list(judgements.values()), judges, scores, frame)
    if source is not None and "external" in origin_manifest:
        # A new panel on an imported run: how it agrees with the run's original judge.
        judge_reliability["original_judge"] = {
            "judge": origin_manifest["external"].get("original_judge"),
            "items": original_judge_agreement(episodes, scored),
        }
    languages = sorted({str(r["language"]) for r in rows})
    report = {
        "run_id": out.path.name,
        "episodes": len(episodes),
        # a run plays one split, so one language; "en+zh" would name a mixed one, never silent
        "language": "+".join(languages) or None,
        "trackers": trackers_note(languages) or "run",
        "stop_reasons": dict(stops),
        "invalid_judgements": invalid,
        "unscored_episodes": sum(r["epmq"] is None for r in rows),
        "invalid_outputs": invalid_output_rates(episodes, judgements.values()),
        "reliability": judge_reliability,
        "audit": {"flags": dict(audit), "flagged_episodes": sum(bool(j.audit) for j in judgements.values())},
        "counterfactual_spread": _spread(scores, registry),
        "validity": run_validity(scores, scored, origin.read_manifest().get("roles", {})),
        "faults": out.fault_counts(),  # logged as they happened, by every process on this run
        "accounting": accounting(episodes, list(judgements.values()), _prices(config),
                                 read_records(out.pairwise_calls, PairwiseCall)),
    }
    if origin_manifest.get("adaptive"):  # a --stop-when run or a sequential gate: when and why it stopped
        report["adaptive"] = origin_manifest["adaptive"]
    out.write_json(out.report, report)
    out.write_json(out.manifest, {**out.read_manifest(), "accounting": report["accounting"],
                                  "language": report["language"], "trackers": report["trackers"],
                                  "scoring": read_all.provenance()})
    return scored


def _prices(config: dict[str, Any]) -> dict[str, Price]:
    if not config:
        return {}
    return RunConfig.model_validate(resolve_panel(config, "manifest", Path("."))).prices()


def _spread(scores: pd.DataFrame, registry: Registry) -> list[dict[str, Any]]:
    sets = {c.id: c.counterfactual_set for c in registry.all_cases()}
    frame = scores.assign(counterfactual_set=scores["case_id"].map(sets))
    spread = counterfactual_spread(frame[frame["counterfactual_set"].notna()])
    return [dict(r) for r in spread.to_dict(orient="records")]
