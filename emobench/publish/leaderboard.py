"""Leaderboard build (docs/method.md §5.7, 7): merge runs, slice, bootstrap by case, write parquet.

A subject's score on a slice is the mean over the slice's cases of the per-case mean over
seeds (never a best-of). CIs: one seeded bootstrap by case, resampled within each slice, shared
by every metric and subject; Wilson intervals for success rates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from emobench.errors import InputError
from emobench.publish.columns import CHALLENGING, DEFENSIVE, FAMILIES, atomic_write
from emobench.publish.provenance import build_metadata, check_mergeable
from emobench.publish.runs import METRICS, SLICE_LEVELS, Run, load_run
from emobench.scoring.stats import bootstrap_case_means, effective_trials, wilson_interval
from emobench.trackers.languages import trackers_note

CI = 0.95


def _ci_fields(name: str) -> list[pa.Field]:
    return [pa.field(n, pa.float64()) for n in (name, f"{name}_lo", f"{name}_hi")]


LEADERBOARD_SCHEMA = pa.schema(
    [
        pa.field("slice_family", pa.string(), nullable=False),
        pa.field("slice", pa.string(), nullable=False),
        pa.field("subject", pa.string(), nullable=False),
        pa.field("scoring_profile", pa.string()),  # the profile of the subject's EPM-Q; "mixed" across runs
        pa.field("external", pa.bool_(), nullable=False),  # the subject's episodes were imported
        # the languages of the row's cases, "en+zh" where a row pools runs of both (never silently)
        pa.field("language", pa.string(), nullable=False),
        # "run", or why the trackers are absent for some of the row's cases, by name
        pa.field("trackers", pa.string(), nullable=False),
        *_ci_fields("epmq"),
        *_ci_fields("success_rate"),
        *[f for m in METRICS[1:] for f in _ci_fields(m)],
        *_ci_fields("bt_rating"),
        pa.field("n_cases", pa.int64(), nullable=False),
        pa.field("n_episodes", pa.int64(), nullable=False),
        # Share of the episodes ended because the simulated user's output stayed invalid: a
        # high value means the run measured the simulator, not the subject.
        pa.field("simulator_invalid_rate", pa.float64(), nullable=False),
    ]
)


@dataclass(frozen=True)
class _Episodes:
    """Merged episodes as codes and float arrays (one entry per episode)."""

    subjects: list[str]
    cases: list[str]
    subj: NDArray[np.intp]
    case: NDArray[np.intp]
    case_attr: dict[str, NDArray[Any]]  # per case: category, dominant_axis, difficulty, threshold
    success: NDArray[np.float64]
    metrics: NDArray[np.float64]  # (n_episodes, len(METRICS))
    simulator_invalid: NDArray[np.float64]  # 1.0 where the episode stopped on simulator_invalid
    run_of: NDArray[np.intp]  # index of the episode's run
    row_in_run: NDArray[np.intp]  # its row in that run's scores


def build_leaderboard(
    run_dirs: Sequence[Path], *, n_boot: int = 2000, seed: int = 0, force: bool = False
) -> pa.Table:
    """Merge runs into one leaderboard table with provenance in its schema metadata."""
    if not run_dirs:
        raise InputError("leaderboard", "runs", "no run directories given")
    if n_boot < 1:
        raise InputError("leaderboard", "n_boot", "must be at least 1")
    runs = [load_run(Path(d), with_paths=True) for d in run_dirs]
    forced = check_mergeable(runs, force=force)
    ep = _merge(runs)
    s_n, c_n = len(ep.subjects), len(ep.cases)

    # Per (subject, case) means over seeds; NaN where a subject has no value for a case.
    key = ep.subj * c_n + ep.case
    n_eps = np.bincount(key, minlength=s_n * c_n).reshape(s_n, c_n).astype(np.float64)
    sim_invalid = np.bincount(key, weights=ep.simulator_invalid, minlength=s_n * c_n).reshape(s_n, c_n)
    per_case = np.stack([_cell_mean(key, ep.metrics[:, m], s_n * c_n) for m in range(len(METRICS))])
    per_case = per_case.reshape(len(METRICS), s_n, c_n)
    success = _cell_mean(key, ep.success, s_n * c_n).reshape(s_n, c_n)
    success_eps = np.bincount(key[~np.isnan(ep.success)], minlength=s_n * c_n).reshape(
        s_n, c_n
    ).astype(np.float64)

    families = _partitions(ep)
    # Columns ordered metric-major: column m * s_n + s.
    values = per_case.reshape(len(METRICS) * s_n, c_n).T
    estimates = bootstrap_case_means(
        values, [codes for codes, _ in families.values()], n_boot=n_boot, seed=seed, ci=CI
    )
    columns: dict[str, list[Any]] = {f.name: [] for f in LEADERBOARD_SCHEMA}
    for (family, (codes, labels)), est in zip(families.items(), estimates, strict=True):
        onehot = np.zeros((c_n, len(labels)))
        onehot[np.arange(c_n), codes] = 1.0
        cases_in = (n_eps > 0).astype(np.float64) @ onehot  # (S, strata)
        eps_in = n_eps @ onehot
        sim_invalid_in = sim_invalid @ onehot
        p, p_lo, p_hi = _success_interval(success, success_eps, onehot)
        point, lo, hi = (a.reshape(len(labels), len(METRICS), s_n) for a in
                         (est.point, est.lo, est.hi))
        for k, label in enumerate(labels):
            rows = np.flatnonzero(eps_in[:, k] > 0)
            # Best EPM-Q first; ties (and NaN, sorted last) fall back to subject order.
            sel = rows[np.lexsort((rows, -point[k, 0, rows]))]
            columns["slice_family"] += [family] * sel.size
            columns["slice"] += [label] * sel.size
            columns["subject"] += [ep.subjects[r] for r in sel]
            for r in sel:
                languages = set(ep.case_attr["language"][(n_eps[r] > 0) & (codes == k)].tolist())
                columns["language"].append("+".join(sorted(languages)))
                columns["trackers"].append(trackers_note(languages) or "run")
            for name, arr in (("", p), ("_lo", p_lo), ("_hi", p_hi)):
                columns["success_rate" + name].append(arr[sel, k])
            for i, m in enumerate(METRICS):
                for name, arr in (("", point), ("_lo", lo), ("_hi", hi)):
                    columns[m + name].append(arr[k, i, sel])
            columns["n_cases"].append(cases_in[sel, k])
            columns["n_episodes"].append(eps_in[sel, k])
            columns["simulator_invalid_rate"].append(sim_invalid_in[sel, k] / eps_in[sel, k])

    profile, external = _subject_marks(runs, ep)
    columns["scoring_profile"] = [profile[ep.subjects.index(s)] for s in columns["subject"]]
    columns["external"] = [external[ep.subjects.index(s)] for s in columns["subject"]]
    table = _to_table(columns, _bradley_terry(runs, n_boot, seed))
    meta = build_metadata(
        runs,
        forced_reasons=forced,
        bootstrap={"n": n_boot, "seed": seed, "ci": CI, "unit": "case",
                   "method": "expanded percentile"},
        examples=_examples(runs, ep, table),
    )
    stopped = _sequences(runs)
    if stopped:
        meta[b"emobench.sequential"] = json.dumps(stopped, sort_keys=True).encode()
    return table.replace_schema_metadata(meta)


def _sequences(runs: Sequence[Run]) -> dict[str, Any]:
    """subject -> its EPM-Q confidence sequence, for a run stopped early (run/adaptive.py). The
    bootstrap assumes the cases played were fixed in advance; after a stop chosen from the data
    only the sequence's interval holds, so the leaderboard shows it beside the bootstrap one."""
    out: dict[str, Any] = {}
    for run in runs:
        block = run.manifest.get("adaptive") or {}
        if not block.get("stopped"):
            continue
        for subject, cs in (block.get("subjects") or {}).items():
            out[subject] = {**cs, "run_id": run.run_id, "reason": block.get("reason"),
                            "cases_played": block.get("cases_played"), "calls_saved": block.get("calls_saved_estimate")}
    return out


