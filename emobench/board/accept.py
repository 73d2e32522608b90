"""`leaderboard add`: a submission that verifies is kept under BOARD/submissions/ and the board's
leaderboard.parquet, cases.parquet, pairs.parquet and index.html are rebuilt from every submission kept there, so
the published table is always a function of verified submissions. Each verification (root hash,
verifier version, date) is kept in BOARD/verifications.json and travels in the table's schema
metadata (`emobench.verifications`) and on the page."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import orjson

import emobench
from emobench.board.package import RECORD, SUBMISSIONS
from emobench.board.protocol import BoardProtocol
from emobench.board.verify import Verdict, verify
from emobench.errors import InputError
from emobench.library_paths import git_sha
from emobench.publish.case_scores import build_cases, write_cases
from emobench.publish.columns import atomic_write
from emobench.publish.html import write_page
from emobench.publish.leaderboard import build_leaderboard, write_leaderboard
from emobench.publish.pairs import build_pairs, write_pairs
from emobench.publish.runs import load_run
from emobench.registry import Registry
from emobench.run.runner import ROOT

VERIFICATIONS = "verifications.json"


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
    ledger = board / VERIFICATIONS
    verified = json.loads(ledger.read_text()) if ledger.exists() else {}
    verified[str(record["run_id"])] = {
        "submission": target.name, "root": record["root"], "protocol_version": protocol.version,
        "verifier_version": emobench.__version__, "verifier_git_sha": git_sha(ROOT),
        "verified_at": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        tmp.rename(target)
        table = build_leaderboard(sources, n_boot=n_boot, seed=seed)
        meta = {**(table.schema.metadata or {}), b"emobench.verifications": json.dumps(verified, sort_keys=True).encode()}
        table = table.replace_schema_metadata(meta)
        write_leaderboard(table, board)
        runs = [load_run(s) for s in sources]
        write_cases(build_cases(runs), board)
        write_pairs(build_pairs(runs, table), board)
        write_page(table, board)
        from emobench.board.hub import write_card  # hub imports huggingface_hub: only once a board is rebuilt

        write_card(board)
        atomic_write(ledger, lambda p: p.write_text(json.dumps(verified, indent=2, sort_keys=True) + "\n"))
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # a board that could not be rebuilt keeps what it had
        raise
    return verdict, sources
