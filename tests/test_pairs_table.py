"""The leaderboard's pairs table (emobench/publish/pairs.py) against counts taken from the verdicts
directly: every verdict counted once, each dimension's rows adding up to the pooled one, the win
rate the mean over cases of a case's share, inside its interval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emobench.judging.pairwise import DIMENSIONS, ORDERS, PAIRWISE_SCHEMA
from emobench.publish.leaderboard import LEADERBOARD_SCHEMA
from emobench.publish.pairs import ALL, build_pairs
from emobench.publish.runs import Run

SUBJECTS = ("m1", "m2", "m3")


@st.composite
def verdicts(draw: st.DrawFn) -> list[dict[str, object]]:
    rows = []
    pairs = draw(st.lists(st.sampled_from([("m1", "m2"), ("m1", "m3"), ("m2", "m3")]), min_size=1, max_size=3,
                          unique=True))
    for a, b in pairs:
        for case in draw(st.lists(st.sampled_from(["c1", "c2", "c3"]), min_size=1, max_size=3, unique=True)):
            for judge in ("j1", "j2")[: draw(st.integers(1, 2))]:
                for order in ORDERS:
                    for dim in DIMENSIONS:
                        winner = draw(st.sampled_from([a, b, None]))
                        rows.append({"case_id": case, "seed": 0, "judge": judge, "dimension": dim, "subject_a": a,
                                     "subject_b": b, "order": order, "winner": winner,
                                     "error": None if winner else "unparseable"})
    return rows


def _leaderboard(ratings: dict[str, float]) -> pa.Table:
    rows = [{"slice_family": "overall", "slice": "all", "subject": s, "bt_rating": r, "external": False,
             "language": "en", "trackers": "run", "n_cases": 1, "n_episodes": 1, "simulator_invalid_rate": 0.0}
            for s, r in ratings.items()]
    return pa.Table.from_pylist(rows, schema=LEADERBOARD_SCHEMA)


@given(verdicts(), st.lists(st.floats(800, 1200), min_size=3, max_size=3))
@settings(max_examples=40, deadline=None)
def test_pairs_count_every_verdict_once(tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, object]],
                                        ratings: list[float]) -> None:
    folder = tmp_path_factory.mktemp("run")
    pq.write_table(pa.Table.from_pylist(rows, schema=PAIRWISE_SCHEMA), folder / "pairwise.parquet")
    run = Run(folder, {"run_id": "r", "registry_version": "v"}, pa.table({}), None, None)
    rating = dict(zip(SUBJECTS, ratings, strict=True))
    table = build_pairs([run], _leaderboard(rating)).to_pylist()
    assert {(r["subject_a"], r["subject_b"]) for r in table} == {(v["subject_a"], v["subject_b"]) for v in rows}
    for r in table:
        mine = [v for v in rows if (v["subject_a"], v["subject_b"]) == (r["subject_a"], r["subject_b"])
                and r["dimension"] in (ALL, v["dimension"])]
        valid = [v for v in mine if v["winner"] is not None]
        assert (r["wins_a"], r["wins_b"], r["n_invalid"]) == (
            sum(v["winner"] == r["subject_a"] for v in valid), sum(v["winner"] == r["subject_b"] for v in valid),
            len(mine) - len(valid))
        assert r["n_verdicts"] == len(valid) and r["run_ids"] == ["r"] and r["registry_version"] == "v"
        cases = sorted({str(v["case_id"]) for v in valid})
        if not cases:
            assert r["win_rate_a"] is None
            continue
        share = np.mean([np.mean([v["winner"] == r["subject_a"] for v in valid if v["case_id"] == c]) for c in cases])
        assert np.isclose(r["win_rate_a"], share) and r["win_rate_a_lo"] <= share + 1e-12 <= r["win_rate_a_hi"] + 2e-12
        diff = rating[r["subject_b"]] - rating[r["subject_a"]]
        assert (r["bt_p_a"] is None) == (r["dimension"] != ALL)
        assert r["bt_p_a"] is None or np.isclose(r["bt_p_a"], 1 / (1 + 10 ** (diff / 400)))
    pooled = {(r["subject_a"], r["subject_b"]): r for r in table if r["dimension"] == ALL}
    for key, r in pooled.items():
        parts = [p for p in table if (p["subject_a"], p["subject_b"]) == key and p["dimension"] != ALL]
        assert sum(p["wins_a"] for p in parts) == r["wins_a"] and sum(p["n_invalid"] for p in parts) == r["n_invalid"]


def test_no_comparisons_give_the_columns_and_no_rows(tmp_path: Path) -> None:
    run = Run(tmp_path, {"run_id": "r", "registry_version": "v"}, pa.table({}), None, None)
    table = build_pairs([run], _leaderboard({"m1": 1000.0}))
    assert table.num_rows == 0 and "win_rate_a" in table.column_names
