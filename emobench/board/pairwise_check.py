"""A submission's pairwise comparisons and what is derived from them, recomputed.

Every planned comparison (judging/pairwise.py plan_pairs: each pair of subjects on each case and
seed, every judge, both orders, every dimension) is in pairwise.jsonl once; each verdict is what
its judge's recorded call under the seed the judging stage derives said, parsed with the
project's parser and mapped from the shown position back to the subject; pairwise.parquet is the
table of those verdicts, and leaderboard.parquet (the run's own, with the Bradley-Terry ratings
and every other leaderboard figure) is what the leaderboard build gives on the submitted records.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from emobench.board.recompute import _close
from emobench.config import RunConfig
from emobench.episode.roles import derive_seed
from emobench.errors import InputError
from emobench.judging.pairwise import DIMENSIONS, ORDERS, pairwise_table, parse_pairwise, plan_pairs
from emobench.records import Episode, PairwiseCall, PairwiseVerdict
from emobench.rundir import read_records

Found = tuple[str, str, str, str]  # check, file, field, message
Group = tuple[str, int, str, str, str, str]  # case, seed, judge, subject_a, subject_b, order
RUN_SEED = 0  # the seed judge_pairwise (judging/stage.py) derives every comparison's from
VERDICTS, CALLS, TABLE, LEADERBOARD = "pairwise.jsonl", "pairwise_calls.jsonl", "pairwise.parquet", "leaderboard.parquet"


def check_pairwise(folder: Path, config: RunConfig, episodes: list[Episode], judges: set[str],
                   tol: float) -> list[Found]:
    """Coverage, recomputation and the judges' models of the comparisons; then the derived tables."""
    try:
        verdicts = read_records(folder / VERDICTS, PairwiseVerdict) if (folder / VERDICTS).exists() else []
        calls = read_records(folder / CALLS, PairwiseCall) if (folder / CALLS).exists() else []
    except InputError as exc:
        return [("integrity", Path(exc.source).name, exc.field, exc.problem)]
    found = _coverage(config, episodes, verdicts)
    found += [("protocol", CALLS, f"line {n}", f"a pairwise call from {c.model!r}, not a model of the manifest's panel")
              for n, c in enumerate(calls, start=1) if c.model not in judges]
    found += _verdicts(verdicts, calls, config.limits().judge_retries)
    found += _table(folder, verdicts)
    found += _leaderboard(folder, tol)
    return found


def _coverage(config: RunConfig, episodes: list[Episode], verdicts: list[PairwiseVerdict]) -> list[Found]:
    """Every planned comparison once, none unplanned: a comparison a submitter dropped is refused."""
    if not config.panel.pairwise:
        planned: list[tuple[Episode, Episode]] = []
    else:
        try:
            planned = plan_pairs(episodes, config.panel.reference_subjects)
        except ValueError:  # duplicated episodes: coverage names them
            return []
    labels = [j.name for j in config.panel.judges]
    expected = {(x.case_id, x.seed, j, d, x.subject, y.subject, o)
                for x, y in planned for j in labels for o in ORDERS for d in DIMENSIONS}
    have = Counter((v.case_id, v.seed, v.judge, v.dimension, v.subject_a, v.subject_b, v.order) for v in verdicts)
    found: list[Found] = []
    for key in sorted(expected - set(have)):
        found.append(("coverage", VERDICTS, _name(key), "missing: a comparison the run planned"))
    for key, n in sorted(have.items()):
        if key not in expected:
            found.append(("coverage", VERDICTS, _name(key), "not a comparison the run planned"))
        elif n > 1:
            found.append(("coverage", VERDICTS, _name(key), f"{n} verdicts for one comparison"))
    return found


def _name(key: tuple[Any, ...]) -> str:
    case, seed, judge, dimension, a, b, order = key
    return f"{a} v {b}|{case}|{seed}: {judge} {order} {dimension}"


