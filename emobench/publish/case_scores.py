"""Per-case scores: one row per (subject, case), the mean over seeds of every gated score.

`emobench leaderboard build` writes them as cases.parquet next to leaderboard.parquet, so a
published bundle can be the regression gate's baseline: the gate pairs by case, which the
per-slice aggregates in leaderboard.parquet cannot. The schema is explicit and the provenance
(registry, prompt versions, scoring profile, split, config hashes, every subject's roles and
limits) travels as `emobench.*` schema metadata, readable by pyarrow, pandas and duckdb.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import emobench
from emobench.errors import InputError
from emobench.publish.columns import atomic_write
from emobench.publish.runs import METRICS, Run

CASES_FILE = "cases.parquet"
CASES_SCHEMA_VERSION = "3"  # 3: language
CASE_METRICS = ("success", *METRICS)  # success is the case's success rate over its seeds
DEFAULT_SCORING_PROFILE = "emobench"  # runs from before scoring profiles existed
_PREFIX = "emobench."
_KEYS = ("subject", "case_id", "split", "language", "category", "dominant_axis", "difficulty", "threshold", "valence",
         "registry_version", "scoring_profile")

CASES_SCHEMA = pa.schema(
    [
        *[pa.field(k, pa.string(), nullable=False) for k in _KEYS],
        pa.field("n_episodes", pa.int64(), nullable=False),
        pa.field("seeds", pa.list_(pa.int64()), nullable=False),
        *[pa.field(m, pa.float64()) for m in CASE_METRICS],  # null: no episode had a value
        pa.field("run_ids", pa.list_(pa.string()), nullable=False),
    ]
)


def scoring_profile(run: Run) -> str:
    """The run's scoring profile: the score rows' column, else the config's, else the default."""
    path = run.path / "scores.parquet"
    if "scoring_profile" in pq.ParquetFile(path).schema_arrow.names:
        values = pc.unique(pq.read_table(path, columns=["scoring_profile"]).column(0))
        values = values.drop_null().to_pylist()
        if len(values) > 1:
            raise InputError(path, "scoring_profile", f"mixed values {sorted(values)}")
        if values:
            return str(values[0])
    return str((run.manifest.get("config") or {}).get("scoring_profile") or DEFAULT_SCORING_PROFILE)


def _role(role: Any) -> Any:
    """What makes a role's scores comparable: its model and sampling, not its host or label."""
    if isinstance(role, list):
        return [_role(r) for r in role]
    if isinstance(role, dict):
        return {k: role.get(k) for k in ("model", "sampling")}
    return role


def run_provenance(run: Run) -> dict[str, Any]:
    """The facts about a run that decide whether its scores compare with another run's."""
    config = run.manifest.get("config") or {}
    roles = run.manifest.get("roles") or {}
    return {
        "run_ids": [run.run_id],
        "config_hashes": [run.manifest.get("config_hash")],
        "registry_version": run.registry_version,
        "prompt_versions": run.prompt_versions,
        "scoring_profile": scoring_profile(run),
        "split": run.manifest.get("split", config.get("split")),
        "language": run.language,
        "user": _role(roles.get("user")),
        "judges": _role(roles.get("judges")),
        "director": _role(roles.get("director")),
        "max_turns": config.get("max_turns"),
        "min_turns": config.get("min_turns"),
    }


def _merged(values: list[dict[str, Any]]) -> dict[str, Any]:
    """One subject's provenance over its runs: lists concatenated, a value or every distinct one."""
    out: dict[str, Any] = {}
    for key in values[0]:
        if key in ("run_ids", "config_hashes"):
            out[key] = [v for p in values for v in p[key]]
            continue
        distinct: list[Any] = []
        for p in values:
            if p[key] not in distinct:
                distinct.append(p[key])
        out[key] = distinct[0] if len(distinct) == 1 else distinct
    return out


