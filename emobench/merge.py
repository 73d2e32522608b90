"""Combine shard run directories (``--shard i/n``) into one run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emobench.errors import InputError
from emobench.rundir import RunDir, append_line, whole_lines


def merge_runs(sources: list[Path], out: Path, *, force: bool = False) -> dict[str, Any]:
    """Write ``out`` with every episode of ``sources`` once; returns counts for the summary.

    Shards must share the config hash and registry version (unless forced); an episode key
    found in two shards must be the same episode, so a duplicate is kept once.
    """
    if not sources:
        raise InputError("merge", "RUN_DIR", "no run directories given")
    dirs = [RunDir(path) for path in sources]
    manifests = [rd.read_manifest() for rd in dirs]
    first = manifests[0]
    for rd, info in zip(dirs[1:], manifests[1:], strict=True):
        for field in ("config_hash", "registry_version", "prompt_versions"):
            if info.get(field) != first.get(field) and not force:
                raise InputError(rd.manifest, field, f"differs from {dirs[0].manifest}; pass --force to merge anyway")
    target = RunDir(out)
    if target.manifest.exists():
        raise InputError(out, "", "output run directory already exists")
    target.create()
    seen: set[str] = set()
    duplicates = 0
    for rd in dirs:
        for episode in rd.read_episodes():
            if episode.key in seen:
                duplicates += 1
                continue
            seen.add(episode.key)
            target.append_episode(episode)
        for _, line in whole_lines(rd.faults):  # every shard's faults count in the merged run
            append_line(target.faults, line.rstrip(b"\n"))
    merged = {**first, "run_id": out.name, "shard": None, "merged_from": [str(p) for p in sources], "forced": force}
    target.write_json(target.manifest, merged)
    return {"episodes": len(seen), "duplicates": duplicates, "sources": len(sources)}
