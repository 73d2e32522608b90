"""Removing a deleted episode from every file of the run directory.

The record, its judgements and the person's ratings of it are found by key; pairwise verdicts by (case, seed, subject), and
the pairwise judges' calls by the seeds those comparisons used; logs and any HTML page
(report.html) by the person's own words. faults.jsonl holds no text (endpoint, kind, time) and is
left alone. Scores, reports and leaderboards are written again afterwards by the store. Copies
written outside the run directory (`emobench report -o`) are out of reach.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from emobench.episode.roles import derive_seed
from emobench.rundir import RunDir, atomic_write_bytes, whole_lines

MIN_NEEDLE = 3  # shorter messages ("ok", "no") identify no one and occur everywhere
ATTEMPTS = 101  # pairwise retries are at most 100 (config: judge_retries)


def needles(texts: list[str], key: str) -> list[bytes]:
    """Every form the person's words take on disk: JSON-escaped, raw, HTML-escaped; and the key."""
    found = {key.encode(), orjson.dumps(key)[1:-1]}
    for text in texts:
        text = text.strip()
        if len(text) < MIN_NEEDLE:
            continue
        found |= {text.encode(), orjson.dumps(text)[1:-1], html.escape(text).encode()}
    return sorted(found)


def _rewrite(path: Path, keep: Callable[[bytes], bool]) -> int:
    """Drop the lines keep refuses (and a torn tail); returns how many went."""
    if not path.exists():
        return 0
    lines = [line for _, line in whole_lines(path)]
    kept = [line for line in lines if keep(line)]
    if len(kept) != len(lines) or path.stat().st_size != sum(map(len, lines)):
        atomic_write_bytes(path, b"".join(kept))
    return len(lines) - len(kept)


def _record(line: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _pairwise_seeds(dropped: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(judge, seed) of every call the dropped comparisons may have made (emobench.judging.pairwise)."""
    seeds = set()
    for verdict in dropped:
        pair = derive_seed(0, "pair", verdict["case_id"], verdict["seed"])  # `judge` compares with run seed 0
        for attempt in range(ATTEMPTS):
            seed = derive_seed(pair, "pairwise", verdict["judge"], verdict["subject_a"], verdict["subject_b"],
                               verdict["order"], attempt)
            seeds.add((verdict["judge"], seed))
    return seeds


def _scrub_one(rd: RunDir, key: str, subject: str, case_id: str, seed: int, words: list[bytes]) -> dict[str, int]:
    """One run directory's records, judgements, pairwise files and logs (the run's, or a panel's)."""
    removed: dict[str, int] = {}
    for path in (rd.episodes, rd.judgements):
        removed[path.name] = _rewrite(path, lambda line: _record(line).get("key") != key)
    removed[rd.ratings.name] = _rewrite(rd.ratings, lambda line: _record(line).get("episode") != key)

    dropped: list[dict[str, Any]] = []

    def other_pair(line: bytes) -> bool:
        v = _record(line)
        mine = v.get("case_id") == case_id and v.get("seed") == seed and subject in (v.get("subject_a"), v.get("subject_b"))
        if mine:
            dropped.append(v)
        return not mine

    removed[rd.pairwise_log.name] = _rewrite(rd.pairwise_log, other_pair)
    seeds = _pairwise_seeds(dropped)

    def clean(line: bytes) -> bool:
        return not any(word in line for word in words)

    removed[rd.pairwise_calls.name] = _rewrite(
        rd.pairwise_calls, lambda line: clean(line) and (_record(line).get("label"), _record(line).get("seed")) not in seeds
    )
    if rd.logs.is_dir():
        for path in sorted(rd.logs.rglob("*")):
            if path.is_file():
                removed[f"logs/{path.name}"] = _rewrite(path, clean)
    return removed


def scrub(rd: RunDir, key: str, subject: str, case_id: str, seed: int, texts: list[str]) -> dict[str, int]:
    """Remove the episode from the run directory's files, and from every panel's that `emobench judge
    --panel` wrote inside it; returns lines (or files) removed per file."""
    words = needles(texts, key)
    removed = _scrub_one(rd, key, subject, case_id, seed, words)
    panels = sorted(p for p in (rd.path / "panels").glob("*") if p.is_dir())
    for folder in panels:
        panel = RunDir(folder)
        for name, n in _scrub_one(panel, key, subject, case_id, seed, words).items():
            removed[f"panels/{folder.name}/{name}"] = n
        # Its scores came from the deleted episode too; `emobench judge --panel` writes them again.
        for path in (panel.scores, panel.report, panel.leaderboard, panel.pairwise):
            path.unlink(missing_ok=True)
    for path in sorted(rd.path.rglob("*.htm*")):  # report.html shows transcripts; `emobench report` writes it again
        if any(word in path.read_bytes() for word in words):
            path.unlink()
            removed[str(path.relative_to(rd.path))] = 1
    return {name: n for name, n in removed.items() if n}