def _subject_marks(runs: Sequence[Run], ep: _Episodes) -> tuple[list[str], list[bool]]:
    """Per subject: the scoring profile of its rows ("mixed" if several) and whether any run was external."""
    profiles: list[set[str]] = [set() for _ in ep.subjects]
    external = np.zeros(len(ep.subjects), dtype=bool)
    for i, run in enumerate(runs):
        mine = ep.run_of == i
        values = np.array(run.scores.column("scoring_profile").fill_null("emobench").to_pylist(), dtype=object)
        for s, value in set(zip(ep.subj[mine].tolist(), values[ep.row_in_run[mine]].tolist(), strict=True)):
            profiles[s].add(value)
        external[ep.subj[mine]] |= run.external is not None
    return [next(iter(p)) if len(p) == 1 else "mixed" for p in profiles], external.tolist()


def _cell_mean(key: NDArray[np.intp], x: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    ok = ~np.isnan(x)
    total = np.bincount(key[ok], weights=x[ok], minlength=size)
    count = np.bincount(key[ok], minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count


def _success_interval(
    success: NDArray[np.float64], episodes: NDArray[np.float64], onehot: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Mean of per-case success rates per (subject, stratum) with a clustering-aware Wilson CI."""
    ok = ~np.isnan(success)
    x = np.where(ok, success, 0.0)
    n = ok.astype(np.float64) @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (x @ onehot) / n
        var_of_mean = ((x * x) @ onehot - n * p * p) / (n - 1) / n
    lo, hi = wilson_interval(p, effective_trials(p, var_of_mean, n, episodes @ onehot), CI)
    return p, lo, hi


PEOPLE = "people"  # the pooled row of every person who played the subject (`emobench play`)


def _people(tables: Sequence[pa.Table]) -> list[tuple[pa.Table, NDArray[np.intp]]]:
    """Per run, its episodes played by people as the subject, relabelled PEOPLE, with their rows;
    none unless at least two people played (one person's pool is their own row)."""
    humans = [pc.starts_with(t.column("subject").cast(pa.string()), "human:").to_numpy(zero_copy_only=False)
              for t in tables]
    players = {s for t, h in zip(tables, humans, strict=True) for s in np.array(t.column("subject").to_pylist())[h]}
    if len(players) < 2:
        return []
    pooled = []
    for table, human in zip(tables, humans, strict=True):
        rows = np.flatnonzero(human)
        people = table.take(pa.array(rows))
        column = people.schema.get_field_index("subject")
        people = people.set_column(column, "subject", pa.array([PEOPLE] * rows.size, people.schema.field(column).type))
        pooled.append((people, rows))
    return pooled


def _merge(runs: Sequence[Run]) -> _Episodes:
    own = [r.scores for r in runs]
    pooled = _people(own)
    tables = own + [t for t, _ in pooled]
    subjects, subj = _codes(_strings(tables, "subject"))
    cases, case = _codes(_strings(tables, "case_id"))
    seed = np.concatenate([t.column("seed").to_numpy() for t in tables]).astype(np.int64)
    run_of = np.repeat(np.arange(len(runs)), [t.num_rows for t in own])
    n_own = run_of.size
    if pooled:  # pooled rows point at the person's own row of their run
        run_of = np.concatenate([run_of, np.repeat(np.arange(len(runs)), [t.num_rows for t, _ in pooled])])

    order = np.lexsort((seed[:n_own], case[:n_own], subj[:n_own]))
    same = (np.diff(subj[order]) == 0) & (np.diff(case[order]) == 0) & (np.diff(seed[order]) == 0)
    if same.any():
        row = int(order[np.flatnonzero(same)[0] + 1])
        raise InputError(runs[run_of[row]].path / "scores.parquet", "case_id",
                         f"duplicate episode (subject {subjects[subj[row]]!r}, case "
                         f"{cases[case[row]]!r}, seed {seed[row]}) across the merged runs")

    first = np.full(len(cases), -1, dtype=np.intp)
    first[case[::-1]] = np.arange(case.size)[::-1]
    case_attr: dict[str, NDArray[Any]] = {}
    for name in ("category", *SLICE_LEVELS):
        labels, codes = _codes(_strings(tables, name))
        clash = np.flatnonzero(codes != codes[first[case]])
        if clash.size:
            row = int(clash[0])
            raise InputError(runs[run_of[row]].path / "scores.parquet", name,
                             f"case {cases[case[row]]!r} has conflicting values")
        case_attr[name] = np.array(labels, dtype=object)[codes[first]]

    def floats(name: str) -> NDArray[np.float64]:
        return np.concatenate([
            pc.cast(t.column(name), pa.float64()).to_numpy(zero_copy_only=False) for t in tables
        ])

    metrics = np.stack([floats(m) for m in METRICS], axis=1)
    row_in_run = np.concatenate([np.arange(t.num_rows) for t in own] + [rows for _, rows in pooled])
    stops = pa.chunked_array([t.column("stop_reason") for t in tables])
    sim_invalid = pc.equal(stops, "simulator_invalid").to_numpy(zero_copy_only=False)
    return _Episodes(subjects, cases, subj, case, case_attr, floats("success"), metrics,
                     np.nan_to_num(sim_invalid.astype(np.float64)), run_of, row_in_run)


def _strings(tables: Sequence[pa.Table], name: str) -> pa.ChunkedArray:
    chunks = [c for t in tables for c in t.column(name).cast(pa.string()).chunks]
    return pa.chunked_array(chunks, type=pa.string())


def _codes(values: pa.ChunkedArray) -> tuple[list[str], NDArray[np.intp]]:
    """Sorted distinct labels and each row's index into them."""
    enc = values.combine_chunks().dictionary_encode()
    labels = enc.dictionary.to_pylist()
    order = np.argsort(np.array(labels, dtype=object))
    rank = np.empty(len(labels), dtype=np.intp)
    rank[order] = np.arange(len(labels))
    return [labels[i] for i in order], rank[enc.indices.to_numpy()]


def _partitions(ep: _Episodes) -> dict[str, tuple[NDArray[np.intp], list[str]]]:
    """Per family: each case's stratum code and the stratum labels (only non-empty strata)."""
    attr = ep.case_attr
    axis = np.array([SLICE_LEVELS["dominant_axis"].index(a) for a in attr["dominant_axis"]])
    hard = np.isin(attr["difficulty"], CHALLENGING).astype(np.intp)
    defensive = np.isin(attr["threshold"], DEFENSIVE).astype(np.intp)
    raw = {
        "overall": (np.zeros(len(ep.cases), dtype=np.intp), ["all"]),
        "mechanism_stress": (axis * 2 + hard, [f"{a}/{m}" for a in "CAP"
                                               for m in ("routine", "challenging")]),
        "persona_resilience": (axis * 2 + defensive, [f"{a}/{m}" for a in "CAP"
                                                      for m in ("receptive", "defensive")]),
    }
    for name in ("valence", "language"):
        raw[name] = (np.array([SLICE_LEVELS[name].index(v) for v in attr[name]], dtype=np.intp),
                     list(SLICE_LEVELS[name]))
    cats, cat_codes = np.unique(attr["category"].astype(str), return_inverse=True)
    raw["category"] = (cat_codes.astype(np.intp), [str(c) for c in cats])
    out = {}
    for family in FAMILIES:
        codes, labels = raw[family]
        present, compact = np.unique(codes, return_inverse=True)
        out[family] = (compact.astype(np.intp), [labels[i] for i in present])
    return out


def _bradley_terry(runs: Sequence[Run], n_boot: int, seed: int) -> dict[str, tuple[float, ...]]:
    """subject -> (rating, lo, hi) from every run's pairwise comparisons; empty without any."""
    tables = [r.pairwise for r in runs if r.pairwise is not None and r.pairwise.num_rows]
    if not tables:
        return {}
    # Imported here: the pairwise module is optional until a run carries comparisons.
    from emobench.scoring.pairwise import bradley_terry_ci

    df = pa.concat_tables(
        [t.select(["case_id", "subject_a", "subject_b", "winner"]).cast(
            pa.schema([(n, pa.string()) for n in ("case_id", "subject_a", "subject_b", "winner")]))
         for t in tables]
    ).to_pandas()
    bt = bradley_terry_ci(df, n_boot=n_boot, seed=seed, ci=CI)
    return {
        str(row.subject): (float(row.rating), float(row.lo), float(row.hi))
        for row in bt.itertuples(index=False)
    }


def _to_table(columns: dict[str, list[Any]], bt: dict[str, tuple[float, ...]]) -> pa.Table:
    arrays: dict[str, pa.Array] = {}
    for name in ("slice_family", "slice", "subject", "scoring_profile", "language", "trackers"):
        arrays[name] = pa.array(columns[name], pa.string())
    arrays["external"] = pa.array(columns["external"], pa.bool_())
    for name in ("n_cases", "n_episodes"):
        arrays[name] = pa.array(np.concatenate(columns[name]).astype(np.int64))
    overall = np.array(columns["slice_family"]) == "overall"
    for i, suffix in enumerate(("", "_lo", "_hi")):
        rating = [bt[s][i] if ok and s in bt else np.nan
                  for s, ok in zip(columns["subject"], overall, strict=True)]
        columns[f"bt_rating{suffix}"] = [np.array(rating, dtype=np.float64)]
    for field in LEADERBOARD_SCHEMA:
        if field.name not in arrays:
            # from_pandas turns NaN into null, so every reader sees the same missing values.
            values = np.concatenate(columns[field.name]).astype(np.float64)
            arrays[field.name] = pa.array(values, pa.float64(), from_pandas=True)
    return pa.Table.from_arrays([arrays[f.name] for f in LEADERBOARD_SCHEMA],
                                schema=LEADERBOARD_SCHEMA)


def _examples(runs: Sequence[Run], ep: _Episodes, table: pa.Table) -> dict[str, Any]:
    """Per subject, the episode whose EPM-Q is closest to its overall score, with its EPM path."""
    overall = table.filter(pc.equal(table.column("slice_family"), "overall"))
    target = np.full(len(ep.subjects), np.nan)
    for subject, score in zip(overall.column("subject").to_pylist(),
                              overall.column("epmq").to_pylist(), strict=True):
        target[ep.subjects.index(subject)] = np.nan if score is None else score
    gap = np.abs(ep.metrics[:, 0] - target[ep.subj])
    gap = np.where(np.isnan(gap), np.inf, gap)
    order = np.lexsort((gap, ep.subj))  # stable: ties keep the first episode
    firsts = order[np.flatnonzero(np.r_[True, np.diff(ep.subj[order]) != 0])]
    out: dict[str, Any] = {}
    for row in firsts:
        if not np.isfinite(gap[row]):
            continue
        run = runs[ep.run_of[row]]
        rec = run.scores.slice(int(ep.row_in_run[row]), 1).to_pylist()[0]
        out[ep.subjects[ep.subj[row]]] = {
            "run_id": run.run_id,
            "case_id": rec["case_id"],
            "seed": rec["seed"],
            "epmq": rec["epmq"],
            "path": [[round(float(v), 4) for v in pt] for pt in (rec["epm_path"] or [])],
        }
    return out


def write_leaderboard(table: pa.Table, out_dir: Path) -> None:
    """Write leaderboard.parquet into out_dir atomically (the page: emobench.publish.html.write_page)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / "leaderboard.parquet", lambda p: pq.write_table(table, p))


def read_leaderboard(path: Path) -> pa.Table:
    """Read leaderboard.parquet from a file or a directory holding one."""
    path = Path(path)
    file = path / "leaderboard.parquet" if path.is_dir() else path
    if not file.exists():
        raise InputError(file, "", "file not found")
    try:
        return pq.read_table(file)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(file, "", f"unreadable parquet ({exc})") from None
