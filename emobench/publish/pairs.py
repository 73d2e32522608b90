"""The leaderboard's pairs table (pairs.parquet): one row per pair of subjects per dimension
(the four pairwise dimensions and "all" of them pooled), from every run's pairwise verdicts.

A row says how often the judges preferred subject_a to subject_b, with a 95% interval, how often
a verdict flipped when the two transcripts were shown in the other order (position bias), how
many verdicts stayed invalid, and, on the pooled row, the probability the leaderboard's
Bradley-Terry ratings give subject_a over subject_b. There are no ties: the judge must pick.
A board with one subject, or runs that compared none, has an empty table with the same columns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import emobench
from emobench.judging.pairwise import DIMENSIONS, PAIRWISE_SCHEMA
from emobench.publish.columns import atomic_write
from emobench.publish.runs import Run
from emobench.scoring.reliability import position_flip_rate
from emobench.scoring.stats import effective_trials, wilson_interval

PAIRS_FILE = "pairs.parquet"
PAIRS_SCHEMA_VERSION = "1"
ALL = "all"  # the row pooling every dimension, as the Bradley-Terry fit does
CI = 0.95

PAIRS_SCHEMA = pa.schema([
    pa.field("subject_a", pa.string(), nullable=False),  # the pair sorted by label
    pa.field("subject_b", pa.string(), nullable=False),
    pa.field("dimension", pa.string(), nullable=False),  # one of the pairwise dimensions, or "all"
    pa.field("n_cases", pa.int64(), nullable=False),
    pa.field("n_verdicts", pa.int64(), nullable=False),  # valid verdicts: both orders, every judge
    pa.field("n_invalid", pa.int64(), nullable=False),  # verdicts that stayed unparseable (no winner)
    pa.field("wins_a", pa.int64(), nullable=False),
    pa.field("wins_b", pa.int64(), nullable=False),
    # mean over cases of the share of a case's verdicts subject_a won; Wilson bounds on the cases' effective trials
    pa.field("win_rate_a", pa.float64()),
    pa.field("win_rate_a_lo", pa.float64()),
    pa.field("win_rate_a_hi", pa.float64()),
    pa.field("flip_rate", pa.float64()),  # share of verdicts judged in both orders whose winner changed
    pa.field("bt_p_a", pa.float64()),  # P(a beats b) from the leaderboard's BT ratings; "all" rows only
    pa.field("judges", pa.list_(pa.string()), nullable=False),
    pa.field("run_ids", pa.list_(pa.string()), nullable=False),
    pa.field("registry_version", pa.string(), nullable=False),
])


def read_verdicts(run: Run) -> pd.DataFrame:
    """The run's pairwise.parquet in full (every verdict, invalid ones included), with its run id."""
    path = run.path / "pairwise.parquet"
    table = pq.read_table(path, columns=PAIRWISE_SCHEMA.names) if path.exists() else PAIRWISE_SCHEMA.empty_table()
    return table.to_pandas().assign(run_id=run.run_id, registry_version=run.registry_version)


def _bt(leaderboard: pa.Table) -> dict[str, float]:
    overall = leaderboard.filter(pc.equal(leaderboard.column("slice_family"), "overall"))
    return {s: r for s, r in zip(overall.column("subject").to_pylist(), overall.column("bt_rating").to_pylist(),
                                 strict=True) if r is not None}


def _row(a: str, b: str, dimension: str, rows: pd.DataFrame, rating: dict[str, float]) -> dict[str, Any]:
    valid = rows[rows["winner"].notna()]
    per_case = valid.assign(won=(valid["winner"] == a).astype(float)).groupby("case_id")["won"].mean()
    n_cases, n = len(per_case), len(valid)
    p = float(per_case.mean()) if n_cases else np.nan
    var = float(per_case.var(ddof=1)) / n_cases if n_cases > 1 else np.nan
    lo, hi = wilson_interval(p, effective_trials(np.array(p), np.array(var), np.array(n_cases), np.array(n)), CI)
    flip = position_flip_rate(valid) if n else np.nan
    bt = 1.0 / (1.0 + 10.0 ** ((rating[b] - rating[a]) / 400.0)) if dimension == ALL and {a, b} <= set(rating) else None
    return {"subject_a": a, "subject_b": b, "dimension": dimension, "n_cases": rows["case_id"].nunique(),
            "n_verdicts": n, "n_invalid": len(rows) - n, "wins_a": int((valid["winner"] == a).sum()),
            "wins_b": int((valid["winner"] == b).sum()), "win_rate_a": p if n_cases else None,
            "win_rate_a_lo": float(lo) if n_cases else None, "win_rate_a_hi": float(hi) if n_cases else None,
            "flip_rate": None if np.isnan(flip) else flip, "bt_p_a": bt,
            "judges": sorted(set(rows["judge"])), "run_ids": sorted(set(rows["run_id"])),
            "registry_version": "+".join(sorted(set(rows["registry_version"])))}


def build_pairs(runs: Sequence[Run], leaderboard: pa.Table) -> pa.Table:
    """Every pair of subjects the runs compared, per dimension and pooled, best-known order:
    pairs by label, "all" first, then the dimensions in the rubric's order."""
    verdicts = pd.concat([read_verdicts(r) for r in runs], ignore_index=True)
    rating = _bt(leaderboard)
    rows = []
    for (a, b), pair in verdicts.groupby(["subject_a", "subject_b"], sort=True):
        rows.append(_row(str(a), str(b), ALL, pair, rating))
        for dimension in (d for d in DIMENSIONS if d in set(pair["dimension"])):
            rows.append(_row(str(a), str(b), dimension, pair[pair["dimension"] == dimension], rating))
    table = pa.Table.from_pylist(rows, schema=PAIRS_SCHEMA)
    meta = {"pairs_schema_version": PAIRS_SCHEMA_VERSION, "emobench_version": emobench.__version__,
            "source_runs": [r.run_id for r in runs], "ci": CI,
            "bradley_terry": "leaderboard.parquet's overall bt_rating (400 log10 strength), every dimension pooled"}
    return table.replace_schema_metadata({f"emobench.{k}".encode(): json.dumps(v, sort_keys=True).encode()
                                          for k, v in meta.items()})


def write_pairs(table: pa.Table, out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / PAIRS_FILE, lambda p: pq.write_table(table, p))
