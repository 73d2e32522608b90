"""One side of the regression gate: a run directory or a published bundle, narrowed to a subject.

Both become the same per-case table (emobench.publish.case_scores) with the subject's
provenance, so the gate pairs and checks them the same way. Scores compare only when language,
registry, prompt versions, scoring profile and split agree; other differences (the simulator's
or judges' model, turn limits) are reported as notes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from emobench.errors import InputError
from emobench.publish.case_scores import CASES_FILE, build_cases, read_cases
from emobench.publish.runs import load_run
from emobench.scoring.validity import REFERENCE_PREFIX

# Provenance that must match for scores to be comparable (the language first: a Chinese run is
# never a baseline for an English one; then the split: it sets the registry version).
REQUIRED = ("language", "split", "registry_version", "prompt_versions", "scoring_profile")
# What a side from before a key existed stands for: bundles before languages are English.
_BEFORE = {"language": "en"}
# Provenance that should match; a difference is shown in the summary.
NOTED = ("user", "judges", "director", "max_turns", "min_turns")


@dataclass(frozen=True)
class GateSide:
    source: str  # what the summary names: a run id, or a bundle's file
    where: Path  # what errors name: the bundle file, or the run directory
    subject: str
    cases: pa.Table  # CASES_SCHEMA rows of this subject, one per case
    provenance: dict[str, Any]


def is_bundle(path: Path) -> bool:
    """A cases.parquet file, or a directory with a published bundle rather than a run."""
    if path.is_file():
        return path.suffix == ".parquet"
    return path.is_dir() and not (path / "manifest.json").exists() and (
        (path / CASES_FILE).exists() or (path / "leaderboard.parquet").exists()
    )


def load_side(path: Path, subject: str | None, option: str) -> GateSide:
    path = Path(path)
    if is_bundle(path):
        table, meta, file = read_cases(path)
        source, where, provenance = str(file), file, meta["subjects"]
    else:
        run = load_run(path)
        table = build_cases([run])
        source, where = run.run_id, run.path
        provenance = read_cases_metadata(table)
    chosen = _subject(sorted(provenance), subject, option, where)
    rows = table.filter(pc.equal(table.column("subject"), chosen))
    ids = rows.column("case_id").to_pylist()
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InputError(where, "case_id", f"case {dup!r} of {chosen!r} appears twice (versions "
                         "mixed in a forced merge); not usable as a gate side")
    return GateSide(source, where, chosen, rows, dict(provenance[chosen]))


def read_cases_metadata(table: pa.Table) -> dict[str, Any]:
    raw = (table.schema.metadata or {}).get(b"emobench.subjects", b"{}")
    return dict(json.loads(raw))


def _subject(subjects: list[str], requested: str | None, option: str, where: Path) -> str:
    if requested is not None:
        if requested not in subjects:
            raise InputError(where, "subject", f"{requested!r} not found; have {subjects}")
        return requested
    # A scripted reference subject (a config's references) is played beside the model, not gated.
    real = [s for s in subjects if not s.startswith(REFERENCE_PREFIX)] or subjects
    if len(real) != 1:
        raise InputError(where, "subject",
                         f"{len(subjects)} subjects {subjects}; choose one with {option}")
    return real[0]


def check_comparable(baseline: GateSide, candidate: GateSide) -> list[str]:
    """Refuse incomparable sides (InputError); return notes on lesser differences."""
    for key in REQUIRED:
        b = baseline.provenance.get(key, _BEFORE.get(key))
        c = candidate.provenance.get(key, _BEFORE.get(key))
        for side, value in ((baseline, b), (candidate, c)):
            if isinstance(value, list):
                raise InputError(side.where, key, f"subject {side.subject!r} mixes runs with "
                                 f"different {key}; not usable as a gate side")
        if b != c:
            raise InputError(candidate.where, key, f"{_show(key, c)} differs from the "
                             f"baseline's {_show(key, b)}; scores are not comparable")
    notes = []
    for key in NOTED:
        b, c = baseline.provenance.get(key), candidate.provenance.get(key)
        if b != c:
            notes.append(f"{key} differs: baseline {_show(key, b)}, candidate {_show(key, c)}")
    return notes


def _show(key: str, value: Any) -> str:
    if key == "prompt_versions" and isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {str(v)[:10]}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, str) and len(value) > 16:
        return repr(value[:12])
    if isinstance(value, dict) and "model" in value:
        return f"{value['model']} {value.get('sampling') or ''}".strip()
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return "[" + ", ".join(_show(key, v) for v in value) + "]"
    return repr(value)
