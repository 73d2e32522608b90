"""The submission forgery kit: seeded generators of ways to cheat a leaderboard submission,
each planted in a copy of an honest submission, then `emobench verify`d.

A class is a `ForgeryClass`: a name, the file a catch must name, and `variants(rng)`, five or
more `Forgery`s, each an edit of the submission in memory. Most forgers re-hash after editing
(a forger has `emobench submit`'s code); the integrity class edits after hashing. A variant is
caught when verify reports a problem naming the class's file. `python -m tests.board_forgery_kit
HONEST_SUBMISSION PROTOCOL [WORK [TWO_SUBJECT_SUBMISSION]]` prints the table.
"""

from __future__ import annotations

import random
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from emobench.board.hashing import file_sha256
from emobench.board.package import FILES, RECORD, seal
from emobench.board.protocol import BoardProtocol
from emobench.board.verify import Verdict, verify
from emobench.judging.pairwise import pairwise_table
from emobench.records import PairwiseVerdict
from emobench.registry import Registry
from emobench.scoring.schema import SCORES_SCHEMA

PAIRWISE, LEADERBOARD = "pairwise.jsonl", "leaderboard.parquet"


@dataclass
class Submission:
    """A submission's records in memory: what a forger edits."""

    manifest: dict[str, Any]
    episodes: list[dict[str, Any]]
    judgements: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    pairwise: list[dict[str, Any]] = field(default_factory=list)  # pairwise.jsonl's verdicts, where submitted
    leaderboard: pa.Table | None = None  # the run's leaderboard.parquet, where submitted
    pairwise_table: bool = False  # write pairwise.parquet from the (edited) verdicts, as a forger would
    after_hash: list[Callable[[Path], None]] = field(default_factory=list)  # edits to files once hashed

    @classmethod
    def read(cls, folder: Path) -> Submission:
        def lines(name: str) -> list[dict[str, Any]]:
            return [orjson.loads(x) for x in (folder / name).read_bytes().splitlines()]

        return cls(orjson.loads((folder / "manifest.json").read_bytes()), lines("episodes.jsonl"),
                   lines("judgements.jsonl"), pq.read_table(folder / "scores.parquet").to_pylist(),
                   lines(PAIRWISE) if (folder / PAIRWISE).exists() else [],
                   pq.read_table(folder / LEADERBOARD) if (folder / LEADERBOARD).exists() else None)

    def write(self, folder: Path, template: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_bytes(orjson.dumps(self.manifest, option=orjson.OPT_INDENT_2))
        for name, records in (("episodes.jsonl", self.episodes), ("judgements.jsonl", self.judgements)):
            (folder / name).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
        pq.write_table(pa.Table.from_pylist(self.rows, schema=SCORES_SCHEMA), folder / "scores.parquet")
        for name in set(orjson.loads((template / RECORD).read_bytes())["files"]) - set(FILES):
            shutil.copyfile(template / name, folder / name)  # the optional files: carried as they were, but
        if self.pairwise:  # the two a forger edits here
            (folder / PAIRWISE).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in self.pairwise))
        if self.pairwise_table:
            verdicts = [PairwiseVerdict.model_validate(v) for v in self.pairwise]
            pq.write_table(pairwise_table(verdicts), folder / "pairwise.parquet")
        if self.leaderboard is not None:
            pq.write_table(self.leaderboard, folder / LEADERBOARD)
        rehash(folder, template)
        for edit in self.after_hash:
            edit(folder)

    def row(self, key: str) -> dict[str, Any]:
        return next(r for r in self.rows if f"{r['subject']}|{r['case_id']}|{r['seed']}" == key)


def rehash(folder: Path, template: Path) -> None:
    """SUBMISSION.json for the files in folder, as a forger with `emobench submit`'s code writes it."""
    record = orjson.loads((template / RECORD).read_bytes())
    try:
        record = seal(record, folder, tuple(record["files"]))
    except pa.ArrowException:  # a table that does not read has no rows to hash: only its file's hash is new
        for name, entry in record["files"].items():
            entry["sha256"] = file_sha256(folder / name)
    (folder / RECORD).write_bytes(orjson.dumps(record))


@dataclass(frozen=True)
class Forgery:
    label: str
    edit: Callable[[Submission], None]


@dataclass(frozen=True)
class ForgeryClass:
    name: str
    file: str  # the file a catching problem names
    variants: Callable[[random.Random], list[Forgery]]
    floor: float = 1.0  # the catch rate tests/test_board.py asserts


def plant(honest: Path, forgery: Forgery, into: Path) -> Path:
    sub = Submission.read(honest)
    forgery.edit(sub)
    sub.write(into, honest)
    return into


def caught(verdict: Verdict, file: str) -> set[str]:
    """The checks that named the forged file (any file for a class that names none)."""
    return {p.check for p in verdict.problems if p.file == file or not file}


Row = tuple[int, int, list[str], set[str]]  # caught, planted, the labels missed, the checks that caught


def run_kit(honest: Path, protocol: BoardProtocol, registry: Registry, work: Path, classes: list[ForgeryClass],
            seed: int = 0) -> dict[str, Row]:
    rng = random.Random(seed)
    table: dict[str, Row] = {}
    for cls in classes:
        hits, missed, checks = 0, [], set()
        variants = cls.variants(rng)
        for i, forgery in enumerate(variants):
            folder = plant(honest, forgery, work / f"{cls.name}-{i}")
            by = caught(verify(folder, protocol, registry), cls.file)
            hits += bool(by)
            checks |= by
            if not by:
                missed.append(forgery.label)
            shutil.rmtree(folder)
        table[cls.name] = (hits, len(variants), missed, checks)
    return table


def markdown(table: dict[str, Row]) -> str:
    """The table docs/board.md holds (tests/test_board.py checks it): class, caught / planted, caught by."""
    lines = ["| class | caught / planted | caught by |", "|---|---|---|"]
    for name, (hits, n, _, checks) in table.items():
        lines.append(f"| {name} | {hits} / {n} | {', '.join(sorted(checks)) or 'nothing here (see below)'} |")
    total = sum(row[0] for row in table.values()), sum(row[1] for row in table.values())
    lines.append(f"| all | {total[0]} / {total[1]} | |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    from emobench.board.protocol import load_protocol
    from emobench.registry import load_registry
    from emobench.run.runner import ROOT
    from tests.board_forgeries import CLASSES
    from tests.board_forgeries_pairwise import PAIRWISE_CLASSES

    work = Path(argv[2]) if len(argv) > 2 else Path("/tmp/board-kit")
    shutil.rmtree(work, ignore_errors=True)
    protocol, registry = load_protocol(Path(argv[1])), load_registry(ROOT)
    table = run_kit(Path(argv[0]), protocol, registry, work, CLASSES)
    if len(argv) > 3:  # an honest submission of two subjects: the comparisons' classes
        table |= run_kit(Path(argv[3]), protocol, registry, work, PAIRWISE_CLASSES)
    print(markdown(table))


if __name__ == "__main__":
    main(sys.argv[1:])
