"""An external bundle: another benchmark's recorded runs, re-scored, with the statistics it lacks.

`build_empa_bundle` writes, beside the leaderboard and apart from it:
- cases.parquet: one row per (model, case), numbers and slice labels only;
- leaderboard.parquet: per model and slice (overall, dominant axis, difficulty, category) both
  EPM-Q columns with 95% bootstrap CIs by case (in a slice too small for one, its min and max:
  `ci_is_min_max`) and the success rate with its Wilson interval;
- pairs.parquet: every model pair, paired by case (emobench.external.pairs);
- index.html and NOTICE (emobench.external.page).
Provenance and the pairs' summary travel as `emobench.external_bundle` schema metadata of each
parquet file; the leaderboard's page finds the bundle by it and links it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

import emobench
from emobench.errors import InputError
from emobench.external.empa_cases import TOLERANCE, EmpaRows, read_empa_rows
from emobench.external.pairs import pair_summary, pair_table
from emobench.importers.empa import EMPA_REPOSITORY
from emobench.publish.columns import EXTERNAL_BUNDLE_KEY, atomic_write
from emobench.publish.runs import SLICE_LEVELS
from emobench.scoring.stats import bootstrap_case_means, expanded_tail, wilson_interval

CI = 0.95
FAMILIES = ("overall", "dominant_axis", "difficulty", "category")
METRICS = ("epmq_empa", "epmq")  # EMPA's definitions, then the emobench profile's
# EMPA's licence, copyright and no-warranty notices and its requested citation (a data file).
ATTRIBUTION = files("emobench.external").joinpath("empa_source.yaml")


def _ci(name: str) -> list[pa.Field]:
    return [pa.field(n, pa.float64()) for n in (name, f"{name}_lo", f"{name}_hi")]


LEADERBOARD_SCHEMA = pa.schema(
    [
        pa.field("slice_family", pa.string(), nullable=False),
        pa.field("slice", pa.string(), nullable=False),
        pa.field("subject", pa.string(), nullable=False),
        pa.field("external", pa.bool_(), nullable=False),
        *_ci("epmq_empa"),
        pa.field("epmq_empa_published", pa.float64()),  # mean of EMPA's own per-case values
        *_ci("epmq"),
        pa.field("ci_is_min_max", pa.bool_(), nullable=False),  # both EPM-Q bounds: see bounds_are_min_max
        *_ci("success_rate"),
        pa.field("mean_turns", pa.float64(), nullable=False),
        pa.field("n_cases", pa.int64(), nullable=False),
        pa.field("n_episodes", pa.int64(), nullable=False),
    ]
)


def bounds_are_min_max(n_cases: int) -> bool:
    """Whether a slice of n_cases has an expanded-percentile interval that is just its min and max.

    The bootstrap puts at least n**-n of its mass on each extreme (every draw the same case);
    where that exceeds the interval's tail (n <= 4 at 95%), the exact bounds are the slice's
    lowest and highest case, and the table stores those values.
    """
    return n_cases >= 2 and float(expanded_tail(n_cases, CI)) < float(n_cases) ** -n_cases


def cases_table(rows: list[dict[str, Any]]) -> pa.Table:
    table = pa.Table.from_pylist(rows)
    return table.sort_by([("subject", "ascending"), ("case_id", "ascending")])


def _grid(table: pa.Table, where: Path) -> tuple[list[str], list[str], dict[str, np.ndarray]]:
    """Subjects, cases, and per column a (subjects, cases) matrix; every subject on every case."""
    subjects = sorted(set(table.column("subject").to_pylist()))
    cases = sorted(set(table.column("case_id").to_pylist()))
    if table.num_rows != len(subjects) * len(cases):
        per = {s: table.column("subject").to_pylist().count(s) for s in subjects}
        short = min(per, key=lambda s: per[s])
        raise InputError(where / short, "script_*_result.json", f"{per[short]} of the {len(cases)} cases recorded; "
                         "the paired statistics need every model on every case")
    grid = {name: np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
            .reshape(len(subjects), len(cases)) for name in (*METRICS, "success", "n_turns", "epmq_empa_published")}
    return subjects, cases, grid


def _partitions(table: pa.Table, n_subjects: int) -> dict[str, tuple[np.ndarray, list[str]]]:
    """Per family: each case's stratum code and the stratum labels, in a stable order."""
    first = table.slice(0, table.num_rows // n_subjects)  # rows are sorted by subject, then case
    out: dict[str, tuple[np.ndarray, list[str]]] = {"overall": (np.zeros(first.num_rows, dtype=np.intp), ["all"])}
    for family in FAMILIES[1:]:
        values = first.column(family).to_pylist()
        order = SLICE_LEVELS.get(family, ())
        labels = sorted(set(values), key=lambda v: (order.index(v) if v in order else len(order), v))
        out[family] = (np.array([labels.index(v) for v in values], dtype=np.intp), labels)
    return out


def leaderboard_table(cases: pa.Table, *, n_boot: int, seed: int) -> pa.Table:
    subjects, _, grid = _grid(cases, Path("cases"))
    s_n = len(subjects)
    families = _partitions(cases, s_n)
    values = np.concatenate([grid[m] for m in METRICS]).T  # (cases, metric-major subjects)
    estimates = bootstrap_case_means(values, [codes for codes, _ in families.values()], n_boot=n_boot, seed=seed, ci=CI)
    columns: dict[str, list[Any]] = {f.name: [] for f in LEADERBOARD_SCHEMA}
    for (family, (codes, labels)), est in zip(families.items(), estimates, strict=True):
        for k, label in enumerate(labels):
            inside = codes == k
            n = int(inside.sum())
            p = grid["success"][:, inside].mean(axis=1)
            p_lo, p_hi = wilson_interval(p, np.full(s_n, float(n)), CI)  # one episode per case
            point, lo, hi = (a[k].reshape(len(METRICS), s_n) for a in (est.point, est.lo, est.hi))
            min_max = bounds_are_min_max(n)
            if min_max:
                lo = np.stack([grid[m][:, inside].min(axis=1) for m in METRICS])
                hi = np.stack([grid[m][:, inside].max(axis=1) for m in METRICS])
            order = np.lexsort((np.arange(s_n), -point[0]))  # best EPM-Q (EMPA) first
            for s in order:
                columns["slice_family"].append(family)
                columns["slice"].append(label)
                columns["subject"].append(subjects[s])
                columns["external"].append(True)
                for m, metric in enumerate(METRICS):
                    columns[metric].append(point[m, s])
                    columns[f"{metric}_lo"].append(lo[m, s])
                    columns[f"{metric}_hi"].append(hi[m, s])
                columns["ci_is_min_max"].append(min_max)
                published = grid["epmq_empa_published"][s, inside].mean()
                columns["epmq_empa_published"].append(published if family == "overall" else None)
                columns["success_rate"].append(p[s])
                columns["success_rate_lo"].append(p_lo[s])
                columns["success_rate_hi"].append(p_hi[s])
                columns["mean_turns"].append(grid["n_turns"][s, inside].mean())
                columns["n_cases"].append(n)
                columns["n_episodes"].append(n)
    return pa.Table.from_pydict(
        {f.name: [None if v is None else (float(v) if isinstance(v, np.floating) else v) for v in columns[f.name]]
         for f in LEADERBOARD_SCHEMA},
        schema=LEADERBOARD_SCHEMA,
    )


def bundle_metadata(empa: EmpaRows, pairs: pa.Table, leaderboard: pa.Table, *, commit: str, n_boot: int,
                    seed: int) -> dict[str, Any]:
    overall = [r for r in leaderboard.to_pylist() if r["slice_family"] == "overall"]
    attribution = yaml.safe_load(ATTRIBUTION.read_text(encoding="utf-8"))
    return {
        "source": "EMPA",
        "repository": EMPA_REPOSITORY,
        "commit": commit,
        "licence": attribution.pop("licence"),
        "attribution": attribution,
        "taken": "numbers only: per-case scores, indices, success, stop, turns and slice labels; no text",
        "n_subjects": len(overall),
        "n_cases": overall[0]["n_cases"] if overall else 0,
        "episodes_per_case": 1,
        "profiles": {"epmq_empa": "empa", "epmq": "emobench"},
        "published_check": {"tolerance": TOLERANCE, "largest_difference": empa.largest_difference},
        "quirks": empa.quirks,
        "bootstrap": {"n": n_boot, "seed": seed, "ci": CI, "unit": "case", "method": "expanded percentile",
                      "min_max_up_to": max(n for n in range(2, 10) if bounds_are_min_max(n))},
        "permutation": {"test": "sign-flip, mean difference, two-sided", "n": n_boot, "seed": seed,
                        "exact_up_to": n_boot.bit_length() - 1},  # 2**n sign patterns <= n_boot
        "pairs": {metric: pair_summary(pairs, metric) for metric in METRICS},
        "emobench_version": emobench.__version__,
    }


def build_empa_bundle(
    results: Path, out_dir: Path, *, commit: str, n_boot: int = 10_000, seed: int = 0,
    tick: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Write the bundle into out_dir (created) and return its metadata; tick, when given, hears
    of each of its steps."""
    steps = ("reading", "pairs", "leaderboard", "writing")

    def step(name: str) -> None:
        if tick is not None:
            tick(name, steps.index(name), len(steps))

    from emobench.external.page import write_notice, write_page  # matplotlib only for the page

    if n_boot < 1:
        raise InputError("external", "n_boot", "must be at least 1")
    step("reading")
    empa = read_empa_rows(Path(results))
    cases = cases_table(empa.rows)
    subjects, _, grid = _grid(cases, Path(results))
    step("pairs")
    pairs = pair_table({m: grid[m] for m in METRICS}, subjects, n_boot=n_boot, seed=seed)
    step("leaderboard")
    board = leaderboard_table(cases, n_boot=n_boot, seed=seed)
    step("writing")
    meta = bundle_metadata(empa, pairs, board, commit=commit, n_boot=n_boot, seed=seed)
    encoded = {EXTERNAL_BUNDLE_KEY: json.dumps(meta, sort_keys=True).encode()}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in (("leaderboard", board), ("cases", cases), ("pairs", pairs)):
        atomic_write(out / f"{name}.parquet", partial(pq.write_table, table.replace_schema_metadata(encoded)))
    write_page(board, pairs, meta, out)
    write_notice(meta, out)
    if tick is not None:
        tick("done", len(steps), len(steps))
    return meta
