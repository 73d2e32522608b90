"""Read the EPITOME empathy data (Sharma et al., EMNLP 2020) from a folder the user fetched,
join its three files into one row per (seeker post, response) pair, and draw stratified samples.

Only ids, levels and the two texts are read; the texts go to the judge and nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from emobench.errors import InputError

MECHANISMS = ("emotional_reactions", "interpretations", "explorations")
FILES = {
    "emotional_reactions": "emotional-reactions-reddit.csv",
    "interpretations": "interpretations-reddit.csv",
    "explorations": "explorations-reddit.csv",
}
COLUMNS = ("sp_id", "rp_id", "seeker_post", "response_post", "level")
LEVELS = (0, 1, 2)
TEXT_FILE = "emotional_reactions"  # the texts differ in whitespace between files; one file supplies them


@dataclass(frozen=True)
class Pair:
    sp_id: str
    rp_id: str
    seeker_post: str
    response_post: str
    levels: dict[str, int]  # mechanism -> human level 0..2

    @property
    def key(self) -> str:
        return f"{self.sp_id}/{self.rp_id}"


@dataclass(frozen=True)
class EpitomeData:
    pairs: list[Pair]
    rows: dict[str, int]  # data rows per file
    conflicting: int  # pairs left out: one file rates the same pair twice with different levels
    unmatched: int  # pairs left out: not present in all three files


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


Key = tuple[str, str]  # (sp_id, rp_id)


def _read_file(path: Path) -> tuple[dict[Key, int], dict[Key, tuple[str, str]], int, set[Key]]:
    """(levels, texts, row count, keys with conflicting levels) of one file, or InputError."""
    import pandas as pd

    if not path.is_file():
        raise InputError(path, "", "file not found: fetch the EPITOME files first (docs/judges.md)")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(path, "", f"not a readable CSV file ({first})") from None
    for column in COLUMNS:
        if column not in frame.columns:
            raise InputError(path, column, "missing column")
    levels: dict[Key, int] = {}
    texts: dict[Key, tuple[str, str]] = {}
    conflicts: set[Key] = set()
    for row, (sp_id, rp_id, seeker, response, level) in enumerate(frame[list(COLUMNS)].itertuples(index=False), start=1):
        for name, value in (("sp_id", sp_id), ("rp_id", rp_id)):
            if not value.strip():
                raise InputError(path, f"row {row}: {name}", "empty")
        if level.strip() not in {str(v) for v in LEVELS}:
            raise InputError(path, f"row {row}: level", f"{level!r} is not 0, 1 or 2")
        key, value = (sp_id.strip(), rp_id.strip()), int(level)
        if key in levels and levels[key] != value:
            conflicts.add(key)
        levels.setdefault(key, value)
        texts.setdefault(key, (_squash(seeker), _squash(response)))
    return levels, texts, len(frame), conflicts


def read_epitome(folder: Path) -> EpitomeData:
    """The pairs rated in all three files, joined on (sp_id, rp_id).

    A pair one file rates twice with the same level counts once; one rated twice with different
    levels is left out (it has no single human level), as is a pair missing from any file.
    """
    if not folder.is_dir():
        raise InputError(folder, "", "not a folder: pass --data DIR holding the three EPITOME CSV files")
    read = {m: _read_file(folder / FILES[m]) for m in MECHANISMS}
    conflicts = set().union(*(r[3] for r in read.values()))
    everywhere = set.intersection(*(set(r[0]) for r in read.values()))
    seen = set().union(*(set(r[0]) for r in read.values()))
    texts = read[TEXT_FILE][1]
    pairs = []
    for key in sorted(everywhere - conflicts):
        seeker, response = texts[key]
        if not seeker or not response:
            raise InputError(folder / FILES[TEXT_FILE], f"pair {key[0]}/{key[1]}", "empty seeker_post or response_post")
        pairs.append(Pair(key[0], key[1], seeker, response, {m: read[m][0][key] for m in MECHANISMS}))
    if not pairs:
        raise InputError(folder, "", "no pair is rated in all three files")
    return EpitomeData(pairs, {FILES[m]: r[2] for m, r in read.items()}, len(conflicts & seen),
                       len(seen - everywhere - conflicts))


def stratified_sample(pairs: list[Pair], mechanism: str, n: int, seed: int) -> list[Pair]:
    """n pairs drawn without replacement, stratified by the human level of one mechanism.

    Each level gets its share of n in proportion to its frequency (largest remainder), and at
    least one pair while n allows, so the sample keeps the data's level distribution (and with
    it the majority-class baseline) and never loses a rare level. Deterministic given the seed.
    """
    if n >= len(pairs):
        return list(pairs)
    strata = {lv: [p for p in pairs if p.levels[mechanism] == lv] for lv in LEVELS}
    strata = {lv: members for lv, members in strata.items() if members}
    exact = {lv: n * len(m) / len(pairs) for lv, m in strata.items()}
    quota = {lv: int(exact[lv]) for lv in strata}
    for lv in sorted(strata, key=lambda lv: (int(exact[lv]) - exact[lv], lv))[: n - sum(quota.values())]:
        quota[lv] += 1
    for lv in strata:  # a rare level takes one pair from the largest share
        if quota[lv] == 0 and n >= len(strata):
            quota[max(quota, key=lambda k: (quota[k], -k))] -= 1
            quota[lv] = 1
    rng = np.random.default_rng([seed, MECHANISMS.index(mechanism)])
    chosen: list[Pair] = []
    for lv, members in strata.items():
        take = min(quota[lv], len(members))
        chosen += [members[i] for i in sorted(rng.choice(len(members), size=take, replace=False))]
    return sorted(chosen, key=lambda p: (p.sp_id, p.rp_id))


def samples(pairs: list[Pair], limit: int | None, seed: int) -> dict[str, list[Pair]]:
    """The pairs each mechanism is scored on: all of them, or a stratified sample of `limit`."""
    return {m: list(pairs) if limit is None else stratified_sample(pairs, m, limit, seed) for m in MECHANISMS}
