"""The submission forgery kit: seeded generators of ways to cheat a leaderboard submission,
each planted in a copy of an honest submission, then `board verify`d.

A class is a `ForgeryClass`: a name, the file a catch must name, and `variants(rng)`, five or
more `Forgery`s, each an edit of the submission in memory. Most forgers re-hash after editing
(a forger has `board submit`'s code); the integrity class edits after hashing. A variant is
caught when verify reports a problem naming the class's file. `python -m tests.board_forgery_kit
HONEST_SUBMISSION PROTOCOL` prints the table.
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

from emobench.board.hashing import record_sha256
from emobench.board.package import FILES, RECORD, file_entries
from emobench.board.protocol import BoardProtocol
from emobench.board.verify import Verdict, verify
from emobench.registry import Registry
from emobench.scoring.schema import SCORES_SCHEMA


@dataclass
class Submission:
    """A submission's records in memory: what a forger edits."""

    manifest: dict[str, Any]
    episodes: list[dict[str, Any]]
    judgements: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    after_hash: list[Callable[[Path], None]] = field(default_factory=list)  # edits to files once hashed

    @classmethod
    def read(cls, folder: Path) -> Submission:
        def lines(name: str) -> list[dict[str, Any]]:
            return [orjson.loads(x) for x in (folder / name).read_bytes().splitlines()]

        return cls(orjson.loads((folder / "manifest.json").read_bytes()), lines("episodes.jsonl"),
                   lines("judgements.jsonl"), pq.read_table(folder / "scores.parquet").to_pylist())

    def write(self, folder: Path, template: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_bytes(orjson.dumps(self.manifest, option=orjson.OPT_INDENT_2))
        for name, records in (("episodes.jsonl", self.episodes), ("judgements.jsonl", self.judgements)):
            (folder / name).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
        pq.write_table(pa.Table.from_pylist(self.rows, schema=SCORES_SCHEMA), folder / "scores.parquet")
        for name in set(orjson.loads((template / RECORD).read_bytes())["files"]) - set(FILES):
            shutil.copyfile(template / name, folder / name)  # pairwise.jsonl: carried as it was
        rehash(folder, template)
        for edit in self.after_hash:
            edit(folder)

    def row(self, key: str) -> dict[str, Any]:
        return next(r for r in self.rows if f"{r['subject']}|{r['case_id']}|{r['seed']}" == key)


def rehash(folder: Path, template: Path) -> None:
    """submission.json for the files in folder, as a forger with `board submit`'s code writes it."""
    record = orjson.loads((template / RECORD).read_bytes())
    record.pop("digest")
    record["files"] = file_entries(folder, tuple(record["files"]))
    record["digest"] = record_sha256(record)
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


def caught(verdict: Verdict, file: str) -> bool:
    return any(p.file == file or not file for p in verdict.problems)


def run_kit(honest: Path, protocol: BoardProtocol, registry: Registry, work: Path, classes: list[ForgeryClass],
            seed: int = 0) -> dict[str, tuple[int, int, list[str]]]:
    """Per class: (caught, planted, the labels missed)."""
    rng = random.Random(seed)
    table: dict[str, tuple[int, int, list[str]]] = {}
    for cls in classes:
        hits, missed = 0, []
        variants = cls.variants(rng)
        for i, forgery in enumerate(variants):
            folder = plant(honest, forgery, work / f"{cls.name}-{i}")
            if caught(verify(folder, protocol, registry), cls.file):
                hits += 1
            else:
                missed.append(forgery.label)
            shutil.rmtree(folder)
        table[cls.name] = (hits, len(variants), missed)
    return table


def markdown(table: dict[str, tuple[int, int, list[str]]]) -> str:
    lines = ["| class | caught / planted | missed |", "|---|---|---|"]
    for name, (hits, n, missed) in table.items():
        lines.append(f"| {name} | {hits} / {n} | {'; '.join(missed) or '–'} |")
    total = sum(h for h, _, _ in table.values()), sum(n for _, n, _ in table.values())
    lines.append(f"| all | {total[0]} / {total[1]} | |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    from emobench.board.protocol import load_protocol
    from emobench.registry import load_registry
    from emobench.run.runner import ROOT
    from tests.board_forgeries import CLASSES

    work = Path(argv[2]) if len(argv) > 2 else Path("/tmp/board-kit")
    shutil.rmtree(work, ignore_errors=True)
    print(markdown(run_kit(Path(argv[0]), load_protocol(Path(argv[1])), load_registry(ROOT), work, CLASSES)))


if __name__ == "__main__":
    main(sys.argv[1:])
