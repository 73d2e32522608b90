"""Read a run directory (docs/method.md §7) for publishing: manifest, scores, optional pairwise, report
and validity.json.

Every problem is an InputError naming the file and the field, so the CLI prints one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from emobench.errors import InputError

# Score columns publish reads; everything else in scores.parquet is left on disk.
METRICS = ("epmq", "epmq_empa", "final_meter", "empathy", "humanlikeness", "persona_adaptation", "coherence")
# Columns that runs written before them lack, with the value they stand for there: every
# first-edition case is about distress; runs before scoring profiles used the emobench one.
_OPTIONAL = {
    "epmq_empa": pa.scalar(None, pa.float64()),
    "scoring_profile": pa.scalar("emobench"),
    "valence": pa.scalar("negative"),
    "language": pa.scalar("en"),  # runs before languages played English cases
    "trackers_absent": pa.scalar(None, pa.string()),
}
SLICE_LEVELS: dict[str, tuple[str, ...]] = {
    "dominant_axis": ("C", "A", "P"),
    "difficulty": ("easy", "medium", "hard", "very_hard"),
    "threshold": ("low", "medium", "high"),
    "valence": ("negative", "mixed", "positive"),
    "language": ("en", "zh"),
}
SCORE_COLUMNS = (
    "subject", "case_id", "seed", "category", "dominant_axis", "difficulty", "threshold", "valence",
    "success", *METRICS, "registry_version", "stop_reason", "scoring_profile", "language", "trackers_absent",
)
_MANIFEST_KEYS = ("run_id", "registry_version", "prompt_versions", "roles")
_PAIRWISE_COLUMNS = ("case_id", "subject_a", "subject_b", "winner")


@dataclass(frozen=True)
class Run:
    path: Path
    manifest: dict[str, Any]
    scores: pa.Table  # SCORE_COLUMNS, plus epm_path when asked for
    pairwise: pa.Table | None
    report: dict[str, Any] | None
    validity: dict[str, Any] | None = None  # validity.json, where `emobench validate` wrote one

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    @property
    def registry_version(self) -> str:
        return str(self.manifest["registry_version"])

    @property
    def prompt_versions(self) -> dict[str, str]:
        return dict(self.manifest["prompt_versions"])

    @property
    def language(self) -> str:
        """The language of the run's cases ("en+zh" would name a mix; a run plays one split)."""
        return "+".join(sorted(pc.unique(self.scores.column("language")).to_pylist()))

    @property
    def external(self) -> dict[str, Any] | None:
        """Where an imported run came from (e.g. EMPA's recorded runs); None for a run of our own."""
        value = self.manifest.get("external")
        return dict(value) if isinstance(value, dict) else None


def load_run(run_dir: Path, *, with_paths: bool = False) -> Run:
    """Load and validate one run directory. with_paths also reads the epm_path column."""
    if not run_dir.is_dir():
        raise InputError(run_dir, "", "run directory not found")
    man = _read_json(run_dir / "manifest.json", required=True)
    assert man is not None
    for key in _MANIFEST_KEYS:
        if key not in man:
            raise InputError(run_dir / "manifest.json", key, "missing")
    if not isinstance(man["prompt_versions"], dict):
        raise InputError(run_dir / "manifest.json", "prompt_versions", "must be an object")
    columns = [*SCORE_COLUMNS, "epm_path"] if with_paths else list(SCORE_COLUMNS)
    scores = _read_parquet(run_dir / "scores.parquet", columns, required=True)
    assert scores is not None
    _validate_scores(run_dir / "scores.parquet", scores, str(man["registry_version"]))
    pairwise = _read_parquet(run_dir / "pairwise.parquet", list(_PAIRWISE_COLUMNS))
    report = _read_json(run_dir / "report.json")
    validity = _read_json(run_dir / "validity.json")
    # `emobench validate RUN --judge-check` / `--fidelity-replay -o RUN/validity.json` wrote them beside the run's report
    for key in ("judge_check", "judge_check_esconv", "fidelity_replay"):
        block = (validity or {}).get(key)
        if block is not None:
            report = {**(report or {}), key: block}
    return Run(run_dir, man, scores, pairwise, report, validity)


def _read_json(path: Path, *, required: bool = False) -> dict[str, Any] | None:
    if not path.exists():
        if required:
            raise InputError(path, "", "file not found")
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, "", f"unreadable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "must be a JSON object")
    return data


def _read_parquet(path: Path, columns: list[str], *, required: bool = False) -> pa.Table | None:
    if not path.exists():
        if required:
            raise InputError(path, "", "file not found")
        return None
    try:
        # ParquetFile, not read_table: no dataset layer, a fraction of the CPU for one file.
        file = pq.ParquetFile(path)
        missing = [c for c in columns if c not in file.schema_arrow.names and c not in _OPTIONAL]
        if missing:
            raise InputError(path, missing[0], "column missing")
        table = file.read(columns=[c for c in columns if c in file.schema_arrow.names])
        for name in columns:
            if name not in table.column_names:
                table = table.append_column(name, pa.repeat(_OPTIONAL[name], table.num_rows))
        if "language" in columns and table.column("language").null_count:
            # rows written without the key, by writers from before languages: English
            where = table.column_names.index("language")
            table = table.set_column(where, "language", pc.fill_null(table.column("language"), "en"))
        return table.select(columns)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(path, "", f"unreadable parquet ({exc})") from None


def _validate_scores(path: Path, scores: pa.Table, registry_version: str) -> None:
    if scores.num_rows == 0:
        raise InputError(path, "", "no episodes")
    for name in ("subject", "case_id", "seed", "category", *SLICE_LEVELS):
        if scores.column(name).null_count:
            raise InputError(path, name, "null values")
    for name, levels in SLICE_LEVELS.items():
        bad = pc.filter(scores.column(name), pc.invert(pc.is_in(scores.column(name),
                                                                pa.array(levels))))
        if len(bad):
            raise InputError(path, name, f"unknown value {bad[0].as_py()!r}; expected {levels}")
    versions = pc.unique(scores.column("registry_version").drop_null()).to_pylist()
    if any(v != registry_version for v in versions):
        raise InputError(path, "registry_version", f"{versions} differs from the manifest's "
                         f"{registry_version!r}")
    for name in ("success", *METRICS):
        if not (pa.types.is_floating(scores.schema.field(name).type)
                or pa.types.is_boolean(scores.schema.field(name).type)
                or pa.types.is_integer(scores.schema.field(name).type)):
            raise InputError(path, name, f"not numeric ({scores.schema.field(name).type})")
