"""Merge compatibility checks and the provenance stored in the leaderboard's schema metadata.

Each metadata value is JSON under an ``emobench.<key>`` name, so any parquet reader (pyarrow,
duckdb's parquet_kv_metadata, polars) can recover it without emobench.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

import emobench
from emobench.errors import InputError
from emobench.publish.runs import Run
from emobench.trackers.languages import trackers_note

LEADERBOARD_SCHEMA_VERSION = "3"  # 2: epmq_empa, scoring_profile, external; 3: language, trackers
_PREFIX = "emobench."
# What a published role keeps: endpoints are left out because they are often private hosts.
_ROLE_FIELDS = ("label", "model", "sampling")


def merge_conflicts(runs: Sequence[Run]) -> list[str]:
    """Reasons the runs are not comparable: registry, prompt versions or split differ.

    An imported run (another benchmark's cases and prompts) is never comparable in that sense;
    it stands beside the others marked external, so it is left out of these checks. Runs of
    different languages play different libraries and templates by design: each language's runs
    are checked among themselves, and the leaderboard keeps them apart in its language slice.
    """
    reasons: list[str] = []
    by_language: dict[str, list[Run]] = {}
    for run in runs:
        if run.external is None:
            by_language.setdefault(run.language, []).append(run)
    for own in by_language.values():
        reasons += _conflicts(own)
    return reasons


def _conflicts(own: list[Run]) -> list[str]:
    reasons: list[str] = []
    first = own[0]
    for run in own[1:]:
        if run.registry_version != first.registry_version:
            reasons.append(
                f"registry_version {run.registry_version!r} in {run.run_id} differs from "
                f"{first.registry_version!r} in {first.run_id}"
            )
        if run.prompt_versions != first.prompt_versions:
            keys = sorted(set(run.prompt_versions) | set(first.prompt_versions))
            diff = [k for k in keys if run.prompt_versions.get(k) != first.prompt_versions.get(k)]
            reasons.append(
                f"prompt_versions differ between {first.run_id} and {run.run_id} "
                f"({', '.join(diff)})"
            )
        if run.manifest.get("split") != first.manifest.get("split"):
            reasons.append(
                f"split {run.manifest.get('split')!r} in {run.run_id} differs from "
                f"{first.manifest.get('split')!r} in {first.run_id}"
            )
    return reasons


def check_mergeable(runs: Sequence[Run], *, force: bool) -> list[str]:
    """Refuse incomparable runs unless forced; returns the reasons a forced merge overrode."""
    ids = [r.run_id for r in runs]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise InputError(runs[ids.index(dup)].path / "manifest.json", "run_id",
                         f"run {dup!r} given twice")
    reasons = merge_conflicts(runs)
    if reasons and not force:
        where = runs[-1].path / "manifest.json"
        raise InputError(where, "", f"cannot merge: {reasons[0]} (use --force to merge anyway)")
    return reasons


def _roles(manifest: dict[str, Any]) -> dict[str, Any]:
    def keep(role: Any) -> Any:
        if isinstance(role, list):
            return [keep(r) for r in role]
        if isinstance(role, dict):
            return {k: role[k] for k in _ROLE_FIELDS if k in role}
        return role

    roles = manifest.get("roles", {})
    return {name: keep(role) for name, role in roles.items()} if isinstance(roles, dict) else {}


def _common(values: list[Any]) -> Any:
    """The shared value, or every distinct value when a forced merge mixed them."""
    distinct: list[Any] = []
    for v in values:
        if v not in distinct:
            distinct.append(v)
    return distinct[0] if len(distinct) == 1 else distinct


def build_metadata(
    runs: Sequence[Run],
    *,
    forced_reasons: list[str],
    bootstrap: dict[str, Any],
    examples: dict[str, Any],
) -> dict[bytes, bytes]:
    """Schema metadata: provenance, plus the example paths and reliability the page shows."""
    meta: dict[str, Any] = {
        "schema_version": LEADERBOARD_SCHEMA_VERSION,
        "registry_version": _common([r.registry_version for r in runs]),
        "prompt_versions": _common([r.prompt_versions for r in runs]),
        "roles": {r.run_id: _roles(r.manifest) for r in runs},
        "emobench_version": emobench.__version__,
        "source_runs": [
            {
                "run_id": r.run_id,
                "config_hash": r.manifest.get("config_hash"),
                "registry_version": r.registry_version,
                "split": r.manifest.get("split"),
                "emobench_version": r.manifest.get("emobench_version"),
                "git_sha": r.manifest.get("git_sha"),
                "created_at": r.manifest.get("created_at"),
            }
            for r in runs
        ],
        "forced": bool(forced_reasons),
        "forced_reasons": forced_reasons,
        "bootstrap": bootstrap,
        "examples": examples,
        "reliability": {r.run_id: r.report for r in runs},
        "fidelity": {r.run_id: r.validity["fidelity"] for r in runs if r.validity and "fidelity" in r.validity},
        "external_runs": {r.run_id: r.external for r in runs if r.external is not None},
        "languages": {r.run_id: r.language for r in runs},
        "trackers": trackers_note({lang for r in runs for lang in r.language.split("+")}) or "run",
    }
    return {(_PREFIX + k).encode(): json.dumps(v, sort_keys=True).encode() for k, v in meta.items()}


def read_metadata(schema: pa.Schema) -> dict[str, Any]:
    """Decode the emobench.* schema metadata back into Python values."""
    raw = schema.metadata or {}
    return {
        k.decode()[len(_PREFIX):]: json.loads(v)
        for k, v in raw.items()
        if k.decode().startswith(_PREFIX)
    }
