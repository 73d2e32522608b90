"""Combine shard run directories (``--shard i/n``) into one run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emobench.errors import InputError
from emobench.records import EpisodeJudgement, PairwiseVerdict
from emobench.rundir import RunDir, append_line, read_records, whole_lines


def _pair(verdict: PairwiseVerdict) -> tuple[str, int, str, str]:
    return verdict.case_id, verdict.seed, verdict.subject_a, verdict.subject_b


def _check_shards(dirs: list[RunDir], manifests: list[dict[str, Any]], force: bool) -> None:
    first = manifests[0]
    for rd, info in zip(dirs[1:], manifests[1:], strict=True):
        for field in ("config_hash", "registry_version", "prompt_versions"):
            if info.get(field) != first.get(field) and not force:
                raise InputError(rd.manifest, field, f"differs from {dirs[0].manifest}; pass --force to merge anyway")


def merge_runs(sources: list[Path], out: Path, *, force: bool = False) -> dict[str, Any]:
    """Write ``out`` with every episode of ``sources`` once, each with its judgement, and every
    pairwise comparison once; returns counts for the summary.

    Shards must share the config hash and registry version (unless forced). An episode key found
    in two shards must be the same episode, so a duplicate is kept once, and its judgement comes
    from the shard whose episode is kept; a pair of transcripts compared in two shards is kept
    from the first. A judgement or comparison of an episode its shard lacks is refused.
    """
    if not sources:
        raise InputError("merge", "RUN_DIR", "no run directories given")
    dirs = [RunDir(path) for path in sources]
    manifests = [rd.read_manifest() for rd in dirs]
    _check_shards(dirs, manifests, force)
    target = RunDir(out)
    if target.manifest.exists():
        raise InputError(out, "", "output run directory already exists")
    target.create()
    seen: set[str] = set()
    pairs: set[tuple[str, int, str, str]] = set()
    calls: set[bytes] = set()
    duplicates = judgements = verdicts = 0
    for rd in dirs:
        episodes = rd.read_episodes()
        keys = {e.key for e in episodes}
        kept = {e.key for e in episodes if e.key not in seen}
        duplicates += len(episodes) - len(kept)
        for episode in episodes:
            if episode.key in kept:
                target.append_episode(episode)
        seen |= kept
        for judgement in read_records(rd.judgements, EpisodeJudgement):
            if judgement.key not in keys:
                raise InputError(rd.judgements, judgement.key, "judges an episode this run directory does not hold")
            if judgement.key in kept:
                append_line(target.judgements, judgement.model_dump_json().encode())
                judgements += 1
        subjects = {(e.case_id, e.seed, e.subject) for e in episodes}
        found = read_records(rd.pairwise_log, PairwiseVerdict)
        for verdict in found:
            c, s, a, b = _pair(verdict)
            if (c, s, a) not in subjects or (c, s, b) not in subjects:
                raise InputError(rd.pairwise_log, f"{c}|{s}", "compares an episode this run directory does not hold")
        new_pairs = {_pair(v) for v in found} - pairs
        for verdict in found:
            if _pair(verdict) in new_pairs:
                append_line(target.pairwise_log, verdict.model_dump_json().encode())
                verdicts += 1
        pairs |= new_pairs
        for _, line in whole_lines(rd.faults):  # every shard's faults count in the merged run
            append_line(target.faults, line.rstrip(b"\n"))
        # The comparisons' model calls are provenance only; a call listed twice (the same
        # shard given twice) is the same call.
        for _, line in whole_lines(rd.pairwise_calls):
            if line not in calls:
                calls.add(line)
                append_line(target.pairwise_calls, line.rstrip(b"\n"))
    merged = {**manifests[0], "run_id": out.name, "shard": None, "merged_from": [str(p) for p in sources], "forced": force}
    target.write_json(target.manifest, merged)
    return {
        "episodes": len(seen), "duplicates": duplicates, "sources": len(sources),
        "judgements": judgements, "pairwise": verdicts,
        "panels": ", ".join(str(p) for rd in dirs for p in sorted((rd.path / "panels").glob("*/"))),
    }
