"""The forgery classes of the pairwise comparisons (tests/board_forgery_kit.py), planted in an honest
submission of two subjects: a verdict's winner flipped in the record, a comparison dropped, and a
Bradley-Terry rating of the run's leaderboard edited."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from tests.board_forgery_kit import Forgery, ForgeryClass, Submission

N = 5
BT = ("bt_rating", "bt_rating_lo", "bt_rating_hi")


def _pick(rng: random.Random) -> int:
    return rng.randrange(1 << 30)


def _flip(v: dict[str, Any]) -> None:
    v["winner"] = v["subject_b"] if v["winner"] == v["subject_a"] else v["subject_a"]
    v["error"] = None


def _same(v: dict[str, Any], w: dict[str, Any], *fields: str) -> bool:
    return all(v[f] == w[f] for f in fields)


def _verdict_flipped(rng: random.Random) -> list[Forgery]:
    def flip(pick: int, scope: str, with_table: bool) -> Forgery:
        def edit(sub: Submission) -> None:
            chosen = sub.pairwise[pick % len(sub.pairwise)]
            fields = {"one": ("case_id", "seed", "judge", "dimension", "order"),
                      "both orders": ("case_id", "seed", "judge", "dimension"),
                      "one order's dimensions": ("case_id", "seed", "judge", "order"),
                      "every judge": ("case_id", "seed", "dimension")}[scope]
            for v in sub.pairwise:
                if _same(v, chosen, *fields):
                    _flip(v)
            sub.pairwise_table = with_table
        return Forgery(f"winner flipped ({scope}){' with pairwise.parquet' if with_table else ''}", edit)
    scopes = ["one", "both orders", "one order's dimensions", "every judge"]
    return [flip(_pick(rng), scope, rng.random() < 0.5) for scope in scopes] + [flip(_pick(rng), "one", True)]


def _comparison_dropped(rng: random.Random) -> list[Forgery]:
    def drop(pick: int, scope: str) -> Forgery:
        def edit(sub: Submission) -> None:
            chosen = sub.pairwise[pick % len(sub.pairwise)]
            fields = {"one verdict": ("case_id", "seed", "judge", "dimension", "order"),
                      "one order": ("case_id", "seed", "judge", "order"),
                      "one judge": ("case_id", "seed", "judge"),
                      "one case": ("case_id",)}[scope]
            sub.pairwise = [v for v in sub.pairwise if not _same(v, chosen, *fields)]
            sub.pairwise_table = True
        return Forgery(f"{scope} dropped", edit)
    return [drop(_pick(rng), s) for s in ("one verdict", "one order", "one judge", "one case")] + [
        drop(_pick(rng), rng.choice(["one order", "one judge"]))]


def _bt_edited(rng: random.Random) -> list[Forgery]:
    def lift(column: str, delta: float, pick: int) -> Forgery:
        def edit(sub: Submission) -> None:
            assert sub.leaderboard is not None
            rows = sub.leaderboard.to_pylist()
            overall = [r for r in rows if r["slice_family"] == "overall"]
            row = overall[pick % len(overall)]
            row[column] = (row[column] or 1000.0) + delta
            sub.leaderboard = pa.Table.from_pylist(rows, schema=sub.leaderboard.schema)
        return Forgery(f"{column} {delta:+g}", edit)

    def swap(sub: Submission) -> None:
        assert sub.leaderboard is not None
        rows = sub.leaderboard.to_pylist()
        first, second = (r for r in rows if r["slice_family"] == "overall")
        first["bt_rating"], second["bt_rating"] = 1000.0 + 40.0, 1000.0 - 40.0  # the leader made clear
        sub.leaderboard = pa.Table.from_pylist(rows, schema=sub.leaderboard.schema)

    return [lift(rng.choice(BT), rng.choice([0.01, 5.0, -30.0, 120.0]), _pick(rng)) for _ in range(N)] + [
        Forgery("the two ratings set apart", swap)]


PAIRWISE_CLASSES = [
    ForgeryClass("pairwise verdict flipped", "pairwise.jsonl", _verdict_flipped),
    ForgeryClass("pairwise comparison dropped", "pairwise.jsonl", _comparison_dropped),
    ForgeryClass("Bradley-Terry rating edited", "leaderboard.parquet", _bt_edited),
]