def _verdicts(verdicts: list[PairwiseVerdict], calls: list[PairwiseCall], retries: int) -> list[Found]:
    """Each order's verdicts are what its judge's first reply the parser accepts said, in the
    attempts' order; none valid only where no attempt's reply parses."""
    by_seed: dict[tuple[str, int], list[PairwiseCall]] = {}
    for call in calls:
        by_seed.setdefault((call.label, call.seed), []).append(call)
    groups: dict[Group, list[PairwiseVerdict]] = {}
    for v in verdicts:
        groups.setdefault((v.case_id, v.seed, v.judge, v.subject_a, v.subject_b, v.order), []).append(v)
    found: list[Found] = []
    for (case, seed, judge, a, b, order), group in groups.items():
        pair_seed = derive_seed(RUN_SEED, "pair", case, seed)
        said = None
        for attempt in range(retries + 1):
            attempt_seed = derive_seed(pair_seed, "pairwise", judge, a, b, order, attempt)
            for call in by_seed.get((judge, attempt_seed), []):
                if call.case_id not in (None, case) or call.episode_seed not in (None, seed):
                    continue
                try:
                    said = parse_pairwise(call.text, call.finish_reason)
                    break
                except ValueError:
                    continue
            if said is not None:
                break
        shown = {"1": a, "2": b} if order == "ab" else {"1": b, "2": a}
        for v in group:
            winner = shown[said[v.dimension]] if said is not None and v.dimension in said else None
            if v.winner != winner:
                found.append(("recomputation", VERDICTS, _name((case, seed, judge, v.dimension, a, b, order)),
                              f"winner {v.winner!r} where the judge's recorded call under this comparison's seed "
                              f"gives {winner!r}"))
    return found


def _table(folder: Path, verdicts: list[PairwiseVerdict]) -> list[Found]:
    """pairwise.parquet, where submitted, is the table of the verdicts, row by row."""
    if not (folder / TABLE).exists():
        return []
    try:
        rows = pq.read_table(folder / TABLE).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        return [("integrity", TABLE, "", f"unreadable: {exc}")]
    again = pairwise_table(verdicts).to_pylist()
    if len(rows) != len(again):
        return [("recomputation", TABLE, "", f"{len(rows)} rows for {len(again)} verdicts in {VERDICTS}")]
    return [("recomputation", TABLE, f"row {n}", f"{row!r} is not {VERDICTS}'s line {n}")
            for n, (row, want) in enumerate(zip(rows, again, strict=True), start=1) if row != want][:20]


def _leaderboard(folder: Path, tol: float) -> list[Found]:
    """The run's leaderboard.parquet, where submitted: every row and column (the Bradley-Terry
    ratings among them) as the build gives it on the submitted records, with its bootstrap."""
    if not (folder / LEADERBOARD).exists():
        return []
    import orjson

    from emobench.publish.leaderboard import build_leaderboard

    try:
        table = pq.read_table(folder / LEADERBOARD)
        boot = orjson.loads((table.schema.metadata or {}).get(b"emobench.bootstrap", b"{}"))
        again = build_leaderboard([folder], n_boot=int(boot.get("n", 2000)), seed=int(boot.get("seed", 0)))
    except (OSError, pa.ArrowException, orjson.JSONDecodeError, TypeError, ValueError, AttributeError) as exc:
        return [("recomputation", LEADERBOARD, "", f"unreadable or not rebuilt: {exc}")]
    except InputError as exc:
        return [("recomputation", LEADERBOARD, exc.field, f"not rebuilt from the submission: {exc.problem}")]
    if table.column_names != again.column_names or table.num_rows != again.num_rows:
        return [("recomputation", LEADERBOARD, "", f"{table.num_rows} rows of {table.num_columns} columns where the "
                                                   f"build gives {again.num_rows} of {again.num_columns}")]
    keys = [f"{f}/{s}/{sub}" for f, s, sub in zip(*(again.column(c).to_pylist()
                                                   for c in ("slice_family", "slice", "subject")), strict=True)]
    found: list[Found] = []
    for name in again.column_names:
        have, want = table.column(name).to_pylist(), again.column(name).to_pylist()
        for key, x, y in zip(keys, have, want, strict=True):
            if not (_close(x, y, tol) or (_missing(x) and _missing(y))):
                found.append(("recomputation", LEADERBOARD, f"{key}: {name}", f"{x!r} where the build gives {y!r}"))
    return found


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))

