"""`leaderboard add`: a submission that verifies is kept under BOARD/submissions/ and the board's
leaderboard.parquet and cases.parquet are rebuilt from every submission kept there, so the
published table is always a function of verified submissions."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from emobench.board.package import RECORD
from emobench.board.protocol import BoardProtocol
from emobench.board.verify import Verdict, verify
from emobench.errors import InputError
from emobench.publish.case_scores import build_cases, write_cases
from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
from emobench.publish.runs import load_run
from emobench.registry import Registry

SUBMISSIONS = "submissions"


def add_submission(submission: Path, board: Path, protocol: BoardProtocol, registry: Registry, *,
                   n_boot: int = 2000, seed: int = 0) -> tuple[Verdict, list[Path]]:
    """The verdict, and the submissions the board now rests on (none added when it is refused)."""
    verdict = verify(submission, protocol, registry)
    kept = board / SUBMISSIONS
    if not verdict.ok:
        return verdict, sorted(kept.iterdir()) if kept.is_dir() else []
    record = orjson.loads((submission / RECORD).read_bytes())
    target = kept / f"{record['run_id']}-{record['digest'][:12]}"
    if target.exists():
        raise InputError(target, "", "this submission is on the board already")
    for other in sorted(kept.iterdir()) if kept.is_dir() else []:
        roles = orjson.loads((other / RECORD).read_bytes())["provenance"]["roles"]
        on_board = {s["label"] for s in roles.get("subjects", [])}
        clash = on_board & set(verdict.subjects)
        if clash:
            raise InputError(submission / "manifest.json", "roles.subjects", f"{sorted(clash)} on the board already "
                             f"({other.name}); a subject has one row: submit under another label")
    tmp = kept / f".{target.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(submission, tmp)
    sources = sorted([*(p for p in kept.iterdir() if not p.name.startswith(".")), target])
    try:
        tmp.rename(target)
        write_leaderboard(build_leaderboard(sources, n_boot=n_boot, seed=seed), board)
        write_cases(build_cases([load_run(s) for s in sources]), board)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # a board that could not be rebuilt keeps what it had
        raise
    return verdict, sources