def build_cases(runs: Sequence[Run]) -> pa.Table:
    """Per-case means over seeds of every subject in the runs, with provenance metadata."""
    episodes = pa.concat_tables([_episodes(run) for run in runs])
    metrics = [(m, "mean") for m in CASE_METRICS]
    agg = episodes.group_by(list(_KEYS)).aggregate(
        [*metrics, ("seed", "count"), ("seed", "distinct"), ("run_id", "distinct")]
    )
    agg = agg.sort_by([("subject", "ascending"), ("case_id", "ascending")])
    columns = {
        **{k: agg.column(k) for k in _KEYS},
        "n_episodes": agg.column("seed_count"),
        "seeds": pa.array([sorted(v) for v in agg.column("seed_distinct").to_pylist()]),
        **{m: agg.column(f"{m}_mean") for m in CASE_METRICS},
        "run_ids": pa.array([sorted(v) for v in agg.column("run_id_distinct").to_pylist()]),
    }
    table = pa.Table.from_arrays(
        [columns[f.name].cast(f.type) for f in CASES_SCHEMA], schema=CASES_SCHEMA
    )
    by_subject: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        prov = run_provenance(run)
        for subject in pc.unique(run.scores.column("subject")).to_pylist():
            by_subject.setdefault(str(subject), []).append(prov)
    meta = {
        "cases_schema_version": CASES_SCHEMA_VERSION,
        "emobench_version": emobench.__version__,
        "subjects": {s: _merged(p) for s, p in sorted(by_subject.items())},
    }
    return table.replace_schema_metadata(
        {(_PREFIX + k).encode(): json.dumps(v, sort_keys=True).encode() for k, v in meta.items()}
    )


def _episodes(run: Run) -> pa.Table:
    s = run.scores
    n = s.num_rows
    prov = run_provenance(run)
    cols: dict[str, Any] = {k: s.column(k).cast(pa.string()) for k in _KEYS if k in s.column_names}
    cols["split"] = pa.array([str(prov["split"])] * n, pa.string())
    cols["scoring_profile"] = pa.array([prov["scoring_profile"]] * n, pa.string())
    cols["registry_version"] = pa.array([run.registry_version] * n, pa.string())
    cols["seed"] = s.column("seed").cast(pa.int64())
    cols["run_id"] = pa.array([run.run_id] * n, pa.string())
    for m in CASE_METRICS:
        cols[m] = pc.cast(s.column(m), pa.float64())
    return pa.table(cols)


def write_cases(table: pa.Table, out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / CASES_FILE, lambda p: pq.write_table(table, p))


def read_cases(path: Path) -> tuple[pa.Table, dict[str, Any], Path]:
    """cases.parquet (a file, or a bundle directory holding one): table, metadata, the file."""
    path = Path(path)
    file = path / CASES_FILE if path.is_dir() else path
    if not file.exists():
        hint = (" (a bundle from before per-case scores: rebuild it with emobench leaderboard "
                "build)" if (file.parent / "leaderboard.parquet").exists() else "")
        raise InputError(file, "", "file not found" + hint)
    try:
        pf = pq.ParquetFile(file)
        have = pf.schema_arrow.names
        missing = [f.name for f in CASES_SCHEMA if f.name not in have and f.name != "language"]
        if missing:
            raise InputError(file, missing[0], "column missing")
        table = pf.read(columns=[name for name in CASES_SCHEMA.names if name in have])
        if "language" not in have:  # bundles from before languages are English
            table = table.add_column(CASES_SCHEMA.names.index("language"), CASES_SCHEMA.field("language"),
                                     pa.repeat(pa.scalar("en"), table.num_rows))
    except (OSError, pa.ArrowException) as exc:
        raise InputError(file, "", f"unreadable parquet ({exc})") from None
    raw = table.schema.metadata or {}
    try:
        meta = {k.decode()[len(_PREFIX):]: json.loads(v) for k, v in raw.items()
                if k.decode().startswith(_PREFIX)}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(file, "metadata", f"unreadable emobench metadata ({exc})") from None
    if not isinstance(meta.get("subjects"), dict):
        raise InputError(file, "metadata", "emobench.subjects missing: no provenance to check")
    return table, meta, file
